//! Claude Code's hook format (hooks reference, <https://code.claude.com/docs/en/hooks>).
//!
//! Input: one JSON object with `session_id`, `transcript_path`, `cwd`, `hook_event_name` and
//! per event `tool_name` / `tool_input` / `tool_use_id` (PreToolUse), plus `tool_response`
//! (PostToolUse), `prompt` (UserPromptSubmit), `source` (SessionStart).
//!
//! Output: PreToolUse decides with `hookSpecificOutput.permissionDecision` (`allow`, `deny`,
//! `ask`) and `permissionDecisionReason` (shown to Claude for a deny, to the user for an
//! ask). Exit codes: 0 reads the JSON; 2 blocks (the tool call, the prompt) and feeds stderr
//! to Claude; any other code is a non-blocking error and the action goes ahead. toolgate
//! therefore denies with exit 2 and the reason on stderr (and the JSON deny on stdout, which
//! Claude Code ignores then), asks with exit 0 and the JSON, and says nothing (exit 0) when
//! the client's own permission rules should decide.

use serde_json::{Value, json};

use super::{Output, Parsed, Ruling, absolute_dir, split_mcp, str_field};
use crate::proto::{HookEffect, HookEvent};

/// Events toolgate accepts without telling the broker anything.
const IGNORED: &[&str] = &[
    "PostToolUseFailure",
    "PermissionRequest",
    "Notification",
    "Stop",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "SessionEnd",
];

/// Tools whose response only echoes what the agent wrote (the file it wrote, its to-do
/// list): their `PostToolUse` is not tool output to index (destinations the agent itself
/// wrote would otherwise count as seen in untrusted output).
const ECHO_TOOLS: &[&str] = &[
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "TodoWrite",
    "ExitPlanMode",
];

/// Tools that search a directory, `path` defaulting to the working directory.
const SEARCH_TOOLS: &[&str] = &["Grep", "Glob", "LS"];

pub fn parse(v: &Value) -> Result<Parsed, String> {
    // VS Code runs the hooks of Claude Code's settings files with its own input.
    let v = &super::vscode::as_claude(v);
    let name = str_field(v, "hook_event_name")
        .ok_or("the hook input has no `hook_event_name`. help: is this a Claude Code hook?")?
        .to_owned();
    if str_field(v, "session_id").is_none() {
        return Err(format!(
            "the `{name}` hook input has no `session_id`. help: is this a Claude Code hook?"
        ));
    }
    let cwd = str_field(v, "cwd").ok_or(format!("the `{name}` hook input has no `cwd`"))?;
    let workspace = absolute_dir(cwd, "cwd")?;
    let tool = || -> Result<(Option<String>, String), String> {
        let full = str_field(v, "tool_name")
            .filter(|t| !t.is_empty())
            .ok_or(format!("the `{name}` hook input has no `tool_name`"))?;
        Ok(match split_mcp(full) {
            Some((server, tool)) => (Some(server.to_owned()), tool.to_owned()),
            None => (None, full.to_owned()),
        })
    };
    let event = match name.as_str() {
        "PreToolUse" => {
            let (server, tool) = tool()?;
            let mut arguments = v
                .get("tool_input")
                .filter(|a| a.is_object())
                .cloned()
                .ok_or(format!(
                    "the `{name}` hook input has no `tool_input` object"
                ))?;
            if server.is_none()
                && SEARCH_TOOLS.contains(&tool.as_str())
                && let Some(args) = arguments.as_object_mut()
                && !args.contains_key("path")
            {
                // Searching without a path searches the working directory.
                args.insert("path".to_owned(), Value::String(cwd.to_owned()));
            }
            Some(HookEvent::Before {
                server,
                tool,
                arguments,
                output: None,
            })
        }
        "PostToolUse" => {
            let (server, tool) = tool()?;
            let output = v
                .get("tool_response")
                .cloned()
                .ok_or(format!("the `{name}` hook input has no `tool_response`"))?;
            if server.is_none() && ECHO_TOOLS.contains(&tool.as_str()) {
                None
            } else {
                Some(HookEvent::After {
                    server,
                    tool,
                    output,
                    arguments: v.get("tool_input").cloned(),
                })
            }
        }
        "UserPromptSubmit" => {
            let text =
                str_field(v, "prompt").ok_or(format!("the `{name}` hook input has no `prompt`"))?;
            Some(HookEvent::Prompt {
                text: text.to_owned(),
                transcript: str_field(v, "transcript_path")
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned),
                conversation: None,
            })
        }
        "SessionStart" => Some(HookEvent::SessionStart {}),
        other if IGNORED.contains(&other) => None,
        other => {
            return Err(format!(
                "unknown Claude Code hook event `{other}`. help: install toolgate only on PreToolUse, PostToolUse, UserPromptSubmit and SessionStart"
            ));
        }
    };
    Ok(Parsed {
        name,
        event,
        workspace,
    })
}

/// The output for a verdict on event `name`.
pub fn render(name: &str, verdict: &Ruling, authoritative: bool) -> Output {
    let reason = verdict.reason.as_str();
    let silent = Output {
        stdout: String::new(),
        stderr: String::new(),
        code: 0,
    };
    // PreToolUse, and any event toolgate does not know (a failure on it is shaped like a
    // tool call's deny; exit 2 blocks whatever it is).
    let other_known = name == "PostToolUse"
        || name == "UserPromptSubmit"
        || name == "SessionStart"
        || IGNORED.contains(&name);
    if !other_known {
        let decision = |d: &str| {
            json!({"hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": d,
                "permissionDecisionReason": reason,
            }})
            .to_string()
        };
        return match verdict.decision {
            HookEffect::Deny => Output {
                stdout: decision("deny"),
                stderr: reason.to_owned(),
                code: super::BLOCKING_EXIT,
            },
            HookEffect::Ask => Output {
                stdout: decision("ask"),
                stderr: String::new(),
                code: 0,
            },
            HookEffect::Allow if authoritative => Output {
                stdout: decision("allow"),
                stderr: String::new(),
                code: 0,
            },
            HookEffect::Allow | HookEffect::Abstain => silent,
        };
    }
    match verdict.decision {
        // Nothing toolgate does after a tool ran or on a prompt asks anything; a failure
        // blocks (the prompt; after a tool, Claude is shown why).
        HookEffect::Deny | HookEffect::Ask => Output {
            stdout: json!({"decision": "block", "reason": reason}).to_string(),
            stderr: reason.to_owned(),
            code: super::BLOCKING_EXIT,
        },
        HookEffect::Allow | HookEffect::Abstain => silent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(event: &str, extra: Value) -> Value {
        let mut v = json!({"session_id": "s", "transcript_path": "/t", "cwd": "/w", "hook_event_name": event});
        if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
            o.extend(e);
        }
        v
    }

    #[test]
    fn searches_without_a_path_search_the_working_directory() {
        let p = parse(&input(
            "PreToolUse",
            json!({"tool_name": "Grep", "tool_input": {"pattern": "x"}}),
        ))
        .unwrap();
        let Some(HookEvent::Before { arguments, .. }) = p.event else {
            panic!("not a before event");
        };
        assert_eq!(arguments["path"], "/w");
    }

    #[test]
    fn mcp_tools_are_split_and_echoed_writes_are_not_indexed() {
        let p = parse(&input(
            "PreToolUse",
            json!({"tool_name": "mcp__mail__send_email", "tool_input": {}}),
        ))
        .unwrap();
        assert!(matches!(
            p.event,
            Some(HookEvent::Before { server: Some(ref s), ref tool, .. }) if s == "mail" && tool == "send_email"
        ));
        let p = parse(&input(
            "PostToolUse",
            json!({"tool_name": "Write", "tool_input": {}, "tool_response": {"content": "x"}}),
        ))
        .unwrap();
        assert_eq!(p.event, None);
        // A tool input that is not an object is not understood.
        assert!(
            parse(&input(
                "PreToolUse",
                json!({"tool_name": "Bash", "tool_input": "ls"})
            ))
            .is_err()
        );
        // A relative cwd is refused.
        let mut v = input("SessionStart", json!({}));
        v["cwd"] = json!("rel");
        assert!(parse(&v).is_err());
    }
}
