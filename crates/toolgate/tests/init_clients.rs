//! `toolgate init` / `toolgate unwrap` against real files in a fake `HOME` and
//! project directory, with golden files under `tests/clients/` (repo root).
//!
//! Golden files use placeholders: `@TOOLGATE@` (the binary's canonical path),
//! `@PROJECT@` (the fake project directory) and `@POLICY@` (the policy file), all
//! JSON-escaped. Run with `TOOLGATE_BLESS=1` to rewrite the expected files.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stdout
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;

const TIMEOUT: Duration = Duration::from_secs(60);

fn golden(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/clients")
        .join(rel)
}

/// A JSON string's content (without the quotes).
fn json_escaped(s: &str) -> String {
    let quoted = serde_json::Value::String(s.to_owned()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

struct Fake {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    xdg: PathBuf,
    project: PathBuf,
    policy: PathBuf,
}

impl Fake {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let home = root.join("home");
        let xdg = root.join("xdg");
        let project = root.join("project");
        for dir in [&home, &xdg, &project] {
            fs::create_dir_all(dir).unwrap();
        }
        let policy = root.join("policy.yaml");
        fs::write(&policy, "version: 1\n").unwrap();
        Fake {
            _tmp: tmp,
            home,
            xdg,
            project,
            policy,
        }
    }

    fn exe() -> String {
        let path = assert_cmd::cargo::cargo_bin("toolgate");
        path.canonicalize().unwrap().to_str().unwrap().to_owned()
    }

    /// Replaces the placeholders of a golden file.
    fn fill(&self, text: &str) -> String {
        text.replace("@TOOLGATE@", &json_escaped(&Self::exe()))
            .replace("@PROJECT@", &json_escaped(self.project.to_str().unwrap()))
            .replace("@POLICY@", &json_escaped(self.policy.to_str().unwrap()))
    }

    /// The inverse of `fill`, for blessing.
    fn unfill(&self, text: &str) -> String {
        text.replace(&json_escaped(&Self::exe()), "@TOOLGATE@")
            .replace(&json_escaped(self.policy.to_str().unwrap()), "@POLICY@")
            .replace(&json_escaped(self.project.to_str().unwrap()), "@PROJECT@")
    }

    /// Copies a golden input to `dest` (placeholders filled) and returns the text.
    fn place(&self, golden_input: &str, dest: &Path) -> String {
        let text = self.fill(&fs::read_to_string(golden(golden_input)).unwrap());
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::write(dest, &text).unwrap();
        text
    }

    /// Compares `file` with a golden expected file (or rewrites it when blessing).
    fn assert_golden(&self, file: &Path, expected: &str) {
        let actual = fs::read_to_string(file).unwrap();
        if std::env::var_os("TOOLGATE_BLESS").is_some() {
            fs::write(golden(expected), self.unfill(&actual)).unwrap();
            return;
        }
        let want = self.fill(&fs::read_to_string(golden(expected)).unwrap());
        assert_eq!(actual, want, "{} differs from {expected}", file.display());
    }

    fn toolgate(&self, args: &[&str]) -> Command {
        let mut cmd = Command::cargo_bin("toolgate").unwrap();
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.xdg)
            .current_dir(&self.project)
            .args(args)
            .write_stdin("")
            .timeout(TIMEOUT);
        cmd
    }

    fn desktop_config(&self) -> PathBuf {
        if cfg!(target_os = "macos") {
            self.home
                .join("Library/Application Support/Claude/claude_desktop_config.json")
        } else {
            self.xdg.join("Claude/claude_desktop_config.json")
        }
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(mut cmd: Command) -> Run {
    let out = cmd.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn backup(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.toolgate.bak", path.display()))
}

/// init → expected golden file → unwrap → the original bytes.
fn round_trip(fake: &Fake, client: &str, files: &[(&str, &Path, &str)], extra: &[&str]) {
    round_trip_to(fake, client, files, extra, None);
}

/// init → expected golden file → unwrap → the original bytes (or, when the input
/// had entries wrapped before, the `after_unwrap` golden file).
fn round_trip_to(
    fake: &Fake,
    client: &str,
    files: &[(&str, &Path, &str)],
    extra: &[&str],
    after_unwrap: Option<&str>,
) {
    let originals: Vec<String> = files
        .iter()
        .map(|(input, dest, _)| fake.place(input, dest))
        .collect();
    let mut args = vec!["init", "--client", client, "--yes"];
    args.extend_from_slice(extra);
    fake.toolgate(&args).assert().success();
    for ((_, dest, expected), original) in files.iter().zip(&originals) {
        fake.assert_golden(dest, expected);
        assert_eq!(&fs::read_to_string(backup(dest)).unwrap(), original);
    }
    fake.toolgate(&["unwrap", "--client", client, "--yes"])
        .assert()
        .success();
    for ((_, dest, _), original) in files.iter().zip(&originals) {
        match after_unwrap {
            Some(expected) => fake.assert_golden(dest, expected),
            None => assert_eq!(
                &fs::read_to_string(dest).unwrap(),
                original,
                "{}",
                dest.display()
            ),
        }
    }
}

#[test]
fn claude_desktop_round_trip() {
    let fake = Fake::new();
    let config = fake.desktop_config();
    // The input has an entry wrapped before (`already`): init leaves it alone,
    // unwrap restores it too.
    round_trip_to(
        &fake,
        "claude-desktop",
        &[(
            "claude-desktop/input.json",
            &config,
            "claude-desktop/expected_init.json",
        )],
        &[],
        Some("claude-desktop/expected_unwrap.json"),
    );
}

#[test]
fn claude_code_project_user_and_local_scopes() {
    let fake = Fake::new();
    let mcp = fake.project.join(".mcp.json");
    let user = fake.home.join(".claude.json");
    round_trip(
        &fake,
        "claude-code",
        &[
            (
                "claude-code/mcp.json",
                &mcp,
                "claude-code/expected_init_mcp.json",
            ),
            (
                "claude-code/claude.json",
                &user,
                "claude-code/expected_init_claude.json",
            ),
        ],
        &[],
    );
}

#[test]
fn cursor_jsonc_with_policy() {
    let fake = Fake::new();
    let config = fake.project.join(".cursor/mcp.json");
    let policy = fake.policy.to_str().unwrap().to_owned();
    round_trip(
        &fake,
        "cursor",
        &[("cursor/input.json", &config, "cursor/expected_init.json")],
        &["--policy", &policy],
    );
}

#[test]
fn cursor_user_scope_is_found_too() {
    let fake = Fake::new();
    let config = fake.home.join(".cursor/mcp.json");
    fake.place("cursor/input.json", &config);
    fake.toolgate(&["init", "--client", "cursor", "--yes"])
        .assert()
        .success();
    assert!(
        fs::read_to_string(&config)
            .unwrap()
            .contains("x-toolgate-upstream")
    );
}

#[test]
fn vscode_round_trip() {
    let fake = Fake::new();
    let config = fake.project.join(".vscode/mcp.json");
    round_trip(
        &fake,
        "vscode",
        &[("vscode/input.json", &config, "vscode/expected_init.json")],
        &[],
    );
}

#[test]
fn vscode_server_selection() {
    let fake = Fake::new();
    let config = fake.project.join(".vscode/mcp.json");
    let original = fake.place("vscode/input.json", &config);
    fake.toolgate(&["init", "--client", "vscode", "--server", "fetch", "--yes"])
        .assert()
        .success();
    fake.assert_golden(&config, "vscode/expected_init_fetch.json");
    // Unwrapping another (unwrapped) server changes nothing.
    let out = run(fake.toolgate(&[
        "unwrap",
        "--client",
        "vscode",
        "--server",
        "Perplexity",
        "--yes",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("nothing to change"), "{}", out.stdout);
    fake.toolgate(&["unwrap", "--client", "vscode", "--server", "fetch", "--yes"])
        .assert()
        .success();
    assert_eq!(fs::read_to_string(&config).unwrap(), original);
}

#[test]
fn vscode_user_profile_is_found() {
    let fake = Fake::new();
    let config = if cfg!(target_os = "macos") {
        fake.home
            .join("Library/Application Support/Code/User/mcp.json")
    } else {
        fake.xdg.join("Code/User/mcp.json")
    };
    fake.place("vscode/input.json", &config);
    fake.toolgate(&["init", "--client", "vscode", "--yes"])
        .assert()
        .success();
    fake.assert_golden(&config, "vscode/expected_init.json");
}

#[test]
fn windsurf_round_trip() {
    let fake = Fake::new();
    let config = fake.home.join(".codeium/windsurf/mcp_config.json");
    round_trip(
        &fake,
        "windsurf",
        &[(
            "windsurf/input.json",
            &config,
            "windsurf/expected_init.json",
        )],
        &[],
    );
}

#[test]
fn unknown_server_is_an_error() {
    let fake = Fake::new();
    let config = fake.project.join(".vscode/mcp.json");
    let original = fake.place("vscode/input.json", &config);
    let out = run(fake.toolgate(&["init", "--client", "vscode", "--server", "nope", "--yes"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("no server named `nope`"),
        "{}",
        out.stderr
    );
    assert_eq!(fs::read_to_string(&config).unwrap(), original);
}

#[test]
fn remote_entries_are_listed_with_the_reason() {
    let fake = Fake::new();
    let config = fake.project.join(".mcp.json");
    fake.place("claude-code/mcp.json", &config);
    let out = run(fake.toolgate(&["init", "--client", "claude-code", "--dry-run"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    for line in [
        "skip     notion in mcpServers: remote server (`type: http`)",
        "skip     asana in mcpServers: remote server (`type: sse`)",
        "wrap     memory in mcpServers\n",
        "wrap     playwright in mcpServers\n",
    ] {
        assert!(
            out.stdout.contains(line),
            "{line:?} not in:\n{}",
            out.stdout
        );
    }
}

#[test]
fn second_init_changes_nothing() {
    let fake = Fake::new();
    let config = fake.desktop_config();
    fake.place("claude-desktop/input.json", &config);
    fake.toolgate(&["init", "--client", "claude-desktop", "--yes"])
        .assert()
        .success();
    let once = fs::read_to_string(&config).unwrap();
    let backup_once = fs::read_to_string(backup(&config)).unwrap();
    let out = run(fake.toolgate(&["init", "--client", "claude-desktop", "--yes"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("nothing to change"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("keep     filesystem in mcpServers: already wrapped"),
        "{}",
        out.stdout
    );
    assert_eq!(fs::read_to_string(&config).unwrap(), once);
    assert_eq!(fs::read_to_string(backup(&config)).unwrap(), backup_once);
}

#[test]
fn without_a_terminal_nothing_is_written() {
    let fake = Fake::new();
    let config = fake.desktop_config();
    let original = fake.place("claude-desktop/input.json", &config);
    let out = run(fake.toolgate(&["init", "--client", "claude-desktop"]));
    assert_eq!(out.code, 1, "{}", out.stderr);
    let wrapped_command = format!("+      \"command\": \"{}\",", json_escaped(&Fake::exe()));
    assert!(out.stdout.contains(&wrapped_command), "{}", out.stdout);
    assert!(
        out.stdout.contains("-      \"command\": \"npx\","),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("stdin is not a terminal"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--yes"), "{}", out.stderr);
    assert_eq!(fs::read_to_string(&config).unwrap(), original);
    assert!(!backup(&config).exists());
}

#[test]
fn dry_run_shows_the_diff_and_exits_zero() {
    let fake = Fake::new();
    let config = fake.desktop_config();
    let original = fake.place("claude-desktop/input.json", &config);
    let out = run(fake.toolgate(&["init", "--client", "claude-desktop", "--dry-run", "--yes"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("-      \"command\": \"npx\","),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("dry run: nothing was written"),
        "{}",
        out.stdout
    );
    assert_eq!(fs::read_to_string(&config).unwrap(), original);
    assert!(!backup(&config).exists());
}

#[test]
fn explicit_config_wraps_every_project() {
    let fake = Fake::new();
    let config = fake.home.join("elsewhere.json");
    let original = fake.place("claude-code/claude.json", &config);
    let out = run(fake.toolgate(&["init", "--config", config.to_str().unwrap(), "--yes"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("wrap     other in projects[\"/somewhere/else\"].mcpServers"),
        "{}",
        out.stdout
    );
    fake.toolgate(&["unwrap", "--config", config.to_str().unwrap(), "--yes"])
        .assert()
        .success();
    assert_eq!(fs::read_to_string(&config).unwrap(), original);
}

#[test]
fn no_config_found_is_an_error() {
    let fake = Fake::new();
    let out = run(fake.toolgate(&["init", "--client", "windsurf", "--yes"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("no MCP client configuration found"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(".codeium/windsurf/mcp_config.json"),
        "{}",
        out.stderr
    );
}

#[test]
fn discovery_without_client_finds_every_file() {
    let fake = Fake::new();
    let desktop = fake.desktop_config();
    let windsurf = fake.home.join(".codeium/windsurf/mcp_config.json");
    let a = fake.place("claude-desktop/expected_unwrap.json", &desktop);
    let b = fake.place("windsurf/input.json", &windsurf);
    fake.toolgate(&["init", "--yes"]).assert().success();
    assert_ne!(fs::read_to_string(&desktop).unwrap(), a);
    assert_ne!(fs::read_to_string(&windsurf).unwrap(), b);
    fake.toolgate(&["unwrap", "--yes"]).assert().success();
    assert_eq!(fs::read_to_string(&desktop).unwrap(), a);
    assert_eq!(fs::read_to_string(&windsurf).unwrap(), b);
}
