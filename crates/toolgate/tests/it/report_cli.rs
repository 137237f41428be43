//! `toolgate report`: Markdown and JSON snapshots of a fixture setup, suggestions, time
//! bounds, a live probe of the reference filesystem server, a hostile server's tool text,
//! and the HTML page rendered in a real headless Chromium with the network disabled.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stderr,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; prints what it ran for the person reading the test output"
)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_testkit::auditlog::write_log;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report")
}

/// Values that are in the log's arguments, resources and reasons and must never be printed.
const SECRETS: [&str; 3] = [
    "SECRET-TOKEN-4711",
    "secret-plan.txt",
    "victim@attacker.example",
];

struct Setup {
    dir: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let ws = ws.canonicalize().unwrap();
        let home = home.canonicalize().unwrap();
        write_log(&ws.join("audit.jsonl"), fixture_events());
        Setup { dir, ws, home }
    }

    fn report(&self, extra: &[&str]) -> Output {
        let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .arg("report")
            .arg("--workspace")
            .arg(&self.ws)
            .arg("--home")
            .arg(&self.home)
            .args(["--audit", "audit.jsonl"])
            .args(extra)
            .current_dir(&self.ws)
            .env("TOOLGATE_PINS_DIR", self.dir.path().join("pins"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "toolgate report {extra:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn fixture_report(&self, extra: &[&str]) -> String {
        let policy = fixtures().join("policy.yaml");
        let tools = fixtures().join("tools.json");
        let mut args = vec![
            "--policy",
            policy.to_str().unwrap(),
            "--tools",
            tools.to_str().unwrap(),
            "--server",
            "mail",
        ];
        args.extend_from_slice(extra);
        let out = self.report(&args);
        String::from_utf8(out.stdout)
            .unwrap()
            .replace(self.ws.to_str().unwrap(), "[WS]")
            .replace(self.home.to_str().unwrap(), "[HOME]")
            .replace(fixtures().to_str().unwrap(), "[FIXTURES]")
    }
}

fn t(day: u32, s: u32) -> String {
    format!("2026-03-{day:02}T10:00:{s:02}.000Z")
}

/// Three days of a mail agent: allowed reads, asks that end every way, a make command and
/// an API host approved again and again, a tainted destination approved anyway (never
/// suggested), denied sends, a definition change, and secrets in the places the report
/// must not print.
fn fixture_events() -> Vec<(String, Value)> {
    let mut v = Vec::new();
    let mut n = 0u32;
    let mut rid = || {
        n += 1;
        n.to_string()
    };
    for s in 0..4 {
        v.push((
            t(1, s),
            json!({"kind":"decision","session":"a","request_id":rid(),"server":"mail","tool":"read_email",
                "operations":["unknown"],"resources":["/home/u/secret-plan.txt"],"effect":"allow","contract":"rule","rule":"allow-workspace",
                "reason":"`fs.read` of `/home/u/secret-plan.txt` matches allow rule","raw":{"arguments":{"token":"SECRET-TOKEN-4711"}}}),
        ));
    }
    // make, asked by the default and approved three times (once, once, session).
    for (s, scope) in [(10, "once"), (12, "once"), (14, "session")] {
        let id = rid();
        v.push((t(1, s), json!({"kind":"decision","session":"a","request_id":id,"server":"mail","tool":"run_command",
            "operations":["shell.exec"],"executable":"/usr/bin/make","effect":"ask","contract":"default","reason":"no rule matched (asking via Broker)"})));
        v.push((t(1, s + 1), json!({"kind":"approval","session":"a","request_id":id,"server":"mail","tool":"run_command",
            "operations":["shell.exec"],"executable":"/usr/bin/make","effect":"allow","contract":"default","approval":{"how":"broker","scope":scope}})));
    }
    // fetch of api.example.com through the sink gate, approved three times.
    for s in [20, 22, 24] {
        let id = rid();
        v.push((t(2, s), json!({"kind":"decision","session":"b","request_id":id,"server":"mail","tool":"fetch",
            "operations":["net.request"],"net":{"host":"api.example.com","method":"GET"},"effect":"ask","contract":"sink_gate",
            "reason":"destination `https://api.example.com/v1?key=SECRET-TOKEN-4711` in `url` is not a trusted destination"})));
        v.push((
            t(2, s + 1),
            json!({"kind":"approval","session":"b","request_id":id,"server":"mail","tool":"fetch",
            "effect":"allow","contract":"sink_gate","approval":{"how":"client","scope":"once"}}),
        ));
    }
    // A tainted destination approved three times anyway: never suggested.
    for s in [30, 32, 34] {
        let id = rid();
        v.push((t(2, s), json!({"kind":"decision","session":"b","request_id":id,"server":"mail","tool":"fetch",
            "operations":["net.request"],"net":{"host":"tainted.example","method":"POST"},"effect":"ask","contract":"sink_gate",
            "reason":"destination `victim@attacker.example` in `url` came from untrusted output #2 of `read_email`"})));
        v.push((
            t(2, s + 1),
            json!({"kind":"approval","session":"b","request_id":id,"server":"mail","tool":"fetch",
            "effect":"allow","contract":"sink_gate","approval":{"how":"client","scope":"once"}}),
        ));
    }
    // Asks that were denied, timed out and cancelled.
    let id = rid();
    v.push((t(3, 1), json!({"kind":"decision","session":"c","request_id":id,"server":"mail","tool":"send_email","operations":["unknown"],"effect":"ask","contract":"sink_gate","reason":"destination `victim@attacker.example` is not trusted"})));
    v.push((t(3, 2), json!({"kind":"decision","session":"c","request_id":id,"server":"mail","tool":"send_email","operations":["unknown"],"effect":"deny","contract":"sink_gate","reason":"destination `victim@attacker.example` is not trusted; the human declined"})));
    let id = rid();
    v.push((t(3, 3), json!({"kind":"decision","session":"c","request_id":id,"server":"mail","tool":"send_email","operations":["unknown"],"effect":"ask","contract":"default","reason":"no rule matched"})));
    v.push((t(3, 4), json!({"kind":"decision","session":"c","request_id":id,"server":"mail","tool":"send_email","operations":["unknown"],"effect":"deny","contract":"default","reason":"no rule matched; no answer within 120 s"})));
    let id = rid();
    v.push((t(3, 5), json!({"kind":"decision","session":"c","request_id":id,"server":"mail","tool":"write_note","operations":["fs.write"],"effect":"ask","contract":"default","reason":"no rule matched"})));
    v.push((t(3, 6), json!({"kind":"cancelled","session":"c","request_id":id,"server":"mail","tool":"write_note"})));
    // Denied network calls.
    for (s, host) in [
        (10, "evil.example"),
        (11, "evil.example"),
        (12, "other.example"),
    ] {
        v.push((t(3, s), json!({"kind":"decision","session":"c","request_id":rid(),"server":"mail","tool":"fetch",
            "operations":["net.request"],"net":{"host":host,"method":"POST"},"effect":"deny","contract":"sink_gate",
            "reason":"destination came from untrusted output"})));
    }
    v.push((t(3, 20), json!({"kind":"result","session":"c","request_id":"1","server":"mail","tool":"read_email","isError":false})));
    v.push((
        t(3, 30),
        json!({"kind":"pin","tool":"send_email","reason":"definition changed: description"}),
    ));
    v
}

#[test]
fn markdown_and_json_of_the_fixture_setup() {
    let s = Setup::new();
    let md = s.fixture_report(&[]);
    let json = s.fixture_report(&["--json"]);
    for secret in SECRETS {
        assert!(!md.contains(secret), "markdown prints `{secret}`");
        assert!(!json.contains(secret), "json prints `{secret}`");
    }
    insta::assert_snapshot!("report_markdown", md);
    let mut v: Value = serde_json::from_str(&json).unwrap();
    v["toolgate_version"] = json!("[version]");
    insta::assert_json_snapshot!("report_json", v);
}

#[test]
fn suggest_prints_only_policy_lines_that_load() {
    let s = Setup::new();
    let out = s.fixture_report(&["--suggest"]);
    assert!(out.contains("executables: [\"make\"]"), "{out}");
    assert!(out.contains("https://api.example.com/*"), "{out}");
    assert!(
        !out.contains("tainted.example"),
        "a tainted destination was suggested:\n{out}"
    );
    assert!(
        !out.contains("send_email"),
        "a refused ask was suggested:\n{out}"
    );
    // Paste-ready: appended to a policy, it loads.
    let policy = s.ws.join("pasted.yaml");
    std::fs::write(&policy, format!("version: 1\n{out}")).unwrap();
    let check = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["policy", "check", "--policy"])
        .arg(&policy)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "suggested lines do not load:\n{out}\n{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn since_and_until_bound_the_audit_figures() {
    let s = Setup::new();
    let json = s.fixture_report(&[
        "--json",
        "--since",
        "2026-03-02",
        "--until",
        "2026-03-02T23:00:00+00:00",
    ]);
    let v: Value = serde_json::from_str(&json).unwrap();
    let a = &v["audit"];
    assert_eq!(
        a["by_day"].as_object().unwrap().keys().collect::<Vec<_>>(),
        ["2026-03-02"]
    );
    assert_eq!(a["decisions"]["ask"], 6);
    assert_eq!(a["first_time"], "2026-03-02T10:00:20.000Z");
    let bad = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["report", "--since", "last tuesday"])
        .current_dir(&s.ws)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a date or an RFC 3339 time"));
}

#[test]
fn a_live_probe_lists_the_filesystem_servers_tools() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let Some(server) = common::filesystem_server(&ws) else {
        eprintln!("skipped: no node");
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["report", "--json", "--probe-timeout", "20", "--workspace"])
        .arg(&ws)
        .args(["--probe", "--"])
        .arg(&server.node)
        .arg(&server.entry)
        .args(&server.args)
        .current_dir(&ws)
        .env("TOOLGATE_PINS_DIR", ws.join("pins"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let server = &v["servers"][0];
    assert_eq!(server["source"], "probe");
    assert_eq!(server["name"], "server-filesystem");
    let tools = server["tools"].as_array().unwrap();
    let find = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no `{name}`"))
    };
    assert_eq!(find("read_text_file")["typical"]["effect"], "allow");
    assert_eq!(find("read_text_file")["operations"], json!(["fs.read"]));
    // The starter allows editing in the workspace; a move (its delete) still asks.
    assert_eq!(find("write_file")["typical"]["effect"], "allow");
    assert_eq!(find("move_file")["typical"]["effect"], "ask");
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "write_unconfined" && f["tool"] == "write_file"),
        "{}",
        v["findings"]
    );
}

fn hostile_html(s: &Setup) -> (PathBuf, String, String) {
    let page = s.ws.join("report.html");
    let tools = fixtures().join("hostile_tools.json");
    let policy = fixtures().join("policy.yaml");
    // A live hostile server: the probe lists its tools as a client would.
    let server = toolgate_testkit::bin_path("fake_upstream");
    let out = s.report(&[
        "--policy",
        policy.to_str().unwrap(),
        "--server",
        "evil</svg><script>alert(1)</script>",
        "--html",
        page.to_str().unwrap(),
        "--probe",
        "--",
        server.to_str().unwrap(),
        "--tools-file",
        tools.to_str().unwrap(),
    ]);
    assert!(
        out.stdout.is_empty(),
        "--html alone prints nothing on stdout"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    let md = String::from_utf8(s.report(&["--tools", tools.to_str().unwrap()]).stdout).unwrap();
    (page, html, md)
}

#[test]
fn a_hostile_servers_tool_text_is_shown_as_text() {
    let s = Setup::new();
    let (_, html, md) = hostile_html(&s);
    let lower = html.to_ascii_lowercase();
    for tag in ["<script", "<iframe", "<img", "<link", "<style>*"] {
        assert!(!lower.contains(tag), "the page contains `{tag}`");
    }
    // Exactly one <style> (toolgate's), the four charts' <svg> each closed once, no script.
    assert_eq!(lower.matches("<style").count(), 1);
    assert_eq!(lower.matches("<svg ").count(), 4);
    assert_eq!(lower.matches("</svg>").count(), 4);
    // The hostile text is there, as text.
    assert!(html.contains("&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;"));
    assert!(html.contains("send_&quot;quoted&quot;_&#39;tool&#39;"));
    assert!(html.contains("&lt;/svg&gt;&lt;/figure&gt;&lt;iframe"));
    // Control characters are shown escaped, never raw.
    assert!(html.contains("\\u{1b}[31mred"), "escape shown as text");
    assert!(html.contains("\\u{7}") && html.contains("\\0") || html.contains("\\u{0}"));
    assert!(
        !html.chars().any(|c| c.is_control() && c != '\n'),
        "a raw control character"
    );
    // No external reference at all; the CSP forbids loading anything.
    assert!(html.contains("default-src 'none'"));
    assert!(
        !lower.contains("https://attacker.example/\""),
        "an attribute holds a URL"
    );
    // Markdown: the names are in code spans, the descriptions escaped.
    assert!(
        !md.contains("<script>document.body"),
        "raw HTML in Markdown:\n{md}"
    );
    assert!(!md.chars().any(|c| c.is_control() && c != '\n'));
}

fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in ["/usr/bin", "/usr/local/bin", "/snap/bin"] {
            let p = Path::new(dir).join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Runs Chromium headless with the network disabled, bounded by `limit`.
fn run_chromium(bin: &Path, profile: &Path, args: &[String], limit: Duration) -> Output {
    let child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            // The network is off: every host resolves to nothing, every proxy is a dead port.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=127.0.0.1:9",
            "--window-size=1200,1500",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    crate::common::wait_with_output(child, limit, "chromium")
}

#[test]
fn the_html_page_renders_in_headless_chromium_offline() {
    let Some(bin) = chromium() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "chromium is missing (scripts/test installs it under CI=true)"
        );
        eprintln!("skipped: no chromium (apt-get install chromium)");
        return;
    };
    let s = Setup::new();
    // The fixture setup with its audit log (charts), plus the hostile tools.
    let page = s.ws.join("report.html");
    let policy = fixtures().join("policy.yaml");
    s.report(&[
        "--policy",
        policy.to_str().unwrap(),
        "--tools",
        fixtures().join("hostile_tools.json").to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    let url = format!("file://{}", page.display());
    let netlog = s.dir.path().join("netlog.json");
    let dom = run_chromium(
        &bin,
        &s.dir.path().join("profile-dom"),
        &[
            format!("--log-net-log={}", netlog.display()),
            "--dump-dom".to_owned(),
            url.clone(),
        ],
        Duration::from_secs(60),
    );
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(
        dom.contains("<title>toolgate report</title>"),
        "title changed or page missing:\n{}",
        &dom[..dom.len().min(2000)]
    );
    for chart in [
        "chart-time",
        "chart-most-denied",
        "chart-most-asked",
        "chart-ask-outcomes",
    ] {
        assert!(
            dom.contains(&format!("<svg id=\"{chart}\"")),
            "no `{chart}` in the DOM"
        );
    }
    assert!(dom.contains("<rect class=\"deny\""), "no deny bar");
    assert!(dom.contains("<rect class=\"allow\""), "no allow bar");
    assert!(dom.contains(">allowed once</text>"), "no ask outcome label");
    assert!(dom.contains(">03-01</text>"), "no day label");
    // No script from tool text ran: it would have changed the title or the body.
    assert!(
        !dom.contains("data-pwned=\"1\"") && !dom.contains("<title>pwned"),
        "a script ran"
    );
    assert!(
        !dom.to_ascii_lowercase().contains("<script"),
        "a script element in the DOM"
    );
    assert!(!dom.contains("<iframe"), "an iframe in the DOM");
    // No request left the page: every request in the net log is the browser's own
    // (initiator "not an origin"); one from the page would have the page's origin ("null"
    // for a file), and no URL from the tool text appears at all.
    let log = std::fs::read_to_string(&netlog).unwrap_or_default();
    assert!(log.contains("\"constants\""), "chromium wrote no net log");
    assert!(
        !log.contains("attacker.example"),
        "a request to the hostile URL"
    );
    for (i, _) in log.match_indices("\"initiator\":\"") {
        let rest = &log[i + 13..];
        let value = &rest[..rest.find('"').unwrap_or(rest.len())];
        assert_eq!(value, "not an origin", "a request left the page");
    }
    // The screenshot, kept next to the test binary as an artifact.
    let shot = toolgate_testkit::target_profile_dir().join("report-screenshot.png");
    let _ = std::fs::remove_file(&shot);
    run_chromium(
        &bin,
        &s.dir.path().join("profile-shot"),
        &[format!("--screenshot={}", shot.display()), url],
        Duration::from_secs(60),
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG"),
        "no screenshot at {}",
        shot.display()
    );
    eprintln!("screenshot: {}", shot.display());
}

#[test]
fn pinned_servers_are_a_source_and_a_changed_definition_is_a_finding() {
    let s = Setup::new();
    let listed: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("tools.json")).unwrap())
            .unwrap();
    let mut pins = serde_json::Map::new();
    for def in listed["tools"].as_array().unwrap() {
        let mut def = def.clone();
        if def["name"] == "send_email" {
            def["description"] = json!("Send an email to a colleague.");
        }
        let fp = toolgate_policy::fingerprint(&def);
        pins.insert(
            def["name"].as_str().unwrap().to_owned(),
            json!({"fingerprint": fp, "definition": def}),
        );
    }
    let dir = s.dir.path().join("pins");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("mail.json"),
        json!({"version": 1, "server": "mail", "tools": pins}).to_string(),
    )
    .unwrap();
    // Every pinned server, from the store.
    let out = s.report(&["--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["servers"][0]["name"], "mail");
    assert_eq!(v["servers"][0]["source"], "pins");
    assert_eq!(v["servers"][0]["tools"].as_array().unwrap().len(), 6);
    // The listed definitions against the pins: only send_email changed.
    let tools = fixtures().join("tools.json");
    let out = s.report(&[
        "--json",
        "--tools",
        tools.to_str().unwrap(),
        "--server",
        "mail",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let changed: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "definition_changed" && f["severity"] == "high")
        .collect();
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(changed[0]["tool"], "send_email");
    assert!(
        changed[0]["message"]
            .as_str()
            .unwrap()
            .contains("description")
    );
}

/// Four approved writes of notes in the workspace: the suggestion keeps to their folder and
/// extension (never a bare `allow fs.write`), pasted in it draws no high finding, and it
/// allows neither `~/.bashrc` nor the workspace's `.env`. Writes spread over the home folder
/// get no rule at all, and say why; with nothing to suggest, `--suggest` says so.
#[test]
fn suggest_keeps_to_the_approved_paths_and_never_rates_high() {
    let s = Setup::new();
    let tools = s.ws.join("fs-tools.json");
    std::fs::write(
        &tools,
        json!({"tools": [{"name": "write_file", "description": "Write a file",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}]})
        .to_string(),
    )
    .unwrap();
    let policy = s.ws.join("toolgate.yaml");
    std::fs::write(&policy, "version: 1\ndefault: ask\n").unwrap();
    let approved_writes = |paths: &[PathBuf]| {
        let mut events = Vec::new();
        for (i, p) in paths.iter().enumerate() {
            let id = format!("w{i}");
            let secs = u32::try_from(i).unwrap() * 2;
            events.push((t(1, secs), json!({"kind":"decision","session":"a","request_id":id,"server":"fs","tool":"write_file",
                "operations":["fs.write"],"resources":[p],"effect":"ask","contract":"default","reason":"no rule matched"})));
            events.push((t(1, secs + 1), json!({"kind":"approval","session":"a","request_id":id,"server":"fs","tool":"write_file",
                "operations":["fs.write"],"effect":"allow","contract":"default","approval":{"how":"broker","scope":"once"}})));
        }
        write_log(&s.ws.join("audit.jsonl"), events);
    };
    let suggest = || {
        let out = s.report(&[
            "--policy",
            policy.to_str().unwrap(),
            "--tools",
            tools.to_str().unwrap(),
            "--server",
            "fs",
            "--suggest",
        ]);
        String::from_utf8(out.stdout).unwrap()
    };
    let notes = s.ws.join("notes");
    approved_writes(&[
        notes.join("a.md"),
        notes.join("b.md"),
        notes.join("2026/c.md"),
        notes.join("d.md"),
    ]);
    let out = suggest();
    assert!(
        out.contains(r#"resources: ["${workspace}/notes/**/*.md"]"#),
        "{out}"
    );
    // Pasted in: no high finding, and neither `~/.bashrc` nor `.env` is allowed.
    let pasted = s.ws.join("pasted.yaml");
    std::fs::write(&pasted, format!("version: 1\ndefault: ask\n{out}")).unwrap();
    let json = s.report(&[
        "--policy",
        pasted.to_str().unwrap(),
        "--tools",
        tools.to_str().unwrap(),
        "--server",
        "fs",
        "--json",
    ]);
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    let high: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "high")
        .collect();
    assert!(high.is_empty(), "{high:?}");
    let explain = |path: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["policy", "explain", "--json", "--policy"])
            .arg(&pasted)
            .arg("--workspace")
            .arg(&s.ws)
            .arg("--home")
            .arg(&s.home)
            .args(["--server", "fs", "--tool", "write_file", "--args"])
            .arg(json!({"path": path, "content": "x"}).to_string())
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["decision"]["effect"].as_str().unwrap().to_owned()
    };
    assert_eq!(explain(&notes.join("e.md")), "allow");
    for outside in [
        s.home.join(".bashrc"),
        s.ws.join(".env"),
        notes.join("run.sh"),
    ] {
        assert_ne!(explain(&outside), "allow", "{}", outside.display());
    }
    // Writes across the home folder: no rule reaches only them.
    approved_writes(&[
        s.home.join("a.txt"),
        s.home.join("x/b.cfg"),
        s.home.join("y/c.ini"),
        s.ws.join("d.json"),
        s.home.join("e.txt"),
        s.home.join("f.txt"),
        s.home.join("g.txt"),
        s.home.join("h.txt"),
        s.home.join("i.txt"),
    ]);
    let out = suggest();
    assert!(out.starts_with("# no suggestions: "), "{out}");
    assert!(
        out.contains("# not suggested: `write_file` (fs.write) was approved 9 times, but"),
        "{out}"
    );
    assert!(!out.contains("effect: allow"), "{out}");
    // Nothing approved often enough.
    approved_writes(&[notes.join("a.md")]);
    let out = suggest();
    assert_eq!(
        out.trim(),
        "# no suggestions: nothing was approved 3 times or more without also being refused or tainted"
    );
}

/// Without `--policy`, the report reads the `toolgate.yaml` that `policy init` wrote in the
/// current directory, and says so; without one, the starter policy.
#[test]
fn the_policy_of_the_directory_is_the_default_and_is_named() {
    let s = Setup::new();
    let starter = s.report(&["--json"]);
    let v: Value = serde_json::from_slice(&starter.stdout).unwrap();
    assert_eq!(v["policy"]["source"], "the starter policy");
    std::fs::write(s.ws.join("toolgate.yaml"), "version: 1\ndefault: deny\n").unwrap();
    let here = s.report(&["--json"]);
    let v: Value = serde_json::from_slice(&here.stdout).unwrap();
    assert_eq!(v["policy"]["source"], "toolgate.yaml");
    assert_eq!(v["policy"]["default"], "deny");
    assert!(
        String::from_utf8_lossy(&here.stderr)
            .contains("using the policy `toolgate.yaml` of this directory"),
        "{}",
        String::from_utf8_lossy(&here.stderr)
    );
}
