//! `toolgate init` with a real terminal on stdin (a pseudo-terminal): the
//! `apply these changes? [y/N]` prompt, and the refusal to overwrite a file that
//! changed while the user was reading the diff.

use std::fs;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};

const TIMEOUT: Duration = Duration::from_secs(60);
const PROMPT: &str = "apply these changes? [y/N] ";

const CONFIG: &str = r#"{
  "mcpServers": {
    "memory": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-memory"]
    }
  }
}
"#;

struct Session {
    child: Child,
    /// The terminal's master side: what the user types goes here.
    master: fs::File,
    /// Chunks of the child's stdout; `None` at end of file.
    output: mpsc::Receiver<Option<String>>,
    seen: String,
    stderr: std::process::ChildStderr,
}

impl Session {
    /// Runs `toolgate init --config <config>` with a pseudo-terminal as stdin.
    fn start(config: &Path) -> Session {
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let slave = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(name.to_str().unwrap())
            .unwrap();
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("toolgate"))
            .args(["init", "--config", config.to_str().unwrap()])
            .args(["--workspace", config.parent().unwrap().to_str().unwrap()])
            .stdin(Stdio::from(slave))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => {
                        let _ = tx.send(None);
                        return;
                    }
                    Ok(n) => {
                        let _ = tx.send(Some(String::from_utf8_lossy(&buf[..n]).into_owned()));
                    }
                }
            }
        });
        Session {
            child,
            master: fs::File::from(master),
            output: rx,
            seen: String::new(),
            stderr,
        }
    }

    /// Waits until stdout shows `text`.
    fn expect(&mut self, text: &str) {
        while !self.seen.contains(text) {
            match self.output.recv_timeout(TIMEOUT) {
                Ok(Some(chunk)) => self.seen.push_str(&chunk),
                Ok(None) => panic!("stdout ended before {text:?}:\n{}", self.seen),
                Err(e) => panic!("no {text:?} within {TIMEOUT:?} ({e}):\n{}", self.seen),
            }
        }
    }

    fn answer(&mut self, line: &str) {
        self.master.write_all(line.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }

    /// Waits for stdout to close, then for the exit status; returns (code, stdout, stderr).
    fn finish(mut self) -> (i32, String, String) {
        loop {
            match self.output.recv_timeout(TIMEOUT) {
                Ok(Some(chunk)) => self.seen.push_str(&chunk),
                Ok(None) => break,
                Err(e) => {
                    let _ = self.child.kill();
                    panic!(
                        "toolgate did not finish within {TIMEOUT:?} ({e}):\n{}",
                        self.seen
                    );
                }
            }
        }
        let status = self.child.wait().unwrap();
        let mut stderr = String::new();
        self.stderr.read_to_string(&mut stderr).unwrap();
        (status.code().unwrap_or(-1), self.seen, stderr)
    }
}

fn config_file() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("claude_desktop_config.json");
    fs::write(&path, CONFIG).unwrap();
    (dir, path)
}

fn backup(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.toolgate.bak", path.display()))
}

#[test]
fn yes_at_the_prompt_applies() {
    let (_dir, config) = config_file();
    let mut session = Session::start(&config);
    session.expect(PROMPT);
    assert!(session.seen.contains("+      \"x-toolgate-upstream\""));
    session.answer("y\n");
    let (code, stdout, stderr) = session.finish();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        fs::read_to_string(&config)
            .unwrap()
            .contains("\"wrap\", \"--server\", \"memory\"")
    );
    assert_eq!(fs::read_to_string(backup(&config)).unwrap(), CONFIG);
}

#[test]
fn anything_but_yes_changes_nothing() {
    let (_dir, config) = config_file();
    let mut session = Session::start(&config);
    session.expect(PROMPT);
    session.answer("\n");
    let (code, stdout, _) = session.finish();
    assert_eq!(code, 1);
    assert!(stdout.contains("nothing was changed"), "{stdout}");
    assert_eq!(fs::read_to_string(&config).unwrap(), CONFIG);
    assert!(!backup(&config).exists());
}

#[test]
fn a_file_changed_during_the_prompt_is_not_overwritten() {
    let (_dir, config) = config_file();
    let mut session = Session::start(&config);
    session.expect(PROMPT);
    // The client rewrites its config while the user reads the diff.
    let theirs = CONFIG.replace("server-memory", "server-memory@2");
    fs::write(&config, &theirs).unwrap();
    session.answer("y\n");
    let (code, _, stderr) = session.finish();
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("changed since it was read"), "{stderr}");
    assert_eq!(fs::read_to_string(&config).unwrap(), theirs);
    assert!(!backup(&config).exists());
}
