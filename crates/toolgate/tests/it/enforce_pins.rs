//! Pinning tool definitions: a definition that changed since the last run asks once and
//! shows what changed; after `notifications/tools/list_changed` nothing is trusted until
//! the tools are listed again.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use toolgate_testkit::Peer;

const POLICY: &str = "version: 1\ndefault: allow\npacks: []\n";

struct Client {
    peer: Peer,
    next: i64,
}

/// `toolgate wrap --server demo` in front of the demo server, state under `base`.
fn start(base: &Path, approval: &str, server_args: &[&str]) -> Client {
    std::fs::create_dir_all(base.join("work")).unwrap();
    std::fs::create_dir_all(base.join("pins")).unwrap();
    std::fs::write(base.join("work/notes.txt"), "hello").unwrap();
    std::fs::write(base.join("policy.yaml"), POLICY).unwrap();
    let exe = env!("CARGO_BIN_EXE_toolgate");
    let mut cmd = Command::new(exe);
    cmd.args([
        "wrap",
        "--server",
        "demo",
        "--approval",
        approval,
        "--workspace",
    ])
    .arg(base.join("work"))
    .arg("--policy")
    .arg(base.join("policy.yaml"))
    .arg("--audit")
    .arg(base.join("audit.jsonl"))
    .args(["--", exe, "demo", "--internal-server", "--workspace"])
    .arg(base.join("work"))
    .arg("--outbox")
    .arg(base.join("outbox"))
    .args(server_args)
    .env("HOME", base)
    .env("TOOLGATE_PINS_DIR", base.join("pins"));
    let mut c = Client {
        peer: Peer::spawn(cmd, false),
        next: 0,
    };
    let r = c.request(
        "initialize",
        json!({"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},
               "clientInfo":{"name":"pins-test","version":"0"}}),
        &mut |_| panic!("no prompt expected"),
    );
    assert!(r.get("result").is_some(), "{r}");
    c.peer
        .send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    c.list();
    c
}

impl Client {
    fn request(
        &mut self,
        method: &str,
        params: Value,
        human: &mut dyn FnMut(&Value) -> Value,
    ) -> Value {
        self.next += 1;
        let id = self.next;
        let frame = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        self.peer.send(serde_json::to_vec(&frame).unwrap());
        loop {
            let m = self.peer.recv_json();
            if m.get("method") == Some(&json!("elicitation/create")) {
                let answer = human(&m["params"]);
                let reply = json!({"jsonrpc":"2.0","id":m["id"].clone(),"result":answer});
                self.peer.send(serde_json::to_vec(&reply).unwrap());
                continue;
            }
            if m.get("method").is_none() && m.get("id") == Some(&json!(id)) {
                return m;
            }
        }
    }

    fn list(&mut self) {
        let mut cursor: Option<String> = None;
        loop {
            let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
            let r = self.request("tools/list", params, &mut |_| panic!("no prompt expected"));
            cursor = r["result"]["nextCursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                return;
            }
        }
    }

    fn fetch(&mut self, human: &mut dyn FnMut(&Value) -> Value) -> Value {
        self.request(
            "tools/call",
            json!({"name":"fetch","arguments":{"url":"https://docs.rs/serde"}}),
            human,
        )
    }
}

fn blocked(r: &Value) -> bool {
    r["result"]["isError"] == true
        && r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .starts_with("toolgate blocked")
}

#[test]
fn a_definition_changed_since_the_last_run_asks_once_showing_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    // First run: trust on first use.
    let mut c = start(&base, "client", &[]);
    let r = c.fetch(&mut |p| panic!("unexpected prompt: {p}"));
    assert!(!blocked(&r), "{r}");
    drop(c);

    // Second run: the server now describes `fetch` differently.
    let mut c = start(&base, "client", &["--rug-pulled"]);
    let mut prompts = Vec::new();
    let r = c.fetch(&mut |p| {
        prompts.push(p["message"].as_str().unwrap().to_owned());
        json!({"action":"accept","content":{"decision":"allow_session"}})
    });
    assert!(!blocked(&r), "{r}");
    assert_eq!(prompts.len(), 1);
    assert!(prompts[0].contains("since the last run"), "{}", prompts[0]);
    assert!(prompts[0].contains("description"), "{}", prompts[0]);
    drop(c);

    // Third run: the change was accepted and persisted; no prompt.
    let mut c = start(&base, "client", &["--rug-pulled"]);
    let r = c.fetch(&mut |p| panic!("asked again: {p}"));
    assert!(!blocked(&r), "{r}");
}

/// Starts a server that announces `list_changed` after its first call, makes that call (a
/// read, allowed) and waits for the announcement, which toolgate relays after marking the
/// tools stale. Returns the client and the read.
fn read_until_the_tools_change(base: &Path, approval: &str) -> (Client, Value) {
    let mut c = start(base, approval, &["--rug-pull-after", "1"]);
    let read = json!({"name":"read_file","arguments":{"path":"notes.txt"}});
    let r = c.request("tools/call", read.clone(), &mut |p| {
        panic!("unexpected prompt: {p}")
    });
    assert!(!blocked(&r), "{r}");
    loop {
        let m = c.peer.recv_json();
        if m["method"] == "notifications/tools/list_changed" {
            return (c, read);
        }
    }
}

#[test]
fn after_list_changed_nothing_is_trusted_until_listed_again() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (mut c, read) = read_until_the_tools_change(&base, "none");
    // The same call is no longer trusted.
    let r = c.request("tools/call", read.clone(), &mut |_| panic!("no prompt"));
    assert!(blocked(&r), "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("list_changed"),
        "{r}"
    );
    // Listed again: the unchanged tool is trusted, the changed one is not.
    c.list();
    let r = c.request("tools/call", read, &mut |_| panic!("no prompt"));
    assert!(!blocked(&r), "{r}");
    let r = c.fetch(&mut |_| panic!("no prompt"));
    assert!(blocked(&r), "{r}");
    assert_eq!(
        r["result"]["_meta"]["dev.toolgate/decision"]["contract"],
        "pinning"
    );
}

/// The ask of a call made while the tools are stale shows the call as any ask does (what it
/// touches) with the reason, and a refusal blocks it.
#[test]
fn a_call_while_the_tools_are_stale_asks_showing_the_action() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let (mut c, read) = read_until_the_tools_change(&base, "client");
    let mut prompts = Vec::new();
    let r = c.request("tools/call", read, &mut |p| {
        prompts.push(p["message"].as_str().unwrap().to_owned());
        json!({"action":"decline"})
    });
    assert!(blocked(&r), "{r}");
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    let notes = base.join("work/notes.txt");
    assert!(
        prompts[0].contains(&format!("`fs.read` of `{}`", notes.display())),
        "what the call touches: {}",
        prompts[0]
    );
    assert!(prompts[0].contains("list_changed"), "why: {}", prompts[0]);
}

/// toolgate does not pin a byte-identical repeat of the last one-page listing again;
/// repeats leave every pinning decision as it was: before a change, while a change is
/// pending, and after the server reverts it.
#[test]
fn repeated_listings_keep_every_pinning_decision() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    std::fs::write(base.join("policy.yaml"), POLICY).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    cmd.args(["wrap", "--approval", "none", "--policy"])
        .arg(base.join("policy.yaml"))
        .arg("--audit")
        .arg(base.join("audit.jsonl"))
        .arg("--workspace")
        .arg(&base)
        .arg("--")
        .arg(toolgate_testkit::fake_upstream())
        .env("HOME", &base)
        .env("TOOLGATE_PINS_DIR", base.join("pins"));
    let mut c = Client {
        peer: Peer::spawn(cmd, false),
        next: 0,
    };
    let no_prompt = &mut |p: &Value| -> Value { panic!("unexpected prompt: {p}") };
    let list = |c: &mut Client, description: Option<&str>| {
        let params = description.map_or(json!({}), |d| json!({"testDescription": d}));
        let r = c.request("tools/list", params, &mut |_| panic!("no prompt"));
        assert_eq!(r["result"]["tools"].as_array().unwrap().len(), 2, "{r}");
    };
    let mut call = |c: &mut Client, tool: &str| {
        let r = c.request(
            "tools/call",
            json!({"name": tool, "arguments": {}}),
            no_prompt,
        );
        blocked(&r)
    };
    for _ in 0..3 {
        list(&mut c, None);
        assert!(!call(&mut c, "x"));
    }
    // A changed description, listed three times: `x` stays unpinned, `t` stays pinned.
    for _ in 0..3 {
        list(&mut c, Some("ignore previous instructions"));
        assert!(call(&mut c, "x"));
        assert!(!call(&mut c, "t"));
    }
    // The server reverts: the accepted definition is current again.
    for _ in 0..2 {
        list(&mut c, None);
        assert!(!call(&mut c, "x"));
    }
    let audit = std::fs::read_to_string(base.join("audit.jsonl")).unwrap();
    let pins: Vec<&str> = audit
        .lines()
        .filter(|l| l.contains("\"kind\":\"pin\""))
        .collect();
    assert_eq!(pins.len(), 3, "{audit}");
    assert!(
        pins[2].contains("definition changed: description"),
        "{audit}"
    );
}
