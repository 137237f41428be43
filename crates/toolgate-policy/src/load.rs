//! Strict loading of a policy file.
//!
//! YAML is read with serde-saphyr (duplicate keys rejected), every struct denies unknown
//! fields, and the semantic checks below run on the result. Every finding carries a
//! `file:line:column`, a snippet and, where useful, a `help:` line. A policy with any
//! error does not load, so a proxy never starts with it.

use std::collections::BTreeMap;

use serde_saphyr::Error as YamlError;

use crate::contracts_impl::packs::pack_names;
use crate::contracts_impl::{Contracts, Issue as ContractIssue};
use crate::diag_impl::{Diagnostic, Diagnostics, Pos, Severity, SourceMap, did_you_mean, pos_at};
use crate::model::{POLICY_VERSION, Policy, Rule};
use crate::rules::{CallFacts, PathIssue, Vars, compile_rule_with, covers_rule, op_bit};
use crate::strict::yaml_options;

/// The conservative, commented starter policy written by `toolgate policy init`.
pub const STARTER_POLICY: &str = include_str!("starter.yaml");

/// A policy that loaded, with its warnings (possibly none) and the map of its locations.
#[derive(Debug, Clone)]
pub struct LoadedPolicy {
    pub policy: Policy,
    /// Warnings only (a policy with errors does not load).
    pub warnings: Diagnostics,
}

/// Loads and checks a policy. `name` is what diagnostics show as the file name.
/// Resource patterns are checked with placeholder `${workspace}`/`${home}` values; the
/// [`crate::eval::Engine`] compiles them again with the real ones.
pub fn load(source: &str, name: &str) -> Result<LoadedPolicy, Diagnostics> {
    let mut diags = Diagnostics::new(name, source);
    if source.trim().is_empty()
        || source
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        diags.push(
            Diagnostic::error("the policy file is empty")
                .with_help("start from `toolgate policy init`, or write at least `version: 1`"),
        );
        return Err(diags);
    }
    let policy: Policy = match serde_saphyr::from_str_with_options(source, yaml_options()) {
        Ok(p) => p,
        Err(err) => {
            diags.push(yaml_error(source, &err));
            more_errors(source, &err, &mut diags);
            diags.sort();
            return Err(diags);
        }
    };
    let map = SourceMap::lazy(source);
    check(&policy, &map, &mut diags);
    diags.sort();
    if diags.has_errors() {
        return Err(diags);
    }
    Ok(LoadedPolicy {
        policy,
        warnings: diags,
    })
}

/// Semantic checks on a deserialised policy.
fn check(policy: &Policy, map: &SourceMap, diags: &mut Diagnostics) {
    if policy.version != POLICY_VERSION {
        diags.push(
            Diagnostic::error(format!("unsupported policy version `{}`", policy.version))
                .at(map.value(&["version"]))
                .with_label("this build reads version 1")
                .with_help("write `version: 1`"),
        );
    }

    // Duplicate rule ids.
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, rule) in policy.rules.iter().enumerate() {
        if let Some(first) = seen.get(rule.id.as_str()) {
            diags.push(
                Diagnostic::error(format!("duplicate rule id `{}`", rule.id))
                    .at(map.value(&["rules", &i.to_string(), "id"]))
                    .with_label("used again here")
                    .with_related(
                        map.value(&["rules", &first.to_string(), "id"]),
                        "first used here",
                    )
                    .with_help(
                        "rule ids must be unique: decisions and the audit name the rule by id",
                    ),
            );
        } else {
            seen.insert(rule.id.as_str(), i);
        }
    }

    // Per-rule compilation: globs, variables, constraints, empty lists.
    let vars = Vars::placeholder();
    let mut ok = vec![false; policy.rules.len()];
    for (i, rule) in policy.rules.iter().enumerate() {
        let (compiled, issues) = compile_rule_with(rule, i, &vars, false);
        if let Some(slot) = ok.get_mut(i) {
            *slot = compiled.is_some();
        }
        for issue in issues {
            push_issue(diags, map, issue);
        }
    }

    // Rules that can never decide: shadowed by an earlier rule, or by any deny rule.
    // `covers_rule` needs the later rule's operations to be a subset of the earlier one's:
    // comparing operation bit masks first skips most of the quadratic pairs cheaply.
    let masks: Vec<u16> = policy
        .rules
        .iter()
        .map(|r| r.operations.iter().fold(0u16, |m, o| m | op_bit(*o)))
        .collect();
    for (j, later) in policy.rules.iter().enumerate() {
        if later.effect == crate::decision::Effect::Deny || !ok.get(j).copied().unwrap_or(false) {
            continue;
        }
        let later_mask = masks.get(j).copied().unwrap_or(0);
        let shadow = policy.rules.iter().enumerate().find(|(i, earlier)| {
            *i != j
                && ok.get(*i).copied().unwrap_or(false)
                && later_mask & !masks.get(*i).copied().unwrap_or(0) == 0
                && (*i < j || earlier.effect == crate::decision::Effect::Deny)
                && covers_rule(earlier, later)
        });
        if let Some((i, earlier)) = shadow {
            let why = if earlier.effect == crate::decision::Effect::Deny {
                "every call it matches is denied by"
            } else {
                "it comes after"
            };
            diags.push(
                Diagnostic::warning(format!(
                    "rule `{}` can never decide: {why} rule `{}`, which matches everything it matches",
                    later.id, earlier.id
                ))
                .at(map.value(&["rules", &j.to_string(), "id"]))
                .with_label("shadowed rule")
                .with_related(map.value(&["rules", &i.to_string(), "id"]), "shadowing rule")
                .with_help(format!(
                    "move `{}` above `{}`, narrow `{}`, or remove `{}`",
                    later.id, earlier.id, earlier.id, later.id
                )),
            );
        }
    }

    allow_before_ask(policy, &vars, &ok, map, diags);

    if let Some(t) = &policy.taint
        && t.max_tokens == 0
    {
        diags.push(
            Diagnostic::warning(
                "`taint.max_tokens: 0` remembers nothing: every sink value will be unproven (ask)",
            )
            .at(map.value(&["taint", "max_tokens"]))
            .with_help("remove it for the default bound, or choose a positive number"),
        );
    }

    check_contracts(policy, map, diags);

    if let Some(packs) = &policy.packs {
        let mut seen = BTreeMap::new();
        for (i, p) in packs.iter().enumerate() {
            if let Some(first) = seen.insert(p.as_str(), i) {
                diags.push(
                    Diagnostic::warning(format!("pack `{p}` is listed twice"))
                        .at(map.value(&["packs", &i.to_string()]))
                        .with_related(
                            map.value(&["packs", &first.to_string()]),
                            "first listed here",
                        ),
                );
            }
        }
    }
}

/// `tools:` entries (C's `ToolContract::validate`) and packs, located by key path.
fn check_contracts(policy: &Policy, map: &SourceMap, diags: &mut Diagnostics) {
    let mut seen: Vec<(Vec<String>, String)> = Vec::new();
    let mut push = |issue: ContractIssue, diags: &mut Diagnostics| {
        let key = (issue.path.clone(), issue.message.clone());
        if seen.contains(&key) {
            return;
        }
        seen.push(key);
        let severity = match issue.severity {
            crate::contracts_impl::Severity::Error => Severity::Error,
            crate::contracts_impl::Severity::Warning => Severity::Warning,
        };
        // C addresses packs by name; the file lists them by index.
        let mut path = issue.path.clone();
        let mut message = one_line(&issue.message);
        if path.first().map(String::as_str) == Some("packs") {
            let name = path.get(1).cloned().unwrap_or_default();
            match policy
                .packs
                .as_ref()
                .and_then(|p| p.iter().position(|n| *n == name))
            {
                Some(i) if path.len() == 2 => path = vec!["packs".to_owned(), i.to_string()],
                Some(i) => {
                    message = format!("in built-in pack `{name}` ({}): {message}", path.join("."));
                    path = vec!["packs".to_owned(), i.to_string()];
                }
                None => {
                    message = format!("in built-in pack `{name}` ({}): {message}", path.join("."));
                    path = Vec::new();
                }
            }
        }
        push_issue(
            diags,
            map,
            PathIssue {
                severity,
                path,
                message,
                help: issue.help,
                at_key: false,
            },
        );
    };
    for (key, contract) in &policy.tools {
        for issue in contract.validate(&["tools".to_owned(), key.clone()]) {
            push(issue, diags);
        }
    }
    if let Some(packs) = &policy.packs {
        let known = pack_names();
        for (i, name) in packs.iter().enumerate() {
            if !known.contains(name) {
                let mut d = Diagnostic::error(format!("unknown pack `{name}`"))
                    .at(map.value(&["packs", &i.to_string()]));
                d = match did_you_mean(name, known.iter().map(String::as_str)) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_help(format!("known packs: {}", known.join(", "))),
                };
                diags.push(d);
            }
        }
    }
    let packs = policy.packs.clone().unwrap_or_else(pack_names);
    let known = pack_names();
    let packs: Vec<String> = packs.into_iter().filter(|p| known.contains(p)).collect();
    if let Err(issues) = Contracts::compile(&policy.tools, &packs) {
        for issue in issues {
            push(issue, diags);
        }
    }
}

/// Turns an issue addressed by key path into a located diagnostic.
pub fn push_issue(diags: &mut Diagnostics, map: &SourceMap, issue: PathIssue) {
    let pos = if issue.at_key {
        map.key(&issue.path)
    } else {
        map.value(&issue.path)
    };
    let mut d = match issue.severity {
        Severity::Error => Diagnostic::error(issue.message),
        Severity::Warning => Diagnostic::warning(issue.message),
    }
    .at(pos);
    if let Some(h) = issue.help {
        d = d.with_help(h);
    }
    diags.push(d);
}

/// A located diagnostic for a YAML or serde error (also used by `toolgate gateway`'s
/// configuration loader, whose files follow the same conventions).
pub fn yaml_error(source: &str, err: &YamlError) -> Diagnostic {
    let pos: Option<Pos> = err
        .location()
        .and_then(|l| pos_at(source, l.line() as usize, l.column() as usize));
    let core = err.without_snippet();
    let d = match core {
        YamlError::SerdeUnknownField {
            field, expected, ..
        } => {
            let d = Diagnostic::error(format!("unknown field `{field}`"))
                .with_label("not a field here");
            match did_you_mean(field, expected.iter().copied()) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => d.with_help(format!(
                    "expected one of {}",
                    expected
                        .iter()
                        .map(|e| format!("`{e}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            }
        }
        YamlError::SerdeUnknownVariant {
            variant, expected, ..
        } => {
            let d = Diagnostic::error(format!("unknown value `{variant}`"))
                .with_label("not allowed here");
            // `effect: deny` and then `operations: …` indented deeper: YAML reads the second
            // line as more of the first's value (`deny operations`).
            if let Some((first, rest)) = variant.split_once(char::is_whitespace)
                && expected.contains(&first)
            {
                let key = rest.split_whitespace().next().unwrap_or(rest);
                return d
                    .with_help(format!(
                        "`{first}` is followed by `{rest}` in one value: a line indented deeper than the key above it continues that key's value. Indent `{key}` exactly as the key above it"
                    ))
                    .at(pos);
            }
            match did_you_mean(variant, expected.iter().copied()) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => d.with_help(format!(
                    "expected one of {}",
                    expected
                        .iter()
                        .map(|e| format!("`{e}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            }
        }
        YamlError::SerdeMissingField { field, .. } if *field == "version" => {
            let line = source
                .lines()
                .position(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
                .map_or(1, |i| i + 1);
            return Diagnostic::error("missing field `version`")
                .at(pos_at(source, line, 1))
                .with_label("the policy starts here")
                .with_help("add `version: 1` at the top of the file");
        }
        YamlError::SerdeMissingField { field, .. } => {
            if let Some(p) = pos
                && let Some((line, indent, sibling)) =
                    misplaced_key(source, p.line, p.column, field)
            {
                let want = p.column.saturating_sub(1);
                return Diagnostic::error(format!(
                    "`{field}` is not indented as the other keys of its mapping"
                ))
                .at(pos_at(source, line, indent + 1))
                .with_label(format!("indented {indent} spaces"))
                .with_related(pos, format!("its mapping's keys are indented {want} spaces"))
                .with_help(format!(
                    "indent `{field}` by {want} spaces, exactly as `{sibling}` above it: indented less, it is not part of the mapping"
                ));
            }
            Diagnostic::error(format!("missing field `{field}`"))
                .with_label("in this mapping")
                .with_help(match *field {
                    "version" => "add `version: 1` at the top of the file".to_owned(),
                    "id" => "give the rule a unique `id`".to_owned(),
                    "effect" => "add `effect: allow`, `effect: ask` or `effect: deny`".to_owned(),
                    "operations" => "list the operations, e.g. `operations: [fs.read]`".to_owned(),
                    other => format!("add `{other}`"),
                })
        }
        // The strict whole-number fields (`crate::strict`): the same diagnostic as a
        // value saphyr cannot read as an integer (`max_calls: true`), quoted or not.
        YamlError::SerdeInvalidType { expected, .. }
            if expected == crate::strict::EXPECTED_WHOLE_NUMBER =>
        {
            let want = crate::strict::EXPECTED_WHOLE_NUMBER;
            // saphyr locates an error raised by a visitor at the key: point at the value,
            // as for the scalars it cannot parse itself.
            let at_value = pos.and_then(|p| value_after_key(source, p)).or(pos);
            return Diagnostic::error(format!("wrong type: expected {want}"))
                .with_label("wrong type")
                .with_help(format!("write {want} here"))
                .at(at_value);
        }
        // The strict booleans: a quoted `"true"` or `"yes"` is a string.
        YamlError::SerdeInvalidType { expected, .. }
            if expected == crate::strict::EXPECTED_BOOLEAN =>
        {
            let want = crate::strict::EXPECTED_BOOLEAN;
            let at_value = pos.and_then(|p| value_after_key(source, p)).or(pos);
            return Diagnostic::error(format!("wrong type: expected {want}"))
                .with_label("wrong type")
                .with_help(format!("write {want} here, without quotes"))
                .at(at_value);
        }
        YamlError::SerdeInvalidType {
            unexpected,
            expected,
            ..
        } => Diagnostic::error(format!(
            "wrong type: found {unexpected}, expected {expected}"
        ))
        .with_label("wrong type")
        .with_help(format!("write {expected} here")),
        YamlError::SerdeInvalidValue {
            unexpected,
            expected,
            ..
        } => Diagnostic::error(format!("invalid value: {unexpected}, expected {expected}"))
            .with_label("invalid value"),
        YamlError::InvalidScalar { ty, .. } => {
            let want = match *ty {
                "bool" => "`true` or `false`",
                t if t.starts_with('u') || t.starts_with('i') => "a whole number",
                t if t.starts_with('f') => "a number",
                _ => "a different kind of value",
            };
            Diagnostic::error(format!("wrong type: expected {want}"))
                .with_label("wrong type")
                .with_help(format!("write {want} here"))
        }
        YamlError::DuplicateMappingKey { key, .. } => Diagnostic::error(match key {
            Some(k) => format!("duplicate key `{k}`"),
            None => "duplicate key".to_owned(),
        })
        .with_label("defined again here")
        .with_help("each key may appear once per mapping; remove or merge the duplicate"),
        other => {
            let msg = serde_saphyr::MessageFormatter::format_message(
                &serde_saphyr::UserMessageFormatter,
                other,
            )
            .to_string();
            let msg = strip_location_suffix(&msg);
            let mut chars = msg.chars();
            let lowered = match chars.next() {
                Some(c) => c.to_lowercase().chain(chars).collect(),
                None => "invalid yaml".to_owned(),
            };
            match lowered.as_str() {
                "expected sequence start" if in_commands(source, pos) => {
                    Diagnostic::error("wrong type: expected a list")
                        .with_label("expected a list of words")
                        .with_help("`commands` is a list of commands, each a list of its words: `commands: [[npm, test], [cargo, build]]`, or one `- [npm, test]` per line")
                }
                "expected sequence start" => Diagnostic::error("wrong type: expected a list")
                    .with_label("expected a list")
                    .with_help("write a list, e.g. `[a, b]` or one `- item` per line"),
                "expected mapping start" => Diagnostic::error("wrong type: expected a mapping")
                    .with_label("expected a mapping")
                    .with_help("write `key: value` pairs"),
                m if m.contains("tab") => Diagnostic::error(lowered.clone())
                    .with_label("here")
                    .with_help("YAML indents with spaces, never tabs: replace the tabs at the start of the lines with spaces"),
                m if m.contains("unclosed") => Diagnostic::error(lowered.clone())
                    .with_label("opened here")
                    .with_help("close it on the same line (`]`, `}` or the quote), or write the list one `- item` per line"),
                _ => Diagnostic::error(lowered).with_label("here"),
            }
        }
    };
    d.at(pos)
}

/// When `pos` is at a `key:` (a plain key on one line), the position of its value.
/// Whether `pos` is in the value of a `commands:` key (on its line, or in its `- ` items
/// below it).
fn in_commands(source: &str, pos: Option<Pos>) -> bool {
    let Some(pos) = pos else {
        return false;
    };
    let lines: Vec<&str> = source.lines().take(pos.line).collect();
    for line in lines.iter().rev() {
        let t = line.trim_start();
        if t.starts_with("commands:") || t.starts_with("- commands:") {
            return true;
        }
        if !t.starts_with('-') {
            return false;
        }
    }
    false
}

fn value_after_key(source: &str, pos: Pos) -> Option<Pos> {
    let rest = source.get(pos.offset..)?;
    let line = rest.split(['\n', '\r']).next()?;
    let colon = line.find(':')?;
    let key = line.get(..colon)?;
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return None;
    }
    let after = line.get(colon + 1..)?;
    let value = after.trim_start_matches([' ', '\t']);
    if value.is_empty() || value.starts_with('#') {
        return None;
    }
    let skipped = line.len() - value.len();
    let chars = line.get(..skipped)?.chars().count();
    pos_at(source, pos.line, pos.column + chars)
}

/// A required key `field` missing from the block mapping whose first key is at `line`,
/// `column` (1-based), written below it at another indentation (`operations:` indented less
/// than `effect:`): its line (1-based), its indentation, and the mapping's key just above it.
fn misplaced_key(
    source: &str,
    line: usize,
    column: usize,
    field: &str,
) -> Option<(usize, usize, String)> {
    let want = column.checked_sub(1)?;
    let indent = |l: &str| l.len() - l.trim_start().len();
    let key_of = |l: &str| -> Option<String> {
        let t = l.trim_start().trim_start_matches("- ");
        let (k, _) = t.split_once(':')?;
        (!k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .then(|| k.to_owned())
    };
    let mut sibling = None;
    for (i, l) in source.lines().enumerate().skip(line.checked_sub(1)?) {
        if l.trim().is_empty() || l.trim_start().starts_with('#') {
            continue;
        }
        let at = indent(l);
        let key = key_of(l);
        if i + 1 > line && key.as_deref() == Some(field) && at != want {
            return Some((i + 1, at, sibling?));
        }
        // The mapping's own keys (its first one may follow `- `).
        if at == want || (i + 1 == line && l.trim_start().starts_with("- ")) {
            sibling = key.or(sibling);
        } else if at < want {
            return None;
        }
    }
    None
}

/// Multi-line messages (e.g. from the regex parser) as one line: the first line and the
/// final cause.
fn one_line(message: &str) -> String {
    let lines: Vec<&str> = message.lines().filter(|l| !l.trim().is_empty()).collect();
    match (lines.first(), lines.last()) {
        (Some(first), Some(last)) if lines.len() > 1 => {
            let head = first
                .trim_end()
                .trim_end_matches("regex parse error:")
                .trim_end()
                .trim_end_matches(':');
            let cause = last.trim().trim_start_matches("error: ");
            format!("{head}: {cause}")
        }
        _ => message.to_owned(),
    }
}

fn strip_location_suffix(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg.get(..i).unwrap_or(msg).to_owned(),
        None => msg.to_owned(),
    }
}

/// The most entries [`more_errors`] sets aside to read past their errors.
const MAX_SET_ASIDE: usize = 32;

/// Every problem in one run: after a parse or type error inside one of the `rules` or one of
/// the `tools` entries, that entry is set aside (its lines replaced by a valid placeholder of
/// as many lines, so positions stay) and the file read again, for the next error, and once
/// it reads, checked as a whole (its other rules' and entries' problems). An error in
/// another top-level key sets that key aside. Stops at an error not under a top-level key
/// (a syntax error the parser cannot read past), or one met before.
fn more_errors(source: &str, first: &YamlError, diags: &mut Diagnostics) {
    // A syntax error the type error came before (the reader stops at the first of either),
    // which setting an entry aside could hide: the document read as YAML alone.
    if let Err(syntax) =
        serde_saphyr::from_str_with_options::<serde::de::IgnoredAny>(source, yaml_options())
    {
        push_one_per_line(diags, yaml_error(source, &syntax));
    }
    let mut lines: Vec<String> = source.lines().map(str::to_owned).collect();
    let mut error = first.location().map(|l| l.line() as usize);
    let mut set_aside: Vec<usize> = Vec::new();
    for n in 0..MAX_SET_ASIDE {
        let Some(line) = error else { return };
        let Some((start, end, placeholder)) = entry_around(&lines, line) else {
            return;
        };
        if set_aside.contains(&start) {
            return;
        }
        set_aside.push(start);
        for (i, l) in lines.iter_mut().enumerate().take(end).skip(start) {
            *l = if i == start {
                placeholder.replace("{n}", &n.to_string())
            } else {
                String::new()
            };
        }
        let text = lines.join("\n");
        match serde_saphyr::from_str_with_options::<Policy>(&text, yaml_options()) {
            Ok(policy) => {
                // The rest, checked as a whole; the placeholders say nothing.
                let map = SourceMap::lazy(&text);
                let mut rest = Diagnostics::new("", &text);
                check(&policy, &map, &mut rest);
                for d in rest.items {
                    let at_placeholder = d
                        .pos
                        .as_ref()
                        .is_some_and(|p| set_aside.iter().any(|&s| p.line == s + 1));
                    if !at_placeholder && !d.message.contains("__set_aside_") {
                        diags.push(d);
                    }
                }
                return;
            }
            Err(next) => {
                let d = yaml_error(source, &next);
                if diags
                    .items
                    .iter()
                    .any(|o| o.message == d.message && o.pos == d.pos)
                {
                    return;
                }
                push_one_per_line(diags, d);
                error = next.location().map(|l| l.line() as usize);
            }
        }
    }
}

/// Adds `d` unless an error already points at its line: a syntax error where an earlier one
/// points (`operations:` indented less than its rule) says nothing new.
fn push_one_per_line(diags: &mut Diagnostics, d: Diagnostic) {
    let line_of = |d: &Diagnostic| d.pos.as_ref().map(|p| p.line);
    if line_of(&d).is_none() || !diags.items.iter().any(|o| line_of(o) == line_of(&d)) {
        diags.push(d);
    }
}

/// The lines `start..end` (0-based) of the `rules` item or `tools` entry that holds line
/// `line` (1-based), in block style, or of the top-level key that holds it, and a valid
/// one-line stand-in for it (`{n}`: a number to make it unique).
fn entry_around(lines: &[String], line: usize) -> Option<(usize, usize, String)> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let blank = |l: &str| l.trim().is_empty() || l.trim_start().starts_with('#');
    let at = line.checked_sub(1)?;
    // The top-level key the line is under.
    let top = (0..=at.min(lines.len().checked_sub(1)?))
        .rev()
        .find(|&i| lines.get(i).is_some_and(|l| !blank(l) && indent(l) == 0))?;
    let key = lines.get(top)?.split(':').next()?.trim();
    // An error on a top-level key's own line or in a key other than `rules` and `tools`:
    // the whole key is set aside (`version` stands in as `1`, `rules`/`tools` as empty,
    // every other key is optional and left out).
    if !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    if at == top || !matches!(key, "rules" | "tools") {
        let end = (top + 1..lines.len())
            .find(|&i| lines.get(i).is_some_and(|l| !blank(l) && indent(l) == 0))
            .unwrap_or(lines.len());
        let stand_in = match key {
            "version" => "version: 1",
            "rules" => "rules: []",
            "tools" => "tools: {}",
            _ => "",
        };
        return Some((top, end, stand_in.to_owned()));
    }
    let placeholder = match key {
        "rules" => {
            "- {id: __set_aside_{n}, effect: deny, operations: [unknown], tools: [__set_aside_{n}]}"
        }
        "tools" => "__set_aside_{n}: {}",
        _ => return None,
    };
    // The entry's first line: the nearest line at the entries' indentation, at or above.
    let child = lines
        .get(top + 1..)?
        .iter()
        .find(|l| !blank(l))
        .map(|l| indent(l))?;
    if child == 0 {
        return None;
    }
    let start = (top + 1..=at).rev().find(|&i| {
        lines
            .get(i)
            .is_some_and(|l| !blank(l) && indent(l) == child)
    })?;
    // A rules item begins with `- `; a tools entry is a `key:` line.
    let first = lines.get(start)?.trim_start();
    if (key == "rules") != first.starts_with("- ") {
        return None;
    }
    let end = (start + 1..lines.len())
        .find(|&i| {
            lines
                .get(i)
                .is_some_and(|l| !blank(l) && indent(l) <= child)
        })
        .unwrap_or(lines.len());
    Some((start, end, format!("{}{placeholder}", " ".repeat(child))))
}

/// An allow rule before an ask rule takes from it every call both match (the first match
/// wins among them; a deny wins wherever it is): warned when it takes some, not all (all is
/// the shadowing warning). Found by a sample call the ask rule matches, made from its own
/// patterns (`${workspace}/.env`, `**/*.rs` → `x/x.rs`), that the allow rule matches too.
/// Rules that also name executables, commands, hosts, methods or annotations are left
/// out: no sample is made for them, so no warning is a guess.
fn allow_before_ask(
    policy: &Policy,
    vars: &Vars,
    ok: &[bool],
    map: &SourceMap,
    diags: &mut Diagnostics,
) {
    use crate::decision::Effect;
    let plain = |r: &Rule| {
        r.executables.is_none()
            && r.commands.is_none()
            && r.hosts.is_none()
            && r.methods.is_none()
            && r.annotations.is_none()
    };
    let usable = |i: usize, r: &Rule| ok.get(i).copied().unwrap_or(false) && plain(r);
    // Each rule's resource globs with the variables expanded, once.
    let globs: Vec<Vec<String>> = policy
        .rules
        .iter()
        .map(|r| {
            r.resources
                .iter()
                .flatten()
                .filter_map(|g| crate::rules::expand_vars(g, vars).ok())
                .collect()
        })
        .collect();
    // Each rule compiled once, when a pair first needs it.
    let compiled: Vec<std::cell::OnceCell<Option<crate::rules::CompiledRule>>> = policy
        .rules
        .iter()
        .map(|_| std::cell::OnceCell::new())
        .collect();
    let compiled_at = |i: usize, rule: &Rule| {
        compiled.get(i).and_then(|c| {
            c.get_or_init(|| compile_rule_with(rule, i, vars, true).0)
                .as_ref()
        })
    };
    for (j, ask) in policy.rules.iter().enumerate() {
        if ask.effect != Effect::Ask || !usable(j, ask) {
            continue;
        }
        let Some(ask_compiled) = compiled_at(j, ask) else {
            continue;
        };
        for (i, allow) in policy.rules.iter().enumerate().take(j) {
            if allow.effect != Effect::Allow || !usable(i, allow) || covers_rule(allow, ask) {
                continue;
            }
            let Some(op) = ask.operations.iter().find(|o| allow.operations.contains(o)) else {
                continue;
            };
            let Some(allow_compiled) = compiled_at(i, allow) else {
                continue;
            };
            let first = |a: &Option<Vec<String>>, b: &Option<Vec<String>>| {
                a.as_ref()
                    .or(b.as_ref())
                    .and_then(|l| l.first())
                    .map(|g| sample_of(g))
            };
            let tool = first(&ask.tools, &allow.tools).unwrap_or_else(|| "tool".to_owned());
            let server = first(&ask.servers, &allow.servers);
            let builtin = ask.builtin.or(allow.builtin).unwrap_or(false);
            let facts = CallFacts {
                server: server.as_deref(),
                tool: &tool,
                annotations: None,
                builtin,
            };
            let (Some(ask_globs), Some(allow_globs)) = (globs.get(j), globs.get(i)) else {
                continue;
            };
            let mut paths: Vec<String> = ask_globs.iter().map(|g| sample_of(g)).collect();
            // A pattern for any folder (`**/*.rs`) is also tried in the allow rule's folders.
            for g in ask_globs {
                if let Some(rest) = g.strip_prefix("**/") {
                    for a in allow_globs {
                        let base = a.trim_end_matches("/**").trim_end_matches("/*");
                        paths.push(format!("{}/{}", sample_of(base), sample_of(rest)));
                    }
                }
            }
            if ask_globs.is_empty() {
                paths.extend(allow_globs.iter().map(|g| sample_of(g)));
            }
            if paths.is_empty() {
                paths.push("/x".to_owned());
            }
            let taken = paths.into_iter().find(|path| {
                let mut part = crate::action::Part::new(*op);
                part.resources = vec![path.clone()];
                ask_compiled.matches_in(&facts, &part, None, None)
                    && allow_compiled.matches_in(&facts, &part, None, None)
            });
            if let Some(path) = taken {
                let shown = path
                    .replace(&vars.workspace, "${workspace}")
                    .replace(&vars.home, "${home}");
                diags.push(
                    Diagnostic::warning(format!(
                        "rule `{}` does not decide every call it matches: rule `{}` comes first and allows some of them (`{}` of `{shown}`, for one)",
                        ask.id,
                        allow.id,
                        op.as_str()
                    ))
                    .at(map.value(&["rules", &j.to_string(), "id"]))
                    .with_label("ask rule")
                    .with_related(map.value(&["rules", &i.to_string(), "id"]), "allow rule before it")
                    .with_help(format!(
                        "the first of an allow and an ask rule that match decides: move `{}` above `{}`, or narrow `{}`",
                        ask.id, allow.id, allow.id
                    )),
                );
                break;
            }
        }
    }
}

/// A name or path a glob matches, made from it: `**` and `*` and `?` become `x`, a class
/// its first character (a negated one a letter it leaves out), an alternation its first
/// choice (`**/*.rs` → `x/x.rs`).
fn sample_of(glob: &str) -> String {
    let mut out = String::new();
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => {
                while chars.peek() == Some(&'*') {
                    chars.next();
                }
                out.push('x');
            }
            '?' => out.push('x'),
            '\\' => out.extend(chars.next()),
            '[' => {
                let negated = chars.next_if(|&c| c == '!' || c == '^').is_some();
                let class: String = chars.by_ref().take_while(|&c| c != ']').collect();
                out.push(match class.chars().next() {
                    // A character the class leaves out.
                    _ if negated => ['x', 'y', 'z']
                        .into_iter()
                        .find(|c| !class.contains(*c))
                        .unwrap_or('_'),
                    Some(first) => first,
                    None => 'x',
                });
            }
            '{' => {
                let mut depth = 1;
                let mut taking = true;
                for c in chars.by_ref() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        ',' if depth == 1 => taking = false,
                        _ if taking => out.push(c),
                        _ => {}
                    }
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errs(src: &str) -> Diagnostics {
        load(src, "p.yaml").unwrap_err()
    }

    #[test]
    fn starter_policy_loads_cleanly() {
        let l = load(STARTER_POLICY, "starter.yaml").unwrap();
        assert_eq!(l.warnings.items, vec![], "{}", l.warnings);
        assert!(l.policy.rules.len() >= 5);
    }

    #[test]
    fn contract_issues_are_located() {
        let src = "version: 1\ntools:\n  send_email:\n    exfiltrating: true\n    allowed_path_prefix: [/x]\n";
        let d = errs(src);
        assert_eq!(d.items[0].message, "unknown field `allowed_path_prefix`");
        assert_eq!(
            d.items[0].help.as_deref(),
            Some("did you mean `allowed_path_prefixes`?")
        );
        assert_eq!(d.items[0].pos.unwrap().line, 5);
        let src = "version: 1\ntools:\n  send_email:\n    arg_patterns:\n      to: '(unclosed'\n";
        let d = errs(src);
        assert_eq!(d.items[0].pos.unwrap().line, 5, "{d}");
        let d = errs("version: 1\npacks: [filesystem, gti]\n");
        assert_eq!(d.items[0].message, "unknown pack `gti`");
        assert_eq!(d.items[0].help.as_deref(), Some("did you mean `git`?"));
    }

    #[test]
    fn minimal_policy_loads_with_defaults() {
        let p = load("version: 1\n", "p.yaml").unwrap().policy;
        assert_eq!(p.default, crate::decision::Effect::Ask);
        assert!(p.rules.is_empty());
        assert!(p.packs.is_none());
    }

    #[test]
    fn unknown_rule_field_is_located_with_suggestion() {
        let d = errs(
            "version: 1\nrules:\n  - id: a\n    effect: allow\n    operations: [fs.read]\n    resource: ['/x']\n",
        );
        let item = &d.items[0];
        assert_eq!(item.message, "unknown field `resource`");
        assert_eq!(item.help.as_deref(), Some("did you mean `resources`?"));
        let pos = item.pos.unwrap();
        assert_eq!((pos.line, pos.column), (6, 5));
    }

    #[test]
    fn duplicate_keys_rejected() {
        let d = errs("version: 1\ndefault: ask\ndefault: allow\n");
        assert!(d.items[0].message.contains("duplicate key"), "{d}");
        assert_eq!(d.items[0].pos.unwrap().line, 3);
    }

    #[test]
    fn wrong_type_and_bad_variant() {
        let d = errs("version: 1\nrules: {}\n");
        assert!(d.items[0].message.starts_with("wrong type"), "{d}");
        let d = errs("version: 1\nrules:\n  - id: a\n    effect: allow\n    operations: fs.read\n");
        assert!(d.items[0].message.starts_with("wrong type"), "{d}");
        let d = errs("version: one\n");
        assert_eq!(d.items[0].message, "wrong type: expected a whole number");
        let d = errs("version: \"1\"\n");
        assert_eq!(d.items[0].message, "wrong type: expected a whole number");
        let d = errs("version: 1\ndefault: permit\n");
        assert_eq!(d.items[0].message, "unknown value `permit`");
        let d = errs("version: 1\nrules:\n  - {id: a, effect: allow, operations: [fs.reed]}\n");
        assert_eq!(d.items[0].help.as_deref(), Some("did you mean `fs.read`?"));
    }

    #[test]
    fn a_key_indented_into_the_value_above_and_a_command_as_a_string_say_what_is_wrong() {
        let misindented =
            "version: 1\nrules:\n  - id: r\n    effect: deny\n      operations: [fs.read]\n";
        let d = load(misindented, "p.yaml").unwrap_err();
        let help = d.items[0].help.clone().unwrap_or_default();
        assert!(
            help.contains("Indent `operations` exactly as the key above it"),
            "{help}"
        );
        for commands in [
            "    commands: [npm test]\n",
            "    commands:\n      - npm test\n",
        ] {
            let policy = format!(
                "version: 1\nrules:\n  - id: r\n    effect: allow\n    operations: [shell.exec]\n{commands}"
            );
            let d = load(&policy, "p.yaml").unwrap_err();
            let help = d.items[0].help.clone().unwrap_or_default();
            assert!(help.contains("[[npm, test]"), "{commands}: {help}");
        }
    }

    /// A quoted number is a string: `max_calls: "3"` gets exactly the located diagnostic of
    /// `max_calls: true` (no silent coercion of a budget), and so does a quoted budget `max`.
    #[test]
    fn quoted_numbers_are_type_errors() {
        let head = "version: 1\ntools:\n  send_email:\n";
        let of = |v: &str| {
            let d = errs(&format!("{head}    max_calls: {v}\n"));
            let i = d.items[0].clone();
            (i.message, i.help, i.pos.map(|p| (p.line, p.column)))
        };
        let reference = of("true");
        assert_eq!(reference.0, "wrong type: expected a whole number");
        assert_eq!(reference.2, Some((4, 16)));
        for v in ["\"3\"", "'3'", "-1", "3.5"] {
            assert_eq!(of(v), reference, "max_calls: {v}");
        }
        let d = errs(&format!("{head}    budget: {{max: \"5\", per: 10m}}\n"));
        assert_eq!(d.items[0].message, "wrong type: expected a whole number");
        assert!(
            load(
                &format!("{head}    max_calls: 3\n    budget: {{max: 5, per: 10m}}\n"),
                "p.yaml"
            )
            .is_ok()
        );
    }

    /// The `taint:` bounds are whole numbers too: quoted, negative or fractional values get
    /// the diagnostic `max_calls: true` gets.
    #[test]
    fn quoted_taint_bounds_are_type_errors() {
        for key in [
            "max_tokens",
            "max_text_bytes",
            "max_token_len",
            "window_bytes",
        ] {
            for v in ["\"3\"", "'3'", "-1", "3.5", "true"] {
                let d = errs(&format!("version: 1\ntaint:\n  {key}: {v}\n"));
                assert_eq!(
                    d.items[0].message, "wrong type: expected a whole number",
                    "{key}: {v}"
                );
            }
            assert!(load(&format!("version: 1\ntaint:\n  {key}: 4096\n"), "p.yaml").is_ok());
        }
    }

    #[test]
    fn duplicate_ids_and_version() {
        let d = errs(
            "version: 2\nrules:\n  - {id: a, effect: allow, operations: [fs.read]}\n  - {id: a, effect: deny, operations: [fs.write]}\n",
        );
        let msgs: Vec<&str> = d.items.iter().map(|i| i.message.as_str()).collect();
        assert!(msgs.contains(&"unsupported policy version `2`"), "{msgs:?}");
        assert!(msgs.contains(&"duplicate rule id `a`"), "{msgs:?}");
    }

    #[test]
    fn shadowed_rule_is_a_warning() {
        let l = load("version: 1\nrules:\n  - {id: all, effect: ask, operations: [fs.read]}\n  - {id: ws, effect: allow, operations: [fs.read], resources: ['${workspace}/**']}\n", "p.yaml").unwrap();
        assert_eq!(l.warnings.warnings(), 1);
        assert_eq!(l.warnings.items[0].pos.unwrap().line, 4);
    }

    #[test]
    fn an_allow_rule_before_an_ask_rule_that_takes_some_of_its_calls_is_a_warning() {
        let warned = |rules: &str| {
            let l = load(&format!("version: 1\nrules:\n{rules}"), "p.yaml").unwrap();
            l.warnings
                .items
                .iter()
                .map(|d| d.message.clone())
                .collect::<Vec<_>>()
        };
        let ws = "  - {id: ws, effect: allow, operations: [fs.read, fs.write], resources: ['${workspace}/**']}\n";
        // The issue's case: `.env` in the workspace is allowed, not asked about.
        let w = warned(&format!(
            "{ws}  - {{id: env, effect: ask, operations: [fs.read], resources: ['${{workspace}}/.env']}}\n"
        ));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains(
                "rule `env` does not decide every call it matches: rule `ws` comes first"
            ) && w[0].contains("`fs.read` of `${workspace}/.env`"),
            "{w:?}"
        );
        // A pattern for any folder meets the allow rule's folder.
        let w = warned(&format!(
            "{ws}  - {{id: rs, effect: ask, operations: [fs.write], resources: ['**/*.rs']}}\n"
        ));
        assert!(
            w.len() == 1 && w[0].contains("`${workspace}/x.rs`"),
            "{w:?}"
        );
        // No warning: the ask rule first, other paths, other operations, other tools.
        for rules in [
            format!("  - {{id: env, effect: ask, operations: [fs.read], resources: ['${{workspace}}/.env']}}\n{ws}"),
            format!("{ws}  - {{id: home, effect: ask, operations: [fs.write], resources: ['${{home}}/**']}}\n"),
            format!("{ws}  - {{id: del, effect: ask, operations: [fs.delete], resources: ['${{workspace}}/**']}}\n"),
            "  - {id: w, effect: allow, operations: [fs.write], tools: [write_file]}\n  - {id: e, effect: ask, operations: [fs.write], tools: [edit_file]}\n".to_owned(),
        ] {
            let w = warned(&rules);
            assert!(w.is_empty(), "{rules}: {w:?}");
        }
    }

    #[test]
    fn every_problem_of_the_rules_and_tools_comes_in_one_run() {
        let source = "version: 1\nrules:\n  - id: one\n    effect: allow\n    operations: [fs.read]\n    resources: \"/w/**\"\n  - id: two\n    effect: deny\n    operations: [fs.reed]\n  - id: three\n    effect: ask\n    operations: [fs.write]\n    resource: [\"/x\"]\n  - id: four\n    effect: allow\n    operations: [fs.read]\n    hosts: [example.com]\n  - id: four\n    effect: deny\n    operations: [fs.write]\ntools:\n  send_email:\n    max_calls: \"3\"\n";
        let d = load(source, "p.yaml").unwrap_err();
        let found: Vec<(usize, &str)> = d
            .items
            .iter()
            .map(|d| (d.pos.unwrap().line, d.message.as_str()))
            .collect();
        let lines: Vec<usize> = found.iter().map(|(l, _)| *l).collect();
        // Three type errors, a constraint that cannot apply, a duplicate id, a quoted number.
        for line in [6, 9, 13, 17, 18, 23] {
            assert!(lines.contains(&line), "line {line}: {found:#?}");
        }
        assert!(
            found.iter().all(|(_, m)| !m.contains("__set_aside_")),
            "{found:#?}"
        );
    }

    #[test]
    fn every_problem_outside_the_rules_and_tools_comes_in_one_run_too() {
        let lines_of = |source: &str| -> Vec<(usize, String)> {
            load(source, "p.yaml")
                .unwrap_err()
                .items
                .iter()
                .map(|d| (d.pos.map_or(0, |p| p.line), d.message.clone()))
                .collect()
        };
        // A quoted version, a wrong `taint`, an unknown top-level key, a wrong `packs`, a
        // bad operation in a rule and a `default` that is no effect: six errors in one run.
        let found = lines_of(
            "version: \"1\"\ntaint: maybe\nrulez: []\npacks: email\nrules:\n  - id: a\n    effect: allow\n    operations: [fs.reed]\ndefault: maybe\n",
        );
        let lines: Vec<usize> = found.iter().map(|(l, _)| *l).collect();
        for line in [1, 2, 3, 4, 8, 9] {
            assert!(lines.contains(&line), "line {line}: {found:#?}");
        }
        assert!(
            found.iter().any(|(_, m)| m == "unknown field `rulez`"),
            "{found:#?}"
        );
        // `rules` that is no list: the rules are set aside, the rest is still read.
        let found = lines_of("version: 1\nrules: 3\ntools:\n  send_email:\n    max_calls: \"3\"\n");
        let lines: Vec<usize> = found.iter().map(|(l, _)| *l).collect();
        assert!(lines.contains(&2) && lines.contains(&5), "{found:#?}");
        // A stand-in never shows: a valid rest gives no error of its own.
        let found =
            lines_of("version: \"1\"\nrules:\n  - {id: a, effect: allow, operations: [fs.read]}\n");
        assert_eq!(found.len(), 1, "{found:#?}");
    }

    #[test]
    fn a_syntax_error_after_a_type_error_is_reported_too_and_errors_come_in_line_order() {
        let d = load(
            "version: 1\nrules:\n  - id: a\n    effect: allow\n    operations: [fs.read]\n    resources: \"/x\"\n    description: \"unclosed\n  - id: b\n    effect: deny\n    operations: [fs.read]\n",
            "p.yaml",
        )
        .unwrap_err();
        let found: Vec<(usize, &str)> = d
            .items
            .iter()
            .map(|d| (d.pos.map_or(0, |p| p.line), d.message.as_str()))
            .collect();
        assert_eq!(found[0], (6, "wrong type: expected a list"), "{found:#?}");
        assert_eq!(found[1], (7, "unclosed quote"), "{found:#?}");
        assert!(
            d.items[1]
                .help
                .as_deref()
                .is_some_and(|h| h.contains("close it"))
        );
        let d = load(
            "version: 1\nrules:\n  - id: a\n    effect: allow\n\toperations: [fs.read]\n",
            "p.yaml",
        )
        .unwrap_err();
        assert!(
            d.items
                .iter()
                .all(|d| d.help.as_deref().is_some_and(|h| h.contains("never tabs"))),
            "{:#?}",
            d.items
        );
    }

    #[test]
    fn a_key_indented_less_than_its_mapping_is_named() {
        let message = |source: &str| load(source, "p.yaml").unwrap_err().items[0].message.clone();
        assert_eq!(
            message("version: 1\nrules:\n  - id: r\n    effect: deny\n  operations: [fs.read]\n"),
            "`operations` is not indented as the other keys of its mapping"
        );
        // Missing indeed, or only in the next rule: the plain message.
        for source in [
            "version: 1\nrules:\n  - id: r\n    effect: deny\n",
            "version: 1\nrules:\n  - id: r\n    effect: deny\n  - id: s\n    effect: deny\n    operations: [fs.read]\n",
        ] {
            assert_eq!(message(source), "missing field `operations`", "{source}");
        }
    }

    #[test]
    fn samples_are_made_from_globs() {
        for (glob, sample) in [
            ("**/*.rs", "x/x.rs"),
            ("/w/.env", "/w/.env"),
            ("/w/[!a]b?/{src,lib}/**", "/w/xbx/src/x"),
            ("/w/\\*", "/w/*"),
        ] {
            assert_eq!(sample_of(glob), sample, "{glob}");
        }
    }
}
