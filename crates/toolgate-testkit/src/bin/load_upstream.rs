//! `load_upstream`: an MCP server for the load and soak tests (`tests/load_*.rs`,
//! `tests/soak_*.rs`).
//!
//! Newline-delimited JSON-RPC on stdio. It answers `initialize`, `ping`, `tools/list` (one
//! tool, `echo`) and `tools/call`:
//!
//! - before answering the k-th `tools/call` (k = 1, 2, …) it writes one notification
//!   `notifications/message` whose `data` is k;
//! - with `--ask-every N` (N > 0), every N-th call is not answered at once: the server
//!   first sends the client a `roots/list` request that reuses **the same raw id** as the
//!   client's call (so both id spaces hold that id at the same time), with the call's id
//!   in `params.for`; when the client's response arrives, the call is answered with it;
//! - a call with `arguments.bytes = B` gets a text result of about B bytes (a realistic
//!   page of prose, with one address and one URL unique to the call);
//! - every call's result has `structuredContent`: `{"id": <the call's id>, "n": <arguments.n>,
//!   "k": <k>, "notifications_seen": <client notifications received so far>,
//!   "answer": <the client's response to the roots/list request, if one was sent>}`.
//!
//! A response from the client that matches no request it sent is reported on stderr and
//! counted (`unmatched` in the next result). It exits on stdin EOF.
//!
//! Usage: `load_upstream [--ask-every N]`

use std::collections::HashMap;
use std::io::{BufRead, BufWriter, Write};
use std::process::ExitCode;

use serde_json::{Value, json};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("load_upstream: {err:#}");
            ExitCode::from(1)
        }
    }
}

fn parse_args() -> anyhow::Result<u64> {
    let mut args = std::env::args().skip(1);
    let mut ask_every = 0;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--ask-every" => {
                let value = args
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("`--ask-every` needs a value"))?;
                ask_every = value
                    .parse()
                    .map_err(|err| anyhow::anyhow!("invalid `--ask-every` `{value}`: {err}"))?;
            }
            other => {
                anyhow::bail!("unknown argument `{other}`\nhelp: load_upstream [--ask-every N]")
            }
        }
    }
    Ok(ask_every)
}

/// About `bytes` bytes of prose; `k` makes one address and one URL unique to this result.
fn page(bytes: usize, k: u64) -> String {
    const LINE: &str = "The quarterly report covers revenue, churn and the hiring plan for the next two quarters; nothing here is actionable.\n";
    let mut text = format!(
        "Report {k}: questions to analyst{k}@reports.example.org, details at https://reports.example.org/r/{k}\n"
    );
    while text.len() + LINE.len() <= bytes {
        text.push_str(LINE);
    }
    text
}

struct Server {
    ask_every: u64,
    calls: u64,
    notifications_seen: u64,
    unmatched: u64,
    /// Raw id of a `roots/list` we sent → the call waiting for its answer.
    asked: HashMap<String, (Value, u64, u64)>,
}

impl Server {
    fn result(&self, id: &Value, n: u64, k: u64, text: String, answer: Value) -> String {
        json!({
            "jsonrpc": "2.0",
            "id": id,
            "result": {
                "content": [{ "type": "text", "text": text }],
                "structuredContent": {
                    "id": id,
                    "n": n,
                    "k": k,
                    "notifications_seen": self.notifications_seen,
                    "unmatched": self.unmatched,
                    "answer": answer
                },
                "isError": false
            }
        })
        .to_string()
    }

    /// Handles one line; returns the lines to write.
    fn handle(&mut self, msg: &Value) -> Vec<String> {
        let id = msg.get("id").cloned();
        let method = msg.get("method").and_then(Value::as_str);
        let (Some(method), Some(id)) = (method, id.clone()) else {
            if method.is_some() {
                self.notifications_seen += 1;
            } else if let Some(id) = id {
                // A response from the client.
                match self.asked.remove(&id.to_string()) {
                    Some((call_id, n, k)) => {
                        let answer = msg.get("result").cloned().unwrap_or(Value::Null);
                        return vec![self.result(&call_id, n, k, format!("n={n}"), answer)];
                    }
                    None => {
                        eprintln!("load_upstream: unmatched response {msg}");
                        self.unmatched += 1;
                    }
                }
            }
            return Vec::new();
        };
        match method {
            "initialize" => {
                let version = msg
                    .pointer("/params/protocolVersion")
                    .cloned()
                    .unwrap_or_else(|| json!("2025-06-18"));
                vec![
                    json!({"jsonrpc":"2.0","id":id,"result":{
                        "protocolVersion": version,
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "load_upstream", "version": "0"}
                    }})
                    .to_string(),
                ]
            }
            "ping" => vec![json!({"jsonrpc":"2.0","id":id,"result":{}}).to_string()],
            "tools/list" => vec![
                json!({"jsonrpc":"2.0","id":id,"result":{"tools":[{
                    "name": "echo",
                    "description": "Echoes its arguments.",
                    "inputSchema": {"type": "object"}
                }]}})
                .to_string(),
            ],
            "tools/call" => {
                self.calls += 1;
                let k = self.calls;
                let args = msg.pointer("/params/arguments");
                let n = args
                    .and_then(|a| a.get("n"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let bytes = args
                    .and_then(|a| a.get("bytes"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let mut out = vec![
                    json!({"jsonrpc":"2.0","method":"notifications/message",
                           "params":{"level":"info","logger":"load","data":k}})
                    .to_string(),
                ];
                if self.ask_every > 0 && k.is_multiple_of(self.ask_every) {
                    out.push(
                        json!({"jsonrpc":"2.0","id":id,"method":"roots/list",
                               "params":{"for":id}})
                        .to_string(),
                    );
                    self.asked.insert(id.to_string(), (id, n, k));
                    return out;
                }
                let text = if bytes > 0 {
                    page(usize::try_from(bytes).unwrap_or(usize::MAX), k)
                } else {
                    format!("n={n}")
                };
                out.push(self.result(&id, n, k, text, Value::Null));
                out
            }
            _ => vec![
                json!({"jsonrpc":"2.0","id":id,"error":{"code":-32601,"message":"method not found"}})
                    .to_string(),
            ],
        }
    }
}

fn run() -> anyhow::Result<()> {
    let ask_every = parse_args()?;
    let mut server = Server {
        ask_every,
        calls: 0,
        notifications_seen: 0,
        unmatched: 0,
        asked: HashMap::new(),
    };
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        let Ok(msg) = serde_json::from_slice::<Value>(&line) else {
            eprintln!(
                "load_upstream: not JSON: {}",
                String::from_utf8_lossy(&line).trim_end()
            );
            continue;
        };
        for reply in server.handle(&msg) {
            out.write_all(reply.as_bytes())?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
    }
}
