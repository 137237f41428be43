//! Windsurf's Cascade hooks (docs.windsurf.com/windsurf/cascade/hooks): one event per
//! action, `{agent_action_name, trajectory_id, execution_id, timestamp, tool_info}`, with
//! `tool_info` per action: `pre_run_command{command_line, cwd}`,
//! `post_run_command{command_line, cwd, exit_code, output}`, `pre_read_code{file_path}`,
//! `post_read_code{file_path, content}`, `pre_write_code{file_path, edits}`,
//! `pre_mcp_tool_use{mcp_server_name, mcp_tool_name, mcp_tool_arguments}`,
//! `post_mcp_tool_use{…, mcp_result}`, `pre_user_prompt{user_prompt}`. A pre-hook blocks
//! with exit code 2 (its stderr is shown); Windsurf has no ask, so an ask is a deny here.
//!
//! Each event is rewritten into Claude Code's terms (`Shell`, `Read`, `Edit`,
//! `mcp__server__tool`) and read by [`super::claude`]. Not checked against the running
//! editor (it is not a program CI can drive): against its documentation. Prompts vouch for
//! nothing (no transcript toolgate reads).

use serde_json::{Value, json};

use super::{Output, Parsed, Ruling, claude};
use crate::proto::HookEffect;

/// Actions toolgate accepts without telling the broker anything.
const IGNORED: &[&str] = &[
    "post_write_code",
    "post_cascade_response",
    "post_cascade_response_with_transcript",
    "post_setup_worktree",
    "session_start",
    "session_end",
];

pub fn parse(v: &Value) -> Result<Parsed, String> {
    let action = v
        .get("agent_action_name")
        .and_then(Value::as_str)
        .ok_or("the hook input has no `agent_action_name`. help: is this a Windsurf hook?")?
        .to_owned();
    let info = v.get("tool_info").cloned().unwrap_or(Value::Null);
    let text = |k: &str| info.get(k).and_then(Value::as_str).map(str::to_owned);
    // The directory: the command's, or the hook's own (Windsurf runs hooks in the
    // workspace; `--workspace`, which `init` writes, wins over either).
    let cwd = match text("cwd") {
        Some(cwd) => cwd,
        None => std::env::current_dir()
            .map_err(|e| format!("cannot tell the directory of the `{action}` hook ({e})"))?
            .to_string_lossy()
            .into_owned(),
    };
    let session = v
        .get("trajectory_id")
        .and_then(Value::as_str)
        .unwrap_or("windsurf");
    let mut claude = json!({"session_id": session, "cwd": cwd});
    let mut set = |k: &str, x: Value| {
        if let Some(o) = claude.as_object_mut() {
            o.insert(k.to_owned(), x);
        }
    };
    let mcp = || {
        let server = text("mcp_server_name").filter(|s| !s.is_empty());
        let tool = text("mcp_tool_name").filter(|s| !s.is_empty());
        match (server, tool) {
            (Some(s), Some(t)) => Ok(format!("mcp__{s}__{t}")),
            _ => Err(format!(
                "the `{action}` hook input names no MCP server and tool (`mcp_server_name`, `mcp_tool_name`)"
            )),
        }
    };
    let arguments = || match info.get("mcp_tool_arguments") {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(json!({})),
        Some(v @ Value::Object(_)) => v.clone(),
        _ => json!({}),
    };
    match action.as_str() {
        "pre_run_command" => {
            set("hook_event_name", json!("PreToolUse"));
            set("tool_name", json!("Shell"));
            set(
                "tool_input",
                json!({"command": text("command_line").unwrap_or_default(), "cwd": cwd}),
            );
        }
        "post_run_command" => {
            set("hook_event_name", json!("PostToolUse"));
            set("tool_name", json!("Shell"));
            set(
                "tool_input",
                json!({"command": text("command_line").unwrap_or_default()}),
            );
            set("tool_response", json!(text("output").unwrap_or_default()));
        }
        "pre_read_code" => {
            set("hook_event_name", json!("PreToolUse"));
            set("tool_name", json!("Read"));
            set(
                "tool_input",
                json!({"file_path": text("file_path").unwrap_or_default()}),
            );
        }
        "post_read_code" => {
            set("hook_event_name", json!("PostToolUse"));
            set("tool_name", json!("Read"));
            set(
                "tool_input",
                json!({"file_path": text("file_path").unwrap_or_default()}),
            );
            set("tool_response", json!(text("content").unwrap_or_default()));
        }
        "pre_write_code" => {
            set("hook_event_name", json!("PreToolUse"));
            set("tool_name", json!("Edit"));
            set(
                "tool_input",
                json!({"file_path": text("file_path").unwrap_or_default()}),
            );
        }
        "pre_mcp_tool_use" => {
            set("hook_event_name", json!("PreToolUse"));
            set("tool_name", json!(mcp()?));
            set("tool_input", arguments());
        }
        "post_mcp_tool_use" => {
            set("hook_event_name", json!("PostToolUse"));
            set("tool_name", json!(mcp()?));
            set("tool_input", arguments());
            set(
                "tool_response",
                json!(text("mcp_result").unwrap_or_default()),
            );
        }
        "pre_user_prompt" => {
            set("hook_event_name", json!("UserPromptSubmit"));
            set("prompt", json!(text("user_prompt").unwrap_or_default()));
        }
        other if IGNORED.contains(&other) => set("hook_event_name", json!("Stop")),
        other => {
            return Err(format!(
                "unknown Windsurf hook action `{other}`. help: install toolgate with `toolgate init --client windsurf --hooks`"
            ));
        }
    }
    let mut parsed = claude::parse(&claude)?;
    parsed.name = action;
    Ok(parsed)
}

/// The output for a verdict: exit 2 and the reason on stderr blocks; an ask is a deny.
pub fn render(_name: &str, verdict: &Ruling, _authoritative: bool) -> Output {
    let deny = |reason: String| Output {
        stdout: String::new(),
        stderr: reason,
        code: super::BLOCKING_EXIT,
    };
    match verdict.decision {
        HookEffect::Deny => deny(verdict.reason.clone()),
        HookEffect::Ask => deny(super::cannot_ask(
            &verdict.reason,
            "Windsurf's hooks cannot ask",
        )),
        HookEffect::Allow | HookEffect::Abstain => Output {
            stdout: String::new(),
            stderr: String::new(),
            code: 0,
        },
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

    fn event(action: &str, info: Value) -> Parsed {
        parse(&json!({"agent_action_name": action, "trajectory_id": "t1",
            "execution_id": "e1", "timestamp": "2026-12-05T00:00:00Z", "tool_info": info}))
        .unwrap()
    }

    #[test]
    fn actions_read_as_claude_codes_events() {
        let p = event(
            "pre_run_command",
            json!({"command_line": "cat ~/.ssh/id_rsa", "cwd": "/w"}),
        );
        assert_eq!(p.name, "pre_run_command");
        let Some(HookEvent::Before {
            tool, arguments, ..
        }) = p.event
        else {
            panic!()
        };
        assert_eq!((tool.as_str(), &arguments["cwd"]), ("Shell", &json!("/w")));
        let p = event(
            "pre_mcp_tool_use",
            json!({"mcp_server_name": "mail",
            "mcp_tool_name": "send_email", "mcp_tool_arguments": {"to": ["a@b.example"]}}),
        );
        let Some(HookEvent::Before {
            server, arguments, ..
        }) = p.event
        else {
            panic!()
        };
        assert_eq!(
            (server.as_deref(), &arguments["to"][0]),
            (Some("mail"), &json!("a@b.example"))
        );
        let p = event(
            "post_read_code",
            json!({"file_path": "/w/a.md", "content": "mail x@evil.example"}),
        );
        assert!(matches!(p.event, Some(HookEvent::After { .. })));
        let p = event("pre_user_prompt", json!({"user_prompt": "hi"}));
        assert!(matches!(p.event, Some(HookEvent::Prompt { .. })));
        assert_eq!(
            event("post_cascade_response", json!({"response": "r"})).event,
            None
        );
        assert!(parse(&json!({"agent_action_name": "nope", "tool_info": {}})).is_err());
    }

    #[test]
    fn a_deny_and_an_ask_exit_2_with_the_reason() {
        let ruling = |decision| Ruling {
            decision,
            reason: "toolgate: no".to_owned(),
        };
        let out = render("pre_read_code", &ruling(HookEffect::Deny), false);
        assert_eq!((out.code, out.stderr.as_str()), (2, "toolgate: no"));
        let out = render("pre_read_code", &ruling(HookEffect::Ask), false);
        assert!(out.code == 2 && out.stderr.contains("cannot ask"));
        assert_eq!(
            render("pre_read_code", &ruling(HookEffect::Allow), false).code,
            0
        );
    }
}
