//! `toolgate status`: is the approval broker reachable, and are its files safe.
#![allow(clippy::print_stdout, reason = "this command's output is its stdout")]

use std::process::ExitCode;

use anyhow::Context as _;

use toolgate_broker::paths::{self, Layout};
use toolgate_broker::proto::{FromBroker, Role, VERSION};

/// Show the approval broker's state: reachable, protocol, file modes, who is connected.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  toolgate status
  toolgate status && toolgate approvals --json")]
pub struct Args {}

/// What `status` found (also used by `doctor`).
#[derive(Debug, Clone)]
pub struct Report {
    /// The broker's answer, or why it is unreachable.
    pub broker: Result<Broker, String>,
}

/// A reachable broker's status.
#[derive(Debug, Clone)]
pub struct Broker {
    pub pid: u32,
    pub version: u32,
    pub proxies: usize,
    pub approvers: usize,
    pub pending: usize,
    pub sessions: usize,
    pub shared_tokens: usize,
}

/// Asks the broker for its status.
pub async fn probe(layout: &Layout) -> Report {
    let broker = async {
        let mut conn = toolgate_broker::connect(layout, Role::Status, None, None).await?;
        match conn.recv().await {
            Ok(Some(FromBroker::Status {
                version,
                pid,
                proxies,
                approvers,
                pending,
                sessions,
                shared_tokens,
            })) => Ok(Broker {
                pid,
                version,
                proxies,
                approvers,
                pending,
                sessions,
                shared_tokens,
            }),
            Ok(other) => Err(format!("the broker sent no status ({other:?})")),
            Err(e) => Err(e.to_string()),
        }
    }
    .await;
    Report { broker }
}

/// Runs `toolgate status`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    let layout = Layout::for_user();
    let runtime =
        toolgate_runtime::rt::current_thread().context("cannot start the async runtime")?;
    let report = runtime.block_on(probe(&layout));
    match &report.broker {
        Ok(b) => outln!(
            "broker:     reachable (pid {}), protocol {} (this toolgate speaks {VERSION})",
            b.pid,
            b.version
        ),
        Err(why) => outln!("broker:     not reachable: {why}"),
    }
    outln!("you:        uid {}", paths::my_uid());
    outln!(
        "directory:  {} ({})",
        layout.dir.display(),
        paths::describe(&layout.dir)
    );
    outln!(
        "socket:     {} ({})",
        layout.socket.display(),
        paths::describe(&layout.socket)
    );
    outln!(
        "token:      {} ({})",
        layout.token.display(),
        paths::describe(&layout.token)
    );
    outln!(
        "store:      {} ({})",
        layout.store.display(),
        paths::describe(&layout.store)
    );
    match &report.broker {
        Ok(b) => {
            outln!("proxies:    {} connected", b.proxies);
            outln!("approvers:  {} connected", b.approvers);
            outln!("pending:    {}", b.pending);
            outln!(
                "sessions:   {} sharing {} taint tokens",
                b.sessions,
                b.shared_tokens
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(_) => Ok(ExitCode::from(1)),
    }
}
