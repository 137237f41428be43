//! A deliberately sloppy MCP server: it executes every `tools/call`, `resources/read` and
//! `prompts/get` it can make out, however it is spelled, and records each one it executed.
//! It stands for the hand-written servers toolgate must protect too (`enforce_unjudged`).
//!
//! What it is lenient about, each the habit of some real JSON-RPC stack:
//! - lines end at `\n` *or* `\r` (Python's universal newlines, as in a `TextIOWrapper`);
//! - member names match in any letter case, with `ſ`/`K` folded (Go's `encoding/json`), and
//!   the last of several matches wins;
//! - the method is trimmed, stripped of control characters and compared case-insensitively;
//! - a call runs with or without an `id`, whatever its type; batches are run element by
//!   element.
//!
//! Flags: `--record PATH`: append one JSON line per executed call,
//! `{"method": m, "name": n, "uri": u, "id": id, "line": <the text it came in>}`.
//!
//! Replies (to messages with a non-null `id`): `initialize` a minimal result, `tools/list`
//! two tools (`echo` and `read_file`), a call a result naming what ran, anything else `{}`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "a test server: bad input or setup aborts it loudly, which the test sees; a stdio test server: stdout is its protocol channel, stderr its log"
)]

use std::fs::OpenOptions;
use std::io::{Read, Write};

use serde_json::{Map, Value, json};

/// Folds a name the way Go's `encoding/json` compares member names (`bytes.EqualFold`).
fn fold(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'ſ' => 's',
            'K' => 'k',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// The last member whose name folds to `name`.
fn member<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    // serde_json keeps only the last of exact duplicates already.
    obj.iter()
        .filter(|(k, _)| fold(k) == name)
        .map(|(_, v)| v)
        .next_back()
}

/// The method as a sloppy dispatcher sees it.
fn method_of(obj: &Map<String, Value>) -> Option<String> {
    let m = member(obj, "method")?.as_str()?;
    let kept: String = m
        .chars()
        .filter(|c| !c.is_whitespace() && !c.is_control())
        .collect();
    Some(fold(&kept))
}

struct Server {
    record: Option<std::fs::File>,
    out: std::io::Stdout,
}

impl Server {
    fn reply(&mut self, id: &Value, result: Value) {
        let line = json!({"jsonrpc": "2.0", "id": id, "result": result});
        let mut out = self.out.lock();
        writeln!(out, "{line}").unwrap();
        out.flush().unwrap();
    }

    fn handle(&mut self, value: &Value, line: &str) {
        match value {
            Value::Array(items) => {
                for item in items {
                    self.handle(item, line);
                }
            }
            Value::Object(obj) => self.handle_object(obj, line),
            _ => {}
        }
    }

    fn handle_object(&mut self, obj: &Map<String, Value>, line: &str) {
        let Some(method) = method_of(obj) else {
            return;
        };
        let id = member(obj, "id").cloned().filter(|id| !id.is_null());
        let empty = Map::new();
        let params = member(obj, "params")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let text = |key: &str| {
            member(params, key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let result = match method.as_str() {
            "tools/call" | "resources/read" | "prompts/get" => {
                let (name, uri) = (text("name"), text("uri"));
                if let Some(file) = &mut self.record {
                    let entry = json!({"method": method, "name": name, "uri": uri,
                                       "id": id, "line": line});
                    writeln!(file, "{entry}").unwrap();
                    file.flush().unwrap();
                }
                let what = name.or(uri).unwrap_or_default();
                match method.as_str() {
                    "tools/call" => {
                        json!({"content": [{"type": "text", "text": format!("ran {what}")}]})
                    }
                    "resources/read" => json!({"contents": [{"uri": what, "text": "read"}]}),
                    _ => json!({"messages": []}),
                }
            }
            "initialize" => json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
                "serverInfo": {"name": "sloppy", "version": "0"}
            }),
            "tools/list" => json!({"tools": [
                {"name": "echo", "description": "echoes", "inputSchema": {"type": "object"}},
                {"name": "read_file", "description": "reads a file",
                 "inputSchema": {"type": "object"}}
            ]}),
            _ => json!({}),
        };
        if let Some(id) = id {
            self.reply(&id, result);
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut record = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--record" => record = Some(args.next().expect("--record PATH")),
            other => {
                eprintln!("sloppy_upstream: unknown argument `{other}`");
                std::process::exit(2);
            }
        }
    }
    let record = record.map(|path| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open record file")
    });
    let mut server = Server {
        record,
        out: std::io::stdout(),
    };
    let mut input = std::io::stdin().lock();
    let mut buf = [0u8; 8192];
    let mut line = Vec::new();
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b != b'\n' && b != b'\r' {
                line.push(b);
                continue;
            }
            let text = String::from_utf8_lossy(&line).into_owned();
            line.clear();
            if let Ok(value) = serde_json::from_str::<Value>(text.trim()) {
                server.handle(&value, &text);
            }
        }
    }
}
