//! Test kit for toolgate: fake MCP peers and fixtures. Not published.
//!
//! - [`bin_path`] finds one of this kit's binaries (built by cargo with the workspace), e.g.
//!   the `fake_upstream` server, from any package's tests.
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

/// The path of one of this kit's own binaries (`target/<profile>/<name>`), e.g. the
/// `fake_upstream` server, from any package's tests.
///
/// Cargo builds them with the workspace (`scripts/test` builds every target first, and
/// `cargo nextest run --workspace` builds them for this kit's own tests); a test never runs
/// cargo itself, and never guesses from modification times whether a binary is current. The
/// `toolgate` and `toolgate-hook` binaries are not found here: toolgate's tests name them
/// with `env!("CARGO_BIN_EXE_toolgate")`, which cargo builds for those tests.
pub fn bin_path(name: &str) -> PathBuf {
    assert!(
        !name.starts_with("toolgate"),
        "`{name}` is toolgate's binary: use env!(\"CARGO_BIN_EXE_{name}\") in toolgate's tests"
    );
    let path = target_profile_dir().join(name);
    assert!(
        path.is_file(),
        "the test kit's binary `{}` is not built\n\
         help: run `cargo build -p toolgate-testkit --bins` (add `--release` for a release \
         test run), or run the tests with `--workspace` or with scripts/test, which build it",
        path.display()
    );
    path
}

/// A binary of this workspace beside the running executable (`target/<profile>/<name>`),
/// for the benchmark tools: they measure the `toolgate` that cargo built, and never build it.
pub fn built_binary(name: &str) -> PathBuf {
    let path = target_profile_dir().join(name);
    assert!(
        path.is_file(),
        "`{}` is not built\nhelp: build it first, e.g. `cargo build --release -p toolgate`, or \
         name the binary to measure",
        path.display()
    );
    path
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

/// The TCP ports that process `pid` listens on (Linux: its socket descriptors in
/// `/proc/<pid>/fd` matched against the listening sockets of `/proc/<pid>/net/tcp{,6}`).
///
/// For a child told to listen on port 0 that does not print the port the kernel gave it:
/// no port is picked beforehand, so none can be taken by another process in between.
pub fn listening_ports(pid: u32) -> Vec<u16> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let inodes: std::collections::HashSet<String> = fds
        .filter_map(Result::ok)
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| {
            let target = target.to_str()?;
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_owned(),
            )
        })
        .collect();
    let mut ports = Vec::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(&"0A"), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            if inodes.contains(*inode)
                && let Some(port) = local
                    .rsplit(':')
                    .next()
                    .and_then(|hex| u16::from_str_radix(hex, 16).ok())
            {
                ports.push(port);
            }
        }
    }
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// Waits (bounded by `limit`) until process `pid` listens on a TCP port, and returns it;
/// panics naming `what` if it does not.
pub fn wait_for_listening_port(pid: u32, limit: Duration, what: &str) -> u16 {
    let mut port = None;
    let listening = wait_until(limit, || {
        port = listening_ports(pid).first().copied();
        port.is_some()
    });
    match port {
        Some(port) if listening => port,
        _ => panic!("{what} (pid {pid}) did not listen on a TCP port within {limit:?}"),
    }
}

/// A loopback TCP port on which nothing listens (a connection to it is refused), held for as
/// long as this lives so that no other process can start listening on it meanwhile.
///
/// It is the local end of a connection this kit makes to itself: the port is bound, but by
/// an established socket, which a new connection never reaches.
pub struct ClosedPort {
    /// The port.
    pub port: u16,
    _connection: (std::net::TcpStream, std::net::TcpStream),
}

impl ClosedPort {
    /// Reserves one.
    pub fn new() -> ClosedPort {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let near = std::net::TcpStream::connect(listener.local_addr().expect("local_addr"))
            .expect("connect to our own listener");
        let (far, _) = listener.accept().expect("accept our own connection");
        ClosedPort {
            port: near.local_addr().expect("local_addr").port(),
            _connection: (near, far),
        }
    }
}

impl Default for ClosedPort {
    fn default() -> ClosedPort {
        ClosedPort::new()
    }
}
