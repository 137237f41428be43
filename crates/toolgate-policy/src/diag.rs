//! Located diagnostics for policy files: `file:line:column`, a source snippet and a
//! `help:` line, rendered with miette.
//!
//! Locations come from serde-saphyr: its errors carry a [`serde_saphyr::Location`], and
//! [`SourceMap`] re-reads the document into a tree of [`serde_saphyr::Spanned`] nodes so
//! that semantic checks can point at any YAML key path (e.g.
//! `["rules", "2", "resources", "0"]`).

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// How serious a diagnostic is. Errors stop the policy from loading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    /// `warning` or `error`, as the rendering shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// A 1-based line and column (in characters) plus the byte range it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
    pub offset: usize,
    pub len: usize,
}

/// A secondary label pointing elsewhere in the file (e.g. "first defined here").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Related {
    pub pos: Pos,
    pub label: String,
}

/// One finding about a policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Lower-case sentence; user input in backticks.
    pub message: String,
    pub help: Option<String>,
    /// Where in the file; `None` only when the file itself is the problem (e.g. empty).
    pub pos: Option<Pos>,
    /// Short text printed under the snippet's marker.
    pub label: Option<String>,
    pub related: Vec<Related>,
}

impl Diagnostic {
    /// An error (the file does not load) saying `message`.
    pub fn error(message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            help: None,
            pos: None,
            label: None,
            related: Vec::new(),
        }
    }

    /// A warning (the file still loads) saying `message`.
    pub fn warning(message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(message)
        }
    }

    /// With a `help:` line.
    #[must_use]
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Located at `pos` (none: not located).
    #[must_use]
    pub fn at(mut self, pos: Option<Pos>) -> Self {
        self.pos = pos;
        self
    }

    /// With a label under the snippet.
    #[must_use]
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// With a second, labelled location (e.g. "first used here").
    #[must_use]
    pub fn with_related(mut self, pos: Option<Pos>, label: impl Into<String>) -> Self {
        if let Some(pos) = pos {
            self.related.push(Related {
                pos,
                label: label.into(),
            });
        }
        self
    }
}

/// Every finding about one policy file, with the source needed to render snippets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostics {
    /// The name shown in `file:line:column` (usually the path as given).
    pub name: String,
    pub source: String,
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// No diagnostics yet for the file `name` (as shown) with `source` (for the snippets).
    pub fn new(name: impl Into<String>, source: impl Into<String>) -> Self {
        Diagnostics {
            name: name.into(),
            source: source.into(),
            items: Vec::new(),
        }
    }

    /// Adds one.
    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.items.push(diagnostic);
    }

    /// How many are errors.
    pub fn errors(&self) -> usize {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }

    /// How many are warnings.
    pub fn warnings(&self) -> usize {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .count()
    }

    /// Whether any is an error.
    pub fn has_errors(&self) -> bool {
        self.errors() > 0
    }

    /// Sorts by position (errors without a position first), keeping insertion order for ties.
    pub fn sort(&mut self) {
        self.items
            .sort_by_key(|d| d.pos.map_or((0, 0), |p| (p.line, p.column)));
    }

    /// Renders every diagnostic as plain text (no colour): a header line
    /// `error: message`, the `--> file:line:column` location, a source snippet and `help:`.
    pub fn render_plain(&self) -> String {
        let mut out = String::new();
        for d in &self.items {
            out.push_str(&self.render_one(d, false));
        }
        out
    }

    /// Renders with colours and Unicode (for a terminal).
    pub fn render_fancy(&self) -> String {
        let mut out = String::new();
        for d in &self.items {
            out.push_str(&self.render_one(d, true));
        }
        out
    }

    fn render_one(&self, d: &Diagnostic, fancy: bool) -> String {
        let mut out = String::new();
        out.push_str(d.severity.as_str());
        out.push_str(": ");
        out.push_str(&d.message);
        out.push('\n');
        match d.pos {
            Some(p) => {
                out.push_str(&format!("  --> {}:{}:{}\n", self.name, p.line, p.column));
                let report = MietteReport {
                    source: miette::NamedSource::new(self.name.clone(), self.source.clone()),
                    severity: d.severity,
                    // Our header line is printed above; miette's (the first line) is dropped.
                    message: String::new(),
                    help: d.help.clone(),
                    labels: std::iter::once(miette::LabeledSpan::new_primary_with_span(
                        Some(d.label.clone().unwrap_or_else(|| "here".to_owned())),
                        (p.offset, p.len),
                    ))
                    .chain(d.related.iter().map(|r| {
                        miette::LabeledSpan::new_with_span(
                            Some(r.label.clone()),
                            (r.pos.offset, r.pos.len),
                        )
                    }))
                    .collect(),
                };
                let theme = if fancy {
                    miette::GraphicalTheme::unicode()
                } else {
                    miette::GraphicalTheme::unicode_nocolor()
                };
                let handler = miette::GraphicalReportHandler::new_themed(theme)
                    .with_context_lines(1)
                    .with_width(100);
                let mut snippet = String::new();
                if handler.render_report(&mut snippet, &report).is_ok() {
                    // Drop miette's own header line (we print ours above) but keep the rest.
                    for line in snippet.lines().skip(1) {
                        out.push_str(line.trim_end());
                        out.push('\n');
                    }
                } else if let Some(help) = &d.help {
                    out.push_str(&format!("  help: {help}\n"));
                }
            }
            None => {
                out.push_str(&format!("  --> {}\n", self.name));
                if let Some(help) = &d.help {
                    out.push_str(&format!("  help: {help}\n"));
                }
            }
        }
        out.push('\n');
        out
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render_plain())
    }
}

impl std::error::Error for Diagnostics {}

#[derive(Debug)]
struct MietteReport {
    source: miette::NamedSource<String>,
    severity: Severity,
    message: String,
    help: Option<String>,
    labels: Vec<miette::LabeledSpan>,
}

impl fmt::Display for MietteReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for MietteReport {}

impl miette::Diagnostic for MietteReport {
    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h.clone()) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        Some(Box::new(self.labels.iter().cloned()))
    }
}

/// Converts a 1-based line/column (characters) into a [`Pos`] with byte offsets. The span
/// covers the scalar token at that position (up to the next separator), at least one byte.
pub fn pos_at(source: &str, line: usize, column: usize) -> Option<Pos> {
    pos_in(source, &line_starts(source), line, column)
}

/// Byte offsets at which each line starts.
fn line_starts(source: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(source.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// [`pos_at`] with precomputed line starts (linear in the line's length, not the file's).
fn pos_in(source: &str, starts: &[usize], line: usize, column: usize) -> Option<Pos> {
    if line == 0 {
        return None;
    }
    if let Some(&start) = starts.get(line - 1)
        && start < source.len()
    {
        let end = starts.get(line).copied().unwrap_or(source.len());
        let text = source.get(start..end).unwrap_or("");
        let col_byte = text
            .char_indices()
            .nth(column.saturating_sub(1))
            .map_or(text.trim_end_matches(['\n', '\r']).len(), |(b, _)| b);
        let rest = text.get(col_byte..).unwrap_or("");
        return Some(Pos {
            line,
            column,
            offset: start + col_byte,
            len: token_len(rest),
        });
    }
    pos_slow(source, line, column)
}

fn pos_slow(source: &str, line: usize, column: usize) -> Option<Pos> {
    let mut offset = 0usize;
    for (i, text) in source.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            let col_byte = text
                .char_indices()
                .nth(column.saturating_sub(1))
                .map_or(text.trim_end_matches(['\n', '\r']).len(), |(b, _)| b);
            let rest = text.get(col_byte..).unwrap_or("");
            let len = token_len(rest);
            return Some(Pos {
                line,
                column,
                offset: offset + col_byte,
                len,
            });
        }
        offset += text.len();
    }
    // Past the end (e.g. an error at EOF): point at the last byte.
    let end = source.len();
    Some(Pos {
        line,
        column,
        offset: end.saturating_sub(1),
        len: usize::from(end > 0),
    })
}

/// Length in bytes of the YAML token starting at `rest`: a quoted string, a flow
/// collection's first item, or a plain scalar up to `: `, `,`, `]`, `}` or ` #`.
fn token_len(rest: &str) -> usize {
    let line = rest.trim_end_matches(['\n', '\r']);
    if line.is_empty() {
        return 0;
    }
    let mut chars = line.char_indices();
    match chars.next() {
        Some((_, q @ ('"' | '\''))) => {
            let mut prev_escape = false;
            for (i, c) in chars {
                if c == q && !(q == '"' && prev_escape) {
                    return i + c.len_utf8();
                }
                prev_escape = q == '"' && c == '\\' && !prev_escape;
            }
            line.len()
        }
        Some((_, '[' | '{' | '-')) => 1,
        _ => {
            let bytes = line.as_bytes();
            let mut end = line.len();
            for (i, c) in line.char_indices() {
                let next = bytes.get(i + 1).copied();
                let stop = match c {
                    ',' | ']' | '}' => true,
                    ':' => matches!(next, None | Some(b' ' | b'\t')),
                    ' ' | '\t' => matches!(next, Some(b'#')),
                    _ => false,
                };
                if stop {
                    end = i;
                    break;
                }
            }
            line.get(..end).map_or(end, |s| s.trim_end().len()).max(1)
        }
    }
}

/// Positions of every key and value in a YAML document, addressed by key path.
/// Sequence items are addressed by their index as a string (`"0"`, `"1"`, …).
/// Built lazily: locating needs a second, slower parse, done only when a diagnostic needs it.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    source: String,
    /// key path → (position of the key, position of the value)
    cell: std::cell::OnceCell<Entries>,
}

type Entries = BTreeMap<Vec<String>, (Option<Pos>, Option<Pos>)>;

impl SourceMap {
    /// Builds the map now; a document that does not parse gives an empty map.
    pub fn build(source: &str) -> SourceMap {
        let map = SourceMap::lazy(source);
        map.entries();
        map
    }

    /// A map that parses `source` on first use.
    pub fn lazy(source: &str) -> SourceMap {
        SourceMap {
            source: source.to_owned(),
            cell: std::cell::OnceCell::new(),
        }
    }

    fn entries(&self) -> &Entries {
        self.cell.get_or_init(|| {
            let mut b = Builder::default();
            b.build(&self.source);
            b.entries
        })
    }
}

#[derive(Default)]
struct Builder {
    entries: Entries,
}

impl Builder {
    fn build(&mut self, source: &str) {
        let map = self;
        if let Ok(root) = serde_saphyr::from_str::<Spanned<Node>>(source) {
            let starts = line_starts(source);
            let pos = loc_pos(source, &starts, &root.referenced);
            map.entries.insert(Vec::new(), (pos, pos));
            map.walk(source, &starts, &mut Vec::new(), &root.value);
        }
    }

    fn walk(&mut self, source: &str, starts: &[usize], path: &mut Vec<String>, node: &Node) {
        match node {
            Node::Scalar => {}
            Node::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(i.to_string());
                    let pos = loc_pos(source, starts, &item.referenced);
                    self.entries.insert(path.clone(), (pos, pos));
                    self.walk(source, starts, path, &item.value);
                    path.pop();
                }
            }
            Node::Map(entries) => {
                for (key, value) in entries {
                    path.push(key.value.0.clone());
                    let kpos = loc_pos(source, starts, &key.referenced);
                    let vpos = loc_pos(source, starts, &value.referenced);
                    self.entries.insert(path.clone(), (kpos, vpos));
                    self.walk(source, starts, path, &value.value);
                    path.pop();
                }
            }
        }
    }
}

impl SourceMap {
    /// The position of the key at `path` (for a sequence item: the item), falling back to
    /// the nearest ancestor that has one.
    pub fn key<S: AsRef<str>>(&self, path: &[S]) -> Option<Pos> {
        self.find(path, true)
    }

    /// The position of the value at `path`, falling back to the nearest ancestor.
    pub fn value<S: AsRef<str>>(&self, path: &[S]) -> Option<Pos> {
        self.find(path, false)
    }

    fn find<S: AsRef<str>>(&self, path: &[S], key: bool) -> Option<Pos> {
        let mut owned: Vec<String> = path.iter().map(|s| s.as_ref().to_owned()).collect();
        loop {
            if let Some((k, v)) = self.entries().get(&owned) {
                let found = if key { k.or(*v) } else { v.or(*k) };
                if found.is_some() {
                    return found;
                }
            }
            owned.pop()?;
        }
    }
}

fn loc_pos(source: &str, starts: &[usize], loc: &serde_saphyr::Location) -> Option<Pos> {
    pos_in(source, starts, loc.line() as usize, loc.column() as usize)
}

/// A YAML node with the positions of its children.
#[derive(Debug)]
enum Node {
    Scalar,
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<KeyText>, Spanned<Node>)>),
}

/// A mapping key as text (any scalar).
#[derive(Debug)]
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = KeyText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a scalar key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyText, E> {
                Ok(KeyText(v.to_owned()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<KeyText, E> {
                Ok(KeyText(String::new()))
            }
        }
        deserializer.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any YAML node")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_i128<E: de::Error>(self, _: i128) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_u128<E: de::Error>(self, _: u128) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_none<E: de::Error>(self) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
                Node::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Spanned<Node>>()? {
                    items.push(item);
                }
                Ok(Node::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<Spanned<KeyText>>()? {
                    let value = map.next_value::<Spanned<Node>>()?;
                    entries.push((key, value));
                }
                Ok(Node::Map(entries))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// The closest candidate by edit distance, if it is close enough to be a likely typo.
pub fn did_you_mean<'a, I: IntoIterator<Item = &'a str>>(
    given: &str,
    candidates: I,
) -> Option<&'a str> {
    let mut best: Option<(usize, &'a str)> = None;
    for c in candidates {
        let d = levenshtein(&given.to_lowercase(), &c.to_lowercase());
        let limit = (c.chars().count().max(given.chars().count()) / 3).max(2);
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0usize; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        if let Some(first) = cur.first_mut() {
            *first = i + 1;
        }
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            let del = prev
                .get(j + 1)
                .copied()
                .unwrap_or(usize::MAX)
                .saturating_add(1);
            let ins = cur.get(j).copied().unwrap_or(usize::MAX).saturating_add(1);
            let sub = prev
                .get(j)
                .copied()
                .unwrap_or(usize::MAX)
                .saturating_add(cost);
            if let Some(slot) = cur.get_mut(j + 1) {
                *slot = del.min(ins).min(sub);
            }
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev.last().copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_map_locates_keys_and_items() {
        let src = "version: 1\nrules:\n  - id: a\n    resources: [\"x\", y]\n";
        let map = SourceMap::build(src);
        let k = map.key(&["rules", "0", "id"]).unwrap();
        assert_eq!((k.line, k.column), (3, 5));
        let v = map.value(&["rules", "0", "resources", "1"]).unwrap();
        assert_eq!((v.line, v.column), (4, 22));
        assert_eq!(&src[v.offset..v.offset + v.len], "y");
        let q = map.value(&["rules", "0", "resources", "0"]).unwrap();
        assert_eq!(&src[q.offset..q.offset + q.len], "\"x\"");
        // Unknown paths fall back to the nearest ancestor.
        let f = map.key(&["rules", "0", "nope"]).unwrap();
        assert_eq!(f.line, 3);
    }

    #[test]
    fn did_you_mean_finds_typos() {
        let c = ["allowed_path_prefixes", "path_params", "arg_patterns"];
        assert_eq!(
            did_you_mean("allowed_path_prefix", c),
            Some("allowed_path_prefixes")
        );
        assert_eq!(did_you_mean("zzzzzz", c), None);
    }
}
