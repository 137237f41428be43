//! Codex runs a hook only once the user trusted its exact definition (Codex 0.169.0: a
//! `trusted_hash` per hook under `[hooks.state."<key>"]` in `~/.codex/config.toml`, which
//! Codex's `/hooks` review writes). toolgate establishes that trust the way Codex's own
//! review does, through Codex's app server (`codex app-server`, JSON-RPC over stdio):
//! `hooks/list` gives each hook's key, `currentHash` and `trustStatus`, and
//! `config/batchWrite` records the hash Codex computed. toolgate never computes a hash
//! itself, and trusts only the hooks whose command is toolgate's.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// One hook as Codex lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexHook {
    /// Codex's key for it (`<file>:<event>:<group>:<handler>`).
    pub key: String,
    /// Its command line.
    pub command: String,
    /// `trusted`, `untrusted`, `modified` or `managed`.
    pub trust: String,
    /// The hash Codex computed of its definition.
    pub hash: String,
}

/// How long a conversation with the app server may take.
const LIMIT: Duration = Duration::from_secs(30);

/// The `codex` executable on `PATH`, if any.
pub fn find_codex() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("codex"))
        .find(|p| p.is_file())
}

/// A running `codex app-server`, initialised.
struct AppServer {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next_id: u64,
    deadline: Instant,
}

impl AppServer {
    fn start(codex: &Path, cwd: &Path) -> Result<AppServer, String> {
        let mut child = Command::new(codex)
            .arg("app-server")
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start `{} app-server` ({e})", codex.display()))?;
        let (stdin, stdout) = match (child.stdin.take(), child.stdout.take()) {
            (Some(i), Some(o)) => (i, o),
            _ => return Err("the app server has no stdio".to_owned()),
        };
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = AppServer {
            child,
            stdin,
            lines,
            next_id: 1,
            deadline: Instant::now() + LIMIT,
        };
        server.call(
            "initialize",
            json!({"clientInfo": {"name": "toolgate", "version": env!("CARGO_PKG_VERSION")}}),
        )?;
        server.send(&json!({"method": "initialized"}))?;
        Ok(server)
    }

    fn send(&mut self, message: &Value) -> Result<(), String> {
        writeln!(self.stdin, "{message}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("cannot write to the app server ({e})"))
    }

    /// Sends a request and waits for its answer (notifications in between are skipped).
    fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"id": id, "method": method, "params": params}))?;
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "the app server did not answer `{method}` within {} s",
                        LIMIT.as_secs()
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("the app server exited before answering `{method}`"));
                }
            };
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Err(format!("`{method}` failed: {error}"));
            }
            return Ok(message.get("result").cloned().unwrap_or(Value::Null));
        }
    }

    fn hooks(&mut self, cwd: &Path) -> Result<Vec<CodexHook>, String> {
        let result = self.call("hooks/list", json!({"cwds": [cwd]}))?;
        let text = |h: &Value, k: &str| h.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        Ok(result
            .get("data")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.get("hooks").and_then(Value::as_array))
            .flatten()
            .map(|h| CodexHook {
                key: text(h, "key"),
                command: text(h, "command"),
                trust: text(h, "trustStatus"),
                hash: text(h, "currentHash"),
            })
            .collect())
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The hooks Codex runs for `cwd`, as its app server lists them.
pub fn list(codex: &Path, cwd: &Path) -> Result<Vec<CodexHook>, String> {
    AppServer::start(codex, cwd)?.hooks(cwd)
}

/// Trusts the hooks for `cwd` that `ours` accepts and Codex does not trust yet; returns
/// how many, after checking with Codex that each is now trusted.
pub fn trust(codex: &Path, cwd: &Path, ours: impl Fn(&str) -> bool) -> Result<usize, String> {
    let mut server = AppServer::start(codex, cwd)?;
    let pending: Vec<CodexHook> = server
        .hooks(cwd)?
        .into_iter()
        .filter(|h| ours(&h.command) && matches!(h.trust.as_str(), "untrusted" | "modified"))
        .collect();
    if pending.is_empty() {
        return Ok(0);
    }
    let edits: Vec<Value> = pending
        .iter()
        .map(|h| {
            // A TOML key path: the hook's key quoted, as Codex's own review writes it.
            let key = serde_json::to_string(&h.key).unwrap_or_default();
            json!({"keyPath": format!("hooks.state.{key}.trusted_hash"),
                "mergeStrategy": "upsert", "value": h.hash})
        })
        .collect();
    server.call("config/batchWrite", json!({"edits": edits}))?;
    let now = server.hooks(cwd)?;
    for h in &pending {
        if !now.iter().any(|n| n.key == h.key && n.trust == "trusted") {
            return Err(format!(
                "Codex still does not trust the hook `{}` after toolgate recorded it",
                h.key
            ));
        }
    }
    Ok(pending.len())
}
