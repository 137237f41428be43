//! Codex's MCP servers: `[mcp_servers.<name>]` tables of `~/.codex/config.toml` (or a
//! trusted project's `.codex/config.toml`), a stdio server as `command` and `args` (Codex
//! 0.169.0; developers.openai.com/codex/mcp). The file is edited in place with `toml_edit`:
//! comments, order and layout of everything else are kept. A wrapped server is `command =
//! "<toolgate>"` and `args = ["wrap", "--server", NAME, …, "--", <command>, <args>…]`: the
//! arguments after the separator are what `unwrap` restores, so no key of toolgate's own is
//! added (Codex reads the table strictly with `--strict-config`).
//!
//! A remote server (`url`, with `bearer_token_env_var`, `http_headers`, `env_http_headers`)
//! becomes a stdio one running `toolgate wrap --url`: its headers become `--header`
//! arguments (a variable as `${VAR}`, which `wrap` reads from its environment, the variable
//! forwarded by Codex through `env_vars`; a static credential moved into `env`), and its
//! original lines are kept as comments above `command` (`# toolgate-upstream: …`), from
//! which `unwrap` puts them back.

use toml_edit::{Array, DocumentMut, Item, Value};

use super::document::{EntryReport, Outcome};
use super::entries::{DocError, WrapSettings, wrap_options_with_values};
use super::remote;

/// The comment prefix of a remote server's original lines in its wrapped table.
const UPSTREAM_LINE: &str = "# toolgate-upstream: ";
/// The keys of a remote server that its wrapped form replaces.
const REMOTE_KEYS: &[&str] = &[
    "url",
    "bearer_token_env_var",
    "http_headers",
    "env_http_headers",
];

/// The label of the server map in reports.
const MAP: &str = "mcp_servers";

/// Wraps the selected stdio servers of `text`.
pub fn wrap(
    text: &str,
    select: Option<&[String]>,
    settings: &WrapSettings,
) -> Result<super::document::Edited, DocError> {
    edit(text, select, Some(settings))
}

/// Restores the selected wrapped servers of `text`.
pub fn unwrap(text: &str, select: Option<&[String]>) -> Result<super::document::Edited, DocError> {
    edit(text, select, None)
}

/// Every server of `text`: (map label, name, its table as JSON).
pub fn entries(text: &str) -> Result<Vec<(String, String, serde_json::Value)>, DocError> {
    let doc = parse(text)?;
    let Some(servers) = doc.get(MAP).and_then(Item::as_table_like) else {
        return Ok(Vec::new());
    };
    Ok(servers
        .iter()
        .map(|(name, item)| {
            let mut value = serde_json::Map::new();
            if let Some(table) = item.as_table_like() {
                if let Some(c) = table.get("command").and_then(Item::as_str) {
                    value.insert("command".to_owned(), c.into());
                }
                if let Some(args) = table.get("args").and_then(Item::as_array) {
                    value.insert("args".to_owned(), strings(args).into());
                }
            }
            (MAP.to_owned(), name.to_owned(), value.into())
        })
        .collect())
}

fn parse(text: &str) -> Result<DocumentMut, DocError> {
    text.parse::<DocumentMut>()
        .map_err(|e| DocError::Parse(e.to_string().trim().to_owned()))
}

fn strings(array: &Array) -> Vec<String> {
    array
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// The command and arguments a wrapped server's arguments end with (after the `--` that
/// follows `wrap` and its options), if they are toolgate's.
fn upstream(args: &[String]) -> Option<(String, Vec<String>)> {
    if args.first().map(String::as_str) != Some("wrap") {
        return None;
    }
    let with_values = wrap_options_with_values();
    let mut i = 1;
    while let Some(arg) = args.get(i) {
        if arg == "--" {
            let command = args.get(i + 1)?.clone();
            return Some((command, args.get(i + 2..).unwrap_or_default().to_vec()));
        }
        let takes_value = arg
            .strip_prefix("--")
            .is_some_and(|o| !o.contains('=') && with_values.iter().any(|w| w == o));
        i += if takes_value { 2 } else { 1 };
    }
    None
}

fn edit(
    text: &str,
    select: Option<&[String]>,
    settings: Option<&WrapSettings>,
) -> Result<super::document::Edited, DocError> {
    let mut doc = parse(text)?;
    let mut entries = Vec::new();
    let mut changed = false;
    if let Some(servers) = doc.get_mut(MAP).and_then(Item::as_table_like_mut) {
        for (name, item) in servers.iter_mut() {
            let name = name.get().to_owned();
            if select.is_some_and(|s| !s.contains(&name)) {
                continue;
            }
            let Some(table) = item.as_table_like_mut() else {
                entries.push(report(
                    &name,
                    Outcome::Skipped("not a table".to_owned()),
                    None,
                ));
                continue;
            };
            let command = table
                .get("command")
                .and_then(Item::as_str)
                .map(str::to_owned);
            let args = table
                .get("args")
                .and_then(Item::as_array)
                .map(strings)
                .unwrap_or_default();
            let wrapped = upstream(&args);
            let arg_refs: Vec<Option<&str>> = args.iter().map(|a| Some(a.as_str())).collect();
            let wraps_url = command.is_some() && remote::runs_wrap_url(&arg_refs);
            let (outcome, workspace) = match (settings, command, wrapped) {
                (Some(settings), None, _) if table.contains_key("url") => {
                    let Some(workspace) = settings.workspace.clone() else {
                        return Err(DocError::NoWorkspace {
                            map: MAP.to_owned(),
                            server: name,
                        });
                    };
                    match wrap_remote(item, &name, settings, &workspace) {
                        Ok(()) => {
                            changed = true;
                            (Outcome::Wrapped, Some(workspace))
                        }
                        Err(why) => (Outcome::Skipped(why), None),
                    }
                }
                (None, None, _) if table.contains_key("url") => (Outcome::NotWrapped, None),
                (Some(_), Some(_), _) if wraps_url => (Outcome::AlreadyWrapped, None),
                (None, Some(_), _) if wraps_url => match unwrap_remote(item) {
                    Ok(()) => {
                        changed = true;
                        (Outcome::Restored, None)
                    }
                    Err(why) => (Outcome::Skipped(why), None),
                },
                (_, None, _) => (Outcome::Skipped("no `command`".to_owned()), None),
                (Some(_), Some(_), Some(_)) => (Outcome::AlreadyWrapped, None),
                (Some(settings), Some(command), None) => {
                    let Some(workspace) = settings.workspace.clone() else {
                        return Err(DocError::NoWorkspace {
                            map: MAP.to_owned(),
                            server: name,
                        });
                    };
                    let mut new_args = vec!["wrap".to_owned(), "--server".to_owned(), name.clone()];
                    if let Some(policy) = &settings.policy {
                        new_args.extend(["--policy".to_owned(), policy.clone()]);
                    }
                    new_args.extend(["--workspace".to_owned(), workspace.clone()]);
                    if let Some(dir) = &settings.broker_dir {
                        new_args.extend(["--broker-dir".to_owned(), dir.clone()]);
                    }
                    new_args.push("--".to_owned());
                    new_args.push(command);
                    new_args.extend(args);
                    set(table, &settings.exe, &new_args);
                    changed = true;
                    (Outcome::Wrapped, Some(workspace))
                }
                (None, Some(_), Some((command, rest))) => {
                    set(table, &command, &rest);
                    changed = true;
                    (Outcome::Restored, None)
                }
                (None, Some(_), None) => (Outcome::NotWrapped, None),
            };
            entries.push(report(&name, outcome, workspace));
        }
    }
    if !changed {
        return Ok(super::document::Edited {
            text: text.to_owned(),
            entries,
        });
    }
    let new_text = doc.to_string();
    // What was written reads back as intended.
    if parse(&new_text)?.to_string() != new_text {
        return Err(DocError::Verification);
    }
    Ok(super::document::Edited {
        text: new_text,
        entries,
    })
}

/// Replaces a remote server's keys in `item` (its table) with a stdio server running
/// `toolgate wrap --url`; `Err`: left alone, and why.
fn wrap_remote(
    item: &mut Item,
    name: &str,
    settings: &WrapSettings,
    workspace: &str,
) -> Result<(), String> {
    let Some(table) = item.as_table_mut() else {
        return Err("remote server written as an inline table: wrap it by hand with `toolgate wrap --url`, or write it as a `[mcp_servers.<name>]` table".to_owned());
    };
    for key in [
        "scopes",
        "oauth_resource",
        "command",
        "args",
        "env",
        "env_vars",
    ] {
        if table.contains_key(key) {
            return Err(format!(
                "remote server with `{key}`, which `toolgate wrap --url` cannot take over: left unwrapped"
            ));
        }
    }
    let text = |key: &str| -> Result<Option<String>, String> {
        match table.get(key) {
            None => Ok(None),
            Some(item) => item
                .as_str()
                .map(|s| Some(s.to_owned()))
                .ok_or(format!("`{key}` is not a string")),
        }
    };
    let pairs = |key: &str| -> Result<Vec<(String, String)>, String> {
        match table.get(key) {
            None => Ok(Vec::new()),
            Some(Item::Value(Value::InlineTable(t))) => t
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|v| (k.to_owned(), v.to_owned()))
                        .ok_or(format!("`{key}.{k}` is not a string"))
                })
                .collect(),
            Some(_) => Err(format!(
                "`{key}` is not an inline table of strings: wrap it by hand with `toolgate wrap --url`"
            )),
        }
    };
    let url = text("url")?.ok_or("`url` is missing")?;
    let var_ok =
        |v: &str| !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let mut forwarded: Vec<String> = Vec::new();
    let mut headers: Vec<remote::Header> = Vec::new();
    let mut by_variable: Vec<(String, String)> = Vec::new();
    if let Some(var) = text("bearer_token_env_var")? {
        if !var_ok(&var) {
            return Err(format!(
                "`bearer_token_env_var` `{var}` is not a variable name"
            ));
        }
        by_variable.push(("Authorization".to_owned(), format!("Bearer ${{{var}}}")));
        forwarded.push(var);
    }
    for (header, value) in pairs("http_headers")? {
        headers.push(remote::Header {
            name: header,
            value,
        });
    }
    for (header, var) in pairs("env_http_headers")? {
        if !var_ok(&var) {
            return Err(format!(
                "`env_http_headers.{header}` `{var}` is not a variable name"
            ));
        }
        by_variable.push((header, format!("${{{var}}}")));
        if !forwarded.contains(&var) {
            forwarded.push(var);
        }
    }
    let spec = remote::RemoteSpec {
        url,
        transport: remote::Transport::StreamableHttp,
        headers,
        origin: remote::HeaderOrigin::Json,
        allow_http: false,
        consumed: Vec::new(),
        env: Vec::new(),
        opencode: false,
    };
    let wrapped = remote::wrapped_args(
        name,
        &spec,
        settings.policy.as_deref(),
        Some(workspace),
        remote::Dialect::Other,
    );
    let mut args = wrapped.args;
    // `wrap --broker-dir` before `--url`'s headers: with the options.
    if let Some(dir) = &settings.broker_dir {
        args.splice(1..1, ["--broker-dir".to_owned(), dir.clone()]);
    }
    for (header, value) in by_variable {
        args.push("--header".to_owned());
        args.push(format!("{header}: {value}"));
    }
    // The original lines, their comments included, as comments above `command`.
    let mut original = toml_edit::Table::new();
    for (key, item) in table.iter() {
        if REMOTE_KEYS.contains(&key)
            && let Some(k) = table.key(key)
        {
            original.insert_formatted(k, item.clone());
        }
    }
    let saved: String = original
        .to_string()
        .lines()
        .map(|l| format!("{UPSTREAM_LINE}{l}\n"))
        .collect();
    for key in REMOTE_KEYS {
        table.remove(key);
    }
    let array: Array = args.iter().map(String::as_str).collect();
    table.insert("command", toml_edit::value(settings.exe.as_str()));
    table.insert("args", Item::Value(Value::Array(array)));
    if !forwarded.is_empty() {
        let vars: Array = forwarded.iter().map(String::as_str).collect();
        table.insert("env_vars", Item::Value(Value::Array(vars)));
    }
    if !wrapped.env_added.is_empty() {
        let mut env = toml_edit::InlineTable::new();
        for (k, v) in &wrapped.env_added {
            env.insert(k, Value::from(v.as_str()));
        }
        table.insert("env", Item::Value(Value::InlineTable(env)));
    }
    if let Some(mut key) = table.key_mut("command") {
        key.leaf_decor_mut().set_prefix(saved);
    }
    Ok(())
}

/// Puts back the remote server a table running `toolgate wrap --url` was made from (its
/// `# toolgate-upstream:` lines); `Err`: left alone, and why.
fn unwrap_remote(item: &mut Item) -> Result<(), String> {
    let Some(table) = item.as_table_mut() else {
        return Err("runs `toolgate wrap --url` in an inline table: restore it by hand".to_owned());
    };
    let prefix = table
        .key("command")
        .and_then(|k| k.leaf_decor().prefix())
        .and_then(|p| p.as_str())
        .unwrap_or_default()
        .to_owned();
    let mut lines = String::new();
    let mut kept = String::new();
    for line in prefix.split_inclusive('\n') {
        match line.strip_prefix(UPSTREAM_LINE) {
            Some(saved) => lines.push_str(saved),
            None => kept.push_str(line),
        }
    }
    let saved = lines.parse::<DocumentMut>().map_err(|e| {
        format!(
            "its `{}` lines do not read back ({e}): restore it by hand",
            UPSTREAM_LINE.trim()
        )
    })?;
    if saved.get("url").and_then(Item::as_str).is_none() {
        return Err(format!(
            "runs `toolgate wrap --url` without `{UPSTREAM_LINE}url = …`: restore it by hand"
        ));
    }
    for key in ["command", "args", "env_vars", "env"] {
        table.remove(key);
    }
    let mut first = true;
    for (key, item) in saved.iter() {
        let Some(k) = saved.key(key) else {
            continue;
        };
        let mut k = k.clone();
        if first {
            // Comments of the user's above `command` go back above the first line.
            let own = k
                .leaf_decor()
                .prefix()
                .and_then(|p| p.as_str())
                .unwrap_or_default()
                .to_owned();
            k.leaf_decor_mut().set_prefix(format!("{kept}{own}"));
            first = false;
        }
        table.insert_formatted(&k, item.clone());
    }
    Ok(())
}

/// Sets a server's `command` and `args`, keeping the decoration around the values.
fn set(table: &mut dyn toml_edit::TableLike, command: &str, args: &[String]) {
    let array: Array = args.iter().map(String::as_str).collect();
    for (key, value) in [
        ("command", Value::from(command)),
        ("args", Value::Array(array)),
    ] {
        match table.get_mut(key).and_then(Item::as_value_mut) {
            Some(old) => {
                let decor = old.decor().clone();
                *old = value;
                *old.decor_mut() = decor;
            }
            None => {
                table.insert(key, Item::Value(value));
            }
        }
    }
}

fn report(name: &str, outcome: Outcome, workspace: Option<String>) -> EntryReport {
    EntryReport {
        map: MAP.to_owned(),
        name: name.to_owned(),
        outcome,
        workspace,
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests {
    use super::*;

    fn settings() -> WrapSettings {
        WrapSettings {
            exe: "/opt/toolgate".to_owned(),
            policy: Some("/p/toolgate.yaml".to_owned()),
            workspace: Some("/w".to_owned()),
            dialect: Default::default(),
            broker_dir: None,
        }
    }

    const CONFIG: &str = r#"# my Codex settings
model = "o4"

[mcp_servers.fs]
# the project's files
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/w"]
env = { DEBUG = "1" }

[mcp_servers.docs]
url = "https://docs.example/mcp"

[profiles.fast]
model = "o4-mini"
"#;

    #[test]
    fn a_stdio_server_is_wrapped_and_restored_with_everything_else_kept() {
        let wrapped = wrap(CONFIG, None, &settings()).unwrap();
        assert!(wrapped.text.contains(
            r#"command = "/opt/toolgate"
args = ["wrap", "--server", "fs", "--policy", "/p/toolgate.yaml", "--workspace", "/w", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/w"]"#
        ), "{}", wrapped.text);
        assert!(
            wrapped
                .text
                .starts_with("# my Codex settings\nmodel = \"o4\"")
        );
        assert!(wrapped.text.contains("# the project's files\ncommand"));
        assert!(wrapped.text.contains("env = { DEBUG = \"1\" }"));
        let outcomes: Vec<_> = wrapped
            .entries
            .iter()
            .map(|e| (&e.name[..], &e.outcome))
            .collect();
        assert_eq!(outcomes[0], ("fs", &Outcome::Wrapped));
        assert_eq!(outcomes[1], ("docs", &Outcome::Wrapped));
        // Again: already wrapped, nothing changes.
        let again = wrap(&wrapped.text, None, &settings()).unwrap();
        assert_eq!(again.text, wrapped.text);
        assert_eq!(again.entries[0].outcome, Outcome::AlreadyWrapped);
        let restored = unwrap(&wrapped.text, None).unwrap();
        assert_eq!(restored.text, CONFIG);
        assert_eq!(restored.entries[0].outcome, Outcome::Restored);
    }

    #[test]
    fn a_remote_server_runs_wrap_url_and_is_restored() {
        const REMOTE: &str = r#"[mcp_servers.figma]
# Figma's hosted server
url = "https://mcp.figma.com/mcp"
bearer_token_env_var = "FIGMA_TOKEN"
http_headers = { "X-Region" = "eu", "X-Api-Key" = "sk_live_0123456789abcdefghij" }
env_http_headers = { "X-Org" = "FIGMA_ORG" }
startup_timeout_sec = 20
"#;
        let wrapped = wrap(REMOTE, None, &settings()).unwrap();
        assert_eq!(wrapped.entries[0].outcome, Outcome::Wrapped);
        let doc: DocumentMut = wrapped.text.parse().unwrap();
        let table = &doc["mcp_servers"]["figma"];
        assert_eq!(table["command"].as_str(), Some("/opt/toolgate"));
        let args = strings(table["args"].as_array().unwrap());
        assert_eq!(
            args,
            [
                "wrap",
                "--server",
                "figma",
                "--policy",
                "/p/toolgate.yaml",
                "--workspace",
                "/w",
                "--url",
                "https://mcp.figma.com/mcp",
                "--transport",
                "streamable-http",
                "--header",
                "X-Region: eu",
                "--header",
                "X-Api-Key: ${TOOLGATE_HDR_FIGMA_X_API_KEY}",
                "--header",
                "Authorization: Bearer ${FIGMA_TOKEN}",
                "--header",
                "X-Org: ${FIGMA_ORG}",
            ]
        );
        // The variables reach `wrap` (Codex forwards only these); the static credential
        // is in `env`, never in `args`.
        assert_eq!(
            strings(table["env_vars"].as_array().unwrap()),
            ["FIGMA_TOKEN", "FIGMA_ORG"]
        );
        assert_eq!(
            table["env"]["TOOLGATE_HDR_FIGMA_X_API_KEY"].as_str(),
            Some("sk_live_0123456789abcdefghij")
        );
        for key in REMOTE_KEYS {
            assert!(table.get(key).is_none(), "{key}: {}", wrapped.text);
        }
        assert!(
            wrapped
                .text
                .contains("# Figma's hosted server\n# toolgate-upstream: url = ")
        );
        assert_eq!(table["startup_timeout_sec"].as_integer(), Some(20));
        let again = wrap(&wrapped.text, None, &settings()).unwrap();
        assert_eq!(again.entries[0].outcome, Outcome::AlreadyWrapped);
        assert_eq!(again.text, wrapped.text);
        let restored = unwrap(&wrapped.text, None).unwrap();
        assert_eq!(restored.entries[0].outcome, Outcome::Restored);
        let back: DocumentMut = restored.text.parse().unwrap();
        let original: DocumentMut = REMOTE.parse().unwrap();
        for key in REMOTE_KEYS.iter().chain(&["startup_timeout_sec"]) {
            assert_eq!(
                back["mcp_servers"]["figma"][key].to_string().trim(),
                original["mcp_servers"]["figma"][key].to_string().trim(),
                "{key}: {}",
                restored.text
            );
        }
        for key in ["command", "args", "env", "env_vars"] {
            assert!(
                back["mcp_servers"]["figma"].get(key).is_none(),
                "{}",
                restored.text
            );
        }
        assert!(
            restored.text.contains("# Figma's hosted server\nurl = "),
            "{}",
            restored.text
        );
        // What `toolgate wrap --url` cannot take over stays as it is.
        let oauth = "[mcp_servers.x]\nurl = \"https://x.example/mcp\"\nscopes = [\"read\"]\n";
        let left = wrap(oauth, None, &settings()).unwrap();
        assert_eq!(left.text, oauth);
        assert!(matches!(&left.entries[0].outcome, Outcome::Skipped(r) if r.contains("scopes")));
    }

    #[test]
    fn no_workspace_and_a_broken_file_are_errors() {
        let none = WrapSettings {
            workspace: None,
            ..settings()
        };
        assert!(matches!(
            wrap(CONFIG, None, &none),
            Err(DocError::NoWorkspace { .. })
        ));
        assert!(matches!(
            wrap("[mcp_servers", None, &settings()),
            Err(DocError::Parse(_))
        ));
        // Only the selected server.
        let only = wrap(CONFIG, Some(&["docs".to_owned()]), &settings()).unwrap();
        assert!(only.text.contains("command = \"npx\""), "{}", only.text);
        assert_eq!(only.entries.len(), 1);
    }

    #[test]
    fn the_separator_is_found_past_option_values() {
        let args: Vec<String> = [
            "wrap",
            "--server",
            "--",
            "--workspace",
            "/w",
            "--",
            "srv",
            "--",
            "a",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(
            upstream(&args),
            Some(("srv".to_owned(), vec!["--".to_owned(), "a".to_owned()]))
        );
        assert_eq!(upstream(&["npx".to_owned()]), None);
    }
}
