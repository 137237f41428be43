//! Built-in mappings: what a tool is (files, shell, git, HTTP) from its name and definition.

use super::{RecursiveMapping, ToolMapping, git};
use crate::action::Operation;
use serde_json::Value;

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
