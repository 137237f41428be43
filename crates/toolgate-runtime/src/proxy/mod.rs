//! The stdio proxy: relays newline-delimited JSON-RPC between the MCP client (our
//! stdin/stdout) and the upstream server (a child process), through an [`Interceptor`].
//!
//! Invariants (see ARCHITECTURE.md): frames the interceptor forwards pass byte for byte;
//! every request the proxy blocks gets a reply; stdout carries only protocol frames;
//! per-direction order is kept; a parked decision never blocks other traffic.

mod handle;
pub mod intercept;
pub mod lines;
mod pipes;
pub mod relay;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use rustix::process::Signal;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, info, warn};

pub use handle::{ProxyError, ProxyHandle};
pub use intercept::{Direction, Interceptor, Message, Parked, Passthrough, StartFuture, Verdict};
pub use relay::{ORIGIN_ID_PREFIX, RelayConfig, UPSTREAM_EXITED};

use crate::child;

/// Proxy settings.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Framing and relay settings.
    pub relay: RelayConfig,
    /// How long to wait after closing the upstream's stdin before SIGTERM, and after
    /// SIGTERM before SIGKILL.
    pub grace: Duration,
}

/// The relay over this process's stdin/stdout and `upstream`, once the interceptor is ready
/// (nothing is read from the client until then), and the signals the lifecycle handles.
async fn start(
    config: &ProxyConfig,
    interceptor: &Arc<dyn Interceptor>,
    upstream: relay::UpstreamIo,
) -> anyhow::Result<(
    relay::Relay,
    tokio::signal::unix::Signal,
    tokio::signal::unix::Signal,
    tokio::signal::unix::Signal,
)> {
    interceptor.on_start().await;
    let client_in = relay::client_input(config.relay.max_message_bytes)?;
    let client_out = relay::client_sink()?;
    let relay = relay::Relay::start(
        &config.relay,
        Arc::clone(interceptor),
        client_in,
        client_out,
        upstream,
    );
    Ok((
        relay,
        signal(SignalKind::interrupt())?,
        signal(SignalKind::terminate())?,
        signal(SignalKind::hangup())?,
    ))
}

/// Runs the proxy over this process's stdin/stdout until the upstream exits; returns
/// toolgate's exit code (the upstream's, or 128+signal).
pub async fn run(
    config: ProxyConfig,
    mut upstream: tokio::process::Child,
    interceptor: Arc<dyn Interceptor>,
) -> anyhow::Result<u8> {
    let pid = upstream.id().unwrap_or(0);
    let (Some(child_in), Some(child_out)) = (upstream.stdin.take(), upstream.stdout.take()) else {
        anyhow::bail!("the upstream's stdin/stdout are not piped");
    };
    let (mut relay, mut sigint, mut sigterm, mut sighup) = start(
        &config,
        &interceptor,
        relay::UpstreamIo::Child(child_in, child_out),
    )
    .await?;

    let mut client_open = true;
    // The next escalation step: at this instant, send this signal to the group.
    let mut escalation: Option<(Instant, Signal)> = None;
    let far = Instant::now() + Duration::from_secs(86_400 * 365);

    let status = loop {
        let deadline = escalation.map_or(far, |(at, _)| at);
        tokio::select! {
            biased;
            status = upstream.wait() => break status?,
            _ = relay.client_done(), if client_open => {
                client_open = false;
                debug!("client closed its input; upstream has {:?} to exit", config.grace);
                escalation.get_or_insert((Instant::now() + config.grace, Signal::TERM));
            }
            _ = sigint.recv() => forward(pid, Signal::INT, &mut escalation, config.grace),
            _ = sigterm.recv() => forward(pid, Signal::TERM, &mut escalation, config.grace),
            _ = sighup.recv() => forward(pid, Signal::HUP, &mut escalation, config.grace),
            () = tokio::time::sleep_until(deadline), if escalation.is_some() => {
                if let Some((_, sig)) = escalation.take() {
                    warn!("upstream did not exit in time: sending {sig:?} to its process group");
                    child::signal_group(pid, sig);
                    if sig != Signal::KILL {
                        escalation = Some((Instant::now() + config.grace, Signal::KILL));
                    }
                }
            }
        }
    };
    info!("upstream exited: {status}");

    // Deliver what the upstream wrote before exiting, then answer what it never will.
    let drain = config.grace.min(Duration::from_secs(1));
    if tokio::time::timeout(drain, relay.upstream_done())
        .await
        .is_err()
    {
        debug!("upstream stdout still open after exit (a descendant holds it); not waiting");
    }
    relay.upstream_gone().await;
    relay.flush_client(Duration::from_secs(2)).await;
    interceptor.after_delivery();
    Ok(child::exit_code(status))
}

/// Runs the proxy over this process's stdin/stdout with a transport as the upstream (a
/// remote server): the same relay and interceptor as for a child. Ends when the client has
/// closed its input and the transport has finished (answered or given up on what was in
/// flight, ended its session), or on SIGINT/SIGTERM/SIGHUP after `config.grace`.
pub async fn run_transport(
    config: ProxyConfig,
    to_upstream: mpsc::Sender<bytes::Bytes>,
    from_upstream: mpsc::Receiver<lines::Line>,
    transport: tokio::task::JoinHandle<()>,
    interceptor: Arc<dyn Interceptor>,
) -> anyhow::Result<u8> {
    let (mut relay, mut sigint, mut sigterm, mut sighup) = start(
        &config,
        &interceptor,
        relay::UpstreamIo::Channel(to_upstream, from_upstream),
    )
    .await?;
    let mut transport = transport;
    let mut client_open = true;
    let mut code = 0u8;
    loop {
        tokio::select! {
            biased;
            _ = &mut transport => break,
            _ = relay.client_done(), if client_open => {
                // The relay closed the transport's input: it finishes what is in flight
                // and ends its session.
                client_open = false;
            }
            _ = sigint.recv() => { code = 128 + 2; break }
            _ = sigterm.recv() => { code = 128 + 15; break }
            _ = sighup.recv() => { code = 128 + 1; break }
        }
    }
    if !transport.is_finished() {
        relay.close_upstream().await;
        if tokio::time::timeout(config.grace, &mut transport)
            .await
            .is_err()
        {
            warn!("the transport did not finish in time: stopping it");
            transport.abort();
        }
    }
    // Deliver what the transport received, then answer what it never will.
    let _ = tokio::time::timeout(Duration::from_secs(1), relay.upstream_done()).await;
    relay.upstream_gone().await;
    relay.flush_client(Duration::from_secs(2)).await;
    interceptor.after_delivery();
    Ok(code)
}

fn forward(pid: u32, sig: Signal, escalation: &mut Option<(Instant, Signal)>, grace: Duration) {
    debug!("forwarding {sig:?} to the upstream's process group");
    child::signal_group(pid, sig);
    let kill_at = Instant::now() + grace;
    match escalation {
        Some((at, _)) if *at <= kill_at => {}
        _ => *escalation = Some((kill_at, Signal::KILL)),
    }
}
