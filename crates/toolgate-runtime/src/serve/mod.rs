//! `toolgate serve`: a standalone stdio MCP server for policy work.
//!
//! Written by hand over newline-delimited JSON-RPC (not with rmcp's server side): the
//! surface is eight methods, every request is answered synchronously, and it keeps rmcp's
//! server features (schemars, macros) out of the binary. Messages longer than
//! [`MAX_MESSAGE_BYTES`] are refused, malformed input gets JSON-RPC errors, and nothing here
//! ever panics on input.
//!
//! It is never reachable through `toolgate wrap` (wrap refuses to run it as an upstream):
//! a hijacked agent must not read the audit log or forge decisions through a wrapped server.
//! It never writes the audit log; `check_verdict` decides hypothetical calls in a fresh,
//! throw-away session.

pub mod prompts;
pub mod tools;

use std::io::{BufRead, Write};
use std::path::PathBuf;

use serde_json::{Map, Value, json};
use toolgate_mcp::protocol;

/// The longest accepted message, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The protocol versions this server speaks: those with sessions (it answers `initialize`
/// and keeps no per-request `_meta` state, so not the stateless revision).
const PROTOCOL_VERSIONS: &[&str] = protocol::WITH_SESSIONS;
/// What a client asking for a revision this server does not speak is offered.
const FALLBACK_VERSION: &str = protocol::V2025_06_18;

const INSTRUCTIONS: &str = "toolgate's management server: decide hypothetical MCP tool calls against a toolgate policy \
(check_verdict), validate policies (validate_policy), list the built-in packs (list_packs) and summarise the audit log \
(audit_summary). Nothing here changes a policy or the audit log.";

/// Where `serve` finds things.
#[derive(Debug, Clone)]
pub struct Config {
    /// The policy `check_verdict` uses when no inline policy is given (`None`: the starter policy).
    pub policy: Option<PathBuf>,
    /// The audit log `audit_summary` reads (never written).
    pub audit: PathBuf,
    /// The workspace (`${workspace}`), as given.
    pub workspace: PathBuf,
}

/// A JSON-RPC error.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn invalid_params(message: impl Into<String>) -> Self {
        RpcError {
            code: -32602,
            message: message.into(),
        }
    }
}

/// The server state (none besides its configuration: every call is independent).
#[derive(Debug)]
pub struct Server {
    config: Config,
}

/// What to do with one line of input.
#[derive(Debug, PartialEq)]
pub enum Reply {
    /// Write this message.
    Send(Value),
    /// Nothing to answer (a notification, a response).
    None,
}

impl Server {
    pub fn new(config: Config) -> Self {
        Server { config }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Handles one message (the bytes of one line).
    pub fn handle_line(&self, line: &[u8]) -> Reply {
        let message: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                return Reply::Send(error_response(
                    &Value::Null,
                    -32700,
                    &format!("parse error: {e}"),
                ));
            }
        };
        let Some(obj) = message.as_object() else {
            return Reply::Send(error_response(
                &Value::Null,
                -32600,
                "invalid request: expected one JSON-RPC object (batches are not supported)",
            ));
        };
        let id = obj.get("id").cloned();
        let Some(method) = obj.get("method").and_then(Value::as_str) else {
            // A response (to nothing we asked) or garbage without a method.
            return match id {
                Some(id) if !obj.contains_key("result") && !obj.contains_key("error") => {
                    Reply::Send(error_response(
                        &id,
                        -32600,
                        "invalid request: missing `method`",
                    ))
                }
                _ => Reply::None,
            };
        };
        let Some(id) = id else {
            // Notifications (initialized, cancelled, …) need no answer.
            return Reply::None;
        };
        if !(id.is_string() || id.is_i64() || id.is_u64()) {
            return Reply::Send(error_response(
                &Value::Null,
                -32600,
                "invalid request: `id` must be a string or an integer",
            ));
        }
        let empty = Value::Object(Map::new());
        let params = obj.get("params").unwrap_or(&empty);
        match self.dispatch(method, params) {
            Ok(result) => Reply::Send(json!({"jsonrpc": "2.0", "id": id, "result": result})),
            Err(e) => Reply::Send(error_response(&id, e.code, &e.message)),
        }
    }

    fn dispatch(&self, method: &str, params: &Value) -> Result<Value, RpcError> {
        match method {
            "initialize" => Ok(initialize(params)),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({ "tools": tools::definitions() })),
            "tools/call" => tools::call(self, params),
            "prompts/list" => Ok(json!({ "prompts": prompts::definitions() })),
            "prompts/get" => prompts::get(params),
            "resources/list" => Ok(json!({ "resources": tools::resource_list() })),
            "resources/templates/list" => Ok(json!({ "resourceTemplates": [] })),
            "resources/read" => tools::read_resource(self, params),
            "logging/setLevel" => Ok(json!({})),
            other => Err(RpcError {
                code: -32601,
                message: format!("method `{other}` not found"),
            }),
        }
    }
}

fn error_response(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .and_then(|v| PROTOCOL_VERSIONS.iter().find(|s| **s == v))
        .copied()
        .unwrap_or(FALLBACK_VERSION);
    json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": { "listChanged": false },
            "prompts": { "listChanged": false },
            "resources": { "subscribe": false, "listChanged": false },
        },
        "serverInfo": {
            "name": "toolgate",
            "title": "toolgate policy tools",
            "version": env!("CARGO_PKG_VERSION"),
        },
        "instructions": INSTRUCTIONS,
    })
}

/// Reads one line of at most `max` bytes (without its newline). `Ok(None)` at end of input;
/// a longer line is consumed and reported as `Err(length)` so the caller can answer it.
fn read_line<R: BufRead>(
    input: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<Result<(), usize>>> {
    buf.clear();
    let mut too_long = 0usize;
    loop {
        let available = input.fill_buf()?;
        if available.is_empty() {
            if buf.is_empty() && too_long == 0 {
                return Ok(None);
            }
            break;
        }
        let (chunk, found) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (available.get(..i).unwrap_or_default(), Some(i)),
            None => (available, None),
        };
        if too_long > 0 || buf.len().saturating_add(chunk.len()) > max {
            too_long = too_long
                .saturating_add(buf.len())
                .saturating_add(chunk.len());
            buf.clear();
        } else {
            buf.extend_from_slice(chunk);
        }
        let used = found.map_or(available.len(), |i| i.saturating_add(1));
        input.consume(used);
        if found.is_some() {
            break;
        }
    }
    if too_long > 0 {
        return Ok(Some(Err(too_long)));
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(Ok(())))
}

/// Serves MCP on `input`/`output` until the input ends.
pub fn serve<R: BufRead, W: Write>(
    server: &Server,
    mut input: R,
    mut output: W,
) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    while let Some(line) = read_line(&mut input, &mut buf, MAX_MESSAGE_BYTES)? {
        let reply = match line {
            Err(len) => Reply::Send(error_response(
                &Value::Null,
                -32600,
                &format!("message of {len} bytes refused: the limit is {MAX_MESSAGE_BYTES} bytes"),
            )),
            Ok(()) if buf.iter().all(u8::is_ascii_whitespace) => continue,
            Ok(()) => server.handle_line(&buf),
        };
        if let Reply::Send(message) = reply {
            let mut bytes = serde_json::to_vec(&message)?;
            bytes.push(b'\n');
            output.write_all(&bytes)?;
            output.flush()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> Server {
        Server::new(Config {
            policy: None,
            audit: PathBuf::from("/nonexistent/toolgate-audit.jsonl"),
            workspace: PathBuf::from("/"),
        })
    }

    #[test]
    fn lines_are_bounded_and_framed() {
        let mut input = std::io::Cursor::new(b"abc\r\n0123456789\nxy".to_vec());
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut input, &mut buf, 5).unwrap(), Some(Ok(())));
        assert_eq!(buf, b"abc");
        assert_eq!(read_line(&mut input, &mut buf, 5).unwrap(), Some(Err(10)));
        assert_eq!(read_line(&mut input, &mut buf, 5).unwrap(), Some(Ok(())));
        assert_eq!(buf, b"xy");
        assert_eq!(read_line(&mut input, &mut buf, 5).unwrap(), None);
    }

    #[test]
    fn malformed_input_gets_errors_not_panics() {
        let s = server();
        let code = |r: Reply| match r {
            Reply::Send(v) => v["error"]["code"].as_i64(),
            Reply::None => None,
        };
        assert_eq!(code(s.handle_line(b"{nope")), Some(-32700));
        assert_eq!(code(s.handle_line(b"[1,2]")), Some(-32600));
        assert_eq!(
            code(s.handle_line(br#"{"jsonrpc":"2.0","id":1,"method":"nope"}"#)),
            Some(-32601)
        );
        assert_eq!(
            code(s.handle_line(br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#)),
            Some(-32600)
        );
        assert_eq!(
            s.handle_line(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Reply::None
        );
        assert_eq!(
            code(s.handle_line(
                br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope"}}"#
            )),
            Some(-32602)
        );
    }

    #[test]
    fn initialize_negotiates_a_known_version() {
        let v = initialize(&json!({"protocolVersion": "2025-03-26"}));
        assert_eq!(v["protocolVersion"], "2025-03-26");
        let v = initialize(&json!({"protocolVersion": "1999-01-01"}));
        assert_eq!(v["protocolVersion"], "2025-06-18");
    }
}

/// Whether an upstream command line runs `toolgate serve` (directly, or through a wrapper
/// such as `env`, `nice` or `sh -c "…"`): `toolgate wrap` refuses it, so a hijacked agent
/// cannot read the audit log or forge decisions through a wrapped server.
pub fn is_serve_command(command: &[std::ffi::OsString]) -> bool {
    let own = std::env::current_exe()
        .ok()
        .and_then(|p| std::fs::canonicalize(p).ok());
    let words: Vec<String> = command
        .iter()
        .flat_map(|arg| {
            arg.to_string_lossy()
                .split(|c: char| {
                    c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')' | '`')
                })
                .map(|w| w.trim_matches(|c| matches!(c, '"' | '\'')).to_owned())
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
        })
        .collect();
    let is_toolgate = |word: &str| {
        let path = std::path::Path::new(word);
        let named = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n == "toolgate" || n == "toolgate.exe");
        named
            || own.as_ref().is_some_and(|own| {
                path.is_absolute() && std::fs::canonicalize(path).is_ok_and(|p| &p == own)
            })
    };
    words
        .windows(2)
        .any(|w| matches!(w, [exe, sub] if sub == "serve" && is_toolgate(exe)))
}

#[cfg(test)]
mod serve_command_tests {
    use super::is_serve_command;

    fn cmd(args: &[&str]) -> Vec<std::ffi::OsString> {
        args.iter().map(std::ffi::OsString::from).collect()
    }

    #[test]
    fn detects_toolgate_serve_however_launched() {
        assert!(is_serve_command(&cmd(&["toolgate", "serve"])));
        assert!(is_serve_command(&cmd(&[
            "/usr/local/bin/toolgate",
            "serve",
            "--policy",
            "p.yaml"
        ])));
        assert!(is_serve_command(&cmd(&["env", "A=1", "toolgate", "serve"])));
        assert!(is_serve_command(&cmd(&[
            "sh",
            "-c",
            "exec toolgate serve --audit x"
        ])));
        let own = std::env::current_exe().unwrap();
        assert!(is_serve_command(&[own.into_os_string(), "serve".into()]));
        assert!(!is_serve_command(&cmd(&[
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "serve"
        ])));
        assert!(!is_serve_command(&cmd(&[
            "toolgate",
            "demo",
            "--internal-server"
        ])));
        assert!(!is_serve_command(&cmd(&["python", "serve.py"])));
    }
}
