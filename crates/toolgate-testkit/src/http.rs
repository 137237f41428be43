//! A minimal blocking HTTP/1.1 client (plain TCP, `Connection: close`) and the
//! [`HttpUpstream`] handle, for tests that drive `http_upstream` directly or steer its
//! faults through its control endpoint. Every read has a timeout ([`crate::TIMEOUT`]).
//!
//! Written for this kit's own server: it reads `Content-Length`, chunked and
//! until-close bodies, and reports a body cut short (a reset, a missing last chunk)
//! instead of failing, since that is what the fault tests look at.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;

use serde_json::Value;

use crate::{TIMEOUT, bin_path};

/// A response whose body has not been read yet.
pub struct HttpReply {
    /// The status code.
    pub status: u16,
    /// The headers, names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    body: BufReader<BodyReader>,
}

enum Framing {
    Length(usize),
    Chunked { left: usize, done: bool },
    UntilClose,
}

struct BodyReader {
    conn: BufReader<TcpStream>,
    framing: Framing,
}

impl Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match &mut self.framing {
            Framing::Length(0) => Ok(0),
            Framing::Length(left) => {
                let cap = buf.len().min(*left);
                let n = self.conn.read(&mut buf[..cap])?;
                if n == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                *left -= n;
                Ok(n)
            }
            Framing::UntilClose => self.conn.read(buf),
            Framing::Chunked { left, done } => {
                if *done {
                    return Ok(0);
                }
                if *left == 0 {
                    let mut line = String::new();
                    if self.conn.read_line(&mut line)? == 0 {
                        return Err(std::io::ErrorKind::UnexpectedEof.into());
                    }
                    let size = line.trim().split(';').next().unwrap_or("");
                    let size = usize::from_str_radix(size, 16)
                        .map_err(|_| std::io::Error::other(format!("bad chunk size `{line}`")))?;
                    if size == 0 {
                        // Trailers, then the blank line.
                        loop {
                            line.clear();
                            if self.conn.read_line(&mut line)? == 0 || line.trim().is_empty() {
                                break;
                            }
                        }
                        *done = true;
                        return Ok(0);
                    }
                    *left = size;
                }
                let cap = buf.len().min(*left);
                let n = self.conn.read(&mut buf[..cap])?;
                if n == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                *left -= n;
                if *left == 0 {
                    let mut crlf = [0u8; 2];
                    self.conn.read_exact(&mut crlf)?;
                }
                Ok(n)
            }
        }
    }
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `id` field, if any.
    pub id: Option<String>,
    /// The `event` field, if any.
    pub event: Option<String>,
    /// The `data` lines joined with `\n`.
    pub data: String,
    /// The `retry` field, if any.
    pub retry: Option<u64>,
}

impl HttpReply {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The whole body, and whether it arrived complete (false when the connection was
    /// reset or closed before the body's end).
    pub fn body(mut self) -> (Vec<u8>, bool) {
        let mut out = Vec::new();
        let complete = self.body.read_to_end(&mut out).is_ok();
        (out, complete)
    }

    /// The body parsed as JSON; panics if it is not complete JSON.
    pub fn json(self) -> Value {
        let (body, complete) = self.body();
        assert!(complete, "body cut short");
        serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("not json ({e}): {}", String::from_utf8_lossy(&body)))
    }

    /// The next event of an SSE body: `Ok(None)` at its clean end, `Err` when it was cut
    /// short (or a read timed out). Lines that are not fields are skipped, as the SSE
    /// specification says.
    pub fn next_event(&mut self) -> std::io::Result<Option<SseEvent>> {
        let mut event = SseEvent::default();
        let mut data: Option<String> = None;
        let mut any = false;
        loop {
            let mut line = String::new();
            if self.body.read_line(&mut line)? == 0 {
                return Ok(None);
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if any {
                    event.data = data.unwrap_or_default();
                    return Ok(Some(event));
                }
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value).to_owned();
            any = true;
            match field {
                "id" => event.id = Some(value),
                "event" => event.event = Some(value),
                "retry" => event.retry = value.parse().ok(),
                "data" => match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(&value);
                    }
                    None => data = Some(value),
                },
                _ => {}
            }
        }
    }

    /// Every event up to the end of the SSE body, and whether it ended cleanly.
    pub fn events(mut self) -> (Vec<SseEvent>, bool) {
        let mut out = Vec::new();
        loop {
            match self.next_event() {
                Ok(Some(e)) => out.push(e),
                Ok(None) => return (out, true),
                Err(_) => return (out, false),
            }
        }
    }
}

/// Sends one request to `addr` (`host:port`) and reads the status line and headers.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpReply {
    let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    stream.set_read_timeout(Some(TIMEOUT)).expect("timeout");
    stream.set_write_timeout(Some(TIMEOUT)).expect("timeout");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut w = &stream;
    w.write_all(head.as_bytes()).expect("send request");
    w.write_all(body).expect("send body");
    let mut conn = BufReader::new(stream);
    let mut line = String::new();
    conn.read_line(&mut line).expect("read status line");
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line `{line}`"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        conn.read_line(&mut line).expect("read header");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((n, v)) = l.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let framing = if method == "HEAD" || status == 204 || status == 304 {
        Framing::Length(0)
    } else if get("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        Framing::Chunked {
            left: 0,
            done: false,
        }
    } else if let Some(n) = get("content-length").and_then(|n| n.parse().ok()) {
        Framing::Length(n)
    } else {
        Framing::UntilClose
    };
    HttpReply {
        status,
        headers,
        body: BufReader::new(BodyReader { conn, framing }),
    }
}

/// The headers a Streamable HTTP client sends with a POST.
pub fn mcp_post(addr: &str, session: Option<&str>, extra: &[(&str, &str)], msg: &str) -> HttpReply {
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    if let Some(s) = session {
        headers.push(("Mcp-Session-Id", s));
    }
    headers.extend_from_slice(extra);
    request(addr, "POST", "/mcp", &headers, msg.as_bytes())
}

/// The first line a child prints on `stdout` (its address), within [`TIMEOUT`]; the rest is
/// read and dropped so that the child never blocks on a full pipe.
pub fn first_line(stdout: std::process::ChildStdout) -> Option<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = tx.send(line);
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    rx.recv_timeout(TIMEOUT).ok()
}

/// A running `http_upstream`, killed on drop.
pub struct HttpUpstream {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl HttpUpstream {
    /// Starts `http_upstream` with `args` and reads its address.
    pub fn start(args: &[&str]) -> HttpUpstream {
        let mut child = Command::new(bin_path("http_upstream"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn http_upstream");
        let line = first_line(child.stdout.take().expect("stdout"))
            .unwrap_or_else(|| panic!("http_upstream printed no address within {TIMEOUT:?}"));
        let addr = line.trim().to_owned();
        assert!(
            addr.starts_with("127.0.0.1:"),
            "unexpected first line `{addr}`"
        );
        HttpUpstream { child, addr }
    }

    /// Kills the server (and waits for it): it is gone, connections are refused.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The address of the second listener (another origin).
    pub fn other(&self) -> String {
        let info = request(&self.addr, "GET", "/control/info", &[], b"").json();
        info["other"].as_str().expect("other").to_owned()
    }

    /// `POST /control/SPEC` (a fault, `restart`, `token?value=…`, `notify?text=…`).
    pub fn control(&self, spec: &str) {
        let reply = request(&self.addr, "POST", &format!("/control/{spec}"), &[], b"");
        let status = reply.status;
        let (body, _) = reply.body();
        assert_eq!(
            status,
            200,
            "control `{spec}`: {}",
            String::from_utf8_lossy(&body)
        );
    }

    /// Every HTTP request to `/mcp` so far, in order (see `http_upstream --help`).
    pub fn log(&self) -> Vec<Value> {
        match request(&self.addr, "GET", "/control/log", &[], b"").json() {
            Value::Array(entries) => entries,
            other => panic!("log is not an array: {other}"),
        }
    }

    /// The log entries of `tools/call` requests to `tool` that the server carried out
    /// (not refused by a fault, a missing session or a token).
    pub fn calls(&self, tool: &str) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|e| {
                e["method"] == "tools/call" && e["params"]["name"] == tool && (e["status"] == 200)
            })
            .collect()
    }
}

impl Drop for HttpUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An axum router served on a loopback port from a thread of its own (a current-thread
/// runtime), for test doubles of HTTP services (a JWT issuer, a model API). Stops, and
/// waits for its thread, when dropped.
pub struct Served {
    /// The address it listens on.
    pub addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    /// Serves the router `make` builds for the address (on `127.0.0.1`, a free port).
    pub fn start(make: impl FnOnce(std::net::SocketAddr) -> axum::Router) -> Served {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let addr = listener.local_addr().expect("the listener's address");
        let router = make(addr);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime");
            rt.block_on(async move {
                let listener =
                    tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
                let _ = axum::serve(listener, router)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        Served {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
