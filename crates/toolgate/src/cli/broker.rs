//! `toolgate broker`: run the per-user approval broker in the foreground.

use std::process::ExitCode;

use anyhow::Context as _;

use toolgate_broker::{Layout, daemon};

/// Run the local approval broker (one per user) until interrupted.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  toolgate broker                 # in a terminal of its own; Ctrl-C stops it
  nohup toolgate broker >/dev/null 2>&1 &   # in the background; `toolgate status` checks it")]
pub struct Args {
    /// Detach from the terminal and the starting process's session (used when a hook
    /// starts the broker).
    #[arg(long, hide = true)]
    pub daemon: bool,
}

/// Runs `toolgate broker`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.daemon {
        // A session of its own: the client's signals to its process group and terminal
        // never reach it. (Fails only for a group leader, which a spawned child is not.)
        let _ = rustix::process::setsid();
    }
    super::logs::init("info", super::logs::Format::Text);
    let layout = Layout::for_user();
    let runtime =
        toolgate_runtime::rt::current_thread().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let bound = daemon::bind(&layout)?;
        tracing::info!(
            "toolgate broker listening on `{}`; approve with `toolgate approvals`",
            layout.socket.display()
        );
        daemon::serve(bound, daemon::signals()).await;
        tracing::info!(
            "toolgate broker stopped; removed `{}`",
            layout.socket.display()
        );
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
