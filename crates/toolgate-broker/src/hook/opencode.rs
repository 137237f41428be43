//! OpenCode's events, as toolgate's own plugin (`toolgate_clients::opencode`) hands them
//! over: Claude Code's shape (`hook_event_name`, `session_id`, `cwd`, `tool_name`,
//! `tool_input`, `tool_response`, `prompt`) with OpenCode's tools, checked against
//! `opencode-ai` 1.18.33: `bash{command}`, `read{filePath}`, `write{filePath, content}`,
//! `edit{filePath, oldString, newString}`, `patch{patchText}`, `glob{pattern, path}`,
//! `grep{pattern, path, include}`, `list{path}`, `webfetch{url}`, `todowrite`. An MCP
//! tool is `<server>_<tool>`, split with the servers of OpenCode's configuration
//! (`opencode.json` of the project, `~/.config/opencode/opencode.json`).
//!
//! Output: `{"decision": "deny", "reason": …}` and exit 2 for a deny; the plugin throws
//! then, and OpenCode shows the reason to the model. A headless `opencode run` has nobody to
//! ask: an ask is a deny, with the reason and what to change. A prompt (the text parts the
//! user wrote, as the plugin hands them over) vouches once the broker finds it as a user
//! message of the session in OpenCode's database (`~/.local/share/opencode/opencode.db`,
//! `$XDG_DATA_HOME/opencode` when set).

use std::path::Path;

use serde_json::{Map, Value, json};

use super::{Output, Parsed, Ruling, claude, vscode::patch_files};
use crate::proto::{HookEffect, HookEvent};

/// OpenCode's built-in tools and Claude Code's for each.
const TOOLS: &[(&str, &str)] = &[
    ("bash", "Bash"),
    ("read", "Read"),
    ("write", "Write"),
    ("edit", "Edit"),
    ("patch", "Edit"),
    ("glob", "Glob"),
    ("grep", "Grep"),
    ("list", "LS"),
    ("webfetch", "WebFetch"),
    ("todowrite", "TodoWrite"),
];

pub fn parse(v: &Value) -> Result<Parsed, String> {
    let cwd = v.get("cwd").and_then(Value::as_str).unwrap_or("");
    let mut servers = super::configured_servers(&Path::new(cwd).join("opencode.json"), "mcp");
    if let Some(home) = std::env::var_os("HOME") {
        servers.extend(super::configured_servers(
            &Path::new(&home).join(".config/opencode/opencode.json"),
            "mcp",
        ));
    }
    let mut parsed = claude::parse(&as_claude(v, &servers))?;
    if let Some(HookEvent::Prompt {
        transcript,
        conversation,
        ..
    }) = &mut parsed.event
    {
        let session = v
            .get("session_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        let data = std::env::var_os("XDG_DATA_HOME")
            .filter(|d| !d.is_empty())
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/share")))
            .filter(|d| d.is_absolute());
        if let (Some(session), Some(data)) = (session, data) {
            *transcript = Some(data.join("opencode/opencode.db").display().to_string());
            *conversation = Some(session.to_owned());
        }
    }
    Ok(parsed)
}

/// Why an ask is a deny here.
const CANNOT_ASK: &str = "OpenCode's plugins cannot ask";

/// The output for a verdict.
pub fn render(_name: &str, verdict: &Ruling, _authoritative: bool) -> Output {
    let deny = |reason: String| Output {
        stdout: json!({"decision": "deny", "reason": reason}).to_string(),
        stderr: reason,
        code: super::BLOCKING_EXIT,
    };
    match verdict.decision {
        HookEffect::Deny => deny(verdict.reason.clone()),
        HookEffect::Ask => deny(super::cannot_ask(&verdict.reason, CANNOT_ASK)),
        HookEffect::Allow | HookEffect::Abstain => Output {
            stdout: String::new(),
            stderr: String::new(),
            code: 0,
        },
    }
}

/// `v` in Claude Code's terms.
fn as_claude(v: &Value, servers: &[String]) -> Value {
    let mut v = v.clone();
    let Some(obj) = v.as_object_mut() else {
        return v;
    };
    let Some(name) = obj
        .get("tool_name")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return v;
    };
    if let Some(full) = super::mcp_name(&name, servers, '_') {
        obj.insert("tool_name".to_owned(), json!(full));
        return v;
    }
    let Some((_, claude_name)) = TOOLS.iter().find(|(o, _)| *o == name) else {
        return v;
    };
    obj.insert("tool_name".to_owned(), json!(claude_name));
    if let Some(Value::Object(input)) = obj.get_mut("tool_input") {
        rename_arguments(&name, input);
    }
    v
}

fn rename_arguments(tool: &str, input: &mut Map<String, Value>) {
    let mut rename = |from: &str, to: &str| {
        if !input.contains_key(to)
            && let Some(x) = input.remove(from)
        {
            input.insert(to.to_owned(), x);
        }
    };
    match tool {
        "read" | "write" | "edit" => rename("filePath", "file_path"),
        "grep" => rename("include", "glob"),
        "patch" => {
            let files: Vec<Value> = input
                .get("patchText")
                .and_then(Value::as_str)
                .map(patch_files)
                .unwrap_or_default()
                .into_iter()
                .map(Value::String)
                .collect();
            input.insert("file_path".to_owned(), Value::Array(files));
        }
        _ => {}
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests {
    use super::*;
    use crate::proto::HookEvent;

    fn before(tool: &str, args: Value, servers: &[&str]) -> (Option<String>, String, Value) {
        let input = json!({"hook_event_name": "PreToolUse", "session_id": "ses_1",
            "cwd": "/w", "tool_name": tool, "tool_input": args});
        let servers: Vec<String> = servers.iter().map(|s| (*s).to_owned()).collect();
        match claude::parse(&as_claude(&input, &servers)).unwrap().event {
            Some(HookEvent::Before {
                server,
                tool,
                arguments,
                ..
            }) => (server, tool, arguments),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn opencodes_tools_read_as_claude_codes() {
        assert_eq!(before("bash", json!({"command": "ls"}), &[]).1, "Bash");
        let (tool, args) = {
            let (_, t, a) = before("read", json!({"filePath": "/h/.ssh/id_rsa"}), &[]);
            (t, a)
        };
        assert_eq!(
            (tool.as_str(), &args["file_path"]),
            ("Read", &json!("/h/.ssh/id_rsa"))
        );
        let (_, tool, args) = before(
            "patch",
            json!({"patchText": "*** Begin Patch\n*** Add File: /h/.bashrc\n+x\n*** End Patch"}),
            &[],
        );
        assert_eq!(
            (tool.as_str(), &args["file_path"]),
            ("Edit", &json!(["/h/.bashrc"]))
        );
        let (_, tool, args) = before("grep", json!({"pattern": "k", "include": "*.env"}), &[]);
        assert_eq!(
            (tool.as_str(), &args["glob"], &args["path"]),
            ("Grep", &json!("*.env"), &json!("/w"))
        );
        let (server, tool, _) = before("my_mail_send_email", json!({}), &["my", "my_mail"]);
        assert_eq!(
            (server.as_deref(), tool.as_str()),
            (Some("my_mail"), "send_email")
        );
    }

    #[test]
    fn a_deny_and_an_ask_block_with_the_reason() {
        let ruling = |decision| Ruling {
            decision,
            reason: "toolgate: `Bash`: no".to_owned(),
        };
        let out = render("PreToolUse", &ruling(HookEffect::Deny), false);
        assert_eq!(out.code, 2);
        assert_eq!(
            serde_json::from_str::<Value>(&out.stdout).unwrap()["reason"],
            "toolgate: `Bash`: no"
        );
        let out = render("PreToolUse", &ruling(HookEffect::Ask), false);
        assert!(out.stdout.contains("cannot ask"), "{}", out.stdout);
        assert_eq!(
            render("PreToolUse", &ruling(HookEffect::Allow), true).code,
            0
        );
    }
}
