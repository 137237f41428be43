//! VS Code's agent hooks (code.visualstudio.com/docs/copilot/customization/hooks): VS Code
//! runs the hooks of Claude Code's settings files (`~/.claude/settings.json`,
//! `.claude/settings*.json`) and of `.github/hooks/*.json`, so toolgate's Claude Code and
//! Copilot CLI entries receive its events. Its input is Claude Code's with `hookEventName`
//! and `sessionId` spelled in camelCase, and its own built-in tools, named as the model
//! sees them, with camelCase arguments: `run_in_terminal{command}`, `read_file{filePath}`,
//! `create_file{filePath, content}`, `replace_string_in_file{filePath, …}`,
//! `multi_replace_string_in_file{replacements: [{filePath, …}]}`,
//! `insert_edit_into_file{filePath, code}`, `edit_notebook_file{filePath}`,
//! `apply_patch{input}`, `create_directory{dirPath}`, `list_dir{path}`,
//! `file_search{query}`, `grep_search{query, includePattern}`, `fetch_webpage{urls}`
//! (the extension's internal names, `copilot_readFile` and the like, are read too).
//!
//! [`as_claude`] rewrites such an input into Claude Code's terms; input without any of it
//! comes back unchanged. Not checked against the real VS Code (it is not a command-line
//! program CI can drive): against its documentation and the tool definitions of its
//! Copilot extension.

use serde_json::{Map, Value, json};

/// VS Code's built-in tools (both spellings) and Claude Code's tool for each.
const TOOLS: &[(&str, &str, &str)] = &[
    ("run_in_terminal", "run_in_terminal", "Bash"),
    ("read_file", "copilot_readFile", "Read"),
    ("create_file", "copilot_createFile", "Write"),
    ("replace_string_in_file", "copilot_replaceString", "Edit"),
    (
        "multi_replace_string_in_file",
        "copilot_multiReplaceString",
        "Edit",
    ),
    ("insert_edit_into_file", "copilot_insertEdit", "Edit"),
    ("edit_notebook_file", "copilot_editNotebook", "NotebookEdit"),
    ("apply_patch", "copilot_applyPatch", "Edit"),
    ("create_directory", "copilot_createDirectory", "Write"),
    ("list_dir", "copilot_listDirectory", "LS"),
    ("file_search", "copilot_findFiles", "Glob"),
    ("grep_search", "copilot_findTextInFiles", "Grep"),
    ("fetch_webpage", "copilot_fetchWebPage", "WebFetch"),
];

/// `v` in Claude Code's terms when it is VS Code's input; otherwise `v` itself.
pub fn as_claude(v: &Value) -> Value {
    let Some(obj) = v.as_object() else {
        return v.clone();
    };
    let camel = obj.contains_key("hookEventName") || obj.contains_key("sessionId");
    let tool = obj
        .get("tool_name")
        .and_then(Value::as_str)
        .and_then(|name| TOOLS.iter().find(|(a, b, _)| *a == name || *b == name));
    if !camel && tool.is_none() {
        return v.clone();
    }
    let mut obj = obj.clone();
    for (from, to) in [
        ("hookEventName", "hook_event_name"),
        ("sessionId", "session_id"),
    ] {
        if !obj.contains_key(to)
            && let Some(x) = obj.remove(from)
        {
            obj.insert(to.to_owned(), x);
        }
    }
    if let Some((_, _, claude)) = tool {
        obj.insert("tool_name".to_owned(), json!(claude));
        if let Some(Value::Object(input)) = obj.get_mut("tool_input") {
            *input = arguments(claude, input);
        }
    }
    Value::Object(obj)
}

/// VS Code's arguments as those of Claude Code's tool `claude`: the paths and URLs under
/// Claude Code's names (the rest kept).
fn arguments(claude: &str, input: &Map<String, Value>) -> Map<String, Value> {
    let mut out = input.clone();
    let mut set = |k: &str, v: Value| {
        out.insert(k.to_owned(), v);
    };
    let get = |k: &str| input.get(k).cloned();
    match claude {
        "Read" | "Write" | "Edit" => {
            let mut paths: Vec<Value> = ["filePath", "dirPath"]
                .iter()
                .filter_map(|k| get(k))
                .collect();
            if let Some(Value::Array(items)) = input.get("replacements") {
                paths.extend(items.iter().filter_map(|r| r.get("filePath").cloned()));
            }
            if let Some(patch) = input.get("input").and_then(Value::as_str) {
                paths.extend(patch_files(patch).into_iter().map(Value::String));
            }
            match paths.len() {
                0 => {}
                1 => set("file_path", paths.remove(0)),
                _ => set("file_path", Value::Array(paths)),
            }
        }
        "NotebookEdit" => {
            if let Some(p) = get("filePath") {
                set("notebook_path", p);
            }
        }
        "Glob" => {
            if let Some(q) = get("query") {
                set("pattern", q);
            }
        }
        "Grep" => {
            if let Some(q) = get("query") {
                set("pattern", q);
            }
            if let Some(g) = get("includePattern") {
                set("glob", g);
            }
        }
        "WebFetch" => {
            if let Some(urls) = get("urls") {
                set("url", urls);
            }
        }
        _ => {}
    }
    out
}

/// The files a patch in the `*** Begin Patch` format (VS Code's and Codex's `apply_patch`)
/// adds, updates, deletes or moves to, in order, each once.
pub fn patch_files(patch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        let line = line.trim_end_matches('\r');
        let path = [
            "*** Add File: ",
            "*** Update File: ",
            "*** Delete File: ",
            "*** Move to: ",
        ]
        .iter()
        .find_map(|prefix| line.strip_prefix(prefix))
        .map(str::trim);
        if let Some(path) = path.filter(|p| !p.is_empty())
            && !out.iter().any(|o| o == path)
        {
            out.push(path.to_owned());
        }
    }
    out
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests {
    use super::*;

    fn pre(tool: &str, input: Value) -> Value {
        as_claude(&json!({"hookEventName": "PreToolUse", "sessionId": "s",
            "timestamp": "2026-02-09T10:30:00.000Z", "cwd": "/w",
            "transcript_path": "/t.json", "tool_name": tool, "tool_input": input,
            "tool_use_id": "t1"}))
    }

    #[test]
    fn vs_codes_input_reads_as_claude_codes() {
        let v = pre(
            "run_in_terminal",
            json!({"command": "ls", "isBackground": false}),
        );
        assert_eq!(
            (&v["hook_event_name"], &v["session_id"], &v["tool_name"]),
            (&json!("PreToolUse"), &json!("s"), &json!("Bash"))
        );
        let v = pre("copilot_readFile", json!({"filePath": "/h/.ssh/id_rsa"}));
        assert_eq!(
            (&v["tool_name"], &v["tool_input"]["file_path"]),
            (&json!("Read"), &json!("/h/.ssh/id_rsa"))
        );
        let v = pre(
            "multi_replace_string_in_file",
            json!({"replacements": [{"filePath": "/w/a"}, {"filePath": "/h/.bashrc"}]}),
        );
        assert_eq!(v["tool_input"]["file_path"], json!(["/w/a", "/h/.bashrc"]));
        let v = pre(
            "fetch_webpage",
            json!({"urls": ["https://x.example"], "query": "q"}),
        );
        assert_eq!(
            (&v["tool_name"], &v["tool_input"]["url"]),
            (&json!("WebFetch"), &json!(["https://x.example"]))
        );
        let v = pre(
            "grep_search",
            json!({"query": "key", "includePattern": "*.env"}),
        );
        assert_eq!(
            (&v["tool_input"]["pattern"], &v["tool_input"]["glob"]),
            (&json!("key"), &json!("*.env"))
        );
        // Claude Code's own input is left alone.
        let claude = json!({"hook_event_name": "PreToolUse", "session_id": "s", "cwd": "/w",
            "tool_name": "Bash", "tool_input": {"command": "ls"}});
        assert_eq!(as_claude(&claude), claude);
    }

    #[test]
    fn a_patch_names_every_file_it_touches() {
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-x\n+y\n*** Add File: /h/.bashrc\n+evil\n*** Delete File: b.txt\n*** Update File: c.txt\n*** Move to: d.txt\n*** Update File: src/a.rs\n*** End Patch\n";
        assert_eq!(
            patch_files(patch),
            ["src/a.rs", "/h/.bashrc", "b.txt", "c.txt", "d.txt"]
        );
        let v = pre("apply_patch", json!({"input": patch, "explanation": "e"}));
        assert_eq!(v["tool_name"], "Edit");
        assert_eq!(v["tool_input"]["file_path"][1], "/h/.bashrc");
    }
}
