//! `toolgate report --probe -- CMD ARGS…`: start a server, `initialize`, list every page of
//! its tools, and stop it, all within a time limit.

use std::ffi::OsString;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

/// At most this many pages are followed (a server whose cursor never ends cannot hold the
/// probe forever; the time limit bounds it too).
const MAX_PAGES: usize = 1000;

/// Starts `command` in `cwd`, lists its tools and stops it. `Err` says why not.
pub fn probe(
    command: &[OsString],
    cwd: &std::path::Path,
    timeout: Duration,
) -> Result<Vec<Value>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the probe: {e}"))?;
    rt.block_on(async {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| "no command given after `--probe --`".to_owned())?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("`{}` cannot be started: {e}", program.to_string_lossy()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("no pipes to the server".to_owned());
        };
        let work = talk(stdin, stdout);
        let out = match tokio::time::timeout(timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "the server did not list its tools within {} s",
                timeout.as_secs()
            )),
        };
        let _ = child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
        out
    })
}

async fn send(stdin: &mut tokio::process::ChildStdin, v: &Value) -> Result<(), String> {
    let mut bytes = serde_json::to_vec(v).map_err(|e| e.to_string())?;
    bytes.push(b'\n');
    stdin
        .write_all(&bytes)
        .await
        .map_err(|e| format!("the server closed its input: {e}"))
}

type Lines = tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>;

/// The result of the reply to request `id`; other lines are skipped.
async fn next_reply(lines: &mut Lines, id: &str) -> Result<Value, String> {
    loop {
        let line = lines
            .next_line()
            .await
            .map_err(|e| format!("cannot read the server's output: {e}"))?;
        let Some(line) = line else {
            return Err("the server exited before answering".to_owned());
        };
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if v.get("id").and_then(Value::as_str) != Some(id) {
            continue;
        }
        if let Some(r) = v.get("result") {
            return Ok(r.clone());
        }
        return Err(format!(
            "the server answered with an error: {}",
            v.get("error").map(ToString::to_string).unwrap_or_default()
        ));
    }
}

async fn talk(
    mut stdin: tokio::process::ChildStdin,
    stdout: tokio::process::ChildStdout,
) -> Result<Vec<Value>, String> {
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    send(
        &mut stdin,
        &json!({"jsonrpc":"2.0","id":"toolgate-report-init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"toolgate-report","version":env!("CARGO_PKG_VERSION")}}}),
    )
    .await?;
    next_reply(&mut lines, "toolgate-report-init").await?;
    send(
        &mut stdin,
        &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    )
    .await?;
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0..MAX_PAGES {
        let id = format!("toolgate-report-list-{page}");
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        send(
            &mut stdin,
            &json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":params}),
        )
        .await?;
        let result = next_reply(&mut lines, &id).await?;
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
