//! `toolgate wrap --url` against a remote server that fails: the test kit's
//! `http_upstream` (a real Streamable HTTP server) with faults armed mid-session through
//! its control endpoint, and a client speaking raw JSON-RPC lines on toolgate's stdio.
//!
//! For every fault: each request gets exactly one answer (the result, or a JSON-RPC error
//! that says what happened), no message reaches the client twice or not at all, nothing but
//! JSON-RPC reaches the client's stdout, and the server runs each call at most once (its
//! log of every HTTP request it received is the witness).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;
use toolgate_testkit::http::HttpUpstream;
use toolgate_testkit::{Peer, wait_until};

const VERSION: &str = "2025-11-25";

/// The client's `initialize` params: toolgate must replay exactly these after a restart.
fn init_params() -> Value {
    json!({
        "protocolVersion": VERSION,
        "capabilities": {"roots": {"listChanged": true}},
        "clientInfo": {"name": "remote-faults", "version": "7.1.0"},
    })
}

/// A client behind `toolgate wrap --url` in front of an `http_upstream`.
struct Gate {
    up: HttpUpstream,
    client: Peer,
    _dir: TempDir,
}

fn wrap_command(dir: &Path, url: &str, wrap_args: &[&str]) -> Command {
    // Everything allowed (these tests are about the transport, not decisions), and the
    // one recipient of `send_email` trusted so that the sink gate lets it through.
    let policy = dir.join("allow-all.yaml");
    std::fs::write(
        &policy,
        "version: 1\ndefault: allow\nrules: []\ntools:\n  send_email:\n    trusted_destinations: [\"bob@example.com\"]\n",
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    cmd.arg("wrap")
        .arg("--workspace")
        .arg(dir)
        .arg("--audit")
        .arg(dir.join("audit.jsonl"))
        .arg("--policy")
        .arg(&policy)
        .args(["--approval", "none", "--url", url])
        .args(wrap_args)
        .env("HOME", dir)
        .env("TOOLGATE_PINS_DIR", dir.join("pins"));
    cmd
}

impl Gate {
    /// Starts the server with `server_args`, toolgate with `wrap_args`, and initializes.
    fn start(server_args: &[&str], wrap_args: &[&str]) -> Gate {
        Gate::start_with(server_args, wrap_args, |_| {})
    }

    fn start_with(
        server_args: &[&str],
        wrap_args: &[&str],
        env: impl FnOnce(&mut Command),
    ) -> Gate {
        let dir = tempfile::tempdir().unwrap();
        let up = HttpUpstream::start(server_args);
        let mut cmd = wrap_command(dir.path(), &up.url(), wrap_args);
        env(&mut cmd);
        let client = Peer::spawn(cmd, true);
        let mut gate = Gate {
            up,
            client,
            _dir: dir,
        };
        gate.initialize();
        gate
    }

    fn initialize(&mut self) {
        let init = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": init_params()});
        self.client.send(init.to_string());
        let reply = self.client.recv_json();
        assert_eq!(reply["id"], "init", "{reply}");
        assert_eq!(reply["result"]["protocolVersion"], VERSION, "{reply}");
        self.client
            .send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    /// Sends `tools/call` of `tool` with id `id` (and a progress token when `progress`).
    fn call(&mut self, id: u64, tool: &str, args: Value, progress: bool) {
        let mut params = json!({"name": tool, "arguments": args});
        if progress {
            params["_meta"] = json!({"progressToken": format!("progress-{id}")});
        }
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        self.client.send(msg.to_string());
    }

    /// Every line up to and including the response to `id` (each must be JSON-RPC).
    fn until_response(&self, id: u64) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let line = self.client.recv_json();
            assert_eq!(line["jsonrpc"], "2.0", "not JSON-RPC: {line}");
            if line["id"] == id && line.get("method").is_none() {
                return (line, before);
            }
            before.push(line);
        }
    }

    /// Calls and waits for the answer, which must be the only line that comes.
    fn call_alone(&mut self, id: u64, tool: &str, args: Value) -> Value {
        self.call(id, tool, args, false);
        let (reply, before) = self.until_response(id);
        assert!(
            before.is_empty(),
            "unexpected lines before {id}: {before:?}"
        );
        reply
    }

    /// Ends the session: closes stdin; every line toolgate still writes must be none of
    /// the responses already delivered (no duplicate) and no response at all (nothing
    /// was pending). Returns toolgate's stderr.
    fn finish(mut self) -> (HttpUpstream, String) {
        self.client.close_stdin();
        let rest = self.client.recv_to_end();
        let rest: Vec<String> = rest
            .iter()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect();
        assert!(
            rest.iter().all(|l| {
                let v: Value = serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}"));
                v.get("method").is_some()
            }),
            "responses after the last request was answered: {rest:?}"
        );
        let status = self.client.wait();
        let stderr = self.client.stderr();
        assert!(status.success(), "toolgate exited with {status}: {stderr}");
        (self.up, stderr)
    }
}

fn text(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("not a text result: {reply}"))
}

fn error_message(reply: &Value) -> &str {
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
    reply["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no error message: {reply}"))
}

/// Asserts that the server applied a fault (its log says `fault: …`) `n` times.
fn fired(up: &HttpUpstream, outcome: &str, n: usize) {
    let log = up.log();
    let seen = log.iter().filter(|e| e["outcome"] == outcome).count();
    assert_eq!(seen, n, "`{outcome}` fired {seen} times, not {n}: {log:?}");
}

fn executed(up: &HttpUpstream, tool: &str) -> usize {
    up.calls(tool).len()
}

fn mail() -> Value {
    json!({"to": ["bob@example.com"], "subject": "hi", "body": "hello"})
}

#[test]
fn server_errors_answer_the_request_with_the_status_and_the_session_goes_on() {
    for mode in ["--json", "--sse"] {
        let mut gate = Gate::start(&[mode], &[]);
        for (id, status) in [(1, 500), (2, 502), (3, 503)] {
            gate.up
                .control(&format!("fail?status={status}&tool=send_email"));
            let reply = gate.call_alone(id, "send_email", mail());
            let message = error_message(&reply);
            assert!(
                message.contains(&format!("HTTP {status}")),
                "{mode}: {message}"
            );
        }
        for status in [500, 502, 503] {
            fired(&gate.up, &format!("fault: {status}"), 1);
        }
        assert_eq!(executed(&gate.up, "send_email"), 0, "{mode}");
        let reply = gate.call_alone(4, "send_email", mail());
        assert_eq!(text(&reply), r#"sent to ["bob@example.com"]"#);
        assert_eq!(executed(&gate.up, "send_email"), 1, "{mode}");
        gate.finish();
    }
}

#[test]
fn a_reset_after_the_priming_event_is_resumed_with_last_event_id() {
    let mut gate = Gate::start(&["--sse", "--retry-ms", "10"], &[]);
    gate.up.control("reset?at=priming&tool=slow");
    let reply = gate.call_alone(1, "slow", json!({"ms": 200}));
    assert_eq!(text(&reply), "slept 200 ms");
    fired(&gate.up, "fault: reset after priming", 1);
    assert_eq!(executed(&gate.up, "slow"), 1);
    let resumed: Vec<Value> = gate
        .up
        .log()
        .into_iter()
        .filter(|e| e["http"] == "GET" && e["outcome"] == "resumed")
        .collect();
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert!(
        resumed[0]["lastEventId"]
            .as_str()
            .is_some_and(|id| id.ends_with("-0")),
        "resumed after the priming event: {resumed:?}"
    );
    gate.finish();
}

#[test]
fn a_reset_after_a_progress_notification_delivers_it_and_the_result_once() {
    let mut gate = Gate::start(&["--sse", "--retry-ms", "10"], &[]);
    gate.up.control("reset?at=progress&tool=slow");
    gate.call(1, "slow", json!({"ms": 100}), true);
    let (reply, before) = gate.until_response(1);
    assert_eq!(text(&reply), "slept 100 ms");
    assert_eq!(before.len(), 1, "one progress notification: {before:?}");
    assert_eq!(before[0]["method"], "notifications/progress");
    assert_eq!(before[0]["params"]["progressToken"], "progress-1");
    fired(&gate.up, "fault: reset after progress", 1);
    let last = gate
        .up
        .log()
        .into_iter()
        .find(|e| e["http"] == "GET" && e["outcome"] == "resumed")
        .expect("a resumption");
    assert!(
        last["lastEventId"].as_str().unwrap().ends_with("-1"),
        "{last}"
    );
    assert_eq!(executed(&gate.up, "slow"), 1);
    gate.finish();
}

#[test]
fn a_stream_closed_before_the_response_is_answered_on_the_resumption() {
    let mut gate = Gate::start(&["--sse", "--retry-ms", "10"], &[]);
    gate.up.control("close?tool=echo");
    let reply = gate.call_alone(1, "echo", json!({"text": "after the close"}));
    assert_eq!(text(&reply), "after the close");
    fired(&gate.up, "fault: close", 1);
    assert_eq!(executed(&gate.up, "echo"), 1);
    assert!(
        gate.up
            .log()
            .iter()
            .any(|e| e["http"] == "GET" && e["outcome"] == "resumed")
    );
    gate.finish();
}

#[test]
fn a_closed_stream_that_cannot_be_resumed_is_an_error() {
    let mut gate = Gate::start(&["--sse", "--retry-ms", "10", "--no-get"], &[]);
    gate.up.control("close?tool=send_email");
    let reply = gate.call_alone(1, "send_email", mail());
    let message = error_message(&reply);
    assert!(
        message.contains("closed the stream before responding"),
        "{message}"
    );
    fired(&gate.up, "fault: close", 1);
    // The session is intact.
    assert_eq!(
        text(&gate.call_alone(2, "echo", json!({"text": "ok"}))),
        "ok"
    );
    gate.finish();
}

#[test]
fn a_body_cut_short_or_not_json_is_an_error() {
    let mut gate = Gate::start(&["--json"], &[]);
    gate.up.control("reset?tool=echo");
    let message = error_message(&gate.call_alone(1, "echo", json!({"text": "a"}))).to_owned();
    assert!(
        message.contains("reading the remote server's answer failed"),
        "{message}"
    );
    gate.up.control("garbage?tool=echo");
    let message = error_message(&gate.call_alone(2, "echo", json!({"text": "b"}))).to_owned();
    assert!(message.contains("not JSON"), "{message}");
    fired(&gate.up, "fault: reset mid-body", 1);
    fired(&gate.up, "fault: garbage", 1);
    assert_eq!(text(&gate.call_alone(3, "echo", json!({"text": "c"}))), "c");
    gate.finish();
}

#[test]
fn garbage_in_an_sse_stream_never_reaches_the_client() {
    let mut gate = Gate::start(&["--sse"], &[]);
    gate.up.control("garbage?tool=echo");
    // `call_alone` reads every line as JSON-RPC and allows none before the result.
    let reply = gate.call_alone(1, "echo", json!({"text": "through the garbage"}));
    assert_eq!(text(&reply), "through the garbage");
    fired(&gate.up, "fault: garbage", 1);
    assert_eq!(executed(&gate.up, "echo"), 1);
    gate.finish();
}

fn initializes(up: &HttpUpstream) -> Vec<Value> {
    up.log()
        .into_iter()
        .filter(|e| e["method"] == "initialize")
        .collect()
}

#[test]
fn a_restarted_server_gets_the_original_initialize_and_the_call_is_retried() {
    for mode in ["--json", "--sse"] {
        let mut gate = Gate::start(&[mode], &[]);
        assert_eq!(
            text(&gate.call_alone(1, "echo", json!({"text": "one"}))),
            "one"
        );
        gate.up.control("restart");
        let reply = gate.call_alone(2, "echo", json!({"text": "two"}));
        assert_eq!(text(&reply), "two", "{mode}");
        let inits = initializes(&gate.up);
        assert_eq!(inits.len(), 2, "{mode}: {inits:?}");
        assert_eq!(inits[0]["params"], init_params(), "{mode}");
        assert_eq!(
            inits[1]["params"],
            init_params(),
            "{mode}: the client's own params"
        );
        assert_eq!(
            inits[1]["session"],
            Value::Null,
            "{mode}: no stale session id"
        );
        let log = gate.up.log();
        let restart = log.iter().position(|e| e["control"] == "restart").unwrap();
        let after: Vec<&Value> = log[restart..].iter().collect();
        // The refused call, the new session's handshake, then the call again.
        let refused = after.iter().find(|e| e["method"] == "tools/call").unwrap();
        assert_eq!(refused["status"], 404, "{mode}");
        assert!(
            after
                .iter()
                .any(|e| e["method"] == "notifications/initialized" && e["status"] == 202),
            "{mode}: the new session is initialized"
        );
        let calls: Vec<&&Value> = after
            .iter()
            .filter(|e| e["method"] == "tools/call" && e["status"] == 200)
            .collect();
        assert_eq!(calls.len(), 1, "{mode}");
        assert_ne!(calls[0]["session"], refused["session"], "{mode}");
        assert_eq!(executed(&gate.up, "echo"), 2, "{mode}");
        let new_session = calls[0]["session"].clone();
        let (up, _) = gate.finish();
        let log = up.log();
        let delete = log.iter().find(|e| e["http"] == "DELETE").unwrap();
        assert_eq!(
            delete["session"], new_session,
            "{mode}: the new session ends"
        );
    }
}

#[test]
fn a_call_in_flight_when_the_server_restarts_is_answered_with_an_error() {
    let mut gate = Gate::start(&["--sse", "--retry-ms", "10"], &[]);
    gate.call(1, "slow", json!({"ms": 30000}), false);
    assert!(wait_until(Duration::from_secs(20), || {
        !gate.up.calls("slow").is_empty()
    }));
    gate.up.control("restart");
    let (reply, before) = gate.until_response(1);
    assert!(before.is_empty(), "{before:?}");
    let message = error_message(&reply);
    assert!(message.contains("session ended"), "{message}");
    // The next call re-initializes and goes through.
    assert_eq!(
        text(&gate.call_alone(2, "echo", json!({"text": "again"}))),
        "again"
    );
    assert_eq!(initializes(&gate.up).len(), 2);
    gate.finish();
}

#[test]
fn a_slow_call_does_not_hold_up_others_and_times_out_with_an_error() {
    let mut gate = Gate::start(&["--sse"], &["--request-timeout", "2s"]);
    // Pinned first, so that neither call waits for toolgate's own listing.
    assert_eq!(
        text(&gate.call_alone(10, "echo", json!({"text": "a"}))),
        "a"
    );
    gate.call(1, "slow", json!({"ms": 1500}), false);
    gate.call(2, "echo", json!({"text": "quick"}), false);
    let first = gate.client.recv_json();
    assert_eq!(first["id"], 2, "the quick call is answered first: {first}");
    let second = gate.client.recv_json();
    assert_eq!(text(&second), "slept 1500 ms");

    gate.call(3, "slow", json!({"ms": 30000}), false);
    let reply = gate.until_response(3).0;
    let message = error_message(&reply);
    assert!(
        message.contains("no response from the remote server within 2s"),
        "{message}"
    );
    // The server is told the request is no longer waited for.
    let cancelled = gate
        .up
        .log()
        .into_iter()
        .find(|e| e["method"] == "notifications/cancelled")
        .expect("notifications/cancelled sent");
    assert_eq!(cancelled["params"]["requestId"], 3);
    gate.finish();
}

#[test]
fn a_16_mib_result_arrives_whole() {
    for mode in ["--json", "--sse"] {
        let mut gate = Gate::start(&[mode], &[]);
        let reply = gate.call_alone(1, "big", json!({"bytes": 16 << 20}));
        let text = text(&reply);
        assert_eq!(text.len(), 16 << 20, "{mode}");
        assert!(text.bytes().all(|b| b == b'x'), "{mode}");
        gate.finish();
    }
}

#[test]
fn a_result_over_the_message_limit_is_an_error() {
    for mode in ["--json", "--sse"] {
        let mut gate = Gate::start(&[mode], &["--max-message-bytes", "1048576"]);
        let reply = gate.call_alone(1, "big", json!({"bytes": 2 << 20}));
        let message = error_message(&reply);
        assert!(message.contains("limit"), "{mode}: {message}");
        assert_eq!(
            text(&gate.call_alone(2, "echo", json!({"text": "ok"}))),
            "ok"
        );
        gate.finish();
    }
}

#[test]
fn a_redirect_to_another_origin_is_refused_and_one_within_the_origin_followed() {
    let mut gate = Gate::start(&["--json"], &[]);
    gate.up.control("redirect?to=cross&tool=send_email");
    let reply = gate.call_alone(1, "send_email", mail());
    let message = error_message(&reply);
    assert!(
        message.contains("redirected to another origin"),
        "{message}"
    );
    assert!(
        message.contains(&gate.up.other()),
        "names the target: {message}"
    );
    assert!(
        gate.up.log().iter().all(|e| e["listener"] == "main"),
        "nothing was sent to the other origin"
    );
    assert_eq!(executed(&gate.up, "send_email"), 0);

    gate.up.control("redirect?to=same&tool=send_email");
    let reply = gate.call_alone(2, "send_email", mail());
    assert_eq!(text(&reply), r#"sent to ["bob@example.com"]"#);
    assert_eq!(executed(&gate.up, "send_email"), 1);
    gate.finish();
}

#[test]
fn an_expired_token_is_an_error_that_says_how_to_authorize() {
    let mut gate = Gate::start_with(
        &["--json", "--token", "first-token"],
        &["--header", "Authorization: Bearer ${FAULTS_TOKEN}"],
        |cmd| {
            cmd.env("FAULTS_TOKEN", "first-token");
        },
    );
    assert_eq!(text(&gate.call_alone(1, "echo", json!({"text": "a"}))), "a");
    gate.up.control("token?value=second-token");
    let reply = gate.call_alone(2, "send_email", mail());
    let message = error_message(&reply).to_owned();
    assert!(message.contains("HTTP 401"), "{message}");
    assert!(message.contains("help:"), "{message}");
    assert!(!message.contains("first-token"), "{message}");
    assert_eq!(executed(&gate.up, "send_email"), 0);
    let (_, stderr) = gate.finish();
    assert!(!stderr.contains("first-token"), "{stderr}");
}

#[test]
fn server_notifications_on_the_get_stream_arrive_once_and_the_session_is_deleted() {
    let mut gate = Gate::start(&["--json"], &[]);
    assert!(wait_until(Duration::from_secs(20), || {
        gate.up
            .log()
            .iter()
            .any(|e| e["http"] == "GET" && e["outcome"] == "opened")
    }));
    gate.up.control("notify?text=hello");
    let note = gate.client.recv_json();
    assert_eq!(note["method"], "notifications/message");
    assert_eq!(note["params"]["data"], "hello");
    assert_eq!(text(&gate.call_alone(1, "echo", json!({"text": "x"}))), "x");
    let session = gate.up.log()[0]["session"].clone();
    let (up, _) = gate.finish();
    let log = up.log();
    let sid = log
        .iter()
        .find(|e| e["method"] == "tools/call")
        .map(|e| e["session"].clone())
        .unwrap();
    assert_eq!(session, Value::Null, "initialize carries no session");
    let delete = log
        .iter()
        .find(|e| e["http"] == "DELETE")
        .expect("DELETE on exit");
    assert_eq!(delete["session"], sid);
    assert_eq!(delete["status"], 200);
    // `MCP-Protocol-Version` on everything after `initialize`, and the session id.
    for entry in &log[1..] {
        assert_eq!(entry["protocolVersion"], VERSION, "{entry}");
        assert_eq!(entry["session"], sid, "{entry}");
    }
    assert_eq!(log[0]["method"], "initialize");
    assert_eq!(log[0]["protocolVersion"], Value::Null);
}

#[test]
fn a_json_rpc_error_in_a_failure_is_relayed_as_the_server_s_answer() {
    let mut gate = Gate::start(&["--sse"], &[]);
    gate.up.control("fail?status=503&jsonrpc&tool=send_email");
    let reply = gate.call_alone(1, "send_email", mail());
    assert_eq!(reply["error"]["code"], -32000, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("the server is overloaded"), "{message}");
    fired(&gate.up, "fault: 503", 1);
    assert_eq!(executed(&gate.up, "send_email"), 0);
    gate.finish();
}

#[test]
fn a_failed_initialize_is_answered_and_can_be_tried_again() {
    let dir = tempfile::tempdir().unwrap();
    let up = HttpUpstream::start(&["--json", "--fault", "fail?status=503&method=initialize"]);
    let mut gate = Gate {
        client: Peer::spawn(wrap_command(dir.path(), &up.url(), &[]), true),
        up,
        _dir: dir,
    };
    let init = json!({"jsonrpc": "2.0", "id": "init-1", "method": "initialize",
        "params": init_params()});
    gate.client.send(init.to_string());
    let reply = gate.client.recv_json();
    assert_eq!(reply["id"], "init-1");
    let message = error_message(&reply);
    assert!(message.contains("HTTP 503"), "{message}");
    gate.initialize();
    assert_eq!(
        text(&gate.call_alone(1, "echo", json!({"text": "up"}))),
        "up"
    );
    fired(&gate.up, "fault: 503", 1);
    gate.finish();
}

#[test]
fn when_toolgate_s_own_listing_fails_the_call_is_refused_and_not_run() {
    let mut gate = Gate::start(&["--json"], &[]);
    // The client calls without listing: toolgate lists the tools itself to pin them
    // before it decides, and that listing fails.
    gate.up
        .control("fail?status=503&method=tools/list&count=10");
    let reply = gate.call_alone(1, "send_email", mail());
    assert!(
        reply["result"]["isError"] == true || reply.get("error").is_some(),
        "refused: {reply}"
    );
    assert!(
        reply.to_string().contains("tools/list"),
        "says why: {reply}"
    );
    assert!(gate.up.log().iter().any(|e| e["outcome"] == "fault: 503"));
    assert_eq!(executed(&gate.up, "send_email"), 0);
    gate.finish();
}

#[test]
fn a_server_that_is_gone_gets_every_request_answered() {
    let mut gate = Gate::start(&["--sse"], &[]);
    assert_eq!(text(&gate.call_alone(1, "echo", json!({"text": "a"}))), "a");
    gate.up.kill();
    for id in 2..5 {
        let reply = gate.call_alone(id, "echo", json!({"text": "b"}));
        let message = error_message(&reply);
        assert!(
            message.contains("cannot reach the remote server"),
            "{message}"
        );
    }
    gate.client.close_stdin();
    assert!(gate.client.recv_to_end().is_empty());
    let status = gate.client.wait();
    assert!(status.success(), "{status}");
}

#[test]
fn after_a_restart_server_notifications_arrive_on_a_new_get_stream() {
    let mut gate = Gate::start(&["--sse", "--retry-ms", "10"], &[]);
    let opened = |up: &HttpUpstream| {
        up.log()
            .iter()
            .filter(|e| e["http"] == "GET" && e["outcome"] == "opened")
            .count()
    };
    assert!(wait_until(Duration::from_secs(20), || opened(&gate.up) == 1));
    gate.up.control("restart");
    assert_eq!(text(&gate.call_alone(1, "echo", json!({"text": "x"}))), "x");
    assert!(wait_until(Duration::from_secs(20), || opened(&gate.up) == 2));
    gate.up.control("notify?text=after-restart");
    let note = gate.client.recv_json();
    assert_eq!(note["params"]["data"], "after-restart", "{note}");
    assert_eq!(text(&gate.call_alone(2, "echo", json!({"text": "y"}))), "y");
    gate.finish();
}

#[test]
fn concurrent_calls_after_a_restart_share_one_new_session() {
    for mode in ["--json", "--sse"] {
        let mut gate = Gate::start(&[mode], &[]);
        assert_eq!(text(&gate.call_alone(1, "echo", json!({"text": "a"}))), "a");
        gate.up.control("restart");
        for id in 10..14 {
            gate.call(id, "echo", json!({"text": format!("call {id}")}), false);
        }
        let mut answered: Vec<u64> = (0..4)
            .map(|_| {
                let reply = gate.client.recv_json();
                let id = reply["id"].as_u64().unwrap_or_else(|| panic!("{reply}"));
                assert_eq!(text(&reply), format!("call {id}"), "{mode}");
                id
            })
            .collect();
        answered.sort_unstable();
        assert_eq!(answered, [10, 11, 12, 13], "{mode}: each answered once");
        assert_eq!(
            initializes(&gate.up).len(),
            2,
            "{mode}: one re-initialization"
        );
        assert_eq!(executed(&gate.up, "echo"), 5, "{mode}");
        gate.finish();
    }
}

#[test]
fn an_initialize_slower_than_the_request_timeout_is_answered_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let up = HttpUpstream::start(&["--json", "--fault", "delay?ms=5000&method=initialize"]);
    let mut client = Peer::spawn(
        wrap_command(dir.path(), &up.url(), &["--request-timeout", "1s"]),
        true,
    );
    let init = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": init_params()});
    client.send(init.to_string());
    let reply = client.recv_json();
    assert_eq!(reply["id"], "init");
    let message = error_message(&reply);
    assert!(
        message.contains("did not answer `initialize` within 1s"),
        "{message}"
    );
    client.close_stdin();
    assert!(client.recv_to_end().is_empty());
    client.wait();
}

/// The official Rust SDK as the client: what toolgate delivers after faults must also be
/// what an SDK accepts (one response per request, well-formed results).
#[test]
fn an_rmcp_client_rides_out_resets_closes_and_a_restart() {
    use rmcp::ServiceExt as _;
    use rmcp::model::CallToolRequestParams;

    let dir = tempfile::tempdir().unwrap();
    let up = HttpUpstream::start(&["--sse", "--retry-ms", "10"]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let std_cmd = wrap_command(dir.path(), &up.url(), &[]);
        let mut cmd = tokio::process::Command::from(std_cmd);
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let limit = Duration::from_secs(20);
        let client = tokio::time::timeout(limit, ().serve((stdout, stdin)))
            .await
            .expect("initialize in time")
            .expect("initialize");
        let peer = client.peer().clone();
        let tools = tokio::time::timeout(limit, peer.list_all_tools())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(tools.len(), 6);
        let call = |text: &str| -> CallToolRequestParams {
            serde_json::from_value(json!({"name": "echo", "arguments": {"text": text}})).unwrap()
        };
        let echo = |result: rmcp::model::CallToolResult| {
            serde_json::to_value(&result).unwrap()["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        for (fault, text) in [
            ("reset?at=priming&tool=echo", "after a reset"),
            ("close?tool=echo", "after a close"),
            ("restart", "after a restart"),
            ("garbage?tool=echo", "after garbage"),
        ] {
            up.control(fault);
            let result = tokio::time::timeout(limit, peer.call_tool(call(text)))
                .await
                .unwrap_or_else(|_| panic!("{fault}: answered in time"))
                .unwrap_or_else(|e| panic!("{fault}: {e}"));
            assert_eq!(echo(result), text, "{fault}");
        }
        tokio::time::timeout(limit, client.cancel())
            .await
            .unwrap()
            .unwrap();
        let status = tokio::time::timeout(limit, child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "{status}");
    });
    assert_eq!(executed(&up, "echo"), 4);
    assert_eq!(initializes(&up).len(), 2);
}

fn gets(up: &HttpUpstream) -> Vec<String> {
    up.log()
        .into_iter()
        .filter(|e| e["http"] == "GET" && e["lastEventId"].is_string())
        .map(|e| e["outcome"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_server_that_closes_every_stream_after_priming_is_polled_until_it_responds() {
    let mut gate = Gate::start(&["--sse", "--retry-ms", "10"], &[]);
    // SEP-1699 polling: the server answers with a priming event and hangs up, each time.
    gate.up.control("close?tool=slow");
    gate.up.control("close?on=get&count=3");
    gate.call(1, "slow", json!({"ms": 50}), true);
    let (reply, before) = gate.until_response(1);
    assert_eq!(text(&reply), "slept 50 ms");
    assert_eq!(
        before.len(),
        1,
        "the progress notification, once: {before:?}"
    );
    assert_eq!(
        gets(&gate.up),
        ["fault: close", "fault: close", "fault: close", "resumed"]
    );
    assert_eq!(executed(&gate.up, "slow"), 1);
    gate.finish();
}

#[test]
fn a_resumption_refused_by_the_server_answers_the_request_once() {
    let mut gate = Gate::start(&["--sse", "--retry-ms", "10"], &[]);
    gate.up.control("reset?tool=send_email");
    gate.up.control("fail?on=get&status=503");
    let reply = gate.call_alone(1, "send_email", mail());
    // Either toolgate resumes again and gets the result, or it gives up with a message
    // that says why; never silence, never twice.
    if reply.get("error").is_some() {
        let message = error_message(&reply);
        assert!(message.contains("HTTP 503"), "{message}");
    } else {
        assert_eq!(text(&reply), r#"sent to ["bob@example.com"]"#);
    }
    assert_eq!(gets(&gate.up)[0], "fault: 503");
    assert_eq!(executed(&gate.up, "send_email"), 1);
    gate.finish();
}

#[test]
fn garbage_over_the_message_limit_ends_in_an_error_not_in_memory() {
    let mut gate = Gate::start(&["--sse"], &["--max-message-bytes", "1048576"]);
    gate.up.control("garbage?bytes=4194304&tool=echo");
    let reply = gate.call_alone(1, "echo", json!({"text": "lost"}));
    let message = error_message(&reply);
    assert!(
        message.contains("over the limit of 1048576 bytes"),
        "{message}"
    );
    fired(&gate.up, "fault: garbage", 1);
    assert_eq!(
        text(&gate.call_alone(2, "echo", json!({"text": "ok"}))),
        "ok"
    );
    gate.finish();
}

#[test]
fn a_refused_initialize_with_no_legacy_transport_either_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    // 405 to the initialize POST: `--transport auto` tries the legacy HTTP+SSE transport,
    // whose GET this server refuses too.
    let up = HttpUpstream::start(&["--json", "--fault", "fail?status=405&method=initialize"]);
    let mut client = Peer::spawn(wrap_command(dir.path(), &up.url(), &[]), true);
    let init = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": init_params()});
    client.send(init.to_string());
    let reply = client.recv_json();
    assert_eq!(reply["id"], "init");
    let message = error_message(&reply);
    assert!(
        message.contains("speaks neither Streamable HTTP nor HTTP+SSE"),
        "{message}"
    );
    // Later requests are answered too.
    client.send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    let reply = client.recv_json();
    assert_eq!(reply["id"], 2);
    assert!(reply["error"]["message"].is_string(), "{reply}");
    client.close_stdin();
    assert!(client.recv_to_end().is_empty());
    client.wait();
}

/// A notification (or a response) the server never accepts holds up what follows only for
/// a bounded time (this test found the unbounded wait; main bounds it at 5 s).
#[test]
fn a_notification_the_server_never_accepts_does_not_hold_up_requests() {
    let mut gate = Gate::start(&["--json"], &["--request-timeout", "2s"]);
    gate.up
        .control("delay?ms=600000&method=notifications/roots/list_changed");
    gate.client
        .send(r#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#);
    gate.client
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    // Answered (a result, or an error saying the server did not answer) within the
    // request timeout and a margin, not after the test kit's 20 s.
    let reply = gate
        .client
        .recv_within(Duration::from_secs(10))
        .expect("the ping is answered while the notification waits");
    let reply: Value = serde_json::from_slice(&reply).unwrap();
    assert_eq!(reply["id"], 1, "{reply}");
    gate.finish();
}

#[test]
fn a_request_the_server_only_accepts_is_answered_with_an_error() {
    for mode in ["--json", "--sse"] {
        let mut gate = Gate::start(&[mode], &[]);
        gate.up.control("accept?tool=send_email");
        let reply = gate.call_alone(1, "send_email", mail());
        let message = error_message(&reply);
        assert!(message.contains("HTTP 202"), "{mode}: {message}");
        fired(&gate.up, "fault: 202", 1);
        assert_eq!(executed(&gate.up, "send_email"), 0, "{mode}");
        gate.finish();
    }
}

#[test]
fn a_token_that_expires_before_the_resumption_is_an_error_that_names_401() {
    let mut gate = Gate::start_with(
        &["--sse", "--retry-ms", "10", "--token", "first-token"],
        &["--header", "Authorization: Bearer ${FAULTS_TOKEN}"],
        |cmd| {
            cmd.env("FAULTS_TOKEN", "first-token");
        },
    );
    // Pinned first, so that the next request is the call itself.
    assert_eq!(text(&gate.call_alone(1, "echo", json!({"text": "a"}))), "a");
    // The call's POST is the token's last accepted request; the stream closes before the
    // response, and the resumption GET is refused.
    gate.up.control("close?tool=slow");
    gate.up.control("token?value=second-token&after=1");
    let reply = gate.call_alone(2, "slow", json!({"ms": 10}));
    let message = error_message(&reply).to_owned();
    assert!(message.contains("401"), "{message}");
    assert!(!message.contains("first-token"), "{message}");
    assert_eq!(gets(&gate.up), ["unauthorized"]);
    let (_, stderr) = gate.finish();
    assert!(!stderr.contains("first-token"), "{stderr}");
}

#[test]
fn a_reset_in_the_middle_of_the_response_event_delivers_the_whole_response_once() {
    let mut gate = Gate::start(&["--sse", "--retry-ms", "10"], &[]);
    gate.up.control("reset?at=response&tool=echo");
    let long = "y".repeat(100_000);
    gate.call(1, "echo", json!({"text": long}), true);
    let (reply, before) = gate.until_response(1);
    assert_eq!(text(&reply), long);
    assert_eq!(
        before.len(),
        1,
        "the progress notification, once: {before:?}"
    );
    fired(&gate.up, "fault: reset in the response", 1);
    assert_eq!(gets(&gate.up), ["resumed"]);
    let resumed = gate
        .up
        .log()
        .into_iter()
        .find(|e| e["outcome"] == "resumed")
        .unwrap();
    assert!(
        resumed["lastEventId"].as_str().unwrap().ends_with("-1"),
        "resumed after the progress notification, not after the cut event: {resumed}"
    );
    gate.finish();
}

#[test]
fn a_server_request_before_a_reset_reaches_the_client_once_and_its_answer_the_server() {
    let mut gate = Gate::start(&["--sse", "--retry-ms", "10"], &[]);
    // The stream breaks right after the server's request to the client; the resumption
    // must not deliver that request again.
    gate.up.control("reset?at=progress&tool=ask");
    gate.call(1, "ask", json!({"method": "roots/list"}), false);
    let request = gate.client.recv_json();
    assert_eq!(request["method"], "roots/list", "{request}");
    let answer = json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"roots": [{"uri": "file:///work", "name": "work"}]}});
    gate.client.send(answer.to_string());
    let (reply, before) = gate.until_response(1);
    assert!(
        before.is_empty(),
        "nothing else, the request not twice: {before:?}"
    );
    let relayed: Value = serde_json::from_str(text(&reply)).unwrap();
    assert_eq!(relayed["result"]["roots"][0]["uri"], "file:///work");
    fired(&gate.up, "fault: reset after progress", 1);
    assert_eq!(gets(&gate.up), ["resumed"]);
    gate.finish();
}

/// The outcomes of the GETs that opened or resumed the session's stream (stream 0).
fn listening(up: &HttpUpstream) -> Vec<String> {
    up.log()
        .into_iter()
        .filter(|e| {
            e["http"] == "GET"
                && (e["lastEventId"].is_null()
                    || e["lastEventId"]
                        .as_str()
                        .is_some_and(|l| l.starts_with("0-")))
        })
        .map(|e| e["outcome"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_listening_stream_the_server_closes_is_opened_again_and_loses_nothing() {
    let mut gate = Gate::start(
        &[
            "--json",
            "--retry-ms",
            "10",
            "--fault",
            "close?on=listen&count=2",
        ],
        &[],
    );
    assert!(wait_until(Duration::from_secs(20), || {
        listening(&gate.up).len() == 3
    }));
    // Resumed after the priming event of the last stream, not opened afresh.
    assert_eq!(
        listening(&gate.up),
        ["fault: close", "fault: close", "resumed"]
    );
    gate.up.control("notify?text=after-two-closes");
    let note = gate.client.recv_json();
    assert_eq!(note["params"]["data"], "after-two-closes", "{note}");
    assert_eq!(text(&gate.call_alone(1, "echo", json!({"text": "x"}))), "x");
    gate.finish();
}

/// Found by this test: when the GET that opens the listening stream is refused with a
/// status other than 405 (here one 503), the transport never tries again, so every
/// server-initiated message of the session (`notifications/tools/list_changed`, log
/// messages, resource updates) is lost without a word above debug level. Remove the
/// `ignore` once a refused listening stream is retried (with a bound, as a dropped one
/// is).
#[test]

fn a_listening_stream_refused_once_is_opened_again() {
    let gate = Gate::start(
        &[
            "--json",
            "--retry-ms",
            "10",
            "--fault",
            "fail?on=listen&status=503",
        ],
        &[],
    );
    assert!(
        wait_until(Duration::from_secs(10), || {
            listening(&gate.up).len() == 2
        }),
        "{:?}",
        listening(&gate.up)
    );
    gate.up.control("notify?text=after-a-503");
    let note = gate.client.recv_json();
    assert_eq!(note["params"]["data"], "after-a-503", "{note}");
    gate.finish();
}

/// Found by this test: when the re-initialization after a 404 fails (the restarted
/// server is not ready yet: one 503), the transport has dropped the old session id and
/// has none, so every later request goes without `Mcp-Session-Id` and gets the server's
/// 400 "Mcp-Session-Id header is required": the session never comes back until the
/// client restarts toolgate. Remove the `ignore` once a failed re-initialization is tried
/// again by the next request.
#[test]

fn a_failed_re_initialization_is_tried_again_by_the_next_call() {
    let mut gate = Gate::start(&["--json"], &[]);
    assert_eq!(text(&gate.call_alone(1, "echo", json!({"text": "a"}))), "a");
    gate.up.control("restart");
    gate.up.control("fail?status=503&method=initialize");
    let reply = gate.call_alone(2, "echo", json!({"text": "b"}));
    let message = error_message(&reply).to_owned();
    assert!(message.contains("initializing again failed"), "{message}");
    assert!(message.contains("HTTP 503"), "{message}");
    let reply = gate.call_alone(3, "echo", json!({"text": "c"}));
    assert_eq!(text(&reply), "c", "the session is re-established: {reply}");
    assert_eq!(initializes(&gate.up).len(), 3);
    gate.finish();
}
