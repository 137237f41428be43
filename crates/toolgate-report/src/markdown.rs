//! The Markdown rendering of a [`Report`]. Text from servers and the log is escaped so it
//! shows as written: control characters as `\u{…}` escapes, Markdown and HTML syntax
//! backslash-escaped, code spans and blocks fenced longer than any backtick run inside.

use std::fmt::Write as _;

use super::audit::{AuditFigures, EffectCounts};
use crate::model::{Finding, Report};

/// Control characters shown as escapes (a terminal or renderer never sees them raw).
pub fn printable(s: &str) -> String {
    toolgate_audit::printable(s)
}

/// Text that toolgate wrote with `code` spans in it (reasons, details): spans stay code
/// spans, everything else is escaped; with an odd number of backticks, all is escaped.
pub fn text(s: &str) -> String {
    let s = printable(s);
    if !s.matches('`').count().is_multiple_of(2) {
        return escaped(&s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for (i, seg) in s.split('`').enumerate() {
        if i % 2 == 0 {
            out.push_str(&escaped(seg));
        } else {
            out.push('`');
            out.push_str(&seg.replace('|', "\\|"));
            out.push('`');
        }
    }
    out
}

/// Plain text with every Markdown and HTML special character escaped.
pub fn escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in printable(s).chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '#' | '&' | '!' | '~'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn longest_run(s: &str, ch: char) -> usize {
    let (mut best, mut cur) = (0, 0);
    for c in s.chars() {
        if c == ch {
            cur += 1;
            best = best.max(cur);
        } else {
            cur = 0;
        }
    }
    best
}

/// An inline code span holding `s` exactly (control characters escaped, `|` escaped for
/// tables).
pub fn code(s: &str) -> String {
    let s = printable(s).replace('|', "\\|");
    let fence = "`".repeat(longest_run(&s, '`') + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') || s.is_empty() {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{s}{pad}{fence}")
}

fn block(out: &mut String, lang: &str, s: &str) {
    let s = printable_keep_newlines(s);
    let fence = "`".repeat(longest_run(&s, '`').max(2) + 1);
    let _ = writeln!(out, "{fence}{lang}\n{s}\n{fence}");
}

fn printable_keep_newlines(s: &str) -> String {
    s.split('\n').map(printable).collect::<Vec<_>>().join("\n")
}

fn effects(e: &EffectCounts) -> String {
    format!("{} allow, {} ask, {} deny", e.allow, e.ask, e.deny)
}

/// Renders the report as Markdown.
pub fn render(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# toolgate report\n");
    let p = &r.policy;
    let _ = writeln!(
        o,
        "Policy: {} — default {}, {} deny / {} ask / {} allow rules, {} `tools:` entr{}, packs: {}.\n",
        text(&p.source),
        p.default,
        p.rules.deny,
        p.rules.ask,
        p.rules.allow,
        p.tool_entries,
        if p.tool_entries == 1 { "y" } else { "ies" },
        if p.packs.is_empty() {
            "none".to_owned()
        } else {
            p.packs
                .iter()
                .map(|x| code(x))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let _ = writeln!(o, "## What is enforced, tool by tool\n");
    if r.servers.is_empty() {
        let _ = writeln!(
            o,
            "No tool definitions: no server is pinned, and neither `--tools` nor `--probe` was given.\n"
        );
    }
    for s in &r.servers {
        let _ = writeln!(
            o,
            "### Server {} ({} tool{}, from {})\n",
            code(&s.name),
            s.tools.len(),
            if s.tools.len() == 1 { "" } else { "s" },
            match s.source {
                super::ToolSource::Pins => "the pin store",
                super::ToolSource::File => "a file",
                super::ToolSource::Probe => "a live probe",
            }
        );
        let _ = writeln!(
            o,
            "| Tool | Operation | Typical call | Decided by | Contract |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|");
        for t in &s.tools {
            let _ = writeln!(
                o,
                "| {} | {} | **{}** | {} | {} |",
                code(&t.name),
                if t.operations.is_empty() {
                    "-".to_owned()
                } else {
                    t.operations.join(", ")
                },
                t.typical.effect,
                match &t.typical.rule {
                    Some(rule) => format!("rule {}", code(rule)),
                    None => t.typical.decided_by.clone(),
                },
                if t.has_entry {
                    "entry"
                } else {
                    "heuristics only"
                }
            );
        }
        let _ = writeln!(o);
        for t in &s.tools {
            let _ = writeln!(o, "#### {}\n", code(&t.name));
            if !t.description.is_empty() {
                let _ = writeln!(o, "> {}\n", escaped(&t.description));
            }
            let _ = writeln!(
                o,
                "- typical call {} → **{}** by {}: {}",
                code(&t.typical.arguments.to_string()),
                t.typical.effect,
                match &t.typical.rule {
                    Some(rule) => format!("rule {}", code(rule)),
                    None => t.typical.decided_by.clone(),
                },
                text(&t.typical.reason)
            );
            if !t.annotations.is_empty() {
                let _ = writeln!(
                    o,
                    "- declared annotations: {}",
                    t.annotations
                        .iter()
                        .map(|(k, v)| code(&format!("{k}: {v}")))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            // A control nothing sets and that does nothing is one word on one line.
            let mut unset = Vec::new();
            for c in &t.controls {
                if c.origin.iter().all(|x| matches!(x, super::Origin::None)) {
                    if c.detail.starts_with("no ") {
                        unset.push(c.control.to_string());
                    } else {
                        let _ = writeln!(o, "- {}: {} (default)", c.control, text(&c.detail));
                    }
                    continue;
                }
                let _ = writeln!(
                    o,
                    "- {}: {} — from {}",
                    c.control,
                    text(&c.detail),
                    c.origin
                        .iter()
                        .map(|x| text(&x.label()))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            if !unset.is_empty() {
                let _ = writeln!(o, "- not set: {}", unset.join(", "));
            }
            let _ = writeln!(o);
        }
    }
    let _ = writeln!(o, "## Findings\n");
    if r.findings.is_empty() {
        let _ = writeln!(o, "None.\n");
    }
    for f in &r.findings {
        finding(&mut o, f);
    }
    let _ = writeln!(o, "## What happened\n");
    match &r.audit {
        Some(a) => audit(&mut o, a),
        None => {
            let _ = writeln!(
                o,
                "{}\n",
                text(r.audit_note.as_deref().unwrap_or("No audit log."))
            );
        }
    }
    let _ = writeln!(o, "## Suggestions\n");
    if r.suggestions.is_empty() {
        let _ = writeln!(o, "None: {}.\n", text(&super::none_reason(r)));
    }
    for s in &r.suggestions {
        let _ = writeln!(o, "- {}:\n", text(&s.why));
        block(&mut o, "yaml", &s.policy_lines);
        let _ = writeln!(o);
    }
    for why in &r.not_suggested {
        let _ = writeln!(o, "- Not suggested: {}.", text(why));
    }
    if !r.not_suggested.is_empty() {
        let _ = writeln!(o);
    }
    let _ = writeln!(o, "## What toolgate does not enforce\n");
    for n in &r.not_enforced {
        let _ = writeln!(o, "- {}", text(n));
    }
    o
}

fn finding(o: &mut String, f: &Finding) {
    let who = match (&f.server, &f.tool) {
        (Some(s), Some(t)) => format!(" {}/{}", code(s), code(t)),
        (None, Some(t)) => format!(" {}", code(t)),
        _ => String::new(),
    };
    let _ = writeln!(
        o,
        "- **{}** {}{who}: {}",
        f.severity.as_str().to_uppercase(),
        f.kind,
        text(&f.message)
    );
    if let Some(line) = &f.policy_line {
        let _ = writeln!(o);
        block(o, "yaml", line);
    }
    let _ = writeln!(o);
}

fn audit(o: &mut String, a: &AuditFigures) {
    let _ = writeln!(
        o,
        "Audit log {}: {} record{}{}, {}.\n",
        code(&a.path),
        a.records,
        if a.records == 1 { "" } else { "s" },
        match (&a.since, &a.until) {
            (None, None) => String::new(),
            (s, u) => format!(
                " between {} and {}",
                s.as_deref().unwrap_or("the start"),
                u.as_deref().unwrap_or("the end")
            ),
        },
        match (&a.first_time, &a.last_time) {
            (Some(f), Some(l)) => format!("from {f} to {l}"),
            _ => "no records in range".to_owned(),
        }
    );
    if a.chain.intact {
        let _ = writeln!(
            o,
            "Chain: **intact** ({} records verified).\n",
            a.chain.verified_records
        );
    } else {
        let _ = writeln!(
            o,
            "Chain: **BROKEN**: {} ({} records verified before the problem; do not trust what follows).\n",
            text(a.chain.problem.as_deref().unwrap_or("?")),
            a.chain.verified_records
        );
    }
    if a.unreadable > 0 {
        let _ = writeln!(o, "Unreadable lines: {}.\n", a.unreadable);
    }
    let _ = writeln!(o, "Decisions: {}.\n", effects(&a.decisions));
    let ao = &a.ask_outcomes;
    let _ = writeln!(
        o,
        "Asks ended: {} allowed once, {} allowed for the session, {} denied, {} timed out, {} cancelled, {} unknown.\n",
        ao.allowed_once, ao.allowed_session, ao.denied, ao.timed_out, ao.cancelled, ao.unknown
    );
    if !a.by_tool.is_empty() {
        let _ = writeln!(o, "| Tool | Allow | Ask | Deny |\n|---|---:|---:|---:|");
        let mut tools: Vec<_> = a.by_tool.iter().collect();
        tools.sort_by(|x, y| y.1.total().cmp(&x.1.total()).then_with(|| x.0.cmp(y.0)));
        for (t, e) in tools.iter().take(20) {
            let _ = writeln!(o, "| {} | {} | {} | {} |", code(t), e.allow, e.ask, e.deny);
        }
        if tools.len() > 20 {
            let _ = writeln!(o, "| ({} more) | | | |", tools.len() - 20);
        }
        let _ = writeln!(o);
    }
    if !a.by_contract.is_empty() {
        let _ = writeln!(
            o,
            "Decided by: {}.\n",
            a.by_contract
                .iter()
                .map(|(k, n)| format!("{} {n}", code(k)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !a.by_day.is_empty() {
        let _ = writeln!(
            o,
            "| Day (UTC) | Allow | Ask | Deny |\n|---|---:|---:|---:|"
        );
        for (d, e) in &a.by_day {
            let _ = writeln!(o, "| {} | {} | {} | {} |", text(d), e.allow, e.ask, e.deny);
        }
        let _ = writeln!(o);
    }
    if !a.top_denied_hosts.is_empty() {
        let _ = writeln!(
            o,
            "Most denied destination hosts: {}.\n",
            a.top_denied_hosts
                .iter()
                .map(|(h, n)| format!("{} {n}", code(h)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}
