//! The real Qwen Code (`@qwen-code/qwen-code`, pinned in tests/package.json) with toolgate's
//! hooks installed by `toolgate init --client qwen-code --hooks`, driven offline by a
//! scripted mock of OpenAI's Chat Completions API (`support::model_mock`). `--yolo` turns
//! Qwen Code's own approvals off, so toolgate alone decides; canary files prove whether a
//! command ran, and the mock's log what the model saw.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions"
)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::common;
use crate::support::hooks::World;
use crate::support::model_mock::{MockModel, ToolCall, call};

/// A whole headless Qwen Code run, hooks and broker start included.
const RUN_LIMIT: Duration = Duration::from_secs(120);

const KEY: &str = "PRIVATE-KEY-CANARY-4420";

/// `tests/node_modules/.bin/qwen`, or `None` (after saying why) when node is absent outside
/// CI.
fn qwen() -> Option<PathBuf> {
    common::node_and("@qwen-code/qwen-code/package.json")?;
    let bin = common::node_modules().join(".bin/qwen");
    assert!(
        bin.exists(),
        "`{}` is missing\nhelp: run `npm ci --prefix tests` (scripts/test does it for you)",
        bin.display()
    );
    Some(bin)
}

/// A world whose home holds an SSH key and Qwen Code's settings (the OpenAI-compatible
/// provider), with toolgate's hooks installed in the project by `toolgate` at `exe`.
fn world_with_hooks(exe: &Path) -> World {
    let w = World::new();
    let home = w.base().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), format!("{KEY}\n")).unwrap();
    std::fs::create_dir_all(home.join(".qwen")).unwrap();
    std::fs::write(
        home.join(".qwen/settings.json"),
        json!({"security": {"auth": {"selectedType": "openai"}}}).to_string(),
    )
    .unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "init",
            "--client",
            "qwen-code",
            "--hooks",
            "--scope",
            "project",
            "--yes",
        ])
        .current_dir(w.project())
        .env("HOME", &home)
        .env("TOOLGATE_BROKER_DIR", &w.broker_dir)
        .env_remove("TOOLGATE_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    w
}

/// Runs Qwen Code headless in the world's project with `prompt`, against a mock that answers
/// with `script`; returns the mock (its log) and Qwen Code's output.
fn run_qwen(bin: &Path, w: &World, prompt: &str, script: Vec<ToolCall>) -> (MockModel, String) {
    let mock = MockModel::openai_chat(script);
    let mut cmd = assert_cmd::Command::new(bin);
    cmd.args(["-p", prompt, "--yolo"])
        .current_dir(w.project())
        .env("HOME", w.base().join("home"))
        .env("TOOLGATE_BROKER_DIR", &w.broker_dir)
        .env_remove("TOOLGATE_LOG")
        .env("OPENAI_BASE_URL", format!("{}/v1", mock.url))
        .env("OPENAI_API_KEY", "sk-test-not-a-key")
        .env("OPENAI_MODEL", "mock")
        .env("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1")
        .write_stdin("")
        .timeout(RUN_LIMIT);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "qwen failed: {out:?}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (mock, stdout)
}

#[test]
fn a_key_read_by_a_shell_command_never_runs_and_an_allowed_command_does() {
    let Some(bin) = qwen() else { return };
    let w = world_with_hooks(Path::new(env!("CARGO_BIN_EXE_toolgate")));
    let script = vec![
        call(
            "run_shell_command",
            json!({"command": "cat ~/.ssh/id_rsa > leaked.txt; cat leaked.txt", "description": "read the key"}),
        ),
        call(
            "run_shell_command",
            json!({"command": "echo ran > canary.txt", "description": "write a file"}),
        ),
    ];
    let (mock, out) = run_qwen(&bin, &w, "set up my project", script);
    assert!(!w.project().join("leaked.txt").exists(), "{out}");
    assert!(
        !mock.saw(KEY),
        "the model saw the key: {:?}",
        mock.requests()
    );
    let results = mock.tool_results();
    assert_eq!(results.len(), 2, "{results:?}\n{out}");
    assert!(
        results[0].contains("toolgate") && results[0].contains("protect-keys"),
        "{results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(w.project().join("canary.txt")).unwrap(),
        "ran\n",
        "{results:?}"
    );
}

#[test]
fn a_hook_executable_deleted_after_init_leaves_the_tool_not_run() {
    let Some(bin) = qwen() else { return };
    let place = tempfile::tempdir().unwrap();
    let dir = place.path().canonicalize().unwrap();
    for exe in ["toolgate", "toolgate-hook"] {
        let from = Path::new(env!("CARGO_BIN_EXE_toolgate")).with_file_name(exe);
        std::fs::copy(from, dir.join(exe)).unwrap();
    }
    let w = world_with_hooks(&dir.join("toolgate"));
    let settings = w.project().join(".qwen/settings.json");
    let text = std::fs::read_to_string(&settings).unwrap();
    std::fs::remove_file(dir.join("toolgate-hook")).unwrap();
    std::fs::remove_file(dir.join("toolgate")).unwrap();
    let script = || {
        vec![call(
            "run_shell_command",
            json!({"command": "echo ran > canary.txt", "description": "write a file"}),
        )]
    };
    let (mock, out) = run_qwen(&bin, &w, "write the canary", script());
    assert!(!w.project().join("canary.txt").exists(), "{out}");
    assert!(mock.tool_results().is_empty(), "{:?}", mock.requests());
    // Without the fail-closed end, Qwen Code runs the tool (exit 127 does not block).
    std::fs::write(&settings, text.replace(" || exit 2", "")).unwrap();
    let (_mock, out) = run_qwen(&bin, &w, "write the canary", script());
    assert!(w.project().join("canary.txt").exists(), "{out}");
}
