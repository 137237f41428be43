//! `toolgate unwrap`: restore the servers `toolgate init` wrapped.

use std::process::ExitCode;

use super::configure::{Action, Selection};

/// Restore the MCP servers wrapped by `toolgate init` to their original entries.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  toolgate unwrap --dry-run
  toolgate unwrap --client claude-code --keep-backup
  toolgate unwrap --config ./.mcp.json --server github --yes
  toolgate unwrap --client claude-code --hooks")]
pub struct Args {
    #[command(flatten)]
    selection: Selection,
    /// Keep the `.toolgate.bak` backup of each file restored (by default it is removed once
    /// the file reads back as written)
    #[arg(long)]
    keep_backup: bool,
}

/// Runs `toolgate unwrap`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::configure::run(
        &args.selection,
        &Action::Unwrap {
            keep_backup: args.keep_backup,
        },
    )
}
