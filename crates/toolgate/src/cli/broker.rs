//! `toolgate broker`: run the per-user approval broker in the foreground.

use std::process::ExitCode;

use anyhow::Context as _;

use crate::broker::{Layout, daemon};

/// Run the local approval broker (one per user) until interrupted.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  toolgate broker                 # in a terminal of its own; Ctrl-C stops it
  nohup toolgate broker >/dev/null 2>&1 &   # in the background; `toolgate status` checks it")]
pub struct Args {}

/// Runs `toolgate broker`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
    let layout = Layout::for_user();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
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
