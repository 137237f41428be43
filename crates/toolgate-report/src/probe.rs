//! `toolgate report --probe -- CMD ARGS…`: start a server, `initialize`, list every page of
//! its tools, and stop it, all within a time limit (the conversation itself is the
//! runtime's stdio probe, shared with `toolgate doctor --probe`).

use std::ffi::OsString;
use std::time::Duration;

use serde_json::Value;
use toolgate_runtime::stdio_probe::StdioServer;

/// Starts `command` in `cwd`, lists its tools and stops it. `Err` says why not.
pub fn probe(
    command: &[OsString],
    cwd: &std::path::Path,
    timeout: Duration,
) -> Result<Vec<Value>, String> {
    let rt = toolgate_runtime::rt::current_thread()
        .map_err(|e| format!("cannot start the probe: {e}"))?;
    rt.block_on(async {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| "no command given after `--probe --`".to_owned())?;
        let mut server = StdioServer::start(program, args, Some(cwd))?;
        let work = server.list_tools("toolgate-report", "toolgate-report");
        let out = match tokio::time::timeout(timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "the server did not list its tools within {} s",
                timeout.as_secs()
            )),
        };
        server.stop().await;
        out
    })
}
