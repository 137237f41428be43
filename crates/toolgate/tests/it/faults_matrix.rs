//! The fault matrix, with enforcement on: each fault ends with defined replies within a
//! bounded time, and nothing reaches the upstream that should not.
//!
//! Covered elsewhere (not repeated here): upstream crash with requests outstanding, exit
//! codes, garbage / invalid UTF-8 / giant lines / floods from the upstream, the client
//! closing both pipes mid-flood, grace and kill (`relay_faults.rs`); broker killed during a
//! pending approval (`broker_e2e.rs`); an unwritable audit path at start-up and an
//! unloadable policy (`enforce_wrap.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_testkit::{Peer, fake_upstream, read_record, wait_until};

/// Denies tool `t` (any arguments), allows everything else.
const DENY_T: &str = "version: 1\ndefault: allow\npacks: []\nrules:\n  - id: no-t\n    effect: deny\n    operations: [unknown]\n    tools: [\"t\"]\n";
/// Asks about every call.
const ASK_ALL: &str = "version: 1\ndefault: ask\npacks: []\nrules: []\n";

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(policy: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let s = Setup { dir };
        for sub in ["work", "home", "pins", "broker"] {
            std::fs::create_dir_all(s.base().join(sub)).unwrap();
        }
        std::fs::write(s.policy(), policy).unwrap();
        s
    }

    fn base(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    fn policy(&self) -> PathBuf {
        self.base().join("policy.yaml")
    }

    fn audit(&self) -> PathBuf {
        self.base().join("audit.jsonl")
    }

    fn record(&self) -> PathBuf {
        self.base().join("record")
    }

    fn pid_file(&self) -> PathBuf {
        self.base().join("upstream.pid")
    }

    /// The arguments of `toolgate wrap ... -- fake_upstream ...`, after the program.
    fn wrap_args(&self, approval: &str, upstream_prefix: &[&str]) -> Vec<String> {
        let p = |p: &Path| p.to_str().unwrap().to_owned();
        let mut args: Vec<String> = vec![
            "wrap".into(),
            "--workspace".into(),
            p(&self.base().join("work")),
            "--audit".into(),
            p(&self.audit()),
            "--policy".into(),
            p(&self.policy()),
            "--approval".into(),
            approval.into(),
            "--grace-ms".into(),
            "200".into(),
            "--".into(),
        ];
        args.extend(upstream_prefix.iter().map(|a| (*a).to_owned()));
        args.extend([
            p(&fake_upstream()),
            "--record".into(),
            p(&self.record()),
            "--pid-file".into(),
            p(&self.pid_file()),
        ]);
        args
    }

    fn isolate(&self, cmd: &mut Command) {
        let base = self.base();
        cmd.env("HOME", base.join("home"))
            .env("TOOLGATE_PINS_DIR", base.join("pins"))
            .env("TOOLGATE_BROKER_DIR", base.join("broker"));
    }

    fn spawn(&self, approval: &str) -> Peer {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        cmd.args(self.wrap_args(approval, &[]));
        self.isolate(&mut cmd);
        Peer::spawn(cmd, true)
    }

    /// What the upstream received so far.
    fn upstream_saw(&self) -> Vec<Value> {
        read_record(&self.record())
            .iter()
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect()
    }

    fn calls_seen(&self) -> Vec<Value> {
        self.upstream_saw()
            .into_iter()
            .filter(|m| m["method"] == "tools/call")
            .collect()
    }

    fn upstream_pid(&self) -> i32 {
        assert!(wait_until(Duration::from_secs(10), || {
            std::fs::read_to_string(self.pid_file()).is_ok_and(|s| !s.is_empty())
        }));
        std::fs::read_to_string(self.pid_file())
            .unwrap()
            .parse()
            .unwrap()
    }
}

fn send(client: &mut Peer, v: &Value) {
    client.send(serde_json::to_vec(v).unwrap());
}

fn call(client: &mut Peer, id: i64, tool: &str, args: Value) {
    send(
        client,
        &json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                "params":{"name":tool,"arguments":args}}),
    );
}

/// The next response to `id`, skipping notifications; a request fails the test.
fn response(client: &mut Peer, id: &Value) -> Value {
    loop {
        let m = client.recv_json();
        assert!(
            m.get("method").is_none() || m.get("id").is_none(),
            "unexpected request while waiting for {id}: {m}"
        );
        if m.get("id") == Some(id) {
            return m;
        }
    }
}

/// The next request from toolgate to the client (an approval prompt).
fn prompt(client: &mut Peer) -> Value {
    loop {
        let m = client.recv_json();
        if m.get("method").is_some() && m.get("id").is_some() {
            return m;
        }
        assert!(
            m.get("id").is_none(),
            "a response came before the prompt: {m}"
        );
    }
}

fn handshake(client: &mut Peer, capabilities: Value) {
    send(
        client,
        &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":capabilities,
            "clientInfo":{"name":"faults","version":"0"}}}),
    );
    response(client, &json!("init"));
    client.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    send(
        client,
        &json!({"jsonrpc":"2.0","id":"list","method":"tools/list","params":{}}),
    );
    let r = response(client, &json!("list"));
    assert_eq!(r["result"]["tools"][0]["name"], "x", "{r}");
}

fn is_denied(r: &Value) -> bool {
    r["result"]["isError"] == true
        && r["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("toolgate blocked"))
}

fn upstream_exited(r: &Value) -> bool {
    r["error"]["code"] == -32603
        && r["error"]["message"] == "upstream server exited before responding"
}

fn signal(pid: i32, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(pid).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
}

/// The upstream stops dead (SIGSTOP: it neither reads nor writes nor dies). Calls queue
/// up unanswered; when the client leaves, toolgate escalates to SIGKILL (a stopped process
/// ignores SIGTERM until continued), answers every outstanding call and exits 137.
#[test]
fn frozen_upstream_is_killed_after_client_eof_and_every_call_answered() {
    let s = Setup::new(DENY_T);
    let mut client = s.spawn("none");
    handshake(&mut client, json!({}));
    let pid = s.upstream_pid();
    signal(pid, rustix::process::Signal::STOP);
    call(&mut client, 1, "x", json!({"a": 1}));
    call(&mut client, 2, "x", json!({"a": 2}));
    // A denied call is still answered at once: the decision does not need the upstream.
    call(&mut client, 3, "t", json!({}));
    let r = response(&mut client, &json!(3));
    assert!(is_denied(&r), "{r}");
    client.send(r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#);
    client.close_stdin();
    let mut answered = Vec::new();
    for line in client.recv_to_end() {
        let m: Value = serde_json::from_slice(&line).unwrap();
        assert!(upstream_exited(&m), "{m}");
        answered.push(m["id"].as_i64().unwrap());
    }
    answered.sort_unstable();
    assert_eq!(answered, [1, 2, 4]);
    assert_eq!(
        client.wait_within(Duration::from_secs(10)).code(),
        Some(137)
    );
    // The denied call never reached the upstream (it was frozen before any of these, so
    // its record holds only the handshake, at most).
    assert!(s.calls_seen().iter().all(|c| c["params"]["name"] != "t"));
}

/// The upstream exits while a call waits for a human: the parked call is answered (never
/// forwarded), and toolgate exits with the upstream's code.
#[test]
fn upstream_exiting_during_an_approval_answers_the_parked_call() {
    let s = Setup::new(ASK_ALL);
    let mut client = s.spawn("client");
    handshake(&mut client, json!({"elicitation": {}}));
    call(&mut client, 1, "x", json!({"to": "someone"}));
    let ask = prompt(&mut client);
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    client.send(r#"{"jsonrpc":"2.0","id":2,"method":"test/crash","params":{"code":42}}"#);
    let mut seen = Vec::new();
    for _ in 0..2 {
        let m = client.recv_json();
        assert!(m.get("method").is_none(), "{m}");
        seen.push(m);
    }
    seen.sort_by_key(|m| m["id"].as_i64());
    assert!(
        upstream_exited(&seen[0]) || is_denied(&seen[0]),
        "{}",
        seen[0]
    );
    assert_eq!(seen[0]["id"], 1);
    assert!(upstream_exited(&seen[1]), "{}", seen[1]);
    // Approving afterwards changes nothing: the upstream is gone and so is toolgate (which
    // may have closed its stdin already).
    client.try_send(
        json!({"jsonrpc":"2.0","id":ask["id"],"result":{"action":"accept","content":{"decision":"allow_once"}}})
            .to_string(),
    );
    assert_eq!(client.wait().code(), Some(42));
    assert!(s.calls_seen().is_empty(), "{:?}", s.calls_seen());
}

/// The client goes away while a call waits for a human: the call is never forwarded and
/// toolgate exits promptly (the upstream sees EOF and exits 0).
#[test]
fn client_leaving_during_an_approval_never_forwards_the_call() {
    let s = Setup::new(ASK_ALL);
    let mut client = s.spawn("client");
    handshake(&mut client, json!({"elicitation": {}}));
    call(&mut client, 1, "x", json!({"to": "someone"}));
    let ask = prompt(&mut client);
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    client.close_stdin();
    // The parked call is answered with a denial that says why (the client may still be
    // reading), and nothing else is written.
    let rest = client.recv_to_end();
    assert_eq!(rest.len(), 1, "{rest:?}");
    let m: Value = serde_json::from_slice(&rest[0]).unwrap();
    assert_eq!(m["id"], 1, "{m}");
    assert!(is_denied(&m), "{m}");
    let text = m["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("closed the connection before answering"),
        "{text}"
    );
    let status = client.wait_within(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
    assert!(s.calls_seen().is_empty(), "{:?}", s.calls_seen());
}

/// The audit log runs out of room mid-session (RLIMIT_FSIZE: every write past the limit
/// fails with EFBIG, as on a full disk; SIGXFSZ ignored so the write error is seen).
/// Calls allowed while the log had room reach the upstream and their results reach the
/// client (a result record is written after delivery; one that no longer fits is logged
/// on stderr); from the first decision that cannot be recorded on, every call is denied
/// and none is forwarded. A policy denial (recorded after its answer) stays a denial.
#[test]
fn audit_log_running_out_of_room_mid_session_denies_from_then_on() {
    let s = Setup::new(DENY_T);
    let mut cmd = Command::new("sh");
    // `ulimit -f` counts 512-byte (dash) or 1 KiB blocks: a handful of records. Only the
    // soft limit is lowered, and the upstream raises it again (its record must not fill).
    let upstream = ["sh", "-c", r#"ulimit -S -f unlimited; exec "$@""#, "sh"];
    cmd.args(["-c", r#"trap "" XFSZ; ulimit -S -f 16; exec "$@""#, "sh"])
        .arg(env!("CARGO_BIN_EXE_toolgate"))
        .args(s.wrap_args("none", &upstream));
    s.isolate(&mut cmd);
    let mut client = Peer::spawn(cmd, true);
    handshake(&mut client, json!({}));
    // Per call: 0 = allowed, 1 = denied before forwarding. Never goes back down.
    let mut outcomes = Vec::new();
    for i in 1..=200 {
        call(&mut client, i, "x", json!({"n": i, "pad": "p".repeat(200)}));
        let r = response(&mut client, &json!(i));
        let outcome = if is_denied(&r) {
            let text = r["result"]["content"][0]["text"].as_str().unwrap();
            assert!(text.contains("audit log cannot be written"), "{text}");
            1
        } else {
            assert_eq!(r["result"]["method"], "tools/call", "{r}");
            0
        };
        if let Some(&last) = outcomes.last() {
            assert!(outcome >= last, "call {i}: {r} after outcome {last}");
        }
        outcomes.push(outcome);
    }
    let allowed = outcomes.iter().filter(|&&o| o == 0).count();
    assert!(allowed > 0, "the first call should fit in the log");
    assert_eq!(outcomes.last(), Some(&1), "the log never filled up");
    // Exactly the calls whose decision was audited reached the upstream.
    let forwarded: Vec<i64> = s
        .calls_seen()
        .iter()
        .map(|c| c["params"]["arguments"]["n"].as_i64().unwrap())
        .collect();
    let decided = i64::try_from(allowed).unwrap();
    assert_eq!(forwarded, (1..=decided).collect::<Vec<_>>());
    // A call the policy denies is answered before its record is written; with the log
    // full it is still denied, for the policy's reason, and never forwarded.
    for i in 201..=203 {
        call(&mut client, i, "t", json!({"n": i}));
        let r = response(&mut client, &json!(i));
        assert!(is_denied(&r), "{r}");
        let text = r["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("no-t"), "{text}");
    }
    assert!(!s.calls_seen().iter().any(|c| c["params"]["name"] == "t"));
    assert!(std::fs::metadata(s.audit()).unwrap().len() <= 16 * 1024);
    client.close_stdin();
    assert!(client.wait().success());
}

/// The policy file is edited, then deleted, while toolgate runs: the policy loaded at
/// start stays in force (toolgate does not reload; a new policy takes effect on the next
/// start).
#[test]
fn policy_edited_or_deleted_while_running_stays_in_force() {
    let s = Setup::new(DENY_T);
    let mut client = s.spawn("none");
    handshake(&mut client, json!({}));
    call(&mut client, 1, "t", json!({}));
    assert!(is_denied(&response(&mut client, &json!(1))));

    // The reverse policy: allow t, deny everything else.
    let reverse = "version: 1\ndefault: deny\npacks: []\nrules:\n  - id: only-t\n    effect: allow\n    operations: [unknown]\n    tools: [\"t\"]\n";
    let edited = s.base().join("policy.yaml.new");
    std::fs::write(&edited, reverse).unwrap();
    std::fs::rename(&edited, s.policy()).unwrap();
    call(&mut client, 2, "t", json!({}));
    assert!(is_denied(&response(&mut client, &json!(2))));
    call(&mut client, 3, "x", json!({"n": 3}));
    assert!(!is_denied(&response(&mut client, &json!(3))));

    // Edited in place as well (same inode), then deleted.
    std::fs::write(s.policy(), reverse).unwrap();
    call(&mut client, 4, "t", json!({}));
    assert!(is_denied(&response(&mut client, &json!(4))));
    std::fs::remove_file(s.policy()).unwrap();
    call(&mut client, 5, "t", json!({}));
    assert!(is_denied(&response(&mut client, &json!(5))));
    call(&mut client, 6, "x", json!({"n": 6}));
    assert!(!is_denied(&response(&mut client, &json!(6))));
    let names: Vec<String> = s
        .calls_seen()
        .iter()
        .map(|c| c["params"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["x", "x"]);
    client.close_stdin();
    assert!(client.wait().success());

    // The next start reads the file again: gone, so every call is denied with the reason.
    let mut client = s.spawn("none");
    handshake(&mut client, json!({}));
    call(&mut client, 7, "x", json!({"n": 7}));
    let r = response(&mut client, &json!(7));
    assert!(is_denied(&r), "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("cannot be read"),
        "{r}"
    );
    client.close_stdin();
    assert!(client.wait().success());
}
