//! The real OpenCode (`opencode-ai`, pinned in tests/package.json) with the plugin `toolgate
//! init --client opencode --hooks` writes (`.opencode/plugin/toolgate.js`), driven offline by
//! a scripted mock of OpenAI's Chat Completions API (an `@ai-sdk/openai-compatible`
//! provider; `support::agent_cli`). `opencode run` asks for no approval, so toolgate alone
//! decides.

use std::path::Path;

use crate::support::agent_cli::Agent;
use crate::support::hooks::World;

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
    let w = World::with_policy("version: 1\ndefault: ask\n");
    let policy = w.policy();
    let exe = Path::new(env!("CARGO_BIN_EXE_toolgate"));
    let w = opencode.world_with(w, exe, &["--policy", policy.to_str().unwrap()]);
    let script = vec![opencode.shell_call("echo ran > canary.txt")];
    let (mock, out) = opencode.run(&w, "write the canary", script, &[]);
    assert!(!w.project().join("canary.txt").exists(), "{out}");
    let results = mock.tool_results();
    assert_eq!(results.len(), 1, "{results:?}\n{out}");
    assert!(
        results[0].contains("default is ask") && results[0].contains("cannot ask"),
        "{results:?}"
    );
}
