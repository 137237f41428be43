//! A git tool's call → parts: a `git` command line, or an mcp-server-git tool's arguments.

use super::shell_parts::ShellOut;
use super::{
    CWD_PARAMS, NormalizeContext, Scan, ToolCall, ToolMapping, args_object, first_present, git,
    opaque, path, scan, shell,
};
use crate::action::{Operation, Part};
use serde_json::Value;

/// A tool named `git` (or `git_command`, `run_git`, …): `{"args": ["status", "--short"]}`,
/// `{"args": "status --short"}`, `{"command": "git add README.md"}` are the command line
/// `git status --short`, … classified like that command typed in a shell. A string that is
/// not one simple command (`status && rm -rf /`) is opaque (its segments are still shown to
/// deny rules); a subcommand git does not know is `unknown` (an alias can run anything).
pub(super) fn git_cli_parts(call: &ToolCall, ctx: &NormalizeContext) -> Vec<Part> {
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

pub(super) fn git_tool_parts(
    call: &ToolCall,
    m: &ToolMapping,
    ctx: &NormalizeContext,
) -> Vec<Part> {
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
