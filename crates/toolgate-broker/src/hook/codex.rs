//! Codex's hook format, checked against `@openai/codex` 0.169.0 driven by a mock of the
//! Responses API.
//!
//! Input: Claude Code's (`session_id`, `transcript_path`, `cwd`, `hook_event_name`,
//! `tool_name`, `tool_input`, `tool_use_id`) plus `turn_id`, `model` and `permission_mode`.
//! A command is `Bash{command}`; MCP tools are `mcp__server__tool`. A file edit is a patch
//! (`*** Begin Patch` … `*** End Patch`): the `apply_patch` tool's `command`, or a shell
//! command that runs `apply_patch` (Codex applies such a command's patch itself, whether or
//! not a program of that name exists). Either is read as an `Edit` of every file the patch
//! adds, updates, deletes or moves to; a shell command that runs `apply_patch` and anything
//! else is refused (Codex would not apply its patch, and one judgement cannot cover both).
//!
//! Output: Claude Code's. Codex has no ask: an `ask` counts as a failed hook and the call
//! runs, so toolgate's ask is a deny here, with the reason and what to change.

use serde_json::{Value, json};

use super::{Output, Parsed, Ruling, claude, vscode::patch_files};
use crate::proto::HookEffect;

pub fn parse(v: &Value) -> Result<Parsed, String> {
    claude::parse(&as_claude(v)?)
}

/// Why an ask is a deny here.
const CANNOT_ASK: &str = "Codex's hooks cannot ask (Codex runs the call when a hook answers `ask`)";

/// The output for a verdict: Claude Code's, an ask made a deny.
pub fn render(name: &str, verdict: &Ruling, authoritative: bool) -> Output {
    if verdict.decision == HookEffect::Ask {
        let deny = Ruling {
            decision: HookEffect::Deny,
            reason: super::cannot_ask(&verdict.reason, CANNOT_ASK),
        };
        return claude::render(name, &deny, authoritative);
    }
    claude::render(name, verdict, authoritative)
}

/// `v` with a patch (the `apply_patch` tool, or a command that runs `apply_patch`) as an
/// `Edit` of the files it touches.
fn as_claude(v: &Value) -> Result<Value, String> {
    let mut v = v.clone();
    let Some(obj) = v.as_object_mut() else {
        return Ok(v);
    };
    let tool = obj.get("tool_name").and_then(Value::as_str).unwrap_or("");
    let command = obj
        .get("tool_input")
        .and_then(|i| i.get("command"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let (dir, patch) = match tool {
        "apply_patch" => (None, command.to_owned()),
        "Bash" => match shell_patch(command)? {
            Some(found) => found,
            // A patch in a form toolgate does not read may still be one Codex applies: its
            // writes would go unseen.
            None if command.contains("*** Begin Patch") => return Err(REFUSED.to_owned()),
            None => return Ok(v),
        },
        _ => return Ok(v),
    };
    let files: Vec<Value> = patch_files(&patch)
        .into_iter()
        .map(|f| match &dir {
            Some(dir) if !f.starts_with('/') => json!(format!("{dir}/{f}")),
            _ => json!(f),
        })
        .collect();
    if files.is_empty() {
        return Err(
            "the patch names no file (`*** Add File:`, `*** Update File:`, `*** Delete File:`). help: this is not a patch toolgate can judge"
                .to_owned(),
        );
    }
    obj.insert("tool_name".to_owned(), json!("Edit"));
    obj.insert("tool_input".to_owned(), json!({"file_path": files}));
    Ok(v)
}

/// Why a shell command with a patch is refused.
const REFUSED: &str = "the command runs `apply_patch` together with something else, or in a form toolgate does not read. help: run the patch alone (`apply_patch <<'EOF'` … `EOF`, after at most `cd DIR &&`), and other commands separately";

/// The patch of a shell command that runs `apply_patch` (or `applypatch`), with the
/// directory of a leading `cd DIR &&`: `apply_patch <<'EOF'` … `EOF`, or `apply_patch '…'`.
/// `Ok(None)`: the command does not run it. `Err`: it runs it among other things.
fn shell_patch(command: &str) -> Result<Option<(Option<String>, String)>, String> {
    let mut rest = command.trim_start();
    let mut dir = None;
    if let Some(after) = rest.strip_prefix("cd ")
        && let Some((d, tail)) = after.split_once("&&")
    {
        dir = Some(d.trim().trim_matches(['\'', '"']).to_owned());
        rest = tail.trim_start();
    }
    let Some(args) = ["apply_patch", "applypatch"]
        .iter()
        .find_map(|p| rest.strip_prefix(p))
        .filter(|a| a.is_empty() || a.starts_with(char::is_whitespace))
    else {
        return Ok(None);
    };
    let refuse = || Err(REFUSED.to_owned());
    // The directory as written: a plain path (no `~`, no expansion) that toolgate resolves
    // as Codex does.
    if dir.as_deref().is_some_and(|d| {
        d.is_empty() || d.contains(['~', '$', '`', '*', '?', ' ', '\'', '"', ';', '|', '&'])
    }) {
        return refuse();
    }
    let args = args.trim_start();
    if let Some(heredoc) = args.strip_prefix("<<") {
        let (marker, body) = heredoc.split_once('\n').unwrap_or((heredoc, ""));
        let marker = marker
            .trim()
            .trim_start_matches('-')
            .trim_matches(['\'', '"']);
        if marker.is_empty()
            || !marker
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return refuse();
        }
        let mut lines = body.split('\n');
        let mut patch = Vec::new();
        for line in lines.by_ref() {
            if line.trim_end() == marker {
                // Nothing may follow the terminator.
                return if lines.all(|l| l.trim().is_empty()) {
                    Ok(Some((dir, patch.join("\n"))))
                } else {
                    refuse()
                };
            }
            patch.push(line);
        }
        return refuse();
    }
    for quote in ['\'', '"'] {
        if let Some(inner) = args.strip_prefix(quote)
            && let Some(end) = inner.rfind(quote)
            && inner.get(end + 1..).is_some_and(|t| t.trim().is_empty())
        {
            return Ok(Some((dir, inner.get(..end).unwrap_or("").to_owned())));
        }
    }
    refuse()
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

    fn before(tool: &str, command: &str) -> Result<(String, Value), String> {
        let p = parse(&json!({"session_id": "s", "turn_id": "t", "cwd": "/w",
            "transcript_path": "/h/.codex/sessions/r.jsonl", "hook_event_name": "PreToolUse",
            "model": "m", "permission_mode": "bypassPermissions", "tool_name": tool,
            "tool_input": {"command": command}, "tool_use_id": "c"}))?;
        match p.event {
            Some(HookEvent::Before {
                tool, arguments, ..
            }) => Ok((tool, arguments)),
            other => panic!("{other:?}"),
        }
    }

    const PATCH: &str = "*** Begin Patch\n*** Add File: notes.txt\n+hi\n*** Update File: /h/.bashrc\n@@\n-a\n+b\n*** End Patch";

    #[test]
    fn a_patch_is_an_edit_of_its_files() {
        let (tool, args) = before("apply_patch", PATCH).unwrap();
        assert_eq!(tool, "Edit");
        assert_eq!(args["file_path"], json!(["notes.txt", "/h/.bashrc"]));
        let (tool, args) = before("Bash", &format!("apply_patch <<'EOF'\n{PATCH}\nEOF\n")).unwrap();
        assert_eq!(tool, "Edit");
        assert_eq!(args["file_path"][1], "/h/.bashrc");
        let (_, args) = before(
            "Bash",
            &format!("cd sub && apply_patch <<EOF\n{PATCH}\nEOF"),
        )
        .unwrap();
        assert_eq!(args["file_path"][0], "sub/notes.txt");
        let (_, args) = before("Bash", &format!("applypatch '{PATCH}'")).unwrap();
        assert_eq!(args["file_path"][0], "notes.txt");
    }

    #[test]
    fn a_patch_with_anything_else_is_refused_and_other_commands_stay_commands() {
        for command in [
            format!("apply_patch <<'EOF'\n{PATCH}\nEOF\ncat ~/.ssh/id_rsa"),
            format!("apply_patch <<'EOF'\n{PATCH}\n"),
            format!("apply_patch '{PATCH}'; cat ~/.ssh/id_rsa"),
            "apply_patch <<'EOF'\n*** Begin Patch\n*** End Patch\nEOF".to_owned(),
            // A home directory toolgate would not resolve, and forms Codex may apply that
            // toolgate does not read: refused, never judged as a plain command.
            format!("cd ~ && apply_patch <<'EOF'\n{PATCH}\nEOF"),
            format!("cd $HOME && apply_patch <<'EOF'\n{PATCH}\nEOF"),
            format!("cd sub; apply_patch <<'EOF'\n{PATCH}\nEOF"),
            format!("bash -lc \"apply_patch <<'EOF'\n{PATCH}\nEOF\""),
        ] {
            assert!(before("Bash", &command).is_err(), "{command}");
        }
        let (tool, args) = before("Bash", "cat README.md").unwrap();
        assert_eq!(
            (tool.as_str(), &args["command"]),
            ("Bash", &json!("cat README.md"))
        );
        assert_eq!(before("Bash", "apply_patches x").unwrap().0, "Bash");
    }

    #[test]
    fn an_ask_is_a_deny_that_says_why() {
        let ask = Ruling {
            decision: HookEffect::Ask,
            reason: "toolgate: `Bash`: default is ask".to_owned(),
        };
        let out = render("PreToolUse", &ask, false);
        assert_eq!(out.code, 2);
        assert!(out.stdout.contains(r#""permissionDecision":"deny""#));
        assert!(
            out.stderr.contains("Codex's hooks cannot ask"),
            "{}",
            out.stderr
        );
    }
}
