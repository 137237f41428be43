//! The settings file as text: parsing it, the indentation it uses, rendering values in it and
//! the splices that append or remove entries.

use super::HookError;
use crate::entries::{Splice, newline, parse_options, separator_before};
use jsonc_parser::ast::Value;
use jsonc_parser::common::Range;
use jsonc_parser::{CollectOptions, parse_to_ast};
use serde::Serialize as _;
use serde_json::Value as J;

pub(super) fn strip_bom(text: &str) -> (&str, &'static str) {
    match text.strip_prefix('\u{feff}') {
        Some(rest) => (rest, "\u{feff}"),
        None => (text, ""),
    }
}

pub(super) fn parse(body: &str) -> Result<J, HookError> {
    let parsed = parse_to_ast(body, &CollectOptions::default(), &parse_options())
        .map_err(|e| HookError::Parse(e.to_string()))?;
    match parsed.value {
        Some(v @ Value::Object(_)) => Ok(v.into()),
        _ => Err(HookError::NotAnObject),
    }
}

/// The indentation of the line `pos` is on, when only whitespace precedes `pos` on it.
pub(super) fn line_indent(text: &str, pos: usize) -> Option<String> {
    let before = text.get(..pos)?;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let indent = before.get(start..)?;
    indent
        .chars()
        .all(|c| c == ' ' || c == '\t')
        .then(|| indent.to_owned())
}

/// The leading whitespace of the line `pos` is on.
fn leading_whitespace(text: &str, pos: usize) -> String {
    let before = text.get(..pos).unwrap_or_default();
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    before
        .get(start..)
        .unwrap_or_default()
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

/// The file's indentation step: the first indented line's whitespace, else two spaces.
pub(super) fn unit(text: &str) -> String {
    text.lines()
        .skip(1)
        .map(|l| {
            l.chars()
                .take_while(|c| *c == ' ' || *c == '\t')
                .collect::<String>()
        })
        .find(|w| !w.is_empty())
        .unwrap_or_else(|| "  ".to_owned())
}

pub(super) fn pretty(value: &J, unit: &str) -> String {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    if value.serialize(&mut ser).is_err() {
        return value.to_string();
    }
    String::from_utf8(out).unwrap_or_else(|_| value.to_string())
}

/// `value` as JSON text for a place indented by `indent`, in the file's line endings.
/// With an empty `unit`, on one line.
pub(super) fn render(text: &str, value: &J, indent: &str, unit: &str) -> String {
    if unit.is_empty() {
        return value.to_string();
    }
    let nl = newline(text);
    pretty(value, unit).replace('\n', &format!("{nl}{indent}"))
}

pub(super) fn prop_text(text: &str, key: &str, value: &J, indent: &str, unit: &str) -> String {
    format!(
        "{}: {}",
        J::String(key.to_owned()),
        render(text, value, indent, unit)
    )
}

/// The insertion of new items (rendered by `items(indent, unit)`) after the last item of the
/// container at `container` (an object or an array) whose items are at `ranges`.
pub(super) fn append(
    text: &str,
    container: Range,
    ranges: &[Range],
    items: impl FnOnce(&str, &str) -> Vec<String>,
) -> Splice {
    let outer = leading_whitespace(text, container.start);
    let step = unit(text);
    match (ranges.first(), ranges.last()) {
        (Some(first), Some(last)) => {
            let indent = line_indent(text, first.start);
            let item_indent = indent.clone().unwrap_or_else(|| outer.clone());
            // Items on one line with their bracket get a new item on that line too.
            let step = match &indent {
                None => String::new(),
                Some(_) => item_indent
                    .strip_prefix(outer.as_str())
                    .filter(|s| !s.is_empty())
                    .map_or(step, str::to_owned),
            };
            let sep = separator_before(text, last.start);
            let with = items(&item_indent, &step)
                .into_iter()
                .map(|item| format!(",{sep}{item}"))
                .collect();
            Splice {
                start: last.end,
                end: last.end,
                with,
            }
        }
        _ => {
            let nl = newline(text);
            let inner = format!("{outer}{step}");
            let body = items(&inner, &step).join(&format!(",{nl}{inner}"));
            Splice {
                start: container.start + 1,
                end: container.start + 1,
                with: format!("{nl}{inner}{body}{nl}{outer}"),
            }
        }
    }
}

/// The removal of the items marked in `drop` from the container at `container`, each run of
/// them with its separator; when all go, everything between the brackets goes.
pub(super) fn remove_items(container: Range, ranges: &[Range], drop: &[bool]) -> Vec<Splice> {
    if !drop.is_empty() && drop.iter().all(|d| *d) {
        return vec![Splice {
            start: container.start + 1,
            end: container.end.saturating_sub(1),
            with: String::new(),
        }];
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < ranges.len() {
        if !drop.get(i).copied().unwrap_or(false) {
            i += 1;
            continue;
        }
        let a = i;
        while drop.get(i + 1).copied().unwrap_or(false) {
            i += 1;
        }
        let b = i;
        let (start, end) = match (ranges.get(a), ranges.get(b), ranges.get(b + 1)) {
            (Some(first), Some(_), Some(next)) => (first.start, next.start),
            (Some(first), Some(last), None) => {
                let prev = a.checked_sub(1).and_then(|p| ranges.get(p));
                (prev.map_or(first.start, |p| p.end), last.end)
            }
            _ => break,
        };
        out.push(Splice {
            start,
            end,
            with: String::new(),
        });
        i += 1;
    }
    out
}
