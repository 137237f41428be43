//! The relay is invisible: frames pass byte for byte in both directions, and the two
//! sides' id spaces (and toolgate's own) never get confused.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use toolgate_testkit::{Peer, fake_upstream, read_record};

fn wrap(record: &Path, extra: &[&str]) -> Peer {
    let mut cmd = wrap_in(record.parent().unwrap());
    cmd.args(["--grace-ms", "500", "--"])
        .arg(fake_upstream())
        .arg("--record")
        .arg(record)
        .args(extra);
    Peer::spawn(cmd, false)
}

/// `toolgate wrap` isolated in `dir`: workspace and audit log there, an allow-all
/// policy (these tests are about the relay, not the decisions), no human to ask.
fn wrap_in(dir: &Path) -> Command {
    wrap_with_policy(dir, "version: 1\ndefault: allow\nrules: []\n")
}

/// [`wrap_in`] with another policy.
fn wrap_with_policy(dir: &Path, policy_yaml: &str) -> Command {
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, policy_yaml).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    cmd.arg("wrap")
        .arg("--workspace")
        .arg(dir)
        .arg("--audit")
        .arg(dir.join("audit.jsonl"))
        .arg("--policy")
        .arg(&policy)
        .args(["--approval", "none"]);
    cmd
}

/// Unusual but valid frames, exactly as a client might write them.
const UNUSUAL: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"tools/call","params":{"name":"x","arguments":{"z":"\u00e9\n","a":[1,2.50,-0]}}}"#,
    r#"{"method":"resources/list","id":"req-\u00e9-1","jsonrpc":"2.0","params":{}}"#,
    r#"{ "jsonrpc" : "2.0" ,	"id" : -1 , "method" : "x/unknown" , "params" : { "z" : 1e400 , "a" : [ 1 , 18446744073709551616 ] } }"#,
    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{"roots":{"listChanged":true},"elicitation":{}},"clientInfo":{"name":"ü ☃ 𝄞","version":"1"}},"extra":{"unknown":true}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
    r#"{"jsonrpc":"2.0","id":3.5,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"gone","reason":"\ud83d\ude00"}}"#,
    r#"{"jsonrpc":"2.0","id":"","method":"ping"}"#,
];

#[test]
fn client_frames_reach_the_upstream_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut client = wrap(&record, &[]);
    // Tools must have been listed before they can be called (pinning).
    let list = r#"{"jsonrpc":"2.0","id":"list","method":"tools/list"}"#;
    client.send(list);
    assert_eq!(client.recv_json()["result"]["tools"][0]["name"], "x");
    for frame in UNUSUAL {
        client.send(frame);
    }
    // Every request is answered by the echo server with its id and params untouched.
    for frame in UNUSUAL {
        if raw_member_opt(frame, "id").is_none() {
            continue;
        }
        let reply = client.recv_str();
        let raw_id = raw_member(frame, "id");
        assert!(
            reply.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{raw_id},"result":"#)),
            "{reply}"
        );
        if let Some(params) = raw_member_opt(frame, "params") {
            assert!(
                reply.ends_with(&format!(r#""params":{params}}}}}"#)),
                "{reply}"
            );
        }
    }
    client.close_stdin();
    assert!(client.wait().success());
    let seen = read_record(&record);
    let sent: Vec<Vec<u8>> = std::iter::once(list)
        .chain(UNUSUAL.iter().copied())
        .map(|f| f.as_bytes().to_vec())
        .collect();
    assert_eq!(seen, sent);
}

#[test]
fn upstream_frames_reach_the_client_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut client = wrap(&record, &[]);
    let lines = [
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":18446744073709551615,"progress":1e400,"total":2}}"#,
        r#"{ "method" : "notifications/message" , "jsonrpc" : "2.0", "params":{"level":"info","data":"\u0041 ☃"}, "zzz": null }"#,
        r#"{"jsonrpc":"2.0","id":"s-1","method":"roots/list"}"#,
        r#"{"jsonrpc":"2.0","id":99,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///x"}}"#,
    ];
    let request = json!({"jsonrpc":"2.0","id":1,"method":"test/verbatim","params":{"lines":lines}});
    client.send(request.to_string());
    for line in lines {
        assert_eq!(client.recv_str(), line);
    }
    let reply = client.recv_json();
    assert_eq!(reply["id"], 1);

    // A 2026-07-28 input_required result passes untouched too.
    let result = r#"{"jsonrpc":"2.0","id":2,"result":{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{}}},"requestState":"c3RhdGU="}}"#;
    client.send(r#"{"jsonrpc":"2.0","id":2,"method":"test/hang"}"#);
    client.send(
        json!({"jsonrpc":"2.0","id":3,"method":"test/verbatim","params":{"lines":[result]}})
            .to_string(),
    );
    assert_eq!(client.recv_str(), result);
    assert_eq!(client.recv_json()["id"], 3);
    client.close_stdin();
    client.wait();
}

#[test]
fn server_requests_and_client_responses_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut client = wrap(&record, &[]);
    // The client's own request 7 is pending while the server asks with id 7 as well:
    // the two id spaces are separate.
    client.send(
        r#"{"jsonrpc":"2.0","id":7,"method":"test/ask","params":{"id":7,"method":"elicitation/create","params":{"message":"ok?"}}}"#,
    );
    let ask = client.recv_json();
    assert_eq!(ask["method"], "elicitation/create");
    assert_eq!(ask["id"], 7);
    let response = r#"{"jsonrpc":"2.0","id":7,"result":{"action":"accept","content":{"n":1e400}}}"#;
    client.send(response);
    let reply = client.recv_str();
    assert_eq!(
        reply,
        format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"clientResponse":{response}}}}}"#)
    );
    client.close_stdin();
    client.wait();
    assert!(read_record(&record).contains(&response.as_bytes().to_vec()));
}

#[test]
fn toolgate_id_space_is_reserved() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut client = wrap(&record, &[]);
    // The server may not use toolgate's id space: it gets an error, the client nothing.
    client.send(
        r#"{"jsonrpc":"2.0","id":1,"method":"test/ask","params":{"id":"toolgate-0-1","method":"roots/list"}}"#,
    );
    // A client response in toolgate's id space is consumed, never forwarded; an
    // unsolicited response is dropped too.
    client.send(r#"{"jsonrpc":"2.0","id":"toolgate-ffff-9","result":{}}"#);
    client.send(r#"{"jsonrpc":"2.0","id":"nobody-asked","result":{}}"#);
    client.send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    let rest = [client.recv_json(), client.recv_json()];
    client.close_stdin();
    assert!(client.recv_to_end().is_empty());
    client.wait();
    // The client never sees the server's reserved-id request; the server got a refusal
    // (which the fake server reports back as the result of request 1).
    assert_eq!(rest.len(), 2, "{rest:#?}");
    let one = rest.iter().find(|v| v["id"] == 1).unwrap();
    assert_eq!(one["result"]["clientResponse"]["id"], "toolgate-0-1");
    assert_eq!(one["result"]["clientResponse"]["error"]["code"], -32600);
    assert!(
        rest.iter()
            .any(|v| v["id"] == 2 && v["result"]["method"] == "ping")
    );

    let seen: Vec<String> = read_record(&record)
        .into_iter()
        .map(|l| String::from_utf8(l).unwrap())
        .collect();
    assert_eq!(seen.len(), 3, "{seen:#?}");
    assert!(seen[0].contains("test/ask"));
    let refusal: Value = seen
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v.get("error").is_some())
        .unwrap();
    assert_eq!(refusal["id"], "toolgate-0-1");
    assert_eq!(refusal["error"]["code"], -32600);
    assert!(seen.iter().any(|l| l.contains(r#""method":"ping""#)));
}

fn raw_member_opt(frame: &str, name: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Any<'a>(
        #[serde(borrow)] std::collections::HashMap<String, &'a serde_json::value::RawValue>,
    );
    let any: Any<'_> = serde_json::from_str(frame).unwrap();
    any.0.get(name).map(|r| r.get().to_owned())
}

fn raw_member(frame: &str, name: &str) -> String {
    raw_member_opt(frame, name).unwrap()
}

/// A message larger than a pipe's buffer makes toolgate grow the pipes it carries it on
/// (fewer wake-ups per message; see `proxy/pipes.rs`), and still passes byte for byte.
#[cfg(target_os = "linux")]
#[test]
fn a_large_message_grows_the_pipes_it_crosses() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;

    use rustix::pipe::fcntl_getpipe_size;

    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut cmd = wrap_in(dir.path());
    cmd.args(["--grace-ms", "500", "--"])
        .arg(fake_upstream())
        .arg("--record")
        .arg(&record)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (stdin_before, stdout_before) = (
        fcntl_getpipe_size(&stdin).unwrap(),
        fcntl_getpipe_size(&stdout).unwrap(),
    );
    let big = "x".repeat(300_000);
    assert!(stdin_before < big.len() && stdout_before < big.len());
    let frame =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"test/echo","params":{{"big":"{big}"}}}}"#);
    // Written from a thread: until toolgate grows its stdin, the write blocks while the
    // reply below is not yet being read.
    let writer = std::thread::spawn(move || {
        stdin.write_all(frame.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin
    });
    let mut reader = BufReader::new(stdout);
    let mut reply = String::new();
    reader.read_line(&mut reply).unwrap();
    let stdin = writer.join().unwrap();
    assert!(
        reply.starts_with(r#"{"jsonrpc":"2.0","id":1,"result":"#)
            && reply.ends_with(&format!("\"params\":{{\"big\":\"{big}\"}}}}}}\n")),
        "{} bytes: {}…",
        reply.len(),
        &reply[..200.min(reply.len())]
    );
    let want = big.len().next_power_of_two();
    assert!(fcntl_getpipe_size(&stdin).unwrap() >= want, "stdin");
    assert!(
        fcntl_getpipe_size(reader.get_ref()).unwrap() >= want,
        "stdout"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert_eq!(read_record(&record).len(), 1);
}

/// A result serde_json cannot hold as a value (`1e400`) still reaches the client byte for
/// byte, is audited, and feeds the taint index (every token of its text): an address in
/// it is then refused as a destination because it came from untrusted output.
#[test]
fn a_result_with_an_unrepresentable_number_is_still_recorded_and_taint_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let sink = "version: 1\ndefault: allow\npacks: []\nrules: []\n\
                tools:\n  x:\n    exfiltrating: true\n    sink_params: [to]\n";
    let mut cmd = wrap_with_policy(dir.path(), sink);
    cmd.args(["--grace-ms", "500", "--"]).arg(fake_upstream());
    let mut client = Peer::spawn(cmd, false);
    client.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    assert_eq!(client.recv_json()["result"]["tools"][0]["name"], "x");
    let result = r#"{"content":[{"type":"text","text":"reply to mallory@evil.example"}],"structuredContent":{"n":1e400}}"#;
    let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
                      "params":{"name":"t","arguments":{"result":result}}});
    client.send(call.to_string());
    assert_eq!(
        client.recv_str(),
        format!(r#"{{"jsonrpc":"2.0","id":2,"result":{result}}}"#)
    );
    let send = json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
                      "params":{"name":"x","arguments":{"to":"mallory@evil.example"}}});
    client.send(send.to_string());
    let r = client.recv_json();
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("untrusted output"), "{text}");
    client.close_stdin();
    assert!(client.wait().success());
    let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    let records: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        records.iter().any(|r| r["kind"] == "result"
            && r["request_id"] == "2"
            && r["result_sha256"].is_string()),
        "{audit}"
    );
}

/// toolgate's CPU time so far (user and system), in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which is in parentheses and may contain spaces.
    let (_, rest) = stat.rsplit_once(')').unwrap();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// After each message the relay polls for the next one for `--poll-us`, then sleeps: a
/// proxy that has gone quiet uses no CPU, and `--poll-us 0` relays just the same.
#[test]
fn the_relay_stops_polling_when_messages_stop() {
    for poll_us in ["20000", "0"] {
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("seen");
        let mut cmd = wrap_in(dir.path());
        cmd.args(["--poll-us", poll_us, "--grace-ms", "500", "--"])
            .arg(fake_upstream())
            .arg("--record")
            .arg(&record);
        let mut client = Peer::spawn(cmd, false);
        for id in 0..200 {
            client.send(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#));
            let reply = client.recv_json();
            assert_eq!(reply["id"], id, "{reply}");
        }
        // Polling ends 20 ms after the last frame; a poller that never stopped would use
        // all of the next 500 ms (50 ticks at the usual 100 per second).
        let before = cpu_ticks(client.pid());
        // Not synchronisation: the window in which the CPU the idle proxy uses is measured
        // (CPU time, so a loaded machine does not change the count).
        std::thread::sleep(std::time::Duration::from_millis(500));
        let used = cpu_ticks(client.pid()) - before;
        assert!(
            used <= 5,
            "`--poll-us {poll_us}`: {used} ticks of CPU while idle"
        );
        client.close_stdin();
        assert!(client.recv_to_end().is_empty());
        client.wait();
    }
}
