//! `toolgate demo`: see the proxy decide real calls in ten seconds, no setup, no network.

use std::path::PathBuf;
use std::process::ExitCode;

use std::io::Write as _;

use anyhow::Context;

use crate::demo::{self, Observed, Sandbox, Seen, Style};

/// Run a scripted agent against a demo MCP server through the real proxy.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Runs a scripted agent against an embedded demo MCP server through the real \
                  proxy (`toolgate wrap`) with an embedded policy, and prints one line per call. \
                  Uses a temporary workspace and a fake home directory; needs no network and no \
                  API key.",
    after_help = "Examples:
  toolgate demo
  toolgate demo --keep
  NO_COLOR=1 toolgate demo

A scripted agent calls an embedded demo server through the real proxy with an embedded
policy. It uses a temporary workspace and home; no network, no API key."
)]
pub struct Args {
    /// Keep the temporary directory (policy, audit log, outbox) and print its path.
    #[arg(long)]
    keep: bool,
    /// Internal: run the embedded demo MCP server on stdin/stdout.
    #[arg(long, hide = true)]
    internal_server: bool,
    #[arg(long, hide = true, requires = "internal_server")]
    workspace: Option<PathBuf>,
    #[arg(long, hide = true, requires = "internal_server")]
    outbox: Option<PathBuf>,
    #[arg(long, hide = true, requires = "internal_server")]
    rug_pull_after: Option<u64>,
    #[arg(long, hide = true, requires = "internal_server")]
    record: Option<PathBuf>,
    #[arg(long, hide = true, requires = "internal_server")]
    rug_pulled: bool,
}

/// Prints a line to stdout; a closed stdout (`toolgate demo | head`) is not an error.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// What each scripted call is expected to show, in order.
const EXPECTED: [Seen; 10] = [
    Seen::Allow, // read_file README.md
    Seen::Deny,  // read_file ~/.ssh/id_rsa
    Seen::Allow, // npm test
    Seen::Deny,  // sudo rm -rf ~
    Seen::Allow, // read_inbox
    Seen::Deny,  // send_email to the attacker (tainted)
    Seen::Ask,   // send_email to a new address
    Seen::Allow, // send_email to a trusted address
    Seen::Allow, // fetch
    Seen::Ask,   // fetch after the rug pull
];

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.internal_server {
        let workspace = args.workspace.context("missing --workspace")?;
        let outbox = args.outbox.context("missing --outbox")?;
        demo::server::serve(&demo::server::ServerConfig {
            workspace,
            outbox,
            rug_pull_after: args.rug_pull_after,
            record: args.record,
            rug_pulled: args.rug_pulled,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let style = Style::detect();
    let exe = std::env::current_exe().context("cannot find the toolgate executable")?;
    let sandbox = Sandbox::create()?;
    say!(
        "{}",
        style_bold(
            style,
            "toolgate demo: a scripted agent calls a demo MCP server through the real proxy"
        )
    );
    say!(
        "  workspace {}  ·  fake home {}",
        sandbox.workspace.display(),
        sandbox.home.display()
    );
    say!();
    let mut print = |o: &Observed| say!("{}", o.line(style));
    let report = match demo::run_session(&exe, &sandbox, &mut print) {
        Ok(report) => report,
        Err(err) => {
            let tail = demo::proxy_log_tail(&sandbox);
            if !tail.is_empty() {
                eprintln!("the proxy's log ended with:\n{tail}");
            }
            if args.keep {
                keep(sandbox);
            }
            return Err(err.context("the demo could not finish"));
        }
    };
    say!();
    let forwarded = report.observed.iter().filter(|o| o.reached_server).count();
    say!(
        "The server saw {forwarded} of {} calls; everything else was stopped by toolgate before it arrived.",
        report.observed.len()
    );
    let recipients: Vec<String> = report
        .outbox
        .iter()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|v| v.get("to").and_then(|t| t.as_str()).map(str::to_owned))
        .collect();
    let attacker_mailed = recipients.iter().any(|r| r == demo::server::ATTACKER);
    say!(
        "Mail actually sent: {}.{}",
        if recipients.is_empty() {
            "none".to_owned()
        } else {
            recipients.join(", ")
        },
        if attacker_mailed {
            ""
        } else {
            " The attacker got nothing."
        }
    );
    let mismatches: Vec<String> = report
        .observed
        .iter()
        .zip(EXPECTED)
        .filter(|(o, want)| o.seen != *want)
        .map(|(o, want)| format!("`{}` was {:?}, expected {want:?}", o.call, o.seen))
        .collect();
    if args.keep {
        say!("Audit log: {}", sandbox.audit.display());
        keep(sandbox);
    } else {
        say!(
            "Next: `toolgate policy init` writes a starter policy; wrap a server with `toolgate wrap -- <command>`."
        );
    }
    if attacker_mailed || !mismatches.is_empty() || report.observed.len() != EXPECTED.len() {
        eprintln!("toolgate demo: unexpected verdicts:");
        for m in &mismatches {
            eprintln!("  {m}");
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn keep(sandbox: Sandbox) {
    say!("Kept {}", sandbox.keep().display());
}

fn style_bold(style: Style, text: &str) -> String {
    if style.color {
        format!("\x1b[1m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}
