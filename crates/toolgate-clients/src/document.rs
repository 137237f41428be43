//! Wrapping and unwrapping server entries inside one client configuration file.
//!
//! Edits are byte-precise splices on the original text, located with the
//! `jsonc-parser` syntax tree (every node carries its byte range). Nothing outside
//! the touched entries is re-serialised, so comments, trailing commas, key order,
//! indentation and line endings survive, and `unwrap` after `init` gives back the
//! original bytes. The splices are deliberately simple and reversible:
//!
//! - `command`'s string literal is replaced by the toolgate binary;
//! - the wrap prefix (`wrap --server NAME [--policy ABS] --workspace DIR -- <command>`) is inserted
//!   in front of the first original argument, so the original arguments keep their
//!   exact text (comments and line breaks included);
//! - `x-toolgate-upstream` is inserted as the entry's first property, holding the
//!   original `command` literal verbatim and the original `args`.
//!
//! After every edit the result is parsed again and compared, as a value, with the
//! document the edit was meant to produce: a splice that went wrong is an error,
//! never a silently broken config.

mod unwrap;
mod wrap;

use unwrap::{restored_value, unwrap_entry};
pub(crate) use wrap::wrap_prefix;
use wrap::{wrap_entry, wrapped_value};

pub use crate::entries::{
    DocError, MapSpec, Outcome, UPSTREAM_KEY, WRAP_OPTIONS_WITH_VALUES, WrapSettings, entries,
    json_string,
};
use crate::entries::{apply, parse_options, prop_name, string_array, string_value, with_maps};
use jsonc_parser::ast::{Object, Value};
use jsonc_parser::{CollectOptions, parse_to_ast};

/// One entry's report line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryReport {
    /// Human label of the server map (`mcpServers`, `projects["/x"].mcpServers`).
    pub map: String,
    /// The server's name (its key).
    pub name: String,
    /// What happened.
    pub outcome: Outcome,
    /// The workspace written into a wrapped entry.
    pub workspace: Option<String>,
}

/// The result of editing one document.
#[derive(Debug, Clone)]
pub struct Edited {
    /// The new text (equal to the input when nothing changed).
    pub text: String,
    /// One line per server entry seen.
    pub entries: Vec<EntryReport>,
}

/// Wraps the selected stdio servers of `text`.
pub fn wrap(
    text: &str,
    spec: &MapSpec,
    select: Option<&[String]>,
    settings: &WrapSettings,
) -> Result<Edited, DocError> {
    if *spec == MapSpec::CodexToml {
        return crate::codex_toml::wrap(text, select, settings);
    }
    edit(text, spec, select, Mode::Wrap(settings))
}

/// Restores the selected wrapped servers of `text`.
pub fn unwrap(text: &str, spec: &MapSpec, select: Option<&[String]>) -> Result<Edited, DocError> {
    if *spec == MapSpec::CodexToml {
        return crate::codex_toml::unwrap(text, select);
    }
    edit(text, spec, select, Mode::Unwrap)
}

#[derive(Clone, Copy)]
enum Mode<'s> {
    Wrap(&'s WrapSettings),
    Unwrap,
}

/// Why an entry cannot be wrapped, when it is not a local stdio server (`type: stdio`, or
/// Copilot CLI's `type: local`, or no type).
fn not_stdio_reason(entry: &Object<'_>) -> Option<String> {
    if let Some(kind) = entry.get("type").and_then(|p| string_value(&p.value))
        && kind != "stdio"
        && kind != "local"
    {
        return Some(format!(
            "remote server (`type: {kind}`): only local stdio servers can be wrapped"
        ));
    }
    for key in ["url", "serverUrl", "httpUrl"] {
        if entry.get(key).is_some() {
            return Some(format!(
                "remote server (`{key}`): only local stdio servers can be wrapped"
            ));
        }
    }
    match entry.get("command").map(|p| &p.value) {
        None => Some("no `command`: not a stdio server".to_owned()),
        Some(Value::StringLit(_)) => match entry.get("args").map(|p| &p.value) {
            None => None,
            Some(Value::Array(array)) if string_array(array).is_some() => None,
            Some(_) => Some("`args` is not an array of strings".to_owned()),
        },
        // OpenCode's command and arguments as one list.
        Some(Value::Array(list)) if string_array(list).is_some_and(|l| !l.is_empty()) => None,
        Some(_) => Some("`command` is not a string".to_owned()),
    }
}

fn edit(
    text: &str,
    spec: &MapSpec,
    select: Option<&[String]>,
    mode: Mode<'_>,
) -> Result<Edited, DocError> {
    let (body, bom) = match text.strip_prefix('\u{feff}') {
        Some(rest) => (rest, "\u{feff}"),
        None => (text, ""),
    };
    let (splices, entries, expected) = with_maps(body, spec, |root, maps| {
        let mut expected: serde_json::Value = Value::Object(root.clone()).into();
        let mut splices = Vec::new();
        let mut entries = Vec::new();
        for map in maps {
            let map_settings = match (mode, map.path.as_slice()) {
                (Mode::Wrap(settings), [projects, project, _]) if projects == "projects" => {
                    Some(WrapSettings {
                        workspace: Some(project.clone()),
                        ..settings.clone()
                    })
                }
                (Mode::Wrap(settings), _) => Some(settings.clone()),
                (Mode::Unwrap, _) => None,
            };
            for prop in &map.object.properties {
                let name = prop_name(prop);
                if select.is_some_and(|s| !s.contains(&name)) {
                    continue;
                }
                let mut whole = None;
                let outcome = match &prop.value {
                    Value::Object(entry) => match &map_settings {
                        Some(settings) => {
                            wrap_entry(body, &name, entry, settings, &mut splices, &mut whole)?
                        }
                        None => unwrap_entry(body, entry, &mut splices, &mut whole)?,
                    },
                    _ => Outcome::Skipped("not an object".to_owned()),
                };
                let workspace = match (&outcome, &map_settings) {
                    (Outcome::Wrapped, Some(settings)) => match &settings.workspace {
                        Some(w) => Some(w.clone()),
                        None => {
                            return Err(DocError::NoWorkspace {
                                map: map.label.clone(),
                                server: name,
                            });
                        }
                    },
                    _ => None,
                };
                if matches!(outcome, Outcome::Wrapped | Outcome::Restored)
                    && let Value::Object(entry) = &prop.value
                {
                    let value = match (whole, &map_settings) {
                        (Some(value), _) => Some(value),
                        (None, Some(settings)) => wrapped_value(&name, entry, settings),
                        (None, None) => restored_value(entry),
                    }
                    .ok_or(DocError::Verification)?;
                    set_at(&mut expected, &map.path, &name, value)?;
                }
                entries.push(EntryReport {
                    map: map.label.clone(),
                    name,
                    outcome,
                    workspace,
                });
            }
        }
        Ok((splices, entries, expected))
    })?;
    if splices.is_empty() {
        return Ok(Edited {
            text: text.to_owned(),
            entries,
        });
    }
    let new_body = apply(body, splices)?;
    let reparsed = parse_to_ast(&new_body, &CollectOptions::default(), &parse_options())
        .map_err(|_| DocError::Verification)?;
    let actual: Option<serde_json::Value> = reparsed.value.map(Into::into);
    if actual.as_ref() != Some(&expected) {
        return Err(DocError::Verification);
    }
    Ok(Edited {
        text: format!("{bom}{new_body}"),
        entries,
    })
}

fn set_at(
    doc: &mut serde_json::Value,
    path: &[String],
    name: &str,
    value: serde_json::Value,
) -> Result<(), DocError> {
    let mut current = doc;
    for key in path {
        current = current.get_mut(key).ok_or(DocError::Verification)?;
    }
    let slot = current.get_mut(name).ok_or(DocError::Verification)?;
    *slot = value;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entries::wrap_options_with_values;

    fn settings() -> WrapSettings {
        WrapSettings {
            exe: "/opt/toolgate".to_owned(),
            policy: None,
            workspace: Some("/w".to_owned()),
            dialect: crate::entries::Dialect::Other,
            broker_dir: None,
        }
    }

    #[test]
    fn every_wrapped_entry_names_its_workspace() {
        let input = r#"{"mcpServers": {"a": {"command": "srv"}}, "projects": {"/p": {"mcpServers": {"b": {"command": "srv"}}}}}"#;
        let none = WrapSettings {
            workspace: None,
            ..settings()
        };
        // A project's own map (Claude Code's local scope) is that project's.
        let spec = MapSpec::Paths(vec![vec![
            "projects".into(),
            "/p".into(),
            "mcpServers".into(),
        ]]);
        let out = wrap(input, &spec, None, &none).unwrap();
        assert!(
            out.text
                .contains(r#""args": ["wrap", "--server", "b", "--workspace", "/p", "--", "srv"]"#),
            "{}",
            out.text
        );
        assert_eq!(out.entries[0].workspace.as_deref(), Some("/p"));
        assert_eq!(unwrap(&out.text, &spec, None).unwrap().text, input);
        // Any other map needs one.
        match wrap(input, &MapSpec::Auto, None, &none) {
            Err(e @ DocError::NoWorkspace { .. }) => assert_eq!(
                e.to_string(),
                "server `a` in `mcpServers` belongs to no project, so toolgate cannot tell its workspace\nhelp: name the directory it may work in with `--workspace DIR` (the policy's `${workspace}`), or wrap only project configurations"
            ),
            other => panic!("{other:?}"),
        }
        let out = wrap(input, &MapSpec::Auto, None, &settings()).unwrap();
        let workspaces: Vec<Option<&str>> =
            out.entries.iter().map(|e| e.workspace.as_deref()).collect();
        assert_eq!(workspaces, vec![Some("/w"), Some("/p")]);
    }

    fn auto_roundtrip(input: &str) -> String {
        let wrapped = wrap(input, &MapSpec::Auto, None, &settings()).unwrap();
        assert_ne!(wrapped.text, input);
        let restored = unwrap(&wrapped.text, &MapSpec::Auto, None).unwrap();
        assert_eq!(restored.text, input);
        wrapped.text
    }

    #[test]
    fn single_line_entry() {
        let out =
            auto_roundtrip(r#"{"mcpServers": {"a": {"command": "npx", "args": ["-y", "x"]}}}"#);
        assert_eq!(
            out,
            r#"{"mcpServers": {"a": {"x-toolgate-upstream": {"command": "npx", "args": ["-y", "x"]}, "command": "/opt/toolgate", "args": ["wrap", "--server", "a", "--workspace", "/w", "--", "npx", "-y", "x"]}}}"#
        );
    }

    #[test]
    fn missing_and_empty_args() {
        auto_roundtrip(
            "{\n  \"mcpServers\": {\n    \"a\": {\n      \"command\": \"srv\"\n    }\n  }\n}\n",
        );
        auto_roundtrip("{\"mcpServers\": {\"a\": {\"command\": \"srv\", \"args\": [ ]}}}");
        auto_roundtrip("{\"mcpServers\": {\"a\": {\"env\": {}, \"command\": \"srv\",}}}");
    }

    #[test]
    fn crlf_and_comments() {
        let input = "{\r\n  // c\r\n  \"servers\": {\r\n    \"a\": { // x\r\n      \"type\": \"stdio\",\r\n      \"command\": \"n\\u0070x\", /* y */\r\n      \"args\": [\r\n        \"-y\", // z\r\n        \"p\",\r\n      ],\r\n    },\r\n  },\r\n}\r\n";
        let out = auto_roundtrip(input);
        assert!(out.contains("\"command\": \"n\\u0070x\", \"args\""));
        assert!(!out.contains("\r\n\n"));
    }

    #[test]
    fn remote_entries_are_wrapped_and_wrapped_ones_left_alone() {
        let input = r#"{"mcpServers": {"r": {"type": "http", "url": "https://x"}, "w": {"command": "/usr/bin/toolgate", "args": ["wrap", "--", "x"]}}}"#;
        let out = wrap(input, &MapSpec::Auto, None, &settings()).unwrap();
        assert_eq!(
            out.text,
            r#"{"mcpServers": {"r": {"x-toolgate-upstream": {"type": "http", "url": "https://x"}, "command": "/opt/toolgate", "args": ["wrap", "--server", "r", "--workspace", "/w", "--url", "https://x", "--transport", "streamable-http"]}, "w": {"command": "/usr/bin/toolgate", "args": ["wrap", "--", "x"]}}}"#
        );
        assert_eq!(out.entries[0].outcome, Outcome::Wrapped);
        assert_eq!(out.entries[1].outcome, Outcome::AlreadyWrapped);
        let again = wrap(&out.text, &MapSpec::Auto, None, &settings()).unwrap();
        assert_eq!(again.entries[0].outcome, Outcome::AlreadyWrapped);
        let back = unwrap(&out.text, &MapSpec::Auto, None).unwrap();
        assert_eq!(back.entries[0].outcome, Outcome::Restored);
        // `w` has no upstream record: restored from its arguments.
        assert!(
            back.text
                .starts_with(r#"{"mcpServers": {"r": {"type": "http", "url": "https://x"}, "w""#)
        );
    }

    #[test]
    fn a_reformatted_remote_entry_unwraps_to_the_same_value() {
        // A client rewrote the wrapped file with its own formatting (JSON.stringify).
        let input = r#"{"mcpServers": {"r": {"type": "sse", "url": "https://x/sse", "headers": {"Authorization": "Bearer t0k3n"}, "disabled": true}}}"#;
        let wrapped = wrap(input, &MapSpec::Auto, None, &settings()).unwrap().text;
        let value: serde_json::Value = serde_json::from_str(&wrapped).unwrap();
        assert_eq!(value["mcpServers"]["r"]["disabled"], true);
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let restored = unwrap(&pretty, &MapSpec::Auto, None).unwrap().text;
        let restored: serde_json::Value = serde_json::from_str(&restored).unwrap();
        let original: serde_json::Value = serde_json::from_str(input).unwrap();
        assert_eq!(restored, original);
    }

    #[test]
    fn a_remote_entry_without_its_record_is_left_to_the_user() {
        let input = r#"{"mcpServers": {"r": {"command": "/opt/toolgate", "args": ["wrap", "--server", "r", "--url", "https://x"]}}}"#;
        let out = unwrap(input, &MapSpec::Auto, None).unwrap();
        assert_eq!(out.text, input);
        assert!(
            matches!(&out.entries[0].outcome, Outcome::Skipped(why) if why.contains("restore this entry by hand")),
            "{:?}",
            out.entries
        );
    }

    #[test]
    fn multi_line_remote_entries_round_trip() {
        for input in [
            "{\n  \"mcpServers\": {\n    \"r\": {\n      \"type\": \"sse\", // legacy\n      \"url\": \"https://x/sse\",\n\n      \"headers\": {\n        \"Authorization\": \"Bearer ${T}\"\n      },\n      \"disabled\": false\n    }\n  }\n}\n",
            "{\r\n\t\"servers\": {\r\n\t\t\"r\": {\r\n\t\t\t\"url\": \"https://x\",\r\n\t\t\t/* c */ \"headers\": {\"X-Api-Key\": \"k\"},\r\n\t\t},\r\n\t},\r\n}",
            "{\"mcpServers\": {\"r\": { \"serverUrl\": \"https://x\",\n  \"headers\": {}}}}",
        ] {
            let wrapped = auto_roundtrip(input);
            assert!(!wrapped.contains("\"Authorization: Bearer"), "{wrapped}");
            assert!(!wrapped.contains("X-Api-Key: k"), "{wrapped}");
        }
    }

    #[test]
    fn unwrap_without_upstream_uses_the_wrap_arguments() {
        // As if a client dropped the unknown key when it rewrote the file.
        let input = "{\"mcpServers\": {\"a\": {\n  \"command\": \"/usr/bin/toolgate\",\n  \"args\": [\"wrap\", \"--server\", \"a\", \"--policy\", \"/p.yaml\", \"--\", \"npx\", \"-y\", \"x\"],\n  \"env\": {}\n}}}";
        let out = unwrap(input, &MapSpec::Auto, None).unwrap();
        assert_eq!(out.entries[0].outcome, Outcome::Restored);
        assert_eq!(
            out.text,
            "{\"mcpServers\": {\"a\": {\n  \"command\": \"npx\",\n  \"args\": [\"-y\", \"x\"],\n  \"env\": {}\n}}}"
        );
        let bare =
            r#"{"mcpServers": {"a": {"command": "toolgate", "args": ["wrap", "--", "srv"]}}}"#;
        assert_eq!(
            unwrap(bare, &MapSpec::Auto, None).unwrap().text,
            r#"{"mcpServers": {"a": {"command": "srv", "args": []}}}"#
        );
        let odd = r#"{"mcpServers": {"a": {"command": "toolgate", "args": ["wrap", "srv"]}}}"#;
        let out = unwrap(odd, &MapSpec::Auto, None).unwrap();
        assert_eq!(out.text, odd);
        assert!(matches!(out.entries[0].outcome, Outcome::Skipped(_)));
    }

    #[test]
    fn reformatted_wrapped_entry_unwraps() {
        // A client rewrote the wrapped file with its own formatting.
        let input = "{\"mcpServers\": {\"a\": {\"command\": \"npx\", \"args\": [\"-y\", \"x\"], \"env\": {\"K\": \"v\"}}}}";
        let wrapped = wrap(input, &MapSpec::Auto, None, &settings()).unwrap().text;
        let value: serde_json::Value = serde_json::from_str(&wrapped).unwrap();
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let restored = unwrap(&pretty, &MapSpec::Auto, None).unwrap().text;
        let restored: serde_json::Value = serde_json::from_str(&restored).unwrap();
        let original: serde_json::Value = serde_json::from_str(input).unwrap();
        assert_eq!(restored, original);
    }

    #[test]
    fn option_values_are_not_taken_for_the_separator() {
        let input = r#"{"mcpServers": {"--": {"command": "srv", "args": ["--", "a"]}}}"#;
        let wrapped = wrap(input, &MapSpec::Auto, None, &settings()).unwrap().text;
        assert!(wrapped.contains(
            r#"["wrap", "--server", "--", "--workspace", "/w", "--", "srv", "--", "a"]"#
        ));
        assert_eq!(unwrap(&wrapped, &MapSpec::Auto, None).unwrap().text, input);
    }

    /// Every option of `wrap` that takes a value is stepped over with its value, whatever
    /// the value is (`--session --` and `--poll-us --` were once read as the separator).
    #[test]
    fn every_wrap_option_with_a_value_is_stepped_over() {
        let options = wrap_options_with_values();
        for expected in ["server", "session", "poll-us", "listing-timeout", "policy"] {
            assert!(
                options.iter().any(|o| o == expected),
                "`--{expected}` missing"
            );
        }
        for option in &options {
            let input = format!(
                r#"{{"mcpServers": {{"a": {{"x-toolgate-upstream": {{"command": "srv", "args": ["a"]}}, "command": "/opt/toolgate", "args": ["wrap", "--{option}", "--", "--", "srv", "a"]}}}}}}"#
            );
            let restored = unwrap(&input, &MapSpec::Auto, None).unwrap().text;
            assert_eq!(
                restored, r#"{"mcpServers": {"a": {"command": "srv", "args": ["a"]}}}"#,
                "--{option}"
            );
        }
    }

    /// Writes `value` as JSONC with pseudo-random spacing, comments and trailing
    /// commas between every pair of tokens.
    fn scribble(value: &serde_json::Value, seed: &mut u64, out: &mut String) {
        fn gap(seed: &mut u64, out: &mut String) {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let pick = (*seed >> 33) % 8;
            out.push_str(
                [
                    "",
                    " ",
                    "\n    ",
                    "\n\t",
                    " /* c */ ",
                    " // c\n  ",
                    "\r\n  ",
                    "",
                ][pick as usize],
            );
        }
        fn trailing(seed: &mut u64, out: &mut String) {
            if (*seed >> 40).is_multiple_of(3) {
                out.push(',');
                gap(seed, out);
            }
        }
        match value {
            serde_json::Value::Object(map) => {
                out.push('{');
                gap(seed, out);
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                        gap(seed, out);
                    }
                    out.push_str(&json_string(k));
                    gap(seed, out);
                    out.push(':');
                    gap(seed, out);
                    scribble(v, seed, out);
                    gap(seed, out);
                }
                if !map.is_empty() {
                    trailing(seed, out);
                }
                out.push('}');
            }
            serde_json::Value::Array(items) => {
                out.push('[');
                gap(seed, out);
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                        gap(seed, out);
                    }
                    scribble(v, seed, out);
                    gap(seed, out);
                }
                if !items.is_empty() {
                    trailing(seed, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }

    #[test]
    fn any_layout_round_trips() {
        let value = serde_json::json!({
            "inputs": [{"id": "k", "type": "promptString"}],
            "mcpServers": {
                "a": {"command": "npx", "args": ["-y", "pkg", "--flag"], "env": {"K": "v"}},
                "b": {"env": {}, "command": "srv"},
                "c": {"type": "stdio", "command": "x", "args": [], "cwd": "/w"},
                "r": {"type": "http", "url": "https://x"},
                "h": {"url": "https://y/mcp", "headers": {"Authorization": "Bearer s3cr3t", "X-A": "b"}, "disabled": false},
            },
            "servers": {"d": {"args": ["1"], "command": "y"}},
        });
        for mut seed in 0..400u64 {
            let mut text = String::new();
            scribble(&value, &mut seed, &mut text);
            let wrapped = wrap(&text, &MapSpec::Auto, None, &settings())
                .unwrap_or_else(|e| panic!("{e}:\n{text}"));
            let wrapped_count = wrapped
                .entries
                .iter()
                .filter(|e| e.outcome == Outcome::Wrapped)
                .count();
            assert_eq!(wrapped_count, 6, "{text}");
            assert!(
                !wrapped.text.contains("\"Authorization: Bearer"),
                "{}",
                wrapped.text
            );
            let again = wrap(&wrapped.text, &MapSpec::Auto, None, &settings()).unwrap();
            assert_eq!(again.text, wrapped.text);
            let restored = unwrap(&wrapped.text, &MapSpec::Auto, None)
                .unwrap_or_else(|e| panic!("{e}:\n{}", wrapped.text));
            assert_eq!(restored.text, text);
        }
    }

    #[test]
    fn broken_files_are_errors() {
        for text in ["", "[]", "{\"mcpServers\": {", "{'a': 1}"] {
            assert!(
                wrap(text, &MapSpec::Auto, None, &settings()).is_err(),
                "{text}"
            );
        }
    }

    #[test]
    fn edited_args_are_kept_on_unwrap() {
        let input = r#"{"mcpServers": {"a": {"command": "npx", "args": ["-y", "x"]}}}"#;
        let wrapped = wrap(input, &MapSpec::Auto, None, &settings()).unwrap().text;
        let edited = wrapped.replace(r#""npx", "-y", "x"]"#, r#""npx", "-y", "x", "--verbose"]"#);
        let restored = unwrap(&edited, &MapSpec::Auto, None).unwrap().text;
        assert_eq!(
            restored,
            r#"{"mcpServers": {"a": {"command": "npx", "args": ["-y", "x", "--verbose"]}}}"#
        );
    }
}
