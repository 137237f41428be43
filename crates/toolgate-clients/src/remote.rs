//! Remote (HTTP) server entries: reading what each client writes for a remote MCP server,
//! and the `toolgate wrap --url` entry `init` puts in its place.
//!
//! The shapes, as the clients document them (checked December 2026):
//! - Claude Code (code.claude.com/docs/en/mcp): `{"type": "http" | "sse", "url", "headers"}`;
//!   `${VAR}` and `${VAR:-default}` are expanded in `command`, `args`, `env`, `url` and
//!   `headers`, and an unset `${VAR}` without a default makes the entry fail to load.
//! - VS Code (code.visualstudio.com/docs/copilot/reference/mcp-configuration):
//!   `{"type": "http" | "sse", "url", "headers"}`; `${input:id}`, `${env:NAME}` and the
//!   predefined variables are resolved in `args`, `env` and `headers`; a bare `${NAME}` is
//!   none of its variables and stays as written (microsoft/vscode#264448, #303156).
//! - Cursor (cursor.com/docs/mcp): `{"url", "headers"}`; `${env:NAME}`, `${userHome}`,
//!   `${workspaceFolder}` in `command`, `args`, `env`, `url` and `headers`.
//! - Windsurf (docs.windsurf.com/windsurf/cascade/mcp): `{"serverUrl", "headers"}`;
//!   `${env:NAME}` (and `${file:…}`) interpolation.
//! - Claude Desktop has no remote entries of its own: people run the npm `mcp-remote`
//!   bridge (`npx [-y] mcp-remote URL [--header K:V]… [--transport …]`), which expands
//!   `${VAR}` in `--header` values from its environment (the entry's `env`).
//!
//! The wrapped entry is a stdio entry: `command` = toolgate, `args` = `wrap --server NAME
//! [--policy P] --url URL [--transport T] [--header 'Name: value']…`, and the original entry,
//! byte for byte, under `x-toolgate-upstream`. A header value that is a secret, or that uses
//! the client's variables, never goes into `args`: it goes into the entry's `env` under
//! `TOOLGATE_HDR_<SERVER>_<NAME>` (where the client expands its variables as it did in
//! `headers`), and the argument refers to it as `${TOOLGATE_HDR_…}`, which `toolgate wrap`
//! expands from its own environment. Claude Code expands `${…}` in `args` too (and drops an
//! entry whose variable is unset), so there the reference is written
//! `${TOOLGATE_DOLLAR:-$}{TOOLGATE_HDR_…}`: Claude Code turns its own default syntax into a
//! `$`, and toolgate receives `${TOOLGATE_HDR_…}`.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

pub use crate::entries::Dialect;
use crate::entries::{DocError, MapSpec, UPSTREAM_KEY, entries, wrap_options_with_values};

/// The variable Claude Code must not have set: its default, `$`, is how a literal `${`
/// reaches toolgate through Claude Code's expansion.
pub const DOLLAR_VAR: &str = "TOOLGATE_DOLLAR";

/// The transport an entry asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Whatever the server speaks (Streamable HTTP, then legacy SSE).
    Auto,
    /// Streamable HTTP only.
    StreamableHttp,
    /// The legacy HTTP+SSE transport (2024-11-05).
    Sse,
}

impl Transport {
    /// The value of `toolgate wrap --transport`.
    pub fn arg(self) -> &'static str {
        match self {
            Transport::Auto => "auto",
            Transport::StreamableHttp => "streamable-http",
            Transport::Sse => "sse",
        }
    }
}

/// Where a header came from, which decides how its value is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderOrigin {
    /// A `headers` member of a JSON entry: the value is in the client's syntax.
    Json,
    /// An `mcp-remote` `--header Name:value` argument: `${VAR}` is read from the entry's
    /// `env` (then the environment), as `mcp-remote` and `toolgate wrap` both do.
    McpRemote,
}

/// One header of a remote entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The header's name.
    pub name: String,
    /// Its value as written in the configuration (variables unexpanded).
    pub value: String,
}

/// What a remote entry asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSpec {
    /// The server's URL, as written.
    pub url: String,
    /// The transport.
    pub transport: Transport,
    /// The headers, in order.
    pub headers: Vec<Header>,
    /// How the header values are read.
    pub origin: HeaderOrigin,
    /// `mcp-remote --allow-http`.
    pub allow_http: bool,
    /// The entry's keys the wrapped entry does not keep (they describe the remote server,
    /// or are rebuilt: `env`).
    pub consumed: Vec<&'static str>,
    /// The entry's `env`, when it has one.
    pub env: Vec<(String, String)>,
    /// OpenCode's remote entry (`type: remote`): its wrapped form is a local one, `type:
    /// local` with `command` a list and the variables in `environment`.
    pub opencode: bool,
}

/// Keys that only mean something for a remote entry of one client and that `toolgate wrap`
/// cannot carry over: such an entry is left as it is.
const UNTRANSLATABLE: &[(&str, &str)] = &[
    ("oauth", "its `oauth` settings"),
    ("headersHelper", "its `headersHelper` command"),
    ("auth", "its `auth` settings"),
    ("authProviderType", "its `authProviderType`"),
];

fn string_of<'v>(entry: &'v Map<String, Value>, key: &str) -> Result<Option<&'v str>, String> {
    match entry.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(format!("`{key}` is not a string")),
    }
}

/// Reads a remote entry. `Ok(None)`: not a remote entry (a stdio server, or something
/// else); `Err(reason)`: a remote entry `init` leaves alone, and why.
pub fn analyze(entry: &Map<String, Value>) -> Result<Option<RemoteSpec>, String> {
    let kind = string_of(entry, "type")?;
    let url_key = ["url", "serverUrl", "httpUrl"]
        .into_iter()
        .find(|k| entry.contains_key(*k));
    let transport = match kind {
        // `local`: Copilot CLI's name for a stdio server.
        None | Some("stdio" | "local") if url_key.is_none() => return mcp_remote(entry),
        Some(kind @ ("stdio" | "local")) => {
            return Err(format!("`type: {kind}` with a URL: fix the entry first"));
        }
        None => Transport::Auto,
        // OpenCode's (Streamable HTTP, then SSE): wrapped as a local server.
        Some("remote") => Transport::Auto,
        Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => {
            Transport::StreamableHttp
        }
        Some("sse") => Transport::Sse,
        Some(other) => {
            return Err(format!(
                "remote server of `type: {other}`, a transport toolgate does not know"
            ));
        }
    };
    let Some(url_key) = url_key else {
        return Err(format!(
            "remote server (`type: {}`) without a `url`",
            kind.unwrap_or_default()
        ));
    };
    let transport = if url_key == "httpUrl" {
        Transport::StreamableHttp
    } else {
        transport
    };
    if entry.contains_key("command") {
        return Err(format!(
            "has both `{url_key}` and `command`: fix the entry first"
        ));
    }
    for (key, what) in UNTRANSLATABLE {
        if entry.contains_key(*key) {
            return Err(format!(
                "remote server with {what}, which `toolgate wrap --url` cannot take over: left unwrapped"
            ));
        }
    }
    let url = string_of(entry, url_key)?
        .ok_or_else(|| format!("`{url_key}` is missing"))?
        .to_owned();
    check_url(&url)?;
    let headers = match entry.get("headers") {
        None => Vec::new(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(name, value)| match value {
                Value::String(v) => Ok(Header {
                    name: name.clone(),
                    value: v.clone(),
                }),
                _ => Err(format!("header `{name}` is not a string")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`headers` is not an object".to_owned()),
    };
    for h in &headers {
        check_header_name(&h.name)?;
    }
    let mut consumed = vec!["type", "url", "serverUrl", "httpUrl", "headers", "env"];
    consumed.retain(|k| entry.contains_key(*k));
    Ok(Some(RemoteSpec {
        url,
        transport,
        headers,
        origin: HeaderOrigin::Json,
        allow_http: false,
        consumed,
        env: env_of(entry)?,
        opencode: kind == Some("remote"),
    }))
}

fn env_of(entry: &Map<String, Value>) -> Result<Vec<(String, String)>, String> {
    match entry.get("env") {
        None => Ok(Vec::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(format!("`env.{k}` is not a string")),
            })
            .collect(),
        Some(_) => Err("`env` is not an object".to_owned()),
    }
}

/// The URL must be one `toolgate wrap --url` takes, and must not carry a secret or a
/// variable into `args`.
fn check_url(url: &str) -> Result<(), String> {
    if url.contains("${") {
        return Err(
            "the URL uses a variable, which would be expanded into `toolgate`'s command line: left unwrapped"
                .to_owned(),
        );
    }
    let parsed = url::Url::parse(url).map_err(|e| format!("the URL `{url}` is invalid: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "the URL has scheme `{}`: only http and https",
            parsed.scheme()
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(
            "the URL carries credentials, which would end up in `toolgate`'s command line: left unwrapped"
                .to_owned(),
        );
    }
    if let Some((name, _)) = parsed.query_pairs().find(|(n, _)| secret_name(n)) {
        return Err(format!(
            "the URL's query parameter `{name}` looks like a credential, which would end up in `toolgate`'s command line: left unwrapped"
        ));
    }
    Ok(())
}

fn check_header_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "header name `{}` is not a valid header name",
            name.escape_debug()
        ))
    }
}

/// The base name of a path-like command (`/usr/bin/npx`, `npx.cmd` → `npx`).
fn program_name(command: &str) -> &str {
    let base = command.rsplit(['/', '\\']).next().unwrap_or(command);
    base.strip_suffix(".cmd")
        .or_else(|| base.strip_suffix(".exe"))
        .unwrap_or(base)
}

/// An entry that runs `mcp-remote` (directly, or through `npx`/`bunx`/`pnpx`).
fn mcp_remote(entry: &Map<String, Value>) -> Result<Option<RemoteSpec>, String> {
    let Some(Value::String(command)) = entry.get("command") else {
        return Ok(None);
    };
    let args: Vec<&str> = match entry.get("args") {
        None => Vec::new(),
        Some(Value::Array(items)) => {
            let strings: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
            match strings {
                Some(s) => s,
                None => return Ok(None),
            }
        }
        Some(_) => return Ok(None),
    };
    let is_package = |a: &str| a == "mcp-remote" || a.starts_with("mcp-remote@");
    let rest: &[&str] = match program_name(command) {
        "mcp-remote" => &args,
        "npx" | "bunx" | "pnpx" => {
            let mut i = 0;
            while args
                .get(i)
                .is_some_and(|a| matches!(*a, "-y" | "--yes" | "-q" | "--quiet"))
            {
                i += 1;
            }
            match args.get(i) {
                Some(a) if is_package(a) => args.get(i + 1..).unwrap_or_default(),
                _ => return Ok(None),
            }
        }
        _ => return Ok(None),
    };
    let mut url = None;
    let mut headers = Vec::new();
    let mut transport = Transport::Auto;
    let mut allow_http = false;
    let mut i = 0;
    while let Some(arg) = rest.get(i) {
        let value = rest.get(i + 1).copied();
        match *arg {
            "--header" => {
                let Some(value) = value else {
                    return Err("`mcp-remote --header` without a value".to_owned());
                };
                let Some((name, v)) = value.split_once(':') else {
                    return Err(format!(
                        "`mcp-remote --header {value}` has no `:`: left unwrapped"
                    ));
                };
                let name = name.trim();
                check_header_name(name)?;
                headers.push(Header {
                    name: name.to_owned(),
                    value: v.trim().to_owned(),
                });
                i += 2;
            }
            "--transport" => {
                transport = match value {
                    Some("http-only") => Transport::StreamableHttp,
                    Some("sse-only") => Transport::Sse,
                    Some("http-first") => Transport::Auto,
                    Some(other) => {
                        return Err(format!(
                            "`mcp-remote --transport {other}` has no `toolgate wrap` equivalent: left unwrapped"
                        ));
                    }
                    None => return Err("`mcp-remote --transport` without a value".to_owned()),
                };
                i += 2;
            }
            "--allow-http" => {
                allow_http = true;
                i += 1;
            }
            flag if flag.starts_with('-') => {
                return Err(format!(
                    "runs `mcp-remote` with `{flag}`, which `toolgate wrap --url` does not understand: left unwrapped rather than dropping it"
                ));
            }
            positional if url.is_none() => {
                url = Some(positional.to_owned());
                i += 1;
            }
            positional => {
                return Err(format!(
                    "runs `mcp-remote` with the argument `{positional}` (a callback port?), which `toolgate wrap --url` does not understand: left unwrapped rather than dropping it"
                ));
            }
        }
    }
    let url = url.ok_or_else(|| "runs `mcp-remote` without a URL".to_owned())?;
    check_url(&url)?;
    let mut consumed = vec!["command", "args", "env"];
    consumed.retain(|k| entry.contains_key(*k));
    Ok(Some(RemoteSpec {
        url,
        transport,
        headers,
        origin: HeaderOrigin::McpRemote,
        allow_http,
        consumed,
        env: env_of(entry)?,
        opencode: false,
    }))
}

/// A header name that says its value is a credential.
pub fn secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [
        "auth",
        "token",
        "key",
        "secret",
        "cookie",
        "password",
        "passwd",
        "credential",
        "session",
        "signature",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// A value that looks like a credential whatever its header's name.
pub fn secret_value(value: &str) -> bool {
    let v = value.trim();
    let lower = v.to_ascii_lowercase();
    if ["bearer ", "basic ", "token ", "digest ", "apikey "]
        .iter()
        .any(|p| lower.starts_with(p))
    {
        return true;
    }
    const PREFIXES: &[&str] = &[
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "glpat-",
        "sk-",
        "sk_",
        "rk_",
        "xoxb-",
        "xoxp-",
        "xoxa-",
        "xapp-",
        "akia",
        "eyj",
        "aiza",
        "ya29.",
        "lin_api_",
        "ntn_",
        "secret_",
    ];
    if PREFIXES.iter().any(|p| lower.starts_with(p)) {
        return true;
    }
    // One long token of mixed letters and digits.
    v.len() >= 20
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.+/=~".contains(&b))
        && v.bytes().any(|b| b.is_ascii_digit())
        && v.bytes().any(|b| b.is_ascii_alphabetic())
}

/// `TOOLGATE_HDR_<SERVER>_<NAME>`, upper case, every other character `_`.
fn env_name(server: &str, header: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("TOOLGATE_HDR_{}_{}", clean(server), clean(header))
}

/// A reference to the environment variable `var` that reaches `toolgate wrap` as
/// `${var}` through the client's own expansion of `args`.
pub fn reference(var: &str, dialect: Dialect) -> String {
    match dialect {
        Dialect::Other => format!("${{{var}}}"),
        Dialect::ClaudeCode => format!("${{{DOLLAR_VAR}:-$}}{{{var}}}"),
    }
}

/// The `args` and the added `env` members of the wrapped entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrapped {
    /// `wrap …` (everything after `command`).
    pub args: Vec<String>,
    /// New `env` members (name, value as the client reads it).
    pub env_added: Vec<(String, String)>,
}

/// The wrapped form of a remote entry named `server`.
pub fn wrapped_args(
    server: &str,
    spec: &RemoteSpec,
    policy: Option<&str>,
    workspace: Option<&str>,
    dialect: Dialect,
) -> Wrapped {
    let mut args = vec!["wrap".to_owned(), "--server".to_owned(), server.to_owned()];
    if let Some(policy) = policy {
        args.push("--policy".to_owned());
        args.push(policy.to_owned());
    }
    if let Some(workspace) = workspace {
        args.push("--workspace".to_owned());
        args.push(workspace.to_owned());
    }
    args.push("--url".to_owned());
    args.push(spec.url.clone());
    if spec.transport != Transport::Auto {
        args.push("--transport".to_owned());
        args.push(spec.transport.arg().to_owned());
    }
    if spec.allow_http {
        args.push("--allow-http".to_owned());
    }
    let mut taken: BTreeSet<String> = spec.env.iter().map(|(k, _)| k.clone()).collect();
    let mut env_added = Vec::new();
    for header in &spec.headers {
        let value = header.value.as_str();
        let keep_in_args = match spec.origin {
            // A reference to the entry's env (or the environment): `toolgate wrap` reads
            // it exactly as `mcp-remote` did.
            HeaderOrigin::McpRemote => {
                (value.contains("${") && dialect == Dialect::Other)
                    || (!value.contains('$') && !secret_name(&header.name) && !secret_value(value))
            }
            HeaderOrigin::Json => {
                !value.contains('$') && !secret_name(&header.name) && !secret_value(value)
            }
        };
        let shown = if keep_in_args {
            value.to_owned()
        } else {
            let base = env_name(server, &header.name);
            let mut var = base.clone();
            let mut n = 2;
            while taken.contains(&var) {
                var = format!("{base}_{n}");
                n += 1;
            }
            taken.insert(var.clone());
            env_added.push((var.clone(), value.to_owned()));
            reference(&var, dialect)
        };
        args.push("--header".to_owned());
        args.push(format!("{}: {shown}", header.name));
    }
    Wrapped { args, env_added }
}

/// True when `args` (the `args` of an entry that runs toolgate) are `wrap … --url …`.
pub fn runs_wrap_url(args: &[Option<&str>]) -> bool {
    if args.first().copied().flatten() != Some("wrap") {
        return false;
    }
    let with_value = wrap_options_with_values();
    let mut i = 1;
    while let Some(arg) = args.get(i) {
        match arg {
            Some("--") | None => return false,
            Some("--url") => return true,
            Some(flag)
                if with_value
                    .iter()
                    .any(|o| flag.strip_prefix("--") == Some(o.as_str())) =>
            {
                i += 2;
            }
            Some(_) => i += 1,
        }
    }
    false
}

/// A remote server found in a configuration file, for `doctor`.
#[derive(Debug, Clone)]
pub struct Found {
    /// The server's name.
    pub name: String,
    /// Whether `init` wrapped it (the spec is then read from `x-toolgate-upstream`).
    pub wrapped: bool,
    /// What it asks for, or why it cannot be read.
    pub spec: Result<RemoteSpec, String>,
}

/// The remote servers of a configuration file, wrapped or not.
pub fn servers(text: &str, maps: &MapSpec) -> Result<Vec<Found>, DocError> {
    let mut found = Vec::new();
    for (_, name, value) in entries(text, maps)? {
        let Value::Object(entry) = value else {
            continue;
        };
        let args: Vec<Option<&str>> = match entry.get("args") {
            Some(Value::Array(a)) => a.iter().map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let (entry, wrapped) = match entry.get(UPSTREAM_KEY) {
            Some(Value::Object(upstream)) if runs_wrap_url(&args) => (upstream, true),
            _ => (&entry, false),
        };
        let spec = match analyze(entry) {
            Ok(Some(spec)) => Ok(spec),
            Ok(None) => continue,
            Err(why) => Err(why),
        };
        found.push(Found {
            name,
            wrapped,
            spec,
        });
    }
    Ok(found)
}

/// Every `${…}` of `text` resolved for a probe: `${VAR}`, `${VAR:-default}` and
/// `${env:VAR}` from `lookup`. `None` when something cannot be resolved (a VS Code
/// `${input:…}`, an unset variable).
pub fn resolve(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        out.push_str(rest.get(..i)?);
        let after = rest.get(i + 2..)?;
        let end = after.find('}')?;
        let inner = after.get(..end)?;
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        let name = name.strip_prefix("env:").unwrap_or(name);
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        match (
            lookup(name).filter(|v| !v.is_empty() || default.is_none()),
            default,
        ) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return None,
        }
        rest = after.get(end + 1..)?;
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: serde_json::Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn the_clients_remote_shapes_are_read() {
        let cc = analyze(&map(
            serde_json::json!({"type": "sse", "url": "https://a/sse",
            "headers": {"Authorization": "Bearer ${T}"}}),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(cc.transport, Transport::Sse);
        assert_eq!(cc.headers.len(), 1);
        let cursor = analyze(&map(serde_json::json!({"url": "https://a/mcp"})))
            .unwrap()
            .unwrap();
        assert_eq!(cursor.transport, Transport::Auto);
        let ws = analyze(&map(
            serde_json::json!({"serverUrl": "https://a/mcp", "disabled": false}),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(ws.consumed, vec!["serverUrl"]);
        assert!(
            analyze(&map(
                serde_json::json!({"command": "npx", "args": ["-y", "x"]})
            ))
            .unwrap()
            .is_none()
        );
    }

    #[test]
    fn mcp_remote_flags_are_mapped_or_refused() {
        let ok = analyze(&map(
            serde_json::json!({"command": "npx", "args": ["-y", "mcp-remote@0.1.29",
            "https://a/mcp", "--header", "Authorization:${AUTH}", "--transport", "sse-only"],
            "env": {"AUTH": "Bearer x"}}),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(ok.transport, Transport::Sse);
        assert_eq!(ok.headers[0].value, "${AUTH}");
        for (args, word) in [
            (
                serde_json::json!(["mcp-remote", "https://a/mcp", "--debug"]),
                "--debug",
            ),
            (
                serde_json::json!(["mcp-remote", "https://a/mcp", "9696"]),
                "9696",
            ),
            (
                serde_json::json!(["mcp-remote", "https://a/mcp", "--transport", "sse-first"]),
                "sse-first",
            ),
        ] {
            let why =
                analyze(&map(serde_json::json!({"command": "npx", "args": args}))).unwrap_err();
            assert!(why.contains(word), "{why}");
        }
    }

    #[test]
    fn secrets_go_to_env_and_never_to_args() {
        let spec = analyze(&map(
            serde_json::json!({"type": "http", "url": "https://a/mcp",
            "headers": {"Authorization": "Bearer abc", "X-Client": "plain",
                        "X-Other": "ghp_0123456789abcdef", "X-Ref": "${env:FOO}"}}),
        ))
        .unwrap()
        .unwrap();
        for dialect in [Dialect::Other, Dialect::ClaudeCode] {
            let w = wrapped_args("my srv", &spec, None, None, dialect);
            let joined = w.args.join(" ");
            assert!(!joined.contains("abc"), "{joined}");
            assert!(!joined.contains("ghp_"), "{joined}");
            assert!(!joined.contains("env:FOO"), "{joined}");
            assert!(joined.contains("X-Client: plain"), "{joined}");
            assert_eq!(w.env_added.len(), 3);
            assert_eq!(w.env_added[0].0, "TOOLGATE_HDR_MY_SRV_AUTHORIZATION");
            assert_eq!(w.env_added[0].1, "Bearer abc");
        }
        let cc = wrapped_args("s", &spec, None, None, Dialect::ClaudeCode);
        assert!(cc.args.contains(
            &"Authorization: ${TOOLGATE_DOLLAR:-$}{TOOLGATE_HDR_S_AUTHORIZATION}".to_owned()
        ));
    }

    #[test]
    fn probe_resolution() {
        let env = |n: &str| (n == "A").then(|| "1".to_owned());
        assert_eq!(
            resolve("x ${A} ${env:A} ${B:-2}", &env).as_deref(),
            Some("x 1 1 2")
        );
        assert_eq!(resolve("${input:k}", &env), None);
        assert_eq!(resolve("${B}", &env), None);
    }

    #[test]
    fn the_claude_code_escape_expands_to_a_toolgate_reference() {
        // Claude Code's documented `${VAR:-default}`, applied as it applies it.
        let once = resolve(&reference("X", Dialect::ClaudeCode), &|_| None).unwrap();
        assert_eq!(once, "${X}");
    }
}
