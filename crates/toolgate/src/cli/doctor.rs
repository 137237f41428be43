//! `toolgate doctor`: is everything in place? PASS / WARN / FAIL lines; exit 1 on any FAIL.
#![allow(clippy::print_stdout, reason = "this command's output is its stdout")]

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use toolgate_broker::Layout;
use toolgate_clients::discovery::{self, Client, Env};
use toolgate_clients::document::{self, Outcome, WrapSettings};
use toolgate_clients::hooks::{self, HookClient, HookScope};
use toolgate_clients::remote;
use toolgate_runtime::remote::probe::{self, Auth, Target, Transport as ProbeTransport};
use toolgate_runtime::stdio_probe::{NoReply, Reply, StdioServer};

/// Check the policy, the approval broker, client configurations, their remote servers and
/// (optionally) that an upstream server starts.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  toolgate doctor
  toolgate doctor --policy ./toolgate.yaml --no-remote
  toolgate doctor --remote-timeout 10s
  toolgate doctor --probe -- npx -y @modelcontextprotocol/server-filesystem \"$PWD\"

Every remote (HTTP) server of the client configurations, wrapped or not, is probed: can it be
reached, does it speak Streamable HTTP or the legacy HTTP+SSE transport, which protocol
revision, and does it want authorization. Header values are resolved as the client would
(`${VAR}`, `${env:VAR}`) and never printed; a session the probe opens is closed again.")]
pub struct Args {
    /// The policy to check [default: `toolgate.yaml` in the current directory when it exists
    /// (and whether it is trusted), and the built-in starter policy when something uses it].
    #[arg(long, value_name = "PATH")]
    pub policy: Option<PathBuf>,
    /// How long the start-up probe waits for the `initialize` reply.
    #[arg(long, value_name = "DURATION", default_value = "10s",
          value_parser = toolgate_runtime::enforce::setup::parse_duration)]
    pub probe_timeout: Duration,
    /// Start the MCP server command given after `--`, send `initialize` and wait for its
    /// reply: `toolgate doctor --probe -- CMD ARGS...`.
    #[arg(long, requires = "command")]
    pub probe: bool,
    /// The server command for `--probe`.
    #[arg(last = true, value_name = "CMD", requires = "probe")]
    pub command: Vec<OsString>,
    /// Do not contact the remote (HTTP) servers of the client configurations.
    #[arg(long)]
    pub no_remote: bool,
    /// How long the probe of one remote server may take.
    #[arg(long, value_name = "DURATION", default_value = "5s",
          value_parser = toolgate_runtime::enforce::setup::parse_duration)]
    pub remote_timeout: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Info,
    Pass,
    Warn,
    Fail,
}

struct Out {
    failed: bool,
}

impl Out {
    fn line(&mut self, level: Level, text: impl AsRef<str>) {
        let tag = match level {
            Level::Info => "INFO",
            Level::Pass => "PASS",
            Level::Warn => "WARN",
            Level::Fail => {
                self.failed = true;
                "FAIL"
            }
        };
        outln!("{tag}  {}", crate::approvals_ui::safe(text.as_ref()));
    }
}

/// A policy and workspace in use: a wrapped server entry or a hook command.
struct InUse {
    /// What uses them, for messages: ``claude-code `/p/.mcp.json` server `fs` ``.
    what: String,
    /// `--policy` (`None`: the starter policy).
    policy: Option<String>,
    /// `--workspace` (`None`: what the client provides).
    workspace: Option<String>,
    /// What the workspace is without `--workspace`.
    implicit: &'static str,
}

/// `--policy` and `--workspace` of a `toolgate wrap` entry's arguments (`None` when the
/// entry does not run toolgate's `wrap`).
fn wrap_options(value: &serde_json::Value) -> Option<(Option<String>, Option<String>)> {
    let command = value.get("command")?.as_str()?;
    if std::path::Path::new(command)
        .file_name()
        .is_none_or(|n| n != "toolgate")
    {
        return None;
    }
    let args: Vec<&str> = value
        .get("args")?
        .as_array()?
        .iter()
        .map(serde_json::Value::as_str)
        .collect::<Option<_>>()?;
    if args.first() != Some(&"wrap") {
        return None;
    }
    let (mut policy, mut workspace) = (None, None);
    let mut it = args.iter().skip(1);
    while let Some(arg) = it.next() {
        match *arg {
            "--" => break,
            "--policy" => policy = it.next().map(|v| (*v).to_owned()),
            "--workspace" => workspace = it.next().map(|v| (*v).to_owned()),
            other => {
                if let Some(v) = other.strip_prefix("--policy=") {
                    policy = Some(v.to_owned());
                } else if let Some(v) = other.strip_prefix("--workspace=") {
                    workspace = Some(v.to_owned());
                }
            }
        }
    }
    Some((policy, workspace))
}

/// Every policy and workspace in use: a policy that does not load denies every call of
/// the entries that use it (FAIL); a workspace that is missing, `$HOME` or `/` is a FAIL,
/// none at all a warning.
fn check_in_use(out: &mut Out, uses: &[InUse]) {
    let mut policies: Vec<(&str, Vec<&str>)> = Vec::new();
    for u in uses {
        if let Some(p) = &u.policy {
            match policies.iter_mut().find(|(q, _)| q == p) {
                Some((_, users)) => users.push(&u.what),
                None => policies.push((p, vec![&u.what])),
            }
        }
    }
    for (policy, users) in &policies {
        let shown_users = users.join(", ");
        match toolgate_clients::check_policy(std::path::Path::new(policy)) {
            Ok(()) => out.line(
                Level::Pass,
                format!("policy `{policy}` loads (used by {shown_users})"),
            ),
            Err((_, summary)) => out.line(
                Level::Fail,
                format!(
                    "{shown_users} would deny every call: {summary}. help: fix it and check it with `toolgate policy check --policy {policy}`"
                ),
            ),
        }
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .map(|h| h.canonicalize().unwrap_or(h));
    for u in uses {
        let Some(w) = &u.workspace else {
            out.line(
                Level::Warn,
                format!(
                    "{} has no `--workspace`: its `${{workspace}}` is {}. help: run `toolgate unwrap`, then `toolgate init` again (it writes `--workspace`)",
                    u.what, u.implicit
                ),
            );
            continue;
        };
        let real = std::path::Path::new(w).canonicalize();
        let problem = match &real {
            Err(_) => Some("does not exist".to_owned()),
            Ok(r) if !r.is_dir() => Some("is not a directory".to_owned()),
            Ok(r) => toolgate_runtime::enforce::setup::workspace_problem(r, home.as_deref())
                .map(str::to_owned),
        };
        if let Some(problem) = problem {
            out.line(
                Level::Fail,
                format!(
                    "{}: its workspace `{w}` {problem}. help: run `toolgate unwrap`, then `toolgate init --workspace DIR` with the project's directory",
                    u.what
                ),
            );
        }
    }
}

/// Runs `toolgate doctor`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut out = Out { failed: false };
    let mut uses: Vec<InUse> = Vec::new();
    if args.policy.is_some() {
        check_policy(&mut out, args.policy.as_ref());
    }
    let runtime =
        toolgate_runtime::rt::current_thread().context("cannot start the async runtime")?;
    let report = runtime.block_on(crate::cli::status::probe(&Layout::for_user()));
    match &report.broker {
        Ok(b) => {
            out.line(
                Level::Pass,
                format!(
                    "approval broker reachable (pid {}, protocol {}, {} proxies, {} approvers)",
                    b.pid, b.version, b.proxies, b.approvers
                ),
            );
            if b.approvers == 0 {
                out.line(
                    Level::Warn,
                    "no approval terminal is connected. help: run `toolgate approvals`",
                );
            }
        }
        Err(why) if why.contains("cannot be trusted") || why.contains("cannot be used") => {
            out.line(Level::Fail, format!("approval broker: {why}"));
        }
        Err(why) => out.line(
            Level::Warn,
            format!("approval broker: {why} (needed only for clients that cannot ask)"),
        ),
    }
    let remote = check_clients(&mut out, &mut uses);
    if args.no_remote {
        if !remote.is_empty() {
            out.line(
                Level::Info,
                format!("{} remote servers not probed (`--no-remote`)", remote.len()),
            );
        }
    } else {
        runtime.block_on(check_remote(&mut out, &remote, args.remote_timeout));
    }
    check_hooks(&mut out, report.broker.is_ok(), &mut uses);
    if args.policy.is_none() {
        check_policy_here(&mut out, &uses);
    }
    // The starter policy, when something uses it (or nothing is set up yet).
    if args.policy.is_none() && (uses.is_empty() || uses.iter().any(|u| u.policy.is_none())) {
        check_policy(&mut out, None);
    }
    check_in_use(&mut out, &uses);
    if args.probe {
        let verdict = runtime.block_on(probe_upstream(&args.command, args.probe_timeout));
        match verdict {
            Ok(info) => out.line(
                Level::Pass,
                format!("upstream starts and answers `initialize`: {info}"),
            ),
            Err(why) => out.line(Level::Fail, format!("upstream probe: {why}")),
        }
    }
    runtime.shutdown_background();
    Ok(if out.failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `./toolgate.yaml`, when there is one: valid (unless an entry or hook in `uses` names it:
/// that check says it), and trusted for the enforcing commands.
fn check_policy_here(out: &mut Out, uses: &[InUse]) {
    use toolgate_runtime::trust;
    let here = match trust::here(std::path::Path::new(".")) {
        Ok(Some(here)) => here,
        Ok(None) => return,
        Err(why) => {
            out.line(Level::Fail, why);
            return;
        }
    };
    out.line(
        Level::Info,
        format!("policy `./{}` of this directory", trust::DEFAULT_POLICY),
    );
    let named = uses.iter().any(|u| {
        u.policy
            .as_deref()
            .and_then(|p| std::fs::canonicalize(p).ok())
            .is_some_and(|p| p == here.path)
    });
    if !named {
        check_policy(out, Some(&PathBuf::from(trust::DEFAULT_POLICY)));
    }
    match trust::is_trusted(&here.path, &here.sha256) {
        Ok(true) => out.line(
            Level::Pass,
            format!(
                "`./{}` is trusted as it is: `toolgate wrap` and `toolgate hook` started here without --policy enforce it",
                trust::DEFAULT_POLICY
            ),
        ),
        Ok(false) => out.line(
            Level::Warn,
            format!(
                "`./{}` is not trusted as it is: `toolgate wrap` and `toolgate hook` started here without --policy deny every call. help: review it and run `toolgate policy trust`",
                trust::DEFAULT_POLICY
            ),
        ),
        Err(why) => out.line(Level::Fail, why),
    }
}

fn check_policy(out: &mut Out, path: Option<&PathBuf>) {
    let (source, name) = match path {
        Some(p) => match std::fs::read_to_string(p) {
            Ok(s) => (s, p.display().to_string()),
            Err(e) => {
                out.line(
                    Level::Fail,
                    format!("policy `{}` cannot be read: {e}", p.display()),
                );
                return;
            }
        },
        None => (
            toolgate_policy::STARTER_POLICY.to_owned(),
            "starter policy".to_owned(),
        ),
    };
    match toolgate_policy::load(&source, &name) {
        Ok(_) => out.line(Level::Pass, format!("policy `{name}` is valid")),
        Err(d) => out.line(
            Level::Fail,
            format!(
                "policy `{name}` does not load: {}. help: run `toolgate policy check --policy {name}`",
                d.render_plain().lines().next().unwrap_or("invalid policy")
            ),
        ),
    }
}

/// A remote server of a client configuration, to probe.
struct RemoteServer {
    client: &'static str,
    found: remote::Found,
}

/// Reports the client configurations; returns their remote servers.
fn check_clients(out: &mut Out, uses: &mut Vec<InUse>) -> Vec<RemoteServer> {
    let mut remote_servers = Vec::new();
    let env = match Env::from_process() {
        Ok(env) => env,
        Err(e) => {
            out.line(
                Level::Warn,
                format!("client configurations not searched: {e}"),
            );
            return remote_servers;
        }
    };
    let found = discovery::discover(&Client::ALL, &env);
    if found.is_empty() {
        out.line(
            Level::Warn,
            "no MCP client configuration found. help: run `toolgate init --config PATH`",
        );
        return remote_servers;
    }
    let settings = WrapSettings {
        exe: "toolgate".to_owned(),
        policy: None,
        workspace: Some(String::new()),
        dialect: toolgate_clients::remote::Dialect::Other,
        broker_dir: None,
    };
    for location in found {
        let client: &'static str = location.client.map_or("file", Client::name);
        let path = location.path.display();
        let text = match std::fs::read_to_string(&location.path) {
            Ok(t) => t,
            Err(e) => {
                out.line(
                    Level::Warn,
                    format!("{client} `{path}` cannot be read: {e}"),
                );
                continue;
            }
        };
        if let Ok(entries) = document::entries(&text, &location.maps) {
            for (map, name, value) in entries {
                if let Some((policy, workspace)) = wrap_options(&value) {
                    uses.push(InUse {
                        what: format!("{client} `{path}` server `{name}` ({map})"),
                        policy,
                        workspace,
                        implicit: "the directory the client starts it in",
                    });
                }
            }
        }
        if let Ok(servers) = remote::servers(&text, &location.maps) {
            remote_servers.extend(
                servers
                    .into_iter()
                    .map(|found| RemoteServer { client, found }),
            );
        }
        // A dry run of `init`: what it would wrap is what is not wrapped yet.
        match document::wrap(&text, &location.maps, None, &settings) {
            Ok(edited) => {
                let wrapped: Vec<&str> = edited
                    .entries
                    .iter()
                    .filter(|e| e.outcome == Outcome::AlreadyWrapped)
                    .map(|e| e.name.as_str())
                    .collect();
                let bare: Vec<&str> = edited
                    .entries
                    .iter()
                    .filter(|e| e.outcome == Outcome::Wrapped)
                    .map(|e| e.name.as_str())
                    .collect();
                let level = if bare.is_empty() {
                    Level::Pass
                } else {
                    Level::Warn
                };
                let mut text = format!("{client} `{path}`: wrapped [{}]", wrapped.join(", "));
                if !bare.is_empty() {
                    text.push_str(&format!(
                        "; NOT wrapped [{}]. help: run `toolgate init`",
                        bare.join(", ")
                    ));
                }
                out.line(level, text);
            }
            Err(e) => out.line(
                Level::Warn,
                format!("{client} `{path}` cannot be parsed: {e}"),
            ),
        }
    }
    remote_servers
}

/// The probe of one remote entry: its URL, transport and headers, the headers resolved as
/// the client would (`${VAR}`, `${VAR:-default}`, `${env:VAR}`; `mcp-remote`'s from the
/// entry's `env` first). Also the names of headers left out because they cannot be resolved
/// here (a VS Code `${input:…}`, an unset variable).
fn probe_target(
    spec: &remote::RemoteSpec,
    timeout: Duration,
) -> Result<(Target, Vec<String>), String> {
    let url = url::Url::parse(&spec.url).map_err(|e| format!("the URL is invalid: {e}"))?;
    let transport = match spec.transport {
        remote::Transport::Auto => ProbeTransport::Auto,
        remote::Transport::StreamableHttp => ProbeTransport::StreamableHttp,
        remote::Transport::Sse => ProbeTransport::Sse,
    };
    let lookup = |name: &str| -> Option<String> {
        spec.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok())
    };
    let mut headers = HeaderMap::new();
    let mut omitted = Vec::new();
    for header in &spec.headers {
        let value =
            remote::resolve(&header.value, &lookup).and_then(|v| HeaderValue::from_str(&v).ok());
        match (HeaderName::from_bytes(header.name.as_bytes()), value) {
            (Ok(name), Some(mut value)) => {
                value.set_sensitive(true);
                headers.append(name, value);
            }
            _ => omitted.push(header.name.clone()),
        }
    }
    // No credentials in the entry: the OAuth login `toolgate auth login` stored, if any, as
    // `wrap --url` would send it (an expired token is left out: `wrap` refreshes it first).
    if !headers.contains_key(reqwest::header::AUTHORIZATION)
        && let Some(value) = stored_authorization(&url)
    {
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    Ok((
        Target {
            url,
            transport,
            headers,
            timeout,
            allow_http: spec.allow_http,
        },
        omitted,
    ))
}

/// The `Authorization` value of the stored, unexpired OAuth token for `url`.
fn stored_authorization(url: &url::Url) -> Option<HeaderValue> {
    use toolgate_runtime::remote::oauth::{session::server_key, store};
    let store = store::Store::open_default().ok()?;
    let entry = store.find(&server_key(url), None).ok()??;
    let tokens = entry.tokens?;
    if tokens.expired(store::now()) {
        return None;
    }
    let mut value = HeaderValue::from_str(&tokens.header()).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Probes every remote server (one at a time, each within `timeout`).
async fn check_remote(out: &mut Out, servers: &[RemoteServer], timeout: Duration) {
    if servers.is_empty() {
        return;
    }
    let client = match toolgate_runtime::remote::http::client(
        &toolgate_runtime::remote::http::NetOptions::default(),
    ) {
        Ok(c) => c,
        Err(e) => {
            out.line(Level::Fail, format!("remote servers not probed: {e:#}"));
            return;
        }
    };
    for server in servers {
        let client_name = server.client;
        let name = &server.found.name;
        let spec = match &server.found.spec {
            Ok(spec) => spec,
            Err(why) => {
                out.line(
                    Level::Warn,
                    format!("{client_name} remote server `{name}` not probed: {why}"),
                );
                continue;
            }
        };
        let shown = url::Url::parse(&spec.url)
            .map(|u| toolgate_runtime::remote::http::redact(&u))
            .unwrap_or_else(|_| spec.url.clone());
        let (target, omitted) = match probe_target(spec, timeout) {
            Ok(t) => t,
            Err(why) => {
                out.line(
                    Level::Warn,
                    format!("{client_name} remote server `{name}` not probed: {why}"),
                );
                continue;
            }
        };
        let wrapped = if server.found.wrapped {
            ", wrapped"
        } else {
            ""
        };
        let prefix = format!("{client_name} remote server `{name}` (`{shown}`{wrapped})");
        let mut note = String::new();
        if !omitted.is_empty() {
            let names: Vec<String> = omitted.iter().map(|n| format!("`{n}`")).collect();
            note = format!(
                " (header {} not sent: its value comes from the client and cannot be resolved here)",
                names.join(", ")
            );
        }
        match probe::probe(&client, &target).await {
            Ok(report) => {
                let mut facts = Vec::new();
                if let Some(transport) = report.transport {
                    facts.push(transport.to_owned());
                }
                if let Some(protocol) = &report.protocol {
                    facts.push(format!("protocol {protocol}"));
                }
                if let Some(server) = &report.server {
                    facts.push(format!("server `{server}`"));
                }
                let (level, auth) = match report.auth {
                    Auth::NotRequired => (Level::Pass, "no authorization required".to_owned()),
                    Auth::Authorized => (Level::Pass, "authorized".to_owned()),
                    Auth::NeedsAuthorization { sent: true, .. } => (
                        Level::Warn,
                        format!(
                            "the server refused the entry's `Authorization` header (HTTP 401): needs authorization, run `toolgate auth login {shown}`"
                        ),
                    ),
                    Auth::NeedsAuthorization { challenge, .. } => (
                        Level::Warn,
                        format!(
                            "needs authorization{}, run `toolgate auth login {shown}`",
                            if challenge {
                                ""
                            } else {
                                " (HTTP 401 without `WWW-Authenticate`)"
                            }
                        ),
                    ),
                    Auth::Forbidden => (
                        Level::Warn,
                        format!(
                            "refused (HTTP 403): the credentials are not enough. help: run `toolgate auth login {shown}`"
                        ),
                    ),
                };
                facts.push(auth);
                out.line(
                    level,
                    format!("{prefix}: reachable, {}{note}", facts.join(", ")),
                );
            }
            Err(why) => out.line(Level::Fail, format!("{prefix}: {why}{note}")),
        }
    }
}

/// toolgate's hooks in the coding agents' settings (user and project), and whether their
/// command can run.
fn check_hooks(out: &mut Out, broker_reachable: bool, uses: &mut Vec<InUse>) {
    let Ok(env) = Env::from_process() else {
        return;
    };
    let mut any = false;
    for client in HookClient::ALL {
        let mut found = false;
        for scope in [HookScope::User, HookScope::Project] {
            let path = client.path(scope, &env);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let shown = path.display();
            let name = client.name();
            let fix = format!(
                "help: run `toolgate init --client {name} --hooks --scope {}`",
                scope.name()
            );
            let events = match hooks::installed(&text, client) {
                Ok(e) => e,
                Err(e) => {
                    out.line(
                        Level::Warn,
                        format!(
                            "{name} {} hooks `{shown}` cannot be read: {e}",
                            scope.name()
                        ),
                    );
                    continue;
                }
            };
            let present: Vec<&str> = events
                .iter()
                .filter(|(_, c)| c.is_some())
                .map(|(e, _)| *e)
                .collect();
            if present.is_empty() {
                continue;
            }
            found = true;
            let mut commands: Vec<&str> = events.iter().filter_map(|(_, c)| c.as_deref()).collect();
            commands.sort_unstable();
            commands.dedup();
            for command in commands {
                uses.push(InUse {
                    what: format!("{name} {} hooks `{shown}`", scope.name()),
                    policy: hooks::option_of(command, "--policy"),
                    workspace: hooks::option_of(command, "--workspace"),
                    implicit: "the directory the client reports, which follows the agent's `cd`",
                });
            }
            let missing: Vec<&str> = events
                .iter()
                .filter(|(_, c)| c.is_none())
                .map(|(e, _)| *e)
                .collect();
            // A command that cannot start is an error the clients do not treat as a deny:
            // the call would run unchecked.
            let broken: Vec<String> = events
                .iter()
                .filter_map(|(_, c)| c.as_deref())
                .filter_map(hooks::program_of)
                .filter(|p| p.starts_with('/') && !std::path::Path::new(p).is_file())
                .collect();
            // An entry written before hooks failed closed: if its program cannot run, the
            // client lets the call through.
            let open = events
                .iter()
                .filter_map(|(_, c)| c.as_deref())
                .any(|c| !hooks::fails_closed(c));
            if let Some(p) = broken.first() {
                out.line(
                    Level::Fail,
                    format!(
                        "{name} {} hooks `{shown}` run `{p}`, which does not exist: the client would let every call through. {fix}",
                        scope.name()
                    ),
                );
            } else if open {
                out.line(
                    Level::Warn,
                    format!(
                        "{name} {} hooks in `{shown}` do not fail closed: if toolgate cannot run (moved, uninstalled), the client runs every call unchecked. {fix}",
                        scope.name()
                    ),
                );
            } else if missing.is_empty() {
                out.line(
                    Level::Pass,
                    format!(
                        "{name} {} hooks installed in `{shown}` ({} events)",
                        scope.name(),
                        present.len()
                    ),
                );
            } else {
                out.line(
                    Level::Warn,
                    format!(
                        "{name} {} hooks in `{shown}` miss [{}]. {fix}",
                        scope.name(),
                        missing.join(", ")
                    ),
                );
            }
            let trust = match (client, scope) {
                (HookClient::GeminiCli, HookScope::Project) => {
                    Some(("Gemini CLI", hooks::gemini_trusts(&env, &env.project)))
                }
                (HookClient::CopilotCli, HookScope::Project) => {
                    Some(("Copilot CLI", hooks::copilot_trusts(&env, &env.project)))
                }
                _ => None,
            };
            match trust {
                Some((who, Ok(false))) => out.line(
                    Level::Warn,
                    format!(
                        "{name} project hooks in `{shown}` do not run: {who} reads a project's hooks only in a folder you trust. help: trust `{}` when {who} asks on its start there, or install the hooks with `--scope user`",
                        env.project.display()
                    ),
                ),
                Some((who, Err(e))) => out.line(
                    Level::Warn,
                    format!("cannot tell whether {who} trusts this project: {e}"),
                ),
                Some((_, Ok(true))) | None => {}
            }
            if client == HookClient::Codex {
                check_codex_trust(out, &env.project);
            }
            if let Some(p) = events
                .iter()
                .filter_map(|(_, c)| c.as_deref())
                .filter_map(hooks::program_of)
                .find(|p| hooks::build_dir_of(std::path::Path::new(p)).is_some())
            {
                out.line(
                    Level::Warn,
                    format!(
                        "{name} {} hooks in `{shown}` run `{p}` from a cargo build directory: a `cargo clean` or a rebuild blocks every call. help: install toolgate, then run `toolgate init --client {name} --hooks --scope {}` from there",
                        scope.name(),
                        scope.name()
                    ),
                );
            }
        }
        if found {
            any = true;
        } else {
            out.line(
                Level::Info,
                format!(
                    "no {} hooks installed (its built-in tools are not checked). help: run `toolgate init --client {} --hooks`",
                    client.name(),
                    client.name()
                ),
            );
        }
    }
    if check_opencode(out, &env) {
        any = true;
    }
    if any && !broker_reachable {
        out.line(
            Level::Info,
            "the hooks decide in the broker, which is not running now: the first hook starts it",
        );
    }
}

/// OpenCode's plugin: installed, the executable it runs present. Returns whether one is
/// installed.
fn check_opencode(out: &mut Out, env: &Env) -> bool {
    use toolgate_clients::opencode;
    let mut found = false;
    for scope in [HookScope::User, HookScope::Project] {
        let path = opencode::path(scope, env);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let fix = format!(
            "help: run `toolgate init --client opencode --hooks --scope {}`",
            scope.name()
        );
        if !opencode::is_ours(&text) {
            out.line(
                Level::Warn,
                format!(
                    "`{}` is not the plugin toolgate writes: OpenCode's tools are not checked by it. {fix}",
                    path.display()
                ),
            );
            continue;
        }
        found = true;
        match opencode::program_of(&text) {
            Some(p) if std::path::Path::new(&p).is_file() => out.line(
                Level::Pass,
                format!(
                    "opencode {} plugin installed in `{}`",
                    scope.name(),
                    path.display()
                ),
            ),
            Some(p) => out.line(
                Level::Fail,
                format!(
                    "opencode {} plugin `{}` runs `{p}`, which does not exist: it denies every call. {fix}",
                    scope.name(),
                    path.display()
                ),
            ),
            None => out.line(
                Level::Warn,
                format!("opencode plugin `{}` names no executable. {fix}", path.display()),
            ),
        }
    }
    if !found {
        out.line(
            Level::Info,
            "no opencode plugin installed (its built-in tools are not checked). help: run `toolgate init --client opencode --hooks`",
        );
    }
    found
}

/// Whether Codex trusts toolgate's hooks it loads for `project` (it runs an untrusted or
/// changed hook not at all, and says nothing), asked of Codex's app server.
fn check_codex_trust(out: &mut Out, project: &std::path::Path) {
    use toolgate_clients::codex_trust;
    let Some(codex) = codex_trust::find_codex() else {
        out.line(
            Level::Info,
            "codex hooks: no `codex` on PATH, so toolgate cannot ask Codex whether it trusts them",
        );
        return;
    };
    match codex_trust::list(&codex, project) {
        Ok(listed) => {
            let ours: Vec<_> = listed
                .iter()
                .filter(|h| hooks::is_our_command(&h.command, HookClient::Codex))
                .collect();
            let untrusted: Vec<&str> = ours
                .iter()
                .filter(|h| h.trust != "trusted" && h.trust != "managed")
                .map(|h| h.key.as_str())
                .collect();
            if ours.is_empty() {
                out.line(
                    Level::Warn,
                    format!(
                        "codex loads none of toolgate's hooks in `{}` (a project's `.codex/` is read only once the project is trusted). help: start Codex there and trust the project",
                        project.display()
                    ),
                );
            } else if untrusted.is_empty() {
                out.line(
                    Level::Pass,
                    format!("codex trusts toolgate's {} hooks", ours.len()),
                );
            } else {
                out.line(
                    Level::Fail,
                    format!(
                        "codex does not run {} of toolgate's hooks: not trusted, or changed since they were ([{}]). help: run `toolgate init --client codex --hooks` again, or trust them in Codex's `/hooks` review",
                        untrusted.len(),
                        untrusted.join(", ")
                    ),
                );
            }
        }
        Err(e) => out.line(
            Level::Warn,
            format!("cannot ask Codex whether it trusts toolgate's hooks: {e}"),
        ),
    }
}

/// Starts `command`, sends `initialize`, waits for the reply; `Ok` names the server.
async fn probe_upstream(command: &[OsString], timeout: Duration) -> Result<String, String> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| "no command given".to_owned())?;
    let mut server = StdioServer::start(program, args, None)?;
    server
        .send_initialize("toolgate-doctor", "toolgate-doctor")
        .await?;
    let wait = async {
        match server.reply("toolgate-doctor", false).await {
            Ok(Reply::Result(result)) => {
                let name = result
                    .pointer("/serverInfo/name")
                    .and_then(|n| n.as_str())
                    .unwrap_or("?");
                let version = result
                    .get("protocolVersion")
                    .and_then(|n| n.as_str())
                    .unwrap_or("?");
                Ok(format!("`{name}`, protocol {version}"))
            }
            Ok(Reply::Error(error)) => Err(format!("the server refused `initialize`: {error}")),
            Err(NoReply::NotJson(line)) => Err(format!(
                "the server wrote a non-JSON line on stdout: `{}`",
                line.chars().take(80).collect::<String>()
            )),
            Err(NoReply::Exited | NoReply::Unreadable(_)) => {
                Err("the server exited without answering `initialize`".to_owned())
            }
        }
    };
    let verdict = tokio::time::timeout(timeout, wait)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "no reply to `initialize` within {} s",
                timeout.as_secs()
            ))
        });
    server.kill();
    verdict
}
