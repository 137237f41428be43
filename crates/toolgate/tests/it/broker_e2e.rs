//! The approval broker end to end with real processes and sockets: `toolgate broker`,
//! `toolgate wrap --approval broker` proxies in front of the demo server, and
//! `toolgate approvals` terminals in `--plain`, `--json` and `--id/--decision` modes.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_testkit::{Peer, wait_until};

/// The broker protocol this build speaks (`broker::proto::VERSION`).
const PROTOCOL: u32 = 4;
const LIMIT: Duration = Duration::from_secs(20);

const POLICY: &str = r#"
version: 1
default: ask
packs: []
rules:
  - id: allow-workspace-read
    effect: allow
    operations: [fs.read]
    resources: ["${workspace}/**"]
tools:
  read_file:
    operation: fs.read
    path_params: [path]
  run_command:
    command_param: command
"#;

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_toolgate")
}

/// A temp dir holding the broker directory and the proxies' files.
struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        World {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn base(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    fn broker_dir(&self) -> PathBuf {
        self.base().join("b")
    }

    fn socket(&self) -> PathBuf {
        self.broker_dir().join("broker.sock")
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(exe());
        cmd.args(args)
            .env("TOOLGATE_BROKER_DIR", self.broker_dir())
            .env("TOOLGATE_LOG", "info");
        cmd
    }

    /// Starts the broker and waits for its socket.
    fn broker(&self) -> Peer {
        let peer = Peer::spawn(self.cmd(&["broker"]), true);
        // Serving, not merely a socket file (a stale one may be left from a killed broker).
        assert!(
            wait_until(LIMIT, || self
                .cmd(&["status"])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())),
            "the broker did not start serving"
        );
        peer
    }

    /// A wrapped demo server asking through the broker.
    fn proxy(&self, name: &str, extra: &[&str]) -> Gate {
        let base = self.base();
        let work = base.join(format!("work-{name}"));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(base.join("home")).unwrap();
        std::fs::create_dir_all(base.join(format!("pins-{name}"))).unwrap();
        let policy = base.join("policy.yaml");
        std::fs::write(&policy, POLICY).unwrap();
        let mut cmd = self.cmd(&["wrap", "--server", name, "--approval", "broker"]);
        cmd.arg("--workspace")
            .arg(&work)
            .arg("--policy")
            .arg(&policy)
            .arg("--audit")
            .arg(base.join(format!("audit-{name}.jsonl")))
            .args(extra)
            .arg("--")
            .arg(exe())
            .args(["demo", "--internal-server", "--workspace"])
            .arg(&work)
            .arg("--outbox")
            .arg(base.join(format!("outbox-{name}")))
            .env("HOME", base.join("home"))
            .env("TOOLGATE_PINS_DIR", base.join(format!("pins-{name}")));
        let mut gate = Gate {
            peer: Peer::spawn(cmd, false),
        };
        gate.init();
        gate
    }

    fn approver(&self) -> Approver {
        let mut cmd = self.cmd(&["approvals", "--plain"]);
        cmd.env("TERM", "dumb");
        let mut a = Approver {
            peer: Peer::spawn(cmd, false),
            seen: Vec::new(),
        };
        a.expect(|l| l.starts_with("connected to the broker"));
        a
    }

    fn queue(&self) -> Vec<Value> {
        let out = self.cmd(&["approvals", "--json"]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Waits until the broker's queue holds a request, and returns it.
    fn pending_request(&self) -> Value {
        let mut found = None;
        assert!(
            wait_until(LIMIT, || {
                found = self.queue().into_iter().next();
                found.is_some()
            }),
            "no request reached the broker"
        );
        found.unwrap()
    }
}

struct Gate {
    peer: Peer,
}

impl Gate {
    fn send(&mut self, v: Value) {
        self.peer.send(serde_json::to_vec(&v).unwrap());
    }

    fn init(&mut self) {
        self.send(
            json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"broker-test","version":"0"}}}),
        );
        let r = self.response(&json!("init"));
        assert!(r.get("result").is_some(), "{r}");
        self.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        self.send(json!({"jsonrpc":"2.0","id":"list","method":"tools/list","params":{}}));
        self.response(&json!("list"));
    }

    fn call(&mut self, id: i64, tool: &str, args: Value) {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                         "params":{"name":tool,"arguments":args}}));
    }

    fn response(&mut self, id: &Value) -> Value {
        loop {
            let m = self.peer.recv_json();
            if m.get("id") == Some(id) && m.get("method").is_none() {
                return m;
            }
        }
    }
}

fn text(r: &Value) -> String {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

fn is_denied(r: &Value) -> bool {
    r["result"]["isError"] == true && text(r).starts_with("toolgate blocked")
}

struct Approver {
    peer: Peer,
    seen: Vec<String>,
}

impl Approver {
    /// Reads lines until one matches; returns it.
    fn expect(&mut self, pred: impl Fn(&str) -> bool) -> String {
        loop {
            let Some(line) = self.peer.recv_within(LIMIT) else {
                panic!("no matching line; saw:\n{}", self.seen.join("\n"));
            };
            let line = String::from_utf8(line).unwrap();
            self.seen.push(line.clone());
            if pred(&line) {
                return line;
            }
        }
    }
}

#[test]
fn two_proxies_two_terminals_first_decision_wins() {
    let w = World::new();
    let _broker = w.broker();
    let mut a = w.approver();
    let mut b = w.approver();
    let mut one = w.proxy("one", &[]);
    let mut two = w.proxy("two", &["--session", "agent-7"]);

    one.call(1, "run_command", json!({"command": "echo from-one"}));
    let line = a.expect(|l| l.starts_with("pending "));
    let id: u64 = line["pending ".len()..].parse().unwrap();
    // Both terminals show what, where and why; never the raw arguments object.
    b.expect(|l| l == format!("pending {id}"));
    b.expect(|l| l.contains("Server: one"));
    b.expect(|l| l.contains("Tool: run_command"));
    let action = b.expect(|l| l.contains("Action:"));
    assert!(action.contains("echo"), "{action}");
    assert!(!action.contains("{\"command\""), "{action}");
    a.peer.send(format!("o {id}"));
    let r = one.response(&json!(1));
    assert!(!is_denied(&r), "{r}");
    b.expect(|l| l.starts_with(&format!("resolved {id} allow-once by approver pid")));
    // The loser's late decision is refused, not applied.
    b.peer.send(format!("d {id}"));
    b.expect(|l| l.starts_with("refused") && l.contains("not pending"));

    two.call(2, "run_command", json!({"command": "echo from-two"}));
    let line = b.expect(|l| l.starts_with("pending "));
    let id2: u64 = line["pending ".len()..].parse().unwrap();
    assert_ne!(id, id2);
    b.expect(|l| l.contains("Session: agent-7"));
    b.peer.send(format!("d {id2}"));
    let r = two.response(&json!(2));
    assert!(is_denied(&r), "{r}");
    assert!(text(&r).contains("denied in `toolgate approvals`"), "{r}");
    a.expect(|l| l.starts_with(&format!("resolved {id2} deny")));

    // Scripts: --id/--decision; a stale id exits 1.
    one.call(3, "run_command", json!({"command": "echo scripted"}));
    let req = w.pending_request();
    assert_eq!(req["question"]["server"], "one");
    assert_eq!(req["question"]["tool"], "run_command");
    let id3 = req["id"].as_u64().unwrap();
    let out = w
        .cmd(&[
            "approvals",
            "--id",
            &id3.to_string(),
            "--decision",
            "allow-session",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let r = one.response(&json!(3));
    assert!(!is_denied(&r), "{r}");
    a.expect(|l| l.starts_with(&format!("resolved {id3} allow-session")));
    let out = w
        .cmd(&["approvals", "--id", &id3.to_string(), "--decision", "deny"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn client_cancellation_reaches_the_approvals_terminal() {
    let w = World::new();
    let _broker = w.broker();
    let mut a = w.approver();
    let mut gate = w.proxy("one", &[]);
    gate.call(7, "run_command", json!({"command": "echo cancel-me"}));
    let line = a.expect(|l| l.starts_with("pending "));
    let id: u64 = line["pending ".len()..].parse().unwrap();
    gate.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                     "params":{"requestId":7,"reason":"user pressed stop"}}));
    a.expect(|l| l.starts_with(&format!("withdrawn {id} cancelled")));
    assert!(w.queue().is_empty());
    // The proxy is still serving.
    gate.call(8, "read_file", json!({"path": "missing.txt"}));
    gate.response(&json!(8));
}

#[test]
fn proxy_gone_and_expiry_withdraw_requests() {
    let w = World::new();
    let _broker = w.broker();
    let mut a = w.approver();
    let mut gate = w.proxy("one", &["--approval-timeout", "1s"]);
    gate.call(1, "run_command", json!({"command": "echo slow"}));
    let line = a.expect(|l| l.starts_with("pending "));
    let id: u64 = line["pending ".len()..].parse().unwrap();
    let r = gate.response(&json!(1));
    assert!(is_denied(&r), "{r}");
    assert!(text(&r).contains("within 1 s"), "{r}");
    a.expect(|l| l.starts_with(&format!("withdrawn {id} expired")));

    let mut gate2 = w.proxy("two", &[]);
    gate2.call(2, "run_command", json!({"command": "echo orphan"}));
    let line = a.expect(|l| l.starts_with("pending "));
    let id2: u64 = line["pending ".len()..].parse().unwrap();
    drop(gate2);
    a.expect(|l| l.starts_with(&format!("withdrawn {id2} proxy_gone")));
}

fn kill(pid: u32, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    rustix::process::kill_process(pid, signal).unwrap();
}

#[test]
fn broker_killed_during_a_pending_approval_denies() {
    let w = World::new();
    let mut broker = w.broker();
    let mut gate = w.proxy("one", &[]);
    gate.call(1, "run_command", json!({"command": "echo pending"}));
    w.pending_request();
    kill(broker.pid(), rustix::process::Signal::KILL);
    broker.wait();
    let r = gate.response(&json!(1));
    assert!(is_denied(&r), "{r}");
    assert!(text(&r).contains("disconnected"), "{r}");
    assert!(text(&r).contains("run `toolgate broker`"), "{r}");
    // With the broker gone (stale socket left behind by SIGKILL), asks deny with the fix.
    gate.call(2, "run_command", json!({"command": "echo again"}));
    let r = gate.response(&json!(2));
    assert!(is_denied(&r), "{r}");
    assert!(text(&r).contains("no approval broker is running"), "{r}");
    assert!(text(&r).contains("run `toolgate broker`"), "{r}");
    // A new broker replaces the stale socket and serves again.
    let _broker = w.broker();
    let mut a = w.approver();
    gate.call(3, "run_command", json!({"command": "echo back"}));
    let line = a.expect(|l| l.starts_with("pending "));
    let id: u64 = line["pending ".len()..].parse().unwrap();
    a.peer.send(format!("o {id}"));
    assert!(!is_denied(&gate.response(&json!(3))));
}

#[test]
fn no_broker_denies_with_the_command_that_fixes_it() {
    let w = World::new();
    let mut gate = w.proxy("one", &[]);
    gate.call(1, "run_command", json!({"command": "echo hi"}));
    let r = gate.response(&json!(1));
    assert!(is_denied(&r), "{r}");
    assert!(text(&r).contains("no approval broker is running"), "{r}");
    assert!(
        text(&r).contains("run `toolgate broker` in another terminal"),
        "{r}"
    );
    let out = w.cmd(&["status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("not reachable"));
}

#[test]
fn second_broker_refuses_and_sigterm_removes_the_socket() {
    let w = World::new();
    let mut first = w.broker();
    let out = w.cmd(&["broker"]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already running"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = w.cmd(&["status"]).output().unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{text}");
    assert!(text.contains(&format!("protocol {PROTOCOL}")), "{text}");
    assert!(text.contains("mode 0700"), "{text}");
    assert!(text.contains("broker.sock (mode 0600"), "{text}");
    assert!(text.contains("token (mode 0600"), "{text}");
    kill(first.pid(), rustix::process::Signal::TERM);
    assert!(first.wait().success());
    assert!(!w.socket().exists(), "SIGTERM must remove the socket");
    assert!(!w.broker_dir().join("token").exists());
}

#[test]
fn unsafe_directories_are_refused() {
    let w = World::new();
    std::fs::create_dir(w.broker_dir()).unwrap();
    std::fs::set_permissions(w.broker_dir(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = w.cmd(&["broker"]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("world-writable"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::set_permissions(w.broker_dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    // Owned by someone else (only root can arrange that).
    if rustix::process::geteuid().is_root() {
        let nobody = rustix::process::Uid::from_raw(65534);
        rustix::fs::chown(w.broker_dir(), Some(nobody), None).unwrap();
        let out = w.cmd(&["broker"]).output().unwrap();
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("owned by uid 65534"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Speaks the wire protocol by hand: returns the broker's first reply line ("" if it closed).
fn raw_hello(socket: &Path, hello: &Value) -> String {
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let mut line = serde_json::to_vec(hello).unwrap();
    line.push(b'\n');
    s.write_all(&line).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn wrong_token_and_wrong_version_are_refused() {
    let w = World::new();
    let _broker = w.broker();
    let good = std::fs::read_to_string(w.broker_dir().join("token")).unwrap();
    let hello = |token: &str, version: u32| json!({"type":"hello","version":version,"token":token,"role":"status","pid":1});
    let ok = raw_hello(&w.socket(), &hello(good.trim(), PROTOCOL));
    assert!(
        ok.contains("\"welcome\"") && ok.contains("\"status\""),
        "{ok}"
    );
    let wrong = "00".repeat(32);
    let r = raw_hello(&w.socket(), &hello(&wrong, PROTOCOL));
    assert!(r.contains("unauthenticated"), "{r}");
    assert!(!r.contains("welcome"), "{r}");
    // A later protocol, and the one before `synced` (whose proxies could not read it).
    for version in [99, 1] {
        let r = raw_hello(&w.socket(), &hello(good.trim(), version));
        assert!(r.contains("incompatible"), "{version}: {r}");
    }
    let mut extra = hello(good.trim(), PROTOCOL);
    extra["admin"] = json!(true);
    let r = raw_hello(&w.socket(), &extra);
    assert!(r.contains("invalid"), "{r}");

    // A proxy whose token file disagrees with the broker: deny, naming the cause.
    let token_path = w.broker_dir().join("token");
    std::fs::write(&token_path, &wrong).unwrap();
    std::fs::set_permissions(&token_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut gate = w.proxy("one", &[]);
    gate.call(1, "run_command", json!({"command": "echo hi"}));
    let r = gate.response(&json!(1));
    assert!(is_denied(&r), "{r}");
    assert!(text(&r).contains("unauthenticated"), "{r}");
}

const PYTHON: &str = "/usr/bin/python3";

#[test]
fn another_uid_is_refused_even_with_the_token() {
    if !rustix::process::geteuid().is_root()
        || Command::new("setpriv").arg("--version").output().is_err()
        || !Path::new(PYTHON).exists()
    {
        eprintln!("skipped: needs root, setpriv and {PYTHON} to run a client as another user");
        return;
    }
    let w = World::new();
    let _broker = w.broker();
    let token = std::fs::read_to_string(w.broker_dir().join("token")).unwrap();
    // Simulate a permission mistake that lets another user reach the socket: only the
    // SO_PEERCRED check is left to refuse them.
    for p in [w.dir.path().to_path_buf(), w.base(), w.broker_dir()] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(w.socket(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let hello =
        json!({"type":"hello","version":PROTOCOL,"token":token.trim(),"role":"status","pid":1});
    // Connecting must succeed (the socket is reachable); the broker then closes without a
    // word, possibly before the hello is even written.
    let script = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.settimeout(20)\ns.connect(sys.argv[1])\nd=b''\ntry:\n    s.sendall(sys.argv[2].encode()+b'\\n')\n    while True:\n        c=s.recv(4096)\n        if not c: break\n        d+=c\nexcept (BrokenPipeError, ConnectionResetError):\n    pass\nprint('REPLY:'+d.decode())\n";
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            PYTHON,
            "-c",
            script,
        ])
        .arg(w.socket())
        .arg(hello.to_string())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("REPLY:"),
        "the foreign client could not run: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !stdout.contains("welcome"),
        "another uid was served: {stdout}"
    );
    assert_eq!(
        stdout.trim(),
        "REPLY:",
        "the broker must close without a word"
    );
    // The same bytes from our own uid are served.
    assert!(raw_hello(&w.socket(), &hello).contains("welcome"));
}

/// `broker stop` ends the running broker, wherever it was started: it exits and its socket
/// is gone; with none running, it says so. A broker with nothing to do exits by itself after
/// `--idle-exit` (its socket gone too), and the next one serves the same directory.
#[test]
fn broker_stop_ends_it_and_an_idle_broker_exits() {
    let w = World::new();
    let mut broker = w.broker();
    let out = w.cmd(&["broker", "stop"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.trim(),
        format!("stopped the broker (pid {})", broker.pid())
    );
    assert!(broker.wait_within(LIMIT).success());
    assert!(!w.socket().exists());
    let out = w.cmd(&["broker", "stop"]).output().unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("no broker is running"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Idle: no connection and no request for 300 ms.
    let mut idle = Peer::spawn(w.cmd(&["broker", "--idle-exit", "300ms"]), true);
    assert!(idle.wait_within(LIMIT).success());
    assert!(!w.socket().exists());
    assert!(
        idle.stderr().contains("no connection and no request for"),
        "{}",
        idle.stderr()
    );
    // The next one starts in its place.
    let mut next = w.broker();
    let out = w.cmd(&["broker", "stop"]).output().unwrap();
    assert!(out.status.success());
    assert!(next.wait_within(LIMIT).success());
}
