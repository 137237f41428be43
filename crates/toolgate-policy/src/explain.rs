//! `explain`: a decision as human text and as the JSON shape of `toolgate policy explain --json`:
//!
//! ```json
//! {"action":{"server","tool","parts":[{"operation","resources","argv","executable",
//!   "network":{"url","scheme","host","port","method"},"beneath":{"filters":[]},
//!   "opaque":true}]},
//!  "decision":{"effect","rule","contract","reason","matched_rules":[]}}
//! ```
//! Absent fields are omitted; `matched_rules` is always present. `beneath` marks a
//! recursive part (its `resources` are directories; `filters` the file-name globs it is
//! narrowed to, empty for every file). `"hidden": true` marks the
//! parts the text form shows as `hidden: yes`. `"opaque": true` marks
//! exactly the parts the text form shows as `opaque: yes` (not understood exactly: allow
//! rules never match them); a part that was understood has no `opaque` member.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use crate::action::Part;
use crate::eval::Decision;

/// The JSON shape `policy explain --json` documents (docs/policy.md), exactly: scripts read it.
pub fn to_json(decision: &Decision) -> Value {
    let mut action = Map::new();
    if let Some(server) = &decision.action.server {
        action.insert("server".into(), Value::String(server.clone()));
    }
    action.insert("tool".into(), Value::String(decision.action.tool.clone()));
    action.insert(
        "parts".into(),
        Value::Array(decision.action.parts.iter().map(part_json).collect()),
    );
    let mut d = Map::new();
    d.insert(
        "effect".into(),
        Value::String(decision.effect.as_str().into()),
    );
    if let Some(rule) = &decision.rule {
        d.insert("rule".into(), Value::String(rule.clone()));
    }
    d.insert(
        "contract".into(),
        Value::String(decision.contract.as_str().into()),
    );
    d.insert("reason".into(), Value::String(decision.reason.clone()));
    d.insert(
        "matched_rules".into(),
        Value::Array(
            decision
                .matched_rules
                .iter()
                .map(|r| Value::String(r.clone()))
                .collect(),
        ),
    );
    json!({"action": Value::Object(action), "decision": Value::Object(d)})
}

fn part_json(part: &Part) -> Value {
    let mut m = Map::new();
    m.insert(
        "operation".into(),
        Value::String(part.operation.as_str().into()),
    );
    if !part.resources.is_empty() {
        m.insert(
            "resources".into(),
            Value::Array(part.resources.iter().cloned().map(Value::String).collect()),
        );
    }
    if let Some(argv) = &part.argv {
        m.insert(
            "argv".into(),
            Value::Array(argv.iter().cloned().map(Value::String).collect()),
        );
    }
    if let Some(exe) = &part.executable {
        m.insert("executable".into(), Value::String(exe.clone()));
    }
    if let Some(net) = &part.network {
        let mut n = Map::new();
        n.insert("url".into(), Value::String(net.url.clone()));
        n.insert("scheme".into(), Value::String(net.scheme.clone()));
        n.insert("host".into(), Value::String(net.host.clone()));
        if let Some(port) = net.port {
            n.insert("port".into(), Value::from(port));
        }
        n.insert("method".into(), Value::String(net.method.clone()));
        m.insert("network".into(), Value::Object(n));
    }
    if let Some(b) = &part.beneath {
        // The text form's "beneath:": a recursive part, and the file names it narrows to.
        m.insert(
            "beneath".into(),
            json!({"filters": b.filters.iter().cloned().map(Value::String).collect::<Vec<_>>()}),
        );
    }
    if part.opaque {
        // The text form's "opaque: yes": not understood exactly, allow rules never match it.
        m.insert("opaque".into(), Value::Bool(true));
    }
    if part.hidden {
        // The text form's "hidden: yes": hides what it touches, never `default: allow`.
        m.insert("hidden".into(), Value::Bool(true));
    }
    Value::Object(m)
}

/// Human text: the normalised action, every matching rule, every contributing result,
/// and the final decision.
pub fn to_text(decision: &Decision) -> String {
    let mut out = String::new();
    let a = &decision.action;
    let _ = match &a.server {
        Some(s) => writeln!(out, "call:      {s} / {}", a.tool),
        None => writeln!(out, "call:      {}", a.tool),
    };
    let _ = writeln!(out, "action:    {} part(s)", a.parts.len());
    for (i, part) in a.parts.iter().enumerate() {
        let _ = writeln!(out, "  [{}] {}", i + 1, part.operation);
        for r in &part.resources {
            let _ = writeln!(out, "      resource:   {r}");
        }
        if let Some(exe) = &part.executable {
            let _ = writeln!(out, "      executable: {exe}");
        }
        if let Some(argv) = &part.argv {
            let _ = writeln!(out, "      argv:       {}", shell_words(argv));
        }
        if let Some(net) = &part.network {
            let _ = writeln!(out, "      request:    {} {}", net.method, net.url);
            let _ = writeln!(out, "      host:       {}", net.host);
        }
        if let Some(b) = &part.beneath {
            let names = if b.filters.is_empty() {
                "every file".to_owned()
            } else {
                format!(
                    "files named {}",
                    b.filters
                        .iter()
                        .map(|f| format!("`{f}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            let _ = writeln!(
                out,
                "      beneath:    {names} (recursive: deny rules meet what lies beneath, allow rules must cover it)"
            );
        }
        if part.opaque {
            let _ = writeln!(
                out,
                "      opaque:     yes (not understood exactly: allow rules never match it)"
            );
        }
        if part.hidden {
            let _ = writeln!(
                out,
                "      hidden:     yes (hides what it touches: never `default: allow`; deny rules with resources match it)"
            );
        }
    }
    if decision.matched_rules.is_empty() {
        let _ = writeln!(out, "matched:   no rule");
    } else {
        let _ = writeln!(out, "matched:   {}", decision.matched_rules.join(", "));
    }
    let _ = writeln!(out, "results:");
    for r in &decision.results {
        let who = match &r.rule {
            Some(id) => format!("{} `{id}`", r.contract),
            None => r.contract.to_string(),
        };
        let _ = writeln!(out, "  {:<5} {who}: {}", r.effect.as_str(), r.reason);
        for s in &r.sinks {
            let from = match (&s.source_tool, s.source_seq) {
                (Some(t), Some(seq)) => {
                    let server = s
                        .source_server
                        .as_deref()
                        .map(|v| format!("{v} / "))
                        .unwrap_or_default();
                    format!(" (seen in output of {server}{t}, call #{seq})")
                }
                (Some(t), None) => format!(" (seen in output of {t})"),
                _ => match (&s.trusted_by_rule, s.verdict) {
                    (Some(id), _) => format!(" (allow rule `{id}` matches its host and method)"),
                    (None, crate::decision::SinkVerdict::UserVouched) => {
                        " (typed by the user in a prompt of this session)".to_owned()
                    }
                    (None, _) => String::new(),
                },
            };
            let _ = writeln!(
                out,
                "        sink {} = `{}`: {}{from}",
                s.argument,
                s.value,
                s.verdict.as_str()
            );
        }
    }
    if let Some(a) = &decision.approved_by_session {
        let _ = writeln!(out, "approval:  {a}");
    }
    let decider = match &decision.rule {
        Some(id) => format!("{} `{id}`", decision.contract),
        None => decision.contract.to_string(),
    };
    let _ = writeln!(
        out,
        "decision:  {} (by {decider})",
        decision.effect.as_str().to_uppercase()
    );
    let _ = writeln!(out, "reason:    {}", decision.reason);
    out
}

fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::{Action, Network, Operation};
    use crate::decision::{Contract, Effect};

    #[test]
    fn json_shape_omits_absent_fields() {
        let mut p = Part::new(Operation::NetRequest);
        p.network = Some(Network {
            url: "https://a.com/".into(),
            scheme: "https".into(),
            host: "a.com".into(),
            port: Some(443),
            method: "GET".into(),
        });
        p.opaque = true;
        let d = Decision {
            action: Action {
                server: None,
                tool: "fetch".into(),
                parts: vec![p],
            },
            effect: Effect::Ask,
            contract: Contract::Default,
            rule: None,
            reason: "r".into(),
            matched_rules: vec![],
            results: vec![],
            approved_by_session: None,
            sinks: vec![],
        };
        let v = to_json(&d);
        assert_eq!(
            v.to_string(),
            r#"{"action":{"tool":"fetch","parts":[{"operation":"net.request","network":{"url":"https://a.com/","scheme":"https","host":"a.com","port":443,"method":"GET"},"opaque":true}]},"decision":{"effect":"ask","contract":"default","reason":"r","matched_rules":[]}}"#
        );
        assert!(to_text(&d).contains("decision:  ASK (by default)"));
    }

    /// A decision that asks about the action of tool `t` made of `parts`.
    fn asked(parts: Vec<Part>) -> Decision {
        Decision {
            action: Action {
                server: None,
                tool: "t".into(),
                parts,
            },
            effect: Effect::Ask,
            contract: Contract::Default,
            rule: None,
            reason: "r".into(),
            matched_rules: vec![],
            results: vec![],
            approved_by_session: None,
            sinks: vec![],
        }
    }

    /// `"opaque": true` in JSON exactly where the text says `opaque: yes` (both forms agree).
    #[test]
    fn json_marks_opaque_parts_as_the_text_does() {
        let exact = Part::new(Operation::FsRead);
        let mut unsure = Part::new(Operation::ShellExec);
        unsure.opaque = true;
        let unknown = {
            let mut p = Part::new(Operation::Unknown);
            p.opaque = true;
            p
        };
        let d = asked(vec![exact, unsure, unknown]);
        let v = to_json(&d);
        let json_marks: Vec<bool> = v["action"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| p.get("opaque") == Some(&Value::Bool(true)))
            .collect();
        let text = to_text(&d);
        let text_marks: Vec<bool> = text
            .split("\n  [")
            .skip(1)
            .map(|block| block.contains("opaque:     yes"))
            .collect();
        assert_eq!(json_marks, [false, true, true]);
        assert_eq!(json_marks, text_marks);
    }

    /// `"hidden": true` in JSON exactly where the text says `hidden: yes`.
    #[test]
    fn json_marks_hidden_parts_as_the_text_does() {
        let d = asked(vec![
            Part::hidden(Operation::FsRead),
            Part::new(Operation::FsRead),
        ]);
        let v = to_json(&d);
        let json_marks: Vec<bool> = v["action"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| p.get("hidden") == Some(&Value::Bool(true)))
            .collect();
        let text_marks: Vec<bool> = to_text(&d)
            .split("\n  [")
            .skip(1)
            .map(|block| block.contains("hidden:     yes"))
            .collect();
        assert_eq!(json_marks, [true, false]);
        assert_eq!(json_marks, text_marks);
    }
}
