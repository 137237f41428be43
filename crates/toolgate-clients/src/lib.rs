//! Client integration: where MCP clients and coding agents keep their configuration, and
//! how toolgate edits it: wrapping (or unwrapping) their servers, installing client hooks.
//! `toolgate init` and `toolgate unwrap` show and apply the edits; toolgate's
//! self-protection reads the locations.

pub mod codex_toml;
pub mod codex_trust;
pub mod discovery;
pub mod document;
mod entries;
pub mod hooks;
pub mod opencode;
pub mod remote;
mod rewrite;
pub mod write;

/// Whether the policy at `path` loads and compiles as `wrap` and `hook` load it: `Err`
/// with its diagnostics (or the reason it cannot be read) and a one-line summary naming its
/// first error, located (`path:line:column: message`), as `toolgate policy check` prints it.
pub fn check_policy(
    path: &std::path::Path,
) -> Result<(), (Option<toolgate_policy::diag::Diagnostics>, String)> {
    use toolgate_policy::diag::Severity;
    let shown = path.display().to_string();
    let source = std::fs::read_to_string(path)
        .map_err(|e| (None, format!("the policy `{shown}` cannot be read: {e}")))?;
    let first = |d: &toolgate_policy::diag::Diagnostics, verb: &str| {
        let errors = d.errors();
        let first = d
            .items
            .iter()
            .find(|i| i.severity == Severity::Error)
            .map(|i| match i.pos {
                Some(p) => format!("{shown}:{}:{}: {}", p.line, p.column, i.message),
                None => format!("{shown}: {}", i.message),
            })
            .unwrap_or_else(|| format!("{shown}: invalid policy"));
        let more = match errors.saturating_sub(1) {
            0 => String::new(),
            1 => " (and 1 more error)".to_owned(),
            n => format!(" (and {n} more errors)"),
        };
        format!("the policy `{shown}` {verb}: {first}{more}")
    };
    let loaded = match toolgate_policy::load(&source, &shown) {
        Ok(l) => l,
        Err(d) => {
            let summary = first(&d, "does not load");
            return Err((Some(d), summary));
        }
    };
    match toolgate_policy::Engine::new(loaded.policy, toolgate_policy::Vars::placeholder()) {
        Ok(_) => Ok(()),
        Err(d) => {
            let summary = first(&d, "does not compile");
            Err((Some(d), summary))
        }
    }
}
