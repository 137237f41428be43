//! The git, fetch, slack, github and gdrive packs against the LIVE `tools/list` of the real
//! servers they describe, at the pinned versions (a pack that drifts from its server would
//! silently lose its contracts):
//!
//! - PyPI `mcp-server-git` / `mcp-server-fetch`, pinned with every dependency in
//!   `tests/requirements.txt` and installed into `tests/.venv`;
//! - npm `@modelcontextprotocol/server-slack` / `server-github` / `server-gdrive`, pinned in
//!   `tests/package.json` and installed into `tests/node_modules`.
//!
//! `scripts/test` installs both. Each test starts the server (the npm ones with dummy
//! credentials, which `tools/list` does not use), does the MCP handshake and `tools/list` with
//! every read bounded by [`STEP_TIMEOUT`], checks the recorded version, runs
//! `check_pack_against` on the live tools, and asserts the live listing equals the recorded
//! fixture in `packs_fixtures/`, so the fixtures used by `packs_pypi.rs` and
//! `packs_recorded.rs` stay true. A test skips with a message only when the venv or
//! `node_modules` (or node) is absent and `CI` is not set; with `CI=true` absence fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::print_stderr,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; prints what it ran for the person reading the test output"
)]

use crate::support::packs_check as check;

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use check::{check_pack_against, fixture};
use serde_json::{Value, json};

/// Upper bound for the whole handshake + `tools/list` of one server.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// `None` (after saying why) when `what` is missing locally; a failure when `CI` is set.
fn require(present: bool, what: &str, help: &str) -> Option<()> {
    if present {
        return Some(());
    }
    assert!(
        !in_ci(),
        "{what} is missing but CI=true: the live pack tests must run in CI\nhelp: {help}"
    );
    eprintln!("skipped: no {what} (this live pack test needs it: {help})");
    None
}

/// A PyPI server's console script in `tests/.venv`, checking that `tests/requirements.txt`
/// pins `package==version`.
fn venv_server(package: &str, version: &str) -> Option<PathBuf> {
    let reqs = std::fs::read_to_string(repo_root().join("tests/requirements.txt")).unwrap();
    let pin = format!("{package}=={version}");
    assert!(
        reqs.lines().any(|l| l.trim() == pin),
        "tests/requirements.txt does not pin `{pin}`"
    );
    let exe = repo_root().join("tests/.venv/bin").join(package);
    require(
        exe.is_file(),
        &format!("`{}`", exe.display()),
        "run `scripts/test`, which installs tests/requirements.txt into tests/.venv",
    )?;
    Some(exe)
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// `node` and the entry point of `@modelcontextprotocol/<name>` in `tests/node_modules`,
/// checking that both `tests/package.json` and the installed package are at `version`.
fn npm_server(name: &str, version: &str) -> Option<(PathBuf, PathBuf)> {
    let package = format!("@modelcontextprotocol/{name}");
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("tests/package.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["dependencies"][&package], version,
        "tests/package.json does not pin `{package}` at {version}"
    );
    let node = find_on_path("node");
    require(
        node.is_some(),
        "`node`",
        "install Node.js ≥ 18 and run `scripts/test`",
    )?;
    let dir = repo_root().join("tests/node_modules").join(&package);
    let entry = dir.join("dist/index.js");
    require(
        entry.is_file(),
        &format!("`{}`", entry.display()),
        "run `scripts/test`, which runs `npm ci --prefix tests`",
    )?;
    let installed: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).unwrap()).unwrap();
    assert_eq!(
        installed["version"], version,
        "installed `{package}` is not the pinned version\nhelp: run `npm ci --prefix tests`"
    );
    Some((node?, entry))
}

/// The server process, killed (and reaped) when dropped, also when a test fails.
struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    deadline: Instant,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn spawn(program: &Path, args: &[OsString], env: &[(&str, OsString)], cwd: &Path) -> Self {
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{}`: {e}", program.display()));
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        // Ends at EOF, i.e. when the server exits or is killed.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
            deadline: Instant::now() + STEP_TIMEOUT,
        }
    }

    fn send(&mut self, msg: &Value) {
        writeln!(self.stdin, "{msg}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The response with this `id`, skipping notifications and log lines.
    fn response(&mut self, id: u64) -> Value {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no response to request {id} within {STEP_TIMEOUT:?}")
                }
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "the server closed stdout before answering request {id} (exit: {:?})",
                    self.child.try_wait()
                ),
            };
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if msg["id"] == id {
                assert!(msg.get("error").is_none(), "request {id} failed: {msg}");
                return msg["result"].clone();
            }
        }
    }

    /// `initialize`, `notifications/initialized`, `tools/list`: (serverInfo, tools).
    fn tools_list(mut self) -> (Value, Vec<Value>) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "toolgate-packs-live", "version": "0"}
            }}),
        );
        let init = self.response(1);
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        self.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
        let list = self.response(2);
        assert!(
            list.get("nextCursor").is_none_or(Value::is_null),
            "tools/list is paginated; this helper reads one page"
        );
        let tools = list["tools"].as_array().unwrap().clone();
        (init["serverInfo"].clone(), tools)
    }
}

/// The live listing equals the recorded fixture, server info included.
fn assert_matches_fixture(fixture_name: &str, server_info: &Value, tools: &[Value]) {
    let f = fixture(fixture_name);
    assert_eq!(
        server_info, &f["server"],
        "serverInfo differs from {fixture_name}"
    );
    let names = |ts: &[Value]| -> Vec<String> {
        ts.iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let recorded = f["tools"].as_array().unwrap();
    assert_eq!(
        names(tools),
        names(recorded),
        "tool names differ from {fixture_name}"
    );
    for (live, rec) in tools.iter().zip(recorded) {
        assert_eq!(
            live, rec,
            "tool `{}` differs from {fixture_name}\nhelp: re-capture the fixture (capture_tools.py)",
            live["name"]
        );
    }
}

#[test]
fn packs_live_git_matches_mcp_server_git() {
    let version = "2026.10.19";
    let Some(exe) = venv_server("mcp-server-git", version) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let status = Command::new("git")
        .args(["init", "-q"])
        .arg(&repo)
        .stdin(Stdio::null())
        .status()
        .expect("`git` is needed to make the repository mcp-server-git serves");
    assert!(status.success(), "git init failed: {status}");
    let args = [OsString::from("--repository"), repo.into_os_string()];
    let (info, tools) = Server::spawn(&exe, &args, &[], dir.path()).tools_list();
    assert_eq!(info["version"], version);
    check_pack_against("git", version, &tools, &[]);
    assert_matches_fixture("mcp-server-git-2026.10.19.tools.json", &info, &tools);
}

#[test]
fn packs_live_fetch_matches_mcp_server_fetch() {
    let version = "2026.10.24";
    let Some(exe) = venv_server("mcp-server-fetch", version) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (info, tools) = Server::spawn(&exe, &[], &[], dir.path()).tools_list();
    assert_eq!(info["version"], version);
    check_pack_against("fetch", version, &tools, &[]);
    assert_matches_fixture("mcp-server-fetch-2026.10.24.tools.json", &info, &tools);
}

#[test]
fn packs_live_slack_matches_server_slack() {
    let version = "2025.4.25";
    let Some((node, entry)) = npm_server("server-slack", version) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("SLACK_BOT_TOKEN", OsString::from("xoxb-dummy")),
        ("SLACK_TEAM_ID", OsString::from("T000")),
    ];
    let (info, tools) = Server::spawn(&node, &[entry.into()], &env, dir.path()).tools_list();
    // serverInfo.version is the server's own (1.0.0), not the npm version: the pin is checked
    // on the installed package.json above, and serverInfo against the fixture below.
    check_pack_against("slack", version, &tools, check::SLACK_GENERIC);
    assert_matches_fixture("server-slack-2025.4.25.tools.json", &info, &tools);
}

#[test]
fn packs_live_github_matches_server_github() {
    let version = "2025.4.8";
    let Some((node, entry)) = npm_server("server-github", version) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let env = [("GITHUB_PERSONAL_ACCESS_TOKEN", OsString::from("dummy"))];
    let (info, tools) = Server::spawn(&node, &[entry.into()], &env, dir.path()).tools_list();
    check_pack_against("github", version, &tools, check::GITHUB_GENERIC);
    assert_matches_fixture("server-github-2025.4.8.tools.json", &info, &tools);
}

#[test]
fn packs_live_gdrive_matches_server_gdrive() {
    let version = "2025.1.14";
    let Some((node, entry)) = npm_server("server-gdrive", version) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("creds.json");
    std::fs::write(&creds, "{}").unwrap();
    let env = [("GDRIVE_CREDENTIALS_PATH", creds.into_os_string())];
    let (info, tools) = Server::spawn(&node, &[entry.into()], &env, dir.path()).tools_list();
    check_pack_against("gdrive", version, &tools, check::GDRIVE_GENERIC);
    assert_matches_fixture("server-gdrive-2025.1.14.tools.json", &info, &tools);
}
