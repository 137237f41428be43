//! An ask in a client whose hooks cannot ask (Codex, Gemini CLI, OpenCode, Windsurf) is a
//! deny that waits in `toolgate approvals`: a person who allows it there (once, or for the
//! session) lets the same call through when the agent makes it again, or at once when they
//! answer while the hook still waits. A client that asks itself gets its ask, and nothing
//! waits in the queue.

use crate::support::hooks as support;

use std::process::Stdio;

use serde_json::{Value, json};
use support::{LIMIT, Run, World, claude};
use toolgate_testkit::wait_until;

/// A Codex `PreToolUse` of its shell tool (Claude Code's shape): `make <target>` asks (the
/// test policy's default).
fn make(w: &World, target: &str) -> Value {
    claude(
        &w.project(),
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_input": {"command": format!("make {target}")}, "tool_use_id": "t"}),
    )
}

fn queue(w: &World) -> Vec<Value> {
    let out = w.cmd(&["approvals", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn decide(w: &World, id: u64, decision: &str) {
    let out = w
        .cmd(&["approvals", "--id", &id.to_string(), "--decision", decision])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn assert_held(r: &Run) -> u64 {
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(
        r.stderr.contains("default is ask")
            && r.stderr.contains("Codex's hooks cannot ask")
            && r.stderr.contains("allow it in `toolgate approvals`"),
        "{r:?}"
    );
    let (_, after) = r
        .stderr
        .split_once("waits in `toolgate approvals` as request ")
        .unwrap_or_else(|| panic!("no request named: {r:?}"));
    after
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn assert_allowed(r: &Run) {
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), ""), "{r:?}");
}

#[test]
fn an_ask_codex_cannot_show_waits_in_toolgate_approvals_and_an_answer_there_lets_the_call_through()
{
    let w = World::new();
    let r = w.hook("codex", &make(&w, "build"), &[]);
    let id = assert_held(&r);
    let q = queue(&w);
    assert_eq!(q.len(), 1, "{q:?}");
    assert_eq!(q[0]["id"], id);
    assert_eq!(q[0]["question"]["tool"], "Bash");
    assert!(
        q[0]["question"]["what"].as_str().unwrap().contains("make"),
        "{q:?}"
    );
    // The agent trying again before anyone answered: still denied, still one request.
    assert_eq!(assert_held(&w.hook("codex", &make(&w, "build"), &[])), id);
    assert_eq!(queue(&w).len(), 1);

    // Allowed once: the next such call goes through, the one after asks again.
    decide(&w, id, "allow-once");
    assert!(queue(&w).is_empty());
    assert_allowed(&w.hook("codex", &make(&w, "build"), &[]));
    let again = assert_held(&w.hook("codex", &make(&w, "build"), &[]));
    assert_ne!(again, id);

    // Allowed for the session: every such call goes through; another command still asks.
    decide(&w, again, "allow-session");
    assert_allowed(&w.hook("codex", &make(&w, "build"), &[]));
    assert_allowed(&w.hook("codex", &make(&w, "build"), &[]));
    let other = assert_held(&w.hook("codex", &make(&w, "deploy"), &[]));

    // Denied there: nothing is granted.
    decide(&w, other, "deny");
    assert_held(&w.hook("codex", &make(&w, "deploy"), &[]));

    // The answers are in the audit log, as approvals of the asks.
    let audit =
        std::fs::read_to_string(w.project().join(".toolgate/audit.jsonl")).unwrap_or_default();
    let approvals: Vec<Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "approval")
        .collect();
    let scopes: Vec<&str> = approvals
        .iter()
        .map(|e| e["approval"]["scope"].as_str().unwrap_or("none"))
        .collect();
    assert_eq!(scopes, ["once", "session", "none"], "{approvals:?}");
    assert_eq!(approvals[0]["approval"]["how"], "broker");
    assert_eq!(approvals[2]["effect"], "deny");
}

#[test]
fn a_person_watching_toolgate_approvals_answers_while_the_hook_waits() {
    let w = World::new();
    // Start the broker with a first event, then keep a terminal on the queue.
    assert_held(&w.hook("codex", &make(&w, "first"), &[]));
    let mut watcher = w.cmd(&["approvals", "--plain"]);
    let mut watcher = watcher
        .env("TERM", "dumb")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_until(LIMIT, || {
            let out = w.cmd(&["status"]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).contains("approvers:  1 connected")
        }),
        "the terminal did not connect"
    );

    for (decision, allowed) in [("allow-once", true), ("deny", false)] {
        let target = format!("watched-{decision}");
        let mut cmd = w.cmd(&["hook", "codex", "--timeout", "20s", "--policy"]);
        cmd.arg(w.policy())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        {
            use std::io::Write as _;
            let mut stdin = child.stdin.take().unwrap();
            stdin
                .write_all(make(&w, &target).to_string().as_bytes())
                .unwrap();
        }
        let mut id = None;
        assert!(
            wait_until(LIMIT, || {
                id = queue(&w)
                    .into_iter()
                    .find(|q| q["question"]["what"].as_str().unwrap().contains(&target))
                    .and_then(|q| q["id"].as_u64());
                id.is_some()
            }),
            "the ask did not reach the queue"
        );
        decide(&w, id.unwrap(), decision);
        let r = support::wait_output(child);
        if allowed {
            assert_allowed(&r);
        } else {
            assert_eq!(r.code, Some(2), "{r:?}");
            assert!(r.stderr.contains("denied in `toolgate approvals`"), "{r:?}");
        }
    }
    let _ = watcher.kill();
    let _ = watcher.wait();
}

#[test]
fn a_client_that_asks_itself_gets_the_ask_and_nothing_waits() {
    let w = World::new();
    let r = w.hook("claude-code", &make(&w, "build"), &[]);
    assert_eq!(r.code, Some(0), "{r:?}");
    assert_eq!(r.json()["hookSpecificOutput"]["permissionDecision"], "ask");
    assert!(queue(&w).is_empty());
}

/// What waits is bounded: 32 asks per session, and no call over 256 KiB; past either the
/// call is still denied, with the reason.
#[test]
fn held_asks_are_bounded() {
    let w = World::new();
    for i in 0..32 {
        assert_held(&w.hook("codex", &make(&w, &format!("t{i}")), &[]));
    }
    let r = w.hook("codex", &make(&w, "one-more"), &[]);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(
        r.stderr
            .contains("32 asks wait in `toolgate approvals` already")
            && r.stderr.contains("cannot ask"),
        "{r:?}"
    );
    assert_eq!(queue(&w).len(), 32);
    let w = World::new();
    let r = w.hook("codex", &make(&w, &"x".repeat(300 * 1024)), &[]);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(
        r.stderr.contains("is not kept"),
        "{}",
        &r.stderr[..200.min(r.stderr.len())]
    );
    assert!(queue(&w).is_empty());
}
