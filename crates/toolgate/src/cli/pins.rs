//! `toolgate pins list|forget`: the tool definitions trusted on first use.
#![allow(clippy::print_stdout, reason = "this command's output is its stdout")]

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args as ClapArgs, Subcommand};
use serde_json::json;

use toolgate_runtime::pins::PinStore;

/// Arguments of `toolgate pins`.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:
  toolgate pins list
  toolgate pins forget --server filesystem --tool read_file")]
pub struct Args {
    #[command(subcommand)]
    command: PinsCommand,
}

#[derive(Debug, Subcommand)]
enum PinsCommand {
    /// Show the pinned tools (name, fingerprint, when pinned) per server.
    #[command(after_help = "Examples:
  toolgate pins list
  toolgate pins list --server filesystem --json")]
    List {
        /// Only this server.
        #[arg(long, value_name = "NAME")]
        server: Option<String>,
        /// One JSON document with the full definitions.
        #[arg(long)]
        json: bool,
    },
    /// Forget pins, so the next `tools/list` pins the current definitions again.
    #[command(after_help = "Examples:
  toolgate pins forget --server filesystem --tool read_file
  toolgate pins forget --server filesystem")]
    Forget {
        /// The server whose pins to forget.
        #[arg(long, value_name = "NAME")]
        server: String,
        /// Only this tool [default: every tool of the server]
        #[arg(long, value_name = "NAME")]
        tool: Option<String>,
    },
}

/// Runs `toolgate pins …`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let store = PinStore::open_default()?;
    match args.command {
        PinsCommand::List { server, json } => list(&store, server.as_deref(), json),
        PinsCommand::Forget { server, tool } => forget(&store, &server, tool.as_deref()),
    }
}

fn list(store: &PinStore, only: Option<&str>, as_json: bool) -> anyhow::Result<ExitCode> {
    let servers = match only {
        Some(name) => vec![(name.to_owned(), store.load(name))],
        None => store.all()?,
    };
    let mut failed = false;
    let mut rows = Vec::new();
    for (server, pins) in servers {
        match pins {
            Ok(pins) => {
                for (tool, pin) in pins {
                    rows.push((server.clone(), tool, pin));
                }
            }
            Err(err) => {
                eprintln!("toolgate: {err}");
                failed = true;
            }
        }
    }
    if as_json {
        let tools: Vec<_> = rows
            .iter()
            .map(|(server, tool, pin)| {
                json!({
                    "server": server,
                    "tool": tool,
                    "fingerprint": pin.fingerprint,
                    "pinned_at": pin.pinned_at,
                    "definition": pin.definition,
                })
            })
            .collect();
        let doc = json!({ "dir": store.dir(), "tools": tools });
        outln!(
            "{}",
            serde_json::to_string_pretty(&doc).context("cannot encode pins")?
        );
    } else if rows.is_empty() {
        match only {
            Some(name) => outln!(
                "no pinned tools for server `{}`",
                toolgate_audit::printable(name)
            ),
            None => outln!("no pinned tools in `{}`", store.dir().display()),
        }
    } else {
        let sw = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
        let tw = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
        for (server, tool, pin) in &rows {
            let fp: String = pin.fingerprint.chars().take(16).collect();
            let when = pin.pinned_at.as_deref().unwrap_or("-");
            let line = format!("{server:<sw$}  {tool:<tw$}  {fp}  {when}");
            outln!("{}", toolgate_audit::printable(&line));
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn forget(store: &PinStore, server: &str, tool: Option<&str>) -> anyhow::Result<ExitCode> {
    let removed = store.forget(server, tool)?;
    match (removed, tool) {
        (0, Some(tool)) => {
            eprintln!("toolgate: no pin for tool `{tool}` of server `{server}`");
            Ok(ExitCode::from(1))
        }
        (0, None) => {
            eprintln!("toolgate: no pins for server `{server}`");
            Ok(ExitCode::from(1))
        }
        (_, Some(tool)) => {
            outln!(
                "forgot the pin of tool `{tool}` of server `{server}`: its current definition will be pinned on next use"
            );
            Ok(ExitCode::SUCCESS)
        }
        (n, None) => {
            let s = if n == 1 { "" } else { "s" };
            outln!(
                "forgot {n} pinned tool{s} of server `{server}`: current definitions will be pinned on next use"
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
