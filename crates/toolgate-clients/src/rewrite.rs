//! The splices that wrap a remote entry (or one whose `command` is a list) and restore it.
//!
//! A remote entry changes shape when it is wrapped (its `type`, `url` and `headers` go, a
//! `command`, `args` and `env` come), so the whole entry is replaced: the new entry holds the
//! original entry's text, byte for byte, as the value of `x-toolgate-upstream` (re-indented by
//! one level when the entry is laid out one property per line: one indentation unit after
//! every line break, which `unwrap` removes again), then the entry's other properties
//! (`disabled`, …) as they were written, then `command`, `args` and `env`. `unwrap` puts the
//! original text back in place of the whole entry.

use jsonc_parser::ast::Object;

use super::remote::{self, RemoteSpec};
use crate::entries::{
    DocError, Outcome, Splice, UPSTREAM_KEY, WrapSettings, json_string, newline, prop_name,
    separator_before, slice, upstream_of,
};

/// The indentation unit of an entry laid out one property per line, with its closing
/// brace on a line of its own: (property indentation, closing indentation, unit).
fn layout(text: &str, entry: &Object<'_>) -> Option<(String, String, String)> {
    let first = entry.properties.first()?;
    let nl = newline(text);
    let ind = separator_before(text, first.range.start)
        .strip_prefix(nl)?
        .to_owned();
    let close_at = entry.range.end.checked_sub(1)?;
    let close = separator_before(text, close_at)
        .strip_prefix(nl)?
        .to_owned();
    let unit = ind.strip_prefix(close.as_str())?.to_owned();
    (!unit.is_empty()).then_some((ind, close, unit))
}

/// Replaces `entry` (a remote entry named `name`) with its wrapped form.
pub(crate) fn wrap_remote(
    text: &str,
    name: &str,
    entry: &Object<'_>,
    spec: &RemoteSpec,
    settings: &WrapSettings,
    splices: &mut Vec<Splice>,
    whole: &mut Option<serde_json::Value>,
) -> Result<Outcome, DocError> {
    let wrapped = remote::wrapped_args(
        name,
        spec,
        settings.policy.as_deref(),
        settings.workspace.as_deref(),
        settings.dialect,
    );
    let strings = |items: &[String]| {
        serde_json::Value::Array(
            items
                .iter()
                .cloned()
                .map(serde_json::Value::String)
                .collect(),
        )
    };
    let env: Vec<&(String, String)> = spec.env.iter().chain(&wrapped.env_added).collect();
    let env_map = || -> serde_json::Value {
        serde_json::Value::Object(
            env.iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
        )
    };
    let mut added = Vec::new();
    if spec.opencode {
        // OpenCode runs a local server from a `command` list, its variables in
        // `environment`.
        let mut command = vec![settings.exe.clone()];
        command.extend(wrapped.args.iter().cloned());
        added.push(("type", serde_json::Value::String("local".to_owned())));
        added.push(("command", strings(&command)));
        if !env.is_empty() {
            added.push(("environment", env_map()));
        }
    } else {
        added.push(("command", serde_json::Value::String(settings.exe.clone())));
        added.push(("args", strings(&wrapped.args)));
        if !env.is_empty() || spec.consumed.contains(&"env") {
            added.push(("env", env_map()));
        }
    }
    replace_entry(text, entry, &spec.consumed, &added, splices, whole)
}

/// Replaces `entry` (a stdio entry named `name` whose `command` is a list: OpenCode's
/// `"command": ["npx", "-y", "server"]`) with its wrapped form, `command` the same kind of
/// list: toolgate, `wrap` and its options, `--`, then the original list.
pub(crate) fn wrap_command_list(
    text: &str,
    name: &str,
    entry: &Object<'_>,
    list: &[String],
    settings: &WrapSettings,
    splices: &mut Vec<Splice>,
    whole: &mut Option<serde_json::Value>,
) -> Result<Outcome, DocError> {
    let (first, rest) = list.split_first().ok_or(DocError::Verification)?;
    let mut command = vec![settings.exe.clone()];
    command.extend(crate::document::wrap_prefix(name, first, settings));
    command.extend(rest.iter().cloned());
    let value =
        serde_json::Value::Array(command.into_iter().map(serde_json::Value::String).collect());
    replace_entry(
        text,
        entry,
        &["command"],
        &[("command", value)],
        splices,
        whole,
    )
}

/// Replaces the whole of `entry`: the original entry's text as the value of
/// [`UPSTREAM_KEY`], then its properties but `consumed` as they were written, then `added`.
fn replace_entry(
    text: &str,
    entry: &Object<'_>,
    consumed: &[&str],
    added: &[(&str, serde_json::Value)],
    splices: &mut Vec<Splice>,
    whole: &mut Option<serde_json::Value>,
) -> Result<Outcome, DocError> {
    let raw = slice(text, entry.range.start, entry.range.end)?;
    let layout = layout(text, entry);
    let original: serde_json::Value = jsonc_parser::ast::Value::Object(entry.clone()).into();
    let original_map = original.as_object().ok_or(DocError::Verification)?;
    let mut expected = serde_json::Map::new();
    expected.insert(UPSTREAM_KEY.to_owned(), original.clone());
    let upstream_text = match &layout {
        Some((_, _, unit)) => raw.replace('\n', &format!("\n{unit}")),
        None => raw.to_owned(),
    };
    let mut props = vec![format!("{}: {upstream_text}", json_string(UPSTREAM_KEY))];
    for prop in &entry.properties {
        let key = prop_name(prop);
        if consumed.contains(&key.as_str()) {
            continue;
        }
        props.push(slice(text, prop.range.start, prop.range.end)?.to_owned());
        let value = original_map.get(&key).ok_or(DocError::Verification)?;
        expected.insert(key, value.clone());
    }
    for (key, value) in added {
        props.push(format!("{}: {}", json_string(key), render(value)));
        expected.insert((*key).to_owned(), value.clone());
    }
    let with = match &layout {
        Some((ind, close, _)) => {
            let nl = newline(text);
            let lines: Vec<String> = props.iter().map(|p| format!("{nl}{ind}{p}")).collect();
            format!("{{{}{nl}{close}}}", lines.join(","))
        }
        None => format!("{{{}}}", props.join(", ")),
    };
    splices.push(Splice {
        start: entry.range.start,
        end: entry.range.end,
        with,
    });
    *whole = Some(serde_json::Value::Object(expected));
    Ok(Outcome::Wrapped)
}

/// A value on one line, as `wrap_remote` has always written them: `["a", "b"]`,
/// `{"K": "v"}`.
fn render(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(render).collect();
            format!("[{}]", items.join(", "))
        }
        serde_json::Value::Object(map) => {
            let members: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", json_string(k), render(v)))
                .collect();
            format!("{{{}}}", members.join(", "))
        }
        other => other.to_string(),
    }
}

/// Puts back the original text of an entry `wrap_remote` replaced.
pub(crate) fn unwrap_remote(
    text: &str,
    entry: &Object<'_>,
    splices: &mut Vec<Splice>,
    whole: &mut Option<serde_json::Value>,
) -> Result<Outcome, DocError> {
    let Some((index, upstream)) = upstream_of(entry) else {
        return Ok(Outcome::Skipped(format!(
            "runs `toolgate wrap --url` and has no `{UPSTREAM_KEY}` object (the client may have dropped it): restore this entry by hand"
        )));
    };
    let raw = slice(text, upstream.range.start, upstream.range.end)?;
    let unit = match (index, layout(text, entry)) {
        (0, Some((_, _, unit))) => Some(unit),
        _ => None,
    };
    let restored = match unit {
        Some(unit) => {
            let marker = format!("\n{unit}");
            let every_line = raw.matches('\n').count() == raw.matches(marker.as_str()).count();
            if every_line {
                raw.replace(marker.as_str(), "\n")
            } else {
                raw.to_owned()
            }
        }
        None => raw.to_owned(),
    };
    splices.push(Splice {
        start: entry.range.start,
        end: entry.range.end,
        with: restored,
    });
    *whole = Some(jsonc_parser::ast::Value::Object(upstream.clone()).into());
    Ok(Outcome::Restored)
}
