//! The real Qwen Code (`@qwen-code/qwen-code`, pinned in tests/package.json) with toolgate's
//! hooks installed by `toolgate init --client qwen-code --hooks`, driven offline by a
//! scripted mock of OpenAI's Chat Completions API (`support::agent_cli`). `--yolo` turns
//! Qwen Code's own approvals off, so toolgate alone decides.

use crate::support::agent_cli::Agent;

#[test]
fn a_key_read_by_a_shell_command_never_runs_and_an_allowed_command_does() {
    let Some(qwen) = Agent::qwen_code() else {
        return;
    };
    qwen.check_key_never_read_and_allowed_command_runs();
}

#[test]
fn a_hook_executable_deleted_after_init_leaves_the_tool_not_run() {
    let Some(qwen) = Agent::qwen_code() else {
        return;
    };
    qwen.check_deleted_hook_leaves_the_tool_not_run();
}
