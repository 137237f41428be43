//! `toolgate gateway` operations: JWT authentication against a local authorization server
//! (401 with `WWW-Authenticate`, 403 for a user outside the server's groups), the RFC 9728
//! metadata, approvers answering through `toolgate approvals --gateway` (first answer
//! wins), reload on SIGHUP (a bad file keeps the old one), graceful shutdown on SIGTERM,
//! metrics, and `audit verify` over the replicas' logs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate_testkit::gateway::{GatewayProcess, initialize, message_of, open_session};
use toolgate_testkit::http::request;
use toolgate_testkit::jwt::TestIssuer;
use toolgate_testkit::redis::RedisServer;
use toolgate_testkit::{bin_path, wait_until};

const PUBLIC: &str = "http://127.0.0.1:8443";

fn token_of(user: &str) -> String {
    format!("token-of-{user}-0123456789abcdef")
}

fn hash(t: &str) -> String {
    hex::encode(Sha256::digest(t.as_bytes()))
}

struct Setup {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        std::fs::write(
            dir.join("secret"),
            "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
        )
        .unwrap();
        std::fs::write(
            dir.join("policy.yaml"),
            "version: 1\ndefault: allow\npacks: [email]\ntools:\n  send_email:\n    trusted_destinations: [\"*@team.example\"]\n  search_emails:\n    output: untrusted\n",
        )
        .unwrap();
        Setup { _tmp: tmp, dir }
    }

    /// A config with `auth` (YAML lines) and the mail server reachable by group `dev`.
    fn config(&self, replica: &str, auth: &str, extra: &str) -> PathBuf {
        let text = format!(
            "version: 1\nlisten: 127.0.0.1:0\npublic_url: {PUBLIC}\nreplica: {replica}\nsecret: {{ file: secret }}\naudit: audit-{replica}.jsonl\n{extra}auth:\n{auth}servers:\n  mail:\n    command: [{}, --kind, mail]\n    policy: policy.yaml\n    allow: {{ groups: [dev] }}\n",
            bin_path("attack_server").display()
        );
        let path = self.dir.join(format!("gateway-{replica}.yaml"));
        std::fs::write(&path, text).unwrap();
        path
    }
}

fn post_with(
    gw: &GatewayProcess,
    authorization: Option<&str>,
) -> toolgate_testkit::http::HttpReply {
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    if let Some(a) = authorization {
        headers.push(("Authorization", a));
    }
    request(
        &gw.addr,
        "POST",
        "/servers/mail/mcp",
        &headers,
        initialize(1).as_bytes(),
    )
}

#[test]
fn jwts_are_checked_and_refusals_say_how_to_authenticate() {
    let issuer = TestIssuer::start();
    let s = Setup::new();
    let auth = format!(
        "  jwt:\n    issuer: {}\n    jwks_url: {}\n",
        issuer.issuer(),
        issuer.jwks_url()
    );
    let gw = GatewayProcess::start(
        &crate::common::toolgate_bin(),
        &s.config("a", &auth, ""),
        &[],
    );
    let resource = format!("{PUBLIC}/servers/mail/mcp");
    let metadata_url = format!("{PUBLIC}/.well-known/oauth-protected-resource/servers/mail/mcp");
    let with_groups = |groups: Value, mut claims: Value| {
        claims["groups"] = groups;
        claims
    };
    // A good token of a `dev` user opens a session.
    let good = issuer.token(with_groups(json!(["dev"]), issuer.claims("alice", PUBLIC)));
    let reply = post_with(&gw, Some(&format!("Bearer {good}")));
    assert_eq!(reply.status, 200);
    assert!(reply.header("mcp-session-id").is_some());
    // Each bad one: 401, a challenge that names the metadata and says why.
    let now = toolgate_testkit::jwt::now();
    let mut expired = with_groups(json!(["dev"]), issuer.claims("alice", PUBLIC));
    expired["exp"] = json!(now - 3600);
    expired["iat"] = json!(now - 7200);
    let mut wrong_iss = with_groups(json!(["dev"]), issuer.claims("alice", PUBLIC));
    wrong_iss["iss"] = json!("https://other-issuer.example");
    let cases = [
        ("expired", issuer.token(expired)),
        (
            "wrong audience",
            issuer.token(with_groups(
                json!(["dev"]),
                issuer.claims("alice", "https://other.example"),
            )),
        ),
        ("wrong issuer", issuer.token(wrong_iss)),
        (
            "bad signature",
            issuer.token_signed_by_other_key(with_groups(
                json!(["dev"]),
                issuer.claims("alice", PUBLIC),
            )),
        ),
        ("not a JWT", "garbage.garbage.garbage".to_owned()),
    ];
    for (what, token) in cases {
        let reply = post_with(&gw, Some(&format!("Bearer {token}")));
        assert_eq!(reply.status, 401, "{what}");
        let challenge = reply
            .header("www-authenticate")
            .unwrap_or_default()
            .to_owned();
        assert!(challenge.starts_with("Bearer "), "{what}: {challenge}");
        assert!(
            challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
            "{what}: {challenge}"
        );
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{what}: {challenge}"
        );
        let (body, _) = reply.body();
        assert!(
            !String::from_utf8_lossy(&body).contains(&token),
            "the token is never echoed"
        );
    }
    // No token at all: 401 with the metadata, no error code (RFC 6750 §3.1).
    let reply = post_with(&gw, None);
    assert_eq!(reply.status, 401);
    let challenge = reply.header("www-authenticate").unwrap().to_owned();
    assert!(challenge.contains("resource_metadata="), "{challenge}");
    // A user outside the server's groups: 403.
    let ops = issuer.token(with_groups(
        json!(["ops"]),
        issuer.claims("mallory", PUBLIC),
    ));
    let reply = post_with(&gw, Some(&format!("Bearer {ops}")));
    assert_eq!(reply.status, 403);
    // The protected resource metadata names the resource and the authorization server.
    let meta = gw
        .get("/.well-known/oauth-protected-resource/servers/mail/mcp")
        .json();
    assert_eq!(meta["resource"], json!(resource));
    assert_eq!(meta["authorization_servers"], json!([issuer.issuer()]));
    // A token minted for the resource the metadata advertises is accepted there (RFC 9728,
    // RFC 8707), besides one for the configured audience (`public_url`).
    let for_resource = issuer.token(with_groups(
        json!(["dev"]),
        issuer.claims("alice", &resource),
    ));
    let reply = post_with(&gw, Some(&format!("Bearer {for_resource}")));
    assert_eq!(reply.status, 200);
    // ...but not at the approvals endpoint, which is not that resource.
    let reply = request(
        &gw.addr,
        "GET",
        "/approvals",
        &[("Authorization", &format!("Bearer {for_resource}"))],
        b"",
    );
    assert_eq!(reply.status, 401);
    // The refusals are counted.
    let metrics = String::from_utf8(gw.get("/metrics").body().0).unwrap();
    assert!(
        metrics.contains("toolgate_gateway_auth_refusals_total"),
        "{metrics}"
    );
}

/// A JWT user and a static-token user of the same name are different principals: the JWT
/// user neither resumes the token user's session nor passes `allow` or `approvers` that
/// name the token user, and the audit tells them apart.
#[test]
fn a_jwt_user_is_not_the_static_token_user_of_the_same_name() {
    let issuer = TestIssuer::start();
    let s = Setup::new();
    let config = s.dir.join("gateway.yaml");
    std::fs::write(
        &config,
        format!(
            "version: 1\nlisten: 127.0.0.1:0\npublic_url: {PUBLIC}\nreplica: a\nsecret: {{ file: secret }}\naudit: audit-a.jsonl\nauth:\n  jwt:\n    issuer: {iss}\n    jwks_url: {jwks}\n  tokens:\n    - {{ user: ci-bot, sha256: {hash}, groups: [dev] }}\n  approvers: {{ users: [token:ci-bot] }}\nservers:\n  mail:\n    command: [{server}, --kind, mail]\n    policy: policy.yaml\n    allow: {{ users: [token:ci-bot] }}\n  open:\n    command: [{server}, --kind, mail]\n    policy: policy.yaml\n",
            iss = issuer.issuer(),
            jwks = issuer.jwks_url(),
            hash = hash(&token_of("ci-bot")),
            server = bin_path("attack_server").display(),
        ),
    )
    .unwrap();
    let gw = GatewayProcess::start(&crate::common::toolgate_bin(), &config, &[]);
    let token = token_of("ci-bot");
    let mut claims = issuer.claims("ci-bot", PUBLIC);
    claims["groups"] = json!(["dev"]);
    let jwt = issuer.token(claims);
    // `allow: {users: [token:ci-bot]}`: the token user, not the JWT one.
    let session = open_session(&gw, "mail", &token);
    assert_eq!(gw.post("mail", &jwt, None, &initialize(1)).status, 403);
    // The JWT user cannot continue the token user's session (on a server both may reach).
    let open = open_session(&gw, "open", &token);
    let list = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#;
    let reply = gw.post("open", &jwt, Some(&open), list);
    assert_eq!(reply.status, 404);
    let (body, _) = reply.body();
    assert!(
        String::from_utf8_lossy(&body).contains("it belongs to another user or server"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let reply = gw.post("open", &token, Some(&open), list);
    assert_eq!(reply.status, 200);
    assert!(message_of(reply)["result"]["tools"].is_array());
    // Nor end it.
    assert_eq!(gw.delete("open", &jwt, &open).status, 404);
    // `approvers: {users: [token:ci-bot]}`.
    let approvals = |bearer: &str| {
        request(
            &gw.addr,
            "GET",
            "/approvals",
            &[("Authorization", &format!("Bearer {bearer}"))],
            b"",
        )
        .status
    };
    assert_eq!(approvals(&token), 200);
    assert_eq!(approvals(&jwt), 403);
    // The audit names the principal with its source.
    let msg = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "search_emails", "arguments": {"query": "q"}}});
    let answer = message_of(gw.post("mail", &token, Some(&session), &msg.to_string()));
    assert!(answer["result"].is_object(), "{answer}");
    let audit = s.dir.join("audit-a.jsonl");
    let mut users = Vec::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            users = std::fs::read_to_string(&audit)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|r| r["kind"] == "decision")
                .map(|r| r["user"].clone())
                .collect();
            !users.is_empty()
        }),
        "the decision is audited"
    );
    assert_eq!(users, vec![json!("token:ci-bot")]);
}

fn approvals_cli(addr: &str, token: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("approvals")
        .arg("--gateway")
        .arg(format!("http://{addr}"))
        .args(args)
        .env("TOOLGATE_GATEWAY_TOKEN", token)
        .output()
        .unwrap()
}

#[test]
fn approvers_answer_through_the_cli_and_the_first_answer_wins() {
    let Some(redis) = RedisServer::start_tcp() else {
        return;
    };
    let s = Setup::new();
    let auth = format!(
        "  tokens:\n    - {{ user: alice, sha256: {}, groups: [dev] }}\n    - {{ user: carol, sha256: {} }}\n    - {{ user: erin, sha256: {} }}\n    - {{ user: dave, sha256: {} }}\n  approvers: {{ users: [carol, erin] }}\n",
        hash(&token_of("alice")),
        hash(&token_of("carol")),
        hash(&token_of("erin")),
        hash(&token_of("dave")),
    );
    let store = format!("store:\n  url: {}\n", redis.url());
    let a = GatewayProcess::start(
        &crate::common::toolgate_bin(),
        &s.config("a", &auth, &store),
        &[],
    );
    let b = GatewayProcess::start(
        &crate::common::toolgate_bin(),
        &s.config("b", &auth, &store),
        &[],
    );
    let alice = token_of("alice");
    let session = open_session(&a, "mail", &alice);
    // The agent's client cannot ask: the call waits for an approver (on replica A).
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let addr = a.addr.clone();
        let alice = alice.clone();
        let session = session.clone();
        std::thread::spawn(move || {
            let msg = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "send_email",
                "arguments": {"to": ["bob@partner.example"], "subject": "s", "body": "x"}}});
            let reply = request(
                &addr,
                "POST",
                "/servers/mail/mcp",
                &[
                    ("Content-Type", "application/json"),
                    ("Accept", "application/json, text/event-stream"),
                    ("Authorization", &format!("Bearer {alice}")),
                    ("Mcp-Session-Id", &session),
                ],
                msg.to_string().as_bytes(),
            );
            let _ = tx.send(message_of(reply));
        });
    }
    // An approver sees it through replica B.
    let mut pending = Vec::new();
    assert!(
        wait_until(Duration::from_secs(20), || {
            let out = approvals_cli(&b.addr, &token_of("carol"), &["--json"]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            pending = serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap();
            !pending.is_empty()
        }),
        "the question reached the approvers"
    );
    let question = &pending[0];
    assert_eq!(question["question"]["tool"], json!("send_email"));
    assert!(
        question["question"]["what"]
            .as_str()
            .unwrap()
            .contains("bob@partner.example")
    );
    let id = question["id"].to_string();
    // Someone who is not an approver is refused.
    let out = approvals_cli(&b.addr, &token_of("dave"), &["--json"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("403"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Carol allows it; Erin's later answer is refused (the first answer wins).
    let out = approvals_cli(
        &b.addr,
        &token_of("carol"),
        &["--id", &id, "--decision", "allow-once"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("carol"));
    let out = approvals_cli(
        &a.addr,
        &token_of("erin"),
        &["--id", &id, "--decision", "deny"],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let answer = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the call was answered");
    assert!(
        answer["result"]["isError"] != json!(true),
        "allowed: {answer}"
    );
    // The approval is in A's audit, by how it was given.
    let audit = std::fs::read_to_string(s.dir.join("audit-a.jsonl")).unwrap();
    assert!(
        audit.lines().any(|l| l.contains("\"kind\":\"approval\"")),
        "{audit}"
    );
}

fn decide(gw: &GatewayProcess, token: &str, tool: &str) -> Value {
    let session = open_session(gw, "mail", token);
    let msg = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": tool, "arguments": {"query": "q"}}});
    message_of(gw.post("mail", token, Some(&session), &msg.to_string()))
}

fn is_blocked(answer: &Value) -> bool {
    answer["result"]["isError"] == json!(true)
        && answer["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("toolgate blocked"))
}

fn signal(gw: &GatewayProcess, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(gw.pid() as i32).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
}

fn log_of(dir: &Path) -> String {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect()
}

#[test]
fn sighup_reloads_the_policy_and_a_bad_file_keeps_the_old_one() {
    let s = Setup::new();
    let alice = token_of("alice");
    let auth = format!(
        "  tokens:\n    - {{ user: alice, sha256: {}, groups: [dev] }}\n",
        hash(&alice)
    );
    let config = s.config("a", &auth, "");
    let gw = GatewayProcess::start(&crate::common::toolgate_bin(), &config, &[]);
    assert!(!is_blocked(&decide(&gw, &alice, "search_emails")));
    // A policy that forbids the tool: new sessions use it after SIGHUP.
    std::fs::write(
        s.dir.join("policy.yaml"),
        "version: 1\ndefault: allow\ntools:\n  search_emails:\n    max_calls: 0\n",
    )
    .unwrap();
    signal(&gw, rustix::process::Signal::HUP);
    assert!(
        wait_until(Duration::from_secs(10), || log_of(&s.dir)
            .contains("reloaded")),
        "the reload is logged"
    );
    assert!(is_blocked(&decide(&gw, &alice, "search_emails")));
    // A broken file: reported, and the last good configuration stays in force.
    std::fs::write(&config, "version: 1\nlisten: [oops\n").unwrap();
    signal(&gw, rustix::process::Signal::HUP);
    assert!(
        wait_until(Duration::from_secs(10), || log_of(&s.dir)
            .contains("old one stays in force")),
        "the bad file is reported"
    );
    assert!(
        is_blocked(&decide(&gw, &alice, "search_emails")),
        "still the reloaded policy"
    );
    assert_eq!(gw.get("/healthz").status, 200);
}

/// `metrics.token_sha256`: `/metrics` answers only the scraper with that bearer token
/// (401 with a challenge otherwise); without it, anyone who reaches the address reads it.
#[test]
fn metrics_can_require_a_token() {
    let s = Setup::new();
    let alice = token_of("alice");
    let scraper = "scraper-token-0123456789abcdef";
    let auth = format!(
        "  tokens:\n    - {{ user: alice, sha256: {}, groups: [dev] }}\n",
        hash(&alice)
    );
    let extra = format!("metrics:\n  token_sha256: {}\n", hash(scraper));
    let gw = GatewayProcess::start(
        &crate::common::toolgate_bin(),
        &s.config("a", &auth, &extra),
        &[],
    );
    let get = |authorization: Option<String>| {
        let mut headers = Vec::new();
        if let Some(a) = &authorization {
            headers.push(("Authorization", a.as_str()));
        }
        request(&gw.addr, "GET", "/metrics", &headers, b"")
    };
    for refused in [
        None,
        Some(format!("Bearer {alice}")),
        Some(scraper.to_owned()),
    ] {
        let reply = get(refused.clone());
        assert_eq!(reply.status, 401, "{refused:?}");
        assert_eq!(
            reply.header("www-authenticate"),
            Some("Bearer realm=\"metrics\""),
            "{refused:?}"
        );
        assert!(!String::from_utf8_lossy(&reply.body().0).contains("toolgate_gateway"));
    }
    let reply = get(Some(format!("Bearer {scraper}")));
    assert_eq!(reply.status, 200);
    assert!(String::from_utf8_lossy(&reply.body().0).contains("toolgate_gateway_sessions"));
    // A hash that is no hash does not load, with the place and the help.
    let bad = s.config("b", &auth, "metrics:\n  token_sha256: scraper\n");
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["gateway", "check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`token_sha256` is not 64 hexadecimal digits")
            && stderr.contains("hash-token"),
        "{stderr}"
    );
}

#[test]
fn sigterm_drains_and_exits_and_metrics_count_decisions() {
    let s = Setup::new();
    let alice = token_of("alice");
    let auth = format!(
        "  tokens:\n    - {{ user: alice, sha256: {}, groups: [dev] }}\n",
        hash(&alice)
    );
    let mut gw = GatewayProcess::start(
        &crate::common::toolgate_bin(),
        &s.config("a", &auth, ""),
        &[],
    );
    assert!(!is_blocked(&decide(&gw, &alice, "search_emails")));
    let metrics = String::from_utf8(gw.get("/metrics").body().0).unwrap();
    assert!(
        metrics.contains(
            r#"toolgate_gateway_decisions_total{replica="a",server="mail",effect="allow""#
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("toolgate_gateway_sessions{replica=\"a\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("toolgate_gateway_request_seconds_bucket"),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"toolgate_gateway_store_round_trips_total{replica="a",outcome="ok"}"#),
        "{metrics}"
    );
    // Logs are JSON lines.
    let log = log_of(&s.dir);
    assert!(
        log.lines()
            .filter(|l| !l.trim().is_empty())
            .all(|l| l.starts_with('{') || !l.contains("gateway listening"))
    );
    assert!(log.lines().any(|l| {
        serde_json::from_str::<Value>(l)
            .is_ok_and(|v| v["fields"]["message"] == json!("gateway listening"))
    }));
    signal(&gw, rustix::process::Signal::TERM);
    let status = gw.wait();
    assert!(status.success(), "{status:?}");
    assert!(log_of(&s.dir).contains("stopped"));
    // The replica's audit log is intact; `audit verify` checks several logs at once.
    let other = s.dir.join("audit-copy.jsonl");
    std::fs::copy(s.dir.join("audit-a.jsonl"), &other).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["audit", "verify", "--audit"])
        .arg(s.dir.join("audit-a.jsonl"))
        .arg("--audit")
        .arg(&other)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("all 2 audit logs are intact"));
    // One edited record breaks that log's chain, and the command says which.
    let text = std::fs::read_to_string(&other)
        .unwrap()
        .replacen("\"allow\"", "\"deny\"", 1);
    std::fs::write(&other, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["audit", "verify", "--audit"])
        .arg(s.dir.join("audit-a.jsonl"))
        .arg("--audit")
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("audit-copy.jsonl"));
}

#[test]
fn a_remote_server_gets_the_gateways_credentials_never_the_clients() {
    let upstream =
        toolgate_testkit::http::HttpUpstream::start(&["--json", "--token", "upstream-secret-42"]);
    let s = Setup::new();
    let alice = token_of("alice");
    let text = format!(
        "version: 1\nlisten: 127.0.0.1:0\npublic_url: {PUBLIC}\nreplica: r\nsecret: {{ file: secret }}\nauth:\n  tokens:\n    - {{ user: alice, sha256: {}, groups: [dev] }}\nservers:\n  remote:\n    url: {}\n    headers: {{ Authorization: \"Bearer ${{UPSTREAM_TOKEN}}\" }}\n",
        hash(&alice),
        upstream.url()
    );
    let config = s.dir.join("gateway-remote.yaml");
    std::fs::write(&config, text).unwrap();
    let gw = GatewayProcess::start(
        &crate::common::toolgate_bin(),
        &config,
        &[("UPSTREAM_TOKEN", "upstream-secret-42")],
    );
    let session = open_session(&gw, "remote", &alice);
    let msg = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let listed = message_of(gw.post("remote", &alice, Some(&session), &msg.to_string()));
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    // The upstream accepted every request: it saw its own token, not Alice's.
    let log = upstream.log();
    assert!(!log.is_empty());
    assert!(
        log.iter().all(|e| e["status"] != json!(401)),
        "a request reached the upstream without the gateway's token: {log:?}"
    );
}

#[test]
fn tls_from_pem_files_and_an_approver_connects_with_the_ca() {
    // A throwaway CA and a certificate for 127.0.0.1, made by the remote tests' helper.
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/.venv/bin/python");
    if !python.exists() {
        assert!(
            !matches!(std::env::var("CI").as_deref(), Ok("true" | "1")),
            "tests/.venv is missing but CI=true"
        );
        eprintln!("skipped: no tests/.venv (run scripts/test, which installs it)");
        return;
    }
    let s = Setup::new();
    let certs = s.dir.join("certs");
    std::fs::create_dir(&certs).unwrap();
    let made = Command::new(&python)
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/remote/python_server.py"))
        .args(["--tls"])
        .arg(&certs)
        .arg("--certs-only")
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let carol = token_of("carol");
    let auth = format!(
        "  tokens:\n    - {{ user: carol, sha256: {} }}\n  approvers: {{ users: [carol] }}\n",
        hash(&carol)
    );
    let tls = "tls: { cert: certs/server.pem, key: certs/server.key }\n";
    let gw = GatewayProcess::start(
        &crate::common::toolgate_bin(),
        &s.config("t", &auth, tls),
        &[],
    );
    let url = format!("https://{}", gw.addr);
    let run = |ca: Option<&Path>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        cmd.args(["approvals", "--gateway", &url, "--json"])
            .env("TOOLGATE_GATEWAY_TOKEN", &carol);
        if let Some(ca) = ca {
            cmd.arg("--ca-file").arg(ca);
        }
        cmd.output().unwrap()
    };
    let ok = run(Some(&certs.join("ca.pem")));
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&ok.stdout).unwrap(),
        json!([])
    );
    // Without the CA the certificate is not trusted: refused, nothing sent.
    let refused = run(None);
    assert!(!refused.status.success());
}
