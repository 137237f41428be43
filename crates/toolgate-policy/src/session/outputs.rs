//! Output trust: recording tool outputs into the taint index, trusted fields and untrusted
//! values.

use super::{FieldNote, MAX_FIELD_NOTES, MAX_NOTED_VALUES, Session};
use crate::contracts_impl::fields::FieldPath;
use crate::contracts_impl::{TextFormat, TrustedFields, fields};
use crate::normalize::collect_strings;
use crate::taint::{OutputTrust, TaintIndex, TaintSource};
use serde_json::Value;
use std::collections::HashSet;

impl Session {
    /// The session's taint index.
    pub fn taint(&self) -> &TaintIndex {
        &self.taint
    }

    /// The session's taint index, to record outputs in.
    pub fn taint_mut(&mut self) -> &mut TaintIndex {
        &mut self.taint
    }

    fn next_source(&mut self, server: Option<&str>, tool: &str) -> TaintSource {
        self.seq += 1;
        TaintSource {
            server: server.map(str::to_owned),
            tool: tool.to_owned(),
            seq: self.seq,
        }
    }

    /// Feed a `tools/call` result (text content, embedded resource text, resource links and
    /// `structuredContent`) into the taint index with one trust label. Returns the sequence
    /// number given to this output.
    pub fn record_output(
        &mut self,
        server: Option<&str>,
        tool: &str,
        result: &Value,
        trust: OutputTrust,
    ) -> u64 {
        let source = self.next_source(server, tool);
        let seq = source.seq;
        record_result(&mut self.taint, result, trust, &source);
        seq
    }

    /// Feed a result whose output is trusted only at `spec`'s fields: in
    /// `structuredContent`, and in each text content block that holds a JSON (or, with
    /// `text_format: yaml`, YAML) document (see [`crate::contracts::TrustedFields`]). The
    /// values at those fields vouch, everything else taints: the rest of each document (its
    /// member names too), text that is not such a document (as a whole), and every other
    /// content item. A text block that repeats `structuredContent` is not recorded twice.
    ///
    /// Unless `trusted_wins`, a trusted string whose destination (or, for a string that is
    /// no destination, whose text at word boundaries) the untrusted part of the same output
    /// also holds does not vouch: an injection in a free-text field that repeats a
    /// participant's address keeps that address tainted. When the untrusted part is larger
    /// than [`TaintLimits::max_text_bytes`] (so it cannot be compared in full), nothing in the
    /// output vouches.
    ///
    /// Bounds: each text block is parsed at most once, and only while the text parsed for
    /// this output stays within [`TaintLimits::max_text_bytes`] (a block past that is text);
    /// YAML is parsed under serde-saphyr's budget.
    ///
    /// [`TaintLimits::max_text_bytes`]: crate::taint::TaintLimits::max_text_bytes
    pub fn record_output_fields(
        &mut self,
        server: Option<&str>,
        tool: &str,
        result: &Value,
        spec: &TrustedFields,
    ) -> RecordedOutput {
        let source = self.next_source(server, tool);
        let mut out = RecordedOutput::plain(source.seq);
        let Some(obj) = result.as_object() else {
            self.taint
                .record_json(result, OutputTrust::Untrusted, source);
            return out;
        };
        let paths: Vec<FieldPath> = spec
            .trusted_fields
            .iter()
            .filter_map(|f| fields::parse_path(f).ok())
            .collect();
        let ask_paths: Vec<FieldPath> = spec
            .ask_fields()
            .iter()
            .filter_map(|f| fields::parse_path(f).ok())
            .collect();
        let limit = self.taint.limits().max_text_bytes;
        let mut trusted: Vec<Value> = Vec::new();
        // The values of `ask_fields`: untrusted, and noted so that a destination from one
        // asks.
        let mut asked: Vec<Value> = Vec::new();
        // The untrusted parts of the documents, each followed by an array of its member names
        // and numbers.
        let mut rests: Vec<Value> = Vec::new();
        let split = |mut doc: Value,
                     trusted: &mut Vec<Value>,
                     asked: &mut Vec<Value>,
                     rests: &mut Vec<Value>| {
            for p in &paths {
                fields::take(&mut doc, p, trusted);
            }
            for p in &ask_paths {
                fields::take(&mut doc, p, asked);
            }
            let mut names = Vec::new();
            collect_names(&doc, &mut names, 0);
            rests.push(doc);
            rests.push(Value::Array(names));
        };
        let structured = obj.get("structuredContent");
        if let Some(sc) = structured {
            split(sc.clone(), &mut trusted, &mut asked, &mut rests);
        }
        // Text blocks that are not a document, and every other content item.
        let mut texts: Vec<&str> = Vec::new();
        let mut items_left: Vec<&Value> = Vec::new();
        let mut parse_budget = limit;
        if let Some(items) = obj.get("content").and_then(Value::as_array) {
            for (i, item) in items.iter().enumerate() {
                if item.get("type").and_then(Value::as_str) != Some("text") {
                    items_left.push(item);
                    continue;
                }
                let Some(t) = item.get("text").and_then(Value::as_str) else {
                    continue;
                };
                let doc = if t.len() <= parse_budget {
                    parse_budget -= t.len();
                    fields::parse_text(t, spec.format())
                } else {
                    None
                };
                match doc {
                    Some(d) if structured == Some(&d) => {}
                    Some(d) => split(d, &mut trusted, &mut asked, &mut rests),
                    None => {
                        texts.push(t);
                        out.unparsed_texts.push(i);
                    }
                }
            }
        }
        let mut overridden: HashSet<String> = HashSet::new();
        // The untrusted part of the output, as strings.
        let mut strings: Vec<&str> = Vec::new();
        if (!trusted.is_empty() && !spec.trusted_wins()) || !asked.is_empty() {
            for r in &rests {
                collect_strings(r, &mut strings, 0);
            }
            for item in &items_left {
                item_strings(item, &mut strings);
            }
            strings.extend(texts.iter().copied());
        }
        // The destinations of `ask_fields` that no untrusted part repeats (an injection that
        // names one in free text taints it as usual).
        let mut ask: HashSet<String> = HashSet::new();
        if !asked.is_empty()
            && let Some(untrusted) = Untrusted::of(&strings, limit, &asked)
        {
            let mut kept = Value::Array(asked.clone());
            untrusted.drop_repeated(&mut kept, &mut HashSet::new());
            let mut found = Vec::new();
            collect_strings(&kept, &mut found, 0);
            for s in found {
                if ask.len() < MAX_NOTED_VALUES {
                    ask.extend(crate::taint::canonical_destination(s));
                }
            }
        }
        if !trusted.is_empty() && !spec.trusted_wins() {
            match Untrusted::of(&strings, limit, &trusted) {
                Some(untrusted) => {
                    for v in &mut trusted {
                        out.overridden += untrusted.drop_repeated(v, &mut overridden);
                    }
                }
                None => {
                    out.too_large = true;
                    trusted.clear();
                }
            }
        }
        for v in &trusted {
            self.taint
                .record_json(v, OutputTrust::Trusted, source.clone());
        }
        for r in rests.iter().chain(&asked) {
            self.taint
                .record_json(r, OutputTrust::Untrusted, source.clone());
        }
        for t in texts {
            self.taint
                .record_text(t, OutputTrust::Untrusted, source.clone());
        }
        for item in items_left {
            record_item(&mut self.taint, item, OutputTrust::Untrusted, &source);
        }
        if !out.unparsed_texts.is_empty() || !overridden.is_empty() || !ask.is_empty() {
            if self.field_notes.len() >= MAX_FIELD_NOTES {
                self.field_notes.pop_front();
            }
            self.field_notes.push_back(FieldNote {
                seq: out.seq,
                unparsed: out.unparsed_texts.clone(),
                overridden,
                ask,
                ask_fields: spec.ask_fields().to_vec(),
            });
        }
        out
    }
}

/// What recording one output did, for the caller to report (see
/// [`crate::contracts::Contracts::record_output_noted`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedOutput {
    /// The sequence number given to this output.
    pub seq: u64,
    /// With `trusted_fields`: the positions in `content` of the text blocks that were not a
    /// JSON (or YAML) document, so untrusted as a whole.
    pub unparsed_texts: Vec<usize>,
    /// With `trusted_fields`: trusted strings that did not vouch because an untrusted field
    /// of the same output repeats them.
    pub overridden: usize,
    /// With `trusted_fields`: the untrusted part was too large to compare, so nothing
    /// vouched.
    pub too_large: bool,
}

impl RecordedOutput {
    pub(crate) fn plain(seq: u64) -> RecordedOutput {
        RecordedOutput {
            seq,
            ..RecordedOutput::default()
        }
    }

    /// A sentence for the log when something in the output was read as untrusted against
    /// the contract's `trusted_fields` (`None` when nothing was).
    pub fn note(&self, tool: &str) -> Option<String> {
        let mut parts = Vec::new();
        if !self.unparsed_texts.is_empty() {
            let list = self
                .unparsed_texts
                .iter()
                .map(|i| format!("#{i}"))
                .collect::<Vec<_>>()
                .join(", ");
            parts.push(format!(
                "text content {list} is not a JSON/YAML document: untrusted as a whole"
            ));
        }
        if self.overridden > 0 {
            parts.push(format!(
                "{} trusted value(s) also appear in an untrusted field: untrusted (`trusted_wins: true` trusts them)",
                self.overridden
            ));
        }
        if self.too_large {
            parts.push(
                "the untrusted part is too large to compare with the trusted fields: nothing vouched"
                    .to_owned(),
            );
        }
        (!parts.is_empty()).then(|| format!("output of `{tool}`: {}", parts.join("; ")))
    }
}

/// The untrusted part of one output, to find the trusted strings it repeats.
struct Untrusted {
    /// The destination tokens of the untrusted part.
    tokens: HashSet<String>,
    /// The trusted strings that are no destination and that the untrusted part holds at
    /// word boundaries (lower-cased).
    repeated: HashSet<String>,
    /// Such strings past [`MAX_SEARCHED_VALUES`]: not searched, so counted as repeated.
    unsearched: HashSet<String>,
}

/// Trusted strings that are no destination searched in one output (all at once); past it
/// such a string counts as repeated (it does not vouch).
const MAX_SEARCHED_VALUES: usize = 10_000;

impl Untrusted {
    /// `None` when the strings are longer than `limit` bytes in all.
    fn of(strings: &[&str], limit: usize, trusted: &[Value]) -> Option<Untrusted> {
        let total = strings.iter().map(|s| s.len()).sum::<usize>();
        if total > limit {
            return None;
        }
        let mut tokens = HashSet::new();
        for s in strings {
            tokens.extend(crate::taint::tokenize_destinations(s));
        }
        // The trusted strings that are no destination: searched in one pass over the text.
        let mut needles: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        for v in trusted {
            let mut found = Vec::new();
            collect_strings(v, &mut found, 0);
            for s in found {
                if let Some(n) = needle(s)
                    && crate::taint::tokenize_destinations(s).is_empty()
                    && seen.insert(n.clone())
                {
                    needles.push(n);
                }
            }
        }
        let unsearched: HashSet<String> = needles
            .get(MAX_SEARCHED_VALUES..)
            .unwrap_or_default()
            .iter()
            .cloned()
            .collect();
        needles.truncate(MAX_SEARCHED_VALUES);
        let mut repeated = HashSet::new();
        if !needles.is_empty() {
            let mut text = String::with_capacity(total.saturating_add(strings.len()));
            for s in strings {
                text.push_str(&s.to_lowercase());
                text.push('\n');
            }
            match aho_corasick::AhoCorasick::new(&needles) {
                Ok(ac) => {
                    let hay = text.as_bytes();
                    let word =
                        |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
                    for m in ac.find_overlapping_iter(hay) {
                        let bounded = !word(m.start().checked_sub(1).and_then(|i| hay.get(i)))
                            && !word(hay.get(m.end()));
                        if bounded && let Some(n) = needles.get(m.pattern().as_usize()) {
                            repeated.insert(n.clone());
                        }
                    }
                }
                // Cannot search: none of them vouches.
                Err(_) => repeated.extend(needles),
            }
        }
        Some(Untrusted {
            tokens,
            repeated,
            unsearched,
        })
    }

    /// Replaces every string in `value` that the untrusted part repeats by `null`; returns
    /// how many, and notes their destinations (or values) in `noted`.
    fn drop_repeated(&self, value: &mut Value, noted: &mut HashSet<String>) -> usize {
        match value {
            Value::String(s) if self.repeats(s) => {
                if noted.len() < MAX_NOTED_VALUES {
                    let tokens = crate::taint::tokenize_destinations(s);
                    if tokens.is_empty() {
                        noted.extend(needle(s));
                    } else {
                        noted.extend(tokens);
                    }
                }
                *value = Value::Null;
                1
            }
            Value::Array(items) => items.iter_mut().map(|v| self.drop_repeated(v, noted)).sum(),
            Value::Object(map) => map.values_mut().map(|v| self.drop_repeated(v, noted)).sum(),
            _ => 0,
        }
    }

    fn repeats(&self, s: &str) -> bool {
        let tokens = crate::taint::tokenize_destinations(s);
        if !tokens.is_empty() {
            return tokens.iter().any(|t| self.tokens.contains(t));
        }
        // A string with whitespace, or too long, is never vouched as a whole value (see
        // `TaintIndex::record_json`).
        needle(s).is_some_and(|n| self.repeated.contains(&n) || self.unsearched.contains(&n))
    }
}

/// A trusted string as searched in the untrusted text: trimmed, lower-cased, without
/// whitespace, at most 256 bytes.
fn needle(s: &str) -> Option<String> {
    let n = s.trim().to_lowercase();
    (!n.is_empty() && !n.chars().any(char::is_whitespace) && n.len() <= 256).then_some(n)
}

/// Every member name and every number in `value` (as strings), to index them as untrusted
/// text: the model reads them too (an address as a name, an account number as a number),
/// and the index reads only string values.
fn collect_names(value: &Value, out: &mut Vec<Value>, depth: usize) {
    if depth > 64 {
        return;
    }
    match value {
        Value::Number(n) => out.push(Value::String(n.to_string())),
        Value::Array(items) => items.iter().for_each(|v| collect_names(v, out, depth + 1)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(Value::String(k.clone()));
                collect_names(v, out, depth + 1);
            }
        }
        _ => {}
    }
}

fn record_result(taint: &mut TaintIndex, result: &Value, trust: OutputTrust, source: &TaintSource) {
    let Some(obj) = result.as_object() else {
        taint.record_json(result, trust, source.clone());
        return;
    };
    if let Some(items) = obj.get("content").and_then(Value::as_array) {
        for item in items {
            record_item(taint, item, trust, source);
        }
    }
    if let Some(sc) = obj.get("structuredContent") {
        taint.record_json(sc, trust, source.clone());
    }
}

/// The strings of a `content` item that [`record_item`] indexes.
fn item_strings<'v>(item: &'v Value, out: &mut Vec<&'v str>) {
    let mut fields = |v: &'v Value, keys: &[&str]| {
        for k in keys {
            if let Some(t) = v.get(*k).and_then(Value::as_str) {
                out.push(t);
            }
        }
    };
    match item.get("type").and_then(Value::as_str) {
        Some("text") => fields(item, &["text"]),
        Some("resource") => {
            if let Some(r) = item.get("resource") {
                fields(r, &["text", "uri"]);
            }
        }
        Some("resource_link") => fields(item, &["uri", "name", "description"]),
        Some("image" | "audio") => {}
        _ => collect_strings(item, out, 0),
    }
}

/// One item of a result's `content`.
fn record_item(taint: &mut TaintIndex, item: &Value, trust: OutputTrust, source: &TaintSource) {
    match item.get("type").and_then(Value::as_str) {
        Some("text") => {
            let Some(t) = item.get("text").and_then(Value::as_str) else {
                return;
            };
            taint.record_text(t, trust, source.clone());
            // A trusted JSON document in text also vouches for its whole values (names such
            // as `eve` or `Hotel Montmartre Vue`, not only addresses), as `structuredContent`
            // does; within the budget of one output's parsed text.
            if trust == OutputTrust::Trusted
                && t.len() <= taint.limits().max_text_bytes
                && t.trim_start().starts_with(['{', '['])
                && let Some(doc) = fields::parse_text(t, TextFormat::Json)
            {
                taint.record_json(&doc, trust, source.clone());
            }
        }
        Some("resource") => {
            if let Some(r) = item.get("resource") {
                for k in ["text", "uri"] {
                    if let Some(t) = r.get(k).and_then(Value::as_str) {
                        taint.record_text(t, trust, source.clone());
                    }
                }
            }
        }
        Some("resource_link") => {
            for k in ["uri", "name", "description"] {
                if let Some(t) = item.get(k).and_then(Value::as_str) {
                    taint.record_text(t, trust, source.clone());
                }
            }
        }
        Some("image" | "audio") => {}
        _ => taint.record_json(item, trust, source.clone()),
    }
}
