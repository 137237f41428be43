//! Building the enforcer for `toolgate wrap`: policy, audit log, approval channels.
//!
//! Nothing here fails open. A policy that cannot be loaded, or an audit log that cannot be
//! opened, still starts the proxy (so the client sees a working server and the agent gets a
//! clear answer), but every tool call is then denied with the reason and how to fix it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolgate_audit::AuditWriter;
use toolgate_policy::eval::Engine;
use toolgate_policy::load::{STARTER_POLICY, load};
use toolgate_policy::rules::Vars;
use toolgate_policy::taint::TaintLimits;

use super::backend::{Backend, Call, PinChanges, Ruling, Scope};
use super::{Enforcer, EngineBackend, PinSink, Settings};
use crate::approval::Mode;
use crate::approval::tty::TtyChannel;
use crate::pins::PinStore;
use crate::proxy::Interceptor;

/// The enforcement options of `toolgate wrap`.
#[derive(Debug, Clone, clap::Args)]
pub struct EnforceArgs {
    /// The policy file [default: the built-in starter policy, see `toolgate policy init`].
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
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

pub use crate::duration::parse_duration;

/// Denies every call with one reason: the policy could not be loaded.
#[derive(Debug)]
pub struct BrokenPolicy {
    pub reason: String,
}

impl Backend for BrokenPolicy {
    fn decide(&mut self, call: &Call<'_>, _now_ms: u64) -> Ruling {
        Ruling::error(call.tool, self.reason.clone())
    }
    fn decide_resource(&mut self, _server: Option<&str>, _uri: &str, _now_ms: u64) -> Ruling {
        Ruling::error("resources/read", self.reason.clone())
    }
    fn pin_tools(&mut self, _tools: Vec<Value>, _complete: bool) -> PinChanges {
        PinChanges::default()
    }
    fn record_output(&mut self, _server: Option<&str>, _tool: &str, _result: &Value) {}
    fn approve(&mut self, _call: &Call<'_>, _ruling: &Ruling, _scope: Scope) {}
    fn pins_to_persist(&self) -> std::collections::BTreeMap<String, Value> {
        std::collections::BTreeMap::new()
    }
}

fn canonical_dir(path: &Path) -> Option<String> {
    std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.to_str().map(str::to_owned))
}

/// Loads the policy and compiles it for this workspace and home, with toolgate's
/// self-protection (the audit log `audit`); `Err` is a reason that ends up in every denial.
fn engine(policy: Option<&Path>, workspace: &Path, audit: Option<&Path>) -> Result<Engine, String> {
    let source = read_policy(policy)?;
    engine_from_source(&source, policy, workspace, audit)
}

/// The text of the policy at `policy` (none: the built-in starter policy); `Err` is a reason
/// with the fix.
pub fn read_policy(policy: Option<&Path>) -> Result<String, String> {
    match policy {
        Some(path) => std::fs::read_to_string(path).map_err(|e| {
            format!(
                "the policy `{}` cannot be read ({e}). help: fix the path given with --policy",
                path.display()
            )
        }),
        None => Ok(STARTER_POLICY.to_owned()),
    }
}

/// Compiles the policy text `source` (read from `policy`, none: the starter policy) for
/// `workspace` and `$HOME`: what `wrap` runs, and what the broker keeps compiled for hooks.
/// toolgate's self-protection is built in (`crate::selfprotect`): the policy file, the audit
/// log `audit` (none: only the workspace's `.toolgate/`), and toolgate's other files.
pub fn engine_from_source(
    source: &str,
    policy: Option<&Path>,
    workspace: &Path,
    audit: Option<&Path>,
) -> Result<Engine, String> {
    let name = match policy {
        Some(path) => path.display().to_string(),
        None => "starter policy".to_owned(),
    };
    let loaded = load(source, &name).map_err(|d| {
        format!(
            "the policy `{name}` does not load: {}. help: run `toolgate policy check --policy {name}`",
            d.render_plain().lines().next().unwrap_or("invalid policy")
        )
    })?;
    let workspace = canonical_dir(workspace)
        .ok_or_else(|| format!("the workspace `{}` cannot be resolved", workspace.display()))?;
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .and_then(|h| canonical_dir(&h))
        .ok_or_else(|| {
            "the home directory (`$HOME`) cannot be resolved, so `~` and `${home}` rules cannot apply. help: set HOME".to_owned()
        })?;
    let engine = Engine::new(loaded.policy, Vars { workspace, home }).map_err(|d| {
        format!(
            "the policy `{name}` does not compile: {}. help: run `toolgate policy check --policy {name}`",
            d.render_plain().lines().next().unwrap_or("invalid policy")
        )
    })?;
    let vars_workspace = PathBuf::from(&engine.vars().workspace);
    let protections = crate::selfprotect::protections(policy, &vars_workspace, audit)
        .map_err(|e| format!("toolgate's self-protection cannot be set up: {e}"))?;
    Ok(engine.with_protections(protections))
}

/// What is wrong with `real` (a canonical directory) as a workspace, if anything: the root
/// directory, or the home directory or one above it (`${workspace}` would cover the user's
/// dotfiles and credentials).
pub fn workspace_problem(real: &Path, home: Option<&Path>) -> Option<&'static str> {
    if real == Path::new("/") {
        Some("is the root directory")
    } else if home == Some(real) {
        Some(
            "is your home directory: the policy's `${workspace}` covers your dotfiles and credentials",
        )
    } else if home.is_some_and(|h| h.starts_with(real)) {
        Some(
            "holds your home directory: the policy's `${workspace}` covers your dotfiles and credentials",
        )
    } else {
        None
    }
}

/// Builds the interceptor for `toolgate wrap`.
pub fn interceptor(
    args: &EnforceArgs,
    workspace: &Path,
    server: Option<&str>,
    upstream: Option<&str>,
) -> anyhow::Result<Arc<dyn Interceptor>> {
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
    let broker = Arc::new(crate::broker::BrokerChannel::new(
        crate::broker::Layout::for_user(),
        args.approval == Mode::Broker,
        server.map(str::to_owned),
        Some(
            args.session
                .clone()
                .unwrap_or_else(crate::broker::client::default_session),
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
        .unwrap_or_else(|| workspace.join(".toolgate").join("audit.jsonl"));
    let backend: Box<dyn Backend> =
        match engine(args.policy.as_deref(), workspace, Some(&audit_path)) {
            Ok(engine) => {
                let taint: TaintLimits = engine.policy().taint.clone().unwrap_or_default();
                Box::new(
                    EngineBackend::new(engine, taint, persisted)
                        .with_shared(Arc::new(super::share::BrokerShare(broker.clone()))),
                )
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
            (Some(Arc::new(w)), None)
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
    let tty: Arc<dyn crate::approval::ApprovalChannel> = Arc::new(TtyChannel::default());
    let settings = Settings {
        server: server.map(str::to_owned),
        upstream: upstream.map(str::to_owned),
        approval: args.approval,
        approval_timeout: args.approval_timeout,
        listing_timeout: args.listing_timeout,
        tty: Some(tty),
        broker: Some(broker.clone()),
        shared_session: Some(Arc::new(super::share::BrokerShare(broker))),
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
    Ok(Arc::new(Enforcer::new(backend, settings)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("120s"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5h").is_err());
    }

    #[test]
    fn unloadable_policy_is_a_reason_not_an_allow() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.yaml");
        let err = engine(Some(&missing), dir.path(), None).unwrap_err();
        assert!(err.contains("cannot be read"), "{err}");
        let bad = dir.path().join("bad.yaml");
        std::fs::write(
            &bad,
            "version: 1\nrules:\n  - id: x\n    effect: allow\n    operationz: [fs.read]\n",
        )
        .unwrap();
        let err = engine(Some(&bad), dir.path(), None).unwrap_err();
        assert!(err.contains("does not load"), "{err}");
        assert!(err.contains("toolgate policy check"), "{err}");
    }
}
