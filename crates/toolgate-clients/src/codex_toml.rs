//! Codex's MCP servers: `[mcp_servers.<name>]` tables of `~/.codex/config.toml` (or a
//! trusted project's `.codex/config.toml`), a stdio server as `command` and `args` (Codex
//! 0.169.0; developers.openai.com/codex/mcp). The file is edited in place with `toml_edit`:
//! comments, order and layout of everything else are kept. A wrapped server is `command =
//! "<toolgate>"` and `args = ["wrap", "--server", NAME, …, "--", <command>, <args>…]`: the
//! arguments after the separator are what `unwrap` restores, so no key of toolgate's own is
//! added (Codex reads the table strictly with `--strict-config`). A remote server (`url`) is
//! left alone, with the reason.

use toml_edit::{Array, DocumentMut, Item, Value};

use super::document::{EntryReport, Outcome};
use super::entries::{DocError, WrapSettings, wrap_options_with_values};

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
            let (outcome, workspace) = match (settings, command, wrapped) {
                (_, None, _) if table.contains_key("url") => (
                    Outcome::Skipped(
                        "remote server (`url`): wrap it by hand with `toolgate wrap --url`"
                            .to_owned(),
                    ),
                    None,
                ),
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
        assert!(matches!(outcomes[1], ("docs", Outcome::Skipped(r)) if r.contains("remote")));
        // Again: already wrapped, nothing changes.
        let again = wrap(&wrapped.text, None, &settings()).unwrap();
        assert_eq!(again.text, wrapped.text);
        assert_eq!(again.entries[0].outcome, Outcome::AlreadyWrapped);
        let restored = unwrap(&wrapped.text, None).unwrap();
        assert_eq!(restored.text, CONFIG);
        assert_eq!(restored.entries[0].outcome, Outcome::Restored);
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
        assert_eq!(only.text, CONFIG);
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
