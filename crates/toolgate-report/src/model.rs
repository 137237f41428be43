//! The report's shape: what `build` fills in and `markdown`, `html` and `--json` show
//! (`docs/report.md`).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use toolgate_policy::{Engine, LoadedPolicy};

use crate::audit::AuditFigures;
use toolgate_runtime::pins::PinnedTool;

/// The version of the JSON shape (`docs/report.md`).
pub const REPORT_FORMAT: &str = "toolgate-report/1";

/// How many approvals of the same thing make a suggestion.
pub const SUGGEST_AFTER: u64 = 3;

/// Where a server's tool definitions came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolSource {
    /// The pin store.
    Pins,
    /// A `tools/list` result or a list of tools in a file (`--tools`).
    File,
    /// A live `tools/list` of the server (`--probe`).
    Probe,
}

/// One server's tools, as given to [`build`](crate::build).
#[derive(Debug, Clone)]
pub struct ServerTools {
    pub name: String,
    pub source: ToolSource,
    pub tools: Vec<Value>,
    /// The pins of this server when the definitions came from elsewhere (to find changes).
    pub pinned: Option<BTreeMap<String, PinnedTool>>,
}

/// The inputs of a report.
pub struct Inputs<'a> {
    /// `starter policy` or the policy path.
    pub policy_label: String,
    pub loaded: &'a LoadedPolicy,
    pub engine: &'a Engine,
    pub servers: Vec<ServerTools>,
    pub audit: Option<AuditFigures>,
    /// Why there are no audit figures, when there are none.
    pub audit_note: Option<String>,
}

impl std::fmt::Debug for Inputs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inputs")
            .field("policy_label", &self.policy_label)
            .field("servers", &self.servers.len())
            .finish_non_exhaustive()
    }
}

/// The whole report (`--json` prints it as is).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub format: &'static str,
    pub toolgate_version: &'static str,
    pub policy: PolicyInfo,
    pub servers: Vec<ServerReport>,
    pub findings: Vec<Finding>,
    pub audit: Option<AuditFigures>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_note: Option<String>,
    pub suggestions: Vec<Suggestion>,
    /// Why what was approved often enough was not suggested (a rule for it would reach
    /// further than what was approved).
    pub not_suggested: Vec<String>,
    pub not_enforced: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PolicyInfo {
    pub source: String,
    pub default: String,
    pub rules: RuleCounts,
    /// The packs that apply.
    pub packs: Vec<String>,
    /// `tools:` entries of the policy.
    pub tool_entries: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct RuleCounts {
    pub deny: usize,
    pub ask: usize,
    pub allow: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerReport {
    pub name: String,
    pub source: ToolSource,
    pub tools: Vec<ToolReport>,
}

/// Where a control comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// A `tools:` entry of the policy (its key).
    User { key: String },
    /// A pack entry.
    Pack { pack: String, key: String },
    /// Heuristics from the tool's name and schema.
    Heuristic,
    /// Always on in toolgate.
    BuiltIn,
    /// Nothing sets it.
    None,
}

impl Origin {
    pub fn label(&self) -> String {
        match self {
            Origin::User { key } => format!("user entry `{key}`"),
            Origin::Pack { pack, key } => format!("pack `{pack}` (`{key}`)"),
            Origin::Heuristic => "heuristic".to_owned(),
            Origin::BuiltIn => "built in".to_owned(),
            Origin::None => "none".to_owned(),
        }
    }
}

/// One control on a tool.
#[derive(Debug, Clone, Serialize)]
pub struct Control {
    /// `pinning`, `budget`, `constraints`, `sink_gate`, `output_trust`, `annotations`.
    pub control: &'static str,
    /// What it does, in a sentence.
    pub detail: String,
    /// Who set it, highest layer last.
    pub origin: Vec<Origin>,
}

/// The verdict a typical call gets.
#[derive(Debug, Clone, Serialize)]
pub struct Typical {
    pub effect: String,
    /// What decided (`rule`, `default`, `sink_gate`, …).
    pub decided_by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The arguments the typical call was made with (made up from the schema).
    pub arguments: Value,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolReport {
    pub name: String,
    /// The tool's description as the server gave it (first 300 characters).
    pub description: String,
    /// The operations a typical call normalises to.
    pub operations: Vec<String>,
    /// True when a pack or `tools:` entry describes the tool.
    pub has_entry: bool,
    pub destructive: bool,
    pub annotations: BTreeMap<String, bool>,
    pub controls: Vec<Control>,
    pub typical: Typical,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    High,
    Medium,
    Low,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// `write_unconfined`, `send_untrusted_only`, `heuristics_only`, `no_contract_allowed`,
    /// `destructive_allowed`, `rule_warning`, `definition_changed`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    pub message: String,
    /// The policy lines (YAML) to add or change, where one exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_line: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Suggestion {
    /// How many times a human approved it.
    pub approved: u64,
    pub server: Option<String>,
    pub tool: String,
    pub why: String,
    /// The top-level key the lines go under: `rules` or `tools`.
    pub section: &'static str,
    /// The lines to add under `section` (indented by two spaces).
    pub item: String,
    /// `section:` and `item`: the YAML to paste into the policy.
    pub policy_lines: String,
}

/// What toolgate does not enforce, always part of the report.
pub const NOT_ENFORCED: [&str; 4] = [
    "Traffic that does not pass through toolgate: servers started without `toolgate wrap`, other MCP clients, and anything the server or the agent does on its own (its own network connections, files, child processes).",
    "What data goes to a trusted destination: the sink gate checks where a value is sent, and what is sent only for the secret values toolgate saw read (secret files, outputs marked secret); a trusted address can receive anything else the agent puts in the call.",
    "The server's own rights: a server runs with the user's permissions; toolgate decides calls, it does not sandbox the process (use an OS sandbox or container for that).",
    "Results are taint-tracked, not filtered: toolgate does not remove prompt injection from what a tool returns.",
];

pub(crate) fn yaml_str(s: &str) -> String {
    // A JSON string is a valid YAML flow scalar, with every character escaped.
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

pub(crate) fn truncate(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().nth(n).is_some() {
        out.push('…');
    }
    out
}
