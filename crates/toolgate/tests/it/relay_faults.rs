//! Bad input and faults on either side end with defined replies, in bounded time.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_testkit::{Peer, fake_upstream, read_record, wait_until};

fn toolgate(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = wrap_in(dir);
    cmd.args(args);
    cmd
}

/// `toolgate wrap` isolated in `dir`: workspace and audit log there, an allow-all
/// policy (these tests are about the relay, not the decisions), no human to ask.
fn wrap_in(dir: &Path) -> Command {
    let policy = dir.join("allow-all.yaml");
    std::fs::write(&policy, "version: 1\ndefault: allow\nrules: []\n").unwrap();
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

fn wrap_fake(record: &Path, wrap_args: &[&str], fake_args: &[&str]) -> Peer {
    let mut cmd = toolgate(record.parent().unwrap(), wrap_args);
    cmd.args(["--"])
        .arg(fake_upstream())
        .arg("--record")
        .arg(record)
        .args(fake_args);
    Peer::spawn(cmd, false)
}

fn seen(record: &Path) -> Vec<String> {
    read_record(record)
        .into_iter()
        .map(|l| String::from_utf8_lossy(&l).into_owned())
        .collect()
}

#[test]
fn malformed_client_lines_get_parse_errors_and_the_relay_continues() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut client = wrap_fake(&record, &[], &[]);
    client.send("this is not json");
    client.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\xff\"}\n");
    client.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list""#);
    for _ in 0..3 {
        let reply = client.recv_json();
        assert_eq!(reply["id"], Value::Null);
        assert_eq!(reply["error"]["code"], -32700);
    }
    // Valid JSON that is not a valid message: -32600, addressed when the id is usable.
    client.send(r#"{"jsonrpc":"2.0","id":3,"result":{},"error":{"code":1,"message":"m"}}"#);
    client.send(r#"{"id":4,"method":"tools/list"}"#);
    client.send(r#"{"jsonrpc":"2.0","id":5,"method":"a","method":"tools/call"}"#);
    client.send("42");
    for id in [json!(3), json!(4), json!(5), Value::Null] {
        let reply = client.recv_json();
        assert_eq!(reply["id"], id);
        assert_eq!(reply["error"]["code"], -32600);
    }
    // Blank lines are ignored; the relay still works.
    client.send("");
    client.send(r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#);
    assert_eq!(client.recv_json()["id"], 6);
    client.close_stdin();
    client.wait();
    assert_eq!(
        seen(&record),
        vec![r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#]
    );
}

#[test]
fn batches_are_rejected_message_by_message_and_never_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut client = wrap_fake(&record, &[], &[]);
    client.send(
        r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rm"}},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b","method":"ping"},7]"#,
    );
    let reply = client.recv_json();
    let replies = reply.as_array().expect("a batch is answered with an array");
    let ids: Vec<&Value> = replies.iter().map(|r| &r["id"]).collect();
    assert_eq!(ids, vec![&json!(1), &json!("b"), &Value::Null]);
    assert!(replies.iter().all(|r| r["error"]["code"] == -32600));
    client.send("[]");
    let reply = client.recv_json();
    assert_eq!(reply["error"]["code"], -32600);
    // A batch of notifications only gets no reply at all.
    client.send(r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#);
    client.send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    assert_eq!(client.recv_json()["id"], 2);
    client.close_stdin();
    client.wait();
    assert_eq!(
        seen(&record),
        vec![r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#]
    );
}

#[test]
fn oversize_client_lines_are_answered_and_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut client = wrap_fake(&record, &["--max-message-bytes", "1000"], &[]);
    let big = "x".repeat(200_000);
    client.send(format!(
        r#"{{"jsonrpc":"2.0","id":"big-1","method":"tools/call","params":{{"name":"w","arguments":{{"data":"{big}"}}}}}}"#
    ));
    let reply = client.recv_json();
    assert_eq!(reply["id"], "big-1");
    assert_eq!(reply["error"]["code"], -32600);
    // No id before the cut: the reply has id null.
    client.send(format!(
        r#"{{"params":{{"data":"{big}"}},"jsonrpc":"2.0","id":9}}"#
    ));
    let reply = client.recv_json();
    assert_eq!(reply["id"], Value::Null);
    client.send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    assert_eq!(client.recv_json()["id"], 2);
    client.close_stdin();
    client.wait();
    assert_eq!(
        seen(&record),
        vec![r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#]
    );
}

#[test]
fn upstream_garbage_and_oversize_lines_never_reach_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut client = wrap_fake(
        &record,
        &["--max-message-bytes", "1000"],
        &["--greeting", "Server running on stdio"],
    );
    client.send(r#"{"jsonrpc":"2.0","id":1,"method":"test/garbage"}"#);
    let reply = client.recv_json();
    assert_eq!(reply["id"], 1);
    assert_eq!(reply["result"]["method"], "test/garbage");
    client.send(r#"{"jsonrpc":"2.0","id":2,"method":"test/giant","params":{"bytes":5000}}"#);
    assert_eq!(client.recv_json()["id"], 2);
    // An oversize response: the request is answered with an error instead.
    client.send(
        r#"{"jsonrpc":"2.0","id":3,"method":"test/giant","params":{"bytes":300000,"reply":true}}"#,
    );
    let reply = client.recv_json();
    assert_eq!(reply["id"], 3);
    assert_eq!(reply["error"]["code"], -32603);
    client.send(r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#);
    assert_eq!(client.recv_json()["id"], 4);
    client.close_stdin();
    assert!(client.recv_to_end().is_empty());
    assert!(client.wait().success());
}

#[test]
fn an_upstream_carriage_return_cannot_smuggle_a_message_to_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut client = wrap_fake(&record, &[], &[]);
    // One JSON value to toolgate (`\r` is JSON whitespace), three lines to a client that
    // splits at `\r` (Node's readline): the middle one a message toolgate never judged.
    let smuggled = r#"{"jsonrpc":"2.0","id":"evil","method":"sampling/createMessage","params":{"smuggled":true}}"#;
    let lines = [
        // A response to the pending request 7, carrying a forged server request.
        format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{{\"ok\":true}},\"x\":\r{smuggled}\r}}"),
        // A server request carrying another one.
        format!("{{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"roots/list\",\"x\":[1,\r{smuggled}\r]}}"),
        // A notification, and a batch.
        format!("{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"x\":\r{smuggled}\r}}"),
        format!("[{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"x\":\r{smuggled}}}]"),
        // A final `\r` before the newline (a CRLF line end) is fine, as from the client.
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"crlf\"}}\r".to_owned(),
    ];
    client.send(r#"{"jsonrpc":"2.0","id":7,"method":"test/hang"}"#);
    client.send(
        serde_json::to_string(&json!({
            "jsonrpc": "2.0", "id": 8, "method": "test/verbatim", "params": {"lines": lines}
        }))
        .unwrap(),
    );
    let got: Vec<Vec<u8>> = (0..3).map(|_| client.recv()).collect();
    let reply: Value = serde_json::from_slice(&got[0]).unwrap();
    assert_eq!(reply["id"], 7, "{reply}");
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("carriage return"),
        "{reply}"
    );
    assert_eq!(
        got[1],
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"crlf\"}}\r"
    );
    assert_eq!(serde_json::from_slice::<Value>(&got[2]).unwrap()["id"], 8);
    // Other traffic continues, and nothing of the refused frames reached the client.
    client.send(r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#);
    assert_eq!(client.recv_json()["id"], 9);
    client.close_stdin();
    let rest = client.recv_to_end();
    // Read as a client that splits lines at `\r` too: no piece is the smuggled message.
    for line in got.iter().chain(&rest) {
        for piece in line.split(|b| *b == b'\r') {
            let piece = serde_json::from_slice::<Value>(piece).unwrap_or(Value::Null);
            assert_ne!(piece["id"], "evil", "{}", String::from_utf8_lossy(line));
        }
    }
    assert!(rest.is_empty(), "{rest:?}");
    assert!(client.wait().success());
    // The server's own request was answered, with an error.
    let seen = seen(&record);
    let answer = seen
        .iter()
        .find(|l| l.contains(r#""id":"s1""#))
        .unwrap_or_else(|| panic!("no answer to s1: {seen:?}"));
    let answer: Value = serde_json::from_str(answer).unwrap();
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
}

#[test]
fn upstream_crash_mid_request_answers_every_outstanding_request() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut client = wrap_fake(&record, &[], &[]);
    client.send(r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"test/hang"}"#);
    client.send(r#"{"jsonrpc":"2.0","id":"s","method":"test/hang"}"#);
    client.send(r#"{"jsonrpc":"2.0","id":3,"method":"test/crash","params":{"code":42}}"#);
    let mut lines: Vec<String> = (0..3).map(|_| client.recv_str()).collect();
    lines.sort();
    for line in &lines {
        assert!(
            line.contains(
                r#""error":{"code":-32603,"message":"upstream server exited before responding"}"#
            ),
            "{line}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains(r#""id":18446744073709551615,"#))
    );
    assert!(lines.iter().any(|l| l.contains(r#""id":"s","#)));
    assert!(lines.iter().any(|l| l.contains(r#""id":3,"#)));
    let status = client.wait();
    assert_eq!(status.code(), Some(42));
}

#[test]
fn a_cancelled_request_gets_no_made_up_reply_when_the_upstream_exits() {
    // Without toolgate, a client that cancelled a request hears nothing more about it.
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut client = wrap_fake(&record, &[], &[]);
    client.send(r#"{"jsonrpc":"2.0","id":1,"method":"test/hang"}"#);
    client.send(r#"{"jsonrpc":"2.0","id":2,"method":"test/hang"}"#);
    client.send(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}}"#,
    );
    client.send(r#"{"jsonrpc":"2.0","id":3,"method":"test/crash","params":{"code":9}}"#);
    let mut lines: Vec<String> = client
        .recv_to_end()
        .into_iter()
        .map(|l| String::from_utf8(l).unwrap())
        .collect();
    lines.sort();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].contains(r#""id":2,"#), "{lines:?}");
    assert!(lines[1].contains(r#""id":3,"#), "{lines:?}");
    assert_eq!(client.wait().code(), Some(9));
}

#[test]
fn exit_code_is_the_upstreams() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut client = wrap_fake(&record, &[], &[]);
    client.send(r#"{"jsonrpc":"2.0","id":1,"method":"test/exit","params":{"code":7}}"#);
    assert_eq!(client.recv_json()["id"], 1);
    assert_eq!(client.wait().code(), Some(7));

    let mut client = wrap_fake(&record, &[], &["--exit-on-eof", "3"]);
    client.close_stdin();
    assert_eq!(client.wait().code(), Some(3));
}

#[test]
fn silent_upstream_is_terminated_after_client_eof() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let pid_file = dir.path().join("pid");
    let mut client = wrap_fake(
        &record,
        &["--grace-ms", "200"],
        &["--stay-after-eof", "--pid-file", pid_file.to_str().unwrap()],
    );
    client.send(r#"{"jsonrpc":"2.0","id":1,"method":"test/hang"}"#);
    assert!(wait_until(Duration::from_secs(10), || !seen(&record).is_empty()));
    client.close_stdin();
    // The pending request is answered, then toolgate exits as the upstream was killed
    // by SIGTERM (128 + 15).
    let reply = client.recv_json();
    assert_eq!(reply["id"], 1);
    assert_eq!(reply["error"]["code"], -32603);
    let status = client.wait_within(Duration::from_secs(10));
    assert_eq!(status.code(), Some(143));
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    assert!(!process_alive(pid));
}

#[test]
fn upstream_ignoring_sigterm_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_upstream();
    let mut cmd = toolgate(dir.path(), &["--grace-ms", "200", "--"]);
    cmd.args(["sh", "-c", r#"trap "" TERM; exec "$0" --stay-after-eof"#])
        .arg(&fake)
        .current_dir(dir.path());
    let mut client = Peer::spawn(cmd, false);
    client.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    assert_eq!(client.recv_json()["id"], 1);
    client.close_stdin();
    let status = client.wait_within(Duration::from_secs(10));
    assert_eq!(status.code(), Some(137));
}

#[test]
fn client_closing_early_ends_everything() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut client = wrap_fake(&record, &[], &[]);
    client.send(r#"{"jsonrpc":"2.0","id":1,"method":"test/flood","params":{"count":100000}}"#);
    // Close both ends without reading: toolgate must still exit (its writes fail).
    client.close_stdin();
    drop(client.recv_within(Duration::from_millis(1)));
    let status = client.wait_within(Duration::from_secs(15));
    assert!(status.code().is_some() || status.signal().is_some());
}

#[test]
fn sigterm_is_forwarded_to_the_upstream_group() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let pid_file = dir.path().join("pid");
    let mut client = wrap_fake(&record, &[], &["--pid-file", pid_file.to_str().unwrap()]);
    client.send(r#"{"jsonrpc":"2.0","id":1,"method":"test/hang"}"#);
    assert!(wait_until(Duration::from_secs(10), || !seen(&record).is_empty()));
    let pid = rustix::process::Pid::from_raw(i32::try_from(client.pid()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let reply = client.recv_json();
    assert_eq!(reply["id"], 1);
    assert_eq!(reply["error"]["code"], -32603);
    assert_eq!(client.wait().code(), Some(143));
    let upstream: i32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    assert!(!process_alive(upstream));
}

#[test]
fn flood_keeps_order() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let mut client = wrap_fake(&record, &[], &[]);
    client.send(r#"{"jsonrpc":"2.0","id":1,"method":"test/flood","params":{"count":20000}}"#);
    for i in 0..20000 {
        let n = client.recv_json();
        assert_eq!(n["params"]["data"], i);
    }
    assert_eq!(client.recv_json()["id"], 1);
    client.close_stdin();
    client.wait();
}

#[test]
fn upstream_runs_in_the_workspace_with_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap();
    let mut cmd = toolgate(&workspace, &["--"]);
    cmd.args([
        "sh",
        "-c",
        r#"printf '{"jsonrpc":"2.0","method":"env","params":{"cwd":"%s","v":"%s"}}\n' "$(pwd -P)" "$TOOLGATE_TEST_VAR"; cat >/dev/null"#,
    ])
    .env("TOOLGATE_TEST_VAR", "hello");
    let mut client = Peer::spawn(cmd, false);
    let note = client.recv_json();
    assert_eq!(note["params"]["cwd"], workspace.to_str().unwrap());
    assert_eq!(note["params"]["v"], "hello");
    client.close_stdin();
    assert!(client.wait().success());
}

#[test]
fn missing_upstream_command_is_an_error_on_stderr_only() {
    let dir = tempfile::tempdir().unwrap();
    let cmd = toolgate(dir.path(), &["--", "/nonexistent/toolgate-test-server"]);
    let mut client = Peer::spawn(cmd, true);
    let status = client.wait();
    assert!(!status.success());
    assert!(client.recv_within(Duration::from_millis(100)).is_none());
    assert!(client.stderr().contains("cannot start upstream"));
}

fn process_alive(pid: i32) -> bool {
    // A zombie is not alive; after toolgate exits the upstream is reparented and reaped.
    wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true)
    });
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[test]
fn works_over_socket_stdio_like_node_clients() {
    // Node (libuv) gives child processes socketpairs, not pipes, as stdio: one per stream
    // (the non-blocking stdout path), and some clients share one socket for both.
    socket_stdio(false);
    socket_stdio(true);
}

fn socket_stdio(shared: bool) {
    use std::io::{BufRead, BufReader, Write};
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("seen");
    let (to_tg, tg_in) = UnixStream::pair().unwrap();
    let (from_tg, tg_out) = if shared {
        (to_tg.try_clone().unwrap(), tg_in.try_clone().unwrap())
    } else {
        UnixStream::pair().unwrap()
    };
    let mut cmd = toolgate(dir.path(), &["--"]);
    cmd.arg(fake_upstream())
        .arg("--record")
        .arg(&record)
        .stdin(std::process::Stdio::from(OwnedFd::from(tg_in)))
        .stdout(std::process::Stdio::from(OwnedFd::from(tg_out)));
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    from_tg
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut writer = to_tg;
    let mut reader = BufReader::new(from_tg);
    for i in 0..200 {
        writeln!(writer, r#"{{"jsonrpc":"2.0","id":{i},"method":"ping"}}"#).unwrap();
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["id"], i);
    }
    writer.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(wait_until(Duration::from_secs(20), || matches!(
        child.try_wait(),
        Ok(Some(_))
    )));
    assert!(child.wait().unwrap().success());
    assert_eq!(seen(&record).len(), 200);
}
