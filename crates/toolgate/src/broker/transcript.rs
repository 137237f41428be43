//! What a client's own transcript says the user typed: the second layer against forged hook
//! events.
//!
//! Claude Code hands every hook its session's `transcript_path`, a JSON Lines file in
//! `~/.claude/projects/<project>/<session>.jsonl` (`$CLAUDE_CONFIG_DIR/projects` when set)
//! that it writes itself: one object per line, a typed prompt as
//! `{"type":"user","isSidechain":false,"message":{"role":"user","content":"…"}, …}` (or
//! `content` as a list of blocks, the prompt's text in `{"type":"text","text":"…"}`); tool
//! results are user lines too, with `tool_result` blocks. A `UserPromptSubmit` vouches for the
//! destinations in its prompt only once the prompt is found there as a user message: an agent
//! that forges the event (whatever spelling of toolgate it runs) cannot put its text into
//! the transcript, which is one of toolgate's protected files.
//!
//! Only the SHA-256 of each message's text is kept, never the text.

use std::collections::HashSet;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// The bytes of a transcript's end that are read (a prompt is at most 4 MiB).
const MAX_TAIL: u64 = 16 * 1024 * 1024;
/// Digests collected from one read at most.
const MAX_MESSAGES: usize = 4096;

/// The SHA-256 of a prompt's text, as kept for a pending prompt.
pub fn prompt_digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// The directories Claude Code keeps its transcripts in (canonical), for this user.
pub fn transcript_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(dir) = std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        roots.push(PathBuf::from(dir).join("projects"));
    }
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        roots.push(PathBuf::from(home).join(".claude/projects"));
    }
    roots
        .into_iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .collect()
}

/// Where `path` may be read as a transcript: a regular `.jsonl` file of this user inside one
/// of `roots` (after resolving symlinks). `Err` says why not.
pub fn check_path(path: &Path, roots: &[PathBuf]) -> Result<PathBuf, String> {
    let real = std::fs::canonicalize(path).map_err(|e| {
        format!(
            "the transcript `{}` cannot be resolved ({e})",
            path.display()
        )
    })?;
    if !roots.iter().any(|r| real.starts_with(r)) {
        return Err(format!(
            "the transcript `{}` is not in Claude Code's transcript directory",
            path.display()
        ));
    }
    if real.extension().and_then(|e| e.to_str()) != Some("jsonl") {
        return Err(format!("`{}` is no JSON Lines transcript", path.display()));
    }
    let meta = std::fs::metadata(&real).map_err(|e| e.to_string())?;
    if !meta.is_file() || meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(format!(
            "the transcript `{}` is not a regular file of this user",
            path.display()
        ));
    }
    Ok(real)
}

/// A transcript's identity for "has it changed since": (size, mtime in ns).
pub fn stamp(path: &Path) -> Option<(u64, i128)> {
    let m = std::fs::metadata(path).ok()?;
    Some((
        m.len(),
        i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    ))
}

/// The digests of the user messages in the last [`MAX_TAIL`] bytes of the transcript at
/// `path` (already checked with [`check_path`]).
pub fn user_message_digests(path: &Path) -> Result<HashSet<[u8; 32]>, String> {
    let mut file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let start = len.saturating_sub(MAX_TAIL);
    file.seek(SeekFrom::Start(start))
        .map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_TAIL)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    let mut lines = bytes.split(|b| *b == b'\n');
    if start > 0 {
        // The first line is cut: not a whole record.
        lines.next();
    }
    let mut out = HashSet::new();
    for line in lines {
        if out.len() >= MAX_MESSAGES {
            break;
        }
        let Ok(record) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        for text in typed_texts(&record) {
            out.insert(prompt_digest(text));
        }
    }
    Ok(out)
}

/// The texts of a record that the user typed: a `user` record of the main conversation
/// (not a sub-agent's, whose "user" is the model), not one Claude Code wrote itself (meta,
/// a compaction summary), that carries no tool result.
fn typed_texts(record: &Value) -> Vec<&str> {
    let flag = |k: &str| record.get(k).and_then(Value::as_bool) == Some(true);
    if record.get("type").and_then(Value::as_str) != Some("user")
        || flag("isSidechain")
        || flag("isMeta")
        || flag("isCompactSummary")
        || flag("isVisibleInTranscriptOnly")
        || record.get("toolUseResult").is_some()
    {
        return Vec::new();
    }
    let Some(message) = record.get("message") else {
        return Vec::new();
    };
    if message.get("role").and_then(Value::as_str) != Some("user") {
        return Vec::new();
    }
    match message.get("content") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(blocks)) => {
            if blocks
                .iter()
                .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            {
                return Vec::new();
            }
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_the_user_typed_counts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let path = root.join("s.jsonl");
        let lines = [
            r#"{"type":"queue-operation","operation":"dequeue"}"#,
            r#"{"parentUuid":null,"isSidechain":false,"userType":"external","type":"user","message":{"role":"user","content":"mail carol@corp.example"},"uuid":"1"}"#,
            r#"{"type":"user","isSidechain":false,"message":{"role":"user","content":[{"type":"text","text":"and dave@corp.example"},{"type":"image","source":{}}]}}"#,
            r#"{"type":"user","isSidechain":false,"message":{"role":"user","content":[{"tool_use_id":"t","type":"tool_result","content":"leak@evil.example"}]},"toolUseResult":{}}"#,
            r#"{"type":"user","isSidechain":true,"message":{"role":"user","content":"sub-agent prompt"}}"#,
            r#"{"type":"user","isCompactSummary":true,"message":{"role":"user","content":"summary"}}"#,
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"model text"}]}}"#,
            "not json",
        ];
        std::fs::write(&path, lines.join("\n")).unwrap();
        let got =
            user_message_digests(&check_path(&path, std::slice::from_ref(&root)).unwrap()).unwrap();
        assert!(got.contains(&prompt_digest("mail carol@corp.example")));
        assert!(got.contains(&prompt_digest("and dave@corp.example")));
        for not in [
            "leak@evil.example",
            "sub-agent prompt",
            "summary",
            "model text",
        ] {
            assert!(!got.contains(&prompt_digest(not)), "{not}");
        }
        assert_eq!(got.len(), 2);
        // Outside the transcript directory, or not a transcript: refused.
        let other = tempfile::tempdir().unwrap();
        assert!(check_path(&path, &[other.path().canonicalize().unwrap()]).is_err());
        let txt = root.join("s.txt");
        std::fs::write(&txt, "x").unwrap();
        assert!(check_path(&txt, std::slice::from_ref(&root)).is_err());
        // A symlink into the directory from outside resolves to where it points.
        let outside = other.path().join("t.jsonl");
        std::fs::write(&outside, lines[1]).unwrap();
        let link = root.join("l.jsonl");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        assert!(check_path(&link, &[root]).is_err());
    }
}
