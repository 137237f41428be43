//! Approvals through a real rmcp client that supports elicitation: toolgate's
//! `elicitation/create` must be understood by an SDK client, and its answer obeyed.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::{ClientAnswers, RecordingClient, model};
use rmcp::ServiceExt;
use serde_json::{Value, json};

const POLICY: &str = r#"
version: 1
default: ask
packs: []
tools:
  run_command:
    command_param: command
"#;

async fn call_with_answer(answer: Value) -> (Value, Vec<Value>, String) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(base.join("work")).unwrap();
    std::fs::write(base.join("policy.yaml"), POLICY).unwrap();
    let exe = env!("CARGO_BIN_EXE_toolgate");
    let mut child = tokio::process::Command::new(exe)
        .args(["wrap", "--approval", "client", "--workspace"])
        .arg(base.join("work"))
        .arg("--policy")
        .arg(base.join("policy.yaml"))
        .arg("--audit")
        .arg(base.join("audit.jsonl"))
        .args(["--", exe, "demo", "--internal-server", "--workspace"])
        .arg(base.join("work"))
        .arg("--outbox")
        .arg(base.join("outbox"))
        .arg("--record")
        .arg(base.join("record"))
        .env("HOME", &base)
        .env("TOOLGATE_PINS_DIR", base.join("pins"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let handler = RecordingClient::new(ClientAnswers {
        elicitation: answer,
        ..ClientAnswers::default()
    });
    let events = handler.events.clone();
    let limit = Duration::from_secs(20);
    let client = tokio::time::timeout(limit, handler.serve((stdout, stdin)))
        .await
        .expect("initialize in time")
        .expect("initialize");
    let peer = client.peer().clone();
    tokio::time::timeout(limit, peer.list_all_tools())
        .await
        .unwrap()
        .unwrap();
    let result = tokio::time::timeout(
        limit,
        peer.call_tool(model(json!({
            "name": "run_command",
            "arguments": {"command": "npm install"}
        }))),
    )
    .await
    .expect("tools/call answered in time")
    .expect("tools/call result");
    let result = serde_json::to_value(&result).unwrap();
    let record = std::fs::read_to_string(base.join("record")).unwrap_or_default();
    let _ = client.cancel().await;
    (result, events.snapshot(), record)
}

fn prompts(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "request elicitation/create")
        .collect()
}

#[tokio::test]
async fn an_sdk_client_accepting_the_prompt_lets_the_call_through() {
    let (result, events, record) =
        call_with_answer(json!({"action": "accept", "content": {"decision": "allow_once"}})).await;
    let asked = prompts(&events);
    assert_eq!(asked.len(), 1, "{events:?}");
    assert!(
        asked[0]["params"]["message"]
            .as_str()
            .unwrap()
            .contains("npm install"),
        "{:?}",
        asked[0]
    );
    assert_ne!(result["isError"], true, "{result}");
    assert!(record.contains("npm install"), "{record}");
}

#[tokio::test]
async fn an_sdk_client_declining_the_prompt_gets_a_denial() {
    let (result, events, record) = call_with_answer(json!({"action": "decline"})).await;
    assert_eq!(prompts(&events).len(), 1, "{events:?}");
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("toolgate blocked run_command"),
        "{result}"
    );
    assert!(!record.contains("npm install"), "{record}");
}
