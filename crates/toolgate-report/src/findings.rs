//! Findings about a tool, and the policy suggestions drawn from the audit figures.

use super::audit::AuditFigures;
use crate::model::{Finding, SUGGEST_AFTER, Severity, Suggestion, ToolReport, yaml_str};
use toolgate_policy::contracts::{EntrySource, ToolContract};
use toolgate_policy::{Effect, LoadedPolicy};

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

pub(super) fn tool_findings(
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
pub(super) fn suggestions(a: &AuditFigures, loaded: &LoadedPolicy) -> Vec<Suggestion> {
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
