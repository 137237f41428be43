//! `toolgate`: a local, fail-closed firewall for MCP tool calls.

mod approval;
mod child;
mod cli;
mod demo;
mod enforce;
mod pins;
mod proxy;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
