//! The harness of the `hook_*` tests: `toolgate hook <client>` run as a client runs it (JSON
//! on stdin, a fresh process per event) against a real broker in a temp directory, and
//! `toolgate wrap` proxies of the same agent session.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; helpers shared by several tests, not every one uses every helper"
)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_testkit::{Peer, wait_until};

pub const LIMIT: Duration = Duration::from_secs(30);
/// The project directory the fixtures name; replaced by a real one.
pub const FIXTURE_PROJECT: &str = "/home/user/my-project";

/// The policy the hook tests decide with (the default packs, `agent-tools` and `email`
/// among them, apply).
pub const POLICY: &str = r#"
version: 1
default: ask
rules:
  - id: protect-secrets
    effect: deny
    operations: [fs.read, fs.write, fs.delete]
    resources: ["**/.env", "**/*.env", "${home}/.ssh/**"]
  - id: deny-rm
    effect: deny
    operations: [shell.exec]
    executables: [rm]
  - id: allow-workspace-read
    effect: allow
    operations: [fs.read]
    resources: ["${workspace}/**"]
  - id: allow-tests
    effect: allow
    operations: [shell.exec]
    commands:
      - [npm, test]
  - id: allow-curl
    effect: allow
    operations: [shell.exec]
    executables: [curl]
  - id: allow-mail
    effect: allow
    operations: [unknown]
    tools: [send_email, read_email, search_emails]
"#;

/// What one hook process did.
#[derive(Debug)]
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub code: Option<i32>,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }
}

/// A temp directory with a project, a policy and a broker directory.
pub struct World {
    pub dir: tempfile::TempDir,
    pub broker_dir: PathBuf,
}

impl Drop for World {
    fn drop(&mut self) {
        self.stop_broker();
    }
}

impl World {
    pub fn new() -> World {
        World::with_policy(POLICY)
    }

    pub fn with_policy(policy: &str) -> World {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("project")).unwrap();
        std::fs::create_dir_all(base.join("home")).unwrap();
        std::fs::write(base.join("policy.yaml"), policy).unwrap();
        World {
            broker_dir: base.join("b"),
            dir,
        }
    }

    pub fn base(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    pub fn project(&self) -> PathBuf {
        self.base().join("project")
    }

    pub fn policy(&self) -> PathBuf {
        self.base().join("policy.yaml")
    }

    /// `toolgate ARGS` with this world's broker directory and home.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        cmd.args(args)
            .env("TOOLGATE_BROKER_DIR", &self.broker_dir)
            .env("HOME", self.base().join("home"))
            .env_remove("TOOLGATE_LOG");
        cmd
    }

    /// A fixture with the project directory replaced by this world's.
    pub fn fixture(&self, client: &str, name: &str) -> Value {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/hooks")
            .join(client)
            .join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.replace(FIXTURE_PROJECT, self.project().to_str().unwrap());
        serde_json::from_str(&text).unwrap()
    }

    /// Runs `toolgate hook <client> --policy <policy> EXTRA` with `input` on stdin.
    /// `toolgate-hook CLIENT --policy <this world's> EXTRA` (the small executable that
    /// `init --hooks` installs) with `input` on stdin.
    pub fn small_hook(&self, client: &str, input: &Value, extra: &[&str]) -> Run {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate-hook"));
        cmd.arg(client)
            .arg("--policy")
            .arg(self.policy())
            .args(extra)
            .env("TOOLGATE_BROKER_DIR", &self.broker_dir)
            .env("HOME", self.base().join("home"))
            .env_remove("TOOLGATE_LOG");
        self.run(cmd, input.to_string().as_bytes())
    }

    pub fn hook(&self, client: &str, input: &Value, extra: &[&str]) -> Run {
        let mut cmd = self.cmd(&["hook", client]);
        cmd.arg("--policy").arg(self.policy()).args(extra);
        self.run(cmd, input.to_string().as_bytes())
    }

    /// Runs a prepared command with `stdin` and waits for it (bounded).
    pub fn run(&self, mut cmd: Command, stdin: &[u8]) -> Run {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut pipe = child.stdin.take().unwrap();
        let input = stdin.to_vec();
        // A hook may answer (and exit) before reading everything: write from a thread.
        let writer = std::thread::spawn(move || {
            let _ = pipe.write_all(&input);
        });
        let run = wait_output(child);
        let _ = writer.join();
        run
    }

    /// Claude Code's transcript of this world's agent session (in its home, where Claude
    /// Code keeps them).
    pub fn transcript(&self) -> PathBuf {
        let dir = self.base().join("home/.claude/projects/-project");
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("s-1.jsonl")
    }

    /// Appends a prompt to the transcript as Claude Code records what the user typed.
    pub fn typed(&self, text: &str) {
        let line = json!({
            "parentUuid": null, "isSidechain": false, "userType": "external",
            "cwd": self.project(), "sessionId": "s-1", "version": "2.1.12", "gitBranch": "",
            "type": "user", "message": {"role": "user", "content": text},
            "uuid": "u-1", "timestamp": "2026-01-20T11:57:17.716Z"
        });
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.transcript())
            .unwrap();
        writeln!(f, "{line}").unwrap();
    }

    /// A `UserPromptSubmit` of `text` naming this world's transcript.
    pub fn prompt_event(&self, text: &str) -> Value {
        claude(
            &self.project(),
            "UserPromptSubmit",
            json!({"prompt": text, "transcript_path": self.transcript()}),
        )
    }

    /// The pid of the broker running on this world's directory, if any.
    pub fn broker_pid(&self) -> Option<u32> {
        let out = self.cmd(&["status"]).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let at = text.find("reachable (pid ")? + "reachable (pid ".len();
        text.get(at..)?.split(')').next()?.parse().ok()
    }

    /// Stops the broker a hook started (it outlives the hook by design).
    pub fn stop_broker(&self) {
        if let Some(pid) = self.broker_pid() {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            wait_until(LIMIT, || !self.broker_dir.join("broker.sock").exists());
        }
    }

    /// A `toolgate wrap` proxy of server `server` in front of `attack_server --kind KIND
    /// --poison POISON`, joined to agent session `session` (none: its default, the parent
    /// process), initialized and its tools listed.
    pub fn proxy(&self, server: &str, kind: &str, poison: &str, session: Option<&str>) -> Proxy {
        let mut cmd = self.cmd(&["wrap", "--server", server, "--approval", "none"]);
        if let Some(s) = session {
            cmd.args(["--session", s]);
        }
        cmd.arg("--workspace")
            .arg(self.project())
            .arg("--policy")
            .arg(self.policy())
            .arg("--audit")
            .arg(self.base().join(format!("audit-{server}.jsonl")))
            .env(
                "TOOLGATE_PINS_DIR",
                self.base().join(format!("pins-{server}")),
            )
            .arg("--")
            .arg(toolgate_testkit::bin_path("attack_server"))
            .args(["--kind", kind, "--poison", poison]);
        let mut proxy = Proxy {
            peer: Peer::spawn(cmd, false),
        };
        proxy.send(
            json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"hook-test","version":"0"}}}),
        );
        proxy.response(&json!("init"));
        proxy.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        proxy.send(json!({"jsonrpc":"2.0","id":"list","method":"tools/list","params":{}}));
        proxy.response(&json!("list"));
        proxy
    }
}

/// Waits (bounded) for a child and collects its output.
pub fn wait_output(child: Child) -> Run {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx
        .recv_timeout(LIMIT)
        .expect("the hook did not exit in time")
        .unwrap();
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
    }
}

pub struct Proxy {
    pub peer: Peer,
}

impl Proxy {
    pub fn send(&mut self, v: Value) {
        self.peer.send(serde_json::to_vec(&v).unwrap());
    }

    pub fn response(&mut self, id: &Value) -> Value {
        loop {
            let m = self.peer.recv_json();
            if m.get("id") == Some(id) && m.get("method").is_none() {
                return m;
            }
        }
    }

    pub fn call(&mut self, id: i64, tool: &str, args: Value) -> Value {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                         "params":{"name":tool,"arguments":args}}));
        self.response(&json!(id))
    }
}

/// A Claude Code hook input of `event` in `project` with `extra` members.
pub fn claude(project: &Path, event: &str, extra: Value) -> Value {
    let mut v = json!({
        "session_id": "s-1",
        "transcript_path": "/tmp/transcript.jsonl",
        "cwd": project,
        "permission_mode": "default",
        "hook_event_name": event,
    });
    if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
        o.extend(e);
    }
    v
}

/// A Cursor hook input of `event` in `project` with `extra` members.
pub fn cursor(project: &Path, event: &str, extra: Value) -> Value {
    let mut v = json!({
        "conversation_id": "c-1",
        "generation_id": "g-1",
        "hook_event_name": event,
        "workspace_roots": [project],
    });
    if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
        o.extend(e);
    }
    v
}
