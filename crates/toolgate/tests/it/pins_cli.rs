//! `toolgate pins list|forget` through the real binary, on pin files in a temp dir.

use std::path::Path;

use assert_cmd::Command;
use serde_json::{Value, json};

fn toolgate(pins_dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("toolgate").unwrap();
    cmd.env("TOOLGATE_PINS_DIR", pins_dir);
    cmd
}

/// Writes a pin file in the store's format.
fn write_pins(dir: &Path, server: &str, tools: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    let tools: serde_json::Map<String, Value> = tools
        .iter()
        .map(|(name, fp)| {
            (
                (*name).to_owned(),
                json!({
                    "fingerprint": fp,
                    "definition": {"name": name, "description": "d", "inputSchema": {"type": "object"}},
                    "pinned_at": "2026-11-29T12:00:00.000Z",
                }),
            )
        })
        .collect();
    let file = json!({"version": 1, "server": server, "tools": tools});
    std::fs::write(dir.join(format!("{server}.json")), file.to_string()).unwrap();
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

#[test]
fn list_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let out = toolgate(dir.path())
        .args(["pins", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        stdout(&out).starts_with("no pinned tools in `"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn list_all_one_server_and_json() {
    let dir = tempfile::tempdir().unwrap();
    write_pins(
        dir.path(),
        "fs",
        &[
            ("read_file", &"a".repeat(64)),
            ("write_file", &"b".repeat(64)),
        ],
    );
    write_pins(dir.path(), "mail", &[("send_email", &"c".repeat(64))]);

    let out = toolgate(dir.path())
        .args(["pins", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        vec![
            "fs    read_file   aaaaaaaaaaaaaaaa  2026-11-29T12:00:00.000Z",
            "fs    write_file  bbbbbbbbbbbbbbbb  2026-11-29T12:00:00.000Z",
            "mail  send_email  cccccccccccccccc  2026-11-29T12:00:00.000Z",
        ]
    );

    let out = toolgate(dir.path())
        .args(["pins", "list", "--server", "mail"])
        .output()
        .unwrap();
    assert_eq!(stdout(&out).lines().count(), 1);
    assert!(stdout(&out).starts_with("mail  send_email"));

    let out = toolgate(dir.path())
        .args(["pins", "list", "--json", "--server", "fs"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools = v["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0]["server"], "fs");
    assert_eq!(tools[0]["tool"], "read_file");
    assert_eq!(tools[0]["fingerprint"], "a".repeat(64));
    assert_eq!(tools[0]["definition"]["name"], "read_file");

    let out = toolgate(dir.path())
        .args(["pins", "list", "--server", "nobody"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "no pinned tools for server `nobody`\n");
}

#[test]
fn forget_one_tool_then_the_server() {
    let dir = tempfile::tempdir().unwrap();
    write_pins(
        dir.path(),
        "fs",
        &[("read_file", "f1"), ("write_file", "f2")],
    );

    let out = toolgate(dir.path())
        .args(["pins", "forget", "--server", "fs", "--tool", "write_file"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout(&out).starts_with("forgot the pin of tool `write_file` of server `fs`"));
    let file: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("fs.json")).unwrap()).unwrap();
    assert_eq!(file["tools"].as_object().unwrap().len(), 1);
    assert!(file["tools"]["read_file"].is_object());

    let out = toolgate(dir.path())
        .args(["pins", "forget", "--server", "fs", "--tool", "write_file"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "toolgate: no pin for tool `write_file` of server `fs`\n"
    );

    let out = toolgate(dir.path())
        .args(["pins", "forget", "--server", "fs"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).starts_with("forgot 1 pinned tool of server `fs`"),
        "{}",
        stdout(&out)
    );
    assert!(!dir.path().join("fs.json").exists());

    let out = toolgate(dir.path())
        .args(["pins", "forget", "--server", "fs"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), "toolgate: no pins for server `fs`\n");
}

#[test]
fn forget_requires_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let out = toolgate(dir.path())
        .args(["pins", "forget"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--server <NAME>"), "{}", stderr(&out));
}

#[test]
fn damaged_pin_file_is_reported_and_others_still_listed() {
    let dir = tempfile::tempdir().unwrap();
    write_pins(dir.path(), "fs", &[("read_file", "f1")]);
    std::fs::write(dir.path().join("bad.json"), "{oops").unwrap();
    let out = toolgate(dir.path())
        .args(["pins", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).starts_with("fs  read_file"),
        "{}",
        stdout(&out)
    );
    assert!(stderr(&out).contains("pin file `"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("bad.json` is damaged"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("toolgate pins forget --server bad"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn default_dir_follows_xdg_data_home_then_home() {
    let xdg = tempfile::tempdir().unwrap();
    write_pins(
        &xdg.path().join("toolgate/pins"),
        "fs",
        &[("read_file", "f1")],
    );
    let out = Command::cargo_bin("toolgate")
        .unwrap()
        .env_remove("TOOLGATE_PINS_DIR")
        .env("XDG_DATA_HOME", xdg.path())
        .args(["pins", "list"])
        .output()
        .unwrap();
    assert!(stdout(&out).starts_with("fs  read_file"), "{out:?}");

    let home = tempfile::tempdir().unwrap();
    write_pins(
        &home.path().join(".local/share/toolgate/pins"),
        "h",
        &[("t", "f")],
    );
    let out = Command::cargo_bin("toolgate")
        .unwrap()
        .env_remove("TOOLGATE_PINS_DIR")
        .env_remove("XDG_DATA_HOME")
        .env("HOME", home.path())
        .args(["pins", "list"])
        .output()
        .unwrap();
    assert!(stdout(&out).starts_with("h  t"), "{out:?}");
}
