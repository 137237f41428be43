//! Filesystem adapter: which arguments hold paths, and how a path becomes canonical.

use serde_json::Value;

use super::{NormalizeContext, for_each_word};
use crate::fsfacts::{ServerProcess, lexical_normalize};

/// The longest path the kernel accepts (`PATH_MAX`, with its NUL) and the longest component
/// (`NAME_MAX`): anything longer cannot name a file, and is not guessed at.
const PATH_MAX: usize = 4096;
const NAME_MAX: usize = 255;

/// How many magic links or symlinks into `/proc` one path may pass through.
const MAX_MAGIC_HOPS: usize = 8;

/// Why a path could not be made canonical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PathError {
    Nul,
    Empty,
    NotAString,
    Unresolvable,
    /// Longer than `PATH_MAX`, or a component longer than `NAME_MAX`.
    TooLong,
    /// A `/proc` or `/dev/fd` link whose target is not known with certainty (another
    /// process's root, an open file descriptor, …).
    Magic,
}

impl PathError {
    /// True when the value was meant as a path but names no place that can be known
    /// before the call runs (as opposed to a value that is not a path at all).
    pub(crate) fn hides(&self) -> bool {
        matches!(
            self,
            PathError::Nul | PathError::Unresolvable | PathError::TooLong | PathError::Magic
        )
    }
}

/// The kernel's reading of one magic link at the start of `path` (absolute, normalised)
/// for the server process: `/dev/fd`, `/dev/std{in,out,err}`, `/proc/self`,
/// `/proc/thread-self`, `/proc/<pid>/root`, `/proc/<pid>/cwd` (also under `task/<tid>`).
/// `Ok(None)`: nothing magic. `Err`: a link whose target is not certain (another process's
/// root or working directory, `fd/N`, `exe`, `map_files`, or the server is not known).
fn magic_step(path: &str, server: &LazyServer) -> Result<Option<String>, PathError> {
    // The common case, without asking the filesystem facts anything.
    if !(path.starts_with("/proc/") || path.starts_with("/dev/")) {
        return Ok(None);
    }
    let server = server.get();
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let join = |head: &str, rest: &[&str]| -> String {
        let mut out = head.trim_end_matches('/').to_owned();
        for c in rest {
            out.push('/');
            out.push_str(c);
        }
        if out.is_empty() {
            out.push('/');
        }
        out
    };
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match comps.as_slice() {
        ["dev", "fd", rest @ ..] => Ok(Some(join("/proc/self/fd", rest))),
        ["dev", "stdin", rest @ ..] => Ok(Some(join("/proc/self/fd/0", rest))),
        ["dev", "stdout", rest @ ..] => Ok(Some(join("/proc/self/fd/1", rest))),
        ["dev", "stderr", rest @ ..] => Ok(Some(join("/proc/self/fd/2", rest))),
        ["proc", "self" | "thread-self", rest @ ..] => match server.pid {
            Some(pid) => Ok(Some(join(&format!("/proc/{pid}"), rest))),
            None => match rest {
                ["root", tail @ ..] => server
                    .root
                    .as_deref()
                    .map(|r| Some(join(r, tail)))
                    .ok_or(PathError::Magic),
                ["cwd", tail @ ..] => server
                    .cwd
                    .as_deref()
                    .map(|r| Some(join(r, tail)))
                    .ok_or(PathError::Magic),
                _ => Err(PathError::Magic),
            },
        },
        ["proc", pid, "task", tid, link, rest @ ..]
            if numeric(pid)
                && numeric(tid)
                && matches!(*link, "root" | "cwd" | "fd" | "exe" | "map_files") =>
        {
            let mut out = vec!["proc", *pid, *link];
            out.extend_from_slice(rest);
            Ok(Some(join("", &out)))
        }
        ["proc", pid, link @ ("root" | "cwd"), rest @ ..] if numeric(pid) => {
            let ours = server.pid.is_some_and(|p| p.to_string() == *pid);
            let target = match *link {
                "root" => server.root.as_deref(),
                _ => server.cwd.as_deref(),
            };
            match target {
                Some(t) if ours => Ok(Some(join(t, rest))),
                _ => Err(PathError::Magic),
            }
        }
        ["proc", pid, "fd" | "map_files", _, ..] | ["proc", pid, "exe", ..] if numeric(pid) => {
            Err(PathError::Magic)
        }
        _ => Ok(None),
    }
}

/// The server's facts, asked for only when a path goes through `/proc` or `/dev` (the binary
/// reads them from `/proc/<pid>` each time).
struct LazyServer<'a> {
    fs: &'a dyn crate::fsfacts::FsFacts,
    facts: std::cell::OnceCell<ServerProcess>,
}

impl LazyServer<'_> {
    fn get(&self) -> &ServerProcess {
        self.facts.get_or_init(|| self.fs.server_process())
    }
}

/// Rewrites every magic link at the start of `path` (see [`magic_step`]).
fn resolve_magic(path: &str, server: &LazyServer) -> Result<String, PathError> {
    let mut current = path.to_owned();
    for _ in 0..MAX_MAGIC_HOPS {
        match magic_step(&current, server)? {
            Some(next) => current = lexical_normalize(&next).ok_or(PathError::Unresolvable)?,
            None => return Ok(current),
        }
    }
    Err(PathError::Magic)
}

fn check_length(path: &str) -> Result<(), PathError> {
    if path.len() >= PATH_MAX || path.split('/').any(|c| c.len() > NAME_MAX) {
        return Err(PathError::TooLong);
    }
    Ok(())
}

/// Canonicalises a normalised absolute path for the server: magic links first, then
/// symlinks through [`FsFacts::canonicalize`](crate::fsfacts::FsFacts::canonicalize); a
/// symlink that leads into `/proc` or `/dev/fd` is read again.
///
/// A canonical path that still starts with a magic link (the filesystem facts stop at a
/// symlink whose target is in `/proc` or `/dev`, and return that target and the rest, `..`
/// included) is walked again component by component, so that `..` climbs from where the
/// magic link leads for the server.
fn canonical_for_server(path: &str, ctx: &NormalizeContext) -> Result<String, PathError> {
    canonical_depth(path, ctx, 0)
}

fn canonical_depth(path: &str, ctx: &NormalizeContext, depth: usize) -> Result<String, PathError> {
    let server = LazyServer {
        fs: ctx.fs,
        facts: std::cell::OnceCell::new(),
    };
    let plain = resolve_magic(path, &server)?;
    check_length(&plain)?;
    let canonical = ctx.fs.canonicalize(&plain).ok_or(PathError::Unresolvable)?;
    if magic_step(&canonical, &server)?.is_none() && !canonical.split('/').any(|c| c == "..") {
        return Ok(canonical);
    }
    if depth >= MAX_MAGIC_HOPS {
        return Err(PathError::Magic);
    }
    physical_depth(&canonical, ctx, depth + 1)
}

/// Resolves one path argument the way `@modelcontextprotocol/server-filesystem` reads it:
/// `~` and `~/…` expand to the home directory, relative paths resolve against the workspace,
/// `file://` URLs become their path; then lexical normalisation and
/// [`FsFacts::canonicalize`](crate::fsfacts::FsFacts::canonicalize) (symlinks).
pub(crate) fn resolve_path(
    raw: &str,
    base: &str,
    ctx: &NormalizeContext,
) -> Result<String, PathError> {
    if raw.contains('\0') {
        return Err(PathError::Nul);
    }
    if raw.is_empty() {
        return Err(PathError::Empty);
    }
    if raw.len() >= PATH_MAX {
        return Err(PathError::TooLong);
    }
    let expanded: String = if raw == "~" {
        ctx.home.to_owned()
    } else if let Some(rest) = raw.strip_prefix("~/") {
        format!("{}/{}", ctx.home, rest)
    } else if raw.len() >= 7
        && raw
            .get(..7)
            .is_some_and(|p| p.eq_ignore_ascii_case("file://"))
    {
        // A `file:` URL names the path in it; a server that understands URLs reads that file.
        let parsed = url::Url::parse(raw).map_err(|_| PathError::Unresolvable)?;
        if parsed
            .host_str()
            .is_some_and(|h| !h.is_empty() && h != "localhost")
        {
            return Err(PathError::Unresolvable);
        }
        let decoded = percent_encoding::percent_decode_str(parsed.path())
            .decode_utf8()
            .map_err(|_| PathError::Unresolvable)?;
        if decoded.contains('\0') {
            return Err(PathError::Nul);
        }
        decoded.into_owned()
    } else {
        raw.to_owned()
    };
    let absolute = if expanded.starts_with('/') {
        expanded
    } else {
        format!("{base}/{expanded}")
    };
    check_length(&absolute)?;
    let lexical = lexical_normalize(&absolute).ok_or(PathError::Unresolvable)?;
    canonical_for_server(&lexical, ctx)
}

/// Like [`resolve_path`], plus the path the kernel would open when they differ. The
/// reference server collapses `..` lexically before resolving symlinks; the kernel resolves
/// `link/..` to the parent of the link's *target*. A path with `..` behind a symlink names
/// both, so both are returned (deny rules see either; allow rules must cover both).
pub(crate) fn resolve_path_all(
    raw: &str,
    base: &str,
    ctx: &NormalizeContext,
) -> Result<Vec<String>, PathError> {
    let first = resolve_path(raw, base, ctx)?;
    let mut out = vec![first];
    let is_file_url = raw
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("file:"));
    if is_file_url {
        let lower = raw.to_ascii_lowercase();
        if lower.contains("..") || lower.contains("%2e") {
            // Dot segments inside a URL: which reading the server uses is unknowable.
            return Err(PathError::Unresolvable);
        }
    } else if raw.split('/').any(|c| c == "..") {
        let absolute = if raw.starts_with('/') {
            raw.to_owned()
        } else if raw == "~" || raw.starts_with("~/") {
            format!("{}{}", ctx.home, raw.get(1..).unwrap_or_default())
        } else {
            format!("{base}/{raw}")
        };
        let physical = physical_path(&absolute, ctx)?;
        if !out.contains(&physical) {
            out.push(physical);
        }
    }
    Ok(out)
}

/// A path that must name exactly one place (a working directory, a repository): an error
/// when the lexical and the kernel reading disagree.
pub(crate) fn resolve_path_strict(
    raw: &str,
    base: &str,
    ctx: &NormalizeContext,
) -> Result<String, PathError> {
    let mut all = resolve_path_all(raw, base, ctx)?;
    if all.len() != 1 {
        return Err(PathError::Unresolvable);
    }
    all.pop().ok_or(PathError::Unresolvable)
}

/// Kernel-style resolution: components in order, each prefix canonicalised (magic links of
/// the server included: `/proc/self/cwd/..` is the parent of the server's working directory)
/// before `..` climbs from it.
fn physical_path(absolute: &str, ctx: &NormalizeContext) -> Result<String, PathError> {
    physical_depth(absolute, ctx, 0)
}

fn physical_depth(
    absolute: &str,
    ctx: &NormalizeContext,
    depth: usize,
) -> Result<String, PathError> {
    let mut current = "/".to_owned();
    for component in absolute.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                current = match current.rfind('/') {
                    Some(0) | None => "/".to_owned(),
                    Some(i) => current.get(..i).unwrap_or("/").to_owned(),
                };
            }
            c => {
                let next = if current == "/" {
                    format!("/{c}")
                } else {
                    format!("{current}/{c}")
                };
                current = canonical_depth(&next, ctx, depth)?;
            }
        }
    }
    Ok(current)
}

/// Resolves every path in an argument value: a string, or an array of strings.
pub(crate) fn resolve_value(
    value: &Value,
    base: &str,
    ctx: &NormalizeContext,
) -> Vec<Result<String, PathError>> {
    let one = |s: &str| -> Vec<Result<String, PathError>> {
        match resolve_path_all(s, base, ctx) {
            Ok(all) => all.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        }
    };
    match value {
        Value::String(s) => one(s),
        Value::Array(items) => items
            .iter()
            .flat_map(|item| match item {
                Value::String(s) => one(s),
                _ => vec![Err(PathError::NotAString)],
            })
            .collect(),
        Value::Null => Vec::new(),
        _ => vec![Err(PathError::NotAString)],
    }
}

const PATH_WORDS: &[&str] = &[
    "path",
    "paths",
    "pathname",
    "file",
    "files",
    "filename",
    "filenames",
    "filepath",
    "filepaths",
    "source",
    "sources",
    "src",
    "destination",
    "dest",
    "dst",
    "dir",
    "dirs",
    "directory",
    "directories",
    "folder",
    "folders",
    "target",
    "root",
    "cwd",
];

/// True when an argument name reads as a path by its words (`filePath`, `source_dir`, …).
pub(crate) fn is_path_name(name: &str) -> bool {
    let mut pathy = false;
    let disqualified = for_each_word(name, |w| {
        pathy |= PATH_WORDS.contains(&w);
        DISQUALIFYING.contains(&w)
    });
    pathy && !disqualified
}

/// `file_content`, `path_pattern`, `file_type`… name something about a file, not a path.
const DISQUALIFYING: &[&str] = &[
    "content", "contents", "text", "data", "pattern", "patterns", "type", "size", "mode",
    "encoding", "exclude", "count", "limit", "message", "body", "edits",
];

fn is_disqualified_name(name: &str) -> bool {
    for_each_word(name, |w| DISQUALIFYING.contains(&w))
}

/// Names of the properties that the tool's input schema marks as paths: path-like names,
/// `format: path` (or `uri-reference` on a path-like name), or a description that talks about a
/// path or directory. Only string or array-of-string properties count.
pub(crate) fn schema_path_params(definition: Option<&Value>) -> Vec<String> {
    let Some(props) = definition
        .and_then(|d| d.get("inputSchema"))
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, prop) in props {
        if !is_stringish(prop) || is_disqualified_name(name) {
            continue;
        }
        let format = prop
            .get("format")
            .or_else(|| prop.get("items").and_then(|i| i.get("format")))
            .and_then(Value::as_str)
            .unwrap_or("");
        let description = prop
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        let marked = format == "path"
            || format == "file-path"
            || (format == "uri-reference" && is_path_name(name))
            || is_path_name(name)
            || description_mentions_path(description);
        if marked {
            out.push(name.clone());
        }
    }
    out
}

fn is_stringish(prop: &Value) -> bool {
    let ty = prop.get("type");
    let is = |v: Option<&Value>, want: &str| match v {
        Some(Value::String(s)) => s == want,
        Some(Value::Array(a)) => a.iter().any(|t| t.as_str() == Some(want)),
        _ => false,
    };
    if ty.is_none() {
        // Untyped: could be anything, including a path.
        return true;
    }
    is(ty, "string")
        || (is(ty, "array")
            && (prop.get("items").is_none()
                || is(prop.get("items").and_then(|i| i.get("type")), "string")))
}

fn description_mentions_path(description: &str) -> bool {
    for_each_word(description, |w| {
        matches!(
            w,
            "path" | "paths" | "filepath" | "filename" | "directory" | "directories" | "folder"
        )
    })
}
