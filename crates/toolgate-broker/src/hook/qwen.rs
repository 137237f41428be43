//! Qwen Code's hook format: Claude Code's (the same events, `tool_name` / `tool_input`,
//! `mcp__server__tool` for MCP tools, the same answers and exit code 2 for a deny), with
//! Gemini CLI's names for the built-in tools. Checked against `@qwen-code/qwen-code` 0.24.4
//! driven by a mock of its model API:
//!
//! - `run_shell_command{command, directory?, description, is_background, timeout}`,
//!   `read_file{file_path, offset, limit, pages}`, `write_file{file_path, content}`,
//!   `edit{file_path, old_string, new_string, replace_all}`, `notebook_edit{notebook_path}`,
//!   `glob{pattern, path}`, `grep_search{pattern, glob, path}`, `web_fetch{url, prompt}`
//!   (a deferred tool: the model reaches it through `tool_call`, and the hooks see
//!   `web_fetch` itself);
//! - `UserPromptSubmit` also fires for the turns that carry tool results, with an empty
//!   `prompt`; `prompt` has white space added before an `@` (`bob @partner.example`), and
//!   `submitted_prompt` is what was typed; its `transcript_path` is Qwen Code's own
//!   (`~/.qwen/projects/…/chats`, the typed prompt a `provenance: real_user` line), against
//!   which the prompt is checked, white space aside.
//!
//! The input is rewritten into Claude Code's terms (`Bash`, `Read`, `Write`, `Edit`, …,
//! with their argument names) and read by [`super::claude`]: one mapping of each built-in
//! tool to operations, in the `agent-tools` pack. A tool not in the table keeps its name and
//! is judged as what it is (an unknown tool: the policy's default).

use serde_json::Value;

use super::{Output, Parsed, Ruling, claude};

/// Qwen Code's built-in tools that Claude Code has under another name, with the same
/// argument names: (Qwen Code's name, Claude Code's name).
const TOOLS: &[(&str, &str)] = &[
    ("run_shell_command", "Bash"),
    ("read_file", "Read"),
    ("write_file", "Write"),
    ("edit", "Edit"),
    ("notebook_edit", "NotebookEdit"),
    ("glob", "Glob"),
    ("grep_search", "Grep"),
    ("web_fetch", "WebFetch"),
    ("web_search", "WebSearch"),
    ("todo_write", "TodoWrite"),
];

pub fn parse(v: &Value) -> Result<Parsed, String> {
    claude::parse(&as_claude(v))
}

/// The output for a verdict: Claude Code's.
pub fn render(name: &str, verdict: &Ruling, authoritative: bool) -> Output {
    claude::render(name, verdict, authoritative)
}

/// `v` in Claude Code's terms: the built-in tool renamed, a shell command with a directory
/// as Cursor's `Shell` (`command`, `cwd`), the prompt as typed.
fn as_claude(v: &Value) -> Value {
    let mut v = v.clone();
    let Some(obj) = v.as_object_mut() else {
        return v;
    };
    // The prompt as typed: `prompt` has white space added (`bob @partner.example`), as the
    // transcript has it; the transcript is checked white space aside.
    if let Some(typed) = obj.get("submitted_prompt").and_then(Value::as_str) {
        let typed = typed.to_owned();
        obj.insert("prompt".to_owned(), Value::String(typed));
    }
    let Some(name) = obj
        .get("tool_name")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return v;
    };
    let Some((_, claude_name)) = TOOLS.iter().find(|(q, _)| *q == name) else {
        return v;
    };
    let mut claude_name = (*claude_name).to_owned();
    // A command run in another directory: Cursor's `Shell` has the `cwd` argument.
    if claude_name == "Bash"
        && let Some(Value::Object(input)) = obj.get_mut("tool_input")
        && let Some(dir) = input.remove("directory")
    {
        claude_name = "Shell".to_owned();
        input.insert("cwd".to_owned(), dir);
    }
    obj.insert("tool_name".to_owned(), Value::String(claude_name));
    v
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

    fn input(event: &str, extra: Value) -> Value {
        let mut v = json!({"session_id": "s", "transcript_path": "/h/.qwen/projects/p/chats/s.jsonl",
            "cwd": "/w", "hook_event_name": event});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    }

    fn before(tool: &str, args: Value) -> (Option<String>, String, Value) {
        let p = parse(&input(
            "PreToolUse",
            json!({"tool_name": tool, "tool_input": args}),
        ))
        .unwrap();
        match p.event {
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
    fn built_in_tools_read_as_claude_codes_and_mcp_tools_split() {
        assert_eq!(
            before(
                "run_shell_command",
                json!({"command": "ls", "description": "d"})
            )
            .1,
            "Bash"
        );
        let (_, tool, args) = before(
            "run_shell_command",
            json!({"command": "ls", "directory": "/w/sub"}),
        );
        assert_eq!((tool.as_str(), &args["cwd"]), ("Shell", &json!("/w/sub")));
        assert_eq!(before("read_file", json!({"file_path": "/w/a"})).1, "Read");
        assert_eq!(before("edit", json!({"file_path": "/w/a"})).1, "Edit");
        // Searching without a path searches the working directory, as for Claude Code.
        let (_, tool, args) = before("grep_search", json!({"pattern": "x"}));
        assert_eq!((tool.as_str(), &args["path"]), ("Grep", &json!("/w")));
        assert_eq!(
            before("web_fetch", json!({"url": "https://x.example"})).1,
            "WebFetch"
        );
        let (server, tool, _) = before("mcp__mail__send_email", json!({"to": ["a@b.example"]}));
        assert_eq!(
            (server.as_deref(), tool.as_str()),
            (Some("mail"), "send_email")
        );
        // A tool toolgate does not know keeps its name.
        assert_eq!(before("save_memory", json!({"fact": "x"})).1, "save_memory");
    }

    #[test]
    fn the_typed_prompt_is_checked_against_the_transcript_and_an_empty_one_is_read() {
        let p = parse(&input(
            "UserPromptSubmit",
            json!({"prompt": "send it to bob @partner.example",
                "submitted_prompt": "send it to bob@partner.example"}),
        ))
        .unwrap();
        assert_eq!(
            p.event,
            Some(HookEvent::Prompt {
                text: "send it to bob@partner.example".to_owned(),
                transcript: Some("/h/.qwen/projects/p/chats/s.jsonl".to_owned()),
                conversation: None,
            })
        );
        let p = parse(&input("UserPromptSubmit", json!({"prompt": ""}))).unwrap();
        assert!(matches!(p.event, Some(HookEvent::Prompt { text, .. }) if text.is_empty()));
    }
}
