//! `toolgate serve`: the management MCP server (stdio): check verdicts, validate policies,
//! list packs, summarise the audit log. Stdout carries JSON-RPC frames only.

use toolgate_runtime::serve as server;

use std::path::PathBuf;
use std::process::ExitCode;

/// Run toolgate's management MCP server on stdio.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  claude mcp add toolgate-admin -- toolgate serve --policy \"$PWD/toolgate.yaml\"
  toolgate serve --policy ./toolgate.yaml --workspace \"$PWD\"

It reads JSON-RPC on stdin and never writes the policy or the audit log.")]
pub struct Args {
    /// The policy `check_verdict` decides with [default: `toolgate.yaml` in the current
    /// directory when it exists, else the built-in starter policy].
    #[arg(long, value_name = "PATH")]
    pub policy: Option<PathBuf>,
    /// The audit log `audit_summary` reads (never written) [default: the workspace's `.toolgate/audit.jsonl`].
    #[arg(long, value_name = "PATH")]
    pub audit: Option<PathBuf>,
    /// The workspace (`${workspace}`) [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

/// Runs `toolgate serve` until stdin closes.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let workspace = toolgate_runtime::paths::workspace_or_cwd(args.workspace)?;
    let audit = args
        .audit
        .unwrap_or_else(|| toolgate_runtime::paths::default_audit(&workspace));
    // It decides nothing that runs: `./toolgate.yaml` is taken as it is, and named.
    let args_policy_given = args.policy.is_some();
    let policy = args.policy.or_else(|| {
        let here = PathBuf::from(toolgate_runtime::trust::DEFAULT_POLICY);
        here.is_file().then_some(here)
    });
    match &policy {
        Some(p) if args_policy_given => eprintln!("toolgate serve: policy `{}`", p.display()),
        Some(_) => crate::cli::policy::announce_here(),
        None => eprintln!("toolgate serve: the built-in starter policy"),
    }
    let server = server::Server::new(server::Config {
        policy,
        audit,
        workspace,
    });
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    match server::serve(&server, stdin, stdout) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // The client went away mid-answer: nothing is left to serve.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(e.context("the management server stopped")),
    }
}
