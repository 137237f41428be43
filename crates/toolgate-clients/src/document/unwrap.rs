//! Unwrapping one entry: the splices that give back the original command and arguments.

use crate::entries::{
    DocError, Outcome, Splice, UPSTREAM_KEY, json_array, json_string, looks_wrapped, prop_name,
    separator_before, slice, string_array, string_value, upstream_of, wrap_options_with_values,
};
use jsonc_parser::ast::{Array, Object, Value};
use jsonc_parser::common::Ranged;

/// The removal of `entry.properties[index]` with its separator.
pub(crate) fn remove_prop(entry: &Object<'_>, index: usize) -> Option<Splice> {
    let prop = entry.properties.get(index)?;
    if let Some(next) = entry.properties.get(index + 1) {
        return Some(Splice {
            start: prop.range.start,
            end: next.range.start,
            with: String::new(),
        });
    }
    let previous = index.checked_sub(1).and_then(|i| entry.properties.get(i));
    Some(Splice {
        start: previous.map_or(prop.range.start, |p| p.range.end),
        end: prop.range.end,
        with: String::new(),
    })
}

pub(super) fn unwrap_entry(
    text: &str,
    entry: &Object<'_>,
    splices: &mut Vec<Splice>,
    whole: &mut Option<serde_json::Value>,
) -> Result<Outcome, DocError> {
    // A `command` list (OpenCode) was wrapped as a whole: its record is put back.
    if let Some(Value::Array(list)) = entry.get("command").map(|p| &p.value) {
        let strings: Vec<Option<&str>> = list.elements.iter().map(string_value).collect();
        if strings.get(1).copied().flatten() == Some("wrap") {
            if upstream_of(entry).is_none() {
                return Ok(Outcome::Skipped(format!(
                    "runs `toolgate wrap` and has no `{UPSTREAM_KEY}` object: restore this entry by hand"
                )));
            }
            return crate::rewrite::unwrap_remote(text, entry, splices, whole);
        }
        return Ok(Outcome::NotWrapped);
    }
    if let Some(args) = entry.get_array("args") {
        let strings: Vec<Option<&str>> = args.elements.iter().map(string_value).collect();
        let ours = looks_wrapped(entry) || upstream_of(entry).is_some();
        if ours && crate::remote::runs_wrap_url(&strings) {
            return crate::rewrite::unwrap_remote(text, entry, splices, whole);
        }
    }
    let Some((upstream_index, upstream)) = upstream_of(entry) else {
        if entry.get(UPSTREAM_KEY).is_some() {
            return Ok(Outcome::Skipped(format!(
                "`{UPSTREAM_KEY}` is not an object: restore this entry by hand"
            )));
        }
        if looks_wrapped(entry) {
            return unwrap_from_args(entry, splices);
        }
        return Ok(Outcome::NotWrapped);
    };
    let Some(upstream_command) = upstream
        .get("command")
        .filter(|p| string_value(&p.value).is_some())
    else {
        return Ok(Outcome::Skipped(format!(
            "`{UPSTREAM_KEY}` has no `command` string: restore this entry by hand"
        )));
    };
    let upstream_args = match upstream.get("args").map(|p| &p.value) {
        None => None,
        Some(Value::Array(a)) => match string_array(a) {
            Some(args) => Some(args),
            None => {
                return Ok(Outcome::Skipped(format!(
                    "`{UPSTREAM_KEY}.args` is not an array of strings: restore this entry by hand"
                )));
            }
        },
        Some(_) => {
            return Ok(Outcome::Skipped(format!(
                "`{UPSTREAM_KEY}.args` is not an array: restore this entry by hand"
            )));
        }
    };
    let Some(command_prop) = entry.get("command") else {
        return Ok(Outcome::Skipped(
            "no `command`: restore this entry by hand".to_owned(),
        ));
    };

    // 1. `command` gets its original literal back, byte for byte.
    let raw_range = upstream_command.value.range();
    let command_range = command_prop.value.range();
    splices.push(Splice {
        start: command_range.start,
        end: command_range.end,
        with: slice(text, raw_range.start, raw_range.end)?.to_owned(),
    });

    // 2. `args` loses the wrap prefix (or goes away when there was none).
    let args_index = entry.properties.iter().position(|p| prop_name(p) == "args");
    let args_array = entry.get_array("args");
    let prefix_end = args_array.and_then(wrap_prefix_len);
    match (args_index, args_array, prefix_end, &upstream_args) {
        (Some(index), Some(_), Some(_), None) => {
            splices.push(remove_prop(entry, index).ok_or(DocError::Verification)?);
        }
        (Some(_), Some(array), Some(len), Some(_)) => {
            let first = array.elements.first().ok_or(DocError::Verification)?;
            let end = match array.elements.get(len) {
                Some(kept) => kept.range().start,
                None => {
                    array
                        .elements
                        .get(len - 1)
                        .ok_or(DocError::Verification)?
                        .range()
                        .end
                }
            };
            splices.push(Splice {
                start: first.range().start,
                end,
                with: String::new(),
            });
        }
        // The arguments were edited out of shape since `init`: put the recorded
        // ones back as a whole.
        (Some(index), _, _, None) => {
            splices.push(remove_prop(entry, index).ok_or(DocError::Verification)?);
        }
        (Some(index), _, _, Some(args)) => {
            let prop = entry.properties.get(index).ok_or(DocError::Verification)?;
            let range = prop.value.range();
            splices.push(Splice {
                start: range.start,
                end: range.end,
                with: json_array(args),
            });
        }
        (None, _, _, None) => {}
        (None, _, _, Some(args)) => {
            let start = command_prop.range.start;
            let sep = separator_before(text, start);
            splices.push(Splice {
                start,
                end: start,
                with: format!("\"args\": {},{sep}", json_array(args)),
            });
        }
    }

    // 3. The upstream record goes away.
    splices.push(remove_prop(entry, upstream_index).ok_or(DocError::Verification)?);
    Ok(Outcome::Restored)
}

/// Restores an entry that runs `toolgate wrap … -- CMD ARGS…` but has no upstream
/// record (a client may drop unknown keys when it rewrites its config, or the entry
/// was wrapped by hand): `command` becomes `CMD` and `args` become `ARGS…`.
fn unwrap_from_args(entry: &Object<'_>, splices: &mut Vec<Splice>) -> Result<Outcome, DocError> {
    let (Some(command_prop), Some(array)) = (entry.get("command"), entry.get_array("args")) else {
        return Ok(Outcome::NotWrapped);
    };
    let Some(len) = wrap_prefix_len(array) else {
        return Ok(Outcome::Skipped(format!(
            "runs toolgate without `-- COMMAND` and has no `{UPSTREAM_KEY}`: restore this entry by hand"
        )));
    };
    let command = array
        .elements
        .get(len - 1)
        .and_then(string_value)
        .ok_or(DocError::Verification)?;
    let command_range = command_prop.value.range();
    splices.push(Splice {
        start: command_range.start,
        end: command_range.end,
        with: json_string(command),
    });
    let first = array.elements.first().ok_or(DocError::Verification)?;
    let end = match array.elements.get(len) {
        Some(kept) => kept.range().start,
        None => {
            array
                .elements
                .get(len - 1)
                .ok_or(DocError::Verification)?
                .range()
                .end
        }
    };
    splices.push(Splice {
        start: first.range().start,
        end,
        with: String::new(),
    });
    Ok(Outcome::Restored)
}

/// The number of leading `args` elements that are toolgate's own
/// (`wrap … -- <command>`), when the array has that shape.
fn wrap_prefix_len(array: &Array<'_>) -> Option<usize> {
    let strings: Vec<Option<&str>> = array.elements.iter().map(string_value).collect();
    if strings.first().copied().flatten() != Some("wrap") {
        return None;
    }
    // Walk the options so that an option's value (a server named `--`, say) is
    // never taken for the end of the options.
    let with_value = wrap_options_with_values();
    let mut i = 1;
    loop {
        match strings.get(i).copied()?? {
            "--" => break,
            flag if with_value
                .iter()
                .any(|o| flag.strip_prefix("--") == Some(o)) =>
            {
                i += 2
            }
            _ => i += 1,
        }
    }
    // The original command follows the `--`.
    strings.get(i + 1)?.as_ref()?;
    Some(i + 2)
}

/// The value `unwrap_entry` is meant to produce.
pub(super) fn restored_value(entry: &Object<'_>) -> Option<serde_json::Value> {
    let current: serde_json::Value = Value::Object(entry.clone()).into();
    let mut map = current.as_object()?.clone();
    let Some(upstream) = map.shift_remove(UPSTREAM_KEY) else {
        // Restored from the wrap arguments alone.
        let array = entry.get_array("args")?;
        let len = wrap_prefix_len(array)?;
        let args: Vec<serde_json::Value> = array
            .elements
            .iter()
            .map(|e| string_value(e).map(|s| serde_json::Value::String(s.to_owned())))
            .collect::<Option<_>>()?;
        let mut args = args.into_iter().skip(len - 1);
        map.insert("command".to_owned(), args.next()?);
        map.insert("args".to_owned(), serde_json::Value::Array(args.collect()));
        return Some(serde_json::Value::Object(map));
    };
    let upstream = upstream.as_object()?;
    map.insert("command".to_owned(), upstream.get("command")?.clone());
    let kept_args = entry
        .get_array("args")
        .and_then(|a| Some((wrap_prefix_len(a)?, a)))
        .map(|(len, a)| {
            a.elements
                .iter()
                .skip(len)
                .filter_map(|e| string_value(e).map(|s| serde_json::Value::String(s.to_owned())))
                .collect::<Vec<_>>()
        });
    match (upstream.get("args"), kept_args) {
        (None, _) => {
            map.shift_remove("args");
        }
        (Some(_), Some(kept)) => {
            map.insert("args".to_owned(), serde_json::Value::Array(kept));
        }
        (Some(args), None) => {
            map.insert("args".to_owned(), args.clone());
        }
    }
    Some(serde_json::Value::Object(map))
}
