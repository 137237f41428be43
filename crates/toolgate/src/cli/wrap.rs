//! `toolgate wrap [OPTIONS] -- CMD ARGS...`: run an MCP server behind the firewall.
//!
//! stdout carries JSON-RPC frames and nothing else; diagnostics go to stderr
//! (`TOOLGATE_LOG`, an env-filter, default `warn`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;

use serde_json::Value;
use toolgate_audit::AuditWriter;
use toolgate_policy::TaintLimits;
use toolgate_runtime::approval::Mode;
use toolgate_runtime::approval::tty::TtyChannel;
use toolgate_runtime::child;
use toolgate_runtime::duration::parse_duration;
use toolgate_runtime::enforce::setup::{BrokenPolicy, enforcing_engine, workspace_problem};
use toolgate_runtime::enforce::{Backend, Enforcer, EngineBackend, PinSink, Settings};
use toolgate_runtime::pins::PinStore;
use toolgate_runtime::proxy::Interceptor;
use toolgate_runtime::proxy::{self, ProxyConfig, RelayConfig};

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
    pub enforce: EnforceArgs,
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
    #[arg(long, value_enum, default_value_t = toolgate_runtime::remote::streamable::TransportKind::Auto, requires = "url")]
    pub transport: toolgate_runtime::remote::streamable::TransportKind,
    /// The longest a request waits for the remote server's response.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = toolgate_runtime::duration::parse_duration, requires = "url")]
    pub request_timeout: Duration,
    /// OAuth (when the server asks for it and no `Authorization` header is given) and the
    /// network flags (`--allow-http`, `--ca-file`).
    #[command(flatten)]
    pub oauth: toolgate_runtime::remote::oauth::OAuthArgs,
}

/// Runs `toolgate wrap`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::logs::init("warn", super::logs::Format::Text);
    anyhow::ensure!(
        !toolgate_runtime::serve::is_serve_command(&args.command),
        "refusing to wrap `toolgate serve`: the management server reads the audit log and decides hypothetical calls, and must never be reachable through a wrapped (agent-facing) server\n  help: add `toolgate serve` to the client configuration directly, without `toolgate wrap`"
    );
    let workspace = toolgate_runtime::paths::workspace_or_cwd(args.workspace)?;
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
    let interceptor = interceptor(
        &args.enforce,
        &workspace,
        args.server.as_deref(),
        args.remote
            .url
            .as_ref()
            .map(toolgate_runtime::remote::http::redact)
            .as_deref(),
    )?;
    let runtime =
        toolgate_runtime::rt::current_thread().context("cannot start the async runtime")?;
    if let Some(url) = &args.remote.url {
        let code = runtime.block_on(remote_upstream(config, &args.remote, url, interceptor))?;
        runtime.shutdown_background();
        return Ok(ExitCode::from(code));
    }
    let code = runtime.block_on(async {
        let upstream = child::spawn_upstream(&args.command, &workspace)?;
        if let Some(pid) = upstream.id() {
            toolgate_runtime::fsfacts::set_server_pid(pid);
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
    interceptor: std::sync::Arc<dyn toolgate_runtime::proxy::Interceptor>,
) -> anyhow::Result<u8> {
    use toolgate_runtime::remote::{headers, http, oauth, streamable};
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
        Ok(cpus) if cpus.get() > 1 => toolgate_runtime::proxy::relay::DEFAULT_POLL_US,
        _ => 0,
    }
}

/// The enforcement options of `toolgate wrap`.
#[derive(Debug, Clone, clap::Args)]
pub struct EnforceArgs {
    /// The policy file [default: `toolgate.yaml` in the current directory when it exists and
    /// you trusted it (`toolgate policy trust`; untrusted, every call is denied), else the
    /// built-in starter policy].
    #[arg(long, value_name = "PATH")]
    pub policy: Option<PathBuf>,
    /// The audit log [default: the workspace's `.toolgate/audit.jsonl`].
    #[arg(long, value_name = "PATH")]
    pub audit: Option<PathBuf>,
    /// Also record raw arguments and results in the audit log (may contain secrets).
    #[arg(long)]
    pub audit_raw: bool,
    /// How to ask a human: the client (elicitation), the local broker, the terminal, or
    /// `none` (asks become denies). `auto` asks the client if it can, else the broker; the
    /// terminal only with `tty`.
    #[arg(long, value_name = "HOW", default_value = "auto", value_parser = parse_mode)]
    pub approval: Mode,
    /// How long a human has to answer before the call is denied, e.g. `120s`, `2m`.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_duration)]
    pub approval_timeout: Duration,
    /// How long a call to a tool the session has not listed waits for toolgate's own
    /// `tools/list` of the server (or a listing already in flight) before it fails closed.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub listing_timeout: Duration,
    /// The agent session this proxy belongs to at the approval broker
    /// [default: the parent process, i.e. the MCP client].
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// The approval broker's directory (by default `$TOOLGATE_BROKER_DIR`, else
    /// `$XDG_RUNTIME_DIR/toolgate`, else `/tmp/toolgate-<uid>`). `toolgate init` writes it
    /// for clients that start their servers without the user's environment (Codex), so that
    /// the proxy finds the broker the client's hooks use.
    #[arg(long, value_name = "DIR")]
    pub broker_dir: Option<PathBuf>,
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

/// Builds the interceptor for `toolgate wrap`.
pub fn interceptor(
    args: &EnforceArgs,
    workspace: &Path,
    server: Option<&str>,
    upstream: Option<&str>,
) -> anyhow::Result<std::sync::Arc<dyn Interceptor>> {
    // Pins persist per named server (trust on first use across runs).
    let pins = server.and_then(|name| match PinStore::open_default() {
        Ok(store) => Some(PinSink {
            store,
            server: name.to_owned(),
        }),
        Err(e) => {
            tracing::warn!("pins will not persist across runs: {e}");
            None
        }
    });
    let persisted: Vec<(String, Value)> = match &pins {
        Some(p) => match p.store.load_definitions(&p.server) {
            Ok(defs) => defs.into_iter().collect(),
            Err(e) => {
                tracing::warn!("cannot read the pins of `{}`: {e}", p.server);
                Vec::new()
            }
        },
        None => Vec::new(),
    };
    // The broker: where asks go when the client cannot ask, and where the proxies of one
    // agent session share what they saw.
    let layout = match &args.broker_dir {
        Some(dir) => toolgate_broker::Layout::in_dir(dir.clone()),
        None => toolgate_broker::Layout::for_user(),
    };
    let broker = std::sync::Arc::new(toolgate_broker::BrokerChannel::new(
        layout,
        args.approval == Mode::Broker,
        server.map(str::to_owned),
        Some(
            args.session
                .clone()
                .unwrap_or_else(toolgate_broker::client::default_session),
        ),
    ));
    if let Ok(real) = workspace.canonicalize() {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .and_then(|h| h.canonicalize().ok());
        if let Some(problem) = workspace_problem(&real, home.as_deref()) {
            tracing::warn!(
                "the workspace `{}` {problem}; help: pass `--workspace` with the project's directory",
                real.display()
            );
        }
    }
    let audit_path = args
        .audit
        .clone()
        .unwrap_or_else(|| toolgate_runtime::paths::default_audit(workspace));
    let cwd = std::env::current_dir().unwrap_or_else(|_| workspace.to_path_buf());
    let (chosen, which) =
        enforcing_engine(args.policy.as_deref(), &cwd, workspace, Some(&audit_path));
    if args.policy.is_none() {
        // Chosen without --policy: say which (stderr is the MCP client's log).
        eprintln!("toolgate: {which}");
    }
    let backend: Box<dyn Backend> =
        match chosen {
            Ok(engine) => {
                let taint: TaintLimits = engine.policy().taint.clone().unwrap_or_default();
                Box::new(EngineBackend::new(engine, taint, persisted).with_shared(
                    std::sync::Arc::new(toolgate_broker::client::BrokerShare(broker.clone())),
                ))
            }
            Err(reason) => {
                tracing::error!("{reason}; every tool call will be denied");
                Box::new(BrokenPolicy { reason })
            }
        };
    let (audit, audit_error) = match AuditWriter::open(&audit_path) {
        Ok(w) => {
            for warning in w.warnings() {
                tracing::warn!("audit log `{}`: {warning}", audit_path.display());
            }
            (Some(std::sync::Arc::new(w)), None)
        }
        Err(e) => {
            let reason = format!(
                "the audit log `{}` cannot be opened ({e}); toolgate denies calls it cannot record. help: fix the path or permissions, or pass --audit PATH",
                audit_path.display()
            );
            tracing::error!("{reason}");
            (None, Some(reason))
        }
    };
    let mut session = [0u8; 8];
    getrandom::fill(&mut session)
        .map_err(|e| anyhow::anyhow!("no randomness from the operating system: {e}"))?;
    let tty: std::sync::Arc<dyn toolgate_runtime::approval::ApprovalChannel> =
        std::sync::Arc::new(TtyChannel::default());
    let settings = Settings {
        server: server.map(str::to_owned),
        upstream: upstream.map(str::to_owned),
        approval: args.approval,
        approval_timeout: args.approval_timeout,
        listing_timeout: args.listing_timeout,
        tty: Some(tty),
        broker: Some(broker.clone()),
        shared_session: Some(std::sync::Arc::new(toolgate_broker::client::BrokerShare(
            broker,
        ))),
        index_before_delivery: false,
        user: None,
        replica: None,
        seal_key: None,
        observer: None,
        audit,
        audit_error,
        audit_raw: args.audit_raw,
        pins,
        session_id: hex::encode(session),
    };
    Ok(std::sync::Arc::new(Enforcer::new(backend, settings)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `init` and `unwrap` skip `wrap`'s options to find a server's command: their list is
    /// this command line's own.
    #[test]
    fn clients_know_every_wrap_option_that_takes_a_value() {
        let wrap = <Args as clap::Args>::augment_args(clap::Command::new("wrap"));
        let mut defined: Vec<&str> = wrap
            .get_arguments()
            .filter(|a| a.get_action().takes_values())
            .filter_map(|a| a.get_long())
            .collect();
        defined.sort_unstable();
        let mut listed = toolgate_clients::document::WRAP_OPTIONS_WITH_VALUES.to_vec();
        listed.sort_unstable();
        assert_eq!(listed, defined);
    }
}
