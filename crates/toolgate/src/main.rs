//! `toolgate`: a local, fail-closed firewall for MCP tool calls.

mod approval;
mod approvals_ui;
mod broker;
mod child;
mod cli;
mod clients;
mod demo;
mod enforce;
mod fsfacts;
mod pins;
mod proxy;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
