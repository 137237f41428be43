//! A running `toolgate gateway` for tests: started from a config file, its address read
//! from the one line it prints, driven with the blocking client of [`crate::http`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::TIMEOUT;
use crate::http::{HttpReply, first_line, request};

/// A gateway process, killed on drop.
pub struct GatewayProcess {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The config file it runs.
    pub config: PathBuf,
}

impl GatewayProcess {
    /// Starts `TOOLGATE gateway --config CONFIG` (with `envs`) and waits (bounded) for its
    /// address. Its stderr (JSON logs) goes to `CONFIG.<replica>.log` beside the config.
    ///
    /// `toolgate` is the binary cargo built for the calling tests:
    /// `env!("CARGO_BIN_EXE_toolgate")` in toolgate's own.
    pub fn start(toolgate: &Path, config: &Path, envs: &[(&str, &str)]) -> GatewayProcess {
        let log = config.with_extension(format!(
            "{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        let mut child = Command::new(toolgate)
            .arg("gateway")
            .arg("--config")
            .arg(config)
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                std::fs::File::create(&log).expect("gateway log"),
            ))
            .spawn()
            .expect("spawn toolgate gateway");
        let line = first_line(child.stdout.take().expect("stdout")).unwrap_or_default();
        let Some(addr) = line.split_whitespace().find_map(|w| {
            w.strip_prefix("http://")
                .or_else(|| w.strip_prefix("https://"))
        }) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the gateway printed no address (`{line}`); its log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        };
        GatewayProcess {
            child,
            addr: addr.to_owned(),
            config: config.to_owned(),
        }
    }

    /// The pid (to signal it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills it at once (SIGKILL) and waits.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits (bounded) for it to exit; its exit status.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the gateway did not exit within {TIMEOUT:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// `POST /servers/<server>/mcp` with a bearer token and, if any, a session id.
    pub fn post(&self, server: &str, token: &str, session: Option<&str>, msg: &str) -> HttpReply {
        let auth = format!("Bearer {token}");
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Authorization", auth.as_str()),
        ];
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
        }
        request(
            &self.addr,
            "POST",
            &format!("/servers/{server}/mcp"),
            &headers,
            msg.as_bytes(),
        )
    }

    /// `DELETE /servers/<server>/mcp` of a session (the client ends it).
    pub fn delete(&self, server: &str, token: &str, session: &str) -> HttpReply {
        let auth = format!("Bearer {token}");
        request(
            &self.addr,
            "DELETE",
            &format!("/servers/{server}/mcp"),
            &[
                ("Authorization", auth.as_str()),
                ("Mcp-Session-Id", session),
            ],
            b"",
        )
    }

    /// `GET PATH`.
    pub fn get(&self, path: &str) -> HttpReply {
        request(&self.addr, "GET", path, &[], b"")
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The JSON-RPC message of a reply: a JSON body, or the last SSE event's data.
pub fn message_of(reply: HttpReply) -> Value {
    let sse = reply
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/event-stream"));
    if sse {
        let (events, _) = reply.events();
        let last = events.last().expect("an event");
        serde_json::from_str(&last.data).expect("JSON data")
    } else {
        reply.json()
    }
}

/// A minimal `initialize` (2025-06-18) as a client sends it.
pub fn initialize(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"toolgate-tests","version":"1"}}}}}}"#
    )
}

/// Opens a session on `server` and sends `notifications/initialized`: its id.
pub fn open_session(gw: &GatewayProcess, server: &str, token: &str) -> String {
    let reply = gw.post(server, token, None, &initialize(0));
    assert_eq!(reply.status, 200, "initialize refused");
    let session = reply
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    let (_body, _) = reply.body();
    let r = gw.post(
        server,
        token,
        Some(&session),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(r.status, 202);
    session
}
