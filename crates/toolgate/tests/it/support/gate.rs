//! The test harness shared by the `enforce_*` tests: `toolgate wrap` in front of the demo MCP
//! server (which records every line it receives), in a temp workspace with a fake home.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; helpers shared by several tests, not every one uses every helper"
)]

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use toolgate_testkit::{Peer, read_record};

/// The policy most enforce tests run under.
pub const POLICY: &str = r#"
version: 1
default: ask
packs: []
rules:
  - id: protect-secrets
    effect: deny
    operations: [fs.read, fs.write, fs.delete]
    resources: ["${home}/.ssh/**", "**/.env"]
  - id: allow-workspace-read
    effect: allow
    operations: [fs.read]
    resources: ["${workspace}/**"]
tools:
  read_file:
    operation: fs.read
    path_params: [path]
  run_command:
    command_param: command
"#;

pub struct Gate {
    pub peer: Peer,
    pub dir: tempfile::TempDir,
    sync_n: u64,
}

impl Gate {
    pub fn start(policy: &str, extra: &[&str]) -> Gate {
        Gate::start_with(policy, extra, false)
    }

    pub fn start_with(policy: &str, extra: &[&str], capture_stderr: bool) -> Gate {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("work")).unwrap();
        std::fs::create_dir_all(base.join("home/.ssh")).unwrap();
        std::fs::create_dir_all(base.join("pins")).unwrap();
        std::fs::write(base.join("home/.ssh/id_rsa"), "FAKE KEY").unwrap();
        std::fs::write(base.join("work/notes.txt"), "hello").unwrap();
        std::fs::write(base.join("outside.txt"), "outside the workspace").unwrap();
        let policy_path = base.join("policy.yaml");
        std::fs::write(&policy_path, policy).unwrap();
        let exe = env!("CARGO_BIN_EXE_toolgate");
        let mut cmd = Command::new(exe);
        cmd.arg("wrap")
            .arg("--workspace")
            .arg(base.join("work"))
            .arg("--policy")
            .arg(&policy_path);
        if !extra.contains(&"--audit") {
            cmd.arg("--audit").arg(base.join("audit.jsonl"));
        }
        cmd.args(extra)
            .arg("--")
            .arg(exe)
            .args(["demo", "--internal-server", "--workspace"])
            .arg(base.join("work"))
            .arg("--outbox")
            .arg(base.join("outbox"))
            .arg("--record")
            .arg(base.join("record"))
            .env("HOME", base.join("home"))
            .env("TOOLGATE_PINS_DIR", base.join("pins"));
        Gate {
            peer: Peer::spawn(cmd, capture_stderr),
            dir,
            sync_n: 0,
        }
    }

    pub fn base(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    pub fn record(&self) -> Vec<Vec<u8>> {
        read_record(&self.base().join("record"))
    }

    pub fn upstream_saw(&self) -> String {
        self.record()
            .iter()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn send(&mut self, v: Value) {
        self.peer.send(serde_json::to_vec(&v).unwrap());
    }

    pub fn init(&mut self, capabilities: Value) {
        self.send(
            json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":capabilities,
            "clientInfo":{"name":"enforce-test","version":"0"}}}),
        );
        let r = self.recv_response(&json!("init"));
        assert!(r.get("result").is_some(), "{r}");
        self.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        self.list_tools();
    }

    /// Lists every page of tools (pins them), like a real client before its first call.
    pub fn list_tools(&mut self) -> Vec<Value> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for n in 0..20 {
            let id = json!(format!("list-{n}"));
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            self.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":params}));
            let r = self.recv_response(&id);
            tools.extend(r["result"]["tools"].as_array().unwrap().iter().cloned());
            cursor = r["result"]["nextCursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                return tools;
            }
        }
        panic!("tools/list did not end");
    }

    pub fn call(&mut self, id: i64, tool: &str, args: Value) {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                         "params":{"name":tool,"arguments":args}}));
    }

    /// The next message that is a response to `id` (notifications are skipped; a request
    /// from toolgate fails the test).
    pub fn recv_response(&mut self, id: &Value) -> Value {
        loop {
            let m = self.peer.recv_json();
            if m.get("method").is_some() && m.get("id").is_some() {
                panic!("unexpected request while waiting for {id}: {m}");
            }
            if m.get("id") == Some(id) {
                return m;
            }
        }
    }

    /// The next request toolgate sends to the client (an elicitation).
    pub fn recv_request(&mut self) -> Value {
        loop {
            let m = self.peer.recv_json();
            if m.get("method").is_some() && m.get("id").is_some() {
                return m;
            }
            assert!(
                m.get("id").is_none(),
                "a response arrived before the prompt: {m}"
            );
        }
    }

    /// The next notification with `method` (responses in between fail the test).
    pub fn recv_notification(&mut self, method: &str) -> Value {
        loop {
            let m = self.peer.recv_json();
            assert!(m.get("id").is_none(), "expected {method}, got {m}");
            if m["method"] == method {
                return m;
            }
        }
    }

    pub fn answer(&mut self, request: &Value, result: Value) {
        self.send(json!({"jsonrpc":"2.0","id":request["id"].clone(),"result":result}));
    }

    /// A round trip through toolgate that nothing records: an invalid request it answers
    /// itself. toolgate handles one message at a time, so when the answer arrives, the
    /// result records it writes just after delivering a result are written.
    pub fn sync(&mut self) {
        self.sync_n += 1;
        let id = json!(format!("gate-sync-{}", self.sync_n));
        self.send(json!({"jsonrpc": "2.0", "id": id.clone(), "method": 0}));
        let r = self.recv_response(&id);
        assert_eq!(r["error"]["code"], -32600, "{r}");
    }

    /// The audit records once every result delivered so far is recorded.
    pub fn synced_audit(&mut self) -> Vec<Value> {
        self.sync();
        self.audit()
    }

    /// The audit records written so far.
    pub fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.base().join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

pub fn text(response: &Value) -> String {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

pub fn is_denied(response: &Value) -> bool {
    response["result"]["isError"] == true && text(response).starts_with("toolgate blocked")
}

pub fn accept(choice: &str) -> Value {
    json!({"action":"accept","content":{"decision":choice}})
}
