//! The filesystem pack against the real `@modelcontextprotocol/server-filesystem` (the
//! version pinned in the repository's `tests/package.json`, installed into
//! `tests/node_modules` by `scripts/test`). Skips with a printed reason when node or the
//! package is missing, but fails when `CI=true`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::print_stderr,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; prints what it ran for the person reading the test output"
)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_policy::Operation;
use toolgate_policy::contracts::packs::load_pack;

const TIMEOUT: Duration = Duration::from_secs(60);

fn package_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/node_modules/@modelcontextprotocol/server-filesystem")
}

fn skip_or_fail(reason: &str) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{reason} (CI=true: the real server must be tested)");
    }
    eprintln!("skipped: {reason} (the live filesystem pack test; run scripts/test to install it)");
}

/// The server's tools/list, from a real process speaking newline-delimited JSON-RPC.
fn tools_list(entry: &PathBuf, root: &std::path::Path) -> Vec<Value> {
    let mut child = Command::new("node")
        .arg(entry)
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn node");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && tx.send(v).is_err()
            {
                break;
            }
        }
    });
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "toolgate-pack-test", "version": "0"}}}),
    );
    let wait_for = |id: i64| loop {
        let msg = rx.recv_timeout(TIMEOUT).expect("server answered in time");
        if msg["id"] == id {
            break msg;
        }
    };
    wait_for(1);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = wait_for(2);
    let _ = child.kill();
    let _ = child.wait();
    list["result"]["tools"]
        .as_array()
        .cloned()
        .expect("tools/list result")
}

#[test]
fn filesystem_pack_matches_the_real_server() {
    let dir = package_dir();
    let entry = dir.join("dist/index.js");
    if !entry.exists() {
        return skip_or_fail(&format!("no {}", entry.display()));
    }
    if Command::new("node").arg("--version").output().is_err() {
        return skip_or_fail("no node");
    }
    let pkg: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).unwrap()).unwrap();
    let version = pkg["version"].as_str().unwrap();
    assert_eq!(
        version, "2026.8.31",
        "the recorded server version; update the pack's `servers:` and this line together"
    );

    let root = tempfile::tempdir().unwrap();
    let tools = tools_list(&entry, root.path());
    assert!(tools.len() >= 10, "{tools:?}");
    let pack = load_pack("filesystem").unwrap();
    assert!(
        pack.servers
            .iter()
            .any(|s| s.ends_with(&format!("@{version}"))),
        "{:?}",
        pack.servers
    );

    for t in &tools {
        let name = t["name"].as_str().unwrap();
        assert!(
            pack.tools.contains_key(name) || pack.uncovered.iter().any(|u| u == name),
            "server tool `{name}` has no entry in the filesystem pack and is not listed as uncovered"
        );
    }
    for (tool, c) in &pack.tools {
        let def = tools
            .iter()
            .find(|t| t["name"] == tool.as_str())
            .unwrap_or_else(|| panic!("pack tool `{tool}` does not exist in the server"));
        let props = def["inputSchema"]["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let mut declared: Vec<String> = c.path_params.clone().unwrap_or_default();
        declared.extend(c.sink_params.clone().unwrap_or_default());
        declared.extend(c.param_operations.iter().flat_map(|m| m.keys().cloned()));
        for p in declared {
            assert!(props.contains_key(&p), "`{tool}` has no argument `{p}`");
        }
        // The pack's operation agrees with the server's own hints.
        let read_only = def["annotations"]["readOnlyHint"].as_bool();
        match c.operation {
            Some(Operation::FsRead) => assert_eq!(read_only, Some(true), "{tool}"),
            Some(Operation::FsWrite | Operation::FsDelete) => {
                assert_eq!(read_only, Some(false), "{tool}")
            }
            _ => {}
        }
    }
}
