//! A real `redis-server` for tests: on a free loopback port, in a temporary directory, without
//! persistence; killed on drop. [`RedisServer::stop`] and [`RedisServer::restart`] (same
//! port) play "Redis went away, then came back".

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running (or stopped) `redis-server` owned by a test.
pub struct RedisServer {
    binary: PathBuf,
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl std::fmt::Debug for RedisServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisServer")
            .field("port", &self.port)
            .finish()
    }
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// True when a RESP `PING` on the port gets `+PONG` within `limit`.
fn answers_ping(port: u16, limit: Duration) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, limit) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(limit));
    let _ = stream.set_write_timeout(Some(limit));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut line = String::new();
    let _ = BufReader::new(stream.take(64)).read_line(&mut line);
    line.starts_with("+PONG")
}

impl RedisServer {
    /// Starts a `redis-server` on a free loopback port and waits (bounded) until it answers
    /// `PING`.
    ///
    /// Returns `None` (after printing why) when `redis-server` is not installed, except with
    /// `CI=true`, where that panics: the Redis tests must run in CI (`scripts/test` installs
    /// the Debian package `redis-server`).
    pub fn start() -> Option<RedisServer> {
        let Some(binary) = find_on_path("redis-server") else {
            assert!(
                !in_ci(),
                "`redis-server` is not on PATH but CI=true: the Redis tests must run in CI\n\
                 help: install the Debian package `redis-server` (scripts/test does), then re-run"
            );
            eprintln!(
                "SKIPPED: `redis-server` is not installed, so the Redis tests cannot run \
                 (apt-get install redis-server, or run scripts/test with CI=true)"
            );
            return None;
        };
        // The port was free when picked; another process may take it before redis-server
        // binds it, so try a few.
        let mut last_error = String::new();
        for _ in 0..5 {
            let mut server = RedisServer {
                binary: binary.clone(),
                port: free_port(),
                dir: tempfile::tempdir().expect("a temporary directory for redis-server"),
                child: None,
            };
            match server.spawn() {
                Ok(()) => return Some(server),
                Err(e) => last_error = e,
            }
        }
        panic!("redis-server did not start: {last_error}");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let log = self.dir.path().join("redis.log");
        let mut child = Command::new(&self.binary)
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--dir", &self.dir.path().to_string_lossy()])
            .args(["--logfile", &log.to_string_lossy()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.binary.display()))?;
        let deadline = Instant::now() + crate::TIMEOUT;
        loop {
            if answers_ping(self.port, Duration::from_millis(500)) {
                self.child = Some(child);
                return Ok(());
            }
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("it exited ({status}) on port {}: {log}", self.port));
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "it did not answer PING on port {} within {:?}",
                    self.port,
                    crate::TIMEOUT
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server (its data is gone: no persistence) and waits until it has exited.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers, as when Redis
    /// hangs or the network drops packets. [`RedisServer::resume`] thaws it.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("redis-server runs");
        let status = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} redis-server");
    }

    /// Starts it again on the same port (empty), after stopping it if it runs.
    pub fn restart(&mut self) {
        self.stop();
        // The port was ours a moment ago; retry briefly if the kernel has not released it.
        let deadline = Instant::now() + crate::TIMEOUT;
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(e) if Instant::now() >= deadline => panic!("redis-server did not restart: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Runs one command with `redis-cli` against this server and returns its output
    /// (for tests that write garbage or read TTLs).
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli runs (it comes with redis-server)");
        assert!(
            out.status.success(),
            "redis-cli {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // A paused server would not die of SIGKILL any later, but thaw it all the same.
        if self.child.is_some() {
            self.resume();
        }
        self.stop();
    }
}
