//! Building the enforcer's parts: the policy engine (with toolgate's self-protection) for
//! `wrap`, the broker's hooks and the gateway.
//!
//! Nothing here fails open. A policy that cannot be loaded, or an audit log that cannot be
//! opened, still starts the proxy (so the client sees a working server and the agent gets a
//! clear answer), but every tool call is then denied with the reason and how to fix it.

use std::path::{Path, PathBuf};

use serde_json::Value;
use toolgate_policy::{Engine, STARTER_POLICY, Vars, load};

use super::backend::{Backend, Call, PinChanges, Ruling, Scope};

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
    fn record_output(
        &mut self,
        _server: Option<&str>,
        _tool: &str,
        _result: &Value,
        _secret_file: Option<&str>,
    ) {
    }
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
pub fn engine(
    policy: Option<&Path>,
    workspace: &Path,
    audit: Option<&Path>,
) -> Result<Engine, String> {
    let source = read_policy(policy)?;
    engine_from_source(&source, policy, workspace, audit)
}

/// The engine of an enforcing command started in `cwd`: of `flag` (`--policy`) when given,
/// else of `./toolgate.yaml` when it exists and is trusted as it is (`crate::trust`; there
/// but not trusted: `Err`, every call denied), else of the built-in starter. Also a line
/// that says which policy it is.
pub fn enforcing_engine(
    flag: Option<&Path>,
    cwd: &Path,
    workspace: &Path,
    audit: Option<&Path>,
) -> (Result<Engine, String>, String) {
    if let Some(path) = flag {
        return (
            engine(Some(path), workspace, audit),
            format!("policy `{}`", path.display()),
        );
    }
    match crate::trust::enforcing_default(cwd) {
        Ok(Some(here)) => (
            engine_from_source(&here.source, Some(&here.path), workspace, audit),
            format!(
                "policy `{}` (`./{}` of the working directory, trusted)",
                here.path.display(),
                crate::trust::DEFAULT_POLICY
            ),
        ),
        Ok(None) => (
            engine(None, workspace, audit),
            format!(
                "the built-in starter policy (no --policy, and no `./{}` in `{}`)",
                crate::trust::DEFAULT_POLICY,
                cwd.display()
            ),
        ),
        Err(reason) => (
            Err(reason),
            format!(
                "no policy: `./{}` of `{}` is not trusted",
                crate::trust::DEFAULT_POLICY,
                cwd.display()
            ),
        ),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
