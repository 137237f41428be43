//! `toolgate completions SHELL`: print a shell completion script.
use std::io::Write as _;
use std::process::ExitCode;

use clap_complete::Shell;

/// Print the completion script for a shell.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  toolgate completions bash > ~/.local/share/bash-completion/completions/toolgate\n  toolgate completions zsh > \"${fpath[1]}/_toolgate\"\n  toolgate completions fish > ~/.config/fish/completions/toolgate.fish"
)]
pub struct Args {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: Shell,
}

/// Writes the script for `cmd` (toolgate's whole command line) to stdout.
pub fn run(args: Args, mut cmd: clap::Command) -> anyhow::Result<ExitCode> {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "toolgate", &mut out);
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&out).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // `toolgate completions bash | head` is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(anyhow::anyhow!("cannot write the completion script: {e}")),
    }
}
