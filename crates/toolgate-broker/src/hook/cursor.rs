//! Cursor's hook format (<https://cursor.com/docs/agent/hooks>; `hooks.json` `version: 1`).
//!
//! Input: one JSON object with `hook_event_name`, `conversation_id`, `generation_id`,
//! `workspace_roots` and per event `command` + `cwd` (beforeShellExecution,
//! afterShellExecution with `output`), `tool_name` + `tool_input` (beforeMCPExecution; the
//! input may be a JSON object or a string holding one; afterMCPExecution adds `result_json`),
//! `file_path` + `content` (beforeReadFile), `file_path` + `edits` (afterFileEdit), `prompt`
//! (beforeSubmitPrompt).
//!
//! Output: `permission` (`allow`, `deny`, `ask`) with a message for the user and one for the
//! agent (written both as `user_message` / `agent_message` and as the earlier
//! `userMessage` / `agentMessage`); `continue` for beforeSubmitPrompt. Exit codes: 0 reads
//! the JSON, 2 denies, others are hook errors that let the action run unless the hook is
//! `failClosed`. toolgate denies with exit 2 and the JSON, asks with exit 0, allows with
//! `permission: allow` (an answer without `permission` is invalid JSON to Cursor, which then
//! blocks), and answers `{}` to events that decide nothing.

use serde_json::{Value, json};

use super::{Output, Parsed, Ruling, absolute_dir, split_mcp, str_field};
use crate::proto::{HookEffect, HookEvent};

/// Events toolgate accepts without telling the broker anything.
const IGNORED: &[&str] = &[
    "afterFileEdit",
    "afterAgentResponse",
    "afterAgentThought",
    "stop",
    "sessionEnd",
    "subagentStart",
    "subagentStop",
    "preCompact",
    "postToolUseFailure",
];

/// Events answered with `permission`.
const PERMISSION_EVENTS: &[&str] = &[
    "beforeShellExecution",
    "beforeMCPExecution",
    "beforeReadFile",
];

/// The tool name Cursor's shell events are decided under (the `agent-tools` pack maps it).
pub const SHELL_TOOL: &str = "Shell";
/// The tool name of `beforeReadFile`.
pub const READ_TOOL: &str = "Read";

/// `MCP:<server>:<tool>` or `mcp__<server>__<tool>` → (server, tool); else no server.
fn mcp_tool(name: &str) -> (Option<String>, String) {
    if let Some(rest) = name.strip_prefix("MCP:")
        && let Some((server, tool)) = rest.split_once(':')
        && !server.is_empty()
        && !tool.is_empty()
    {
        return (Some(server.to_owned()), tool.to_owned());
    }
    match split_mcp(name) {
        Some((server, tool)) => (Some(server.to_owned()), tool.to_owned()),
        None => (None, name.to_owned()),
    }
}

/// A value Cursor may send as JSON text (`tool_input`, `result_json`).
fn json_or_text(v: &Value, what: &str) -> Result<Value, String> {
    match v {
        Value::String(s) => serde_json::from_str(s)
            .map_err(|e| format!("the hook input's `{what}` is a string but not JSON ({e})")),
        other => Ok(other.clone()),
    }
}

pub fn parse(v: &Value) -> Result<Parsed, String> {
    let name = str_field(v, "hook_event_name")
        .ok_or("the hook input has no `hook_event_name`. help: is this a Cursor hook?")?
        .to_owned();
    if str_field(v, "conversation_id").is_none() {
        return Err(format!(
            "the `{name}` hook input has no `conversation_id`. help: is this a Cursor hook?"
        ));
    }
    let root = v
        .get("workspace_roots")
        .and_then(Value::as_array)
        .and_then(|r| r.first())
        .and_then(Value::as_str)
        .or_else(|| str_field(v, "cwd"))
        .ok_or(format!(
            "the `{name}` hook input has no `workspace_roots` (and no `cwd`)"
        ))?;
    let workspace = absolute_dir(root, "workspace_roots")?;
    let field = |f: &str| -> Result<&str, String> {
        str_field(v, f).ok_or(format!("the `{name}` hook input has no `{f}`"))
    };
    let event = match name.as_str() {
        "beforeShellExecution" => {
            let arguments = match str_field(v, "cwd") {
                Some(cwd) => json!({ "command": field("command")?, "cwd": cwd }),
                None => json!({ "command": field("command")? }),
            };
            Some(HookEvent::Before {
                server: None,
                tool: SHELL_TOOL.to_owned(),
                arguments,
                output: None,
            })
        }
        "afterShellExecution" => Some(HookEvent::After {
            server: None,
            tool: SHELL_TOOL.to_owned(),
            output: json!({ "output": field("output")? }),
            arguments: str_field(v, "command").map(|c| json!({ "command": c })),
        }),
        "beforeMCPExecution" => {
            let (server, tool) = mcp_tool(field("tool_name")?);
            let arguments = json_or_text(
                v.get("tool_input")
                    .ok_or(format!("the `{name}` hook input has no `tool_input`"))?,
                "tool_input",
            )?;
            if !arguments.is_object() {
                return Err(format!(
                    "the `{name}` hook input's `tool_input` is not an object"
                ));
            }
            Some(HookEvent::Before {
                server,
                tool,
                arguments,
                output: None,
            })
        }
        "afterMCPExecution" => {
            let (server, tool) = mcp_tool(field("tool_name")?);
            let output = json_or_text(
                v.get("result_json")
                    .ok_or(format!("the `{name}` hook input has no `result_json`"))?,
                "result_json",
            )?;
            Some(HookEvent::After {
                server,
                tool,
                output,
                arguments: v.get("tool_input").cloned(),
            })
        }
        "beforeReadFile" => Some(HookEvent::Before {
            server: None,
            tool: READ_TOOL.to_owned(),
            arguments: json!({ "file_path": field("file_path")? }),
            // The content Cursor is about to give the agent: indexed unless denied.
            output: str_field(v, "content").map(|c| json!({ "content": c })),
        }),
        "sessionStart" => Some(HookEvent::SessionStart {}),
        // Cursor gives no transcript toolgate can check the prompt against: the prompt
        // vouches for nothing (a forged one must not either).
        "beforeSubmitPrompt" => Some(HookEvent::Prompt {
            text: field("prompt")?.to_owned(),
            transcript: None,
            conversation: None,
        }),
        other if IGNORED.contains(&other) => None,
        other => {
            return Err(format!(
                "unknown Cursor hook event `{other}`. help: install toolgate only on sessionStart, beforeShellExecution, afterShellExecution, beforeMCPExecution, afterMCPExecution, beforeReadFile, afterFileEdit and beforeSubmitPrompt"
            ));
        }
    };
    Ok(Parsed {
        name,
        event,
        workspace,
    })
}

fn permission(p: &str, reason: &str) -> String {
    json!({
        "permission": p,
        "user_message": reason,
        "agent_message": reason,
        "userMessage": reason,
        "agentMessage": reason,
    })
    .to_string()
}

/// The output for a verdict on event `name`.
pub fn render(name: &str, verdict: &Ruling, authoritative: bool) -> Output {
    let reason = verdict.reason.as_str();
    let out = |stdout: String, code: u8| Output {
        stderr: if code == 0 {
            String::new()
        } else {
            reason.to_owned()
        },
        stdout,
        code,
    };
    if PERMISSION_EVENTS.contains(&name) {
        return match verdict.decision {
            HookEffect::Deny => out(permission("deny", reason), super::BLOCKING_EXIT),
            HookEffect::Ask => out(permission("ask", reason), 0),
            // Cursor has no "no decision" here: an answer without `permission` is invalid
            // and blocks. Allow is `permission: allow` with or without --authoritative;
            // Cursor's own settings (auto-run, allowlists) still apply after it.
            HookEffect::Allow | HookEffect::Abstain => {
                let _ = authoritative;
                out(json!({"permission": "allow"}).to_string(), 0)
            }
        };
    }
    if name == "beforeSubmitPrompt" {
        return match verdict.decision {
            HookEffect::Deny | HookEffect::Ask => out(
                json!({"continue": false, "user_message": reason, "userMessage": reason})
                    .to_string(),
                super::BLOCKING_EXIT,
            ),
            HookEffect::Allow | HookEffect::Abstain => {
                out(json!({"continue": true}).to_string(), 0)
            }
        };
    }
    match verdict.decision {
        HookEffect::Deny | HookEffect::Ask => out(permission("deny", reason), super::BLOCKING_EXIT),
        HookEffect::Allow | HookEffect::Abstain => out("{}".to_owned(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_tool_names_split_into_server_and_tool() {
        assert_eq!(
            mcp_tool("MCP:mail:send_email"),
            (Some("mail".to_owned()), "send_email".to_owned())
        );
        assert_eq!(
            mcp_tool("mcp__mail__send_email"),
            (Some("mail".to_owned()), "send_email".to_owned())
        );
        assert_eq!(
            mcp_tool("database_query"),
            (None, "database_query".to_owned())
        );
        assert_eq!(mcp_tool("MCP::x"), (None, "MCP::x".to_owned()));
    }

    #[test]
    fn tool_input_may_be_json_text_or_an_object() {
        assert_eq!(
            json_or_text(&json!("{\"a\":1}"), "x").unwrap(),
            json!({"a": 1})
        );
        assert_eq!(
            json_or_text(&json!({"a": 1}), "x").unwrap(),
            json!({"a": 1})
        );
        assert!(json_or_text(&json!("{"), "x").is_err());
    }

    #[test]
    fn prompts_are_answered_with_continue_and_denies_with_both_spellings() {
        let deny = Ruling {
            decision: HookEffect::Deny,
            reason: "r".to_owned(),
        };
        let out = render("beforeShellExecution", &deny, false);
        assert_eq!(out.code, 2);
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(v["userMessage"], "r");
        assert_eq!(v["user_message"], "r");
        let out = render("beforeSubmitPrompt", &deny, false);
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!((out.code, v["continue"].clone()), (2, json!(false)));
    }
}
