//! The upstream MCP server process: spawning it in its own process group, signalling
//! the group, and mapping its exit status to toolgate's exit code.

use std::ffi::OsString;
use std::path::Path;
use std::process::{ExitStatus, Stdio};

use anyhow::Context as _;
use rustix::process::{Pid, Signal, kill_process_group};
use tokio::process::{Child, Command};

/// Spawns `command` with cwd `workspace`, the full environment, its own process group,
/// stdin/stdout piped and stderr inherited.
pub fn spawn_upstream(command: &[OsString], workspace: &Path) -> anyhow::Result<Child> {
    let (program, args) = command
        .split_first()
        .context("no upstream command given\nhelp: `toolgate wrap -- <command> [args...]`")?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .kill_on_drop(false);
    cmd.spawn().with_context(|| {
        format!(
            "cannot start upstream `{}` in `{}`",
            program.to_string_lossy(),
            workspace.display()
        )
    })
}

/// Sends `signal` to the process group led by `pid`. Errors (e.g. the group is already
/// gone) are ignored: this is best effort on the way out.
pub fn signal_group(pid: u32, signal: Signal) {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return;
    };
    if let Err(err) = kill_process_group(pid, signal) {
        tracing::debug!("signalling process group {pid:?} with {signal:?}: {err}");
    }
}

/// toolgate's exit code for the upstream's exit status: its code, or 128+signal.
pub fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return u8::try_from(code & 0xff).unwrap_or(1);
    }
    match status.signal() {
        Some(sig) => u8::try_from((128 + sig) & 0xff).unwrap_or(1),
        None => 1,
    }
}
