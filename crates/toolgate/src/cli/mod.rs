//! Command-line interface: one file per subcommand.
//!
//! Each subcommand module exposes `Args` (a `clap::Args`) and
//! `run(args) -> anyhow::Result<ExitCode>`. Only `wrap` must never print to stdout:
//! there stdout carries JSON-RPC frames and nothing else.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod approvals;
mod approvals_gateway;
pub mod audit;
pub mod auth;
pub mod broker;
pub mod completions;
pub mod configure;
pub mod demo;
pub mod doctor;
pub mod gateway;
pub use toolgate_broker::hook::command as hook;
pub mod init;
pub mod logs;
pub mod pins;
pub mod policy;
pub mod report;
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
    propagate_version = true,
    after_help = "Examples:
  toolgate demo
  toolgate policy init && toolgate policy check --policy toolgate.yaml
  toolgate init --client claude-code --policy \"$PWD/toolgate.yaml\"
  toolgate wrap --policy toolgate.yaml \\
    -- npx -y @modelcontextprotocol/server-filesystem \"$PWD\"

`toolgate help COMMAND` or `toolgate COMMAND --help` shows a command's options and examples."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Approve or deny calls waiting for a human (terminal UI, --plain, --json).
    Approvals(approvals::Args),
    /// Verify, summarise and read the audit log.
    Audit(audit::Args),
    /// Log in to remote MCP servers (OAuth), show or forget their credentials.
    Auth(auth::Args),
    /// Run the approval broker that collects every proxy's questions (one per user).
    Broker(broker::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::Args),
    /// Watch toolgate stop a hijacked agent: offline, no setup.
    Demo(demo::Args),
    /// Check the policy, the broker, client configurations and a server's start-up.
    Doctor(doctor::Args),
    /// Serve MCP servers over HTTP to many agents, with one policy, audit and shared state.
    Gateway(gateway::Args),
    /// Decide a coding agent's own tools from a client hook (Claude Code, Cursor).
    Hook(hook::Args),
    /// Put toolgate in front of a client's MCP servers (Claude Code, Cursor, …).
    Init(init::Args),
    /// List or forget the tool definitions trusted on first use.
    Pins(pins::Args),
    /// Write, check, explain and test policies.
    Policy(policy::Args),
    /// Review a setup: what is enforced per tool, gaps, what happened (Markdown, JSON, HTML).
    Report(report::Args),
    /// Run an MCP server for policy work: check verdicts, validate policies, read the audit.
    Serve(serve::Args),
    /// Show whether the approval broker is reachable and who is connected.
    Status(status::Args),
    /// Undo `toolgate init`: restore the original MCP server entries.
    Unwrap(unwrap::Args),
    /// Run an MCP server behind toolgate: `toolgate wrap -- CMD ARGS...`.
    Wrap(Box<wrap::Args>),
}

/// Parses the command line, runs the subcommand and maps its outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: anyhow::Result<ExitCode> = match cli.command {
        Command::Approvals(args) => approvals::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Auth(args) => auth::run(args),
        Command::Broker(args) => broker::run(args),
        Command::Completions(args) => {
            completions::run(args, <Cli as clap::CommandFactory>::command())
        }
        Command::Demo(args) => demo::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Gateway(args) => gateway::run(args),
        Command::Hook(args) => hook::run(args),
        Command::Init(args) => init::run(args),
        Command::Pins(args) => pins::run(args),
        Command::Policy(args) => policy::run(args),
        Command::Report(args) => report::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Status(args) => status::run(args),
        Command::Unwrap(args) => unwrap::run(args),
        Command::Wrap(args) => wrap::run(*args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("toolgate: {}", error_text(&err));
            ExitCode::from(2)
        }
    }
}

/// An error and its causes, `a: b: c`, each cause once: one whose text the message already
/// holds (an error that prints its source itself) is not repeated.
fn error_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let cause = cause.to_string();
        if text.is_empty() {
            text = cause;
        } else if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}
