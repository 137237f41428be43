//! Client hooks (`toolgate hook <client>`): one process per hook event, which
//! reads the client's JSON on stdin, asks the per-user broker (started if none runs) and
//! writes the client's decision on stdout.
//!
//! The process stays small: no async runtime, no policy loading (the broker keeps the policy
//! compiled and the agent session's state), a blocking Unix socket. Everything that goes
//! wrong (input, broker, policy, a timeout, a panic) ends in the client's deny and the exit
//! code the client treats as blocking (2 for both clients): never a code the client reads
//! as a non-blocking error.

pub mod claude;
pub mod codex;
pub mod command;
pub mod copilot;
pub mod cursor;
pub mod gemini;
pub mod link;
pub mod opencode;
pub mod qwen;
pub mod vscode;
pub mod windsurf;

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::proto::{HookEffect, HookEvent};

/// The largest hook input read from stdin, in bytes.
pub const MAX_INPUT: usize = 4 * 1024 * 1024;
/// The exit code both clients treat as "block" (Claude Code: exit 2 blocks the tool call,
/// the prompt, or shows stderr to the model; Cursor: exit 2 denies). Any other non-zero code
/// is a non-blocking error to both, so toolgate never exits with one.
pub const BLOCKING_EXIT: u8 = 2;

/// Which client runs the hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    /// Claude Code (`.claude/settings.json` `hooks`).
    #[value(name = "claude-code")]
    ClaudeCode,
    /// Cursor (`.cursor/hooks.json`, `version: 1`).
    Cursor,
    /// Qwen Code (`.qwen/settings.json` `hooks`: Claude Code's format, Gemini CLI's tool
    /// names).
    #[value(name = "qwen-code")]
    QwenCode,
    /// Gemini CLI (`.gemini/settings.json` `hooks`: `BeforeTool`, `AfterTool`,
    /// `BeforeAgent`).
    #[value(name = "gemini-cli")]
    GeminiCli,
    /// GitHub Copilot CLI (`.github/hooks/*.json`, `~/.copilot/hooks/*.json`: Claude
    /// Code's events and answers, its own argument names).
    #[value(name = "copilot-cli")]
    CopilotCli,
    /// Codex (`~/.codex/hooks.json`, `.codex/hooks.json`: Claude Code's format; trusted
    /// hooks only).
    Codex,
    /// OpenCode (the plugin `toolgate init --client opencode --hooks` writes).
    #[value(name = "opencode")]
    OpenCode,
    /// Windsurf (`.windsurf/hooks.json`, `~/.codeium/windsurf/hooks.json`).
    Windsurf,
}

impl Client {
    /// Whether the client can put toolgate's ask to the user. One that cannot gets a deny
    /// whose ask waits in `toolgate approvals` (the broker holds it).
    pub fn can_ask(self) -> bool {
        !matches!(
            self,
            Client::GeminiCli | Client::Codex | Client::OpenCode | Client::Windsurf
        )
    }
}

/// The deny of an ask in a client that cannot ask (`why`: what its hooks do instead), with
/// the two ways to allow the call: `toolgate approvals`, where the broker holds the ask, or
/// the policy.
pub(crate) fn cannot_ask(reason: &str, why: &str) -> String {
    format!(
        "{reason} (toolgate would ask a person before this call, and {why}, so it is denied. help: if it is what you want, allow it in `toolgate approvals` (once, or for this session) and let the agent make the call again, or allow it in your policy (`toolgate policy explain` shows the rule that asked))"
    )
}

/// What a client's hook input says, in toolgate's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The client's event name, as given (`PreToolUse`, `beforeShellExecution`, …).
    pub name: String,
    /// What to tell the broker; `None` for an event toolgate accepts and ignores (`Stop`).
    pub event: Option<HookEvent>,
    /// The directory the agent works in (absolute).
    pub workspace: PathBuf,
}

/// What the process prints and how it exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub code: u8,
}

/// The ruling on a hook event the client gets: the broker's, or a failure (`Deny` with the
/// reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ruling {
    pub decision: HookEffect,
    pub reason: String,
}

static DONE: AtomicBool = AtomicBool::new(false);

/// Writes `output` and exits, once per process: whoever comes second (the watchdog after
/// the answer, or the answer after the watchdog) writes nothing.
pub fn finish(output: &Output) -> ! {
    if DONE.swap(true, Ordering::SeqCst) {
        // The other writer exits the process; never write a second answer.
        loop {
            std::thread::park();
        }
    }
    {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(output.stdout.as_bytes());
        let _ = out.flush();
    }
    if !output.stderr.is_empty() {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{}", output.stderr);
        let _ = err.flush();
    }
    std::process::exit(i32::from(output.code))
}

/// The client's deny for a failure: `reason` says what went wrong and how to fix it.
pub fn fail(client: Client, event_name: Option<&str>, reason: &str) -> Output {
    let reason = format!("toolgate: {reason}");
    let verdict = Ruling {
        decision: HookEffect::Deny,
        reason,
    };
    match client {
        Client::ClaudeCode | Client::QwenCode => {
            claude::render(event_name.unwrap_or("PreToolUse"), &verdict, false)
        }
        Client::Cursor => cursor::render(
            event_name.unwrap_or("beforeShellExecution"),
            &verdict,
            false,
        ),
        Client::GeminiCli => gemini::render(event_name.unwrap_or("BeforeTool"), &verdict, false),
        // Which of its two shapes the input had may be unknown here: exit 2, which both
        // read as a deny.
        Client::CopilotCli => Output {
            code: BLOCKING_EXIT,
            ..copilot::render(event_name.unwrap_or("PreToolUse"), &verdict, false)
        },
        Client::Codex => codex::render(event_name.unwrap_or("PreToolUse"), &verdict, false),
        Client::OpenCode => opencode::render(event_name.unwrap_or("PreToolUse"), &verdict, false),
        Client::Windsurf => {
            windsurf::render(event_name.unwrap_or("pre_run_command"), &verdict, false)
        }
    }
}

/// Reads stdin up to [`MAX_INPUT`] bytes; more is an error (the hook denies).
pub fn read_input(mut input: impl std::io::Read) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    let limit = u64::try_from(MAX_INPUT)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    (&mut input)
        .take(limit)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read the hook input on stdin ({e})"))?;
    if buf.len() > MAX_INPUT {
        return Err(format!(
            "the hook input is larger than {} MiB. help: this is not a hook event toolgate can judge; report it if your client sends such events",
            MAX_INPUT / (1024 * 1024)
        ));
    }
    Ok(buf)
}

/// Parses a client's hook input.
pub fn parse(client: Client, bytes: &[u8]) -> Result<Parsed, String> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        format!("the hook input is not JSON ({e}). help: run `toolgate hook` only from a client's hook configuration")
    })?;
    match client {
        Client::ClaudeCode => claude::parse(&value),
        Client::Cursor => cursor::parse(&value),
        Client::QwenCode => qwen::parse(&value),
        Client::GeminiCli => gemini::parse(&value),
        Client::CopilotCli => copilot::parse(&value),
        Client::Codex => codex::parse(&value),
        Client::OpenCode => opencode::parse(&value),
        Client::Windsurf => windsurf::parse(&value),
    }
}

/// The client's output for a verdict.
pub fn render(client: Client, event_name: &str, verdict: &Ruling, authoritative: bool) -> Output {
    match client {
        Client::ClaudeCode => claude::render(event_name, verdict, authoritative),
        Client::Cursor => cursor::render(event_name, verdict, authoritative),
        Client::QwenCode => qwen::render(event_name, verdict, authoritative),
        Client::GeminiCli => gemini::render(event_name, verdict, authoritative),
        Client::CopilotCli => copilot::render(event_name, verdict, authoritative),
        Client::Codex => codex::render(event_name, verdict, authoritative),
        Client::OpenCode => opencode::render(event_name, verdict, authoritative),
        Client::Windsurf => windsurf::render(event_name, verdict, authoritative),
    }
}

/// The event name of a hook input, when it can be read (to shape a failure's output).
pub fn event_name_of(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named {
        hook_event_name: String,
    }
    serde_json::from_slice::<Named>(bytes)
        .ok()
        .map(|n| n.hook_event_name)
}

/// A string member of a hook input, if present.
pub(crate) fn str_field<'a>(v: &'a serde_json::Value, name: &str) -> Option<&'a str> {
    v.get(name).and_then(serde_json::Value::as_str)
}

/// An absolute directory given by the client.
pub(crate) fn absolute_dir(path: &str, what: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(path);
    if p.is_absolute() {
        Ok(p)
    } else {
        Err(format!(
            "the hook input's `{what}` is not an absolute path: `{path}`"
        ))
    }
}

/// The names of the MCP servers under `key` of the JSON configuration at `path` (none when
/// it cannot be read).
pub(crate) fn configured_servers(path: &std::path::Path, key: &str) -> Vec<String> {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| {
            v.get(key)
                .and_then(serde_json::Value::as_object)
                .map(|m| m.keys().cloned().collect())
        })
        .unwrap_or_default()
}

/// A tool name that joins its server's and its own with `sep` (`mail-send_email`,
/// `mail_send_email`) as `mcp__server__tool`: split at the longest of `servers` that the
/// name starts with, then `sep`. `None`: no configured server's tool.
pub(crate) fn mcp_name(name: &str, servers: &[String], sep: char) -> Option<String> {
    let server = servers
        .iter()
        .filter(|s| {
            name.strip_prefix(s.as_str())
                .and_then(|rest| rest.strip_prefix(sep))
                .is_some_and(|tool| !tool.is_empty())
        })
        .max_by_key(|s| s.len())?;
    let tool = name.get(server.len() + 1..)?;
    Some(format!("mcp__{server}__{tool}"))
}

/// `mcp__<server>__<tool>` → (`server`, `tool`).
pub fn split_mcp(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("mcp__")?;
    let (server, tool) = rest.split_once("__")?;
    (!server.is_empty() && !tool.is_empty()).then_some((server, tool))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_names_split_at_the_first_separator() {
        assert_eq!(
            split_mcp("mcp__mail__send_email"),
            Some(("mail", "send_email"))
        );
        assert_eq!(split_mcp("mcp__a__b__c"), Some(("a", "b__c")));
        assert_eq!(split_mcp("mcp____x"), None);
        assert_eq!(split_mcp("Bash"), None);
    }

    #[test]
    fn input_is_bounded() {
        let big = vec![b' '; MAX_INPUT + 1];
        assert!(
            read_input(big.as_slice())
                .unwrap_err()
                .contains("larger than")
        );
        let ok = vec![b' '; 10];
        assert_eq!(read_input(ok.as_slice()).unwrap().len(), 10);
    }
}
