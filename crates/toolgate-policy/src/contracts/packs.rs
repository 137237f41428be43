//! Curated packs: embedded YAML files in the same format as the policy's `tools:` mapping.
//!
//! Each pack file is `{description, servers: [...], uncovered?: [...], tools: {name: entry}}`.
//! `servers` names the real servers the pack was written and tested against (with versions);
//! `uncovered` lists tools of those servers that the pack deliberately leaves to the
//! heuristics and rules.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use super::ToolContract;

/// A parsed pack.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pack {
    pub description: String,
    /// The servers (package@version) the pack covers.
    #[serde(default)]
    pub servers: Vec<String>,
    /// Tools of those servers deliberately without an entry.
    #[serde(default)]
    pub uncovered: Vec<String>,
    pub tools: BTreeMap<String, ToolContract>,
}

/// Every embedded pack: `(name, YAML source)`, in application order.
pub const PACKS: &[(&str, &str)] = &[
    ("filesystem", include_str!("packs/filesystem.yaml")),
    ("git", include_str!("packs/git.yaml")),
    ("fetch", include_str!("packs/fetch.yaml")),
    ("shell", include_str!("packs/shell.yaml")),
    ("email", include_str!("packs/email.yaml")),
    ("slack", include_str!("packs/slack.yaml")),
    ("github", include_str!("packs/github.yaml")),
    ("gdrive", include_str!("packs/gdrive.yaml")),
    ("agent-tools", include_str!("packs/agent-tools.yaml")),
];

/// The names of every embedded pack (the default of `packs:`).
pub fn pack_names() -> Vec<String> {
    PACKS.iter().map(|(n, _)| (*n).to_owned()).collect()
}

/// Parse an embedded pack (a copy of the once-parsed pack, see [`parsed_pack`]).
pub fn load_pack(name: &str) -> Result<Pack, String> {
    parsed_pack(name).cloned()
}

/// An embedded pack, parsed on first use and kept for the life of the process: the packs
/// are compiled into the binary, so every policy load would parse the same YAML again.
pub fn parsed_pack(name: &str) -> Result<&'static Pack, String> {
    static PARSED: OnceLock<Vec<Result<Pack, String>>> = OnceLock::new();
    let parsed = PARSED.get_or_init(|| {
        PACKS
            .iter()
            .map(|(name, src)| {
                serde_saphyr::from_str_with_options::<Pack>(src, crate::strict::yaml_options())
                    .map_err(|e| format!("pack `{name}` does not parse: {e}"))
            })
            .collect()
    });
    match PACKS.iter().position(|(n, _)| *n == name) {
        Some(i) => match parsed.get(i) {
            Some(Ok(pack)) => Ok(pack),
            Some(Err(e)) => Err(e.clone()),
            None => Err(format!("unknown pack `{name}`")),
        },
        None => Err(format!("unknown pack `{name}`")),
    }
}
