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
mod model;

use model::truncate;
pub use model::*;

pub use controls::typical_arguments;
pub use findings::{none_reason, suggestion_yaml};

use controls::controls;
use findings::{suggestions, tool_findings};

use std::collections::BTreeMap;

use serde_json::Value;
use toolgate_policy::contracts::heuristics::is_destructive_name;
use toolgate_policy::diag::Severity as DiagSeverity;
use toolgate_policy::{
    Effect, Engine, LoadedPolicy, NormalizeContext, Session, SessionLimits, ToolCall,
};

use toolgate_runtime::fsfacts::SoftFs;

/// One tool of a server as the report shows it under `engine`: its row (a typical call
/// decided in `session`) and its findings. `None` for a definition without a name.
fn tool_row(
    server: &str,
    def: &Value,
    engine: &Engine,
    loaded: &LoadedPolicy,
    session: &mut Session,
) -> Option<(ToolReport, Vec<Finding>)> {
    let name = def.get("name").and_then(Value::as_str)?;
    let vars = engine.vars();
    let ctx = NormalizeContext {
        workspace: &vars.workspace,
        home: &vars.home,
        fs: &SoftFs,
    };
    let resolved = engine.contracts().lookup_with(name, Some(def));
    let contract = resolved.contract().clone();
    let sources = resolved.sources().to_vec();
    let has_entry = resolved.has_entry();
    drop(resolved);
    let arguments = typical_arguments(def, &contract);
    let call = ToolCall {
        server: Some(server),
        tool: name,
        arguments: &arguments,
        definition: Some(def),
    };
    let decision = engine.decide(&call, session, &ctx, 0);
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
    let mut found = Vec::new();
    tool_findings(server, &t, &contract, &sources, &mut found);
    Some((t, found))
}

/// A fresh session of `server`'s tools, pinned, as the report decides in.
fn server_session(loaded: &LoadedPolicy, server: &ServerTools) -> Session {
    let mut limits = SessionLimits::new(loaded.policy.taint.clone().unwrap_or_default());
    limits.pinning = true;
    let mut session = Session::new(limits);
    session.pin_tools(&server.tools);
    session.listing_complete();
    session
}

/// The kinds of the high findings the report makes of `tool` (of `server`, or of any) under
/// `engine`: what a suggestion must not add.
fn high_findings(
    inputs_servers: &[ServerTools],
    loaded: &LoadedPolicy,
    engine: &Engine,
    server: Option<&str>,
    tool: &str,
) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    for s in inputs_servers
        .iter()
        .filter(|s| server.is_none_or(|name| name == s.name))
    {
        let mut session = server_session(loaded, s);
        for def in &s.tools {
            if def.get("name").and_then(Value::as_str) != Some(tool) {
                continue;
            }
            if let Some((_, found)) = tool_row(&s.name, def, engine, loaded, &mut session) {
                kinds.extend(
                    found
                        .iter()
                        .filter(|f| f.severity == Severity::High)
                        .map(|f| f.kind),
                );
            }
        }
    }
    kinds
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
    let mut servers = Vec::new();
    for server in &inputs.servers {
        let mut session = server_session(loaded, server);
        let mut tools = Vec::new();
        for def in &server.tools {
            if let Some((t, found)) = tool_row(&server.name, def, engine, loaded, &mut session) {
                findings.extend(found);
                tools.push(t);
            }
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
    let (suggestions, not_suggested) = inputs
        .audit
        .as_ref()
        .map(|a| {
            suggestions(a, loaded, engine, &|engine, server, tool| {
                high_findings(&inputs.servers, loaded, engine, server, tool)
            })
        })
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
        not_suggested,
        not_enforced: NOT_ENFORCED.iter().map(|s| (*s).to_owned()).collect(),
    }
}
