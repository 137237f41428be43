//! `bench_upstream`: a tiny, fast MCP server for latency benchmarks.
//!
//! Speaks newline-delimited JSON-RPC on stdio and answers, as cheaply as it can:
//! `initialize` (echoing the client's protocol version), `ping` (an empty result),
//! `tools/list` and `tools/call`. Notifications are ignored; any other request gets
//! `-32601`. It exits on stdin EOF.
//!
//! - `tools/list` lists `bench`, `blocked` and, with `--tools N`, generated tools with
//!   realistic definitions (a description, an input schema with several typed, documented
//!   properties, annotations) up to N tools in all. The reply is serialised once at start.
//! - `tools/call` of any tool but `blocked` returns a small fixed text (`ok`), or with
//!   `--result-bytes N` about N bytes of prose whose first line (an address and a URL) is
//!   unique to the call, so a taint index sees new tokens every time. The prose is serialised
//!   once; each call only splices in its id and first line.
//!   With `--dense-result` every line of that text holds its own e-mail address and URL
//!   instead (a CRM export: the destination-dense case that must not delay later calls), and
//!   the server
//!   also lists `send_email` (`to`, `body`), the sink call that follows such a result.
//! - `tools/call` of `blocked` (or `send_email`) returns the text `blocked ran` (`send_email
//!   ran`): a benchmark that expects toolgate to deny that tool can tell when the call got
//!   through instead.
//!
//! Usage: `bench_upstream [--result-bytes N] [--dense-result] [--tools N]`

use std::io::{BufRead, BufWriter, Write};
use std::process::ExitCode;

use serde_json::{Value, json};

const USAGE: &str = "bench_upstream [--result-bytes N] [--dense-result] [--tools N]";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bench_upstream: {err:#}");
            ExitCode::from(1)
        }
    }
}

struct Options {
    result_bytes: usize,
    dense: bool,
    tools: usize,
}

fn parse_options() -> anyhow::Result<Options> {
    let mut args = std::env::args().skip(1);
    let mut options = Options {
        result_bytes: 0,
        dense: false,
        tools: 2,
    };
    while let Some(arg) = args.next() {
        let slot = match arg.as_str() {
            "--dense-result" => {
                options.dense = true;
                continue;
            }
            "--result-bytes" => &mut options.result_bytes,
            "--tools" => &mut options.tools,
            other => anyhow::bail!("unknown argument `{other}`\nhelp: {USAGE}"),
        };
        let value = args
            .next()
            .ok_or_else(|| anyhow::anyhow!("`{arg}` needs a value\nhelp: {USAGE}"))?;
        *slot = value
            .parse()
            .map_err(|err| anyhow::anyhow!("invalid `{arg}` value `{value}`: {err}"))?;
    }
    Ok(options)
}

/// A tools/call result: pre-serialised around a per-call first line for large results.
enum CallResult {
    /// The whole result, the same for every call.
    Fixed(String),
    /// `head` + the call's first line (JSON-escaped) + `tail`.
    Page { head: &'static str, tail: String },
}

impl CallResult {
    fn new(result_bytes: usize, dense: bool) -> anyhow::Result<CallResult> {
        if result_bytes == 0 {
            return Ok(CallResult::Fixed(serde_json::to_string(&json!({
                "content": [{ "type": "text", "text": "ok" }],
                "isError": false
            }))?));
        }
        const LINE: &str = "The quarterly report covers revenue, churn and the hiring plan for the next two quarters; see /srv/reports/q3/summary.md for the tables.\n";
        // The first line takes about 100 bytes; prose fills the rest.
        let mut body = String::with_capacity(result_bytes + LINE.len());
        let mut n = 0;
        loop {
            let line = if dense {
                format!(
                    "{n},Jane Roe {n},jane.roe{n}@customer{}.example,https://crm.example.com/contacts/{n}?tab=notes,active\n",
                    n % 97
                )
            } else {
                LINE.to_owned()
            };
            if body.len() + line.len() + 100 > result_bytes {
                break;
            }
            body.push_str(&line);
            n += 1;
        }
        let quoted = serde_json::to_string(&body)?;
        let escaped = quoted
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .unwrap_or_default();
        Ok(CallResult::Page {
            head: r#"{"content":[{"type":"text","text":""#,
            tail: format!(r#"{escaped}"}}],"isError":false}}"#),
        })
    }

    fn write(&self, out: &mut impl Write, id: &str, n: u64) -> std::io::Result<()> {
        match self {
            CallResult::Fixed(result) => {
                write!(
                    out,
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}"
                )
            }
            CallResult::Page { head, tail } => write!(
                out,
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{head}Report {n}: questions to \
                 analyst{n}@reports.example.org, details at https://reports.example.org/r/{n}\\n{tail}}}"
            ),
        }
    }
}

/// The definition of generated tool number `i` (0-based), realistic in shape and size.
fn generated_tool(i: usize) -> Value {
    const VERBS: [&str; 8] = [
        "search", "read", "list", "create", "update", "delete", "export", "sync",
    ];
    const NOUNS: [&str; 10] = [
        "issues", "files", "notes", "tickets", "users", "projects", "events", "records",
        "invoices", "reports",
    ];
    let verb = VERBS.get(i % VERBS.len()).copied().unwrap_or("get");
    let noun = NOUNS
        .get(i / VERBS.len() % NOUNS.len())
        .copied()
        .unwrap_or("items");
    let read_only = matches!(verb, "search" | "read" | "list" | "export");
    json!({
        "name": format!("{verb}_{noun}_{i}"),
        "title": format!("{verb} {noun} (service {i})"),
        "description": format!(
            "{verb} {noun} in workspace service {i}. Returns at most `limit` entries, newest \
             first; `path` narrows the scope to one folder of the service."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": format!("Free-text filter on the {noun}' titles and bodies."),
                    "minLength": 1,
                    "maxLength": 512
                },
                "path": {
                    "type": "string",
                    "description": "A folder of the service, relative to its root."
                },
                "limit": {
                    "type": "integer",
                    "description": "How many entries to return.",
                    "minimum": 1,
                    "maximum": 100,
                    "default": 20
                },
                "include_archived": { "type": "boolean", "default": false },
                "sort": { "type": "string", "enum": ["newest", "oldest", "relevance"] },
                "tags": {
                    "type": "array",
                    "items": { "type": "string" },
                    "maxItems": 10
                }
            },
            "required": ["query"],
            "additionalProperties": false
        },
        "annotations": {
            "readOnlyHint": read_only,
            "destructiveHint": verb == "delete",
            "openWorldHint": false
        }
    })
}

fn tools_list(tools: usize, dense: bool) -> anyhow::Result<String> {
    let mut list = vec![
        json!({
            "name": "bench",
            "description": "Returns a small fixed result.",
            "inputSchema": { "type": "object", "properties": {} }
        }),
        json!({
            "name": "blocked",
            "description": "A tool the benchmark policy denies.",
            "inputSchema": { "type": "object", "properties": {} }
        }),
    ];
    if dense {
        // The sink call that follows a destination-dense result, timed by `--large-dense`.
        list.push(json!({
            "name": "send_email",
            "description": "Sends an e-mail.",
            "inputSchema": {
                "type": "object",
                "properties": { "to": { "type": "string" }, "body": { "type": "string" } },
                "required": ["to"]
            }
        }));
    }
    list.extend((0..tools.saturating_sub(list.len())).map(generated_tool));
    Ok(serde_json::to_string(&json!({ "tools": list }))?)
}

fn run() -> anyhow::Result<()> {
    let options = parse_options()?;
    let call_result = CallResult::new(options.result_bytes, options.dense)?;
    let tools_result = tools_list(options.tools, options.dense)?;

    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut line = String::new();
    let mut calls: u64 = 0;
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            continue;
        }
        let Ok(message) = serde_json::from_str::<Value>(trimmed) else {
            eprintln!("bench_upstream: ignoring a line that is not JSON");
            continue;
        };
        let Some(id) = message.get("id") else {
            continue; // a notification
        };
        if message.get("method").is_none() {
            continue; // a response to a request we never send
        }
        let id = serde_json::to_string(id)?;
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        match method {
            "tools/call" => {
                calls += 1;
                let tool = message.pointer("/params/name").and_then(Value::as_str);
                if let Some(ran @ ("blocked" | "send_email")) = tool {
                    write!(
                        out,
                        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{ran} ran\"}}],\"isError\":false}}}}"
                    )?;
                } else {
                    call_result.write(&mut out, &id, calls)?;
                }
            }
            "tools/list" => {
                write!(
                    out,
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{tools_result}}}"
                )?;
            }
            "ping" => write!(out, "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}")?,
            "initialize" => {
                let version = message
                    .pointer("/params/protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("2025-11-25");
                let result = json!({
                    "protocolVersion": version,
                    "capabilities": { "tools": {} },
                    "serverInfo": { "name": "bench_upstream", "version": env!("CARGO_PKG_VERSION") }
                });
                write!(
                    out,
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}"
                )?;
            }
            _ => {
                let error =
                    json!({ "code": -32601, "message": format!("method not found: {method}") });
                write!(out, "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{error}}}")?;
            }
        }
        out.write_all(b"\n")?;
        out.flush()?;
    }
}
