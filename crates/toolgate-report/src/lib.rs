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

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value, json};
use toolgate_policy::contracts::heuristics::{
    is_destination_param, is_destructive_name, is_recipient_param,
};
use toolgate_policy::contracts::packs::parsed_pack;
use toolgate_policy::contracts::{EntrySource, OutputLabel, OutputSpec, TextFormat, ToolContract};
use toolgate_policy::decision::Effect;
use toolgate_policy::diag::Severity as DiagSeverity;
use toolgate_policy::eval::Engine;
use toolgate_policy::load::LoadedPolicy;
use toolgate_policy::normalize::{NormalizeContext, ToolCall};
use toolgate_policy::session::{Session, SessionLimits};

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

/// Every suggestion as one YAML text, grouped under `rules:` and `tools:`.
pub fn suggestion_yaml(suggestions: &[Suggestion]) -> String {
    let mut out = String::new();
    for section in ["rules", "tools"] {
        let items: Vec<&str> = suggestions
            .iter()
            .filter(|s| s.section == section)
            .map(|s| s.item.as_str())
            .collect();
        if items.is_empty() {
            continue;
        }
        out.push_str(section);
        out.push_str(":\n");
        for i in items {
            out.push_str(i);
            out.push('\n');
        }
    }
    out
}

/// What toolgate does not enforce, always part of the report.
pub const NOT_ENFORCED: [&str; 4] = [
    "Traffic that does not pass through toolgate: servers started without `toolgate wrap`, other MCP clients, and anything the server or the agent does on its own (its own network connections, files, child processes).",
    "What data goes to a trusted destination: the sink gate checks where a value is sent, not what is sent; a trusted address can receive anything the agent puts in the call.",
    "The server's own rights: a server runs with the user's permissions; toolgate decides calls, it does not sandbox the process (use an OS sandbox or container for that).",
    "Results are taint-tracked, not filtered: toolgate does not remove prompt injection from what a tool returns.",
];

/// The placeholder arguments of a typical call, from the schema's property names and types.
pub fn typical_arguments(definition: &Value, contract: &ToolContract) -> Value {
    let schema = definition.get("inputSchema");
    let props = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut args = Map::new();
    let Some(props) = props else {
        return Value::Object(args);
    };
    let listed = |list: &Option<Vec<String>>, k: &str| {
        list.as_ref().is_some_and(|l| l.iter().any(|x| x == k))
    };
    for (name, prop) in props {
        let interesting = required.contains(&name.as_str())
            || listed(&contract.path_params, name)
            || listed(&contract.sink_params, name)
            || listed(&contract.url_params, name)
            || contract.command_param.as_deref() == Some(name.as_str());
        if !interesting {
            continue;
        }
        args.insert(name.clone(), placeholder(name, prop, contract));
    }
    Value::Object(args)
}

fn placeholder(name: &str, prop: &Value, contract: &ToolContract) -> Value {
    if let Some(first) = prop
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    let ty = prop.get("type").and_then(Value::as_str).unwrap_or("string");
    let lower = name.to_ascii_lowercase();
    let listed =
        |list: &Option<Vec<String>>| list.as_ref().is_some_and(|l| l.iter().any(|x| x == name));
    let text = if contract.command_param.as_deref() == Some(name) || lower == "command" {
        "ls"
    } else if listed(&contract.url_params) || lower.contains("url") || lower.contains("uri") {
        "https://example.com/"
    } else if listed(&contract.sink_params)
        || is_recipient_param(name)
        || (is_destination_param(name) && !lower.contains("path"))
    {
        "someone@example.com"
    } else if listed(&contract.path_params)
        || lower.contains("path")
        || lower.contains("file")
        || lower.contains("dir")
        || lower == "source"
        || lower == "destination"
    {
        "notes/example.txt"
    } else {
        "example"
    };
    match ty {
        "integer" | "number" => json!(1),
        "boolean" => json!(false),
        "object" => json!({}),
        "array" => {
            let item = prop
                .get("items")
                .cloned()
                .unwrap_or(json!({"type": "string"}));
            json!([placeholder(name, &item, contract)])
        }
        _ => json!(text),
    }
}

fn layer_contract(src: &EntrySource, loaded: &LoadedPolicy) -> Option<ToolContract> {
    match src {
        EntrySource::Heuristics => None,
        EntrySource::User { key } => loaded.policy.tools.get(key).cloned(),
        EntrySource::Pack { pack, key } => parsed_pack(pack).ok()?.tools.get(key).cloned(),
    }
}

fn origins(
    sources: &[EntrySource],
    loaded: &LoadedPolicy,
    merged: &ToolContract,
    has: impl Fn(&ToolContract) -> bool,
) -> Vec<Origin> {
    let mut out = Vec::new();
    for src in sources {
        if let Some(c) = layer_contract(src, loaded)
            && has(&c)
        {
            out.push(match src {
                EntrySource::User { key } => Origin::User { key: key.clone() },
                EntrySource::Pack { pack, key } => Origin::Pack {
                    pack: pack.clone(),
                    key: key.clone(),
                },
                EntrySource::Heuristics => Origin::Heuristic,
            });
        }
    }
    if out.is_empty() && has(merged) {
        out.push(Origin::Heuristic);
    }
    if out.is_empty() {
        out.push(Origin::None);
    }
    out
}

fn list(v: &Option<Vec<String>>) -> String {
    match v {
        Some(l) if !l.is_empty() => l
            .iter()
            .map(|x| format!("`{x}`"))
            .collect::<Vec<_>>()
            .join(", "),
        _ => "none".to_owned(),
    }
}

fn controls(
    c: &ToolContract,
    sources: &[EntrySource],
    loaded: &LoadedPolicy,
    fingerprint: &str,
) -> Vec<Control> {
    let mut out = vec![Control {
        control: "pinning",
        detail: format!(
            "definition pinned on first use (fingerprint `{}`); a changed definition asks",
            fingerprint.get(..12).unwrap_or(fingerprint)
        ),
        origin: vec![Origin::BuiltIn],
    }];
    let budget = match (&c.max_calls, &c.budget) {
        (None, None) => "no budget".to_owned(),
        (Some(0), _) => "forbidden (`max_calls: 0`)".to_owned(),
        (m, b) => {
            let mut parts = Vec::new();
            if let Some(m) = m {
                parts.push(format!("{m} calls per session"));
            }
            if let Some(b) = b {
                parts.push(format!("{} calls per {}", b.max, b.per));
            }
            parts.join(", ")
        }
    };
    out.push(Control {
        control: "budget",
        detail: budget,
        origin: origins(sources, loaded, c, |x| {
            x.max_calls.is_some() || x.budget.is_some()
        }),
    });
    let mut cons = Vec::new();
    if let Some(p) = &c.allowed_path_prefixes {
        cons.push(format!("paths inside {}", list(&Some(p.clone()))));
    }
    if let Some(p) = &c.arg_patterns {
        cons.push(format!(
            "patterns on {}",
            list(&Some(p.keys().cloned().collect()))
        ));
    }
    if let Some(p) = &c.arg_values {
        cons.push(format!(
            "fixed values of {}",
            list(&Some(p.keys().cloned().collect()))
        ));
    }
    out.push(Control {
        control: "constraints",
        detail: if cons.is_empty() {
            "no argument constraints".to_owned()
        } else {
            cons.join("; ")
        },
        origin: origins(sources, loaded, c, |x| {
            x.allowed_path_prefixes.is_some() || x.arg_patterns.is_some() || x.arg_values.is_some()
        }),
    });
    let sink = if c.exfiltrating == Some(true) {
        format!(
            "sends: sink arguments {}; trusted destinations {}; tainted destination → {}",
            match &c.sink_params {
                Some(l) if !l.is_empty() => list(&c.sink_params),
                _ => "destination-named arguments".to_owned(),
            },
            list(&c.trusted_destinations),
            match c.on_tainted {
                Some(toolgate_policy::contracts::OnTainted::Ask) => "ask",
                _ => "deny",
            }
        )
    } else {
        "not a sending tool".to_owned()
    };
    out.push(Control {
        control: "sink_gate",
        detail: sink,
        origin: origins(sources, loaded, c, |x| {
            x.exfiltrating.is_some()
                || x.sink_params.is_some()
                || x.trusted_destinations.is_some()
                || x.on_tainted.is_some()
        }),
    });
    out.push(Control {
        control: "output_trust",
        detail: output_trust_detail(c.output.as_ref()),
        origin: origins(sources, loaded, c, |x| x.output.is_some()),
    });
    out.push(Control {
        control: "annotations",
        detail: match &c.annotations {
            Some(a) if !a.is_empty() => format!(
                "expects {}",
                a.iter()
                    .map(|(k, v)| format!("`{k}: {v}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => "no expected annotations".to_owned(),
        },
        origin: origins(sources, loaded, c, |x| x.annotations.is_some()),
    });
    out
}

/// How a tool's output is trusted, in words.
fn output_trust_detail(output: Option<&OutputSpec>) -> String {
    match output {
        Some(OutputSpec::Label(OutputLabel::Trusted)) => "output trusted".to_owned(),
        Some(OutputSpec::Fields(f)) => format!(
            "output trusted at {} only (structured content, and text content read as {}; text that does not parse is untrusted; {})",
            list(&Some(f.trusted_fields.clone())),
            match f.format() {
                TextFormat::Json => "JSON",
                TextFormat::Yaml => "YAML",
            },
            if f.trusted_wins() {
                "a value an untrusted field repeats stays trusted"
            } else {
                "a value an untrusted field repeats is untrusted"
            }
        ),
        _ => "output untrusted (destinations in it are tainted)".to_owned(),
    }
}

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

fn tool_findings(
    server: &str,
    t: &ToolReport,
    c: &ToolContract,
    sources: &[EntrySource],
    out: &mut Vec<Finding>,
) {
    let name = &t.name;
    let key = yaml_str(name);
    let allowed = t.typical.effect == "allow";
    let mut push = |severity, kind, message: String, line: Option<String>| {
        out.push(Finding {
            severity,
            kind,
            server: Some(server.to_owned()),
            tool: Some(name.clone()),
            message,
            policy_line: line,
        });
    };
    let writes = t
        .operations
        .iter()
        .any(|o| o == "fs.write" || o == "fs.delete");
    if writes && c.allowed_path_prefixes.is_none() && c.max_calls != Some(0) {
        push(
            if allowed {
                Severity::High
            } else {
                Severity::Medium
            },
            "write_unconfined",
            format!("`{name}` writes files and no `allowed_path_prefixes` confines its paths"),
            Some(format!(
                "tools:\n  {key}:\n    allowed_path_prefixes: [\"${{workspace}}\"]"
            )),
        );
    }
    if c.exfiltrating == Some(true)
        && c.trusted_destinations.as_ref().is_none_or(Vec::is_empty)
        && c.max_calls != Some(0)
    {
        push(
            Severity::Medium,
            "send_untrusted_only",
            format!(
                "`{name}` sends data and has no trusted destination: every send asks, which trains people to approve without reading"
            ),
            Some(format!(
                "tools:\n  {key}:\n    trusted_destinations: [\"*@your-company.example\"]"
            )),
        );
    }
    let only_heuristics =
        !sources.is_empty() && sources.iter().all(|s| matches!(s, EntrySource::Heuristics));
    let op = t
        .operations
        .first()
        .cloned()
        .unwrap_or_else(|| "unknown".to_owned());
    if only_heuristics {
        push(
            Severity::Low,
            "heuristics_only",
            format!(
                "`{name}` is covered only by heuristics from its name and schema; an entry makes its contract explicit"
            ),
            Some(format!("tools:\n  {key}:\n    operation: {op}")),
        );
    }
    if !t.has_entry && allowed {
        push(
            Severity::Medium,
            "no_contract_allowed",
            format!(
                "`{name}` has no contract (no pack or `tools:` entry) and a typical call is allowed (by {})",
                t.typical
                    .rule
                    .as_ref()
                    .map_or_else(|| t.typical.decided_by.clone(), |r| format!("rule `{r}`"))
            ),
            Some(format!("tools:\n  {key}:\n    operation: {op}")),
        );
    }
    if t.destructive && allowed {
        let place = t
            .typical
            .rule
            .as_ref()
            .map(|r| format!("  # above rule `{r}`\n"))
            .unwrap_or_default();
        push(
            Severity::High,
            "destructive_allowed",
            format!(
                "`{name}` is destructive (by annotation or name) and a typical call is allowed without asking"
            ),
            Some(format!(
                "rules:\n{place}  - id: ask-{}\n    effect: ask\n    operations: [{op}]\n    tools: [{key}]",
                slug(name)
            )),
        );
    }
}

fn slug(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    out.truncate(40);
    out
}

/// Policy lines for what humans approved again and again. Never a destination that was
/// tainted when it was asked about, never an ask that a rule or contract would deny, and
/// never anything that was also refused.
fn suggestions(a: &AuditFigures, loaded: &LoadedPolicy) -> Vec<Suggestion> {
    let mut out = Vec::new();
    for (key, tally) in &a.asks {
        if tally.approved < SUGGEST_AFTER || tally.tainted > 0 || tally.refused > 0 {
            continue;
        }
        let tool = yaml_str(&key.tool);
        let op = key
            .operation
            .clone()
            .unwrap_or_else(|| "unknown".to_owned());
        let id = slug(&format!("allow-{}", key.tool));
        let lines = match key.contract.as_deref() {
            Some("sink_gate") => {
                let Some(host) = &key.host else { continue };
                Some((
                    format!(
                        "a send to host `{host}` was approved {} times",
                        tally.approved
                    ),
                    "tools",
                    format!(
                        "  {tool}:\n    trusted_destinations: [{}]",
                        yaml_str(&format!("https://{host}/*"))
                    ),
                ))
            }
            Some("rule") | Some("default") if op != "unknown" => {
                let mut l = String::new();
                if let Some(rule) = &key.rule {
                    // An ask rule: the allow rule must come first (the first match wins
                    // among allow and ask; a deny rule still wins over it).
                    if loaded
                        .policy
                        .rules
                        .iter()
                        .any(|r| &r.id == rule && r.effect == Effect::Deny)
                    {
                        continue;
                    }
                    l.push_str(&format!("  # place above rule `{rule}`\n"));
                }
                l.push_str(&format!(
                    "  - id: {id}\n    effect: allow\n    operations: [{op}]\n    tools: [{tool}]"
                ));
                if let Some(s) = &key.server {
                    l.push_str(&format!("\n    servers: [{}]", yaml_str(s)));
                }
                if let Some(e) = &key.executable {
                    l.push_str(&format!("\n    executables: [{}]", yaml_str(e)));
                }
                if let Some(h) = &key.host {
                    l.push_str(&format!("\n    hosts: [{}]", yaml_str(h)));
                }
                let what = match (&key.executable, &key.host) {
                    (Some(e), _) => format!("`{}` running `{e}`", key.tool),
                    (_, Some(h)) => format!("`{}` reaching `{h}`", key.tool),
                    _ => format!("`{}` ({op})", key.tool),
                };
                Some((
                    format!("{what} was approved {} times", tally.approved),
                    "rules",
                    l,
                ))
            }
            _ => None,
        };
        if let Some((why, section, item)) = lines {
            out.push(Suggestion {
                approved: tally.approved,
                server: key.server.clone(),
                tool: key.tool.clone(),
                why,
                section,
                policy_lines: format!("{section}:\n{item}"),
                item,
            });
        }
    }
    out.sort_by(|a, b| {
        b.approved
            .cmp(&a.approved)
            .then_with(|| a.tool.cmp(&b.tool))
    });
    out
}

#[cfg(test)]
mod output_trust_tests {
    #![allow(
        clippy::unwrap_used,
        reason = "tests: a failed expectation should stop the test with its message"
    )]

    use super::*;

    #[test]
    fn the_detail_says_how_text_is_read() {
        let spec: OutputSpec = serde_json::from_str(
            r#"{"trusted_fields": ["participants[*]"], "text_format": "yaml", "trusted_wins": true}"#,
        )
        .unwrap();
        let d = output_trust_detail(Some(&spec));
        assert!(d.contains("`participants[*]`"), "{d}");
        assert!(d.contains("read as YAML"), "{d}");
        assert!(d.contains("does not parse is untrusted"), "{d}");
        assert!(d.contains("stays trusted"), "{d}");
        let spec: OutputSpec = serde_json::from_str(r#"{"trusted_fields": ["a"]}"#).unwrap();
        let d = output_trust_detail(Some(&spec));
        assert!(
            d.contains("read as JSON") && d.contains("repeats is untrusted"),
            "{d}"
        );
        assert!(output_trust_detail(None).starts_with("output untrusted"));
    }
}
