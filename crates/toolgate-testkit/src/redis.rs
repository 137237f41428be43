//! A real `redis-server` for tests, in a temporary directory, without persistence; killed on
//! drop. It listens on a unix socket in that directory ([`RedisServer::start`]), so there is
//! no port to pick and lose to another process; [`RedisServer::start_tcp`] adds a loopback
//! port for the tests that are about TCP. [`RedisServer::stop`] and [`RedisServer::restart`]
//! (same address) play "Redis went away, then came back".

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running (or stopped) `redis-server` owned by a test.
pub struct RedisServer {
    binary: PathBuf,
    /// The loopback port, for a server started with [`RedisServer::start_tcp`].
    port: Option<u16>,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl std::fmt::Debug for RedisServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisServer")
            .field("socket", &self.socket())
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

/// True when a RESP `PING` on the unix socket gets `+PONG` within `limit`.
fn answers_ping(socket: &Path, limit: Duration) -> bool {
    let Ok(mut stream) = UnixStream::connect(socket) else {
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

/// The message printed (to stderr, which nextest shows) when a Redis test does not run.
pub const SKIPPED: &str = "skipped: no redis-server";

impl RedisServer {
    /// Starts a `redis-server` on a unix socket in a fresh temporary directory and waits
    /// (bounded) until it answers `PING`.
    ///
    /// Returns `None` (after printing [`SKIPPED`] to stderr) when `redis-server` is not
    /// installed, except with `CI=true`, where that panics: the Redis tests must run in CI
    /// (`scripts/test` installs the Debian package `redis-server`).
    pub fn start() -> Option<RedisServer> {
        let binary = Self::binary()?;
        let mut server = RedisServer {
            binary,
            port: None,
            dir: tempfile::tempdir().expect("a temporary directory for redis-server"),
            child: None,
        };
        if let Err(e) = server.spawn() {
            panic!("redis-server did not start: {e}");
        }
        Some(server)
    }

    /// Like [`RedisServer::start`], and also listening on a loopback TCP port, for the tests
    /// that need a `redis://host:port` URL (the `store: url:` of `toolgate gateway`, which takes
    /// no unix socket; a password in it; TLS; a port that goes away).
    ///
    /// redis-server cannot pick its own TCP port (`--port 0` means "no TCP"), so a port that
    /// was free a moment ago is offered; if another process took it, redis-server exits
    /// (it cannot bind), which is seen, and another port is tried. It is never mistaken for
    /// another server on that port: readiness is its `PING` answer on its own unix socket,
    /// which comes only after it bound every listener.
    pub fn start_tcp() -> Option<RedisServer> {
        let binary = Self::binary()?;
        let mut last_error = String::new();
        for _ in 0..5 {
            let offered = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free loopback port");
            let mut server = RedisServer {
                binary: binary.clone(),
                port: Some(offered),
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

    fn binary() -> Option<PathBuf> {
        let binary = find_on_path("redis-server");
        if binary.is_none() {
            assert!(
                !in_ci(),
                "`redis-server` is not on PATH but CI=true: the Redis tests must run in CI\n\
                 help: install the Debian package `redis-server` (scripts/test does), then re-run"
            );
            eprintln!(
                "{SKIPPED} (the Redis tests need it: apt-get install redis-server, or run \
                 scripts/test with CI=true)"
            );
        }
        binary
    }

    /// The unix socket it listens on.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("redis.sock")
    }

    fn spawn(&mut self) -> Result<(), String> {
        let log = self.dir.path().join("redis.log");
        let socket = self.socket();
        let port = self.port.map_or_else(|| "0".to_owned(), |p| p.to_string());
        let mut child = Command::new(&self.binary)
            .args(["--port", &port])
            .args(["--bind", "127.0.0.1"])
            .args(["--unixsocket", &socket.to_string_lossy()])
            .args(["--unixsocketperm", "700"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--dir", &self.dir.path().to_string_lossy()])
            .args(["--logfile", &log.to_string_lossy()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.binary.display()))?;
        // A bounded wait for its first PONG (it answers only once every listener is bound),
        // or for its exit.
        let deadline = Instant::now() + crate::TIMEOUT;
        loop {
            if answers_ping(&socket, Duration::from_millis(500)) {
                self.child = Some(child);
                return Ok(());
            }
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("it exited ({status}) on {}: {log}", self.address()));
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "it did not answer PING on {} within {:?}",
                    socket.display(),
                    crate::TIMEOUT
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn address(&self) -> String {
        match self.port {
            Some(port) => format!("port {port} and {}", self.socket().display()),
            None => self.socket().display().to_string(),
        }
    }

    /// Its URL: `redis+unix://<socket>`, or `redis://127.0.0.1:<port>` for a server started
    /// with [`RedisServer::start_tcp`].
    pub fn url(&self) -> String {
        match self.port {
            Some(port) => format!("redis://127.0.0.1:{port}"),
            None => format!("redis+unix://{}", self.socket().display()),
        }
    }

    /// The TCP port of a server started with [`RedisServer::start_tcp`].
    pub fn port(&self) -> u16 {
        self.port
            .expect("a TCP port: start the server with RedisServer::start_tcp")
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

    /// Starts it again at the same address (empty), after stopping it if it runs.
    pub fn restart(&mut self) {
        self.stop();
        // redis-server replaces a stale socket file itself; a TCP port was ours a moment ago:
        // retry (bounded) if the kernel has not released it yet.
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
            .arg("-s")
            .arg(self.socket())
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
