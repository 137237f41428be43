//! PLACEHOLDER (lead's minimal CLI; helper/auth's replaces it at merge).
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, value_name = "PATH")]
    pub config: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = crate::gateway::load_config(&args.config)?;
    crate::gateway::run(config, args.config)
}
