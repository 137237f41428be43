//! Nothing reaches the server without a verdict, however a sloppy server would read it.
//!
//! `toolgate wrap` in front of `sloppy_upstream`, a server that executes every
//! `tools/call`, `resources/read` and `prompts/get` it can make out (with or without an id,
//! whatever the case of the method or of the member names, lines split at `\r` too) and
//! records each one it ran. Every attack is followed by an allowed call, whose answer proves
//! the upstream has read everything sent before; then its record must hold only the allowed
//! calls.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use toolgate_testkit::{Peer, bin_path, read_record};

/// Everything is denied but the harmless `echo`.
const POLICY: &str = r#"
version: 1
default: deny
packs: []
rules:
  - id: allow-echo
    effect: allow
    operations: [unknown]
    tools: [echo]
"#;

/// `read_file` asks (for the 2026-07-28 `input_required` retry path).
const ASK_POLICY: &str = r#"
version: 1
default: deny
packs: []
rules:
  - id: allow-echo
    effect: allow
    operations: [unknown]
    tools: [echo]
  - id: ask-read
    effect: ask
    operations: [fs.read]
    tools: [read_file]
"#;

struct Sloppy {
    peer: Peer,
    dir: tempfile::TempDir,
    next: i64,
}

impl Sloppy {
    fn start(policy: &str, extra: &[&str]) -> Sloppy {
        Sloppy::start_as(policy, extra, json!({}))
    }

    /// Started by a client with `capabilities`.
    fn start_as(policy: &str, extra: &[&str], capabilities: Value) -> Sloppy {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("work")).unwrap();
        std::fs::create_dir_all(base.join("home")).unwrap();
        std::fs::create_dir_all(base.join("pins")).unwrap();
        std::fs::write(base.join("policy.yaml"), policy).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        cmd.arg("wrap")
            .arg("--workspace")
            .arg(base.join("work"))
            .arg("--policy")
            .arg(base.join("policy.yaml"))
            .arg("--audit")
            .arg(base.join("audit.jsonl"))
            .args(extra)
            .arg("--")
            .arg(bin_path("sloppy_upstream"))
            .arg("--record")
            .arg(base.join("record"))
            .env("HOME", base.join("home"))
            .env("TOOLGATE_PINS_DIR", base.join("pins"));
        let mut s = Sloppy {
            peer: Peer::spawn(cmd, false),
            dir,
            next: 1000,
        };
        s.send(
            json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":capabilities,
            "clientInfo":{"name":"unjudged-test","version":"0"}}}),
        );
        assert!(s.recv_response(&json!("init")).get("result").is_some());
        s.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        s.send(json!({"jsonrpc":"2.0","id":"list","method":"tools/list","params":{}}));
        let r = s.recv_response(&json!("list"));
        assert_eq!(r["result"]["tools"].as_array().unwrap().len(), 2, "{r}");
        s
    }

    fn base(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    fn send(&mut self, v: Value) {
        self.peer.send(serde_json::to_vec(&v).unwrap());
    }

    fn send_line(&mut self, line: &str) {
        self.peer.send(line.as_bytes());
    }

    /// The next frame, which must answer `id`.
    fn recv_response(&mut self, id: &Value) -> Value {
        let m = self.peer.recv_json();
        assert!(
            m.get("method").is_none(),
            "unexpected message from toolgate: {m}"
        );
        assert_eq!(m.get("id"), Some(id), "an answer to something else: {m}");
        m
    }

    /// An allowed call: its answer means the upstream has read everything sent before it.
    fn allowed_call(&mut self) {
        self.next += 1;
        let id = json!(self.next);
        self.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                         "params":{"name":"echo","arguments":{"n":self.next}}}));
        let r = self.recv_response(&id);
        assert_eq!(r["result"]["content"][0]["text"], "ran echo", "{r}");
    }

    /// What the upstream executed.
    fn executed(&self) -> Vec<Value> {
        read_record(&self.base().join("record"))
            .iter()
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    }

    /// Ends an attack: after an allowed call, the upstream executed only allowed calls.
    fn assert_nothing_unjudged_ran(&mut self, attack: &str) {
        self.allowed_call();
        for ran in self.executed() {
            assert!(
                ran["method"] == "tools/call" && ran["name"] == "echo",
                "{attack}: the upstream executed an unjudged call: {ran}"
            );
        }
    }

    /// No frame arrives (a notification gets no reply): the next one answers the allowed call.
    fn assert_no_reply_then_nothing_ran(&mut self, attack: &str) {
        self.next += 1;
        let id = json!(self.next);
        self.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                         "params":{"name":"echo","arguments":{}}}));
        let m = self.peer.recv_json();
        assert_eq!(
            m["id"], id,
            "{attack}: toolgate replied to a notification: {m}"
        );
        for ran in self.executed() {
            assert!(
                ran["method"] == "tools/call" && ran["name"] == "echo",
                "{attack}: the upstream executed an unjudged call: {ran}"
            );
        }
    }

    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.base().join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn read_shadow() -> Value {
    json!({"name":"read_file","arguments":{"path":"/etc/shadow"}})
}

#[test]
fn allowed_calls_pass_and_denied_calls_do_not_reach_the_sloppy_upstream() {
    let mut s = Sloppy::start(POLICY, &["--approval", "none"]);
    s.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":read_shadow()}));
    let r = s.recv_response(&json!(1));
    assert_eq!(r["result"]["isError"], true, "{r}");
    s.assert_nothing_unjudged_ran("a denied call");
    let ran = s.executed();
    assert_eq!(ran.len(), 1, "{ran:?}");
    assert_eq!(ran[0]["name"], "echo");
}

#[test]
fn a_judged_method_without_an_id_is_never_forwarded_and_is_audited() {
    let mut s = Sloppy::start(POLICY, &["--approval", "none"]);
    let attacks = [
        json!({"jsonrpc":"2.0","method":"tools/call","params":read_shadow()}),
        // Even a call the policy would allow: without an id it cannot be answered.
        json!({"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{}}}),
        json!({"jsonrpc":"2.0","method":"resources/read","params":{"uri":"file:///etc/shadow"}}),
        json!({"jsonrpc":"2.0","method":"prompts/get","params":{"name":"leak"}}),
        json!({"jsonrpc":"2.0","method":"tools/list"}),
        // Escaped spellings of the same method are the same method.
        json!({"jsonrpc":"2.0","method":"tools\u{2f}call","params":read_shadow()}),
    ];
    for attack in &attacks {
        s.send(attack.clone());
        s.assert_no_reply_then_nothing_ran(&attack.to_string());
    }
    s.send_line(r#"{"jsonrpc":"2.0","method":"tools\/call","params":{"name":"read_file","arguments":{"path":"/etc/shadow"}}}"#);
    s.assert_no_reply_then_nothing_ran("an escaped slash");
    s.send_line(r#"{"jsonrpc":"2.0","method":"\u0074ools/call","params":{"name":"read_file","arguments":{"path":"/etc/shadow"}}}"#);
    s.assert_no_reply_then_nothing_ran("a unicode escape");

    let audit = s.audit();
    let refused: Vec<&Value> = audit
        .iter()
        .filter(|r| {
            r["kind"] == "decision"
                && r["effect"] == "deny"
                && r["reason"]
                    .as_str()
                    .is_some_and(|t| t.contains("without an id"))
        })
        .collect();
    assert_eq!(refused.len(), 8, "{audit:#?}");
    assert!(
        refused[0]["reason"]
            .as_str()
            .unwrap()
            .contains("a `tools/call` without an id is never forwarded"),
        "{:?}",
        refused[0]
    );
    assert_eq!(refused[0]["tool"], "tools/call");
    assert_eq!(refused[2]["tool"], "resources/read");
    assert_eq!(refused[3]["tool"], "prompts/get");
}

#[test]
fn a_judged_method_in_another_spelling_is_refused() {
    let mut s = Sloppy::start(POLICY, &["--approval", "none"]);
    let spellings = [
        "Tools/Call",
        "TOOLS/CALL",
        " tools/call",
        "tools/call ",
        "\ttools/call\n",
        "tools/call\u{0}",
        "tools/\u{200b}call",
        "tools/ call",
        "toolſ/call",
        "\u{feff}tools/call",
        "Resources/Read",
        "prompts/GET",
        "Tools/List",
    ];
    for (n, method) in spellings.iter().enumerate() {
        let id = json!(format!("odd-{n}"));
        s.send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":read_shadow()}));
        let r = s.recv_response(&id);
        assert_eq!(r["error"]["code"], -32600, "{method:?}: {r}");
        let message = r["error"]["message"].as_str().unwrap();
        let shown = method.escape_debug().to_string();
        assert!(
            message.contains(&format!("`{shown}`")),
            "{method:?}: {message}"
        );
        s.assert_nothing_unjudged_ran(method);
        // The same without an id: no reply, nothing runs.
        s.send(json!({"jsonrpc":"2.0","method":method,"params":read_shadow()}));
        s.assert_no_reply_then_nothing_ran(method);
    }
    assert!(
        s.audit()
            .iter()
            .any(|r| r["effect"] == "deny" && r["tool"] == "Tools/Call"),
        "{:#?}",
        s.audit()
    );
}

#[test]
fn member_names_in_another_letter_case_are_refused() {
    let mut s = Sloppy::start(POLICY, &["--approval", "none"]);
    let attacks = [
        // A Go server (encoding/json) reads the last member whose name matches in any case.
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call","params":{"name":"read_file","arguments":{"path":"/etc/shadow"}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}},"PARAMS":{"name":"read_file","arguments":{"path":"/etc/shadow"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"},"paramſ":{"name":"read_file"}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"ping","meth\u006fD":"tools/call","params":{"name":"read_file"}}"#,
        // The same member twice, plainly or escaped.
        r#"{"jsonrpc":"2.0","id":5,"method":"ping","method":"tools/call","params":{"name":"read_file"}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"ping","\u006dethod":"tools/call","params":{"name":"read_file"}}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"},"params":{"name":"read_file"}}"#,
    ];
    for (n, line) in attacks.iter().enumerate() {
        s.send_line(line);
        let r = s.recv_response(&json!(n + 1));
        assert_eq!(r["error"]["code"], -32600, "{line}: {r}");
        s.assert_nothing_unjudged_ran(line);
    }
}

#[test]
fn tool_call_params_in_another_letter_case_are_refused() {
    let mut s = Sloppy::start(POLICY, &["--approval", "none"]);
    let attacks = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","Name":"read_file","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{},"NAME":"read_file"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","name":"read_file","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///tmp/x","URI":"file:///etc/shadow"}}"#,
    ];
    for (n, line) in attacks.iter().enumerate() {
        s.send_line(line);
        let r = s.recv_response(&json!(n + 1));
        let refused = r["error"]["code"] == -32600 || r["result"]["isError"] == true;
        assert!(refused, "{line}: {r}");
        s.assert_nothing_unjudged_ran(line);
    }
}

#[test]
fn ids_of_every_type_are_judged_or_refused() {
    let mut s = Sloppy::start(POLICY, &["--approval", "none"]);
    let params = read_shadow().to_string();
    for id in [
        "1.5",
        "1e400",
        "-0",
        "18446744073709551616",
        r#""x""#,
        r#""""#,
        "true",
        "false",
        "{}",
        r#"{"a":1}"#,
        "[]",
        "[1]",
        "null",
        r#""\ud800""#,
    ] {
        s.send_line(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#
        ));
        // Numbers and strings are judged (denied, the id echoed byte for byte, so `1e400`
        // stays as it is); other ids are refused with a null id. Nothing runs.
        let line = String::from_utf8(s.peer.recv()).unwrap();
        let refused = line.contains(r#""isError":true"#) || line.contains(r#""code":-32600"#);
        assert!(refused, "id {id}: {line}");
        s.assert_nothing_unjudged_ran(id);
    }
}

#[test]
fn a_carriage_return_cannot_smuggle_a_second_message() {
    let mut s = Sloppy::start(POLICY, &["--approval", "none"]);
    // One JSON value to toolgate (`\r` is JSON whitespace); three lines to a server with
    // universal newlines, the middle one a tools/call.
    let smuggled = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/etc/shadow"}}}"#;
    for line in [
        format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\r{smuggled}\r}}"),
        format!("{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"x\":[1,\r{smuggled}\r]}}"),
    ] {
        s.send_line(&line);
        let r = s.peer.recv_json();
        assert_eq!(r["error"]["code"], -32600, "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("carriage return"),
            "{r}"
        );
        s.assert_nothing_unjudged_ran(&line);
    }
    // A CRLF line ending is still fine.
    s.peer
        .send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"crlf\",\"method\":\"ping\"}\r\n");
    let r = s.recv_response(&json!("crlf"));
    assert!(r.get("result").is_some(), "{r}");
}

#[test]
fn oversize_split_joined_and_batched_frames_are_never_forwarded_unjudged() {
    let mut s = Sloppy::start(
        POLICY,
        &["--approval", "none", "--max-message-bytes", "4096"],
    );
    // Oversize: refused with the id recovered from its start.
    let pad = "p".repeat(8000);
    s.send_line(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"read_file","arguments":{{"path":"/etc/shadow","pad":"{pad}"}}}}}}"#
    ));
    let r = s.recv_response(&json!(1));
    assert_eq!(r["error"]["code"], -32600, "{r}");
    s.assert_nothing_unjudged_ran("oversize");
    // Oversize without an id.
    s.send_line(&format!(
        r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"read_file","arguments":{{"path":"/etc/shadow","pad":"{pad}"}}}}}}"#
    ));
    let r = s.peer.recv_json();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    s.assert_nothing_unjudged_ran("oversize without an id");

    // Split across writes: judged as one message (denied).
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}}"#,
        read_shadow()
    );
    let (a, b) = call.split_at(call.len() / 2);
    s.peer.send_raw(a.as_bytes());
    s.peer.send_raw(b.as_bytes());
    s.peer.send_raw(b"\n");
    let r = s.recv_response(&json!(2));
    assert_eq!(r["result"]["isError"], true, "{r}");
    s.assert_nothing_unjudged_ran("split");

    // Two messages on one line: not JSON.
    s.send_line(&format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"ping"}}{{"jsonrpc":"2.0","method":"tools/call","params":{}}}"#,
        read_shadow()
    ));
    let r = s.peer.recv_json();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    s.assert_nothing_unjudged_ran("joined");
    // Two lines in one write: each judged.
    s.peer.send_raw(
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}}\n{{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{}}}\n",
            read_shadow()
        )
        .as_bytes(),
    );
    let r = s.recv_response(&json!(4));
    assert!(r.get("result").is_some(), "{r}");
    s.assert_no_reply_then_nothing_ran("two lines in one write");

    // Batches: refused whole, requests and notifications alike.
    s.send_line(&format!(
        r#"[{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{p}}},{{"jsonrpc":"2.0","method":"tools/call","params":{p}}},{{"jsonrpc":"2.0","id":6,"method":"ping"}}]"#,
        p = read_shadow()
    ));
    let r = s.peer.recv_json();
    let replies = r.as_array().unwrap();
    assert_eq!(replies.len(), 2, "{r}");
    assert!(replies.iter().all(|e| e["error"]["code"] == -32600), "{r}");
    s.assert_nothing_unjudged_ran("batch");
}

fn mrtr_params(tool: &str, args: Value) -> Value {
    json!({"name": tool, "arguments": args, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}
    }})
}

#[test]
fn the_input_required_retry_path_forwards_only_a_genuine_retry_with_an_id() {
    let mut s = Sloppy::start(ASK_POLICY, &["--approval", "client"]);
    let args = json!({"path": "/etc/hostname"});
    s.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
                  "params":mrtr_params("read_file", args.clone())}));
    let r = s.recv_response(&json!(1));
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    let state = r["result"]["requestState"].as_str().unwrap().to_owned();
    let key = r["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let mut retry = mrtr_params("read_file", args.clone());
    retry["requestState"] = json!(state);
    retry["inputResponses"] =
        json!({ key.clone(): {"action":"accept","content":{"decision":"allow_once"}} });

    // The retry as a notification: never forwarded (and the state is not spent).
    s.send(json!({"jsonrpc":"2.0","method":"tools/call","params":retry.clone()}));
    s.assert_no_reply_then_nothing_ran("a retry without an id");
    // The retry under another spelling of the method: refused.
    s.send(json!({"jsonrpc":"2.0","id":2,"method":"Tools/Call","params":retry.clone()}));
    assert_eq!(s.recv_response(&json!(2))["error"]["code"], -32600);
    s.assert_nothing_unjudged_ran("a retry as Tools/Call");
    // The retry carrying another tool name for a lenient server: refused.
    let mut renamed = retry.clone();
    renamed["Name"] = json!("delete_everything");
    s.send(json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":renamed}));
    let r = s.recv_response(&json!(3));
    assert!(
        r["error"]["code"] == -32600 || r["result"]["isError"] == true,
        "{r}"
    );
    s.assert_nothing_unjudged_ran("a retry with a second name");

    // The genuine retry is forwarded once, without toolgate's fields.
    s.send(json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":retry}));
    let r = s.recv_response(&json!(4));
    assert_eq!(r["result"]["content"][0]["text"], "ran read_file", "{r}");
    let ran = s.executed();
    let reads: Vec<&Value> = ran.iter().filter(|r| r["name"] == "read_file").collect();
    assert_eq!(reads.len(), 1, "{ran:?}");
    assert_eq!(reads[0]["id"], 4);
    assert!(!reads[0]["line"].as_str().unwrap().contains("requestState"));
}

#[test]
fn under_default_allow_a_notification_or_another_spelling_still_never_reaches_the_server() {
    let mut s = Sloppy::start(
        "version: 1\ndefault: allow\npacks: []\n",
        &["--approval", "none"],
    );
    s.send(json!({"jsonrpc":"2.0","method":"tools/call","params":read_shadow()}));
    s.assert_no_reply_then_nothing_ran("a notification under default: allow");
    s.send(json!({"jsonrpc":"2.0","id":"odd","method":"TOOLS/call","params":read_shadow()}));
    assert_eq!(s.recv_response(&json!("odd"))["error"]["code"], -32600);
    s.assert_nothing_unjudged_ran("another spelling under default: allow");
    // The same call with an id and its exact name is decided (allowed) and runs.
    s.send(json!({"jsonrpc":"2.0","id":"ok","method":"tools/call","params":read_shadow()}));
    let r = s.recv_response(&json!("ok"));
    assert_eq!(r["result"]["content"][0]["text"], "ran read_file", "{r}");
}

#[test]
fn duplicate_ids_are_refused() {
    let mut s = Sloppy::start_as(
        ASK_POLICY,
        &["--approval", "client"],
        json!({"elicitation": {}}),
    );
    // Two `id` members: which one a server answers is anyone's guess.
    s.send_line(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/etc/hostname"}}}"#);
    let r = s.peer.recv_json();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    s.assert_nothing_unjudged_ran("two id members");
    // A call awaiting approval keeps its id: a second call with the same id is refused.
    s.send(json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
                  "params":{"name":"read_file","arguments":{"path":"/etc/hostname"}}}));
    let prompt = s.peer.recv_json();
    assert_eq!(prompt["method"], "elicitation/create", "{prompt}");
    s.send(json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":read_shadow()}));
    let r = s.recv_response(&json!(7));
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("pending"),
        "{r}"
    );
    // (`7.0e0` or `"7"` are other ids to toolgate: each such call is judged on its own.)
    s.send(json!({"jsonrpc":"2.0","id":prompt["id"].clone(),"result":{"action":"decline"}}));
    let r = s.recv_response(&json!(7));
    assert_eq!(r["result"]["isError"], true, "{r}");
    s.assert_nothing_unjudged_ran("a reused id");
}
