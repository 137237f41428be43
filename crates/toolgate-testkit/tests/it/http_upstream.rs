//! The fault-injecting Streamable HTTP server of the test kit, driven directly over HTTP:
//! each fault does what the `toolgate wrap --url` tests rely on.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_testkit::http::{HttpUpstream, mcp_post, request};

const V: &str = "2025-11-25";

fn init(up: &HttpUpstream, version: &str) -> String {
    let msg = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let reply = mcp_post(&up.addr, None, &[], &msg.to_string());
    assert_eq!(reply.status, 200);
    let sid = reply
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();
    let body = if reply.header("content-type") == Some("text/event-stream") {
        let (events, clean) = reply.events();
        assert!(clean);
        serde_json::from_str(&events.last().unwrap().data).unwrap()
    } else {
        reply.json()
    };
    assert_eq!(body["result"]["protocolVersion"], version);
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let ack = mcp_post(
        &up.addr,
        Some(&sid),
        &[("MCP-Protocol-Version", version)],
        note,
    );
    assert_eq!(ack.status, 202);
    sid
}

fn call(id: u64, tool: &str, args: Value, progress: bool) -> String {
    let mut params = json!({"name": tool, "arguments": args});
    if progress {
        params["_meta"] = json!({"progressToken": format!("p{id}")});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

fn post(up: &HttpUpstream, sid: &str, msg: &str) -> toolgate_testkit::http::HttpReply {
    mcp_post(&up.addr, Some(sid), &[("MCP-Protocol-Version", V)], msg)
}

fn resume(up: &HttpUpstream, sid: &str, last: &str) -> toolgate_testkit::http::HttpReply {
    request(
        &up.addr,
        "GET",
        "/mcp",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", sid),
            ("MCP-Protocol-Version", V),
            ("Last-Event-ID", last),
        ],
        b"",
    )
}

fn data(e: &toolgate_testkit::http::SseEvent) -> Value {
    serde_json::from_str(&e.data).unwrap_or_else(|_| panic!("not json: {}", e.data))
}

#[test]
fn json_mode_serves_a_session_from_initialize_to_delete() {
    let up = HttpUpstream::start(&["--json"]);
    let sid = init(&up, V);
    let list = post(
        &up,
        &sid,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    )
    .json();
    let names: Vec<_> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        ["echo", "slow", "big", "read_email", "ask", "send_email"]
    );
    let echo = post(&up, &sid, &call(2, "echo", json!({"text": "hi"}), false)).json();
    assert_eq!(echo["result"]["content"][0]["text"], "hi");
    assert_eq!(echo["id"], 2);
    let mail = post(
        &up,
        &sid,
        &call(3, "read_email", json!({"message_id": "1"}), false),
    )
    .json();
    let text = mail["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("exfil@attacker.example") && text.contains("https://evil.example/"));

    // No session id: 400; after DELETE: 404.
    let none = mcp_post(
        &up.addr,
        None,
        &[],
        &call(4, "echo", json!({"text": "x"}), false),
    );
    assert_eq!(none.status, 400);
    let del = request(&up.addr, "DELETE", "/mcp", &[("Mcp-Session-Id", &sid)], b"");
    assert_eq!(del.status, 200);
    let gone = post(&up, &sid, &call(5, "echo", json!({"text": "x"}), false));
    assert_eq!(gone.status, 404);
    assert_eq!(gone.json()["error"]["code"], -32001);
    assert_eq!(up.calls("echo").len(), 1);
}

#[test]
fn sse_mode_primes_streams_of_new_clients_only_and_numbers_events() {
    let up = HttpUpstream::start(&["--sse", "--retry-ms", "250"]);
    let sid = init(&up, V);
    let reply = post(&up, &sid, &call(1, "echo", json!({"text": "hi"}), true));
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let (events, clean) = reply.events();
    assert!(clean);
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[0].id.as_deref(), Some("2-0"));
    assert_eq!(events[0].retry, Some(250));
    assert_eq!(events[0].data, "");
    assert_eq!(data(&events[1])["method"], "notifications/progress");
    assert_eq!(events[1].id.as_deref(), Some("2-1"));
    assert_eq!(data(&events[2])["result"]["content"][0]["text"], "hi");
    assert_eq!(events[2].id.as_deref(), Some("2-2"));

    let old = "2025-06-18";
    let sid = init(&up, old);
    let reply = mcp_post(
        &up.addr,
        Some(&sid),
        &[("MCP-Protocol-Version", old)],
        &call(1, "echo", json!({"text": "hi"}), false),
    );
    let (events, clean) = reply.events();
    assert!(clean);
    assert_eq!(
        events.len(),
        1,
        "no priming event before 2025-11-25: {events:?}"
    );
    assert_eq!(events[0].id.as_deref(), Some("2-1"));
}

#[test]
fn a_reset_after_the_priming_event_is_resumed_by_get() {
    let up = HttpUpstream::start(&["--sse"]);
    let sid = init(&up, V);
    up.control("reset?at=priming&method=tools/call");
    let reply = post(&up, &sid, &call(7, "slow", json!({"ms": 100}), false));
    assert_eq!(reply.status, 200);
    let (events, clean) = reply.events();
    assert!(!clean, "the stream must be cut short");
    assert_eq!(events.len(), 1);
    let last = events[0].id.clone().unwrap();
    let (events, clean) = resume(&up, &sid, &last).events();
    assert!(clean);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(
        events[0].id.as_deref(),
        Some(last.as_str()),
        "primed where it resumes"
    );
    assert_eq!(events[0].data, "");
    assert_eq!(data(&events[1])["id"], 7);
    assert_eq!(
        data(&events[1])["result"]["content"][0]["text"],
        "slept 100 ms"
    );
    assert_eq!(up.calls("slow").len(), 1);
}

#[test]
fn a_reset_after_a_progress_notification_resumes_after_it() {
    let up = HttpUpstream::start(&["--sse"]);
    let sid = init(&up, V);
    up.control("reset?at=progress&tool=slow");
    let (events, clean) = post(&up, &sid, &call(8, "slow", json!({"ms": 50}), true)).events();
    assert!(!clean);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(data(&events[1])["method"], "notifications/progress");
    let (events, clean) = resume(&up, &sid, events[1].id.as_deref().unwrap()).events();
    assert!(clean);
    assert_eq!(
        events.len(),
        2,
        "a priming event, then what followed: {events:?}"
    );
    assert_eq!(data(&events[1])["id"], 8);
}

#[test]
fn a_stream_closed_before_the_response_delivers_it_on_resumption() {
    let up = HttpUpstream::start(&["--sse"]);
    let sid = init(&up, V);
    up.control("close?method=tools/call");
    let (events, clean) =
        post(&up, &sid, &call(9, "echo", json!({"text": "later"}), false)).events();
    assert!(clean, "closed cleanly");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].data, "");
    assert!(events[0].retry.is_some());
    let (events, clean) = resume(&up, &sid, events[0].id.as_deref().unwrap()).events();
    assert!(clean);
    assert_eq!(data(&events[1])["result"]["content"][0]["text"], "later");
}

#[test]
fn failures_answer_the_next_posts_with_the_status_and_run_nothing() {
    let up = HttpUpstream::start(&["--json", "--fault", "fail?status=502&method=tools/call"]);
    let sid = init(&up, V);
    up.control("fail?status=503&count=2&method=tools/call");
    let msg = call(
        1,
        "send_email",
        json!({"to": ["a@b.example"], "subject": "s", "body": "b"}),
        false,
    );
    assert_eq!(post(&up, &sid, &msg).status, 502);
    assert_eq!(post(&up, &sid, &msg).status, 503);
    assert_eq!(post(&up, &sid, &msg).status, 503);
    up.control("fail?status=503&jsonrpc");
    let reply = post(&up, &sid, &msg);
    assert_eq!(reply.status, 503);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let error = reply.json();
    assert_eq!(
        (error["id"].clone(), error["error"]["code"].clone()),
        (json!(1), json!(-32000))
    );
    assert_eq!(post(&up, &sid, &msg).json()["id"], 1);
    assert_eq!(up.calls("send_email").len(), 1);
}

#[test]
fn a_restart_forgets_sessions_and_aborts_open_streams() {
    let up = HttpUpstream::start(&["--sse"]);
    let sid = init(&up, V);
    let mut stream = request(
        &up.addr,
        "GET",
        "/mcp",
        &[("Accept", "text/event-stream"), ("Mcp-Session-Id", &sid)],
        b"",
    );
    assert_eq!(stream.status, 200);
    let prime = stream.next_event().unwrap().unwrap();
    assert_eq!(prime.data, "");
    up.control("restart");
    assert!(stream.next_event().is_err(), "the GET stream is cut");
    let reply = post(&up, &sid, &call(1, "echo", json!({"text": "x"}), false));
    assert_eq!(reply.status, 404);
    let sid2 = init(&up, V);
    assert_ne!(sid, sid2);
}

#[test]
fn the_get_stream_carries_server_notifications_once() {
    let up = HttpUpstream::start(&["--json"]);
    let sid = init(&up, V);
    let open = |last: Option<&str>| {
        let mut h = vec![
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", sid.as_str()),
        ];
        if let Some(l) = last {
            h.push(("Last-Event-ID", l));
        }
        request(&up.addr, "GET", "/mcp", &h, b"")
    };
    let mut stream = open(None);
    assert_eq!(stream.next_event().unwrap().unwrap().data, "");
    up.control("notify?text=first");
    let first = stream.next_event().unwrap().unwrap();
    assert_eq!(data(&first)["params"]["data"], "first");
    drop(stream);
    up.control("notify?text=second");
    let mut stream = open(first.id.as_deref());
    assert_eq!(stream.next_event().unwrap().unwrap().data, "", "priming");
    let second = stream.next_event().unwrap().unwrap();
    assert_eq!(data(&second)["params"]["data"], "second");

    let no_get = HttpUpstream::start(&["--no-get"]);
    let sid = init(&no_get, V);
    let r = request(
        &no_get.addr,
        "GET",
        "/mcp",
        &[("Accept", "text/event-stream"), ("Mcp-Session-Id", &sid)],
        b"",
    );
    assert_eq!(r.status, 405);
}

#[test]
fn garbage_precedes_the_real_events_and_a_json_body_can_be_garbage() {
    let up = HttpUpstream::start(&["--sse"]);
    let sid = init(&up, V);
    up.control("garbage?method=tools/call");
    let (body, clean) = post(&up, &sid, &call(3, "echo", json!({"text": "ok"}), false)).body();
    assert!(clean);
    let body = String::from_utf8(body).unwrap();
    assert!(body.starts_with("this line is not SSE\n"), "{body}");
    assert!(body.contains("data: not json {"));
    assert!(body.ends_with("\"isError\":false}}\n\n") || body.contains("\"text\":\"ok\""));

    let up = HttpUpstream::start(&["--json", "--fault", "garbage?method=tools/call"]);
    let sid = init(&up, V);
    let (body, clean) = post(&up, &sid, &call(3, "echo", json!({"text": "ok"}), false)).body();
    assert!(clean);
    assert!(serde_json::from_slice::<Value>(&body).is_err());
}

#[test]
fn redirects_point_to_another_origin_or_back() {
    let up = HttpUpstream::start(&["--json"]);
    let sid = init(&up, V);
    up.control("redirect?method=tools/call");
    up.control("redirect?to=same&method=tools/call");
    let msg = call(1, "echo", json!({"text": "x"}), false);
    let cross = post(&up, &sid, &msg);
    assert_eq!(cross.status, 307);
    assert_eq!(
        cross.header("location").unwrap(),
        format!("http://{}/mcp", up.other())
    );
    let same = post(&up, &sid, &msg);
    assert_eq!(same.header("location").unwrap(), up.url());
    assert_eq!(post(&up, &sid, &msg).status, 200);
}

#[test]
fn an_expired_token_gets_401_with_a_challenge() {
    let up = HttpUpstream::start(&[
        "--json",
        "--token",
        "t1",
        "--auth-server",
        "http://127.0.0.1:1/",
    ]);
    let msg = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    let denied = mcp_post(&up.addr, None, &[], &msg);
    assert_eq!(denied.status, 401);
    let challenge = denied.header("www-authenticate").unwrap().to_owned();
    assert!(challenge.starts_with("Bearer ") && challenge.contains("resource_metadata=\""));
    let ok = mcp_post(&up.addr, None, &[("Authorization", "Bearer t1")], &msg);
    assert_eq!(ok.status, 200);
    let sid = ok.header("mcp-session-id").unwrap().to_owned();
    up.control("token?value=t2");
    let call = call(1, "echo", json!({"text": "x"}), false);
    let auth =
        |t: &'static str| mcp_post(&up.addr, Some(&sid), &[("Authorization", t)], &call).status;
    assert_eq!(auth("Bearer t1"), 401);
    assert_eq!(auth("Bearer t2"), 200);
    // Valid twice more, then replaced.
    up.control("token?value=t3&after=2");
    assert_eq!(auth("Bearer t2"), 200);
    assert_eq!(auth("Bearer t3"), 401);
    assert_eq!(auth("Bearer t2"), 200);
    assert_eq!(auth("Bearer t2"), 401);
    assert_eq!(auth("Bearer t3"), 200);
    let meta = request(
        &up.addr,
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        &[],
        b"",
    )
    .json();
    assert_eq!(meta["authorization_servers"][0], "http://127.0.0.1:1/");
}

#[test]
fn big_answers_sixteen_mebibytes_in_both_modes() {
    for mode in ["--json", "--sse"] {
        let up = HttpUpstream::start(&[mode]);
        let sid = init(&up, V);
        let reply = post(&up, &sid, &call(1, "big", json!({}), false));
        let value = if mode == "--json" {
            reply.json()
        } else {
            let (events, clean) = reply.events();
            assert!(clean);
            data(events.last().unwrap())
        };
        let text = value["result"]["content"][0]["text"].as_str().unwrap();
        assert_eq!(text.len(), 16 << 20);
    }
}

#[test]
fn a_delay_holds_the_answer() {
    let up = HttpUpstream::start(&["--json"]);
    let sid = init(&up, V);
    up.control("delay?ms=300&method=tools/call");
    let started = Instant::now();
    let r = post(&up, &sid, &call(1, "echo", json!({"text": "x"}), false));
    assert_eq!(r.status, 200);
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[test]
fn a_reset_in_json_mode_cuts_the_body_in_half() {
    let up = HttpUpstream::start(&["--json"]);
    let sid = init(&up, V);
    up.control("reset?method=tools/call");
    let (body, complete) = post(&up, &sid, &call(1, "echo", json!({"text": "x"}), false)).body();
    assert!(!complete);
    assert!(!body.is_empty() && serde_json::from_slice::<Value>(&body).is_err());
}

#[test]
fn help_describes_the_flags() {
    let out = std::process::Command::new(toolgate_testkit::bin_path("http_upstream"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("--fault SPEC") && text.contains("/control/restart"));
}

#[test]
fn faults_on_get_strike_resumptions() {
    let up = HttpUpstream::start(&["--sse"]);
    let sid = init(&up, V);
    up.control("close?method=tools/call");
    up.control("close?on=get");
    up.control("fail?on=get&status=503");
    let (events, _) = post(&up, &sid, &call(1, "echo", json!({"text": "x"}), false)).events();
    let last = events[0].id.clone().unwrap();
    // Closed again after the priming event; then refused; then served.
    let (events, clean) = resume(&up, &sid, &last).events();
    assert!(clean);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].data, "");
    assert_eq!(resume(&up, &sid, &last).status, 503);
    let (events, clean) = resume(&up, &sid, &last).events();
    assert!(clean);
    assert_eq!(data(&events[1])["result"]["content"][0]["text"], "x");
    let outcomes: Vec<_> = up
        .log()
        .into_iter()
        .filter(|e| e["http"] == "GET")
        .map(|e| e["outcome"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(outcomes, ["fault: close", "fault: 503", "resumed"]);
}

#[test]
fn accept_answers_a_request_with_202_and_runs_nothing() {
    let up = HttpUpstream::start(&["--sse"]);
    let sid = init(&up, V);
    up.control("accept?tool=echo");
    let (body, clean) = post(&up, &sid, &call(1, "echo", json!({"text": "x"}), false)).body();
    assert!(clean && body.is_empty());
    assert_eq!(up.log().last().unwrap()["status"], 202);
    assert!(up.calls("echo").is_empty());
}

#[test]
fn a_reset_in_the_middle_of_the_response_event_leaves_it_resumable() {
    let up = HttpUpstream::start(&["--sse"]);
    let sid = init(&up, V);
    up.control("reset?at=response&tool=echo");
    let reply = post(&up, &sid, &call(4, "echo", json!({"text": "whole"}), false));
    let (body, complete) = reply.body();
    assert!(!complete);
    let body = String::from_utf8(body).unwrap();
    assert!(body.contains("\n\nid: 2-1\ndata: {"), "{body}");
    assert!(
        !body.contains("whole"),
        "only the first half of the event: {body}"
    );
    let (events, clean) = resume(&up, &sid, "2-0").events();
    assert!(clean);
    assert_eq!(data(&events[1])["result"]["content"][0]["text"], "whole");
}

#[test]
fn ask_sends_the_client_a_request_and_returns_its_response() {
    let up = HttpUpstream::start(&["--sse"]);
    let sid = init(&up, V);
    let mut reply = post(
        &up,
        &sid,
        &call(5, "ask", json!({"method": "roots/list"}), false),
    );
    assert_eq!(reply.next_event().unwrap().unwrap().data, "", "priming");
    let request = data(&reply.next_event().unwrap().unwrap());
    assert_eq!(request["method"], "roots/list");
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"roots": []}});
    assert_eq!(post(&up, &sid, &answer.to_string()).status, 202);
    let result = data(&reply.next_event().unwrap().unwrap());
    assert_eq!(result["id"], 5);
    let text: Value =
        serde_json::from_str(result["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["result"], json!({"roots": []}));
}

#[test]
fn faults_on_listen_strike_the_gets_that_open_the_session_stream() {
    let up = HttpUpstream::start(&["--json", "--fault", "fail?on=listen&status=503"]);
    let sid = init(&up, V);
    let open = || {
        request(
            &up.addr,
            "GET",
            "/mcp",
            &[("Accept", "text/event-stream"), ("Mcp-Session-Id", &sid)],
            b"",
        )
    };
    assert_eq!(open().status, 503);
    let mut stream = open();
    assert_eq!(stream.status, 200);
    assert_eq!(stream.next_event().unwrap().unwrap().data, "");
}
