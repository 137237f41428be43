//! Gemini CLI's hook format, checked against `@google/gemini-cli` 0.61.0 driven by a mock of
//! its model API.
//!
//! Input: `{session_id, transcript_path, cwd, hook_event_name, timestamp, …}` with
//! `tool_name` / `tool_input` (`BeforeTool`), plus `tool_response{llmContent, returnDisplay}`
//! (`AfterTool`), `prompt` (`BeforeAgent`). MCP tools are named `mcp_<server>_<tool>`, which
//! cannot be split (both names may hold `_`): the input's `mcp_context{server_name,
//! tool_name}` says which is which. The built-in tools:
//! `run_shell_command{command, description, dir_path?, is_background}`,
//! `read_file{file_path, start_line?, end_line?}`, `write_file{file_path, content}`,
//! `replace{file_path, old_string, new_string, instruction?, allow_multiple?}`,
//! `glob{pattern, dir_path?}`, `grep_search{pattern, dir_path?, include_pattern?, …}`,
//! `list_directory{dir_path}`, `web_fetch{prompt}` (the URLs to fetch are in the prompt's
//! text), `google_web_search{query}`, `write_todos`, `save_memory`, `read_many_files`.
//!
//! Output: `{"decision": "deny", "reason": …}` or exit 2 with the reason on stderr blocks
//! (Claude Code's `hookSpecificOutput` is ignored); any other non-zero exit code, and a
//! missing executable, block too in 0.61.0. `{"decision": "ask"}` hangs a headless (`-p`)
//! run, and a hook cannot tell a headless run from an interactive one: toolgate's ask is a
//! deny here, with the reason and what to change.
//!
//! The input is rewritten into Claude Code's terms and read by [`super::claude`]: one mapping
//! of each built-in tool to operations, the `agent-tools` pack. A tool not in the table
//! keeps its name and is judged as what it is (an unknown tool: the policy's default;
//! `read_many_files` among them).

use serde_json::{Map, Value, json};

use super::{Output, Parsed, Ruling, claude};
use crate::proto::HookEffect;

/// Gemini CLI's events and Claude Code's for the same moment.
const EVENTS: &[(&str, &str)] = &[
    ("BeforeTool", "PreToolUse"),
    ("AfterTool", "PostToolUse"),
    ("BeforeAgent", "UserPromptSubmit"),
    ("SessionStart", "SessionStart"),
];

/// Events toolgate accepts without telling the broker anything.
const IGNORED: &[&str] = &[
    "AfterAgent",
    "BeforeModel",
    "AfterModel",
    "BeforeToolSelection",
    "SessionEnd",
    "PreCompress",
    "Notification",
];

/// Gemini CLI's built-in tools that Claude Code has under another name: (Gemini CLI's name,
/// Claude Code's name). Arguments are renamed by [`as_claude`].
const TOOLS: &[(&str, &str)] = &[
    ("run_shell_command", "Bash"),
    ("read_file", "Read"),
    ("write_file", "Write"),
    ("replace", "Edit"),
    ("glob", "Glob"),
    ("grep_search", "Grep"),
    ("list_directory", "LS"),
    ("web_fetch", "WebFetch"),
    ("google_web_search", "WebSearch"),
    ("write_todos", "TodoWrite"),
];

pub fn parse(v: &Value) -> Result<Parsed, String> {
    let name = super::str_field(v, "hook_event_name")
        .ok_or("the hook input has no `hook_event_name`. help: is this a Gemini CLI hook?")?
        .to_owned();
    if IGNORED.contains(&name.as_str()) {
        let cwd =
            super::str_field(v, "cwd").ok_or(format!("the `{name}` hook input has no `cwd`"))?;
        return Ok(Parsed {
            name,
            event: None,
            workspace: super::absolute_dir(cwd, "cwd")?,
        });
    }
    let Some((_, claude_name)) = EVENTS.iter().find(|(g, _)| *g == name) else {
        return Err(format!(
            "unknown Gemini CLI hook event `{name}`. help: install toolgate only on BeforeTool, AfterTool, BeforeAgent and SessionStart (`toolgate init --client gemini-cli --hooks`)"
        ));
    };
    let mut parsed = claude::parse(&as_claude(v, claude_name)?)?;
    parsed.name = name;
    Ok(parsed)
}

/// `v` in Claude Code's terms: the event renamed, an MCP tool as `mcp__server__tool`, a
/// built-in tool under Claude Code's name with its argument names.
fn as_claude(v: &Value, event: &str) -> Result<Value, String> {
    let mut v = v.clone();
    let Some(obj) = v.as_object_mut() else {
        return Err("the hook input is not a JSON object".to_owned());
    };
    obj.insert("hook_event_name".to_owned(), json!(event));
    let Some(name) = obj
        .get("tool_name")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return Ok(v);
    };
    if let Some(context) = obj.get("mcp_context") {
        let part = |k: &str| {
            context
                .get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .ok_or(format!(
                    "the hook input's `mcp_context` of `{name}` has no `{k}`"
                ))
        };
        let full = format!("mcp__{}__{}", part("server_name")?, part("tool_name")?);
        obj.insert("tool_name".to_owned(), Value::String(full));
        return Ok(v);
    }
    let Some((_, claude_name)) = TOOLS.iter().find(|(g, _)| *g == name) else {
        return Ok(v);
    };
    let mut claude_name = (*claude_name).to_owned();
    if let Some(Value::Object(input)) = obj.get_mut("tool_input") {
        rename_arguments(&mut claude_name, input);
    }
    obj.insert("tool_name".to_owned(), Value::String(claude_name));
    Ok(v)
}

/// Gemini CLI's argument names as Claude Code's (`claude_name` becomes Cursor's `Shell`
/// for a command run in another directory).
fn rename_arguments(claude_name: &mut String, input: &mut Map<String, Value>) {
    match claude_name.as_str() {
        "Bash" => {
            if let Some(dir) = input.remove("dir_path") {
                *claude_name = "Shell".to_owned();
                input.insert("cwd".to_owned(), dir);
            }
        }
        "Glob" | "Grep" | "LS" => {
            if let Some(dir) = input.remove("dir_path") {
                input.insert("path".to_owned(), dir);
            }
            // Gemini CLI's `include_pattern` is ripgrep's `--glob`.
            if let Some(include) = input.remove("include_pattern") {
                input.insert("glob".to_owned(), include);
            }
        }
        "WebFetch" => {
            let urls: Vec<Value> = input
                .get("prompt")
                .and_then(Value::as_str)
                .map(urls_in)
                .unwrap_or_default()
                .into_iter()
                .map(Value::String)
                .collect();
            input.insert("url".to_owned(), Value::Array(urls));
        }
        _ => {}
    }
}

/// The URLs `web_fetch` fetches from its prompt: each `http://` or `https://` and what
/// follows it up to white space, as Gemini CLI reads them.
fn urls_in(prompt: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in prompt.split_whitespace() {
        let lower = word.to_ascii_lowercase();
        let at = [lower.find("https://"), lower.find("http://")]
            .into_iter()
            .flatten()
            .min();
        if let Some(url) = at.and_then(|at| word.get(at..))
            && !out.iter().any(|u| u == url)
        {
            out.push(url.to_owned());
        }
    }
    out
}

/// Why an ask is a deny here.
const CANNOT_ASK: &str = "a Gemini CLI hook cannot ask (its `ask` hangs a headless run)";

/// The output for a verdict on event `name`.
pub fn render(name: &str, verdict: &Ruling, authoritative: bool) -> Output {
    let deny = |reason: &str| Output {
        stdout: json!({"decision": "deny", "reason": reason}).to_string(),
        stderr: reason.to_owned(),
        code: super::BLOCKING_EXIT,
    };
    let silent = Output {
        stdout: String::new(),
        stderr: String::new(),
        code: 0,
    };
    match verdict.decision {
        HookEffect::Deny => deny(&verdict.reason),
        HookEffect::Ask => deny(&super::cannot_ask(&verdict.reason, CANNOT_ASK)),
        HookEffect::Allow if authoritative && name == "BeforeTool" => Output {
            stdout: json!({"decision": "allow"}).to_string(),
            stderr: String::new(),
            code: 0,
        },
        HookEffect::Allow | HookEffect::Abstain => silent,
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

    fn input(event: &str, extra: Value) -> Value {
        let mut v = json!({"session_id": "s", "cwd": "/w", "hook_event_name": event,
            "transcript_path": "/h/.gemini/tmp/w/chats/session-1.jsonl",
            "timestamp": "2026-12-05T01:58:15.842Z"});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    }

    fn before(tool: &str, args: Value) -> (Option<String>, String, Value) {
        let p = parse(&input(
            "BeforeTool",
            json!({"tool_name": tool, "tool_input": args}),
        ))
        .unwrap();
        assert_eq!(p.name, "BeforeTool");
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
    fn built_in_tools_read_as_claude_codes() {
        let (_, tool, args) = before(
            "run_shell_command",
            json!({"command": "ls", "description": "d", "is_background": false}),
        );
        assert_eq!((tool.as_str(), &args["command"]), ("Bash", &json!("ls")));
        let (_, tool, args) = before(
            "run_shell_command",
            json!({"command": "ls", "dir_path": "/w/sub"}),
        );
        assert_eq!((tool.as_str(), &args["cwd"]), ("Shell", &json!("/w/sub")));
        assert_eq!(before("read_file", json!({"file_path": "/w/a"})).1, "Read");
        assert_eq!(before("replace", json!({"file_path": "/w/a"})).1, "Edit");
        let (_, tool, args) = before(
            "grep_search",
            json!({"pattern": "x", "dir_path": "/h", "include_pattern": "*.rs"}),
        );
        assert_eq!(
            (tool.as_str(), &args["path"], &args["glob"]),
            ("Grep", &json!("/h"), &json!("*.rs"))
        );
        // Searching without a directory searches the working directory.
        let (_, tool, args) = before("glob", json!({"pattern": "**/*.pem"}));
        assert_eq!((tool.as_str(), &args["path"]), ("Glob", &json!("/w")));
        assert_eq!(
            before("list_directory", json!({"dir_path": "/h/.ssh"})).2["path"],
            json!("/h/.ssh")
        );
        // A tool toolgate does not know keeps its name.
        assert_eq!(
            before("read_many_files", json!({"include": ["*"]})).1,
            "read_many_files"
        );
    }

    #[test]
    fn web_fetch_fetches_the_urls_of_its_prompt() {
        let (_, tool, args) = before(
            "web_fetch",
            json!({"prompt": "Summarise https://a.example/x and (HTTP://b.example/y) and https://a.example/x"}),
        );
        assert_eq!(tool, "WebFetch");
        assert_eq!(
            args["url"],
            json!(["https://a.example/x", "HTTP://b.example/y)"])
        );
        assert_eq!(
            before("web_fetch", json!({"prompt": "nothing"})).2["url"],
            json!([])
        );
    }

    #[test]
    fn mcp_tools_are_split_by_their_context_not_their_name() {
        let (server, tool, _) = before_mcp("mcp_my_mail_send_email", "my_mail", "send_email");
        assert_eq!(
            (server.as_deref(), tool.as_str()),
            (Some("my_mail"), "send_email")
        );
        let bad = input(
            "BeforeTool",
            json!({"tool_name": "mcp_a_b", "tool_input": {}, "mcp_context": {"server_name": "a"}}),
        );
        assert!(parse(&bad).unwrap_err().contains("`tool_name`"));
    }

    fn before_mcp(full: &str, server: &str, tool: &str) -> (Option<String>, String, Value) {
        let p = parse(&input(
            "BeforeTool",
            json!({"tool_name": full, "tool_input": {"to": ["a@b.example"]},
                "mcp_context": {"server_name": server, "tool_name": tool}}),
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
    fn after_tool_prompt_and_other_events() {
        let p = parse(&input(
            "AfterTool",
            json!({"tool_name": "web_fetch", "tool_input": {"prompt": "https://x.example"},
                "tool_response": {"llmContent": "mail bob@evil.example", "returnDisplay": ""}}),
        ))
        .unwrap();
        let Some(HookEvent::After { tool, output, .. }) = p.event else {
            panic!("{:?}", p.event)
        };
        assert_eq!(tool, "WebFetch");
        assert_eq!(output["llmContent"], json!("mail bob@evil.example"));
        let p = parse(&input("BeforeAgent", json!({"prompt": "mail bob"}))).unwrap();
        assert_eq!(p.name, "BeforeAgent");
        let Some(HookEvent::Prompt {
            text, transcript, ..
        }) = p.event
        else {
            panic!("{:?}", p.event)
        };
        assert_eq!(text, "mail bob");
        assert_eq!(
            transcript.as_deref(),
            Some("/h/.gemini/tmp/w/chats/session-1.jsonl")
        );
        assert_eq!(parse(&input("AfterModel", json!({}))).unwrap().event, None);
        assert!(
            parse(&input("Whatever", json!({})))
                .unwrap_err()
                .contains("unknown Gemini CLI hook event `Whatever`")
        );
    }

    #[test]
    fn a_deny_and_an_ask_block_and_an_allow_says_nothing() {
        let ruling = |decision| Ruling {
            decision,
            reason: "toolgate: `Bash`: no".to_owned(),
        };
        let out = render("BeforeTool", &ruling(HookEffect::Deny), false);
        assert_eq!(out.code, 2);
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(v["decision"], "deny");
        assert_eq!(out.stderr, "toolgate: `Bash`: no");
        let out = render("BeforeTool", &ruling(HookEffect::Ask), false);
        assert_eq!(out.code, 2);
        assert!(
            out.stderr
                .starts_with("toolgate: `Bash`: no (toolgate would ask"),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains("cannot ask"));
        let out = render("BeforeTool", &ruling(HookEffect::Allow), false);
        assert_eq!((out.code, out.stdout.as_str()), (0, ""));
        let out = render("BeforeTool", &ruling(HookEffect::Allow), true);
        assert_eq!(out.stdout, r#"{"decision":"allow"}"#);
        // A failure on a prompt blocks it.
        assert_eq!(
            render("BeforeAgent", &ruling(HookEffect::Deny), false).code,
            2
        );
    }
}
