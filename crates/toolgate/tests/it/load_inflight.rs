//! Load: 1,000 `tools/call` requests in flight through `toolgate wrap` (the client writes
//! all of them before reading anything), interleaved with client notifications, server
//! notifications and server-initiated requests that reuse the very ids the client has
//! pending. Every response must reach the right caller, in the right id space, once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use toolgate_testkit::{Peer, bin_path};

const CALLS: u64 = 1000;
const ASK_EVERY: u64 = 3;
const NOTIFY_EVERY: u64 = 10;

/// `toolgate wrap` in `dir` with an allow-all policy (every call still goes through the
/// engine and the audit log), in front of `load_upstream`.
fn wrap_load(dir: &Path) -> Peer {
    let base = dir.canonicalize().unwrap();
    for sub in ["work", "home", "pins", "broker"] {
        std::fs::create_dir_all(base.join(sub)).unwrap();
    }
    let policy = base.join("policy.yaml");
    std::fs::write(&policy, "version: 1\ndefault: allow\nrules: []\n").unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    cmd.arg("wrap")
        .arg("--workspace")
        .arg(base.join("work"))
        .arg("--audit")
        .arg(base.join("audit.jsonl"))
        .arg("--policy")
        .arg(&policy)
        .args(["--approval", "none", "--"])
        .arg(bin_path("load_upstream"))
        .args(["--ask-every", &ASK_EVERY.to_string()])
        .env("HOME", base.join("home"))
        .env("TOOLGATE_PINS_DIR", base.join("pins"))
        .env("TOOLGATE_BROKER_DIR", base.join("broker"));
    Peer::spawn(cmd, false)
}

/// The client's id for call `i`: numbers and strings alternate, so both id kinds collide
/// with the server's ids.
fn call_id(i: u64) -> Value {
    if i.is_multiple_of(2) {
        json!(i)
    } else {
        json!(format!("c-{i}"))
    }
}

fn handshake(client: &mut Peer) {
    client.send(
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{"roots":{}},
            "clientInfo":{"name":"load-test","version":"0"}}})
        .to_string(),
    );
    let r = client.recv_json();
    assert_eq!(r["id"], 0, "{r}");
    assert!(r.get("result").is_some(), "{r}");
    client.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    client.send(r#"{"jsonrpc":"2.0","id":"list","method":"tools/list","params":{}}"#);
    let r = client.recv_json();
    assert_eq!(r["id"], "list", "{r}");
    assert_eq!(r["result"]["tools"][0]["name"], "echo", "{r}");
}

#[test]
fn thousand_requests_in_flight_each_response_reaches_its_caller() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = wrap_load(dir.path());
    handshake(&mut client);

    // Pipeline everything before reading a single byte.
    for i in 1..=CALLS {
        client.send(
            json!({"jsonrpc":"2.0","id":call_id(i),"method":"tools/call",
                   "params":{"name":"echo","arguments":{"n":i}}})
            .to_string(),
        );
        if i.is_multiple_of(NOTIFY_EVERY) {
            client.send(r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#);
        }
    }

    let mut responses: BTreeMap<String, Value> = BTreeMap::new();
    let mut server_notifications = Vec::new();
    let mut server_requests = BTreeSet::new();
    while responses.len() < usize::try_from(CALLS).unwrap() {
        let m = client.recv_json();
        match (m.get("method"), m.get("id")) {
            (Some(method), Some(id)) => {
                // A server-initiated request: same raw id as one of our pending calls.
                assert_eq!(method, "roots/list", "{m}");
                assert_eq!(m["params"]["for"], *id, "{m}");
                assert!(
                    server_requests.insert(id.to_string()),
                    "server request id {id} delivered twice"
                );
                let answer = json!({"roots":[{"uri":format!("file:///r/{id}"),"name":"r"}]});
                client.send(json!({"jsonrpc":"2.0","id":id,"result":answer}).to_string());
            }
            (Some(method), None) => {
                assert_eq!(method, "notifications/message", "{m}");
                server_notifications.push(m["params"]["data"].as_u64().unwrap());
            }
            (None, Some(id)) => {
                let previous = responses.insert(id.to_string(), m.clone());
                assert!(previous.is_none(), "two responses for id {id}: {m}");
            }
            (None, None) => panic!("not a JSON-RPC message: {m}"),
        }
    }

    // Every call answered once, with its own arguments, in its own id space.
    let mut deferred = 0;
    for i in 1..=CALLS {
        let id = call_id(i);
        let r = responses
            .get(&id.to_string())
            .unwrap_or_else(|| panic!("no response for {id}"));
        assert!(r.get("error").is_none(), "{r}");
        let s = &r["result"]["structuredContent"];
        assert_eq!(s["id"], id, "{r}");
        assert_eq!(s["n"], i, "{r}");
        assert_eq!(
            s["unmatched"], 0,
            "the server got a response it never asked for: {r}"
        );
        if s["k"].as_u64().unwrap().is_multiple_of(ASK_EVERY) {
            deferred += 1;
            // The answer the server got is the one we gave to *its* request with this id.
            assert_eq!(
                s["answer"]["roots"][0]["uri"],
                format!("file:///r/{id}"),
                "{r}"
            );
            // Ours, plus `notifications/initialized`: all forwarded, none lost.
            assert_eq!(s["notifications_seen"], CALLS / NOTIFY_EVERY + 1, "{r}");
        } else {
            assert_eq!(s["answer"], Value::Null, "{r}");
        }
    }
    assert_eq!(deferred, CALLS / ASK_EVERY);
    assert_eq!(
        server_requests.len(),
        usize::try_from(CALLS / ASK_EVERY).unwrap()
    );
    // Server notifications arrive once each and in the order the server wrote them.
    assert_eq!(server_notifications, (1..=CALLS).collect::<Vec<_>>());

    // Nothing else arrives, and the run ends cleanly.
    client.close_stdin();
    let rest = client.recv_to_end();
    assert!(
        rest.is_empty(),
        "unexpected frames: {:?}",
        rest.iter()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect::<Vec<_>>()
    );
    assert!(client.wait().success());
    // Every call was decided and audited, and the chain verifies.
    let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    let decisions = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "decision")
        .count();
    assert_eq!(decisions, usize::try_from(CALLS).unwrap());
    let v = toolgate_audit::verify_path(&dir.path().join("audit.jsonl")).unwrap();
    assert!(v.is_intact(), "{:?}", v.problem);
}
