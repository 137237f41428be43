//! Test kit for toolgate: fake MCP peers and fixtures. Not published.
//!
//! - [`bin_path`] finds (and if needed builds) a binary of this workspace, e.g. the
//!   `fake_upstream` server, from any package's tests.
//! - [`Peer`] drives a child process over newline-delimited stdio with bounded waits:
//!   every receive and every wait has a timeout, and the child is killed on drop.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stdout,
    missing_debug_implementations,
    reason = "test code: a broken fixture or harness step panics with a message, failing the test; reports progress and results on the terminal; test fixtures and handles, never formatted"
)]

pub mod attack;
pub mod auditlog;
pub mod gateway;
pub mod http;
pub mod jwt;
pub mod redis;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The default bound for every wait in tests.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The `target/<profile>` directory of the running test executable.
pub fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// The path of a binary built from this workspace (`target/<profile>/<name>`).
///
/// If it is missing, builds it once with `cargo build --bin <name>` (same profile), so
/// tests of one package can use another package's binaries.
pub fn bin_path(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let dir = target_profile_dir();
    let path = dir.join(name);
    let built = BUILT.get_or_init(|| Mutex::new(Vec::new()));
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == name) && !fresh(&path, name) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--quiet", "--bin", name]);
        if dir.ends_with("release") {
            cmd.arg("--release");
        }
        if let Some(target) = dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target);
        }
        cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
        let status = cmd.status().expect("run cargo build");
        assert!(
            status.success() || path.exists(),
            "cannot build binary `{name}`"
        );
        built.push(name.to_owned());
    }
    assert!(path.exists(), "binary `{}` not found", path.display());
    path
}

/// True if `path` exists and is newer than this kit's sources (its own `src/bin/<name>.rs`
/// and `src/lib.rs`): then no `cargo build` is needed (it would only wait for the lock).
fn fresh(path: &Path, name: &str) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(built) = modified(path) else {
        return false;
    };
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let own = src.join("bin").join(format!("{name}.rs"));
    if !own.exists() {
        // Not one of the kit's binaries: always ask cargo.
        return false;
    }
    [own, src.join("lib.rs"), src.join("../Cargo.toml")]
        .iter()
        .all(|p| modified(p).is_some_and(|m| m <= built))
}

/// The `fake_upstream` test server.
pub fn fake_upstream() -> PathBuf {
    bin_path("fake_upstream")
}

/// A child process driven over newline-delimited stdio, with bounded waits.
pub struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    stderr: Option<Receiver<Vec<u8>>>,
}

impl Peer {
    /// Spawns `cmd` with piped stdin/stdout; stderr is captured if `capture_stderr`,
    /// else inherited.
    pub fn spawn(mut cmd: Command, capture_stderr: bool) -> Peer {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        cmd.stderr(if capture_stderr {
            Stdio::piped()
        } else {
            Stdio::inherit()
        });
        let mut child = cmd.spawn().expect("spawn peer");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let stderr = child.stderr.take().map(|err| {
            let (tx, rx) = channel();
            std::thread::spawn(move || {
                let mut all = Vec::new();
                let _ = std::io::Read::read_to_end(&mut BufReader::new(err), &mut all);
                let _ = tx.send(all);
            });
            rx
        });
        let stdin = child.stdin.take();
        Peer {
            child,
            stdin,
            lines,
            stderr,
        }
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes `bytes` exactly (no newline added).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin already closed");
        stdin.write_all(bytes).expect("write to peer");
        stdin.flush().expect("flush peer");
    }

    /// Writes one line (a newline is added).
    pub fn send(&mut self, line: impl AsRef<[u8]>) {
        let mut bytes = line.as_ref().to_vec();
        bytes.push(b'\n');
        self.send_raw(&bytes);
    }

    /// Writes one line (a newline is added) if the child still reads: `false` when it has
    /// closed its end already (a peer that may have exited).
    pub fn try_send(&mut self, line: impl AsRef<[u8]>) -> bool {
        let Some(stdin) = self.stdin.as_mut() else {
            return false;
        };
        let mut bytes = line.as_ref().to_vec();
        bytes.push(b'\n');
        match stdin.write_all(&bytes).and_then(|()| stdin.flush()) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => false,
            Err(e) => panic!("write to peer: {e}"),
        }
    }

    /// Closes the child's stdin.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next stdout line (newline stripped), or panics after `TIMEOUT`.
    pub fn recv(&self) -> Vec<u8> {
        self.recv_within(TIMEOUT)
            .unwrap_or_else(|| panic!("no line from peer within {TIMEOUT:?}"))
    }

    /// The next stdout line as a string.
    pub fn recv_str(&self) -> String {
        String::from_utf8(self.recv()).expect("utf-8 line")
    }

    /// The next stdout line parsed as JSON.
    pub fn recv_json(&self) -> serde_json::Value {
        let line = self.recv();
        serde_json::from_slice(&line)
            .unwrap_or_else(|e| panic!("not json ({e}): {}", String::from_utf8_lossy(&line)))
    }

    /// The next stdout line within `limit`, or `None` (also at end of output).
    pub fn recv_within(&self, limit: Duration) -> Option<Vec<u8>> {
        match self.lines.recv_timeout(limit) {
            Ok(mut line) => {
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                Some(line)
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Waits until stdout is closed, returning every remaining line; panics after `TIMEOUT`.
    pub fn recv_to_end(&self) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + TIMEOUT;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(mut line) => {
                    if line.last() == Some(&b'\n') {
                        line.pop();
                    }
                    out.push(line);
                }
                Err(RecvTimeoutError::Disconnected) => return out,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("peer stdout still open after {TIMEOUT:?}")
                }
            }
        }
    }

    /// Waits for the child to exit within `limit`; kills it and panics otherwise.
    pub fn wait_within(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("peer did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for the child to exit within `TIMEOUT`.
    pub fn wait(&mut self) -> ExitStatus {
        self.wait_within(TIMEOUT)
    }

    /// Everything the child wrote to stderr (after it exited). Requires `capture_stderr`.
    pub fn stderr(&mut self) -> String {
        let rx = self.stderr.take().expect("stderr not captured");
        let bytes = rx.recv_timeout(TIMEOUT).expect("stderr not closed in time");
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Reads a record file written by `fake_upstream --record`, one entry per line.
pub fn read_record(path: &Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap_or_default();
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// Polls `cond` every few milliseconds until it holds or `limit` passes.
///
/// For state observable only from outside (a file appearing, a process gone), never as a
/// substitute for a protocol reply.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
