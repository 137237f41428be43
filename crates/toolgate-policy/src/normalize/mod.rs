//! Normalisation: a raw MCP `tools/call` becomes an [`Action`].
//!
//! Never fails: anything not understood becomes an opaque `unknown` part (fail closed). A part
//! is exact (`opaque: false`) only when every fact in it is known before the call runs.

mod commands;
mod git;
pub mod http;
mod path;
mod recursive;
pub mod shell;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::action::{Action, Beneath, Operation, Part};
use crate::fsfacts::FsFacts;

pub use http::{UrlError, normalize_url};
pub use shell::{Scan, decoded_words, look_through, scan};

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

/// Splits an identifier or a sentence into lower-case words on `_`, `-`, `.`, `/`, spaces,
/// other punctuation and camelCase boundaries (`getURLContent` → `get`, `url`, `content`).
/// Token-based matching on these words never mistakes `confirm_order` for `rm`.
pub fn split_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    for_each_word(name, |w| {
        words.push(w.to_owned());
        false
    });
    words
}

/// Calls `f` with each lower-case word of [`split_words`] without allocating a vector; stops
/// early when `f` returns true. Returns whether it stopped early.
pub(crate) fn for_each_word(name: &str, mut f: impl FnMut(&str) -> bool) -> bool {
    let mut current = String::new();
    let mut prev: Option<char> = None;
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if !c.is_alphanumeric() {
            if !current.is_empty() && f(&current) {
                return true;
            }
            current.clear();
            prev = Some(c);
            continue;
        }
        if c.is_uppercase() && !current.is_empty() {
            let prev_lower = prev.is_some_and(|p| p.is_lowercase() || p.is_numeric());
            let prev_upper = prev.is_some_and(char::is_uppercase);
            let next_lower = chars.peek().is_some_and(|n| n.is_lowercase());
            if prev_lower || (prev_upper && next_lower) {
                if f(&current) {
                    return true;
                }
                current.clear();
            }
        }
        if c.is_ascii() {
            current.push(c.to_ascii_lowercase());
        } else {
            current.extend(c.to_lowercase());
        }
        prev = Some(c);
    }
    !current.is_empty() && f(&current)
}

/// The name a tool is known by, without the namespace an aggregating gateway or client put
/// in front of it and in lower case: `filesystem/read_file`, `fs:read_file`, `fs.read_file`,
/// `mcp__fs__read_file` and `READ_FILE` all name `read_file`. The last non-empty segment
/// after `/`, `:`, `.` or `__`; the whole name (lower case) when there is none.
///
/// Only the built-in adapters and the packs read this name. Pins, session approvals, the
/// audit and the `tools:` constraint of rules keep the exact name the server listed.
pub fn base_tool_name(tool: &str) -> std::borrow::Cow<'_, str> {
    let last = tool
        .split(['/', ':', '.'])
        .flat_map(|s| s.split("__"))
        .filter(|s| !s.is_empty())
        .last()
        .unwrap_or(tool);
    if last.bytes().any(|b| b.is_ascii_uppercase()) {
        std::borrow::Cow::Owned(last.to_ascii_lowercase())
    } else {
        std::borrow::Cow::Borrowed(last)
    }
}

/// Tool names of `@modelcontextprotocol/server-filesystem`, and the deletion tools other
/// filesystem servers offer, with their mappings (the base name, see [`base_tool_name`]).
fn filesystem_mapping(tool: &str) -> Option<ToolMapping> {
    let (op, params): (Operation, &[&str]) = match tool {
        // No argument: lists the server's own configuration.
        "list_allowed_directories" => (Operation::FsRead, &[]),
        "delete_file" | "remove_file" | "remove_directory" | "delete_directory" => {
            (Operation::FsDelete, &["path"])
        }
        "read_file" | "read_text_file" | "read_media_file" | "get_file_info" | "list_directory" => {
            (Operation::FsRead, &["path"])
        }
        // They reach beneath the directory: names, sizes or a tree of everything in it.
        "list_directory_with_sizes" | "directory_tree" | "search_files" => {
            return Some(ToolMapping {
                operation: Some(Operation::FsRead),
                path_params: vec!["path".to_owned()],
                recursive: Some(RecursiveMapping {
                    params: vec!["path".to_owned()],
                    ..RecursiveMapping::default()
                }),
                ..ToolMapping::default()
            });
        }
        "read_multiple_files" => (Operation::FsRead, &["paths"]),
        "write_file" | "edit_file" | "create_directory" => (Operation::FsWrite, &["path"]),
        "move_file" => {
            let mut m = ToolMapping {
                operation: Some(Operation::FsWrite),
                path_params: vec!["source".to_owned(), "destination".to_owned()],
                ..ToolMapping::default()
            };
            m.param_operations
                .insert("source".to_owned(), Operation::FsDelete);
            m.param_operations
                .insert("destination".to_owned(), Operation::FsWrite);
            return Some(m);
        }
        _ => return None,
    };
    Some(ToolMapping {
        operation: Some(op),
        path_params: params.iter().map(|p| (*p).to_owned()).collect(),
        ..ToolMapping::default()
    })
}

const SHELL_NOUNS: &[&str] = &[
    "command",
    "commands",
    "cmd",
    "shell",
    "bash",
    "sh",
    "zsh",
    "terminal",
    "script",
    "powershell",
    "pwsh",
    "process",
];

fn is_shell_tool(words: &[String]) -> bool {
    let has = |set: &[&str]| words.iter().any(|w| set.contains(&w.as_str()));
    if let [only] = words {
        return matches!(
            only.as_str(),
            "shell"
                | "bash"
                | "sh"
                | "zsh"
                | "exec"
                | "terminal"
                | "run"
                | "execute"
                | "command"
                | "cmd"
                | "powershell"
                | "pwsh"
                | "spawn"
        );
    }
    if has(&["shell", "bash", "zsh", "terminal", "powershell", "pwsh"]) {
        return true;
    }
    has(&["run", "exec", "execute", "spawn", "invoke"]) && has(SHELL_NOUNS)
}

fn is_http_tool(words: &[String]) -> bool {
    let has = |set: &[&str]| words.iter().any(|w| set.contains(&w.as_str()));
    if let [only] = words
        && matches!(
            only.as_str(),
            "request" | "get" | "post" | "browse" | "navigate"
        )
    {
        return true;
    }
    if has(&[
        "fetch", "http", "https", "curl", "wget", "download", "webhook", "scrape", "crawl",
    ]) {
        return true;
    }
    has(&["url", "uri", "webpage", "web", "page", "website"])
        && has(&[
            "get", "fetch", "open", "read", "load", "visit", "request", "send", "post", "browse",
            "navigate",
        ])
        || (has(&["request"]) && has(&["http", "web", "api", "make", "send"]))
        || (has(&["browser", "playwright", "puppeteer"])
            && has(&["navigate", "open", "goto", "visit", "go"]))
}

/// Built-in adapters by tool name (shell tool names, http tool names, git tools and the
/// reference filesystem server's tools) when no mapping is given, else `None`.
///
/// Namespaced and differently cased names (`filesystem/read_file`, `READ_FILE`,
/// `mcp__fs__read_file`) map as the tool they name ([`base_tool_name`]).
pub fn builtin_mapping(tool: &str, definition: Option<&Value>) -> Option<ToolMapping> {
    let base = base_tool_name(tool);
    match builtin_mapping_of(&base, definition) {
        Some(m) => Some(m),
        None if base != tool => builtin_mapping_of(tool, definition),
        None => None,
    }
}

/// Tools named like a git command line runner: their `args` (array or string) or
/// `command` is a git command line, with or without the leading `git`.
const GIT_CLI_TOOLS: &[&str] = &["git", "git_command", "execute_git", "run_git", "git_cli"];

fn builtin_mapping_of(tool: &str, definition: Option<&Value>) -> Option<ToolMapping> {
    let _ = definition;
    if let Some(m) = filesystem_mapping(tool) {
        return Some(m);
    }
    if GIT_CLI_TOOLS.contains(&tool) {
        return Some(ToolMapping {
            operation: Some(Operation::GitRead),
            git_command_line: true,
            ..ToolMapping::default()
        });
    }
    let words = split_words(tool);
    if words.first().is_some_and(|w| w == "git") && words.len() >= 2 {
        let sub = words.get(1..).unwrap_or_default().join("_");
        let operation = git::classify_tool(&sub);
        if operation.is_some() {
            return Some(ToolMapping {
                operation,
                git_subcommand: Some(sub),
                path_params: vec!["repo_path".to_owned()],
                ..ToolMapping::default()
            });
        }
    }
    if is_http_tool(&words) {
        return Some(ToolMapping {
            operation: Some(Operation::NetRequest),
            ..ToolMapping::default()
        });
    }
    if is_shell_tool(&words) {
        return Some(ToolMapping {
            operation: Some(Operation::ShellExec),
            ..ToolMapping::default()
        });
    }
    None
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

fn shell_parts(call: &ToolCall, m: &ToolMapping, ctx: &NormalizeContext) -> Vec<Part> {
    let Some(args) = args_object(call) else {
        return vec![opaque(Operation::ShellExec)];
    };
    // Working directory.
    let mut cwd: Option<String> = None;
    let mut cwd_bad = false;
    if let Some((_, v)) = first_present(args, m.cwd_param.as_ref(), CWD_PARAMS) {
        match v {
            Value::String(s) => match path::resolve_path_strict(s, ctx.workspace, ctx) {
                Ok(p) => cwd = Some(p),
                Err(_) => cwd_bad = true,
            },
            Value::Null => {}
            _ => cwd_bad = true,
        }
    }
    let command = first_present(args, m.command_param.as_ref(), COMMAND_PARAMS).map(|(_, v)| v);
    let extra = first_present(args, m.args_param.as_ref(), ARGS_PARAMS)
        .filter(|(name, _)| Some(name.as_str()) != m.command_param.as_deref())
        .map(|(_, v)| v);
    let extra_words: Option<Vec<String>> = match extra {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned))
            .collect(),
        Some(Value::String(s)) => match scan(s) {
            Scan::Simple(w) => Some(w),
            _ => None,
        },
        Some(_) => None,
    };

    let mut out = ShellOut::new(cwd, ctx);
    match (command, extra_words) {
        (Some(Value::String(cmd)), Some(extra_words)) => {
            if extra_words.is_empty() {
                out.command_string(cmd);
            } else {
                match scan(cmd) {
                    Scan::Simple(mut words) => {
                        let meta = extra_words.iter().any(|w| shell::has_shell_meta(w));
                        words.extend(extra_words.iter().cloned());
                        out.argv(&words, meta);
                        if meta {
                            out.joined_string(&format!("{cmd} {}", extra_words.join(" ")));
                        }
                    }
                    _ => out.joined_string(&format!("{cmd} {}", extra_words.join(" "))),
                }
            }
        }
        (Some(Value::Array(items)), Some(extra_words)) => {
            let words: Option<Vec<String>> = items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect();
            match words {
                Some(mut words) if !words.is_empty() => {
                    words.extend(extra_words);
                    let meta = words.iter().any(|w| shell::has_shell_meta(w));
                    out.argv(&words, meta);
                    if meta {
                        // If the server joins the array into a shell string, these run too.
                        out.joined_string(&words.join(" "));
                    }
                }
                _ => out.parts.push(opaque(Operation::ShellExec)),
            }
        }
        (None, Some(extra_words)) if !extra_words.is_empty() => {
            let meta = extra_words.iter().any(|w| shell::has_shell_meta(w));
            out.argv(&extra_words, meta);
        }
        (Some(Value::String(cmd)), None) => {
            // Args we cannot read: the command is not exact.
            out.command_string(cmd);
            for p in &mut out.parts {
                p.opaque = true;
            }
            out.parts.push(opaque(Operation::ShellExec));
        }
        _ => out.parts.push(opaque(Operation::ShellExec)),
    }
    let mut parts = out.parts;
    if parts.is_empty() {
        parts.push(opaque(Operation::ShellExec));
    }
    if cwd_bad {
        for p in &mut parts {
            p.opaque = true;
        }
        parts.push(Part::hidden(Operation::Unknown));
    }
    parts
}

struct ShellOut<'c> {
    parts: Vec<Part>,
    cwd: Option<String>,
    ctx: &'c NormalizeContext<'c>,
    /// Every directory the next command may run in (`None`: not known). A `cd` adds its
    /// target: whether it succeeded, and so which one later commands run in, is only known
    /// at run time.
    bases: Vec<Option<String>>,
    /// The segment being read is a line of a here-document's body.
    body: bool,
    /// Words resolved as paths so far (bounded: [`MAX_RESOLVED`]).
    resolved: usize,
    /// The executable of the known command whose file operands are being read: their parts
    /// carry it, so that a rule can say `executables: [mv]` for the files `mv` deletes.
    file_exe: Option<String>,
}

/// At most this many words of one call are resolved as paths; past it, what the rest name
/// is hidden (every deny rule of the operation treats it as matching).
const MAX_RESOLVED: usize = 512;

/// At most this many working directories are followed; beyond, relative paths are hidden.
const MAX_BASES: usize = 8;

/// Paths that name no resource: the process's own standard streams and the null device.
const NO_RESOURCE: &[&str] = &["/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"];

/// A word of a command that looks like a path: `/…`, `~…`, `./…`, `../…`, `.`, `..`, a
/// dotfile (`.env`), or anything with a `/` that is no URL.
fn looks_like_path(word: &str) -> bool {
    if word.is_empty() || word.contains("://") {
        return false;
    }
    word.starts_with(['/', '~'])
        || word == "."
        || word == ".."
        || word.starts_with("./")
        || word.starts_with("../")
        || (word.starts_with('.')
            && word
                .chars()
                .nth(1)
                .is_some_and(|c| c.is_alphanumeric() || c == '_'))
        || word.contains('/')
}

/// How one word of a command names files.
enum Named {
    /// Not a file (`-` is standard input, `/dev/null`).
    Nothing,
    /// What it names is only known at run time (a variable, braces, an unknown directory).
    Hidden,
    /// Canonical paths; `glob` when a glob was cut back to its directory (with a file-name
    /// filter when only the last component has one).
    Paths {
        paths: Vec<String>,
        glob: Option<Vec<String>>,
    },
}

impl<'c> ShellOut<'c> {
    fn new(cwd: Option<String>, ctx: &'c NormalizeContext<'c>) -> Self {
        let base = cwd.clone().or_else(|| {
            Some(
                path::resolve_path(ctx.workspace, "/", ctx)
                    .unwrap_or_else(|_| ctx.workspace.to_owned()),
            )
        });
        ShellOut {
            parts: Vec::new(),
            cwd,
            ctx,
            bases: vec![base],
            body: false,
            resolved: 0,
            file_exe: None,
        }
    }

    /// A string made by joining words the way a server might: what it runs is a guess, so
    /// none of its parts is exact.
    fn joined_string(&mut self, cmd: &str) {
        let first = self.parts.len();
        self.command_string(cmd);
        for p in self.parts.get_mut(first..).unwrap_or_default() {
            p.opaque = true;
        }
    }

    fn command_string(&mut self, cmd: &str) {
        let first = self.parts.len();
        let (scanned, hidden) = shell::scan_hiding(cmd);
        match scanned {
            Scan::Simple(words) => self.segment(&words, &[], true, false),
            Scan::Compound { .. } | Scan::Invalid => {
                let line = shell::parse_line(cmd);
                if line.segments.is_empty() {
                    self.parts.push(opaque(Operation::ShellExec));
                }
                for seg in &line.segments {
                    // A here-document's text is no command: only what a substitution in it
                    // runs is (the scanner cannot tell which words those are). Its words
                    // are not shown as paths; commands of the table in it still are.
                    self.body = seg.body;
                    self.segment(&seg.words, &seg.redirects, line.exact, !line.exact);
                }
                self.body = false;
                for r in &line.loose {
                    self.redirect(r, false, true);
                }
            }
        }
        if hidden {
            // A substitution, a variable as the command name or undecodable quoting: what
            // runs is not what the string says.
            if self.parts.len() == first {
                self.parts.push(Part::hidden(Operation::ShellExec));
            }
            for p in self.parts.get_mut(first..).unwrap_or_default() {
                p.opaque = true;
                if !p.operation.is_fs() {
                    p.hidden = true;
                }
            }
        }
    }

    /// An exact argv (exec form or a simple string). `inexact` forces opaque parts.
    fn argv(&mut self, words: &[String], inexact: bool) {
        self.segment(words, &[], !inexact, inexact);
    }

    /// One simple command: its executions (wrappers looked through), the files each one
    /// touches, and the segment's redirections. `literal`: the words are exactly what the
    /// program receives (nothing expands at run time).
    fn segment(
        &mut self,
        words: &[String],
        redirects: &[shell::Redirect],
        literal: bool,
        inexact: bool,
    ) {
        let execs = shell::expand(words);
        let single = execs.len() == 1;
        if execs.is_empty() {
            self.parts.push(opaque(Operation::ShellExec));
        }
        let mut any_opaque = inexact || execs.is_empty();
        let mut wrapper_chdir = false;
        let mut fed = false;
        let mut in_find = false;
        for e in execs {
            let exact = single && !inexact && !e.wrapped && !e.inexact;
            let mut part = self.exec_part(&e.argv);
            if !exact {
                part.opaque = true;
            }
            if e.hidden {
                part.opaque = true;
                part.hidden = true;
            }
            let name = e
                .argv
                .first()
                .map(|w| shell::basename(w))
                .unwrap_or_default();
            let is_git = name == "git" || name == "git.exe";
            let reading = (!e.container && !is_git).then(|| commands::classify(&e.argv));
            // A known command is exact only when every option of it is understood, and when
            // it is the system's: `./ls` or `/tmp/x/cat` may be any program.
            let own_path = e.argv.first().is_some_and(|w| {
                let slashes = w.matches('/').count();
                let system = (w.starts_with("/bin/") && slashes == 2)
                    || (w.starts_with("/usr/bin/") && slashes == 3);
                slashes > 0 && !system
            });
            if let Some(r) = &reading
                && r.known
                && (!r.understood || own_path)
            {
                part.opaque = true;
            }
            let part_opaque = part.opaque;
            let repo = is_git.then(|| part.resources.first().cloned()).flatten();
            any_opaque |= part_opaque;
            self.parts.push(part);
            if e.container {
                fed |= matches!(name, "xargs" | "parallel");
                wrapper_chdir |= changes_directory(&e.argv);
                continue;
            }
            let literal = literal && !e.inexact && !e.hidden;
            let bases = if wrapper_chdir {
                vec![None]
            } else {
                self.bases.clone()
            };
            if is_git {
                if let Some(paths) = commands::git_clean_paths(&e.argv) {
                    let bases = vec![repo];
                    for w in paths {
                        self.file(Operation::FsDelete, &w, true, &[], literal, true, &bases);
                    }
                }
                continue;
            }
            let Some(r) = reading else {
                continue;
            };
            // `mv a b` moves a tree only when a source is a directory: with every source a
            // regular file now, the target is one file, not a tree.
            let files_moved = name == "mv"
                && r.files
                    .iter()
                    .filter(|f| f.op == Operation::FsDelete)
                    .all(|f| !f.recursive && self.names_regular_files(&f.word, literal, &bases))
                && r.files.iter().any(|f| f.op == Operation::FsDelete);
            for f in &r.files {
                if in_find && f.word.contains("{}") {
                    continue;
                }
                let recursive = f.recursive && !(files_moved && f.op == Operation::FsWrite);
                self.file_exe = (r.known && !own_path).then(|| name.to_owned());
                self.file(
                    f.op,
                    &f.word,
                    recursive,
                    &f.filters,
                    literal,
                    part_opaque,
                    &bases,
                );
            }
            self.file_exe = None;
            if r.known
                && own_path
                && let Some(program) = e.argv.first()
            {
                self.loose(program, literal, &bases);
            }
            for (k, w) in r.loose.iter().enumerate() {
                if in_find && w.contains("{}") {
                    continue;
                }
                // The command's own name is a file only when written as a path; then running
                // it reads it, exactly (what it does with its arguments is not known).
                if k == 0 && !r.known {
                    if w.contains('/') {
                        self.file(
                            Operation::FsRead,
                            w,
                            false,
                            &[],
                            literal,
                            part_opaque,
                            &bases,
                        );
                    }
                    continue;
                }
                self.loose(w, literal, &bases);
            }
            for op in &r.hidden_ops {
                self.parts.push(Part::hidden(*op));
            }
            if fed {
                // Operands come from standard input: which files is not known here.
                match r.operand_op {
                    Some(op) => self.parts.push(Part::hidden(op)),
                    None if !r.known => {
                        for op in [Operation::FsRead, Operation::FsWrite, Operation::FsDelete] {
                            self.parts.push(Part::hidden(op));
                        }
                    }
                    None => {}
                }
            }
            for red in &e.redirects {
                self.redirect(red, literal, true);
            }
            if let Some(ch) = &r.chdir {
                if *ch == commands::Chdir::Home {
                    // `cd` alone goes home: that is looking at it.
                    self.file(
                        Operation::FsRead,
                        "~",
                        false,
                        &[],
                        false,
                        part_opaque,
                        &bases,
                    );
                }
                self.chdir(ch, literal);
            }
            in_find |= name == "find"
                && e.argv
                    .iter()
                    .any(|w| matches!(w.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"));
        }
        for red in redirects {
            self.redirect(red, literal, any_opaque);
        }
    }

    /// What one word names, against one working directory.
    fn name(&mut self, word: &str, literal: bool, base: Option<&str>, recursive: bool) -> Named {
        if word.is_empty() || word == "-" || NO_RESOURCE.contains(&word) {
            return Named::Nothing;
        }
        self.resolved += 1;
        if self.resolved > MAX_RESOLVED {
            return Named::Hidden;
        }
        let mut raw = word.to_owned();
        let mut glob = None;
        if literal {
            if raw.starts_with('~') {
                // A quoted `~` is a file named so, not the home directory.
                raw = format!("./{raw}");
            }
        } else {
            if raw.contains(['$', '`'])
                || (raw.contains('{') && (raw.contains(',') || raw.contains("..")))
            {
                return Named::Hidden;
            }
            if raw.starts_with('~') && raw != "~" && !raw.starts_with("~/") {
                // `~user`: another home directory.
                return Named::Hidden;
            }
            if let Some(at) = raw.find(['*', '?', '[']) {
                // A glob: everything it can match lies beneath its literal directory.
                let head = raw.get(..at).unwrap_or_default();
                let dir = match head.rfind('/') {
                    Some(0) => "/".to_owned(),
                    Some(i) => head.get(..i).unwrap_or_default().to_owned(),
                    None => ".".to_owned(),
                };
                let last = raw.rsplit('/').next().unwrap_or_default();
                let only_last = !raw
                    .get(..raw.len() - last.len())
                    .unwrap_or_default()
                    .contains(['*', '?', '[']);
                glob = Some(if only_last && !recursive && !last.is_empty() {
                    vec![last.to_owned()]
                } else {
                    Vec::new()
                });
                raw = dir;
            }
        }
        let relative = !raw.starts_with('/') && !raw.starts_with('~');
        let base = match (relative, base) {
            (true, None) => return Named::Hidden,
            (_, b) => b.unwrap_or(self.ctx.workspace),
        };
        match path::resolve_path_all(&raw, base, self.ctx) {
            Ok(paths) => Named::Paths { paths, glob },
            Err(e) if e.hides() => Named::Hidden,
            Err(_) => Named::Nothing,
        }
    }

    /// A file operand of a known command.
    #[allow(
        clippy::too_many_arguments,
        reason = "one call site; a struct would only rename the arguments"
    )]
    fn file(
        &mut self,
        op: Operation,
        word: &str,
        recursive: bool,
        filters: &[String],
        literal: bool,
        opaque: bool,
        bases: &[Option<String>],
    ) {
        for base in bases {
            match self.name(word, literal, base.as_deref(), recursive) {
                Named::Nothing => {}
                Named::Hidden => self.parts.push(Part::hidden(op)),
                Named::Paths { paths, glob } => {
                    let beneath = match glob {
                        // A glob reached recursively: everything beneath its directory
                        // that the command's own filters let through.
                        Some(_) | None if recursive => Some(Beneath {
                            filters: filters.to_vec(),
                        }),
                        Some(names) => Some(Beneath { filters: names }),
                        None => None,
                    };
                    self.fs_part(op, paths, beneath, opaque);
                }
            }
        }
    }

    /// True when `word` names, from every base, only paths that are regular files now.
    fn names_regular_files(&mut self, word: &str, literal: bool, bases: &[Option<String>]) -> bool {
        bases.iter().all(
            |base| match self.name(word, literal, base.as_deref(), false) {
                Named::Paths { paths, glob: None } => {
                    !paths.is_empty() && paths.iter().all(|p| self.ctx.fs.is_regular_file(p))
                }
                _ => false,
            },
        )
    }

    /// A word whose role is not known: when it looks like a path (or names one that
    /// exists), deny rules see it as read, written and deleted; allow rules never vouch.
    fn loose(&mut self, word: &str, literal: bool, bases: &[Option<String>]) {
        if self.body {
            return;
        }
        let mut candidates = vec![word];
        if let Some((_, value)) = word.split_once('=') {
            // `--file=x`, `KEY=x`.
            candidates = vec![value];
        } else if word.starts_with('-') {
            return;
        }
        for w in candidates {
            let pathy = looks_like_path(w);
            for base in bases {
                let named = self.name(w, literal, base.as_deref(), false);
                let keep = match &named {
                    Named::Nothing => false,
                    Named::Hidden => pathy,
                    Named::Paths { paths, glob } => {
                        pathy || glob.is_some() || paths.iter().any(|p| self.ctx.fs.exists(p))
                    }
                };
                if !keep {
                    continue;
                }
                for op in [Operation::FsRead, Operation::FsWrite, Operation::FsDelete] {
                    match &named {
                        Named::Hidden => self.parts.push(Part::hidden(op)),
                        Named::Paths { paths, glob } => {
                            let beneath = glob.clone().map(|filters| Beneath { filters });
                            self.fs_part(op, paths.clone(), beneath, true);
                        }
                        Named::Nothing => {}
                    }
                }
            }
        }
    }

    fn redirect(&mut self, r: &shell::Redirect, literal: bool, opaque: bool) {
        let op = if r.write {
            Operation::FsWrite
        } else {
            Operation::FsRead
        };
        let bases = self.bases.clone();
        self.file(
            op,
            &r.target,
            false,
            &[],
            literal && !r.inexact,
            opaque,
            &bases,
        );
    }

    fn chdir(&mut self, ch: &commands::Chdir, literal: bool) {
        let mut next = self.bases.clone();
        for base in &self.bases.clone() {
            let to = match ch {
                commands::Chdir::Home => path::resolve_path(self.ctx.home, "/", self.ctx).ok(),
                commands::Chdir::Unknown => None,
                commands::Chdir::To(dir) => match self.name(dir, literal, base.as_deref(), false) {
                    Named::Paths { paths, glob: None } if paths.len() == 1 => {
                        paths.into_iter().next()
                    }
                    _ => None,
                },
            };
            if !next.contains(&to) {
                next.push(to);
            }
        }
        if next.len() > MAX_BASES {
            next.truncate(MAX_BASES);
            if !next.contains(&None) {
                next.push(None);
            }
        }
        self.bases = next;
    }

    /// Adds resources to the last part of the same kind, or a new part.
    fn fs_part(
        &mut self,
        op: Operation,
        paths: Vec<String>,
        beneath: Option<Beneath>,
        opaque: bool,
    ) {
        if let Some(last) = self.parts.last_mut()
            && last.operation == op
            && last.opaque == opaque
            && !last.hidden
            && last.beneath == beneath
            && last.executable == self.file_exe
        {
            for p in paths {
                if !last.resources.contains(&p) {
                    last.resources.push(p);
                }
            }
            return;
        }
        let mut part = Part::new(op);
        part.resources = paths;
        part.opaque = opaque;
        part.beneath = beneath;
        part.executable = self.file_exe.clone();
        self.parts.push(part);
    }

    fn exec_part(&self, argv: &[String]) -> Part {
        let exe = argv.first().map(|w| shell::basename(w).to_owned());
        let is_git = exe.as_deref().is_some_and(|e| e == "git" || e == "git.exe");
        let mut part = Part::new(Operation::ShellExec);
        part.argv = Some(argv.to_vec());
        part.executable = exe;
        if is_git {
            let class = git::classify_argv(argv);
            part.operation = class.operation;
            part.opaque = class.opaque;
            let base = self.cwd.clone().unwrap_or_else(|| {
                path::resolve_path(self.ctx.workspace, "/", self.ctx)
                    .unwrap_or_else(|_| self.ctx.workspace.to_owned())
            });
            let mut repo = Some(base.clone());
            for dir in &class.chdirs {
                repo = repo.and_then(|r| path::resolve_path_strict(dir, &r, self.ctx).ok());
            }
            match repo {
                Some(r) => {
                    if r != base {
                        // `-C` to elsewhere: not what the reader of the command sees.
                        if part.operation == Operation::GitRead {
                            part.operation = Operation::ShellExec;
                        }
                        part.opaque = true;
                    }
                    part.resources.push(r);
                }
                None => {
                    part.opaque = true;
                    part.operation = Operation::Unknown;
                }
            }
        } else if let Some(cwd) = &self.cwd {
            part.resources.push(cwd.clone());
        }
        part
    }
}

/// A wrapper that runs its command in another directory (`env -C DIR`, `sudo -D DIR`).
fn changes_directory(argv: &[String]) -> bool {
    let name = argv.first().map(|w| shell::basename(w)).unwrap_or_default();
    if !matches!(
        name,
        "env" | "sudo" | "doas" | "run0" | "systemd-run" | "nsenter" | "chroot" | "flock"
    ) {
        return false;
    }
    name == "chroot"
        || argv.iter().skip(1).any(|w| {
            matches!(
                w.as_str(),
                "-C" | "--chdir" | "-D" | "--working-directory" | "-w" | "--wd"
            ) || w.starts_with("--chdir=")
                || w.starts_with("--working-directory=")
                || (name == "env" && w.starts_with("-C"))
        })
}

/// A tool named `git` (or `git_command`, `run_git`, …): `{"args": ["status", "--short"]}`,
/// `{"args": "status --short"}`, `{"command": "git add README.md"}` are the command line
/// `git status --short`, … classified like that command typed in a shell. A string that is
/// not one simple command (`status && rm -rf /`) is opaque (its segments are still shown to
/// deny rules); a subcommand git does not know is `unknown` (an alias can run anything).
fn git_cli_parts(call: &ToolCall, ctx: &NormalizeContext) -> Vec<Part> {
    let Some(args) = args_object(call) else {
        return vec![opaque(Operation::Unknown)];
    };
    let Some((_, raw)) = first_present(args, None, &["args", "argv", "arguments", "command"])
    else {
        return vec![opaque(Operation::Unknown)];
    };
    let mut cwd: Option<String> = None;
    if let Some((_, v)) = first_present(args, None, CWD_PARAMS) {
        match v {
            Value::String(s) => match path::resolve_path_strict(s, ctx.workspace, ctx) {
                Ok(p) => cwd = Some(p),
                Err(_) => return vec![opaque(Operation::Unknown)],
            },
            Value::Null => {}
            _ => return vec![opaque(Operation::Unknown)],
        }
    }
    let with_git = |mut words: Vec<String>| {
        if words.first().map(|w| shell::basename(w)) != Some("git") {
            words.insert(0, "git".to_owned());
        }
        words
    };
    let mut out = ShellOut::new(cwd, ctx);
    match raw {
        Value::Array(items) => {
            let words: Option<Vec<String>> = items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect();
            match words {
                Some(words) if !words.is_empty() => {
                    let argv = with_git(words);
                    // Exec form: nothing is expanded, but a server that joins the array into
                    // a shell string would run what the metacharacters say.
                    let meta = argv.iter().any(|w| shell::has_shell_meta(w));
                    out.argv(&argv, meta);
                }
                _ => out.parts.push(opaque(Operation::Unknown)),
            }
        }
        Value::String(s) => match scan(s) {
            Scan::Simple(words) if !words.is_empty() => out.argv(&with_git(words), false),
            _ => {
                let line = if s.trim_start().starts_with("git ") {
                    s.clone()
                } else {
                    format!("git {s}")
                };
                out.command_string(&line);
                for p in &mut out.parts {
                    p.opaque = true;
                }
            }
        },
        _ => out.parts.push(opaque(Operation::Unknown)),
    }
    let mut parts = out.parts;
    for p in &mut parts {
        let is_git = p.executable.as_deref() == Some("git");
        if is_git && p.operation == Operation::ShellExec && p.opaque && git_sub_unknown(p) {
            p.operation = Operation::Unknown;
        }
    }
    if parts.is_empty() {
        parts.push(opaque(Operation::Unknown));
    }
    parts
}

/// True when a git part's subcommand is one git does not know (an alias, a typo).
fn git_sub_unknown(p: &Part) -> bool {
    p.argv.as_deref().is_some_and(git::unknown_subcommand)
}

/// Arguments of mcp-server-git tools that are free text, not refs or paths.
const GIT_FREE_TEXT: &[&str] = &["message", "msg", "description", "body", "title"];
const REPO_PARAMS: &[&str] = &["repo_path", "repoPath", "repository", "repo", "path", "cwd"];

fn git_tool_parts(call: &ToolCall, m: &ToolMapping, ctx: &NormalizeContext) -> Vec<Part> {
    let Some(args) = args_object(call) else {
        return vec![opaque(Operation::Unknown)];
    };
    let sub = m.git_subcommand.as_deref().unwrap_or_default();
    let op = m
        .operation
        .filter(|o| o.is_git())
        .or_else(|| git::classify_tool(sub));
    let Some(op) = op else {
        return vec![opaque(Operation::Unknown)];
    };
    let repo_names: Vec<String> = if m.path_params.is_empty() {
        REPO_PARAMS.iter().map(|s| (*s).to_owned()).collect()
    } else {
        m.path_params.clone()
    };
    let mut part = Part::new(op);
    let mut bad = false;
    let mut repo: Option<String> = None;
    for name in &repo_names {
        if let Some(v) = args.get(name) {
            for r in path::resolve_value(v, ctx.workspace, ctx) {
                match r {
                    Ok(p) => {
                        if repo.is_none() {
                            repo = Some(p.clone());
                        }
                        if !part.resources.contains(&p) {
                            part.resources.push(p);
                        }
                    }
                    Err(_) => bad = true,
                }
            }
            break;
        }
    }
    let base = repo.unwrap_or_else(|| ctx.workspace.to_owned());
    let mut injection = false;
    for (name, value) in args {
        if repo_names.contains(name) || GIT_FREE_TEXT.contains(&name.as_str()) {
            continue;
        }
        let strings: Vec<&str> = match value {
            Value::String(s) => vec![s.as_str()],
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        for s in &strings {
            // Flag injection: a ref or path that starts with `-` is read as an option by git.
            if s.trim_start().starts_with('-') {
                injection = true;
            }
            if s.contains('\0') {
                bad = true;
            }
        }
        if matches!(name.as_str(), "files" | "paths" | "file" | "path") {
            for s in strings {
                match path::resolve_path_all(s, &base, ctx) {
                    Ok(all) => {
                        for p in all {
                            if !part.resources.contains(&p) {
                                part.resources.push(p);
                            }
                        }
                    }
                    Err(_) => bad = true,
                }
            }
        }
    }
    if injection || bad {
        part.operation = Operation::Unknown;
        part.opaque = true;
        part.hidden |= bad;
    }
    vec![part]
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
