//! `toolgate approvals` as a terminal UI, in a real pseudo-terminal: a request asked by a
//! wrapped server appears on screen, `o` allows it, `q` quits and restores the terminal.

use std::fs;
use std::io::{Read as _, Write as _};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use serde_json::{Value, json};
use toolgate_testkit::{Peer, wait_until};

const LIMIT: Duration = Duration::from_secs(30);

const POLICY: &str = r#"
version: 1
default: ask
packs: []
tools:
  run_command:
    command_param: command
"#;

/// Removes terminal control sequences (CSI and OSC) so the drawn text can be searched.
fn strip(raw: &str) -> String {
    let mut out = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            Some(']') => {
                for d in chars.by_ref() {
                    if d == '\u{7}' {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn the_terminal_ui_shows_a_request_and_allows_it_with_o() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let exe = env!("CARGO_BIN_EXE_toolgate");
    let broker_dir = base.join("b");
    let cmd = |args: &[&str]| {
        let mut c = Command::new(exe);
        c.args(args).env("TOOLGATE_BROKER_DIR", &broker_dir);
        c
    };
    let _broker = Peer::spawn(cmd(&["broker"]), true);
    assert!(wait_until(LIMIT, || cmd(&["status"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())));

    // The approvals terminal on a pseudo-terminal of 100x30.
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let slave = || {
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(name.to_str().unwrap())
            .unwrap()
    };
    let sized = Command::new("stty")
        .args(["cols", "100", "rows", "30"])
        .stdin(slave())
        .status();
    if !sized.is_ok_and(|s| s.success()) {
        eprintln!("skipped: `stty` cannot size the pseudo-terminal");
        return;
    }
    let mut ui = cmd(&["approvals"])
        .env("TERM", "xterm-256color")
        .stdin(slave())
        .stdout(slave())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut master = fs::File::from(master);
    let mut reader = master.try_clone().unwrap();
    let (tx, screen) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0
                || tx
                    .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                    .is_err()
            {
                return;
            }
        }
    });
    let mut seen = String::new();
    let mut expect = |text: &str| {
        let deadline = std::time::Instant::now() + LIMIT;
        while !strip(&seen).contains(text) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match screen.recv_timeout(left) {
                Ok(chunk) => seen.push_str(&chunk),
                Err(e) => panic!("{text:?} not drawn ({e}):\n{seen:?}"),
            }
        }
    };
    // Ratatui skips blank cells, so single words are searched for.
    expect("Nothing");

    // A wrapped server asks.
    let work = base.join("work");
    fs::create_dir_all(&work).unwrap();
    fs::create_dir_all(base.join("pins")).unwrap();
    fs::write(base.join("policy.yaml"), POLICY).unwrap();
    let mut wrap = cmd(&["wrap", "--server", "tty-one", "--approval", "broker"]);
    wrap.arg("--workspace")
        .arg(&work)
        .arg("--policy")
        .arg(base.join("policy.yaml"))
        .arg("--audit")
        .arg(base.join("audit.jsonl"))
        .arg("--")
        .arg(exe)
        .args(["demo", "--internal-server", "--workspace"])
        .arg(&work)
        .arg("--outbox")
        .arg(base.join("outbox"))
        .env("HOME", &base)
        .env("TOOLGATE_PINS_DIR", base.join("pins"));
    let mut proxy = Peer::spawn(wrap, false);
    let response = |proxy: &mut Peer, id: &Value| loop {
        let m = proxy.recv_json();
        if m.get("id") == Some(id) && m.get("method").is_none() {
            return m;
        }
    };
    let send = |proxy: &mut Peer, v: Value| proxy.send(serde_json::to_vec(&v).unwrap());
    send(
        &mut proxy,
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
    );
    response(&mut proxy, &json!(0));
    let mut cursor: Option<String> = None;
    for n in 0..20 {
        let id = json!(format!("list-{n}"));
        let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        send(
            &mut proxy,
            json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":params}),
        );
        let r = response(&mut proxy, &id);
        cursor = r["result"]["nextCursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    send(
        &mut proxy,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
        "params":{"name":"run_command","arguments":{"command":"echo via-tui"}}}),
    );
    expect("tty-one/run_command");
    expect("via-tui");

    master.write_all(b"o").unwrap();
    master.flush().unwrap();
    let r = response(&mut proxy, &json!(1));
    assert_ne!(r["result"]["isError"], true, "{r}");
    expect("allow-once");

    master.write_all(b"q").unwrap();
    master.flush().unwrap();
    let deadline = std::time::Instant::now() + LIMIT;
    let status = loop {
        if let Some(s) = ui.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "`q` did not quit");
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    ui.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{err}");
}
