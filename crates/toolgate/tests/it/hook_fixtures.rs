//! Every hook event of Claude Code and Cursor, shaped as their documentation shows
//! (`tests/fixtures/hooks/`, sources in its README), through the real binary and a real
//! broker (started by the first hook): the output JSON and the exit code each client reads.

use crate::support::hooks as support;

use serde_json::json;
use support::World;

#[test]
fn claude_code_fixtures() {
    let w = World::new();
    let hook =
        |name: &str, extra: &[&str]| w.hook("claude-code", &w.fixture("claude-code", name), extra);

    // Allowed by the policy: no decision, Claude Code's own permission rules apply...
    let r = hook("pre_tool_use_bash.json", &[]);
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), ""), "{r:?}");
    // ... unless toolgate is authoritative.
    let r = hook("pre_tool_use_bash.json", &["--authoritative"]);
    assert_eq!(r.code, Some(0), "{r:?}");
    let out = r.json();
    assert_eq!(out["hookSpecificOutput"]["hookEventName"], "PreToolUse");
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "allow");

    // Denied: the JSON deny, the reason on stderr (what Claude is shown) and exit 2.
    let r = hook("pre_tool_use_write.json", &[]);
    assert_eq!(r.code, Some(2), "{r:?}");
    let out = r.json();
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
    let reason = out["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("protect-secrets"), "{reason}");
    assert!(r.stderr.contains("protect-secrets"), "{r:?}");

    // An MCP tool nothing describes: the policy's default, ask (Claude Code's own prompt).
    let r = hook("pre_tool_use_mcp.json", &[]);
    assert_eq!(r.code, Some(0), "{r:?}");
    let out = r.json();
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "ask");
    assert!(
        out["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .contains("`create_entities` of `memory`"),
        "{out}"
    );

    // Events that decide nothing: silent, exit 0 (stdout of UserPromptSubmit and
    // SessionStart would be added to Claude's context).
    for name in [
        "post_tool_use.json",
        "user_prompt_submit.json",
        "session_start.json",
        "notification.json",
        "stop.json",
        "subagent_stop.json",
        "pre_compact.json",
        "session_end.json",
    ] {
        let r = hook(name, &[]);
        assert_eq!((r.code, r.stdout.as_str()), (Some(0), ""), "{name}: {r:?}");
    }
}

/// VS Code's events reach the Claude Code hook (VS Code runs the hooks of Claude Code's
/// settings files): its camelCase fields and its own tools are read as Claude Code's, so a
/// write to `.env` is denied however VS Code spells it, and an allowed command stays allowed.
#[test]
fn vscode_fixtures_through_the_claude_code_hook() {
    let w = World::new();
    let hook = |name: &str| w.hook("claude-code", &w.fixture("vscode", name), &[]);
    let r = hook("pre_tool_use_run_in_terminal.json");
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), ""), "{r:?}");
    for name in [
        "pre_tool_use_create_file.json",
        "pre_tool_use_apply_patch.json",
    ] {
        let r = hook(name);
        assert_eq!(r.code, Some(2), "{name}: {r:?}");
        let out = r.json();
        assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
        assert!(r.stderr.contains("protect-secrets"), "{name}: {r:?}");
    }
    for name in ["post_tool_use.json", "user_prompt_submit.json"] {
        let r = hook(name);
        assert_eq!((r.code, r.stdout.as_str()), (Some(0), ""), "{name}: {r:?}");
    }
}

/// Windsurf's actions through the real hook: a key read and a `.env` read exit 2 with the
/// reason on stderr (what Windsurf shows), so does an ask, and allowed actions and those
/// that decide nothing exit 0 silently.
#[test]
fn windsurf_fixtures() {
    let w = World::new();
    let hook = |name: &str| w.hook("windsurf", &w.fixture("windsurf", name), &[]);
    for (name, file) in [
        ("pre_run_command.json", ".ssh/id_rsa"),
        ("pre_read_code.json", ".env"),
    ] {
        let r = hook(name);
        assert_eq!(r.code, Some(2), "{name}: {r:?}");
        assert!(
            r.stderr.contains(file) && r.stderr.contains("deny rule"),
            "{name}: {r:?}"
        );
    }
    // This policy asks before a write (its default), and Windsurf cannot ask: a deny that
    // says so.
    let r = hook("pre_write_code.json");
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(
        r.stderr.contains("default is ask") && r.stderr.contains("cannot ask"),
        "{r:?}"
    );
    for name in [
        "pre_run_command_allowed.json",
        "post_run_command.json",
        "pre_user_prompt.json",
        "post_cascade_response.json",
    ] {
        let r = hook(name);
        assert_eq!((r.code, r.stdout.as_str()), (Some(0), ""), "{name}: {r:?}");
    }
}

/// `toolgate-hook` (what `init --hooks` installs) answers every fixture exactly as
/// `toolgate hook` does, starting the broker from the `toolgate` beside it.
#[test]
fn the_small_hook_executable_answers_as_toolgate_hook() {
    for (client, names) in [
        (
            "claude-code",
            &[
                "pre_tool_use_bash.json",
                "pre_tool_use_write.json",
                "pre_tool_use_mcp.json",
                "post_tool_use.json",
                "user_prompt_submit.json",
                "session_start.json",
            ][..],
        ),
        (
            "cursor",
            &[
                "before_shell_execution.json",
                "before_mcp_execution.json",
                "before_read_file.json",
                "before_submit_prompt.json",
                "after_shell_execution.json",
                "after_mcp_execution.json",
                "after_file_edit.json",
                "stop.json",
            ][..],
        ),
    ] {
        let (full, small) = (World::new(), World::new());
        for name in names {
            let a = full.hook(client, &full.fixture(client, name), &["--authoritative"]);
            let b = small.small_hook(client, &small.fixture(client, name), &["--authoritative"]);
            let same = |s: &str, w: &World| s.replace(&w.base().display().to_string(), "<base>");
            assert_eq!(
                (a.code, same(&a.stdout, &full)),
                (b.code, same(&b.stdout, &small)),
                "{client} {name}: {a:?} / {b:?}"
            );
        }
        assert!(
            small.broker_pid().is_some(),
            "the small hook started the broker"
        );
    }
    // Garbage on stdin: the client's deny, exit 2, from the small executable too.
    let w = World::new();
    let r = w.small_hook("claude-code", &serde_json::json!("garbage"), &[]);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert_eq!(r.json()["hookSpecificOutput"]["permissionDecision"], "deny");
}

#[test]
fn cursor_fixtures() {
    let w = World::new();
    let hook = |name: &str, extra: &[&str]| w.hook("cursor", &w.fixture("cursor", name), extra);

    // Cursor has no "no decision" on a permission event (an answer without `permission`
    // blocks): an allow is `permission: allow`, authoritative or not.
    let r = hook("before_shell_execution.json", &[]);
    assert_eq!(
        (r.code, r.json()),
        (Some(0), json!({"permission": "allow"})),
        "{r:?}"
    );
    let r = hook("before_shell_execution.json", &["--authoritative"]);
    assert_eq!(
        (r.code, r.json()),
        (Some(0), json!({"permission": "allow"})),
        "{r:?}"
    );

    let r = hook("before_mcp_execution.json", &[]);
    assert_eq!(r.code, Some(0), "{r:?}");
    let out = r.json();
    assert_eq!(out["permission"], "ask");
    assert!(
        out["user_message"]
            .as_str()
            .unwrap()
            .contains("database_query"),
        "{out}"
    );
    assert_eq!(out["agent_message"], out["user_message"]);

    let r = hook("before_read_file.json", &[]);
    assert_eq!(r.code, Some(2), "{r:?}");
    let out = r.json();
    assert_eq!(out["permission"], "deny");
    assert!(
        out["agent_message"]
            .as_str()
            .unwrap()
            .contains("protect-secrets"),
        "{out}"
    );

    let r = hook("before_submit_prompt.json", &[]);
    assert_eq!(
        (r.code, r.json()),
        (Some(0), json!({"continue": true})),
        "{r:?}"
    );

    for name in [
        "after_shell_execution.json",
        "after_mcp_execution.json",
        "after_file_edit.json",
        "stop.json",
    ] {
        let r = hook(name, &[]);
        assert_eq!((r.code, r.json()), (Some(0), json!({})), "{name}: {r:?}");
    }
}

/// Every decision a hook asks for is in the workspace's audit log (as `wrap` records one:
/// operations, resources, effect, rule, never the arguments), and the chain verifies.
#[test]
fn hook_decisions_are_audited() {
    let w = World::new();
    let r = w.hook(
        "claude-code",
        &w.fixture("claude-code", "pre_tool_use_write.json"),
        &[],
    );
    assert_eq!(r.code, Some(2), "{r:?}");
    let r = w.hook(
        "cursor",
        &w.fixture("cursor", "before_shell_execution.json"),
        &[],
    );
    assert_eq!(r.code, Some(0), "{r:?}");
    // Events that decide nothing write nothing.
    w.hook(
        "claude-code",
        &w.fixture("claude-code", "user_prompt_submit.json"),
        &[],
    );
    let log = w.project().join(".toolgate/audit.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r["kind"] == "decision")
        .collect();
    assert_eq!(records.len(), 2, "{text}");
    assert_eq!(records[0]["tool"], "Write");
    assert_eq!(records[0]["effect"], "deny");
    assert_eq!(records[0]["rule"], "protect-secrets");
    assert_eq!(records[0]["operations"], json!(["fs.write"]));
    assert_eq!(records[1]["tool"], "Shell");
    assert_eq!(records[1]["effect"], "allow");
    assert!(
        !text.contains("changeme"),
        "arguments leaked into the log: {text}"
    );
    let verify = w
        .cmd(&["audit", "verify", "--audit"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(verify.status.success(), "{verify:?}");
}

/// A decision that cannot be recorded is denied (no record, no call), like `wrap`'s.
#[test]
fn an_audit_log_that_cannot_be_written_denies() {
    let w = World::new();
    let blocker = w.base().join("file");
    std::fs::write(&blocker, "x").unwrap();
    let audit = blocker.join("audit.jsonl");
    let r = w.hook(
        "claude-code",
        &w.fixture("claude-code", "pre_tool_use_bash.json"),
        &["--audit", audit.to_str().unwrap()],
    );
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("cannot record"), "{r:?}");
}
