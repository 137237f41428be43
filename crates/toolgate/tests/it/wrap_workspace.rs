//! `toolgate wrap` warns when its workspace is the home directory, one above it or `/`: the
//! policy's `${workspace}` would then cover the user's dotfiles and credentials (`init` never
//! writes such a workspace, `doctor` fails on one; a hand-written config gets this warning).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Runs `toolgate wrap --workspace WORKSPACE -- true` with `home` as `HOME`, its stdin
/// closed, and waits for it (bounded).
fn wrap(home: &Path, workspace: &Path) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("wrap")
        .arg("--workspace")
        .arg(workspace)
        .arg("--audit")
        .arg(home.join("audit.jsonl"))
        .args(["--approval", "none", "--", "true"])
        .env("HOME", home)
        .env("TOOLGATE_BROKER_DIR", home.join("broker"))
        .env("TOOLGATE_PINS_DIR", home.join("pins"))
        .env_remove("TOOLGATE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("toolgate wrap did not exit within 30 s")
        .unwrap()
}

#[test]
fn a_workspace_that_is_or_holds_the_home_directory_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let home = base.join("home");
    let project = home.join("project");
    std::fs::create_dir_all(&project).unwrap();
    for (workspace, warned) in [
        (home.as_path(), Some("is your home directory")),
        (base.as_path(), Some("holds your home directory")),
        (Path::new("/"), Some("is the root directory")),
        (project.as_path(), None),
    ] {
        let out = wrap(&home, workspace);
        let stderr = String::from_utf8_lossy(&out.stderr);
        match warned {
            Some(words) => assert!(
                stderr.contains(words) && stderr.contains("help: pass `--workspace`"),
                "{}: {stderr}",
                workspace.display()
            ),
            None => assert!(
                !stderr.contains("home directory") && !stderr.contains("root directory"),
                "{}: {stderr}",
                workspace.display()
            ),
        }
        assert!(out.stdout.is_empty(), "stdout carries only protocol frames");
    }
}
