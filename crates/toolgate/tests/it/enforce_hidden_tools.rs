//! A tool the policy forbids outright (`max_calls: 0`) is hidden from the client's
//! `tools/list`: the rest of the listing is byte-identical to what the server wrote, the
//! hidden tool is still pinned, and a call to it is denied and never reaches the server.
//! With no forbidden tool, every page passes byte for byte.

use std::process::Command;

use serde_json::{Value, json};
use toolgate_testkit::Peer;

use crate::support::gate;
use gate::{Gate, POLICY};

/// The pages of `tools/list` requests a client sends (the demo server lists two tools a
/// page): the request frames, in order.
fn list_requests() -> Vec<Vec<u8>> {
    [
        json!({}),
        json!({"cursor":"page-2"}),
        json!({"cursor":"page-4"}),
    ]
    .into_iter()
    .enumerate()
    .map(|(n, params)| {
        serde_json::to_vec(&json!({"jsonrpc":"2.0","id":format!("list-{n}"),
                                       "method":"tools/list","params":params}))
        .unwrap()
    })
    .collect()
}

fn initialize() -> Vec<u8> {
    serde_json::to_vec(
        &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},
        "clientInfo":{"name":"hidden-tools-test","version":"0"}}}),
    )
    .unwrap()
}

/// The next raw line that answers `id` (anything else in between is skipped).
fn recv_raw_response(peer: &Peer, id: &str) -> Vec<u8> {
    loop {
        let line = peer.recv();
        let v: Value = serde_json::from_slice(&line).unwrap();
        if v.get("method").is_none() && v["id"] == id {
            return line;
        }
    }
}

/// Initialises and lists every page; the raw response lines, in order.
fn raw_pages(peer: &mut Peer) -> Vec<Vec<u8>> {
    peer.send(initialize());
    let init = recv_raw_response(peer, "init");
    assert!(String::from_utf8_lossy(&init).contains("\"result\""));
    peer.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    list_requests()
        .into_iter()
        .enumerate()
        .map(|(n, request)| {
            peer.send(request);
            recv_raw_response(peer, &format!("list-{n}"))
        })
        .collect()
}

/// What the demo server itself writes for the same requests, without toolgate.
fn upstream_pages(gate: &Gate) -> Vec<Vec<u8>> {
    let base = gate.base();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    cmd.args(["demo", "--internal-server", "--workspace"])
        .arg(base.join("work"))
        .arg("--outbox")
        .arg(base.join("direct-outbox"))
        .env("HOME", base.join("home"));
    let mut server = Peer::spawn(cmd, false);
    raw_pages(&mut server)
}

fn tool_names(page: &[u8]) -> Vec<String> {
    let v: Value = serde_json::from_slice(page).unwrap();
    v["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// `POLICY` with `send_email` forbidden outright (`tools:` is its last section).
fn forbidding_send_email() -> String {
    assert!(POLICY.trim_end().ends_with("command_param: command"));
    format!("{POLICY}  send_email:\n    max_calls: 0\n")
}

#[test]
fn a_forbidden_tool_is_hidden_the_rest_is_byte_identical_and_a_call_is_denied() {
    let mut gate = Gate::start(&forbidding_send_email(), &[]);
    let seen = raw_pages(&mut gate.peer);
    let direct = upstream_pages(&gate);
    assert_eq!(seen.len(), direct.len());

    // The server lists `send_email` on the second page, next to `read_inbox`.
    assert_eq!(tool_names(&direct[1]), ["read_inbox", "send_email"]);
    let all: Vec<String> = direct.iter().flat_map(|p| tool_names(p)).collect();
    let listed: Vec<String> = seen.iter().flat_map(|p| tool_names(p)).collect();
    assert!(!listed.contains(&"send_email".to_owned()), "{listed:?}");
    assert_eq!(
        listed,
        all.iter()
            .filter(|n| *n != "send_email")
            .cloned()
            .collect::<Vec<_>>()
    );

    // Pages without it pass byte for byte; on its page only its element (and the comma
    // before it) is gone: every other byte is the server's.
    assert_eq!(seen[0], direct[0]);
    assert_eq!(seen[2], direct[2]);
    let page: Value = serde_json::from_slice(&direct[1]).unwrap();
    let element = serde_json::to_string(&page["result"]["tools"][1]).unwrap();
    let original = String::from_utf8(direct[1].clone()).unwrap();
    assert!(original.contains(&format!(",{element}")), "{original}");
    assert_eq!(
        String::from_utf8(seen[1].clone()).unwrap(),
        original.replacen(&format!(",{element}"), "", 1)
    );

    // toolgate pinned the full listing, the hidden tool included.
    assert!(
        gate.audit()
            .iter()
            .any(|e| e["kind"] == "pin" && e["tool"] == "send_email"),
        "{:?}",
        gate.audit()
    );

    // A client that calls it anyway is denied by its budget; the server never sees it.
    gate.call(
        7,
        "send_email",
        json!({"to":"alice@team.example","subject":"s","body":"b"}),
    );
    let r = gate.recv_response(&json!(7));
    assert!(gate::is_denied(&r), "{r}");
    assert!(gate::text(&r).contains("max_calls: 0"), "{r}");
    // An allowed call after it is forwarded, so the record below is complete up to here.
    gate.call(8, "read_file", json!({"path":"notes.txt"}));
    let r = gate.recv_response(&json!(8));
    assert!(!gate::is_denied(&r), "{r}");
    let upstream = gate.upstream_saw();
    assert!(upstream.contains("read_file"), "{upstream}");
    assert!(!upstream.contains("send_email"), "{upstream}");
}

#[test]
fn with_no_forbidden_tool_every_page_is_byte_identical() {
    let mut gate = Gate::start(POLICY, &[]);
    let seen = raw_pages(&mut gate.peer);
    let direct = upstream_pages(&gate);
    assert_eq!(seen, direct);
    let listed: Vec<String> = seen.iter().flat_map(|p| tool_names(p)).collect();
    assert!(listed.contains(&"send_email".to_owned()), "{listed:?}");
    assert_eq!(listed.len(), 6, "{listed:?}");
}

#[test]
fn a_tool_with_a_budget_above_zero_stays_listed() {
    let policy = format!("{POLICY}  send_email:\n    max_calls: 1\n");
    let mut gate = Gate::start(&policy, &[]);
    let seen = raw_pages(&mut gate.peer);
    let direct = upstream_pages(&gate);
    assert_eq!(seen, direct);
}

#[test]
fn a_page_whose_tools_are_all_forbidden_keeps_its_cursor() {
    let policy =
        format!("{POLICY}  send_email:\n    max_calls: 0\n  read_inbox:\n    max_calls: 0\n");
    let mut gate = Gate::start(&policy, &[]);
    let seen = raw_pages(&mut gate.peer);
    let direct = upstream_pages(&gate);
    assert_eq!(seen[0], direct[0]);
    assert_eq!(seen[2], direct[2]);
    // The second page is empty but still points to the third, byte for byte.
    let original = String::from_utf8(direct[1].clone()).unwrap();
    let (before, rest) = original.split_once(r#""tools":["#).unwrap();
    let (_, after) = rest.split_once("}]").unwrap();
    assert!(after.contains(r#""nextCursor":"page-4""#), "{original}");
    assert_eq!(
        String::from_utf8(seen[1].clone()).unwrap(),
        format!(r#"{before}"tools":[]{after}"#)
    );
    gate.call(3, "read_inbox", json!({}));
    let r = gate.recv_response(&json!(3));
    assert!(gate::is_denied(&r), "{r}");
    assert!(!gate.upstream_saw().contains("read_inbox"));
}
