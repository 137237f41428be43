//! `toolgate`: a local, fail-closed firewall for MCP tool calls.

mod approval;
mod cli;
mod demo;
mod enforce;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
