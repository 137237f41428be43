//! Findings about a tool, and the policy suggestions drawn from the audit figures.

use super::audit::{AskKey, AskTally, AuditFigures, MAX_APPROVED_PATHS};
use crate::model::{Finding, SUGGEST_AFTER, Severity, Suggestion, ToolReport, yaml_str};
use toolgate_policy::contracts::{EntrySource, ToolContract};
use toolgate_policy::{Action, CallFacts, Effect, Engine, LoadedPolicy, Operation, Part, Vars};

/// Every suggestion of `report` as one YAML text, grouped under `rules:` and `tools:`, ready
/// to paste; what was not suggested, and why, as comments (`# no suggestions: …` when there
/// is nothing to paste).
pub fn suggestion_yaml(report: &crate::Report) -> String {
    let mut out = String::new();
    for section in ["rules", "tools"] {
        let items: Vec<&str> = report
            .suggestions
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
    if report.suggestions.is_empty() {
        out.push_str(&format!("# no suggestions: {}\n", none_reason(report)));
    }
    for why in &report.not_suggested {
        out.push_str(&format!("# not suggested: {why}\n"));
    }
    out
}

/// Why a report suggests nothing.
pub fn none_reason(report: &crate::Report) -> String {
    match (&report.audit, &report.not_suggested) {
        (None, _) => format!(
            "suggestions come from the audit log, and there is none ({})",
            report
                .audit_note
                .as_deref()
                .unwrap_or("no audit log")
                .trim_end_matches('.')
        ),
        (Some(_), withheld) if !withheld.is_empty() => {
            "every ask approved often enough would need a rule that reaches further than what was approved (below)".to_owned()
        }
        (Some(_), _) => format!(
            "nothing was approved {SUGGEST_AFTER} times or more without also being refused or tainted"
        ),
    }
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

/// Policy lines for what humans approved again and again, and why others were not
/// suggested. Never a destination that was tainted when it was asked about, never an ask
/// that a rule or contract would deny, never anything that was also refused; a rule for
/// paths keeps to the paths approved ([`scope`]), and no rule is suggested that would open
/// a sensitive path the policy does not already allow, or that the report would rate high
/// (`high`: the kinds of high finding of a tool under an engine).
pub(super) fn suggestions(
    a: &AuditFigures,
    loaded: &LoadedPolicy,
    engine: &Engine,
    high: HighFindings<'_>,
) -> (Vec<Suggestion>, Vec<String>) {
    let mut out = Vec::new();
    let mut withheld = Vec::new();
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
                // Where the allow rule goes: above the ask rule that asked (the first match
                // wins among allow and ask; a deny rule still wins over it), else last.
                let mut at = loaded.policy.rules.len();
                if let Some(rule) = &key.rule {
                    let Some(i) = loaded.policy.rules.iter().position(|r| &r.id == rule) else {
                        continue;
                    };
                    if loaded
                        .policy
                        .rules
                        .get(i)
                        .is_some_and(|r| r.effect == Effect::Deny)
                    {
                        continue;
                    }
                    at = i;
                    l.push_str(&format!("  # place above rule `{rule}`\n"));
                }
                let resources = match scope(key, tally, loaded, engine, at, high) {
                    Ok(r) => r,
                    Err(why) => {
                        withheld.push(format!(
                            "`{}` ({op}) was approved {} times, but {why}",
                            key.tool, tally.approved
                        ));
                        continue;
                    }
                };
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
                if let Some(globs) = &resources {
                    let shown: Vec<String> = globs.iter().map(|g| yaml_str(g)).collect();
                    l.push_str(&format!("\n    resources: [{}]", shown.join(", ")));
                }
                let what = match (&key.executable, &key.host, &resources) {
                    (Some(e), _, _) => format!("`{}` running `{e}`", key.tool),
                    (_, Some(h), _) => format!("`{}` reaching `{h}`", key.tool),
                    (_, _, Some(globs)) => {
                        format!("`{}` ({op}) of `{}`", key.tool, globs.join("`, `"))
                    }
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
    withheld.sort();
    (out, withheld)
}

/// The kinds of the high findings the report makes of a tool (of a server, or of any) under
/// an engine.
pub(super) type HighFindings<'f> = &'f dyn Fn(&Engine, Option<&str>, &str) -> Vec<&'static str>;

/// The most paths a suggestion lists one by one.
const MAX_LISTED: usize = 8;

/// The `resources` of a suggested allow rule (placed at index `at` of the rules): `Ok(None)`
/// for an operation without paths (a command, a request); else the narrowest globs that
/// cover every approved path and neither open a sensitive path the policy does not already
/// allow ([`sensitive_paths`]) nor draw a high finding of the report: their common folder
/// with their shared extension (`${workspace}/notes/*.md`), their common folder, or the
/// paths one by one. `Err` says why there is none.
fn scope(
    key: &AskKey,
    tally: &AskTally,
    loaded: &LoadedPolicy,
    engine: &Engine,
    at: usize,
    high: HighFindings<'_>,
) -> Result<Option<Vec<String>>, String> {
    let op_name = key.operation.as_deref().unwrap_or("unknown");
    let op: Operation = op_name
        .parse()
        .map_err(|_| format!("its operation `{op_name}` is not one a rule can name"))?;
    let with_paths = op_name.starts_with("fs.") || op_name.starts_with("git.");
    if tally.resources_overflow {
        return Err(format!(
            "more than {MAX_APPROVED_PATHS} paths were approved: a rule for all of them would be a guess"
        ));
    }
    let paths: Vec<&str> = tally.resources.iter().map(String::as_str).collect();
    if with_paths && paths.is_empty() {
        return Err("its approved calls name no path, so no rule could keep to them".to_owned());
    }
    let vars = engine.vars();
    let before_high = high(engine, key.server.as_deref(), &key.tool);
    let mut candidates: Vec<Vec<String>> = Vec::new();
    if paths.is_empty() {
        candidates.push(Vec::new());
    } else if let [only] = paths.as_slice() {
        candidates.push(vec![as_glob(only, vars)]);
    } else {
        let dir = common_dir(&paths);
        let same_dir = paths.iter().all(|p| parent(p) == dir);
        let ext = shared_extension(&paths);
        if !too_wide(&dir, vars) {
            let base = as_glob(&dir, vars);
            let any = if same_dir { "*" } else { "**/*" };
            if let Some(e) = ext {
                candidates.push(vec![format!(
                    "{base}/{any}.{}",
                    toolgate_policy::protect::escape(e)
                )]);
            }
            candidates.push(vec![format!(
                "{base}/{}",
                if same_dir { "*" } else { "**" }
            )]);
        }
        if paths.len() <= MAX_LISTED {
            candidates.push(paths.iter().map(|p| as_glob(p, vars)).collect());
        }
    }
    let mut why = format!(
        "its {} approved paths share no folder narrower than `{}`, and are too many to list",
        paths.len(),
        common_dir(&paths)
    );
    for globs in candidates {
        let mut rule = serde_json::Map::new();
        rule.insert("id".into(), "suggested".into());
        rule.insert("effect".into(), "allow".into());
        rule.insert("operations".into(), serde_json::json!([op_name]));
        rule.insert("tools".into(), serde_json::json!([key.tool]));
        for (field, value) in [
            ("servers", &key.server),
            ("executables", &key.executable),
            ("hosts", &key.host),
        ] {
            if let Some(v) = value {
                rule.insert(field.into(), serde_json::json!([v]));
            }
        }
        if !globs.is_empty() {
            rule.insert("resources".into(), serde_json::json!(globs));
        }
        let rule = serde_json::Value::Object(rule);
        let Ok(rule) = serde_json::from_value::<toolgate_policy::Rule>(rule) else {
            why = "it could not be written as a rule".to_owned();
            continue;
        };
        let mut policy = loaded.policy.clone();
        policy.rules.insert(at.min(policy.rules.len()), rule);
        let Ok(with) = Engine::new(policy, vars.clone()) else {
            why = "it could not be written as a rule".to_owned();
            continue;
        };
        let decide = |engine: &Engine, path: &str| {
            let mut part = Part::new(op);
            part.resources = vec![path.to_owned()];
            let action = Action {
                server: key.server.clone(),
                tool: key.tool.clone(),
                parts: vec![part],
            };
            let facts = CallFacts {
                server: key.server.as_deref(),
                tool: &key.tool,
                annotations: None,
                builtin: false,
            };
            engine.decide_rules(&action, &facts).effect
        };
        if paths.iter().any(|p| decide(&with, p) != Effect::Allow) {
            return Err(
                "a deny rule or toolgate's own protection decides some of its paths, so no allow rule would change them"
                    .to_owned(),
            );
        }
        let dir = common_dir(&paths);
        if let Some(opened) = sensitive_paths(vars, &dir)
            .into_iter()
            .filter(|_| with_paths)
            .find(|p| decide(&with, p) == Effect::Allow && decide(engine, p) != Effect::Allow)
        {
            why = format!("a rule wide enough for its paths would also allow `{opened}`");
            continue;
        }
        if let Some(kind) = high(&with, key.server.as_deref(), &key.tool)
            .into_iter()
            .find(|k| !before_high.contains(k))
        {
            why = format!("the rule would draw a high finding of this report (`{kind}`)");
            continue;
        }
        return Ok((!globs.is_empty()).then_some(globs));
    }
    Err(why)
}

/// Paths a suggested rule must not open: shell start-up files, keys and credentials, git
/// hooks and configuration, toolgate's and the agents' own settings, in the home folder,
/// the workspace and `dir` (the approved paths' common folder).
fn sensitive_paths(vars: &Vars, dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    for name in [
        ".bashrc",
        ".zshrc",
        ".profile",
        ".ssh/authorized_keys",
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".gitconfig",
        ".config/toolgate/policy.yaml",
        ".claude/settings.json",
    ] {
        out.push(format!("{}/{name}", vars.home));
    }
    for base in [vars.workspace.as_str(), dir] {
        for name in [
            ".env",
            ".git/config",
            ".git/hooks/pre-commit",
            "toolgate.yaml",
            ".claude/settings.json",
            ".bashrc",
        ] {
            out.push(format!("{}/{name}", base.trim_end_matches('/')));
        }
    }
    out.push("/etc/passwd".to_owned());
    out
}

/// `path` as a glob that matches only it, with the workspace or home folder it is in
/// written as `${workspace}` or `${home}`.
fn as_glob(path: &str, vars: &Vars) -> String {
    for (var, base) in [("${workspace}", &vars.workspace), ("${home}", &vars.home)] {
        let base = base.trim_end_matches('/');
        if path == base {
            return var.to_owned();
        }
        if let Some(rest) = path.strip_prefix(base).and_then(|r| r.strip_prefix('/')) {
            return format!("{var}/{}", toolgate_policy::protect::escape(rest));
        }
    }
    toolgate_policy::protect::escape(path)
}

/// Whether a folder is too wide to allow all of: the root, or the home folder, or one of
/// the folders above it or the workspace.
fn too_wide(dir: &str, vars: &Vars) -> bool {
    let above = |inner: &str| {
        let inner = inner.trim_end_matches('/');
        inner == dir || inner.starts_with(&format!("{}/", dir.trim_end_matches('/')))
    };
    dir.trim_end_matches('/').is_empty()
        || above(&vars.home)
        || (above(&vars.workspace) && dir != vars.workspace.trim_end_matches('/'))
}

/// The folder a path is in (`/` for one at the root).
fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => path.get(..i).unwrap_or("/"),
    }
}

/// The deepest folder that holds every one of `paths`.
fn common_dir(paths: &[&str]) -> String {
    let mut common: Option<Vec<&str>> = None;
    for p in paths {
        let dir: Vec<&str> = parent(p).split('/').filter(|c| !c.is_empty()).collect();
        common = Some(match common {
            None => dir,
            Some(c) => c
                .iter()
                .zip(&dir)
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| *a)
                .collect(),
        });
    }
    format!("/{}", common.unwrap_or_default().join("/"))
}

/// The extension every one of `paths` has (`md`), when they share one.
fn shared_extension<'p>(paths: &[&'p str]) -> Option<&'p str> {
    let ext = |p: &'p str| {
        let name = p.rsplit('/').next().unwrap_or(p);
        name.rsplit_once('.')
            .filter(|(stem, e)| !stem.is_empty() && !e.is_empty())
            .map(|(_, e)| e)
    };
    let first = ext(paths.first()?)?;
    paths.iter().all(|p| ext(p) == Some(first)).then_some(first)
}
