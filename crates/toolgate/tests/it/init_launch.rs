//! The entry `toolgate init` writes is one a client can launch: running its
//! `command` and `args` (with its `env` and `cwd`, as a client does) starts
//! `toolgate wrap` in front of the original server, which answers through it.

use std::fs;
use std::process::Command;

use toolgate_testkit::{Peer, fake_upstream};

#[test]
fn a_wrapped_entry_launches_the_original_server_through_toolgate() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir(&work).unwrap();
    let record = dir.path().join("record.jsonl");
    let config = dir.path().join("mcp.json");
    let original = serde_json::json!({
        "mcpServers": {
            "fake": {
                "command": fake_upstream(),
                "args": ["--record", record],
                "env": {"FAKE_TOKEN": "t"},
                "cwd": work,
            }
        }
    });
    fs::write(&config, serde_json::to_string_pretty(&original).unwrap()).unwrap();

    assert_cmd::Command::cargo_bin("toolgate")
        .unwrap()
        .args(["init", "--config", config.to_str().unwrap(), "--yes"])
        .args(["--workspace", work.to_str().unwrap()])
        .write_stdin("")
        .timeout(toolgate_testkit::TIMEOUT)
        .assert()
        .success();

    let wrapped: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&config).unwrap()).unwrap();
    let entry = &wrapped["mcpServers"]["fake"];
    let args: Vec<&str> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let work_real = work.canonicalize().unwrap();
    assert_eq!(
        &args[..6],
        [
            "wrap",
            "--server",
            "fake",
            "--workspace",
            work_real.to_str().unwrap(),
            "--"
        ]
    );

    let mut cmd = Command::new(entry["command"].as_str().unwrap());
    cmd.args(&args)
        .current_dir(entry["cwd"].as_str().unwrap())
        .env("FAKE_TOKEN", entry["env"]["FAKE_TOKEN"].as_str().unwrap());
    let mut peer = Peer::spawn(cmd, true);
    peer.send(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
    );
    let reply = peer.recv_json();
    assert_eq!(reply["id"], 1, "{reply}");
    assert_eq!(reply["result"]["method"], "initialize", "{reply}");
    peer.close_stdin();
    peer.wait();
    // The original server really ran (it recorded what it received).
    let seen = fs::read_to_string(&record).unwrap();
    assert!(seen.contains("\"initialize\""), "{seen}");
}
