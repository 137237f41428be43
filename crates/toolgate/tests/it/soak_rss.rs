//! Soak: 100,000 `tools/call` through `toolgate wrap`, every 100th returning a 1 MB result
//! (decided, audited and fed to the taint index like any other). The resident set of the
//! toolgate process must stay flat: sampled after a warm-up and at the end.
//!
//! Run it (the figures are printed on stderr; use `--nocapture`):
//! `cargo test -p toolgate --release --test it soak_rss:: -- --ignored --nocapture`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stderr,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; prints what it ran for the person reading the test output"
)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};
use toolgate_testkit::{Peer, bin_path};

/// The number of calls; `TOOLGATE_SOAK_CALLS` overrides it (a multiple of 10,000) for a
/// quicker local run.
fn calls() -> u64 {
    std::env::var("TOOLGATE_SOAK_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}
const WINDOW: u64 = 100;
const BIG: u64 = 1 << 20;
const WARM_UP: u64 = 5_000;
/// Allowed growth of VmRSS between the warm-up sample and the end.
const MAX_GROWTH_KIB: u64 = 16 * 1024;

fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status"))
}

fn wrap_load(dir: &Path) -> Peer {
    let base = dir.canonicalize().unwrap();
    for sub in ["work", "home", "pins", "broker"] {
        std::fs::create_dir_all(base.join(sub)).unwrap();
    }
    let policy = base.join("policy.yaml");
    std::fs::write(&policy, "version: 1\ndefault: allow\nrules: []\n").unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    cmd.arg("wrap")
        .arg("--workspace")
        .arg(base.join("work"))
        .arg("--audit")
        .arg(base.join("audit.jsonl"))
        .arg("--policy")
        .arg(&policy)
        .args(["--approval", "none", "--"])
        .arg(bin_path("load_upstream"))
        .env("HOME", base.join("home"))
        .env("TOOLGATE_PINS_DIR", base.join("pins"))
        .env("TOOLGATE_BROKER_DIR", base.join("broker"));
    Peer::spawn(cmd, false)
}

/// Sends calls `from..from + WINDOW` (the last one asks for a 1 MB result), then reads
/// their responses (and the server's notifications), checking each.
fn round(client: &mut Peer, from: u64) {
    let mut batch = Vec::new();
    for i in from..from + WINDOW {
        let args = if i % WINDOW == WINDOW - 1 {
            json!({"n": i, "bytes": BIG})
        } else {
            json!({"n": i})
        };
        let line = json!({"jsonrpc":"2.0","id":i,"method":"tools/call",
                          "params":{"name":"echo","arguments":args}});
        batch.extend_from_slice(line.to_string().as_bytes());
        batch.push(b'\n');
    }
    client.send_raw(&batch);
    let mut next = from;
    while next < from + WINDOW {
        let line = client.recv();
        let m: Value = serde_json::from_slice(&line).unwrap();
        if m.get("method").is_some() {
            assert_eq!(m["method"], "notifications/message");
            continue;
        }
        assert_eq!(m["id"], next, "out of order or lost");
        let s = &m["result"]["structuredContent"];
        assert_eq!(s["n"], next, "{}", String::from_utf8_lossy(&line));
        if next % WINDOW == WINDOW - 1 {
            let text = m["result"]["content"][0]["text"].as_str().unwrap();
            assert!(
                text.len() as u64 > BIG - 200 && text.len() as u64 <= BIG,
                "{}",
                text.len()
            );
        }
        next += 1;
    }
}

#[test]
#[ignore = "soak: about a minute in release; CI runs it with --release -- --ignored"]
fn hundred_thousand_calls_with_1mb_results_keep_rss_flat() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = wrap_load(dir.path());
    client.send(
        r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"soak","version":"0"}}}"#,
    );
    assert_eq!(client.recv_json()["id"], "init");
    client.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    client.send(r#"{"jsonrpc":"2.0","id":"list","method":"tools/list"}"#);
    assert_eq!(client.recv_json()["id"], "list");

    let pid = client.pid();
    let started = Instant::now();
    let mut start_rss = 0;
    let mut peak_rss = 0;
    let total = calls();
    assert!(
        total >= 2 * WARM_UP && total.is_multiple_of(10_000),
        "{total}"
    );
    let mut from = 0;
    while from < total {
        round(&mut client, from);
        from += WINDOW;
        if from == WARM_UP {
            start_rss = vm_rss_kib(pid);
        }
        if from >= WARM_UP && from.is_multiple_of(10_000) {
            let rss = vm_rss_kib(pid);
            peak_rss = peak_rss.max(rss);
            eprintln!("soak: {from} calls, VmRSS {rss} KiB");
        }
    }
    let end_rss = vm_rss_kib(pid);
    let elapsed = started.elapsed();
    eprintln!(
        "soak: {total} calls ({} with 1 MiB results) in {elapsed:.1?}; VmRSS after {WARM_UP} calls: {start_rss} KiB, at the end: {end_rss} KiB, peak sampled: {peak_rss} KiB",
        total / WINDOW
    );
    client.close_stdin();
    assert!(client.recv_to_end().is_empty());
    assert!(client.wait().success());
    assert!(
        end_rss <= start_rss + MAX_GROWTH_KIB,
        "VmRSS grew from {start_rss} KiB to {end_rss} KiB (bound: +{MAX_GROWTH_KIB} KiB)"
    );
}
