//! Wrapping one entry: the splices that put toolgate in front of a server's command.

use super::not_stdio_reason;
use crate::entries::{
    DocError, Outcome, Splice, UPSTREAM_KEY, WrapSettings, json_array, json_string, looks_wrapped,
    separator_before, slice, string_array, string_value,
};
use jsonc_parser::ast::{Object, Value};
use jsonc_parser::common::Ranged;

pub(crate) fn wrap_prefix(name: &str, command: &str, settings: &WrapSettings) -> Vec<String> {
    let mut prefix = vec!["wrap".to_owned(), "--server".to_owned(), name.to_owned()];
    if let Some(policy) = &settings.policy {
        prefix.push("--policy".to_owned());
        prefix.push(policy.clone());
    }
    if let Some(workspace) = &settings.workspace {
        prefix.push("--workspace".to_owned());
        prefix.push(workspace.clone());
    }
    prefix.push("--".to_owned());
    prefix.push(command.to_owned());
    prefix
}

pub(super) fn wrap_entry(
    text: &str,
    name: &str,
    entry: &Object<'_>,
    settings: &WrapSettings,
    splices: &mut Vec<Splice>,
    whole: &mut Option<serde_json::Value>,
) -> Result<Outcome, DocError> {
    if entry.get(UPSTREAM_KEY).is_some() || looks_wrapped(entry) {
        return Ok(Outcome::AlreadyWrapped);
    }
    let plain: serde_json::Value = Value::Object(entry.clone()).into();
    let plain = plain.as_object().ok_or(DocError::Verification)?;
    match crate::remote::analyze(plain) {
        Ok(Some(spec)) => {
            return crate::rewrite::wrap_remote(text, name, entry, &spec, settings, splices, whole);
        }
        Err(reason) => return Ok(Outcome::Skipped(reason)),
        Ok(None) => {}
    }
    if let Some(reason) = not_stdio_reason(entry) {
        return Ok(Outcome::Skipped(reason));
    }
    let (Some(command_prop), Some(first_prop)) = (entry.get("command"), entry.properties.first())
    else {
        return Ok(Outcome::Skipped("no `command`".to_owned()));
    };
    if let Value::Array(list) = &command_prop.value {
        return match string_array(list) {
            Some(list) if !list.is_empty() => crate::rewrite::wrap_command_list(
                text, name, entry, &list, settings, splices, whole,
            ),
            _ => Ok(Outcome::Skipped(
                "`command` is not a list of strings".to_owned(),
            )),
        };
    }
    let Some(command) = string_value(&command_prop.value) else {
        return Ok(Outcome::Skipped("`command` is not a string".to_owned()));
    };
    let command_range = command_prop.value.range();
    let command_raw = slice(text, command_range.start, command_range.end)?;
    let prefix = wrap_prefix(name, command, settings);
    let args = entry.get_array("args");

    // 1. The upstream record, as the entry's first property.
    let mut upstream = format!("{{\"command\": {command_raw}");
    if let Some(args) = args {
        let original = string_array(args).ok_or(DocError::Verification)?;
        upstream.push_str(&format!(", \"args\": {}", json_array(&original)));
    }
    upstream.push('}');
    let sep = separator_before(text, first_prop.range.start);
    splices.push(Splice {
        start: first_prop.range.start,
        end: first_prop.range.start,
        with: format!("{}: {upstream},{sep}", json_string(UPSTREAM_KEY)),
    });

    // 2. `command` now runs toolgate.
    splices.push(Splice {
        start: command_range.start,
        end: command_range.end,
        with: json_string(&settings.exe),
    });

    // 3. The wrap prefix goes in front of the original arguments.
    let quoted: Vec<String> = prefix.iter().map(|s| json_string(s)).collect();
    match args {
        Some(array) => match array.elements.first() {
            Some(first) => {
                let start = first.range().start;
                let sep = format!(",{}", separator_before(text, start));
                splices.push(Splice {
                    start,
                    end: start,
                    with: format!("{}{sep}", quoted.join(&sep)),
                });
            }
            None => {
                let start = array.range.start + 1;
                splices.push(Splice {
                    start,
                    end: start,
                    with: quoted.join(", "),
                });
            }
        },
        None => {
            let start = command_prop.range.start;
            let sep = separator_before(text, start);
            splices.push(Splice {
                start,
                end: start,
                with: format!("\"args\": {},{sep}", json_array(&prefix)),
            });
        }
    }
    Ok(Outcome::Wrapped)
}

/// The value `wrap_entry` is meant to produce.
pub(super) fn wrapped_value(
    name: &str,
    entry: &Object<'_>,
    settings: &WrapSettings,
) -> Option<serde_json::Value> {
    let original: serde_json::Value = Value::Object(entry.clone()).into();
    let mut map = original.as_object()?.clone();
    let command = map.get("command")?.as_str()?.to_owned();
    let mut upstream = serde_json::Map::new();
    upstream.insert("command".to_owned(), map.get("command")?.clone());
    let mut args = wrap_prefix(name, &command, settings);
    if let Some(original_args) = map.get("args") {
        upstream.insert("args".to_owned(), original_args.clone());
        for arg in original_args.as_array()? {
            args.push(arg.as_str()?.to_owned());
        }
    }
    map.insert(UPSTREAM_KEY.to_owned(), serde_json::Value::Object(upstream));
    map.insert(
        "command".to_owned(),
        serde_json::Value::String(settings.exe.clone()),
    );
    map.insert(
        "args".to_owned(),
        serde_json::Value::Array(args.into_iter().map(serde_json::Value::String).collect()),
    );
    Some(serde_json::Value::Object(map))
}
