//! `bench_upstream`: a tiny, fast MCP server for latency benchmarks.
//!
//! Speaks newline-delimited JSON-RPC on stdio and answers, as cheaply as it can:
//! `initialize` (echoing the client's protocol version), `ping`, `tools/list` (one tool,
//! `bench`), and `tools/call` (a small fixed text result, or `--result-bytes N` bytes of
//! text for large-result runs). Notifications are ignored; any other request gets
//! `-32601`. It exits on stdin EOF.
//!
//! Usage: `bench_upstream [--result-bytes N]`

use std::io::{BufRead, BufWriter, Write};
use std::process::ExitCode;

use serde_json::{Value, json};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bench_upstream: {err:#}");
            ExitCode::from(1)
        }
    }
}

fn parse_result_bytes() -> anyhow::Result<usize> {
    let mut args = std::env::args().skip(1);
    let mut result_bytes = 0;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--result-bytes" => {
                let value = args
                    .next()
                    .ok_or_else(|| anyhow::anyhow!("`--result-bytes` needs a value"))?;
                result_bytes = value.parse().map_err(|err| {
                    anyhow::anyhow!("invalid `--result-bytes` value `{value}`: {err}")
                })?;
            }
            other => {
                anyhow::bail!("unknown argument `{other}`\nhelp: bench_upstream [--result-bytes N]")
            }
        }
    }
    Ok(result_bytes)
}

/// Pre-serialises the `tools/call` result so that each call only splices in the id.
fn call_result(result_bytes: usize) -> anyhow::Result<String> {
    let text = if result_bytes == 0 {
        "ok".to_owned()
    } else {
        "x".repeat(result_bytes)
    };
    Ok(serde_json::to_string(&json!({
        "content": [{ "type": "text", "text": text }],
        "isError": false
    }))?)
}

fn run() -> anyhow::Result<()> {
    let result_bytes = parse_result_bytes()?;
    let call_result = call_result(result_bytes)?;
    let tools_result = serde_json::to_string(&json!({
        "tools": [{
            "name": "bench",
            "description": "Returns a small fixed result.",
            "inputSchema": { "type": "object", "properties": {} }
        }]
    }))?;

    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut line = String::new();
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
                write!(
                    out,
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{call_result}}}"
                )?;
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
