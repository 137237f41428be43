//! A scriptable fake MCP server for fault tests. Not an MCP implementation: it answers
//! every request with its own params, and special `test/*` methods trigger faults.
//!
//! Flags:
//! - `--record PATH`: append every line received on stdin to PATH (byte for byte).
//! - `--pid-file PATH`: write this process's pid to PATH at start.
//! - `--stay-after-eof`: keep running after stdin closes (for grace/kill tests).
//! - `--exit-on-eof N`: exit code when stdin closes (default 0).
//! - `--greeting LINE`: write LINE to stdout at start-up.
//! - `--tools-pages`: `tools/list` answers in two pages (`x`, then `t` after the cursor
//!   `page-2`).
//! - `--tools-list-hang`: never answer `tools/list`.
//! - `--x-description TEXT`: the description of `x` in `tools/list` (default `test tool x`).
//! - `--tools-file PATH`: `tools/list` answers with the JSON array in PATH as its `tools`
//!   (a server whose tool definitions a test writes, hostile ones included).
//!
//! Requests (`params` members in parentheses):
//! - any method: `{"jsonrpc":"2.0","id":<id>,"result":{"method":<m>,"params":<params>}}`,
//!   the id and params echoed byte for byte;
//! - `test/crash` (`code`): exit at once with `code` (default 42), no reply;
//! - `test/hang`: never reply;
//! - `tools/call` with a string argument `result`: reply with that text as the result,
//!   written verbatim;
//! - `test/verbatim` (`lines`: strings): write each string as one stdout line, then reply;
//! - `test/garbage`: write a non-JSON line and an invalid UTF-8 line, then reply;
//! - `test/giant` (`bytes`, `reply`): write a non-JSON line of `bytes` bytes; if `reply` is
//!   true, make it a response to this request instead (an oversize response); else reply;
//! - `test/flood` (`count`): write `count` notifications, then reply;
//! - `test/ask` (`method`, `id`, `params`): send a request to the client with that raw id,
//!   wait for the client's response and reply with it as `{"clientResponse": <response>}`;
//! - `test/exit` (`code`): reply, then exit with `code`;
//! - `tools/list` (`testDescription`): two tools, `x` and `t`, taking any object, in one
//!   page; `testDescription` replaces the description of `x` (a rug pull on demand).
//!
//! Notifications and unsolicited responses are only recorded.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "a test server: bad input or setup aborts it loudly, which the test sees; a stdio test server: stdout is its protocol channel, stderr its log"
)]

use std::fs::OpenOptions;
use std::io::{BufRead, Write};

use serde_json::Value;
use serde_json::value::RawValue;

#[derive(serde::Deserialize)]
struct Msg<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut record = None;
    let mut stay_after_eof = false;
    let mut exit_on_eof = 0;
    let mut greeting = None;
    let mut tools_pages = false;
    let mut tools_list_hang = false;
    let mut x_description = "test tool x".to_owned();
    let mut tools_file = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--record" => record = Some(args.next().expect("--record PATH")),
            "--pid-file" => {
                std::fs::write(
                    args.next().expect("--pid-file PATH"),
                    std::process::id().to_string(),
                )
                .expect("write pid file");
            }
            "--stay-after-eof" => stay_after_eof = true,
            "--exit-on-eof" => {
                exit_on_eof = args.next().expect("--exit-on-eof N").parse().expect("N")
            }
            "--greeting" => greeting = Some(args.next().expect("--greeting LINE")),
            "--tools-pages" => tools_pages = true,
            "--tools-list-hang" => tools_list_hang = true,
            "--x-description" => x_description = args.next().expect("--x-description TEXT"),
            "--tools-file" => {
                let path = args.next().expect("--tools-file PATH");
                let text = std::fs::read_to_string(&path).expect("read --tools-file");
                let tools: serde_json::Value =
                    serde_json::from_str(&text).expect("--tools-file holds JSON");
                assert!(tools.is_array(), "--tools-file holds a JSON array of tools");
                tools_file = Some(tools.to_string());
            }
            other => {
                eprintln!("fake_upstream: unknown argument `{other}`");
                std::process::exit(2);
            }
        }
    }
    let mut record = record.map(|path| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open record file")
    });
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if let Some(line) = greeting {
        writeln!(out, "{line}").unwrap();
        out.flush().unwrap();
    }
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut line = Vec::new();
    // A pending `test/ask`: the raw id of the original request, and the id we asked with.
    let mut asking: Option<(String, String)> = None;
    loop {
        line.clear();
        let n = input.read_until(b'\n', &mut line).expect("read stdin");
        if n == 0 {
            break;
        }
        let body = line.strip_suffix(b"\n").unwrap_or(&line);
        if let Some(file) = &mut record {
            file.write_all(body).unwrap();
            file.write_all(b"\n").unwrap();
            file.flush().unwrap();
        }
        let Ok(msg) = serde_json::from_slice::<Msg<'_>>(body) else {
            continue;
        };
        let Some(method) = msg.method else {
            // A response from the client: is it the one `test/ask` waits for?
            if let (Some((orig, asked)), Some(id)) = (&asking, msg.id)
                && id.get() == asked
            {
                let reply = format!(
                    r#"{{"jsonrpc":"2.0","id":{orig},"result":{{"clientResponse":{}}}}}"#,
                    String::from_utf8_lossy(body)
                );
                writeln!(out, "{reply}").unwrap();
                out.flush().unwrap();
                asking = None;
            }
            continue;
        };
        let Some(id) = msg.id else { continue };
        let id = id.get().to_owned();
        let params: Value = msg
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let echo = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"method":{},"params":{}}}}}"#,
            serde_json::to_string(&method).unwrap(),
            msg.params.map_or("null", |p| p.get())
        );
        match method.as_str() {
            "test/crash" => {
                std::process::exit(params["code"].as_i64().unwrap_or(42) as i32);
            }
            "test/hang" => continue,
            // A call with a string argument `result` is answered with that text as its
            // result, written as it is (JSON a client or toolgate may find unusual).
            "tools/call" if params["arguments"]["result"].is_string() => {
                let result = params["arguments"]["result"].as_str().unwrap_or_default();
                writeln!(out, r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#).unwrap();
                out.flush().unwrap();
                continue;
            }
            "tools/list" if tools_list_hang => continue,
            "tools/list" if tools_file.is_some() => {
                let tools = tools_file.as_deref().unwrap_or("[]");
                writeln!(
                    out,
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":{tools}}}}}"#
                )
                .unwrap();
                out.flush().unwrap();
                continue;
            }
            "tools/list" => {
                let x = params["testDescription"]
                    .as_str()
                    .unwrap_or(x_description.as_str());
                let x = serde_json::to_string(x).unwrap();
                let x = format!(
                    r#"{{"name":"x","description":{x},"inputSchema":{{"type":"object"}}}}"#
                );
                let t =
                    r#"{"name":"t","description":"test tool t","inputSchema":{"type":"object"}}"#;
                let tools = if !tools_pages {
                    format!(r#"{{"tools":[{x},{t}]}}"#)
                } else if params["cursor"] == "page-2" {
                    format!(r#"{{"tools":[{t}]}}"#)
                } else {
                    format!(r#"{{"tools":[{x}],"nextCursor":"page-2"}}"#)
                };
                writeln!(out, r#"{{"jsonrpc":"2.0","id":{id},"result":{tools}}}"#).unwrap();
                out.flush().unwrap();
                continue;
            }
            "test/verbatim" => {
                for l in params["lines"].as_array().cloned().unwrap_or_default() {
                    out.write_all(l.as_str().unwrap_or_default().as_bytes())
                        .unwrap();
                    out.write_all(b"\n").unwrap();
                }
            }
            "test/garbage" => {
                out.write_all(b"this is not json {\n").unwrap();
                out.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\xff\xfe\"}\n")
                    .unwrap();
                out.write_all(b"Server started on stdio\n").unwrap();
            }
            "test/giant" => {
                let bytes = params["bytes"].as_u64().unwrap_or(1 << 20) as usize;
                if params["reply"].as_bool().unwrap_or(false) {
                    let head = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"pad":""#);
                    out.write_all(head.as_bytes()).unwrap();
                    out.write_all(&vec![b'x'; bytes]).unwrap();
                    out.write_all(b"\"}}\n").unwrap();
                    out.flush().unwrap();
                    continue;
                }
                out.write_all(&vec![b'x'; bytes]).unwrap();
                out.write_all(b"\n").unwrap();
            }
            "test/flood" => {
                for i in 0..params["count"].as_u64().unwrap_or(1000) {
                    writeln!(
                        out,
                        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":{i}}}}}"#
                    )
                    .unwrap();
                }
            }
            "test/ask" => {
                let ask_id = params
                    .get("id")
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "\"srv-1\"".into());
                let ask_method = params["method"].as_str().unwrap_or("roots/list").to_owned();
                let ask_params = params
                    .get("params")
                    .cloned()
                    .unwrap_or(Value::Object(Default::default()));
                writeln!(
                    out,
                    r#"{{"jsonrpc":"2.0","id":{ask_id},"method":{},"params":{ask_params}}}"#,
                    serde_json::to_string(&ask_method).unwrap()
                )
                .unwrap();
                out.flush().unwrap();
                asking = Some((id, ask_id));
                continue;
            }
            "test/exit" => {
                writeln!(out, "{echo}").unwrap();
                out.flush().unwrap();
                std::process::exit(params["code"].as_i64().unwrap_or(0) as i32);
            }
            _ => {}
        }
        writeln!(out, "{echo}").unwrap();
        out.flush().unwrap();
    }
    drop(out);
    if stay_after_eof {
        // What it simulates: a server that never exits after its stdin closed.
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    std::process::exit(exit_on_eof);
}
