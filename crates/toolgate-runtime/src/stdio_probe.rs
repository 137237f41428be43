//! A look at a stdio MCP server, for the commands that start one only to ask it something
//! (`toolgate doctor --probe`, `toolgate report --probe`): start it with its stdin and
//! stdout piped (stderr discarded), send JSON-RPC messages, wait for the reply to one
//! request, list its tools, and stop it. The callers bound it in time and word their own
//! errors.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
use toolgate_mcp::protocol;

use crate::remote::handshake::initialize_message;

/// The revision the probes ask for: the one stdio servers most widely speak.
pub const REVISION: &str = protocol::V2025_06_18;

/// At most this many pages of tools are followed (a server whose cursor never ends cannot
/// hold the probe forever; the caller's time limit bounds it too).
pub const MAX_PAGES: usize = 1000;

type Lines = tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>;

/// A started stdio server.
#[derive(Debug)]
pub struct StdioServer {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: Lines,
}

/// Why no reply came.
#[derive(Debug)]
pub enum NoReply {
    /// The server's stdout ended.
    Exited,
    /// Reading the server's stdout failed.
    Unreadable(std::io::Error),
    /// The server wrote a line that is not JSON (when that is not skipped).
    NotJson(String),
}

/// The reply to a request.
#[derive(Debug)]
pub enum Reply {
    /// Its `result`.
    Result(Value),
    /// Its `error`, as JSON text (empty when it has none).
    Error(String),
}

impl StdioServer {
    /// Starts `program` with `args` (in `cwd`, when given); it is killed when dropped.
    pub fn start(
        program: &OsStr,
        args: &[OsString],
        cwd: Option<&Path>,
    ) -> Result<StdioServer, String> {
        let mut command = tokio::process::Command::new(program);
        command.args(args);
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("`{}` cannot be started: {e}", program.to_string_lossy()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("no pipes to the server".to_owned());
        };
        Ok(StdioServer {
            child,
            stdin,
            lines: tokio::io::BufReader::new(stdout).lines(),
        })
    }

    /// Writes one message (and a newline) to the server's stdin.
    pub async fn send(&mut self, message: &Value) -> Result<(), String> {
        let mut bytes = serde_json::to_vec(message).map_err(|e| e.to_string())?;
        bytes.push(b'\n');
        self.stdin
            .write_all(&bytes)
            .await
            .map_err(|e| format!("the server closed its input: {e}"))
    }

    /// Sends toolgate's `initialize` (request `id`, as `client`, asking for [`REVISION`]).
    pub async fn send_initialize(&mut self, id: &str, client: &str) -> Result<(), String> {
        self.send(&initialize_message(&Value::from(id), client, REVISION))
            .await
    }

    /// Waits for the reply to request `id`, skipping the server's other messages (and lines
    /// that are not JSON, when `skip_non_json`).
    pub async fn reply(&mut self, id: &str, skip_non_json: bool) -> Result<Reply, NoReply> {
        loop {
            let line = match self.lines.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => return Err(NoReply::Exited),
                Err(e) => return Err(NoReply::Unreadable(e)),
            };
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                if skip_non_json {
                    continue;
                }
                return Err(NoReply::NotJson(line));
            };
            if v.get("id").and_then(Value::as_str) != Some(id) {
                continue;
            }
            if let Some(result) = v.get("result") {
                return Ok(Reply::Result(result.clone()));
            }
            return Ok(Reply::Error(
                v.get("error").map(ToString::to_string).unwrap_or_default(),
            ));
        }
    }

    /// `initialize` (as `client`), `notifications/initialized`, then every page of
    /// `tools/list` (at most [`MAX_PAGES`]); request ids begin with `id_prefix`.
    pub async fn list_tools(
        &mut self,
        client: &str,
        id_prefix: &str,
    ) -> Result<Vec<Value>, String> {
        let init_id = format!("{id_prefix}-init");
        self.send_initialize(&init_id, client).await?;
        self.result_of(&init_id).await?;
        self.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .await?;
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for page in 0..MAX_PAGES {
            let id = format!("{id_prefix}-list-{page}");
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            self.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":params}))
                .await?;
            let result = self.result_of(&id).await?;
            if let Some(list) = result.get("tools").and_then(Value::as_array) {
                tools.extend(list.iter().cloned());
            } else {
                return Err("the server's `tools/list` result has no `tools` list".to_owned());
            }
            cursor = result
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if cursor.is_none() {
                return Ok(tools);
            }
        }
        Err(format!(
            "the server listed more than {MAX_PAGES} pages of tools"
        ))
    }

    /// The result of request `id`, lines that are not JSON skipped.
    async fn result_of(&mut self, id: &str) -> Result<Value, String> {
        match self.reply(id, true).await {
            Ok(Reply::Result(result)) => Ok(result),
            Ok(Reply::Error(error)) => Err(format!("the server answered with an error: {error}")),
            Err(NoReply::Exited | NoReply::NotJson(_)) => {
                Err("the server exited before answering".to_owned())
            }
            Err(NoReply::Unreadable(e)) => Err(format!("cannot read the server's output: {e}")),
        }
    }

    /// Kills the server without waiting for it.
    pub fn kill(&mut self) {
        let _ = self.child.start_kill();
    }

    /// Kills the server and waits (at most 2 s) until it is gone.
    pub async fn stop(mut self) {
        self.kill();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
    }
}
