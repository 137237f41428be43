//! `output: {redact: secrets}` through `toolgate wrap`: a tool result holding secrets of a
//! known shape reaches the client with `[REDACTED: …]` in their place (text content and
//! `structuredContent`), the same JSON-RPC id, and a result record in the audit naming the
//! shapes and their count, never the values. A result without a secret, and every result
//! when redaction is off, passes byte for byte.
//!
//! `fake_upstream` answers a `tools/call` whose `result` argument is a string with that text
//! as the result, verbatim, so the test knows the exact bytes the server sent. The secrets
//! are fake, built at run time.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use toolgate_testkit::{Peer, bin_path};

const REDACTING: &str = r#"
version: 1
default: allow
packs: []
tools:
  x:
    output: {redact: secrets}
"#;

const REDACTING_ALL: &str = "version: 1\ndefault: allow\npacks: []\nredact_output: secrets\n";

const PLAIN: &str = "version: 1\ndefault: allow\npacks: []\n";

struct Wrapped {
    peer: Peer,
    dir: tempfile::TempDir,
}

impl Wrapped {
    fn start(policy: &str) -> Wrapped {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        for d in ["work", "home", "pins"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("policy.yaml"), policy).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        cmd.arg("wrap")
            .arg("--workspace")
            .arg(base.join("work"))
            .arg("--policy")
            .arg(base.join("policy.yaml"))
            .arg("--audit")
            .arg(base.join("audit.jsonl"))
            .arg("--")
            .arg(bin_path("fake_upstream"))
            .env("HOME", base.join("home"))
            .env("TOOLGATE_PINS_DIR", base.join("pins"));
        let mut w = Wrapped {
            peer: Peer::spawn(cmd, false),
            dir,
        };
        w.send(
            &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"redact-test","version":"0"}}}),
        );
        assert!(w.recv().get("result").is_some());
        w.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        w.send(&json!({"jsonrpc":"2.0","id":"list","method":"tools/list","params":{}}));
        assert!(w.recv()["result"]["tools"].is_array());
        w
    }

    fn base(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    fn send(&mut self, v: &Value) {
        self.peer.send(serde_json::to_vec(v).unwrap());
    }

    fn recv(&mut self) -> Value {
        self.peer.recv_json()
    }

    /// Calls `x` with raw id `id`, the server answering with `result` (JSON text, verbatim):
    /// the exact line the client receives.
    fn call_raw(&mut self, id: &str, result: &str) -> String {
        let args = json!({"result": result});
        self.peer.send(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"x","arguments":{args}}}}}"#
        ));
        self.peer.recv_str()
    }

    /// The audit records once everything delivered so far is recorded (a round trip
    /// toolgate answers itself comes after them).
    fn synced_audit(&mut self) -> (String, Vec<Value>) {
        self.send(&json!({"jsonrpc": "2.0", "id": "sync", "method": 0}));
        assert_eq!(self.recv()["error"]["code"], -32600);
        let text = std::fs::read_to_string(self.base().join("audit.jsonl")).unwrap();
        let records = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (text, records)
    }
}

fn github_token() -> String {
    format!("ghp_{}", "FakeToken0".repeat(4).get(..36).unwrap())
}

fn aws_key() -> String {
    format!("AKIA{}", "FAKEEXAMPLEFAKEE")
}

/// A result with odd spacing (what a re-serialisation would change), holding two GitHub
/// tokens and an AWS key.
fn secret_result() -> String {
    let gh = github_token();
    let aws = aws_key();
    format!(
        r#"{{ "content" : [ {{"type":"text", "text":"token {gh}\nkey {aws}"}}, {{"type":"image","data":"aGVsbG8=","mimeType":"image/png"}} ], "structuredContent" : {{"token": "{gh}", "n": 1}}, "isError" : false }}"#
    )
}

#[test]
fn a_redacting_tool_result_reaches_the_client_without_its_secrets() {
    for policy in [REDACTING, REDACTING_ALL] {
        let mut w = Wrapped::start(policy);
        let line = w.call_raw(r#""call-1""#, &secret_result());
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["id"], "call-1", "{line}");
        assert!(!line.contains(&github_token()), "{line}");
        assert!(!line.contains(&aws_key()), "{line}");
        assert_eq!(
            v["result"]["content"][0]["text"],
            "token [REDACTED: GitHub token]\nkey [REDACTED: AWS access key ID]"
        );
        assert_eq!(
            v["result"]["structuredContent"]["token"],
            "[REDACTED: GitHub token]"
        );
        // What is not text is left alone.
        assert_eq!(v["result"]["content"][1]["data"], "aGVsbG8=");
        assert_eq!(v["result"]["isError"], false);

        // A result without a secret passes byte for byte.
        let clean =
            r#"{ "content" : [ {"type":"text","text":"nothing to see"} ],"isError":false }"#;
        let line = w.call_raw("2", clean);
        assert_eq!(
            line,
            format!(r#"{{"jsonrpc":"2.0","id":2,"result":{clean}}}"#)
        );

        let (text, audit) = w.synced_audit();
        assert!(!text.contains(&github_token()), "the audit holds the token");
        assert!(!text.contains(&aws_key()), "the audit holds the key");
        let record = audit
            .iter()
            .find(|a| a["kind"] == "result" && a["request_id"] == r#""call-1""#)
            .unwrap_or_else(|| panic!("no result record: {audit:?}"));
        assert_eq!(
            record["redactions"],
            json!([{"shape": "GitHub token", "count": 2}, {"shape": "AWS access key ID", "count": 1}]),
            "{record}"
        );
        let clean_record = audit
            .iter()
            .find(|a| a["kind"] == "result" && a["request_id"] == "2")
            .unwrap();
        assert!(clean_record.get("redactions").is_none(), "{clean_record}");
    }
}

#[test]
fn without_redaction_a_result_with_secrets_passes_byte_for_byte() {
    let mut w = Wrapped::start(PLAIN);
    let result = secret_result();
    let line = w.call_raw("3", &result);
    assert_eq!(
        line,
        format!(r#"{{"jsonrpc":"2.0","id":3,"result":{result}}}"#)
    );
    let (_, audit) = w.synced_audit();
    assert!(
        audit.iter().all(|a| a.get("redactions").is_none()),
        "{audit:?}"
    );
}
