//! GitHub Copilot CLI's hook format, checked against `@github/copilot` 1.0.102 driven by a
//! mock of its model API.
//!
//! Copilot CLI runs hooks from `.github/hooks/*.json` (a project, once its folder is
//! trusted) and `~/.copilot/hooks/*.json`: `{"version": 1, "hooks": {event: [{"type":
//! "command", "bash": …, "timeoutSec": …}]}}`. Under Claude Code's event names
//! (`PreToolUse`, `PostToolUse`, `UserPromptSubmit`) it sends Claude Code's input shape
//! (`hook_event_name`, `session_id`, `cwd`, `tool_name`, `tool_input`; no
//! `transcript_path`), its built-in tools under Claude Code's names with its own argument
//! names (`Read{path}`, `Write{path, file_text}`, `Edit{path, old_str, new_str}`,
//! `Grep{pattern, paths}`, `Glob{pattern, paths}`, `Bash{command}`, `WebFetch{url}`), the
//! result after a tool as `tool_result{result_type, text_result_for_llm}`, and an MCP tool
//! as `<server>-<tool>`, split here with the servers of `~/.copilot/mcp-config.json`.
//!
//! Under its own event names (`preToolUse`, `postToolUse`, `userPromptSubmitted`, which a
//! user may have configured) it sends another shape: `{sessionId, timestamp, cwd, prompt}`,
//! `{…, toolName, toolArgs}` and `{…, toolName, toolArgs, toolResult{resultType,
//! textResultForLlm}}`, with its own tool names (`bash`, `view`, `create`, `edit`, `grep`,
//! `glob`, `web_fetch`), and takes a top-level `{"permissionDecision": "deny",
//! "permissionDecisionReason": …}`. Both shapes are read; each gets its answer.
//!
//! Output: Claude Code's JSON. A deny answers `permissionDecision: deny` with exit code 0:
//! with exit 2 Copilot CLI blocks too, but tells the model only "hook exited with code 2".
//! A hook that errors (a missing executable) denies. A prompt vouches once the broker finds
//! it in the session's log, `~/.copilot/session-state/<session id>/events.jsonl`.

use serde_json::{Map, Value};

use super::{Output, Parsed, Ruling, claude};
use crate::proto::{HookEffect, HookEvent};

/// The name toolgate gives an event of Copilot CLI's own shape (it carries none): its
/// answer is that shape's.
const CAMEL: &str = "copilotCli";

pub fn parse(v: &Value) -> Result<Parsed, String> {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let servers = home
        .map(|h| super::configured_servers(&h.join(".copilot/mcp-config.json"), "mcpServers"))
        .unwrap_or_default();
    if v.get("sessionId").is_some() && v.get("hook_event_name").is_none() {
        let claude_shape = from_camel(v)?;
        let mut parsed = claude::parse(&as_claude(&claude_shape, &servers))?;
        parsed.name = format!("{CAMEL}:{}", parsed.name);
        with_transcript(&mut parsed, &claude_shape);
        return Ok(parsed);
    }
    let mut parsed = claude::parse(&as_claude(v, &servers))?;
    with_transcript(&mut parsed, v);
    Ok(parsed)
}

/// A prompt's transcript: Copilot CLI passes none, but logs each session in
/// `~/.copilot/session-state/<session id>/events.jsonl` (`$COPILOT_HOME/session-state` when
/// set), the typed prompt as a `user.message` written right after the prompt's hook.
fn with_transcript(parsed: &mut Parsed, v: &Value) {
    let Some(HookEvent::Prompt {
        transcript: transcript @ None,
        ..
    }) = &mut parsed.event
    else {
        return;
    };
    let Some(id) = v.get("session_id").and_then(Value::as_str).filter(|id| {
        !id.is_empty()
            && id.len() <= 128
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    }) else {
        return;
    };
    let home = std::env::var_os("COPILOT_HOME")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".copilot")));
    if let Some(home) = home.filter(|h| h.is_absolute()) {
        *transcript = Some(
            home.join("session-state")
                .join(id)
                .join("events.jsonl")
                .display()
                .to_string(),
        );
    }
}

/// Copilot CLI's own shape as its Claude Code one: the event from what it carries, its tool
/// names as Claude Code's.
fn from_camel(v: &Value) -> Result<Value, String> {
    let text = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    let mut out = serde_json::json!({"session_id": text("sessionId"), "cwd": text("cwd")});
    let Some(obj) = out.as_object_mut() else {
        return Err("internal error".to_owned());
    };
    if let Some(tool) = v.get("toolName").and_then(Value::as_str) {
        let name = CAMEL_TOOLS
            .iter()
            .find(|(c, _)| *c == tool)
            .map_or(tool, |(_, claude)| claude);
        obj.insert("tool_name".to_owned(), Value::String(name.to_owned()));
        let args = match v.get("toolArgs") {
            Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::Null),
            Some(a) => a.clone(),
            None => Value::Null,
        };
        obj.insert("tool_input".to_owned(), args);
        match v.get("toolResult") {
            Some(result) => {
                obj.insert("hook_event_name".to_owned(), "PostToolUse".into());
                obj.insert("tool_response".to_owned(), result.clone());
            }
            None => {
                obj.insert("hook_event_name".to_owned(), "PreToolUse".into());
            }
        }
    } else if let Some(prompt) = v.get("prompt") {
        obj.insert("hook_event_name".to_owned(), "UserPromptSubmit".into());
        obj.insert("prompt".to_owned(), prompt.clone());
    } else {
        obj.insert("hook_event_name".to_owned(), "SessionStart".into());
    }
    Ok(out)
}

/// Copilot CLI's own tool names and Claude Code's.
const CAMEL_TOOLS: &[(&str, &str)] = &[
    ("bash", "Bash"),
    ("view", "Read"),
    ("create", "Write"),
    ("edit", "Edit"),
    ("grep", "Grep"),
    ("glob", "Glob"),
    ("web_fetch", "WebFetch"),
];

/// The output for a verdict: Claude Code's, a deny with exit code 0 so that Copilot CLI
/// shows its reason; for Copilot CLI's own shape, its top-level answer.
pub fn render(name: &str, verdict: &Ruling, authoritative: bool) -> Output {
    if let Some(event) = name.strip_prefix(CAMEL).and_then(|n| n.strip_prefix(':')) {
        return render_camel(event, verdict);
    }
    let mut out = claude::render(name, verdict, authoritative);
    if verdict.decision == HookEffect::Deny && out.stdout.contains("permissionDecision") {
        out.code = 0;
    }
    out
}

/// The answer in Copilot CLI's own shape: `permissionDecision` at the top for a tool call
/// (exit 0, so that the reason is shown), exit 2 for a failure elsewhere.
fn render_camel(event: &str, verdict: &Ruling) -> Output {
    let deny = matches!(verdict.decision, HookEffect::Deny | HookEffect::Ask);
    match (event, deny) {
        ("PreToolUse", true) => Output {
            stdout: serde_json::json!({"permissionDecision": "deny",
                "permissionDecisionReason": verdict.reason})
            .to_string(),
            stderr: verdict.reason.clone(),
            code: 0,
        },
        (_, true) => Output {
            stdout: String::new(),
            stderr: verdict.reason.clone(),
            code: super::BLOCKING_EXIT,
        },
        (_, false) => Output {
            stdout: String::new(),
            stderr: String::new(),
            code: 0,
        },
    }
}

/// `v` in Claude Code's terms: `tool_result` as `tool_response`, an MCP tool as
/// `mcp__server__tool`, and Claude Code's argument names.
fn as_claude(v: &Value, servers: &[String]) -> Value {
    let mut v = v.clone();
    let Some(obj) = v.as_object_mut() else {
        return v;
    };
    if let Some(result) = obj.remove("tool_result") {
        obj.insert("tool_response".to_owned(), result);
    }
    let Some(name) = obj
        .get("tool_name")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return v;
    };
    if let Some(full) = super::mcp_name(&name, servers, '-') {
        obj.insert("tool_name".to_owned(), Value::String(full));
        return v;
    }
    if let Some(Value::Object(input)) = obj.get_mut("tool_input") {
        rename_arguments(&name, input);
    }
    v
}

/// Copilot CLI's argument names of Claude Code's tools as Claude Code's.
fn rename_arguments(tool: &str, input: &mut Map<String, Value>) {
    let rename = |input: &mut Map<String, Value>, from: &str, to: &str| {
        if !input.contains_key(to)
            && let Some(x) = input.remove(from)
        {
            input.insert(to.to_owned(), x);
        }
    };
    match tool {
        "Read" | "Write" | "Edit" => rename(input, "path", "file_path"),
        "Grep" | "Glob" => {
            // One path as a string (what Claude Code's tools take), several as a list.
            if let Some(Value::Array(paths)) = input.get("paths")
                && let [one] = paths.as_slice()
            {
                let one = one.clone();
                input.insert("paths".to_owned(), one);
            }
            rename(input, "paths", "path");
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
    use serde_json::json;

    fn before(tool: &str, args: Value, servers: &[&str]) -> (Option<String>, String, Value) {
        let input = json!({"hook_event_name": "PreToolUse", "session_id": "s",
            "timestamp": "2026-12-05T02:10:23.854Z", "cwd": "/w", "tool_name": tool,
            "tool_input": args});
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
    fn built_in_tools_take_claude_codes_argument_names() {
        assert_eq!(
            before("Read", json!({"path": "/h/.ssh/id_rsa"}), &[]).2["file_path"],
            json!("/h/.ssh/id_rsa")
        );
        assert_eq!(
            before("Write", json!({"path": "/w/a", "file_text": "x"}), &[]).2["file_path"],
            json!("/w/a")
        );
        let (_, tool, args) = before("Grep", json!({"pattern": "x", "paths": ["/h"]}), &[]);
        assert_eq!((tool.as_str(), &args["path"]), ("Grep", &json!("/h")));
        let (_, _, args) = before("Grep", json!({"pattern": "x", "paths": ["/a", "/b"]}), &[]);
        assert_eq!(args["path"], json!(["/a", "/b"]));
        // Without paths, the working directory.
        assert_eq!(
            before("Glob", json!({"pattern": "*.pem"}), &[]).2["path"],
            json!("/w")
        );
    }

    #[test]
    fn mcp_tools_split_at_the_longest_configured_server() {
        let (server, tool, _) = before("my-mail-send_email", json!({}), &["my", "my-mail"]);
        assert_eq!(
            (server.as_deref(), tool.as_str()),
            (Some("my-mail"), "send_email")
        );
        // No configured server: a tool of its own name.
        let (server, tool, _) = before("mail-send_email", json!({}), &[]);
        assert_eq!((server, tool.as_str()), (None, "mail-send_email"));
    }

    #[test]
    fn results_are_read_and_a_deny_exits_zero_with_its_reason() {
        let input = json!({"hook_event_name": "PostToolUse", "session_id": "s", "cwd": "/w",
            "tool_name": "WebFetch", "tool_input": {"url": "https://x.example"},
            "tool_result": {"result_type": "success", "text_result_for_llm": "mail bob@evil.example"}});
        let Some(HookEvent::After { output, .. }) =
            claude::parse(&as_claude(&input, &[])).unwrap().event
        else {
            panic!()
        };
        assert_eq!(
            output["text_result_for_llm"],
            json!("mail bob@evil.example")
        );
        let deny = Ruling {
            decision: HookEffect::Deny,
            reason: "toolgate: no".to_owned(),
        };
        let out = render("PreToolUse", &deny, false);
        assert_eq!(out.code, 0);
        assert!(out.stdout.contains(r#""permissionDecision":"deny""#));
        // A failure on a prompt still blocks with exit 2.
        assert_eq!(render("UserPromptSubmit", &deny, false).code, 2);
    }

    #[test]
    fn copilots_own_shape_is_read_and_answered_in_it() {
        let pre = json!({"sessionId": "s", "timestamp": 1, "cwd": "/w", "toolName": "view",
            "toolArgs": {"path": "/h/.ssh/id_rsa"}});
        let p = parse(&pre).unwrap();
        assert_eq!(p.name, "copilotCli:PreToolUse");
        let Some(HookEvent::Before {
            tool, arguments, ..
        }) = p.event
        else {
            panic!()
        };
        assert_eq!(
            (tool.as_str(), &arguments["file_path"]),
            ("Read", &json!("/h/.ssh/id_rsa"))
        );
        let post = json!({"sessionId": "s", "cwd": "/w", "toolName": "bash",
            "toolArgs": "{\"command\": \"ls\"}",
            "toolResult": {"resultType": "success", "textResultForLlm": "a"}});
        assert!(matches!(
            parse(&post).unwrap().event,
            Some(HookEvent::After { .. })
        ));
        // A prompt's transcript is the session's log (Copilot CLI names none); a session id
        // that is no plain name names none.
        let transcript = |id: &str| {
            let prompt = json!({"sessionId": id, "cwd": "/w", "prompt": "hi"});
            match parse(&prompt).unwrap().event {
                Some(HookEvent::Prompt { transcript, .. }) => transcript,
                other => panic!("{other:?}"),
            }
        };
        if std::env::var_os("COPILOT_HOME").is_none() {
            let home = std::env::var("HOME").unwrap();
            assert_eq!(
                transcript("0b1d-42").as_deref(),
                Some(format!("{home}/.copilot/session-state/0b1d-42/events.jsonl").as_str())
            );
        }
        for bad in ["../x", "", "a/b", "a b"] {
            assert_eq!(transcript(bad), None, "{bad}");
        }
        let deny = Ruling {
            decision: HookEffect::Deny,
            reason: "toolgate: no".to_owned(),
        };
        let out = render("copilotCli:PreToolUse", &deny, false);
        assert_eq!(out.code, 0);
        assert_eq!(
            serde_json::from_str::<Value>(&out.stdout).unwrap()["permissionDecision"],
            "deny"
        );
        assert_eq!(render("copilotCli:UserPromptSubmit", &deny, false).code, 2);
    }
}
