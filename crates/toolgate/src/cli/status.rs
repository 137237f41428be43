//! `toolgate status`: is the approval broker reachable, and are its files safe.
#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use anyhow::Context as _;

use crate::broker::paths::{self, Layout};
use crate::broker::proto::{FromBroker, Role, VERSION};

/// Show the approval broker's state: reachable, protocol, file modes, who is connected.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// What `status` found (also used by `doctor`).
#[derive(Debug, Clone)]
pub struct Report {
    /// `Ok((broker pid, version, proxies, approvers, pending))` or why it is unreachable.
    pub broker: Result<(u32, u32, usize, usize, usize), String>,
}

/// Asks the broker for its status.
pub async fn probe(layout: &Layout) -> Report {
    let broker = async {
        let mut conn = crate::broker::connect(layout, Role::Status, None, None).await?;
        match conn.recv().await {
            Ok(Some(FromBroker::Status {
                version,
                pid,
                proxies,
                approvers,
                pending,
            })) => Ok((pid, version, proxies, approvers, pending)),
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime.block_on(probe(&layout));
    match &report.broker {
        Ok((pid, version, ..)) => println!(
            "broker:     reachable (pid {pid}), protocol {version} (this toolgate speaks {VERSION})"
        ),
        Err(why) => println!("broker:     not reachable: {why}"),
    }
    println!("you:        uid {}", paths::my_uid());
    println!(
        "directory:  {} ({})",
        layout.dir.display(),
        paths::describe(&layout.dir)
    );
    println!(
        "socket:     {} ({})",
        layout.socket.display(),
        paths::describe(&layout.socket)
    );
    println!(
        "token:      {} ({})",
        layout.token.display(),
        paths::describe(&layout.token)
    );
    match &report.broker {
        Ok((_, _, proxies, approvers, pending)) => {
            println!("proxies:    {proxies} connected");
            println!("approvers:  {approvers} connected");
            println!("pending:    {pending}");
            Ok(ExitCode::SUCCESS)
        }
        Err(_) => Ok(ExitCode::from(1)),
    }
}
