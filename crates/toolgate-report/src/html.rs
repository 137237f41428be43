//! The HTML rendering of a [`Report`]: one self-contained page. No script, no external
//! style, font or image; the charts are inline SVG drawn here. A Content-Security-Policy
//! meta tag (`default-src 'none'`) keeps the page from loading or running anything even if
//! escaping were ever wrong. Every piece of text goes through [`esc`].

use std::fmt::Write as _;

use super::audit::{AuditFigures, EffectCounts};
use crate::model::{Report, ToolSource};

/// Escapes text for HTML element content and quoted attribute values: `&<>"'` become
/// entities; control characters are shown as visible escapes (`\u{1b}`) first.
pub fn esc(s: &str) -> String {
    let s = toolgate_audit::printable(s);
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Noncharacters and lone surrogates cannot occur in a Rust string; these are
            // permitted by HTML but shown escaped so nothing invisible slips through.
            '\u{fffe}'
            | '\u{ffff}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Text toolgate wrote with `code` spans in it (reasons, details, findings): each span
/// becomes a `<code>` element, everything escaped; with an odd number of backticks, plain.
pub fn rich(s: &str) -> String {
    if !s.matches('`').count().is_multiple_of(2) {
        return esc(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for (i, seg) in s.split('`').enumerate() {
        if i % 2 == 0 {
            out.push_str(&esc(seg));
        } else {
            out.push_str("<code>");
            out.push_str(&esc(seg));
            out.push_str("</code>");
        }
    }
    out
}

const STYLE: &str = r#"
:root{color-scheme:light dark;--bg:#fff;--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--card:#f6f8fa;
--allow:#1a7f37;--ask:#bf8700;--deny:#cf222e;--once:#54aeff;--session:#0969da;--timeout:#8c959f;--cancel:#bc4c00;--unknown:#d0d7de}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#8d96a0;--line:#30363d;--card:#161b22;
--allow:#3fb950;--ask:#d29922;--deny:#f85149;--once:#79c0ff;--session:#388bfd;--timeout:#6e7681;--cancel:#db6d28;--unknown:#484f58}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:70rem;padding:1.5rem;background:var(--bg);color:var(--fg);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
h1{font-size:1.6rem;margin:.2rem 0}h2{font-size:1.25rem;border-bottom:1px solid var(--line);padding-bottom:.2rem;margin-top:2rem}
h3{font-size:1.05rem}code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em}
code{background:var(--card);padding:0 .25em;border-radius:4px;word-break:break-all}
pre{background:var(--card);border:1px solid var(--line);padding:.6rem;border-radius:6px;overflow-x:auto;white-space:pre-wrap}
table{border-collapse:collapse;width:100%;margin:.5rem 0}th,td{border:1px solid var(--line);padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:var(--card)}.muted{color:var(--muted)}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(20rem,1fr));gap:1rem}
figure{margin:0;background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.6rem}
figcaption{font-weight:600;margin-bottom:.3rem}
svg text{fill:var(--fg);font-size:11px;font-family:system-ui,sans-serif}svg .axis{stroke:var(--line)}
.allow{fill:var(--allow)}.ask{fill:var(--ask)}.deny{fill:var(--deny)}.once{fill:var(--once)}.session{fill:var(--session)}
.timeout{fill:var(--timeout)}.cancel{fill:var(--cancel)}.unknown{fill:var(--unknown)}
.sev{display:inline-block;min-width:4.5em;text-align:center;border-radius:4px;color:#fff;font-size:.8em;font-weight:700;padding:0 .3em}
.sev-high{background:var(--deny)}.sev-medium{background:var(--ask)}.sev-low{background:var(--session)}.sev-info{background:var(--timeout)}
.eff-allow{color:var(--allow);font-weight:700}.eff-ask{color:var(--ask);font-weight:700}.eff-deny{color:var(--deny);font-weight:700}
.legend span{margin-right:.8em}.legend i{display:inline-block;width:.8em;height:.8em;margin-right:.25em;border-radius:2px}
.legend .allow{background:var(--allow)}.legend .ask{background:var(--ask)}.legend .deny{background:var(--deny)}
details{margin:.3rem 0}summary{cursor:pointer}
@media print{body{max-width:none;padding:0;font-size:11pt;background:#fff;color:#000}
:root{--bg:#fff;--fg:#000;--card:#fff;--line:#999}figure,table,pre{break-inside:avoid}
details>*{display:block}a{color:#000}}
"#;

/// Renders the report as one HTML page.
pub fn render(r: &Report) -> String {
    let mut o = String::with_capacity(64 * 1024);
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    o.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n");
    o.push_str("<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n");
    o.push_str("<meta name=\"color-scheme\" content=\"light dark\">\n");
    o.push_str("<title>toolgate report</title>\n<style>");
    o.push_str(STYLE);
    o.push_str("</style>\n</head>\n<body>\n");
    let p = &r.policy;
    let _ = writeln!(
        o,
        "<header><h1>toolgate report</h1><p class=\"muted\">Policy {} · default <b>{}</b> · {} deny / {} ask / {} allow rules · {} <code>tools:</code> entries · packs: {} · toolgate {}</p></header>",
        esc(&p.source),
        esc(&p.default),
        p.rules.deny,
        p.rules.ask,
        p.rules.allow,
        p.tool_entries,
        if p.packs.is_empty() {
            "none".to_owned()
        } else {
            esc(&p.packs.join(", "))
        },
        esc(r.toolgate_version)
    );
    // Summary line.
    let tools: usize = r.servers.iter().map(|s| s.tools.len()).sum();
    let high = r
        .findings
        .iter()
        .filter(|f| f.severity == super::Severity::High)
        .count();
    let _ = writeln!(
        o,
        "<p>{} server{}, {tools} tool{}, {} finding{} ({high} high), {} suggestion{}.</p>",
        r.servers.len(),
        plural(r.servers.len()),
        plural(tools),
        r.findings.len(),
        plural(r.findings.len()),
        r.suggestions.len(),
        plural(r.suggestions.len())
    );
    if let Some(a) = &r.audit {
        audit(&mut o, a);
    } else {
        let _ = writeln!(
            o,
            "<h2 id=\"happened\">What happened</h2><p>{}</p>",
            rich(r.audit_note.as_deref().unwrap_or("No audit log."))
        );
    }
    o.push_str("<h2 id=\"findings\">Findings</h2>\n");
    if r.findings.is_empty() {
        o.push_str("<p>None.</p>\n");
    } else {
        o.push_str("<table><thead><tr><th>Severity</th><th>Finding</th><th>Policy line to change</th></tr></thead><tbody>\n");
        for f in &r.findings {
            let who = match (&f.server, &f.tool) {
                (Some(s), Some(t)) => format!("<code>{}</code>/<code>{}</code>: ", esc(s), esc(t)),
                (None, Some(t)) => format!("<code>{}</code>: ", esc(t)),
                _ => String::new(),
            };
            let _ = writeln!(
                o,
                "<tr><td><span class=\"sev sev-{s}\">{s}</span></td><td>{who}{}<br><span class=\"muted\">{}</span></td><td>{}</td></tr>",
                rich(&f.message),
                esc(f.kind),
                f.policy_line
                    .as_ref()
                    .map(|l| format!("<pre>{}</pre>", esc_block(l)))
                    .unwrap_or_else(|| "—".to_owned()),
                s = f.severity.as_str()
            );
        }
        o.push_str("</tbody></table>\n");
    }
    o.push_str("<h2 id=\"tools\">What is enforced, tool by tool</h2>\n");
    if r.servers.is_empty() {
        o.push_str("<p>No tool definitions: no server is pinned, and neither <code>--tools</code> nor <code>--probe</code> was given.</p>\n");
    }
    for s in &r.servers {
        let _ = writeln!(
            o,
            "<h3>Server <code>{}</code> <span class=\"muted\">({} tool{}, from {})</span></h3>",
            esc(&s.name),
            s.tools.len(),
            plural(s.tools.len()),
            match s.source {
                ToolSource::Pins => "the pin store",
                ToolSource::File => "a file",
                ToolSource::Probe => "a live probe",
            }
        );
        o.push_str("<table><thead><tr><th>Tool</th><th>Operation</th><th>Typical call</th><th>Controls (where from)</th></tr></thead><tbody>\n");
        for t in &s.tools {
            let controls: Vec<String> = t
                .controls
                .iter()
                .map(|c| {
                    format!(
                        "<b>{}</b>: {} <span class=\"muted\">({})</span>",
                        esc(c.control),
                        rich(&c.detail),
                        rich(
                            &c.origin
                                .iter()
                                .map(super::Origin::label)
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    )
                })
                .collect();
            let desc = if t.description.is_empty() {
                String::new()
            } else {
                format!("<br><span class=\"muted\">{}</span>", esc(&t.description))
            };
            let _ = writeln!(
                o,
                "<tr><td><code>{}</code>{desc}</td><td>{}</td><td><span class=\"eff-{e}\">{e}</span> by {}<br><span class=\"muted\">{}</span></td><td>{}</td></tr>",
                esc(&t.name),
                esc(&t.operations.join(", ")),
                match &t.typical.rule {
                    Some(rule) => format!("rule <code>{}</code>", esc(rule)),
                    None => esc(&t.typical.decided_by),
                },
                rich(&t.typical.reason),
                controls.join("<br>"),
                e = esc(&t.typical.effect)
            );
        }
        o.push_str("</tbody></table>\n");
    }
    o.push_str("<h2 id=\"suggestions\">Suggestions</h2>\n");
    if r.suggestions.is_empty() {
        let _ = writeln!(o, "<p>None: {}.</p>", rich(&super::none_reason(r)));
    } else {
        o.push_str("<p>Approved again and again; a policy line stops the clicking:</p>\n");
        for s in &r.suggestions {
            let _ = writeln!(
                o,
                "<p>{}</p><pre>{}</pre>",
                rich(&s.why),
                esc_block(&s.policy_lines)
            );
        }
    }
    for why in &r.not_suggested {
        let _ = writeln!(o, "<p>Not suggested: {}.</p>", rich(why));
    }
    o.push_str("<h2 id=\"limits\">What toolgate does not enforce</h2>\n<ul>\n");
    for n in &r.not_enforced {
        let _ = writeln!(o, "<li>{}</li>", esc(n));
    }
    o.push_str("</ul>\n</body>\n</html>\n");
    o
}

fn esc_block(s: &str) -> String {
    s.split('\n').map(esc).collect::<Vec<_>>().join("\n")
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn audit(o: &mut String, a: &AuditFigures) {
    o.push_str("<h2 id=\"happened\">What happened</h2>\n");
    let _ = writeln!(
        o,
        "<p>Audit log <code>{}</code>: {} record{}, {}{}. Chain: {}</p>",
        esc(&a.path),
        a.records,
        plural(usize::try_from(a.records).unwrap_or(2)),
        match (&a.first_time, &a.last_time) {
            (Some(f), Some(l)) => format!("{} – {}", esc(f), esc(l)),
            _ => "no records in range".to_owned(),
        },
        match (&a.since, &a.until) {
            (None, None) => String::new(),
            (s, u) => format!(
                " (window {} – {})",
                esc(s.as_deref().unwrap_or("start")),
                esc(u.as_deref().unwrap_or("end"))
            ),
        },
        if a.chain.intact {
            format!(
                "<b class=\"eff-allow\">intact</b> ({} records verified)",
                a.chain.verified_records
            )
        } else {
            format!(
                "<b class=\"eff-deny\">BROKEN</b>: {} ({} records verified before it)",
                esc(a.chain.problem.as_deref().unwrap_or("?")),
                a.chain.verified_records
            )
        }
    );
    let d = &a.decisions;
    let _ = writeln!(
        o,
        "<p class=\"legend\"><span><i class=\"allow\"></i>allow {}</span><span><i class=\"ask\"></i>ask {}</span><span><i class=\"deny\"></i>deny {}</span></p>",
        d.allow, d.ask, d.deny
    );
    o.push_str("<div class=\"charts\">\n");
    o.push_str("<figure><figcaption>Decisions over time</figcaption>");
    o.push_str(&time_chart(a));
    o.push_str("</figure>\n");
    let mut denied: Vec<(&String, u64)> = a
        .by_tool
        .iter()
        .map(|(t, e)| (t, e.deny))
        .filter(|x| x.1 > 0)
        .collect();
    denied.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(y.0)));
    denied.truncate(10);
    o.push_str("<figure><figcaption>Most denied tools</figcaption>");
    o.push_str(&bar_chart(
        "most-denied",
        "Most denied tools",
        &denied,
        "deny",
    ));
    o.push_str("</figure>\n");
    let mut asked: Vec<(&String, u64)> = a
        .by_tool
        .iter()
        .map(|(t, e)| (t, e.ask))
        .filter(|x| x.1 > 0)
        .collect();
    asked.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(y.0)));
    asked.truncate(10);
    o.push_str("<figure><figcaption>Most asked tools</figcaption>");
    o.push_str(&bar_chart("most-asked", "Most asked tools", &asked, "ask"));
    o.push_str("</figure>\n");
    let ao = &a.ask_outcomes;
    let labels = [
        ("allowed once".to_owned(), ao.allowed_once, "once"),
        (
            "allowed for the session".to_owned(),
            ao.allowed_session,
            "session",
        ),
        ("denied".to_owned(), ao.denied, "deny"),
        ("timed out".to_owned(), ao.timed_out, "timeout"),
        ("cancelled".to_owned(), ao.cancelled, "cancel"),
        ("unknown".to_owned(), ao.unknown, "unknown"),
    ];
    o.push_str("<figure><figcaption>How asks ended</figcaption>");
    o.push_str(&outcome_chart(&labels));
    o.push_str("</figure>\n</div>\n");
    // Tables.
    o.push_str("<details open><summary>Decisions by tool</summary><table><thead><tr><th>Tool</th><th>allow</th><th>ask</th><th>deny</th></tr></thead><tbody>\n");
    let mut tools: Vec<(&String, &EffectCounts)> = a.by_tool.iter().collect();
    tools.sort_by(|x, y| y.1.total().cmp(&x.1.total()).then_with(|| x.0.cmp(y.0)));
    for (t, e) in tools.iter().take(50) {
        let _ = writeln!(
            o,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(t),
            e.allow,
            e.ask,
            e.deny
        );
    }
    o.push_str("</tbody></table></details>\n");
    let _ = writeln!(
        o,
        "<p>Decided by: {}</p>",
        if a.by_contract.is_empty() {
            "—".to_owned()
        } else {
            a.by_contract
                .iter()
                .map(|(k, n)| format!("<code>{}</code> {n}", esc(k)))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    if !a.top_denied_hosts.is_empty() {
        let _ = writeln!(
            o,
            "<p>Most denied destination hosts: {}</p>",
            a.top_denied_hosts
                .iter()
                .map(|(h, n)| format!("<code>{}</code> {n}", esc(h)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

fn trunc(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().nth(n).is_some() {
        out.push('…');
    }
    out
}

/// Stacked bars of decisions per day (per month when there are more than 62 days).
fn time_chart(a: &AuditFigures) -> String {
    let mut buckets: Vec<(String, EffectCounts)> = Vec::new();
    let monthly = a.by_day.len() > 62;
    for (day, e) in &a.by_day {
        let key = if monthly {
            day.get(..7).unwrap_or(day).to_owned()
        } else {
            day.clone()
        };
        match buckets.last_mut() {
            Some((k, acc)) if *k == key => {
                acc.allow += e.allow;
                acc.ask += e.ask;
                acc.deny += e.deny;
            }
            _ => buckets.push((key, e.clone())),
        }
    }
    let (w, h, left, bottom, top) = (480.0_f64, 220.0_f64, 44.0_f64, 36.0_f64, 10.0_f64);
    let mut s = format!(
        "<svg id=\"chart-time\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"100%\" role=\"img\" aria-label=\"Decisions over time, stacked by effect\"><title>Decisions over time, stacked by effect</title>"
    );
    if buckets.is_empty() {
        s.push_str("<text x=\"10\" y=\"20\">no decisions in range</text></svg>");
        return s;
    }
    let max = buckets
        .iter()
        .map(|b| b.1.total())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let plot_w = w - left - 8.0;
    let plot_h = h - bottom - top;
    let n = buckets.len() as f64;
    let slot = plot_w / n;
    let bar = (slot * 0.8).max(1.0);
    let _ = write!(
        s,
        "<line class=\"axis\" x1=\"{left}\" y1=\"{y}\" x2=\"{x2}\" y2=\"{y}\"/><text x=\"{tx}\" y=\"{ty}\" text-anchor=\"end\">{max}</text><text x=\"{tx}\" y=\"{y}\" text-anchor=\"end\">0</text>",
        y = top + plot_h,
        x2 = w - 8.0,
        tx = left - 4.0,
        ty = top + 8.0,
        max = max as u64
    );
    let label_every = (buckets.len() / 6).max(1);
    for (i, (label, e)) in buckets.iter().enumerate() {
        let x = left + slot * i as f64 + (slot - bar) / 2.0;
        let mut y = top + plot_h;
        for (class, v) in [("allow", e.allow), ("ask", e.ask), ("deny", e.deny)] {
            if v == 0 {
                continue;
            }
            let bh = plot_h * v as f64 / max;
            y -= bh;
            let _ = write!(
                s,
                "<rect class=\"{class}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bar:.1}\" height=\"{bh:.1}\"><title>{} {class}: {v}</title></rect>",
                esc(label)
            );
        }
        if i % label_every == 0 {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                x + bar / 2.0,
                top + plot_h + 14.0,
                esc(label.get(5..).unwrap_or(label))
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// Horizontal bars, one per tool.
fn bar_chart(id: &str, title: &str, rows: &[(&String, u64)], class: &str) -> String {
    let row_h = 20.0_f64;
    let (w, left) = (480.0_f64, 170.0_f64);
    let h = (rows.len().max(1) as f64) * row_h + 10.0;
    let mut s = format!(
        "<svg id=\"chart-{id}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"100%\" role=\"img\" aria-label=\"{t}\"><title>{t}</title>",
        t = esc(title)
    );
    if rows.is_empty() {
        s.push_str("<text x=\"10\" y=\"18\">none</text></svg>");
        return s;
    }
    let max = rows.iter().map(|r| r.1).max().unwrap_or(1).max(1) as f64;
    for (i, (tool, v)) in rows.iter().enumerate() {
        let y = 5.0 + row_h * i as f64;
        let bw = ((w - left - 50.0) * *v as f64 / max).max(1.0);
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text><rect class=\"{class}\" x=\"{left}\" y=\"{y:.1}\" width=\"{bw:.1}\" height=\"{:.1}\"><title>{}: {v}</title></rect><text x=\"{:.1}\" y=\"{:.1}\">{v}</text>",
            left - 6.0,
            y + 13.0,
            esc(&trunc(tool, 26)),
            row_h - 6.0,
            esc(tool),
            left + bw + 4.0,
            y + 13.0
        );
    }
    s.push_str("</svg>");
    s
}

fn outcome_chart(rows: &[(String, u64, &str)]) -> String {
    let row_h = 20.0_f64;
    let (w, left) = (480.0_f64, 170.0_f64);
    let h = rows.len() as f64 * row_h + 10.0;
    let mut s = format!(
        "<svg id=\"chart-ask-outcomes\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"100%\" role=\"img\" aria-label=\"How asks ended\"><title>How asks ended</title>"
    );
    let max = rows.iter().map(|r| r.1).max().unwrap_or(0).max(1) as f64;
    for (i, (label, v, class)) in rows.iter().enumerate() {
        let y = 5.0 + row_h * i as f64;
        let bw = if *v == 0 {
            0.0
        } else {
            ((w - left - 50.0) * *v as f64 / max).max(1.0)
        };
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text><rect class=\"{class}\" x=\"{left}\" y=\"{y:.1}\" width=\"{bw:.1}\" height=\"{:.1}\"/><text x=\"{:.1}\" y=\"{:.1}\">{v}</text>",
            left - 6.0,
            y + 13.0,
            esc(label),
            row_h - 6.0,
            left + bw + 4.0,
            y + 13.0
        );
    }
    s.push_str("</svg>");
    s
}
