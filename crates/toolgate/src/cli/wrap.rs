//! `toolgate wrap [OPTIONS] -- CMD ARGS...`: run an MCP server behind the firewall.
//!
//! stdout carries JSON-RPC frames and nothing else; diagnostics go to stderr
//! (`TOOLGATE_LOG`, an env-filter, default `warn`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;

use crate::child;
use crate::proxy::{self, ProxyConfig, RelayConfig};

/// Run an MCP server behind toolgate: a stdio server as a child, or a remote one (`--url`).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  toolgate wrap -- npx -y @modelcontextprotocol/server-filesystem \"$PWD\"
  toolgate wrap --policy ./toolgate.yaml --server filesystem --workspace \"$PWD\" \\
    -- npx -y @modelcontextprotocol/server-filesystem \"$PWD\"
  TOOLGATE_LOG=debug toolgate wrap --approval tty --approval-timeout 60s \\
    -- npx -y @modelcontextprotocol/server-filesystem \"$PWD\"
  toolgate wrap --server github --url https://api.githubcopilot.com/mcp/ \\
    --header 'Authorization: Bearer ${GITHUB_TOKEN}'

stdout carries only MCP frames; diagnostics and the server's stderr go to stderr.")]
pub struct Args {
    /// A name for the upstream server (used in logs and policy).
    #[arg(long, value_name = "NAME")]
    pub server: Option<String>,
    /// The directory the server runs in [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// The longest accepted JSON-RPC message, in bytes.
    #[arg(long, value_name = "N", default_value_t = 64 * 1024 * 1024)]
    pub max_message_bytes: usize,
    /// After each message, keep polling for the next one for this many microseconds before
    /// sleeping (0: sleep at once). Saves a wake-up per hop when messages follow each other
    /// closely, for at most this much CPU time per message. Default: 50, or 0 on a machine
    /// with a single CPU (where polling would only delay the peers).
    #[arg(long, value_name = "US")]
    pub poll_us: Option<u64>,
    /// Grace period in milliseconds between closing the server's stdin, SIGTERM and SIGKILL.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub grace_ms: u64,
    /// Policy, audit and approval options.
    #[command(flatten)]
    pub enforce: crate::enforce::setup::EnforceArgs,
    /// Remote server options (`--url`).
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// The server command and its arguments.
    #[arg(
        last = true,
        required_unless_present = "url",
        conflicts_with = "url",
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

/// `wrap --url`: a remote MCP server over Streamable HTTP (or HTTP+SSE).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Remote servers")]
pub struct RemoteArgs {
    /// The remote server's MCP endpoint (https, or http to loopback), instead of a command.
    #[arg(long, value_name = "URL")]
    pub url: Option<url::Url>,
    /// A header sent with every request, `Name: value`; `${VAR}` in the value is read from
    /// the environment (keep secrets out of argv). Repeatable.
    #[arg(long = "header", value_name = "NAME: VALUE", requires = "url")]
    pub headers: Vec<String>,
    /// The transport: Streamable HTTP, falling back to HTTP+SSE (`auto`), or one of them.
    #[arg(long, value_enum, default_value_t = crate::remote::streamable::TransportKind::Auto, requires = "url")]
    pub transport: crate::remote::streamable::TransportKind,
    /// The longest a request waits for the remote server's response.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = crate::duration::parse_duration, requires = "url")]
    pub request_timeout: Duration,
    /// OAuth (when the server asks for it and no `Authorization` header is given) and the
    /// network flags (`--allow-http`, `--ca-file`).
    #[command(flatten)]
    pub oauth: crate::remote::oauth::OAuthArgs,
}

/// Runs `toolgate wrap`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    init_tracing();
    anyhow::ensure!(
        !super::serve::server::is_serve_command(&args.command),
        "refusing to wrap `toolgate serve`: the management server reads the audit log and decides hypothetical calls, and must never be reachable through a wrapped (agent-facing) server\n  help: add `toolgate serve` to the client configuration directly, without `toolgate wrap`"
    );
    let workspace = match args.workspace {
        Some(dir) => dir,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    anyhow::ensure!(
        workspace.is_dir(),
        "workspace `{}` is not a directory",
        workspace.display()
    );
    let config = ProxyConfig {
        relay: RelayConfig {
            max_message_bytes: args.max_message_bytes.max(1),
            poll: Duration::from_micros(args.poll_us.unwrap_or_else(default_poll_us)),
        },
        grace: Duration::from_millis(args.grace_ms),
    };
    if let Some(name) = &args.server {
        tracing::debug!("wrapping server `{name}`");
    }
    let interceptor = crate::enforce::setup::interceptor(
        &args.enforce,
        &workspace,
        args.server.as_deref(),
        args.remote
            .url
            .as_ref()
            .map(crate::remote::http::redact)
            .as_deref(),
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    if let Some(url) = &args.remote.url {
        let code = runtime.block_on(remote_upstream(config, &args.remote, url, interceptor))?;
        runtime.shutdown_background();
        return Ok(ExitCode::from(code));
    }
    let code = runtime.block_on(async {
        let upstream = child::spawn_upstream(&args.command, &workspace)?;
        if let Some(pid) = upstream.id() {
            crate::fsfacts::set_server_pid(pid);
        }
        proxy::run(config, upstream, interceptor).await
    })?;
    // The stdin reader thread may still be blocked in read(2): do not wait for it.
    runtime.shutdown_background();
    Ok(ExitCode::from(code))
}

/// Relays to a remote server.
async fn remote_upstream(
    config: ProxyConfig,
    args: &RemoteArgs,
    url: &url::Url,
    interceptor: std::sync::Arc<dyn crate::proxy::Interceptor>,
) -> anyhow::Result<u8> {
    use crate::remote::{headers, http, oauth, streamable};
    let net = args.oauth.net.options();
    http::check_url(url, net.allow_http, "server URL")?;
    let headers = headers::parse(&args.headers, |name| std::env::var(name).ok())?;
    let client = http::client(&net)?;
    // Credentials given as a header are the user's choice: no OAuth then.
    let auth = if headers.contains_key(reqwest::header::AUTHORIZATION) {
        None
    } else {
        Some(oauth::authorizer_with_client(
            url,
            &args.oauth,
            &net,
            client.clone(),
        )?)
    };
    tracing::debug!("relaying to `{}`", http::redact(url));
    let started = streamable::start(
        client,
        streamable::Options {
            url: url.clone(),
            headers,
            auth,
            max_message_bytes: config.relay.max_message_bytes,
            kind: args.transport,
            request_timeout: args.request_timeout,
            grace: config.grace,
        },
    );
    proxy::run_transport(
        config,
        started.to_upstream,
        started.from_upstream,
        started.task,
        interceptor,
    )
    .await
}

/// `--poll-us` when it is not given: polling only pays when the client and the server can
/// run on other CPUs while the relay polls.
fn default_poll_us() -> u64 {
    match std::thread::available_parallelism() {
        Ok(cpus) if cpus.get() > 1 => crate::proxy::relay::DEFAULT_POLL_US,
        _ => 0,
    }
}

/// Diagnostics on stderr (`TOOLGATE_LOG`, an env-filter, default `warn`); also `toolgate
/// auth`'s (a refused refresh, a wrong `state` at the callback).
pub(super) fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
