//! `toolgate report`: a security review of a setup (policy, tool definitions, audit log),
//! rendered as Markdown, JSON or one self-contained HTML page.
//!
//! [`build`] turns the inputs into a [`Report`] (the JSON shape, documented in
//! `docs/report.md`); `markdown` and `html` render it. Nothing here prints an argument
//! value from the audit log: the figures come from `audit::figures`, which reads only
//! tools, effects, contracts, times, hosts and executables' base names.

pub mod audit;
pub mod html;
pub mod markdown;
pub mod probe;

mod controls;
mod findings;

pub use controls::typical_arguments;
pub use findings::suggestion_yaml;

use controls::controls;
use findings::{suggestions, tool_findings};

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use toolgate_policy::contracts::heuristics::is_destructive_name;
use toolgate_policy::diag::Severity as DiagSeverity;
use toolgate_policy::{
    Effect, Engine, LoadedPolicy, NormalizeContext, Session, SessionLimits, ToolCall,
};

use audit::AuditFigures;
use toolgate_runtime::fsfacts::SoftFs;
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

/// One server's tools, as given to [`build`].
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
    "What data goes to a trusted destination: the sink gate checks where a value is sent, not what is sent; a trusted address can receive anything the agent puts in the call.",
    "The server's own rights: a server runs with the user's permissions; toolgate decides calls, it does not sandbox the process (use an OS sandbox or container for that).",
    "Results are taint-tracked, not filtered: toolgate does not remove prompt injection from what a tool returns.",
];

fn yaml_str(s: &str) -> String {
    // A JSON string is a valid YAML flow scalar, with every character escaped.
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

fn truncate(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().nth(n).is_some() {
        out.push('…');
    }
    out
}

/// Builds the report.
pub fn build(inputs: Inputs<'_>) -> Report {
    let loaded = inputs.loaded;
    let engine = inputs.engine;
    let p = &loaded.policy;
    let count = |e: Effect| p.rules.iter().filter(|r| r.effect == e).count();
    let packs = match &p.packs {
        None => toolgate_policy::contracts::packs::pack_names(),
        Some(l) => l.clone(),
    };
    let mut findings = Vec::new();
    for d in &loaded.warnings.items {
        if d.severity == DiagSeverity::Warning {
            let at = d
                .pos
                .as_ref()
                .map(|pos| format!(" (line {})", pos.line))
                .unwrap_or_default();
            findings.push(Finding {
                severity: Severity::Low,
                kind: "rule_warning",
                server: None,
                tool: None,
                message: match &d.help {
                    Some(help) => format!("{}{at}; help: {help}", d.message),
                    None => format!("{}{at}", d.message),
                },
                policy_line: None,
            });
        }
    }
    let vars = engine.vars().clone();
    let fs = SoftFs;
    let ctx = NormalizeContext {
        workspace: &vars.workspace,
        home: &vars.home,
        fs: &fs,
    };
    let mut servers = Vec::new();
    for server in &inputs.servers {
        let mut limits = SessionLimits::new(p.taint.clone().unwrap_or_default());
        limits.pinning = true;
        let mut session = Session::new(limits);
        session.pin_tools(&server.tools);
        session.listing_complete();
        let mut tools = Vec::new();
        for def in &server.tools {
            let Some(name) = def.get("name").and_then(Value::as_str) else {
                continue;
            };
            let resolved = engine.contracts().lookup_with(name, Some(def));
            let contract = resolved.contract().clone();
            let sources = resolved.sources().to_vec();
            let has_entry = resolved.has_entry();
            drop(resolved);
            let arguments = typical_arguments(def, &contract);
            let call = ToolCall {
                server: Some(&server.name),
                tool: name,
                arguments: &arguments,
                definition: Some(def),
            };
            let decision = engine.decide(&call, &mut session, &ctx, 0);
            let mut operations: Vec<String> = Vec::new();
            for part in &decision.action.parts {
                let op = part.operation.as_str().to_owned();
                if !operations.contains(&op) {
                    operations.push(op);
                }
            }
            let annotations: BTreeMap<String, bool> = def
                .get("annotations")
                .and_then(Value::as_object)
                .map(|a| {
                    a.iter()
                        .filter_map(|(k, v)| v.as_bool().map(|b| (k.clone(), b)))
                        .collect()
                })
                .unwrap_or_default();
            let destructive = annotations.get("destructiveHint") == Some(&true)
                || (annotations.get("readOnlyHint") != Some(&true) && is_destructive_name(name))
                || operations.iter().any(|o| o == "fs.delete");
            let fingerprint = toolgate_runtime::pins::fingerprint(def);
            let typical = Typical {
                effect: decision.effect.as_str().to_owned(),
                decided_by: decision.contract.as_str().to_owned(),
                rule: decision.rule.clone(),
                arguments: arguments.clone(),
                reason: decision.reason.clone(),
            };
            let t = ToolReport {
                name: name.to_owned(),
                description: truncate(
                    def.get("description").and_then(Value::as_str).unwrap_or(""),
                    300,
                ),
                operations,
                has_entry,
                destructive,
                annotations,
                controls: controls(&contract, &sources, loaded, &fingerprint),
                typical,
            };
            tool_findings(&server.name, &t, &contract, &sources, &mut findings);
            tools.push(t);
        }
        if let Some(pinned) = &server.pinned {
            for def in &server.tools {
                let Some(name) = def.get("name").and_then(Value::as_str) else {
                    continue;
                };
                if let Some(pin) = pinned.get(name)
                    && pin.fingerprint != toolgate_runtime::pins::fingerprint(def)
                {
                    let what = toolgate_runtime::pins::describe_change(&pin.definition, def, 5);
                    findings.push(Finding {
                            severity: Severity::High,
                            kind: "definition_changed",
                            server: Some(server.name.clone()),
                            tool: Some(name.to_owned()),
                            message: format!(
                                "the definition of `{name}` changed since it was pinned ({}); calls ask until it is approved",
                                if what.is_empty() { "fields differ".to_owned() } else { what.join("; ") }
                            ),
                            policy_line: Some(format!(
                                "review the change, then: toolgate pins forget --server {} --tool {}",
                                server.name, name
                            )),
                        });
                }
            }
        }
        servers.push(ServerReport {
            name: server.name.clone(),
            source: server.source,
            tools,
        });
    }
    if let Some(a) = &inputs.audit {
        for (tool, n) in &a.definition_changes {
            findings.push(Finding {
                severity: Severity::Medium,
                kind: "definition_changed",
                server: None,
                tool: Some(tool.clone()),
                message: format!(
                    "the audit log records {n} change{} of `{tool}`'s definition after it was pinned",
                    if *n == 1 { "" } else { "s" }
                ),
                policy_line: None,
            });
        }
    }
    findings.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then_with(|| a.server.cmp(&b.server))
            .then_with(|| a.tool.cmp(&b.tool))
            .then_with(|| a.kind.cmp(b.kind))
    });
    let suggestions = inputs
        .audit
        .as_ref()
        .map(|a| suggestions(a, loaded))
        .unwrap_or_default();
    Report {
        format: REPORT_FORMAT,
        toolgate_version: env!("CARGO_PKG_VERSION"),
        policy: PolicyInfo {
            source: inputs.policy_label,
            default: p.default.as_str().to_owned(),
            rules: RuleCounts {
                deny: count(Effect::Deny),
                ask: count(Effect::Ask),
                allow: count(Effect::Allow),
            },
            packs,
            tool_entries: p.tools.len(),
        },
        servers,
        findings,
        audit: inputs.audit,
        audit_note: inputs.audit_note,
        suggestions,
        not_enforced: NOT_ENFORCED.iter().map(|s| (*s).to_owned()).collect(),
    }
}
