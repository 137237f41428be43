//! Normalisation: a raw MCP `tools/call` becomes an [`Action`].
//!
//! Never fails: anything not understood becomes an opaque `unknown` part (fail closed). A part
//! is exact (`opaque: false`) only when every fact in it is known before the call runs.

mod commands;
mod git;
mod git_parts;
pub mod http;
mod mapping;
mod path;
mod recursive;
pub mod shell;
mod shell_parts;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::action::{Action, Operation, Part};
use crate::fsfacts::FsFacts;

pub use http::{UrlError, normalize_url};
pub use shell::{Scan, decoded_words, look_through, scan};

pub(crate) use mapping::for_each_word;
pub use mapping::{base_tool_name, builtin_mapping};

use git_parts::{git_cli_parts, git_tool_parts};
use shell_parts::shell_parts;

/// One tool call as the proxy sees it.
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    pub server: Option<&'a str>,
    pub tool: &'a str,
    pub arguments: &'a Value,
    /// The pinned `tools/list` entry, when there is one.
    pub definition: Option<&'a Value>,
}

/// Where relative paths and `~` point, and how symlinks resolve.
#[derive(Clone, Copy)]
pub struct NormalizeContext<'a> {
    pub workspace: &'a str,
    pub home: &'a str,
    pub fs: &'a dyn FsFacts,
}

impl std::fmt::Debug for NormalizeContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NormalizeContext")
            .field("workspace", &self.workspace)
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

/// How to read one tool's arguments. Built by the contracts engineer from packs and `tools:`
/// entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolMapping {
    /// The tool's primary operation.
    pub operation: Option<Operation>,
    /// Arguments holding a path or a list of paths.
    pub path_params: Vec<String>,
    /// Per-argument override, e.g. `move_file` `source` → `fs.delete`.
    pub param_operations: BTreeMap<String, Operation>,
    /// Shell: a string or argv-array command.
    pub command_param: Option<String>,
    /// Shell: a separate args array (`{command: "git", args: […]}`).
    pub args_param: Option<String>,
    pub cwd_param: Option<String>,
    pub url_params: Vec<String>,
    pub method_param: Option<String>,
    /// mcp-server-git style tools: `git_diff` → `"diff"`.
    pub git_subcommand: Option<String>,
    /// A git command line runner (a tool named `git`): `args`, `arguments` or `command`
    /// holds a git command line, with or without the leading `git`.
    pub git_command_line: bool,
    /// A recursive tool (a search or listing of a directory): its parts reach beneath the
    /// directories it names ([`crate::action::Part::beneath`]).
    pub recursive: Option<RecursiveMapping>,
}

/// How a recursive tool names its directories and the filters that narrow the files beneath
/// them (from a contract's `recursive:`; see
/// [`RecursiveSpec`](crate::contracts::RecursiveSpec)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecursiveMapping {
    /// Arguments naming a directory reached recursively.
    pub params: Vec<String>,
    /// Arguments holding ripgrep-style file-name globs.
    pub name_globs: Vec<String>,
    /// Arguments holding a glob relative to the directory (`src/**/*.rs`).
    pub relative_globs: Vec<String>,
    /// Arguments holding ripgrep file-type names.
    pub types: Vec<String>,
    /// No directory argument: the workspace.
    pub workspace_default: bool,
}

impl RecursiveMapping {
    /// Both mappings' arguments (a layer never drops what another declared).
    pub fn united(mut self, other: RecursiveMapping) -> RecursiveMapping {
        for (mine, theirs) in [
            (&mut self.params, other.params),
            (&mut self.name_globs, other.name_globs),
            (&mut self.relative_globs, other.relative_globs),
            (&mut self.types, other.types),
        ] {
            for v in theirs {
                if !mine.contains(&v) {
                    mine.push(v);
                }
            }
        }
        self.workspace_default |= other.workspace_default;
        self
    }
}

fn opaque(operation: Operation) -> Part {
    let mut p = Part::new(operation);
    p.opaque = true;
    p
}

/// Never fails: anything not understood becomes an opaque `unknown` part (fail closed).
/// Without a mapping the built-in adapter's applies, if there is one.
pub fn normalize(call: &ToolCall, mapping: Option<&ToolMapping>, ctx: &NormalizeContext) -> Action {
    let builtin;
    let mapping = match mapping {
        Some(m) => Some(m),
        None => {
            builtin = builtin_mapping(call.tool, call.definition);
            builtin.as_ref()
        }
    };
    normalize_mapped(call, mapping, ctx)
}

/// [`normalize`] with the mapping already complete (a resolved contract's, which includes
/// the built-in adapter's): without one the call is opaque.
pub(crate) fn normalize_mapped(
    call: &ToolCall,
    mapping: Option<&ToolMapping>,
    ctx: &NormalizeContext,
) -> Action {
    let mut parts = match mapping {
        None => unknown_parts(call, ctx),
        Some(m) => {
            let op = m.operation.or_else(|| infer_operation(m));
            match op {
                Some(op) if op.is_fs() => fs_parts(call, m, op, ctx),
                Some(Operation::ShellExec) => shell_parts(call, m, ctx),
                Some(op) if op.is_git() => {
                    if m.git_command_line && m.command_param.is_none() && m.args_param.is_none() {
                        git_cli_parts(call, ctx)
                    } else if m.git_subcommand.is_some() {
                        git_tool_parts(call, m, ctx)
                    } else if m.command_param.is_some() || m.args_param.is_some() {
                        shell_parts(call, m, ctx)
                    } else {
                        plain_parts(call, m, op, ctx)
                    }
                }
                Some(Operation::NetRequest) => http_parts(call, m),
                _ => unknown_parts(call, ctx),
            }
        }
    };
    if parts.is_empty() {
        parts.push(opaque(Operation::Unknown));
    }
    Action {
        server: call.server.map(str::to_owned),
        tool: call.tool.to_owned(),
        parts,
    }
}

fn infer_operation(m: &ToolMapping) -> Option<Operation> {
    if m.git_subcommand.is_some() {
        return m
            .git_subcommand
            .as_deref()
            .and_then(git::classify_tool)
            .or(Some(Operation::Unknown));
    }
    if m.command_param.is_some() || m.args_param.is_some() {
        return Some(Operation::ShellExec);
    }
    if !m.url_params.is_empty() {
        return Some(Operation::NetRequest);
    }
    if m.recursive.is_some() {
        // A search or listing of a directory.
        return Some(Operation::FsRead);
    }
    if !m.path_params.is_empty() {
        return m
            .param_operations
            .values()
            .next()
            .copied()
            .or(Some(Operation::Unknown));
    }
    None
}

fn args_object<'a>(call: &ToolCall<'a>) -> Option<&'a serde_json::Map<String, Value>> {
    call.arguments.as_object()
}

/// Names of every argument that holds a path: the mapping's, the schema's and any argument
/// whose name reads as a path.
fn path_param_names(call: &ToolCall, m: &ToolMapping) -> Vec<String> {
    let mut names: Vec<String> = m.path_params.clone();
    for n in m.param_operations.keys() {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    for n in path::schema_path_params(call.definition) {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    if let Some(args) = args_object(call) {
        for (k, v) in args {
            if !names.contains(k)
                && path::is_path_name(k)
                && matches!(v, Value::String(_) | Value::Array(_))
            {
                names.push(k.clone());
            }
        }
    }
    names
}

fn fs_parts(call: &ToolCall, m: &ToolMapping, op: Operation, ctx: &NormalizeContext) -> Vec<Part> {
    let Some(args) = args_object(call) else {
        return vec![opaque(Operation::Unknown)];
    };
    let mut parts: Vec<Part> = Vec::new();
    let mut unresolved: Vec<Operation> = Vec::new();
    let mut found_any = false;
    if let Some(r) = &m.recursive {
        found_any = recursive::add_recursive_parts(args, r, op, ctx, &mut parts, &mut unresolved);
    }
    for name in path_param_names(call, m) {
        if m.recursive
            .as_ref()
            .is_some_and(|r| r.params.contains(&name) || r.relative_globs.contains(&name))
        {
            continue;
        }
        let Some(value) = args.get(&name) else {
            continue;
        };
        let part_op = m.param_operations.get(&name).copied().unwrap_or(op);
        for result in path::resolve_value(value, ctx.workspace, ctx) {
            found_any = true;
            match result {
                Ok(p) => add_resource(&mut parts, part_op, p),
                Err(_) if !unresolved.contains(&part_op) => unresolved.push(part_op),
                Err(_) => {}
            }
        }
    }
    let no_arguments = args.is_empty() && m.path_params.is_empty() && m.param_operations.is_empty();
    if !found_any && unresolved.is_empty() && no_arguments {
        // A tool that takes no path at all (`list_allowed_directories`): the operation
        // without resources; rules that constrain resources never match it.
        return vec![Part::new(op)];
    }
    // A path we cannot resolve is never "no resources": it hides what it touches (asks,
    // and every deny rule of its operation treats it as matching).
    for op in unresolved {
        parts.push(Part::hidden(op));
    }
    if !found_any {
        parts.push(opaque(Operation::Unknown));
    }
    parts
}

fn add_resource(parts: &mut Vec<Part>, op: Operation, resource: String) {
    if let Some(part) = parts
        .iter_mut()
        .find(|p| p.operation == op && !p.opaque && p.beneath.is_none())
    {
        if !part.resources.contains(&resource) {
            part.resources.push(resource);
        }
    } else {
        let mut p = Part::new(op);
        p.resources.push(resource);
        parts.push(p);
    }
}

/// A part with a given operation and the mapping's path resources (e.g. a git tool declared
/// by operation only).
fn plain_parts(
    call: &ToolCall,
    m: &ToolMapping,
    op: Operation,
    ctx: &NormalizeContext,
) -> Vec<Part> {
    let mut part = Part::new(op);
    let mut unresolved = false;
    if let Some(args) = args_object(call) {
        for name in path_param_names(call, m) {
            let Some(value) = args.get(&name) else {
                continue;
            };
            for r in path::resolve_value(value, ctx.workspace, ctx) {
                match r {
                    Ok(p) if !part.resources.contains(&p) => part.resources.push(p),
                    Ok(_) => {}
                    Err(_) => unresolved = true,
                }
            }
        }
    }
    let mut parts = vec![part];
    if unresolved {
        parts.push(Part::hidden(op));
    }
    parts
}

/// `unknown`: one opaque part; resources of any path-marked argument are attached so that
/// deny rules can still see them.
fn unknown_parts(call: &ToolCall, ctx: &NormalizeContext) -> Vec<Part> {
    let mut part = opaque(Operation::Unknown);
    let m = ToolMapping::default();
    if let Some(args) = args_object(call) {
        for name in path_param_names(call, &m) {
            let Some(value) = args.get(&name) else {
                continue;
            };
            for r in path::resolve_value(value, ctx.workspace, ctx) {
                match r {
                    Ok(p) if !part.resources.contains(&p) => part.resources.push(p),
                    Ok(_) => {}
                    // A path that names no place the kernel could open with certainty.
                    Err(e) if e.hides() => part.hidden = true,
                    // Not a string, empty: a value of another kind under a path-like name.
                    Err(_) => {}
                }
            }
        }
    }
    vec![part]
}

const COMMAND_PARAMS: &[&str] = &[
    "command",
    "cmd",
    "script",
    "shell_command",
    "commandLine",
    "command_line",
    "commandline",
    "line",
    "input",
    "code",
];
const ARGS_PARAMS: &[&str] = &["args", "argv", "arguments"];
const CWD_PARAMS: &[&str] = &[
    "cwd",
    "workdir",
    "working_directory",
    "workingDirectory",
    "working_dir",
    "workDir",
    "dir",
    "directory",
];

fn first_present<'v>(
    args: &'v serde_json::Map<String, Value>,
    explicit: Option<&String>,
    candidates: &[&str],
) -> Option<(String, &'v Value)> {
    if let Some(name) = explicit {
        return args.get(name).map(|v| (name.clone(), v));
    }
    candidates
        .iter()
        .find_map(|c| args.get(*c).map(|v| ((*c).to_owned(), v)))
}

const URL_PARAMS: &[&str] = &[
    "url",
    "uri",
    "urls",
    "endpoint",
    "redirect_url",
    "redirectUrl",
    "redirect_uri",
    "redirectUri",
    "callback",
    "callback_url",
    "callbackUrl",
    "webhook",
    "webhook_url",
    "webhookUrl",
    "href",
    "link",
    "target_url",
    "targetUrl",
    "base_url",
    "baseUrl",
    "proxy",
    "host",
];
const METHOD_PARAMS: &[&str] = &["method", "http_method", "httpMethod", "verb"];

fn http_parts(call: &ToolCall, m: &ToolMapping) -> Vec<Part> {
    let Some(args) = args_object(call) else {
        return vec![opaque(Operation::Unknown)];
    };
    let mut method_opaque = false;
    let method = match first_present(args, m.method_param.as_ref(), METHOD_PARAMS) {
        None | Some((_, Value::Null)) => String::new(),
        Some((_, Value::String(s))) => s.clone(),
        Some(_) => {
            method_opaque = true;
            String::new()
        }
    };
    let mut parts: Vec<Part> = Vec::new();
    let push_url = |parts: &mut Vec<Part>, raw: &str| match normalize_url(raw, &method) {
        Ok(net) => {
            let mut p = Part::new(Operation::NetRequest);
            p.network = Some(net);
            p.opaque = method_opaque;
            if !parts.contains(&p) {
                parts.push(p);
            }
        }
        Err(_) => parts.push(opaque(Operation::Unknown)),
    };
    let declared: Vec<&str> = if m.url_params.is_empty() {
        URL_PARAMS.to_vec()
    } else {
        m.url_params.iter().map(String::as_str).collect()
    };
    let mut seen_declared = false;
    for (name, value) in args {
        let is_declared = declared.contains(&name.as_str());
        let mut strings = Vec::new();
        collect_strings(value, &mut strings, 0);
        for s in strings {
            if is_declared {
                seen_declared = true;
                push_url(&mut parts, s);
            } else if http::looks_like_url(s) {
                push_url(&mut parts, s);
            }
        }
        if is_declared
            && !matches!(
                value,
                Value::String(_) | Value::Array(_) | Value::Object(_) | Value::Null
            )
        {
            parts.push(opaque(Operation::Unknown));
        }
    }
    let _ = seen_declared;
    if parts.iter().all(|p| p.operation != Operation::NetRequest) && parts.is_empty() {
        parts.push(opaque(Operation::Unknown));
    }
    parts
}

const MAX_JSON_DEPTH: usize = 64;

/// Every string in a JSON value (object keys excluded), in document order, down to a depth
/// of 64.
pub(crate) fn collect_strings<'v>(value: &'v Value, out: &mut Vec<&'v str>, depth: usize) {
    if depth > MAX_JSON_DEPTH {
        return;
    }
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items
            .iter()
            .for_each(|i| collect_strings(i, out, depth + 1)),
        Value::Object(map) => map
            .values()
            .for_each(|v| collect_strings(v, out, depth + 1)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::mapping::split_words;
    use super::*;

    #[test]
    fn words() {
        assert_eq!(split_words("getURLContent"), ["get", "url", "content"]);
        assert_eq!(split_words("execute_command"), ["execute", "command"]);
        assert_eq!(split_words("confirm_order"), ["confirm", "order"]);
        assert_eq!(split_words("runShellCommand"), ["run", "shell", "command"]);
    }

    #[test]
    fn builtin_names() {
        for t in [
            "execute_command",
            "run_command",
            "shell",
            "bash",
            "exec",
            "terminal",
            "run",
            "run_shell_command",
            "execute",
            "command",
            "runCommand",
        ] {
            assert_eq!(
                builtin_mapping(t, None).and_then(|m| m.operation),
                Some(Operation::ShellExec),
                "{t}"
            );
        }
        for t in [
            "fetch",
            "http_request",
            "request",
            "get_url",
            "download",
            "fetch_url",
            "curl",
            "http_get",
            "web_fetch",
        ] {
            assert_eq!(
                builtin_mapping(t, None).and_then(|m| m.operation),
                Some(Operation::NetRequest),
                "{t}"
            );
        }
        for t in [
            "confirm_order",
            "create_pull_request",
            "get_command_history_stats",
            "send_email",
        ] {
            let op = builtin_mapping(t, None).and_then(|m| m.operation);
            assert_ne!(op, Some(Operation::ShellExec), "{t}");
        }
        assert_eq!(builtin_mapping("create_pull_request", None), None);
    }
}
