//! Enforcement in front of the real `@modelcontextprotocol/server-filesystem`.
//!
//! The upstream runs behind `tee`, which appends every line the server receives to a
//! record file: each test proves a denied call never reached the server.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use toolgate_testkit::Peer;

const POLICY: &str = r#"
version: 1
default: ask
packs: [filesystem]
rules:
  - id: protect-secrets
    effect: deny
    operations: [fs.read, fs.write, fs.delete]
    resources: ["**/.env", "${home}/.ssh/**"]
  - id: allow-workspace-read
    effect: allow
    operations: [fs.read]
    resources: ["${workspace}/**"]
  - id: allow-workspace-write
    effect: allow
    operations: [fs.write]
    resources: ["${workspace}/**"]
tools:
  write_file:
    allowed_path_prefixes: ["${workspace}/out"]
  list_directory:
    max_calls: 2
"#;

struct Fs {
    peer: Peer,
    base: PathBuf,
    _dir: tempfile::TempDir,
    next: i64,
}

impl Fs {
    fn start() -> Option<Fs> {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let work = base.join("work");
        let home = base.join("home");
        std::fs::create_dir_all(work.join("out")).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(work.join("a.txt"), "hello from a").unwrap();
        std::fs::write(work.join(".env"), "API_KEY=sk-fake").unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), "FAKE KEY").unwrap();
        std::os::unix::fs::symlink(home.join(".ssh"), work.join("keys")).unwrap();
        std::fs::write(base.join("policy.yaml"), POLICY).unwrap();
        let server = common::filesystem_server(&work)?;
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        cmd.arg("wrap")
            .arg("--workspace")
            .arg(&work)
            .arg("--policy")
            .arg(base.join("policy.yaml"))
            .arg("--audit")
            .arg(base.join("audit.jsonl"))
            .args(["--approval", "none", "--"])
            .args(["sh", "-c", r#"tee -a "$0" | "$1" "$2" "$3""#])
            .arg(base.join("record"))
            .arg(&server.node)
            .arg(&server.entry)
            .arg(&work)
            .env("HOME", &home)
            .env("TOOLGATE_PINS_DIR", base.join("pins"));
        let mut fs = Fs {
            peer: Peer::spawn(cmd, false),
            base,
            _dir: dir,
            next: 100,
        };
        fs.handshake();
        Some(fs)
    }

    fn send(&mut self, v: Value) {
        self.peer.send(serde_json::to_vec(&v).unwrap());
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
        loop {
            let m = self.peer.recv_json();
            if m.get("id") == Some(&json!(id)) && m.get("method").is_none() {
                return m;
            }
        }
    }

    fn handshake(&mut self) {
        let r = self.request(
            "initialize",
            json!({"protocolVersion":"2025-06-18","capabilities":{},
                   "clientInfo":{"name":"enforce-fs-test","version":"0"}}),
        );
        assert!(r.get("result").is_some(), "{r}");
        self.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        let r = self.request("tools/list", json!({}));
        assert!(r["result"]["tools"].as_array().unwrap().len() > 5, "{r}");
    }

    fn call(&mut self, tool: &str, args: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": args}))
    }

    fn upstream_saw(&self) -> String {
        std::fs::read_to_string(self.base.join("record")).unwrap_or_default()
    }

    fn work(&self, rel: &str) -> String {
        self.base.join("work").join(rel).display().to_string()
    }
}

fn text(r: &Value) -> String {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

fn denied(r: &Value) -> bool {
    r["result"]["isError"] == true && text(r).starts_with("toolgate blocked")
}

fn contract(r: &Value) -> String {
    r["result"]["_meta"]["dev.toolgate/decision"]["contract"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn allowed_read_reaches_the_server_and_returns_its_result() {
    let Some(mut fs) = Fs::start() else { return };
    let r = fs.call("read_text_file", json!({"path": fs.work("a.txt")}));
    assert!(!denied(&r), "{r}");
    assert!(text(&r).contains("hello from a"), "{r}");
}

#[test]
fn dotenv_is_denied_before_the_server() {
    let Some(mut fs) = Fs::start() else { return };
    let r = fs.call("read_text_file", json!({"path": fs.work(".env")}));
    assert!(denied(&r), "{r}");
    assert!(text(&r).contains("protect-secrets"), "{r}");
    assert!(!fs.upstream_saw().contains(".env"));
}

#[test]
fn symlink_escape_is_resolved_and_denied() {
    let Some(mut fs) = Fs::start() else { return };
    // work/keys -> home/.ssh: lexically inside the workspace, really a secret.
    let r = fs.call("read_text_file", json!({"path": fs.work("keys/id_rsa")}));
    assert!(denied(&r), "{r}");
    assert!(text(&r).contains(".ssh/id_rsa"), "{r}");
    assert!(!fs.upstream_saw().contains("keys/id_rsa"));
}

#[test]
fn tilde_is_expanded_and_denied() {
    let Some(mut fs) = Fs::start() else { return };
    let r = fs.call("read_text_file", json!({"path": "~/.ssh/id_rsa"}));
    assert!(denied(&r), "{r}");
    assert!(!fs.upstream_saw().contains("id_rsa"));
}

#[test]
fn one_forbidden_path_in_a_multi_file_read_denies_the_whole_call() {
    let Some(mut fs) = Fs::start() else { return };
    let r = fs.call(
        "read_multiple_files",
        json!({"paths": [fs.work("a.txt"), fs.work(".env")]}),
    );
    assert!(denied(&r), "{r}");
    assert!(!fs.upstream_saw().contains("read_multiple_files"));
}

#[test]
fn write_outside_the_allowed_prefix_is_denied() {
    let Some(mut fs) = Fs::start() else { return };
    let r = fs.call(
        "write_file",
        json!({"path": fs.work("elsewhere.txt"), "content": "x"}),
    );
    assert!(denied(&r), "{r}");
    assert_eq!(contract(&r), "constraint", "{r}");
    assert!(!fs.base.join("work/elsewhere.txt").exists());
    let r = fs.call(
        "write_file",
        json!({"path": fs.work("out/ok.txt"), "content": "fine"}),
    );
    assert!(!denied(&r), "{r}");
    assert_eq!(
        std::fs::read_to_string(fs.base.join("work/out/ok.txt")).unwrap(),
        "fine"
    );
    assert!(!fs.upstream_saw().contains("elsewhere.txt"));
}

#[test]
fn a_budget_runs_out() {
    let Some(mut fs) = Fs::start() else { return };
    for _ in 0..2 {
        let r = fs.call("list_directory", json!({"path": fs.work("")}));
        assert!(!denied(&r), "{r}");
    }
    let r = fs.call("list_directory", json!({"path": fs.work("out")}));
    assert!(denied(&r), "{r}");
    assert_eq!(contract(&r), "budget", "{r}");
    // `tee` may append a line to the record just after the server got it (and answered).
    let count = || fs.upstream_saw().matches("list_directory").count();
    toolgate_testkit::wait_until(std::time::Duration::from_secs(10), || count() >= 2);
    let saw = fs.upstream_saw();
    assert_eq!(saw.matches("list_directory").count(), 2, "{saw}");
}

#[test]
fn resources_read_of_a_secret_never_reaches_the_server() {
    let Some(mut fs) = Fs::start() else { return };
    let uri = format!("file://{}", fs.work(".env"));
    let r = fs.request("resources/read", json!({"uri": uri}));
    let message = r["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("toolgate blocked resources/read"), "{r}");
    assert!(!fs.upstream_saw().contains("resources/read"));
}
