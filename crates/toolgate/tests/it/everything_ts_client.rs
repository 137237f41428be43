//! The official TypeScript SDK client (`@modelcontextprotocol/sdk`) talking to the real
//! server-everything through `toolgate wrap`: `tests/ts-client/everything.mjs` does
//! tools/list, two tool calls and a prompt and prints a JSON summary, which must equal the
//! summary of the same script run against the server directly.
//!
//! Needs `npm ci --prefix tests` (run by `scripts/test`).

use crate::common;

use std::ffi::OsString;
use std::process::Stdio;

use common::{Route, ServerCmd, assert_same_transcript, launch, repo_root, text_of};
use serde_json::Value;

async fn run_ts_client(node: &std::path::Path, route: Route, server: &ServerCmd) -> Value {
    let script = repo_root()
        .join("tests")
        .join("ts-client")
        .join("everything.mjs");
    let mut command: Vec<OsString> = vec![script.into_os_string()];
    let launch = launch(route, server).unwrap();
    command.extend(launch.argv.iter().cloned());
    let output = tokio::time::timeout(
        common::STEP_TIMEOUT * 2,
        tokio::process::Command::new(node)
            .args(&command)
            .current_dir(&server.cwd)
            .envs(launch.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| {
        panic!(
            "the TypeScript client did not finish in time ({})",
            route.label()
        )
    })
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the TypeScript client failed ({}): {}\nstdout: {stdout}",
        route.label(),
        output.status
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|err| {
        panic!(
            "no JSON summary from the TypeScript client ({}): {err}\n{stdout}",
            route.label()
        )
    })
}

#[tokio::test]
async fn typescript_sdk_client_through_toolgate() {
    let Some(server) = common::everything_server() else {
        return;
    };
    // `node_and` already verified node and the SDK are installed.
    let (node, _) = common::node_and("@modelcontextprotocol/sdk/package.json").unwrap();

    let (direct, wrapped) = tokio::join!(
        run_ts_client(&node, Route::Direct, &server),
        run_ts_client(&node, Route::Toolgate, &server),
    );

    assert_eq!(direct["server"]["name"], "mcp-servers/everything");
    let tools: Vec<&str> = direct["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"echo") && tools.contains(&"get-sum"),
        "{tools:?}"
    );
    assert_eq!(
        text_of(&direct["echo"]),
        "Echo: hello from the TypeScript SDK ✓"
    );
    assert!(text_of(&direct["sum"]).contains("42"));
    let prompt = serde_json::to_string(&direct["prompt"]).unwrap();
    assert!(
        prompt.contains("Lisbon") && prompt.contains("Lisboa"),
        "{prompt}"
    );

    assert_same_transcript(
        std::slice::from_ref(&direct),
        std::slice::from_ref(&wrapped),
    );
}
