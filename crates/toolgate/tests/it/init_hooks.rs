//! `toolgate init --hooks`, `toolgate unwrap --hooks` and `toolgate doctor` against real
//! settings files in a fake `HOME` and project directory, through the real binary. Golden
//! files under `tests/clients/hooks/` (repo root) use the placeholders `@HOOK@` (the
//! canonical path of `toolgate-hook`, which the entries run), `@TOOLGATE@` (the `toolgate`
//! binary's) and `@POLICY@` (the policy file), JSON-escaped. Run with
//! `TOOLGATE_BLESS=1` to rewrite the expected files.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stdout,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; prints what it ran for the person reading the test output"
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::{Value, json};

use crate::support::hooks as support;

const TIMEOUT: Duration = Duration::from_secs(60);

fn golden(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/clients/hooks")
        .join(rel)
}

fn json_escaped(s: &str) -> String {
    let quoted = Value::String(s.to_owned()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

struct Fake {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
    policy: PathBuf,
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Fake {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let home = root.join("home");
        let project = root.join("project");
        for dir in [&home, &project] {
            fs::create_dir_all(dir).unwrap();
        }
        let policy = root.join("policy.yaml");
        fs::write(&policy, "version: 1\n").unwrap();
        Fake {
            _tmp: tmp,
            home,
            project,
            policy,
        }
    }

    fn exe() -> String {
        let path = assert_cmd::cargo::cargo_bin("toolgate");
        path.canonicalize().unwrap().to_str().unwrap().to_owned()
    }

    /// What the hook entries run: `toolgate-hook`, built beside `toolgate`.
    fn hook_exe() -> String {
        let path = assert_cmd::cargo::cargo_bin("toolgate-hook");
        path.canonicalize().unwrap().to_str().unwrap().to_owned()
    }

    fn fill(&self, text: &str) -> String {
        text.replace("@HOOK@", &json_escaped(&Self::hook_exe()))
            .replace("@TOOLGATE@", &json_escaped(&Self::exe()))
            .replace("@POLICY@", &json_escaped(self.policy.to_str().unwrap()))
            .replace("@PROJECT@", &json_escaped(self.project.to_str().unwrap()))
    }

    fn unfill(&self, text: &str) -> String {
        text.replace(&json_escaped(&Self::hook_exe()), "@HOOK@")
            .replace(&json_escaped(&Self::exe()), "@TOOLGATE@")
            .replace(&json_escaped(self.policy.to_str().unwrap()), "@POLICY@")
            .replace(&json_escaped(self.project.to_str().unwrap()), "@PROJECT@")
    }

    fn place(&self, input: &str, dest: &Path) -> String {
        let text = self.fill(&fs::read_to_string(golden(input)).unwrap());
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::write(dest, &text).unwrap();
        text
    }

    fn assert_golden(&self, file: &Path, expected: &str) {
        let actual = fs::read_to_string(file).unwrap();
        if std::env::var_os("TOOLGATE_BLESS").is_some() {
            fs::write(golden(expected), self.unfill(&actual)).unwrap();
            return;
        }
        let want = self.fill(&fs::read_to_string(golden(expected)).unwrap());
        assert_eq!(actual, want, "{} differs from {expected}", file.display());
    }

    /// `toolgate ARGS`; `init` also gets `--workspace <project>` (the user's hooks need
    /// one) unless the arguments name one.
    fn run(&self, args: &[&str]) -> Run {
        let mut all: Vec<&str> = args.to_vec();
        let project = self.project.to_str().unwrap();
        if args.first() == Some(&"init") && !args.contains(&"--workspace") {
            all.extend(["--workspace", project]);
        }
        self.run_as_given(&all)
    }

    /// `toolgate ARGS`, exactly.
    fn run_as_given(&self, args: &[&str]) -> Run {
        let mut cmd = Command::cargo_bin("toolgate").unwrap();
        cmd.env_clear()
            .env("HOME", &self.home)
            .current_dir(&self.project)
            .args(args)
            .write_stdin("")
            .timeout(TIMEOUT);
        let out = cmd.output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }

    fn claude_user(&self) -> PathBuf {
        self.home.join(".claude/settings.json")
    }

    fn cursor_project(&self) -> PathBuf {
        self.project.join(".cursor/hooks.json")
    }
}

fn ok(run: &Run) {
    assert_eq!(
        run.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
}

fn backup(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.toolgate.bak", path.display()))
}

/// Every `command` of a Claude Code settings document's `hooks`, per event.
fn claude_commands(text: &str) -> Vec<(String, String)> {
    let doc: Value = serde_json::from_str(text).unwrap();
    let mut out = Vec::new();
    for (event, groups) in doc["hooks"].as_object().unwrap() {
        for g in groups.as_array().unwrap() {
            for h in g["hooks"].as_array().unwrap() {
                out.push((event.clone(), h["command"].as_str().unwrap().to_owned()));
            }
        }
    }
    out
}

#[test]
fn claude_code_user_hooks_in_a_new_file() {
    let fake = Fake::new();
    let policy = fake.policy.to_str().unwrap().to_owned();
    let r = fake.run(&[
        "init",
        "--client",
        "claude-code",
        "--hooks",
        "--yes",
        "--policy",
        &policy,
    ]);
    ok(&r);
    assert!(r.stdout.contains("new file"), "{}", r.stdout);
    let text = fs::read_to_string(fake.claude_user()).unwrap();
    let want = format!(
        "{} claude-code --policy {policy} --workspace {} || exit 2",
        Fake::hook_exe(),
        fake.project.display()
    );
    let commands = claude_commands(&text);
    let events: Vec<&str> = commands.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(
        events,
        [
            "PreToolUse",
            "PostToolUse",
            "UserPromptSubmit",
            "SessionStart"
        ]
    );
    assert!(commands.iter().all(|(_, c)| *c == want), "{commands:?}");
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["hooks"]["PreToolUse"][0]["matcher"], "*");
    assert_eq!(doc["hooks"]["PostToolUse"][0]["matcher"], "*");
    assert!(doc["hooks"]["UserPromptSubmit"][0].get("matcher").is_none());

    // Twice: nothing changes, nothing is written.
    let r = fake.run(&[
        "init",
        "--client",
        "claude-code",
        "--hooks",
        "--yes",
        "--policy",
        &policy,
    ]);
    ok(&r);
    assert!(r.stdout.contains("nothing to change"), "{}", r.stdout);
    assert_eq!(fs::read_to_string(fake.claude_user()).unwrap(), text);
    assert!(!backup(&fake.claude_user()).exists());

    // unwrap leaves an empty settings object.
    ok(&fake.run(&["unwrap", "--client", "claude-code", "--hooks", "--yes"]));
    assert_eq!(fs::read_to_string(fake.claude_user()).unwrap(), "{}\n");
    let r = fake.run(&["unwrap", "--client", "claude-code", "--hooks", "--yes"]);
    ok(&r);
    assert!(r.stdout.contains("nothing to change"), "{}", r.stdout);
    // No file at all: nothing to remove, nothing created.
    let r = fake.run(&["unwrap", "--client", "cursor", "--hooks", "--yes"]);
    ok(&r);
    assert!(
        r.stdout.contains("no such file") && r.stdout.contains("nothing to change"),
        "{}",
        r.stdout
    );
    assert!(!fake.home.join(".cursor").exists());
}

#[test]
fn claude_code_settings_with_comments_and_other_hooks_round_trip() {
    let fake = Fake::new();
    let path = fake.claude_user();
    let original = fake.place("claude-settings.input.jsonc", &path);
    let policy = fake.policy.to_str().unwrap().to_owned();
    let r = fake.run(&[
        "init",
        "--client",
        "claude-code",
        "--hooks",
        "--yes",
        "--policy",
        &policy,
    ]);
    ok(&r);
    fake.assert_golden(&path, "claude-settings.expected.jsonc");
    assert_eq!(fs::read_to_string(backup(&path)).unwrap(), original);
    let installed = fs::read_to_string(&path).unwrap();
    // The user's hooks and comments are still there.
    for kept in [
        "// mine",
        "~/bin/lint-shell.sh",
        "notify-send done",
        "\"matcher\": \"Bash\"",
    ] {
        assert!(installed.contains(kept), "{kept}");
    }

    let r = fake.run(&[
        "init",
        "--client",
        "claude-code",
        "--hooks",
        "--yes",
        "--policy",
        &policy,
    ]);
    ok(&r);
    assert!(r.stdout.contains("nothing to change"), "{}", r.stdout);
    assert_eq!(fs::read_to_string(&path).unwrap(), installed);

    let r = fake.run(&["unwrap", "--client", "claude-code", "--hooks", "--yes"]);
    ok(&r);
    for event in [
        "PreToolUse",
        "PostToolUse",
        "UserPromptSubmit",
        "SessionStart",
    ] {
        assert!(
            r.stdout.contains(&format!("remove   {event}")),
            "{}",
            r.stdout
        );
    }
    assert_eq!(fs::read_to_string(&path).unwrap(), original);
}

#[test]
fn cursor_project_hooks_round_trip_with_crlf() {
    let fake = Fake::new();
    let path = fake.cursor_project();
    let original = fake.place("cursor-hooks.input.jsonc", &path);
    let r = fake.run(&[
        "init", "--client", "cursor", "--hooks", "--scope", "project", "--yes",
    ]);
    ok(&r);
    fake.assert_golden(&path, "cursor-hooks.expected.jsonc");
    let installed = fs::read_to_string(&path).unwrap();
    assert!(
        !installed.replace("\r\n", "").contains('\n'),
        "line endings kept"
    );
    let doc: Value = serde_json::from_str(
        &installed
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<String>(),
    )
    .unwrap();
    assert_eq!(doc["version"], 1);
    let want = format!(
        "{} cursor --workspace {} || exit 2",
        Fake::hook_exe(),
        fake.project.display()
    );
    for event in [
        "beforeShellExecution",
        "afterShellExecution",
        "beforeMCPExecution",
        "afterMCPExecution",
        "beforeReadFile",
        "afterFileEdit",
        "beforeSubmitPrompt",
    ] {
        let list = doc["hooks"][event].as_array().unwrap();
        assert!(
            list.iter().any(|h| h["command"] == want.as_str()),
            "{event}"
        );
    }
    assert_eq!(
        doc["hooks"]["afterFileEdit"][0]["command"],
        "./scripts/format.sh"
    );
    // The user scope was not touched.
    assert!(!fake.home.join(".cursor").exists());

    let r = fake.run(&[
        "init", "--client", "cursor", "--hooks", "--scope", "project", "--yes",
    ]);
    assert!(r.stdout.contains("nothing to change"), "{}", r.stdout);
    ok(&fake.run(&[
        "unwrap", "--client", "cursor", "--hooks", "--scope", "project", "--yes",
    ]));
    assert_eq!(fs::read_to_string(&path).unwrap(), original);
}

#[test]
fn unwrap_removes_only_entries_exactly_as_init_wrote_them() {
    let fake = Fake::new();
    ok(&fake.run(&["init", "--client", "cursor", "--hooks", "--yes"]));
    let path = fake.home.join(".cursor/hooks.json");
    let text = fs::read_to_string(&path).unwrap();
    // The user adds a timeout to one of toolgate's entries: it is theirs now.
    let changed = text.replacen(
        "/project || exit 2\"\n      }",
        "/project || exit 2\",\n        \"timeout\": 30\n      }",
        1,
    );
    assert_ne!(changed, text);
    fs::write(&path, &changed).unwrap();
    ok(&fake.run(&["unwrap", "--client", "cursor", "--hooks", "--yes"]));
    let after: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    let hooks = after["hooks"].as_object().unwrap();
    assert_eq!(hooks.len(), 1, "{after}");
    assert_eq!(hooks["beforeShellExecution"][0]["timeout"], 30);
}

#[test]
fn dry_run_shows_the_diff_and_writes_nothing() {
    let fake = Fake::new();
    let r = fake.run(&[
        "init",
        "--client",
        "claude-code",
        "--hooks",
        "--scope",
        "project",
        "--dry-run",
    ]);
    ok(&r);
    let path = fake.project.join(".claude/settings.json");
    assert!(
        r.stdout.contains(&format!("+++ {}", path.display())),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("+            \"command\": \""),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("dry run: nothing was written"),
        "{}",
        r.stdout
    );
    assert!(!path.exists());
    assert!(!fake.project.join(".claude").exists());
    // Without --yes and without a terminal nothing is written either.
    let r = fake.run(&[
        "init",
        "--client",
        "claude-code",
        "--hooks",
        "--scope",
        "project",
    ]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("--yes"), "{}", r.stderr);
    assert!(!path.exists());
}

#[test]
fn hooks_need_a_client_that_has_them() {
    let fake = Fake::new();
    let r = fake.run(&["init", "--client", "vscode", "--hooks", "--yes"]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr
            .contains("`toolgate init --client claude-code --hooks`"),
        "{}",
        r.stderr
    );
    // Cline runs hooks but cannot be stopped by one: refused, with what stays unguarded.
    let r = fake.run(&["init", "--client", "cline", "--hooks", "--yes"]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("Cline's hooks cannot block a call")
            && r.stderr.contains("`execute_command`"),
        "{}",
        r.stderr
    );
    let r = fake.run(&["init", "--client", "claude-desktop", "--hooks", "--yes"]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr
            .contains("`--hooks` works with `--client` claude-code, cursor"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("help:"), "{}", r.stderr);
    let r = fake.run(&["init", "--hooks", "--yes"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("--client"), "{}", r.stderr);
    // A settings file toolgate cannot edit is left as it is.
    let path = fake.claude_user();
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, "{\"hooks\": []}\n").unwrap();
    let r = fake.run(&["init", "--client", "claude-code", "--hooks", "--yes"]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("`hooks` is not an object"),
        "{}",
        r.stderr
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "{\"hooks\": []}\n");
}

#[test]
fn doctor_reports_the_hooks() {
    let fake = Fake::new();
    let r = fake.run(&["doctor"]);
    assert!(
        r.stdout.contains("INFO  no claude-code hooks installed"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("INFO  no cursor hooks installed"),
        "{}",
        r.stdout
    );

    ok(&fake.run(&["init", "--client", "claude-code", "--hooks", "--yes"]));
    ok(&fake.run(&[
        "init", "--client", "cursor", "--hooks", "--scope", "project", "--yes",
    ]));
    let r = fake.run(&["doctor"]);
    let line = format!(
        "PASS  claude-code user hooks installed in `{}` (4 events)",
        fake.claude_user().display()
    );
    assert!(r.stdout.contains(&line), "{}", r.stdout);
    let line = format!(
        "PASS  cursor project hooks installed in `{}` (7 events)",
        fake.cursor_project().display()
    );
    assert!(r.stdout.contains(&line), "{}", r.stdout);
    // The broker's state is reported either way; the hooks' line about it only when it
    // does not run.
    assert!(r.stdout.contains("approval broker"), "{}", r.stdout);

    // One event's entry gone: a warning naming it.
    let path = fake.claude_user();
    let mut doc: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    doc["hooks"].as_object_mut().unwrap().remove("SessionStart");
    fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let r = fake.run(&["doctor"]);
    assert!(
        r.stdout.contains("WARN  claude-code user hooks in")
            && r.stdout.contains("miss [SessionStart]"),
        "{}",
        r.stdout
    );

    // A binary that is gone: the client would treat the failing hook as non-blocking.
    let gone = fake.home.join("old/toolgate-hook");
    let text = fs::read_to_string(&path).unwrap().replace(
        &json_escaped(&Fake::hook_exe()),
        &json_escaped(gone.to_str().unwrap()),
    );
    fs::write(&path, text).unwrap();
    let r = fake.run(&["doctor"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stdout
            .contains(&format!("run `{}`, which does not exist", gone.display())),
        "{}",
        r.stdout
    );
}

/// The user's hooks run for every project: without `--workspace`, `init --hooks` refuses
/// them; the project's hooks get the project directory.
#[test]
fn the_users_hooks_need_a_workspace() {
    let fake = Fake::new();
    let r = fake.run_as_given(&["init", "--client", "claude-code", "--hooks", "--yes"]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.stderr.contains(&format!(
            "in `{}`: the user's hooks run for every project, so toolgate cannot tell their workspace\nhelp: name the directory the agent works in with `--workspace DIR`, or install the hooks in the project with `--scope project`",
            fake.claude_user().display()
        )),
        "{}",
        r.stderr
    );
    assert!(!fake.claude_user().exists());
    let r = fake.run_as_given(&[
        "init",
        "--client",
        "claude-code",
        "--hooks",
        "--scope",
        "project",
        "--yes",
    ]);
    ok(&r);
    let text = fs::read_to_string(fake.project.join(".claude/settings.json")).unwrap();
    let want = format!(
        "{} claude-code --workspace {} || exit 2",
        Fake::hook_exe(),
        fake.project.display()
    );
    assert!(
        claude_commands(&text).iter().all(|(_, c)| *c == want),
        "{text}"
    );
}

/// The hook command's `--workspace` wins over the `cwd` the client reports, which follows
/// the agent's `cd`: after `cd ~`, `${workspace}` is still the project, so an allow rule for
/// the workspace does not open the home directory's files.
#[test]
fn the_hooks_workspace_wins_over_the_clients_cwd() {
    let w = support::World::new();
    let home = w.base().join("home");
    std::fs::write(home.join(".claude.json"), "{}").unwrap();
    std::fs::write(w.project().join("README.md"), "hi").unwrap();
    let read = |path: &Path| {
        support::claude(
            &home,
            "PreToolUse",
            json!({"tool_name": "Read", "tool_input": {"file_path": path}, "tool_use_id": "t"}),
        )
    };
    let project = w.project();
    let workspace = ["--workspace", project.to_str().unwrap()];
    // Without it, the client's cwd (the home directory) is the workspace: allowed.
    let r = w.small_hook("claude-code", &read(&home.join(".claude.json")), &[]);
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), ""), "{r:?}");
    // With it, the home directory's file is outside the workspace (the policy asks)...
    let r = w.small_hook("claude-code", &read(&home.join(".claude.json")), &workspace);
    assert_eq!(r.code, Some(0), "{r:?}");
    assert_eq!(
        r.json()["hookSpecificOutput"]["permissionDecision"],
        "ask",
        "{r:?}"
    );
    // ...and the project's is inside it, wherever the agent stands.
    let r = w.small_hook("claude-code", &read(&project.join("README.md")), &workspace);
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), ""), "{r:?}");
    // A workspace that is not an absolute directory denies (the hook command is broken).
    let r = w.hook(
        "claude-code",
        &read(&project.join("README.md")),
        &["--workspace", "rel"],
    );
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("(--workspace)"), "{r:?}");
    w.stop_broker();
}

/// A hook executable that is gone (moved, uninstalled, `cargo clean`) makes the shell exit
/// 127, which Claude Code and Cursor treat as a non-blocking error: the call would run
/// unchecked. The entries end in `|| exit 2`, the code both read as a deny.
#[test]
fn a_hook_that_cannot_run_blocks_and_old_entries_are_brought_up_to_date() {
    let fake = Fake::new();
    let r = fake.run(&["init", "--client", "claude-code", "--hooks", "--yes"]);
    ok(&r);
    // The binary under test lives in cargo's build directory: `init` says what that costs.
    assert!(
        r.stderr
            .contains("warning: toolgate runs from the build directory")
            && r.stderr.contains("cargo install"),
        "{}",
        r.stderr
    );
    let path = fake.claude_user();
    let text = fs::read_to_string(&path).unwrap();
    let commands = claude_commands(&text);
    let (_, command) = commands.iter().find(|(e, _)| e == "PreToolUse").unwrap();
    assert!(command.ends_with(" || exit 2"), "{command}");
    // The executable deleted after `init`: the shell the client runs the command in.
    let gone = fake.home.join("gone/toolgate-hook");
    let moved = command.replace(&Fake::hook_exe(), gone.to_str().unwrap());
    assert_ne!(&moved, command);
    let event = json!({"session_id": "s", "transcript_path": "/nonexistent", "cwd": fake.project,
        "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "cat ~/.ssh/id_rsa"}, "tool_use_id": "t"});
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(&moved)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            // The shell may exit (the executable is gone) before it reads the event.
            let written = child
                .stdin
                .take()
                .unwrap()
                .write_all(event.to_string().as_bytes());
            if let Err(e) = written
                && e.kind() != std::io::ErrorKind::BrokenPipe
            {
                return Err(e);
            }
            child.wait_with_output()
        })
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("gone/toolgate-hook"), "{stderr}");
    // Without the fail-closed end it would have been 127: a non-blocking error.
    let open = moved.strip_suffix(" || exit 2").unwrap();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(open)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(127));
    // Entries written before the fail-closed end: `doctor` warns, `init` brings them up to
    // date in place, and `doctor` is content.
    fs::write(&path, text.replace(" || exit 2", "")).unwrap();
    let doctor = fake.run(&["doctor"]);
    assert!(
        doctor.stdout.contains("do not fail closed"),
        "{}",
        doctor.stdout
    );
    ok(&fake.run(&["init", "--client", "claude-code", "--hooks", "--yes"]));
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
    let doctor = fake.run(&["doctor"]);
    assert!(
        !doctor.stdout.contains("do not fail closed")
            && doctor.stdout.contains("hooks installed")
            && doctor.stdout.contains("from a cargo build directory"),
        "{}",
        doctor.stdout
    );
}

/// Gemini CLI's hooks: its events with a timeout above toolgate's own in each entry, removed
/// byte for byte; `doctor` warns while the project is a folder Gemini CLI does not trust
/// (it then reads none of the project's settings) and is content once it is.
#[test]
fn gemini_cli_project_hooks_round_trip_and_doctor_checks_folder_trust() {
    let fake = Fake::new();
    let path = fake.project.join(".gemini/settings.json");
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let original = "{\n  // mine\n  \"ui\": { \"theme\": \"GitHub\" }\n}\n";
    fs::write(&path, original).unwrap();
    ok(&fake.run(&[
        "init",
        "--client",
        "gemini-cli",
        "--hooks",
        "--scope",
        "project",
        "--yes",
    ]));
    let text = fs::read_to_string(&path).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text.replace("// mine", "")).unwrap();
    for event in ["BeforeTool", "AfterTool", "BeforeAgent", "SessionStart"] {
        let hook = &v["hooks"][event][0]["hooks"][0];
        let command = hook["command"].as_str().unwrap();
        assert!(
            command.contains(" gemini-cli ") && command.ends_with(" || exit 2"),
            "{command}"
        );
        assert_eq!(hook["timeout"], 30000, "{event}");
        assert_eq!(
            v["hooks"][event][0].get("matcher").is_some(),
            event.ends_with("Tool"),
            "{event}"
        );
    }
    let doctor = fake.run(&["doctor"]);
    assert!(
        doctor.stdout.contains("gemini-cli project hooks")
            && doctor.stdout.contains(
                "do not run: Gemini CLI reads a project's hooks only in a folder you trust"
            ),
        "{}",
        doctor.stdout
    );
    fs::create_dir_all(fake.home.join(".gemini")).unwrap();
    fs::write(
        fake.home.join(".gemini/trustedFolders.json"),
        json!({fake.project.to_str().unwrap(): "TRUST_FOLDER"}).to_string(),
    )
    .unwrap();
    let doctor = fake.run(&["doctor"]);
    assert!(!doctor.stdout.contains("do not run"), "{}", doctor.stdout);
    assert!(
        doctor.stdout.contains("gemini-cli project hooks installed"),
        "{}",
        doctor.stdout
    );
    ok(&fake.run(&[
        "unwrap",
        "--client",
        "gemini-cli",
        "--hooks",
        "--scope",
        "project",
        "--yes",
    ]));
    assert_eq!(fs::read_to_string(&path).unwrap(), original);
}

/// Copilot CLI's hooks: a file of toolgate's own in `.github/hooks`, `bash` commands with a
/// timeout, removed with the file's entries; `doctor` warns while the project is not among
/// Copilot CLI's trusted folders.
#[test]
fn copilot_cli_project_hooks_round_trip_and_doctor_checks_folder_trust() {
    let fake = Fake::new();
    let path = fake.project.join(".github/hooks/toolgate.json");
    ok(&fake.run(&[
        "init",
        "--client",
        "copilot-cli",
        "--hooks",
        "--scope",
        "project",
        "--yes",
    ]));
    let v: serde_json::Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v["version"], 1);
    for event in ["PreToolUse", "PostToolUse", "UserPromptSubmit"] {
        let hook = &v["hooks"][event][0];
        assert_eq!(
            (&hook["type"], &hook["timeoutSec"]),
            (&json!("command"), &json!(30))
        );
        let command = hook["bash"].as_str().unwrap();
        assert!(
            command.contains(" copilot-cli ") && command.ends_with(" || exit 2"),
            "{command}"
        );
    }
    let doctor = fake.run(&["doctor"]);
    assert!(
        doctor
            .stdout
            .contains("do not run: Copilot CLI reads a project's hooks only in a folder you trust"),
        "{}",
        doctor.stdout
    );
    fs::create_dir_all(fake.home.join(".copilot")).unwrap();
    fs::write(
        fake.home.join(".copilot/config.json"),
        json!({"trusted_folders": [fake.project]}).to_string(),
    )
    .unwrap();
    let doctor = fake.run(&["doctor"]);
    assert!(!doctor.stdout.contains("do not run"), "{}", doctor.stdout);
    assert!(
        doctor
            .stdout
            .contains("copilot-cli project hooks installed"),
        "{}",
        doctor.stdout
    );
    ok(&fake.run(&[
        "unwrap",
        "--client",
        "copilot-cli",
        "--hooks",
        "--scope",
        "project",
        "--yes",
    ]));
    // The file was toolgate's own: nothing of it is left.
    assert!(!path.exists(), "{:?}", fs::read_to_string(&path));
    // One the user added a hook of their own to keeps it, and only it.
    let init = [
        "init",
        "--client",
        "copilot-cli",
        "--hooks",
        "--scope",
        "project",
        "--yes",
    ];
    ok(&fake.run(&init));
    let mut v: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    v["hooks"]["sessionEnd"] = json!([{"type": "command", "bash": "echo bye"}]);
    fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let mut unwrap = init;
    unwrap[0] = "unwrap";
    ok(&fake.run(&unwrap));
    let left: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        left,
        json!({"version": 1, "hooks": {"sessionEnd": [{"type": "command", "bash": "echo bye"}]}})
    );
}

/// OpenCode: `init` writes a plugin of toolgate's own, `doctor` reports it (and fails it
/// once the executable it runs is gone), `unwrap` removes it; a file of the user's by that
/// name is refused, never overwritten.
#[test]
fn opencode_plugin_round_trip() {
    let fake = Fake::new();
    let path = fake.project.join(".opencode/plugin/toolgate.js");
    let init = [
        "init", "--client", "opencode", "--hooks", "--scope", "project", "--yes",
    ];
    ok(&fake.run(&init));
    let text = fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with(toolgate_clients::opencode::MARK)
            && text.contains(&format!("\"{}\",\"opencode\"", Fake::hook_exe())),
        "{text}"
    );
    let doctor = fake.run(&["doctor"]);
    assert!(
        doctor.stdout.contains("opencode project plugin installed"),
        "{}",
        doctor.stdout
    );
    // Again: nothing to change.
    let again = fake.run(&init);
    assert!(
        again.stdout.contains("nothing to change"),
        "{}",
        again.stdout
    );
    fs::write(
        &path,
        text.replace(&Fake::hook_exe(), "/gone/toolgate-hook"),
    )
    .unwrap();
    let doctor = fake.run(&["doctor"]);
    assert!(
        doctor
            .stdout
            .contains("runs `/gone/toolgate-hook`, which does not exist"),
        "{}",
        doctor.stdout
    );
    let unwrap = [
        "unwrap", "--client", "opencode", "--hooks", "--scope", "project", "--yes",
    ];
    ok(&fake.run(&unwrap));
    assert!(!path.exists());
    fs::write(&path, "// my own plugin\n").unwrap();
    let refused = fake.run(&init);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("is not the plugin toolgate writes"),
        "{}",
        refused.stderr
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "// my own plugin\n");
}
