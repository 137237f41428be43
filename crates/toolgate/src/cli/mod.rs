//! Command-line interface: one file per subcommand.
//!
//! Each subcommand module exposes `Args` (a `clap::Args`) and
//! `run(args) -> anyhow::Result<ExitCode>`. Only `wrap` must never print to stdout:
//! there stdout carries JSON-RPC frames and nothing else.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod approvals;
pub mod audit;
pub mod broker;
pub mod completions;
pub mod demo;
pub mod doctor;
pub mod init;
pub mod pins;
pub mod policy;
pub mod serve;
pub mod status;
pub mod unwrap;
pub mod wrap;

#[derive(Debug, Parser)]
#[command(
    name = "toolgate",
    version,
    about = "A local, fail-closed firewall for MCP tool calls",
    long_about = None,
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Approve or deny the calls waiting at the local broker (terminal UI, --plain, --json).
    Approvals(approvals::Args),
    /// Read the audit log: `verify` its hash chain, `summary`, `tail`.
    Audit(audit::Args),
    /// Run the local approval broker (one per user): proxies ask, `toolgate approvals` answers.
    Broker(broker::Args),
    /// Print a shell completion script: bash, zsh, fish, elvish, powershell.
    Completions(completions::Args),
    /// Watch toolgate decide real calls: a scripted agent, a demo server, no setup.
    Demo(demo::Args),
    /// Check the policy, the approval broker, client configurations and an upstream's start-up.
    Doctor(doctor::Args),
    /// Wrap the MCP servers of a client's configuration (Claude Code, Cursor, …) with toolgate.
    Init(init::Args),
    /// Tool definitions trusted on first use: `list`, `forget`.
    Pins(pins::Args),
    /// Write, check, explain and test policies: `init`, `check`, `explain`, `test`, `schema`.
    Policy(policy::Args),
    /// Run toolgate's management MCP server (stdio): check verdicts, validate policies, packs, audit.
    Serve(serve::Args),
    /// Show the approval broker's state: reachable, protocol, file modes, connections.
    Status(status::Args),
    /// Restore the MCP servers `toolgate init` wrapped.
    Unwrap(unwrap::Args),
    /// Run an MCP server (stdio) behind toolgate: `toolgate wrap -- CMD ARGS...`.
    Wrap(wrap::Args),
}

/// Parses the command line, runs the subcommand and maps its outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: anyhow::Result<ExitCode> = match cli.command {
        Command::Approvals(args) => approvals::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Broker(args) => broker::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Init(args) => init::run(args),
        Command::Pins(args) => pins::run(args),
        Command::Policy(args) => policy::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Status(args) => status::run(args),
        Command::Unwrap(args) => unwrap::run(args),
        Command::Wrap(args) => wrap::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("toolgate: {err:#}");
            ExitCode::from(2)
        }
    }
}
