//! `toolgate`: a local, fail-closed firewall for MCP tool calls.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
