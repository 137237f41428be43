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

pub use unwrap::WRAP_OPTIONS_WITH_VALUES;
use unwrap::{restored_value, unwrap_entry};
pub(crate) use unwrap::{upstream_of, wrap_options_with_values};
use wrap::{wrap_entry, wrapped_value};

use jsonc_parser::ast::{Array, Object, ObjectProp, ObjectPropName, Value};
use jsonc_parser::{CollectOptions, ParseOptions, parse_to_ast};

/// The key under which the original entry is kept inside a wrapped entry.
pub const UPSTREAM_KEY: &str = "x-toolgate-upstream";

/// Errors while editing one document.
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    /// The file is not JSON/JSONC.
    #[error("cannot parse the file: {0}")]
    Parse(String),
    /// The top level is not an object.
    #[error("the top level is not a JSON object")]
    NotAnObject,
    /// A splice produced a document different from the one intended (a bug).
    #[error(
        "internal error: the edited file does not have the intended content; nothing was written\nhelp: please report this with the (redacted) config file"
    )]
    Verification,
    /// A server of a map that belongs to no project would be wrapped, and no workspace was
    /// named: its `${workspace}` would be wherever the client starts it.
    #[error(
        "server `{server}` in `{map}` belongs to no project, so toolgate cannot tell its workspace\nhelp: name the directory it may work in with `--workspace DIR` (the policy's `${{workspace}}`), or wrap only project configurations"
    )]
    NoWorkspace { map: String, server: String },
}

/// Which server maps of a document to look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapSpec {
    /// Exactly these key paths (for example `["mcpServers"]`, or
    /// `["projects", "/home/me/app", "mcpServers"]`); missing ones are ignored.
    Paths(Vec<Vec<String>>),
    /// Every known place: `mcpServers`, `servers` and `projects.*.mcpServers`.
    Auto,
}

/// What `init` does to the entries it wraps.
#[derive(Debug, Clone)]
pub struct WrapSettings {
    /// Absolute path of the toolgate binary.
    pub exe: String,
    /// Absolute path of the policy file, if any.
    pub policy: Option<String>,
    /// The workspace (`wrap --workspace`) of the entries of a map that belongs to no
    /// project: the project directory for a project configuration, `init --workspace` for a
    /// user one. A map `projects.<dir>.mcpServers` (Claude Code's local scope) uses `<dir>`.
    /// `None`: wrapping such an entry is [`DocError::NoWorkspace`].
    pub workspace: Option<String>,
    /// How the file's client expands `${…}` in `args` (remote entries' header references).
    pub dialect: super::remote::Dialect,
}

/// What happened (or would happen) to one server entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `init` wrapped it.
    Wrapped,
    /// `unwrap` restored it.
    Restored,
    /// `init`: it was wrapped already and is left alone.
    AlreadyWrapped,
    /// `unwrap`: it is not wrapped by toolgate.
    NotWrapped,
    /// Left alone, with the reason (remote server, no command, …).
    Skipped(String),
}

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
    edit(text, spec, select, Mode::Wrap(settings))
}

/// Every server entry of `text`: (map label, name, value).
pub fn entries(
    text: &str,
    spec: &MapSpec,
) -> Result<Vec<(String, String, serde_json::Value)>, DocError> {
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    with_maps(body, spec, |_, maps| {
        Ok(maps
            .iter()
            .flat_map(|map| {
                map.object.properties.iter().map(|prop| {
                    (
                        map.label.clone(),
                        prop_name(prop),
                        serde_json::Value::from(prop.value.clone()),
                    )
                })
            })
            .collect())
    })
}

/// Restores the selected wrapped servers of `text`.
pub fn unwrap(text: &str, spec: &MapSpec, select: Option<&[String]>) -> Result<Edited, DocError> {
    edit(text, spec, select, Mode::Unwrap)
}

#[derive(Clone, Copy)]
enum Mode<'s> {
    Wrap(&'s WrapSettings),
    Unwrap,
}

struct ServerMap<'b, 'a> {
    label: String,
    path: Vec<String>,
    object: &'b Object<'a>,
}

/// A replacement of `text[start..end]`.
#[derive(Debug)]
pub(crate) struct Splice {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) with: String,
}

pub(crate) fn parse_options() -> ParseOptions {
    ParseOptions {
        // Strings and numbers in these files are plain JSON; refusing the exotic
        // JSON5 forms keeps the value we verify against the one clients read.
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_non_finite_numbers: false,
        allow_missing_commas: false,
        ..ParseOptions::default()
    }
}

fn with_maps<T>(
    text: &str,
    spec: &MapSpec,
    f: impl FnOnce(&Object<'_>, &[ServerMap<'_, '_>]) -> Result<T, DocError>,
) -> Result<T, DocError> {
    let parsed = parse_to_ast(text, &CollectOptions::default(), &parse_options())
        .map_err(|e| DocError::Parse(e.to_string()))?;
    let Some(Value::Object(root)) = parsed.value.as_ref() else {
        return Err(DocError::NotAnObject);
    };
    let maps = find_maps(root, spec);
    f(root, &maps)
}

fn find_maps<'b, 'a>(root: &'b Object<'a>, spec: &MapSpec) -> Vec<ServerMap<'b, 'a>> {
    let paths: Vec<Vec<String>> = match spec {
        MapSpec::Paths(paths) => paths.clone(),
        MapSpec::Auto => {
            let mut paths = vec![vec!["mcpServers".to_owned()], vec!["servers".to_owned()]];
            if let Some(projects) = root.get_object("projects") {
                for project in &projects.properties {
                    paths.push(vec![
                        "projects".to_owned(),
                        prop_name(project),
                        "mcpServers".to_owned(),
                    ]);
                }
            }
            paths
        }
    };
    paths
        .into_iter()
        .filter_map(|path| {
            let object = object_at(root, &path)?;
            Some(ServerMap {
                label: map_label(&path),
                path,
                object,
            })
        })
        .collect()
}

fn object_at<'b, 'a>(root: &'b Object<'a>, path: &[String]) -> Option<&'b Object<'a>> {
    let mut current = root;
    for key in path {
        current = current.get_object(key)?;
    }
    Some(current)
}

fn map_label(path: &[String]) -> String {
    match path {
        [projects, project, servers] if projects == "projects" => {
            format!("projects[{}].{servers}", json_string(project))
        }
        _ => path.join("."),
    }
}

pub(crate) fn prop_name(prop: &ObjectProp<'_>) -> String {
    match &prop.name {
        ObjectPropName::String(lit) => lit.value.to_string(),
        ObjectPropName::Word(lit) => lit.value.to_owned(),
    }
}

/// A JSON string literal for `s`.
pub fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

pub(crate) fn string_value<'b>(value: &'b Value<'_>) -> Option<&'b str> {
    match value {
        Value::StringLit(lit) => Some(lit.value.as_ref()),
        _ => None,
    }
}

/// The `args` array when every element is a string.
fn string_array(array: &Array<'_>) -> Option<Vec<String>> {
    array
        .elements
        .iter()
        .map(|e| string_value(e).map(str::to_owned))
        .collect()
}

pub(crate) fn slice(text: &str, start: usize, end: usize) -> Result<&str, DocError> {
    text.get(start..end).ok_or(DocError::Verification)
}

pub(crate) fn newline(text: &str) -> &'static str {
    if text.contains("\r\n") { "\r\n" } else { "\n" }
}

/// What goes between two items when inserting in front of the item at `pos`:
/// a line break and that item's indentation when it starts its own line, else a
/// space.
pub(crate) fn separator_before(text: &str, pos: usize) -> String {
    let before = text.get(..pos).unwrap_or_default();
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let indent = before.get(line_start..).unwrap_or_default();
    if !indent.is_empty() && indent.chars().all(|c| c == ' ' || c == '\t') {
        format!("{}{indent}", newline(text))
    } else if indent.is_empty() && line_start > 0 {
        newline(text).to_owned()
    } else {
        " ".to_owned()
    }
}

/// Why an entry cannot be wrapped, when it is not a local stdio server.
fn not_stdio_reason(entry: &Object<'_>) -> Option<String> {
    if let Some(kind) = entry.get("type").and_then(|p| string_value(&p.value))
        && kind != "stdio"
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
        Some(_) => Some("`command` is not a string".to_owned()),
    }
}

/// An entry that runs toolgate's `wrap` without an upstream record (wrapped by hand).
pub(crate) fn looks_wrapped(entry: &Object<'_>) -> bool {
    let command_is_toolgate = entry
        .get("command")
        .and_then(|p| string_value(&p.value))
        .and_then(|c| std::path::Path::new(c).file_name())
        .is_some_and(|n| n == "toolgate");
    let first_arg_is_wrap = entry
        .get_array("args")
        .and_then(|a| a.elements.first())
        .and_then(string_value)
        == Some("wrap");
    command_is_toolgate && first_arg_is_wrap
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

pub(crate) fn apply(text: &str, mut splices: Vec<Splice>) -> Result<String, DocError> {
    // Stable sort keeps the insertion order of splices at the same position.
    splices.sort_by_key(|s| (s.start, s.end));
    let mut out = String::with_capacity(text.len() + 256);
    let mut at = 0;
    for s in &splices {
        if s.start < at || s.end < s.start {
            return Err(DocError::Verification);
        }
        out.push_str(slice(text, at, s.start)?);
        out.push_str(&s.with);
        at = s.end;
    }
    out.push_str(slice(text, at, text.len())?);
    Ok(out)
}

fn json_array(items: &[String]) -> String {
    let inner: Vec<String> = items.iter().map(|s| json_string(s)).collect();
    format!("[{}]", inner.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> WrapSettings {
        WrapSettings {
            exe: "/opt/toolgate".to_owned(),
            policy: None,
            workspace: Some("/w".to_owned()),
            dialect: crate::remote::Dialect::Other,
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
