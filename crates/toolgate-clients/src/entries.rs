//! A client's configuration file as toolgate edits it: the server maps in its JSONC syntax
//! tree, what wrapping an entry means, and the byte-precise splices every edit is made of.
//! The level under `document` (the edits), `remote` (remote entries) and `rewrite` (their
//! splices).

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
    /// Codex's TOML (`[mcp_servers.<name>]` tables): edited by `codex_toml`.
    CodexToml,
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
    pub dialect: Dialect,
    /// The broker's directory (`wrap --broker-dir`), written for a client that starts its
    /// servers without the user's environment (Codex), where the proxy could not find it.
    pub broker_dir: Option<String>,
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

/// Every server entry of `text`: (map label, name, value).
pub fn entries(
    text: &str,
    spec: &MapSpec,
) -> Result<Vec<(String, String, serde_json::Value)>, DocError> {
    if *spec == MapSpec::CodexToml {
        return crate::codex_toml::entries(text);
    }
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

pub(crate) struct ServerMap<'b, 'a> {
    pub(crate) label: String,
    pub(crate) path: Vec<String>,
    pub(crate) object: &'b Object<'a>,
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

pub(crate) fn with_maps<T>(
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

pub(crate) fn find_maps<'b, 'a>(root: &'b Object<'a>, spec: &MapSpec) -> Vec<ServerMap<'b, 'a>> {
    let paths: Vec<Vec<String>> = match spec {
        MapSpec::Paths(paths) => paths.clone(),
        MapSpec::CodexToml => Vec::new(),
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

pub(crate) fn object_at<'b, 'a>(root: &'b Object<'a>, path: &[String]) -> Option<&'b Object<'a>> {
    let mut current = root;
    for key in path {
        current = current.get_object(key)?;
    }
    Some(current)
}

pub(crate) fn map_label(path: &[String]) -> String {
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
pub(crate) fn string_array(array: &Array<'_>) -> Option<Vec<String>> {
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

pub(crate) fn json_array(items: &[String]) -> String {
    let inner: Vec<String> = items.iter().map(|s| json_string(s)).collect();
    format!("[{}]", inner.join(", "))
}

pub(crate) fn upstream_of<'b, 'a>(entry: &'b Object<'a>) -> Option<(usize, &'b Object<'a>)> {
    entry
        .properties
        .iter()
        .enumerate()
        .find(|(_, p)| prop_name(p) == UPSTREAM_KEY)
        .and_then(|(i, p)| match &p.value {
            Value::Object(o) => Some((i, o)),
            _ => None,
        })
}

/// The long names of `toolgate wrap`'s options that take a value (`wrap --url`'s included):
/// what `init` and `unwrap` skip over to find the server's command. The executable's tests hold this list against `wrap`'s own
/// command-line definition, so a new option cannot be missed here.
pub const WRAP_OPTIONS_WITH_VALUES: &[&str] = &[
    "approval",
    "approval-timeout",
    "audit",
    "auth-timeout",
    "broker-dir",
    "ca-file",
    "callback-port",
    "client-id",
    "client-metadata-url",
    "client-secret-env",
    "grace-ms",
    "header",
    "listing-timeout",
    "max-message-bytes",
    "policy",
    "poll-us",
    "request-timeout",
    "scope",
    "server",
    "session",
    "transport",
    "url",
    "workspace",
];

/// [`WRAP_OPTIONS_WITH_VALUES`] as owned strings.
pub(crate) fn wrap_options_with_values() -> Vec<String> {
    WRAP_OPTIONS_WITH_VALUES
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

/// How the client that reads a file treats `${…}` in `args`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// Claude Code: `${VAR}` and `${VAR:-default}` are expanded in `args` from the client's
    /// own environment.
    ClaudeCode,
    /// Everybody else: `${NAME}` (a name that is none of the client's variables) reaches
    /// the server as written.
    #[default]
    Other,
}
