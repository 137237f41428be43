//! `toolgate doctor` probes the remote servers of the client configurations: the real
//! `@modelcontextprotocol/server-everything` in its Streamable HTTP and legacy SSE modes, a
//! server that answers 401 with `WWW-Authenticate`, and a closed port; before and after
//! `toolgate init` wrapped the entries. Header values (tokens) never appear in its output,
//! and the session the probe opens is ended with `DELETE`.
//!
//! Needs `npm ci --prefix tests` (run by `scripts/test`).
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; helpers shared by several tests, not every one uses every helper"
)]

use crate::common;

use std::fs;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

const START_TIMEOUT: Duration = Duration::from_secs(30);
const TOKEN: &str = "probe-token-5f4e3d2c1b0a";

/// server-everything in `mode` on a free loopback port; its output lines on a channel.
struct Everything {
    child: Child,
    port: u16,
    lines: Receiver<String>,
}

impl Everything {
    fn start(mode: &str) -> Option<Everything> {
        let (node, entry) =
            common::node_and("@modelcontextprotocol/server-everything/dist/index.js")?;
        // Port 0: the kernel picks; it prints `port 0` once listening, and the real port is
        // read from /proc then.
        let mut child = Command::new(node)
            .arg(entry)
            .arg(mode)
            .env("PORT", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let mut server = Everything {
            child,
            port: 0,
            lines,
        };
        server.wait_for("port 0");
        server.port =
            toolgate_testkit::wait_for_listening_port(server.child.id(), START_TIMEOUT, mode);
        Some(server)
    }

    /// Waits (bounded) for an output line containing `needle`.
    fn wait_for(&self, needle: &str) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return,
                Ok(_) => {}
                Err(e) => panic!("server-everything never printed `{needle}`: {e}"),
            }
        }
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server that answers every request with 401 and a `WWW-Authenticate` challenge, as an
/// MCP server behind OAuth does (MCP authorization specification, RFC 9728).
fn unauthorized_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            answer_401(&mut stream, port);
        }
    });
    port
}

fn answer_401(stream: &mut TcpStream, port: u16) {
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    let response = format!(
        "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer resource_metadata=\"http://127.0.0.1:{port}/.well-known/oauth-protected-resource\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let _ = stream.write_all(response.as_bytes());
}

struct Home {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
}

impl Home {
    fn new(mcp_json: &str) -> Home {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let home = root.join("home");
        let project = root.join("project");
        fs::create_dir_all(&home).unwrap();
        fs::create_dir_all(&project).unwrap();
        fs::write(project.join(".mcp.json"), mcp_json).unwrap();
        Home {
            _tmp: tmp,
            home,
            project,
        }
    }

    fn toolgate(&self, args: &[&str]) -> (i32, String) {
        let out = assert_cmd::Command::cargo_bin("toolgate")
            .unwrap()
            .env_clear()
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_RUNTIME_DIR", &self.home)
            .env("PROBE_TOKEN", TOKEN)
            .current_dir(&self.project)
            .args(args)
            .write_stdin("")
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap()
        );
        (out.status.code().unwrap_or(-1), text)
    }
}

fn line_of<'a>(output: &'a str, server: &str) -> &'a str {
    let needle = format!("remote server `{server}`");
    output
        .lines()
        .find(|l| l.contains(&needle))
        .unwrap_or_else(|| panic!("no line for `{server}` in:\n{output}"))
}

#[test]
fn doctor_probes_remote_servers() {
    let Some(streamable) = Everything::start("streamableHttp") else {
        return;
    };
    let Some(sse) = Everything::start("sse") else {
        return;
    };
    let unauthorized = unauthorized_server();
    let held = toolgate_testkit::ClosedPort::new();
    let closed = held.port;
    let config = format!(
        r#"{{
  "mcpServers": {{
    "streamable": {{
      "type": "http",
      "url": "http://127.0.0.1:{s}/mcp",
      "headers": {{"Authorization": "Bearer ${{PROBE_TOKEN}}"}}
    }},
    "legacy": {{"type": "sse", "url": "http://127.0.0.1:{l}/sse"}},
    "auto": {{"url": "http://127.0.0.1:{l}/sse"}},
    "oauth": {{"type": "http", "url": "http://127.0.0.1:{u}/mcp"}},
    "down": {{"type": "http", "url": "http://127.0.0.1:{closed}/mcp"}}
  }}
}}
"#,
        s = streamable.port,
        l = sse.port,
        u = unauthorized,
    );
    let home = Home::new(&config);
    for round in ["unwrapped", "wrapped"] {
        if round == "wrapped" {
            let (code, out) = home.toolgate(&["init", "--client", "claude-code", "--yes"]);
            assert_eq!(code, 0, "{out}");
        }
        let (code, out) = home.toolgate(&["doctor"]);
        assert!(!out.contains(TOKEN), "the token was printed:\n{out}");
        assert_eq!(code, 1, "the closed port is a FAIL:\n{out}");
        let wrapped = if round == "wrapped" { ", wrapped" } else { "" };

        let line = line_of(&out, "streamable");
        assert!(line.starts_with("PASS"), "{line}");
        for part in [
            &format!("(`http://127.0.0.1:{}/mcp`{wrapped})", streamable.port),
            "reachable, Streamable HTTP, protocol 20",
            "server `mcp-servers/everything`",
            "authorized",
        ] {
            assert!(line.contains(part), "{part:?} not in {line}");
        }
        // The probe ended the session it opened.
        streamable.wait_for("session termination request");

        for name in ["legacy", "auto"] {
            let line = line_of(&out, name);
            assert!(line.starts_with("PASS"), "{line}");
            assert!(
                line.contains("reachable, legacy HTTP+SSE, protocol 20"),
                "{line}"
            );
            assert!(line.contains("no authorization required"), "{line}");
        }

        let line = line_of(&out, "oauth");
        assert!(line.starts_with("WARN"), "{line}");
        assert!(
            line.contains(&format!(
                "needs authorization, run `toolgate auth login http://127.0.0.1:{unauthorized}/mcp`"
            )),
            "{line}"
        );

        let line = line_of(&out, "down");
        assert!(line.starts_with("FAIL"), "{line}");
        assert!(line.contains("unreachable (cannot connect"), "{line}");
        assert!(line.contains("refused"), "{line}");
    }

    let (code, out) = home.toolgate(&["doctor", "--no-remote"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("5 remote servers not probed"), "{out}");
}
