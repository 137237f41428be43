//! Every way a hook can fail ends in the client's deny with exit code 2, the code both
//! clients treat as blocking (never 1 or 101, which they read as a non-blocking error and let
//! the action run): no policy, a bad policy, a broker that cannot be started, garbage or huge
//! input, an unknown event, a timeout. And two hooks racing start one broker.

use crate::support::hooks as support;

use std::process::Stdio;

use serde_json::{Value, json};
use support::{World, claude, cursor};

fn bash(w: &World) -> Value {
    claude(
        &w.project(),
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_input": {"command": "npm test"}, "tool_use_id": "t"}),
    )
}

fn shell(w: &World) -> Value {
    cursor(
        &w.project(),
        "beforeShellExecution",
        json!({"command": "npm test", "cwd": w.project()}),
    )
}

/// A Claude Code deny: exit 2, the reason (containing `needle`) on stderr, the JSON deny.
fn assert_claude_deny(r: &support::Run, needle: &str) {
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains(needle), "{needle}: {r:?}");
    assert_eq!(
        r.json()["hookSpecificOutput"]["permissionDecision"],
        "deny",
        "{r:?}"
    );
}

fn assert_cursor_deny(r: &support::Run, needle: &str) {
    assert_eq!(r.code, Some(2), "{r:?}");
    let out = r.json();
    assert_eq!(out["permission"], "deny", "{r:?}");
    assert!(
        out["agent_message"].as_str().unwrap().contains(needle),
        "{needle}: {r:?}"
    );
}

#[test]
fn a_missing_or_broken_policy_denies() {
    let w = World::new();
    // The same call is allowed with the policy as it is (the baseline).
    let r = w.hook("claude-code", &bash(&w), &[]);
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), ""), "{r:?}");

    let missing = w.base().join("nope.yaml");
    let mut cmd = w.cmd(&["hook", "claude-code", "--policy"]);
    cmd.arg(&missing);
    let r = w.run(cmd, bash(&w).to_string().as_bytes());
    assert_claude_deny(&r, "cannot be read");
    assert!(r.stderr.contains("help:"), "{r:?}");

    // Broken after the broker compiled it: the change is seen at the next call.
    std::fs::write(
        w.policy(),
        "version: 1\nrules:\n  - id: x\n    effect: allow\n    operationz: [fs.read]\n",
    )
    .unwrap();
    let r = w.hook("claude-code", &bash(&w), &[]);
    assert_claude_deny(&r, "does not load");
    assert!(r.stderr.contains("toolgate policy check"), "{r:?}");
    let r = w.hook("cursor", &shell(&w), &[]);
    assert_cursor_deny(&r, "does not load");
    // A prompt is blocked too (Claude Code: exit 2 with the reason; Cursor: `continue: false`).
    let r = w.hook(
        "claude-code",
        &claude(&w.project(), "UserPromptSubmit", json!({"prompt": "hi"})),
        &[],
    );
    assert_eq!(r.code, Some(2), "{r:?}");
    assert_eq!(r.json()["decision"], "block");
    let r = w.hook(
        "cursor",
        &cursor(&w.project(), "beforeSubmitPrompt", json!({"prompt": "hi"})),
        &[],
    );
    assert_eq!(
        (r.code, r.json()["continue"].clone()),
        (Some(2), json!(false)),
        "{r:?}"
    );
}

#[test]
fn a_broker_that_cannot_be_started_denies_and_says_how_to_fix_it() {
    let mut w = World::new();
    // The broker directory would have to be created inside a regular file.
    let file = w.base().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    w.broker_dir = file.join("b");
    let r = w.hook("claude-code", &bash(&w), &[]);
    assert_claude_deny(&r, "none can be started");
    assert!(r.stderr.contains("TOOLGATE_BROKER_DIR"), "{r:?}");
    let r = w.hook("cursor", &shell(&w), &[]);
    assert_cursor_deny(&r, "none can be started");
}

#[test]
fn garbage_huge_and_unknown_input_deny() {
    let w = World::new();
    for client in ["claude-code", "cursor"] {
        let mut cmd = w.cmd(&["hook", client]);
        cmd.arg("--policy").arg(w.policy());
        let r = w.run(cmd, b"\x00\xffnot json at all");
        assert_eq!(r.code, Some(2), "{client}: {r:?}");
        assert!(r.stderr.contains("not JSON"), "{client}: {r:?}");

        let mut cmd = w.cmd(&["hook", client]);
        cmd.arg("--policy").arg(w.policy());
        let r = w.run(cmd, &vec![b' '; 5 * 1024 * 1024]);
        assert_eq!(r.code, Some(2), "{client}: {r:?}");
        assert!(r.stderr.contains("larger than 4 MiB"), "{client}: {r:?}");
    }
    let r = w.hook(
        "claude-code",
        &claude(&w.project(), "SomethingNew", json!({})),
        &[],
    );
    assert_claude_deny(&r, "unknown Claude Code hook event `SomethingNew`");
    // A PreToolUse without its tool: not understood, denied.
    let r = w.hook(
        "claude-code",
        &claude(&w.project(), "PreToolUse", json!({})),
        &[],
    );
    assert_claude_deny(&r, "no `tool_name`");
    let r = w.hook(
        "cursor",
        &cursor(&w.project(), "beforeEverything", json!({})),
        &[],
    );
    assert_cursor_deny(&r, "unknown Cursor hook event");
    let r = w.hook(
        "cursor",
        &cursor(
            &w.project(),
            "beforeMCPExecution",
            json!({"tool_name": "q", "tool_input": "{not json"}),
        ),
        &[],
    );
    assert_cursor_deny(&r, "not JSON");
    // Claude Code's input in Cursor's hook (a mis-installed hook) is not understood either.
    let r = w.hook("cursor", &bash(&w), &[]);
    assert_cursor_deny(&r, "conversation_id");
}

#[test]
fn a_hook_that_times_out_denies_before_the_client_gives_up() {
    let w = World::new();
    for client in ["claude-code", "cursor"] {
        // The client never closes stdin: the hook cannot even read its event.
        let mut child = w
            .cmd(&["hook", client, "--timeout", "300ms"])
            .arg("--policy")
            .arg(w.policy())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let r = support::wait_output(child);
        drop(stdin);
        assert_eq!(r.code, Some(2), "{client}: {r:?}");
        assert!(r.stderr.contains("timed out"), "{client}: {r:?}");
        let out = r.json();
        if client == "cursor" {
            assert_eq!(out["permission"], "deny");
        } else {
            assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
        }
    }
}

#[test]
fn racing_hooks_start_one_broker() {
    let w = World::new();
    let input = bash(&w).to_string();
    let children: Vec<_> = (0..6)
        .map(|_| {
            let mut cmd = w.cmd(&["hook", "claude-code"]);
            cmd.arg("--policy").arg(w.policy());
            let input = input.clone();
            let w_cmd = cmd;
            std::thread::spawn(move || {
                let mut cmd = w_cmd;
                let mut child = cmd
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                use std::io::Write as _;
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(input.as_bytes())
                    .unwrap();
                support::wait_output(child)
            })
        })
        .collect();
    for c in children {
        let r = c.join().unwrap();
        assert_eq!((r.code, r.stdout.as_str()), (Some(0), ""), "{r:?}");
    }
    let log = std::fs::read_to_string(w.broker_dir.join("broker.log")).unwrap();
    assert_eq!(log.matches("toolgate broker listening").count(), 1, "{log}");
    assert!(!log.contains("already running"), "{log}");
    assert!(w.broker_pid().is_some());
}

#[test]
fn a_broker_that_never_answers_is_a_timeout_deny() {
    let w = World::new();
    // Something listens on the broker's socket (with a valid-looking token) and never answers.
    std::fs::create_dir_all(&w.broker_dir).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&w.broker_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let token = w.broker_dir.join("token");
    std::fs::write(&token, "ab".repeat(32)).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let _listener =
        std::os::unix::net::UnixListener::bind(w.broker_dir.join("broker.sock")).unwrap();
    for (client, input) in [("claude-code", bash(&w)), ("cursor", shell(&w))] {
        let mut cmd = w.cmd(&["hook", client, "--timeout", "400ms"]);
        cmd.arg("--policy").arg(w.policy());
        let r = w.run(cmd, input.to_string().as_bytes());
        assert_eq!(r.code, Some(2), "{client}: {r:?}");
        assert!(r.stderr.contains("timed out"), "{client}: {r:?}");
    }
}
