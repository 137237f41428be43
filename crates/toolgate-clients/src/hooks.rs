//! toolgate's hook entries in a coding agent's settings: `init --hooks` adds them,
//! `unwrap --hooks` removes exactly them, `doctor` reports them.
//!
//! Formats, as documented by the clients (checked December 2026):
//! - Claude Code (code.claude.com/docs/en/hooks, "Configuration" and "Hook events"):
//!   `hooks` in `~/.claude/settings.json` (user; `$CLAUDE_CONFIG_DIR/settings.json` when
//!   that is set) or `.claude/settings.json` (project), one list of matcher groups per event:
//!   `{"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command":
//!   "..."}]}]}}`. `matcher` applies to the tool events (`*` matches every tool, MCP tools
//!   included) and is left out for `UserPromptSubmit` and `SessionStart`.
//! - Qwen Code: Claude Code's format in `~/.qwen/settings.json` or `.qwen/settings.json`.
//! - Gemini CLI (0.61.0; geminicli.com/docs/hooks): `hooks` in `~/.gemini/settings.json`
//!   or `.gemini/settings.json`, Claude Code's layout with the events `BeforeTool`,
//!   `AfterTool` (a `matcher`: `*` is every tool), `BeforeAgent` and `SessionStart`, and a
//!   `timeout` in milliseconds per hook. Project settings are read only in a folder the user
//!   trusts (`~/.gemini/trustedFolders.json`).
//! - GitHub Copilot CLI (1.0.102; docs.github.com, "GitHub Copilot CLI hooks reference"):
//!   every `.github/hooks/*.json` of a trusted project folder and `~/.copilot/hooks/*.json`,
//!   `{"version": 1, "hooks": {"PreToolUse": [{"type": "command", "bash": "...",
//!   "timeoutSec": 30}]}}`; toolgate's entries go in a `toolgate.json` of their own there.
//! - Codex (0.169.0; developers.openai.com/codex/hooks): `~/.codex/hooks.json` or a
//!   trusted project's `.codex/hooks.json`, Claude Code's layout with a `timeout` in seconds;
//!   a hook runs only once trusted, which `init` establishes (`codex_trust`).
//! - Windsurf (docs.windsurf.com/windsurf/cascade/hooks): `~/.codeium/windsurf/hooks.json`
//!   or `.windsurf/hooks.json`, `{"hooks": {"pre_run_command": [{"command": "..."}]}}`.
//! - Cursor (cursor.com/docs/agent/hooks): `~/.cursor/hooks.json` (user) or
//!   `<project>/.cursor/hooks.json`, `{"version": 1, "hooks": {"beforeShellExecution":
//!   [{"command": "..."}]}}`, one list of commands per event.
//!
//! The entries run `<absolute toolgate> hook <client> [--policy <absolute policy>]
//! --workspace <dir>` (the project's directory, or for the user's settings the workspace
//! `init --workspace` names: never the directory the client reports, which the agent can
//! change). An entry
//! is toolgate's only when it has exactly the shape `init` writes and its command is such a
//! command line: whatever else is in the file (the user's own hooks, other matchers, an
//! entry that adds a hook of its own to ours, comments, formatting) is never touched. Edits
//! are byte-precise splices, verified by parsing the result again, as for server entries
//! (`document.rs`).

mod text;

use std::path::{Path, PathBuf};

use jsonc_parser::ast::{Object, Value};
use jsonc_parser::common::{Range, Ranged};
use jsonc_parser::{CollectOptions, parse_to_ast};
use serde_json::{Map, Value as J, json};

use super::discovery::{Client, Env};
use crate::entries::{Splice, apply, parse_options, prop_name};
use text::{append, line_indent, parse, pretty, prop_text, remove_items, render, strip_bom, unit};

/// The clients whose hooks toolgate installs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookClient {
    ClaudeCode,
    Cursor,
    /// Qwen Code: Claude Code's hook format in `.qwen/settings.json`.
    QwenCode,
    /// Gemini CLI: Claude Code's layout under its own event names in
    /// `.gemini/settings.json`, with a timeout per entry.
    GeminiCli,
    /// GitHub Copilot CLI: a file of toolgate's own in `.github/hooks/` or
    /// `~/.copilot/hooks/`, Cursor's layout with `bash` commands and a timeout per entry.
    CopilotCli,
    /// Codex: Claude Code's layout in `~/.codex/hooks.json` or `.codex/hooks.json`, with a
    /// timeout per entry; Codex runs them once trusted (`codex_trust`).
    Codex,
    /// Windsurf: Cursor's layout (a list of `{command}` per action) in
    /// `.windsurf/hooks.json` or `~/.codeium/windsurf/hooks.json`.
    Windsurf,
}

/// Claude Code's events: the tool events take a matcher.
const CLAUDE_EVENTS: [&str; 4] = [
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "SessionStart",
];

/// Gemini CLI's events: the tool events take a matcher.
const GEMINI_EVENTS: [&str; 4] = ["BeforeTool", "AfterTool", "BeforeAgent", "SessionStart"];

/// The timeout of Gemini CLI's entries, in milliseconds: above `toolgate hook`'s own (10 s),
/// so that toolgate's deny, not the client's timeout, ends a hook that hangs.
const GEMINI_TIMEOUT_MS: u64 = 30_000;

/// The timeout of Codex's entries, in seconds: above `toolgate hook`'s own 10 s.
const CODEX_TIMEOUT_SEC: u64 = 30;

/// Copilot CLI's events, under Claude Code's names (so that it sends Claude Code's input).
const COPILOT_EVENTS: [&str; 3] = ["PreToolUse", "PostToolUse", "UserPromptSubmit"];

/// The timeout of Copilot CLI's entries, in seconds (its default, 30: above `toolgate
/// hook`'s own 10 s).
const COPILOT_TIMEOUT_SEC: u64 = 30;

/// Windsurf's actions (`toolgate hook windsurf` reads each of them).
const WINDSURF_EVENTS: [&str; 8] = [
    "pre_run_command",
    "post_run_command",
    "pre_read_code",
    "post_read_code",
    "pre_write_code",
    "pre_mcp_tool_use",
    "post_mcp_tool_use",
    "pre_user_prompt",
];

/// Cursor's events (`toolgate hook cursor` reads each of them).
const CURSOR_EVENTS: [&str; 7] = [
    "beforeShellExecution",
    "afterShellExecution",
    "beforeMCPExecution",
    "afterMCPExecution",
    "beforeReadFile",
    "afterFileEdit",
    "beforeSubmitPrompt",
];

impl HookClient {
    /// Every client with hooks.
    pub const ALL: [HookClient; 7] = [
        HookClient::ClaudeCode,
        HookClient::Cursor,
        HookClient::QwenCode,
        HookClient::GeminiCli,
        HookClient::CopilotCli,
        HookClient::Codex,
        HookClient::Windsurf,
    ];

    /// The client of `init --client`, when it has hooks.
    pub fn of(client: Client) -> Option<HookClient> {
        match client {
            Client::ClaudeCode => Some(HookClient::ClaudeCode),
            Client::Cursor => Some(HookClient::Cursor),
            Client::QwenCode => Some(HookClient::QwenCode),
            Client::GeminiCli => Some(HookClient::GeminiCli),
            Client::CopilotCli => Some(HookClient::CopilotCli),
            Client::Codex => Some(HookClient::Codex),
            Client::Windsurf => Some(HookClient::Windsurf),
            _ => None,
        }
    }

    /// The name on the command line (`toolgate hook <name>`).
    pub fn name(self) -> &'static str {
        match self {
            HookClient::ClaudeCode => "claude-code",
            HookClient::Cursor => "cursor",
            HookClient::QwenCode => "qwen-code",
            HookClient::GeminiCli => "gemini-cli",
            HookClient::CopilotCli => "copilot-cli",
            HookClient::Codex => "codex",
            HookClient::Windsurf => "windsurf",
        }
    }

    /// The events toolgate's entries are installed for.
    pub fn events(self) -> &'static [&'static str] {
        match self {
            HookClient::ClaudeCode | HookClient::QwenCode | HookClient::Codex => &CLAUDE_EVENTS,
            HookClient::Cursor => &CURSOR_EVENTS,
            HookClient::GeminiCli => &GEMINI_EVENTS,
            HookClient::CopilotCli => &COPILOT_EVENTS,
            HookClient::Windsurf => &WINDSURF_EVENTS,
        }
    }

    /// The settings file of `scope`.
    pub fn path(self, scope: HookScope, env: &Env) -> PathBuf {
        match (self, scope) {
            (HookClient::ClaudeCode, HookScope::User) => env
                .claude_config_dir
                .clone()
                .unwrap_or_else(|| env.home.join(".claude"))
                .join("settings.json"),
            (HookClient::ClaudeCode, HookScope::Project) => {
                env.project.join(".claude/settings.json")
            }
            (HookClient::Cursor, HookScope::User) => env.home.join(".cursor/hooks.json"),
            (HookClient::Cursor, HookScope::Project) => env.project.join(".cursor/hooks.json"),
            (HookClient::QwenCode, HookScope::User) => env.home.join(".qwen/settings.json"),
            (HookClient::QwenCode, HookScope::Project) => env.project.join(".qwen/settings.json"),
            (HookClient::GeminiCli, HookScope::User) => env.home.join(".gemini/settings.json"),
            (HookClient::GeminiCli, HookScope::Project) => {
                env.project.join(".gemini/settings.json")
            }
            (HookClient::CopilotCli, HookScope::User) => {
                env.home.join(".copilot/hooks/toolgate.json")
            }
            (HookClient::CopilotCli, HookScope::Project) => {
                env.project.join(".github/hooks/toolgate.json")
            }
            (HookClient::Codex, HookScope::User) => env.home.join(".codex/hooks.json"),
            (HookClient::Codex, HookScope::Project) => env.project.join(".codex/hooks.json"),
            (HookClient::Windsurf, HookScope::User) => {
                env.home.join(".codeium/windsurf/hooks.json")
            }
            (HookClient::Windsurf, HookScope::Project) => env.project.join(".windsurf/hooks.json"),
        }
    }

    /// The entry `init` writes for `event`.
    fn entry(self, event: &str, command: &str) -> J {
        match self {
            HookClient::ClaudeCode | HookClient::QwenCode => {
                let hooks = json!([{"type": "command", "command": command}]);
                if event.ends_with("ToolUse") {
                    json!({"matcher": "*", "hooks": hooks})
                } else {
                    json!({"hooks": hooks})
                }
            }
            HookClient::GeminiCli => {
                let hooks = json!([{"type": "command", "command": command,
                    "timeout": GEMINI_TIMEOUT_MS}]);
                if event.ends_with("Tool") {
                    json!({"matcher": "*", "hooks": hooks})
                } else {
                    json!({"hooks": hooks})
                }
            }
            HookClient::Cursor | HookClient::Windsurf => json!({"command": command}),
            HookClient::CopilotCli => json!({"type": "command", "bash": command,
                "timeoutSec": COPILOT_TIMEOUT_SEC}),
            HookClient::Codex => {
                let hooks = json!([{"type": "command", "command": command,
                    "timeout": CODEX_TIMEOUT_SEC}]);
                if event.ends_with("ToolUse") {
                    json!({"matcher": "*", "hooks": hooks})
                } else {
                    json!({"hooks": hooks})
                }
            }
        }
    }

    /// Whether the file has `"version": 1` at its top (Cursor's, Copilot CLI's).
    fn versioned(self) -> bool {
        matches!(self, HookClient::Cursor | HookClient::CopilotCli)
    }

    /// The command of `value` when it is an entry `init` writes (any toolgate binary, any
    /// policy), `None` for anything else.
    fn ours<'v>(self, event: &str, value: &'v J) -> Option<&'v str> {
        let command = match self {
            HookClient::ClaudeCode
            | HookClient::QwenCode
            | HookClient::GeminiCli
            | HookClient::Codex => value.pointer("/hooks/0/command"),
            HookClient::Cursor | HookClient::Windsurf => value.get("command"),
            HookClient::CopilotCli => value.get("bash"),
        }?
        .as_str()?;
        (is_our_command(command, self) && *value == self.entry(event, command)).then_some(command)
    }
}

/// Where the hooks go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HookScope {
    /// The user's settings (every project).
    User,
    /// The project's settings (the current directory).
    Project,
}

impl HookScope {
    pub fn name(self) -> &'static str {
        match self {
            HookScope::User => "user",
            HookScope::Project => "project",
        }
    }
}

/// What the entries run.
#[derive(Debug, Clone)]
pub struct HookSettings {
    /// Absolute path of the executable: `toolgate-hook` (run as `toolgate-hook <client>`), or
    /// `toolgate` (run as `toolgate hook <client>`) where no `toolgate-hook` is installed.
    pub exe: String,
    /// Absolute path of the policy file, if any.
    pub policy: Option<String>,
    /// The workspace (`--workspace`), if any.
    pub workspace: Option<String>,
}

/// What toolgate's hook commands end with, so that a hook that cannot run still blocks. A
/// hook executable that is gone (moved, uninstalled, a `cargo clean`) makes the shell exit
/// 127, and a crash exits with some other code: both clients read those as a non-blocking
/// error and run the call unchecked. Exit 2 is the code both read as a deny (with the
/// shell's message on stderr as the reason); toolgate's own denials already exit 2.
pub const FAIL_CLOSED: &str = " || exit 2";

/// The toolgate command line of a hook command, without [`FAIL_CLOSED`].
fn toolgate_part(command: &str) -> &str {
    command.strip_suffix(FAIL_CLOSED).unwrap_or(command)
}

/// Whether a command of toolgate's entries blocks when it cannot run ([`FAIL_CLOSED`]);
/// entries written before it was added do not.
pub fn fails_closed(command: &str) -> bool {
    command.ends_with(FAIL_CLOSED)
}

/// The command line of `client`'s entries (a shell command: both clients run it through a
/// shell), ending in [`FAIL_CLOSED`].
pub fn command(client: HookClient, settings: &HookSettings) -> String {
    let hook = if is_hook_exe(&settings.exe) {
        ""
    } else {
        " hook"
    };
    let mut out = format!("{}{hook} {}", shell_word(&settings.exe), client.name());
    if let Some(policy) = &settings.policy {
        out.push_str(" --policy ");
        out.push_str(&shell_word(policy));
    }
    if let Some(workspace) = &settings.workspace {
        out.push_str(" --workspace ");
        out.push_str(&shell_word(workspace));
    }
    out.push_str(FAIL_CLOSED);
    out
}

/// The value of option `name` (`--policy`, `--workspace`) in a command line of toolgate's
/// entries.
pub fn option_of(command: &str, name: &str) -> Option<String> {
    let words = split_words(toolgate_part(command))?;
    let at = words.iter().position(|w| w == name)?;
    words.get(at + 1).cloned()
}

fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._+-:@%=,".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The words of a command line made of plain and single-quoted words (what [`command`]
/// writes); `None` for anything a shell would read otherwise.
fn split_words(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' => {
                if let Some(w) = word.take() {
                    words.push(w);
                } else {
                    return None;
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => w.push(c),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).push(chars.next()?),
            c if c.is_ascii_alphanumeric() || "/._+-:@%=,".contains(c) => {
                word.get_or_insert_with(String::new).push(c);
            }
            _ => return None,
        }
    }
    words.push(word?);
    Some(words)
}

/// The program a command line of toolgate's entries runs.
pub fn program_of(command: &str) -> Option<String> {
    split_words(toolgate_part(command))?.into_iter().next()
}

/// The cargo build directory `exe` lives in (a `target` directory beside a `Cargo.toml`),
/// if it does: a `cargo clean` or a rebuild removes or replaces it, and every entry that runs
/// it then blocks (or, written without [`FAIL_CLOSED`], lets calls through).
pub fn build_dir_of(exe: &Path) -> Option<&Path> {
    exe.ancestors().find(|dir| {
        dir.file_name().is_some_and(|n| n == "target")
            && dir.parent().is_some_and(|p| p.join("Cargo.toml").is_file())
    })
}

/// Whether `exe` is the small hook executable, `toolgate-hook`.
fn is_hook_exe(exe: &str) -> bool {
    Path::new(exe)
        .file_name()
        .is_some_and(|n| n == "toolgate-hook")
}

/// The executable hook entries run: `toolgate-hook` beside `toolgate` (a hook runs once per
/// tool call, and that executable is a fraction of the size), else `toolgate` itself.
pub fn hook_exe(toolgate: &str) -> String {
    let sibling = Path::new(toolgate).with_file_name("toolgate-hook");
    if Path::new(toolgate).is_absolute() && sibling.is_file() {
        sibling.to_string_lossy().into_owned()
    } else {
        toolgate.to_owned()
    }
}

/// `<…/toolgate> hook <client>` or `<…/toolgate-hook> <client>`, with nothing after it but
/// `--policy <path>` and `--workspace <dir>` (each at most once).
pub fn is_our_command(command: &str, client: HookClient) -> bool {
    let Some(words) = split_words(toolgate_part(command)) else {
        return false;
    };
    let Some(exe) = words.first() else {
        return false;
    };
    let mut rest: Vec<&str> = words.iter().skip(1).map(String::as_str).collect();
    if is_hook_exe(exe) {
        rest.insert(0, "hook");
    } else if Path::new(exe).file_name().is_none_or(|n| n != "toolgate") {
        return false;
    }
    let ["hook", c, options @ ..] = rest.as_slice() else {
        return false;
    };
    if *c != client.name() || options.len() % 2 != 0 {
        return false;
    }
    let names: Vec<&str> = options.iter().step_by(2).copied().collect();
    let known = names
        .iter()
        .all(|n| *n == "--policy" || *n == "--workspace");
    let once = names.iter().filter(|n| **n == "--policy").count() <= 1
        && names.iter().filter(|n| **n == "--workspace").count() <= 1;
    known && once
}

/// Errors while editing a settings file.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// The file is not JSON/JSONC.
    #[error("cannot parse the file: {0}")]
    Parse(String),
    /// The top level is not an object.
    #[error("the top level is not a JSON object")]
    NotAnObject,
    /// The file has a key toolgate must edit in a shape it cannot edit.
    #[error("{0}")]
    Shape(String),
    /// A splice produced a document different from the one intended (a bug).
    #[error(
        "internal error: the edited file does not have the intended content; nothing was written\nhelp: please report this with the (redacted) settings file"
    )]
    Verification,
}

/// What happened to one event's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookOutcome {
    /// Added.
    Added,
    /// toolgate's entry was there with another command (another binary or policy): replaced.
    Updated,
    /// Already there, as it would be written.
    Kept,
    /// Removed.
    Removed,
    /// Not there (nothing to remove).
    Missing,
}

/// A settings file after an edit.
#[derive(Debug, Clone)]
pub struct HookEdit {
    /// The new text (equal to the input when nothing changed).
    pub text: String,
    /// One line per event.
    pub events: Vec<(&'static str, HookOutcome)>,
}

/// The content of a settings file that did not exist.
pub fn new_file(client: HookClient, settings: &HookSettings) -> String {
    let cmd = command(client, settings);
    let mut hooks = Map::new();
    for e in client.events() {
        hooks.insert((*e).to_owned(), J::Array(vec![client.entry(e, &cmd)]));
    }
    let mut root = Map::new();
    if client.versioned() {
        root.insert("version".to_owned(), json!(1));
    }
    root.insert("hooks".to_owned(), J::Object(hooks));
    format!("{}\n", pretty(&J::Object(root), "  "))
}

/// The command of toolgate's entry for each event (`None`: not installed).
pub fn installed(
    text: &str,
    client: HookClient,
) -> Result<Vec<(&'static str, Option<String>)>, HookError> {
    let doc = parse(strip_bom(text).0)?;
    let hooks = doc.get("hooks").and_then(J::as_object);
    Ok(client
        .events()
        .iter()
        .map(|e| {
            let cmd = hooks
                .and_then(|h| h.get(*e))
                .and_then(J::as_array)
                .and_then(|list| list.iter().find_map(|v| client.ours(e, v)))
                .map(str::to_owned);
            (*e, cmd)
        })
        .collect())
}

/// Adds (or brings up to date) toolgate's entry for each of `client`'s events.
pub fn install(
    text: &str,
    client: HookClient,
    settings: &HookSettings,
) -> Result<HookEdit, HookError> {
    let cmd = command(client, settings);
    edit(text, |body, root, expected, splices| {
        let mut events = Vec::new();
        let mut new_root: Vec<(String, J)> = Vec::new();
        if client.versioned() {
            match root.get("version") {
                None => new_root.push(("version".to_owned(), json!(1))),
                Some(p) => {
                    let v = J::from(p.value.clone());
                    if v != json!(1) {
                        return Err(HookError::Shape(format!(
                            "`version` is `{v}`; toolgate writes version 1 hooks\nhelp: check the file against the client's hooks documentation"
                        )));
                    }
                }
            }
        }
        match root.get("hooks") {
            None => {
                let mut map = Map::new();
                for e in client.events() {
                    map.insert((*e).to_owned(), J::Array(vec![client.entry(e, &cmd)]));
                    events.push((*e, HookOutcome::Added));
                }
                new_root.push(("hooks".to_owned(), J::Object(map)));
            }
            Some(prop) => {
                let Value::Object(hooks) = &prop.value else {
                    return Err(HookError::Shape(
                        "`hooks` is not an object\nhelp: fix the file, or move it aside and run `toolgate init --hooks` again".to_owned(),
                    ));
                };
                let mut new_props = Vec::new();
                for e in client.events() {
                    let want = client.entry(e, &cmd);
                    let slot = expected
                        .get_mut("hooks")
                        .and_then(J::as_object_mut)
                        .ok_or(HookError::Verification)?;
                    let Some(list) = hooks.get(e) else {
                        slot.insert((*e).to_owned(), J::Array(vec![want.clone()]));
                        new_props.push(((*e).to_owned(), want_list(want)));
                        events.push((*e, HookOutcome::Added));
                        continue;
                    };
                    let Value::Array(array) = &list.value else {
                        return Err(HookError::Shape(format!(
                            "`hooks.{e}` is not a list\nhelp: fix the file, then run `toolgate init --hooks` again"
                        )));
                    };
                    let values: Vec<J> =
                        array.elements.iter().map(|v| J::from(v.clone())).collect();
                    let list_slot = slot
                        .get_mut(*e)
                        .and_then(J::as_array_mut)
                        .ok_or(HookError::Verification)?;
                    let ours = values.iter().position(|v| client.ours(e, v).is_some());
                    let outcome = match ours {
                        Some(i) if values.get(i) == Some(&want) => HookOutcome::Kept,
                        Some(i) => {
                            let el = array.elements.get(i).ok_or(HookError::Verification)?;
                            let r = el.range();
                            let indent = line_indent(body, r.start).unwrap_or_default();
                            splices.push(Splice {
                                start: r.start,
                                end: r.end,
                                with: render(body, &want, &indent, &unit(body)),
                            });
                            *list_slot.get_mut(i).ok_or(HookError::Verification)? = want;
                            HookOutcome::Updated
                        }
                        None => {
                            let ranges: Vec<Range> =
                                array.elements.iter().map(Ranged::range).collect();
                            splices.push(append(body, array.range, &ranges, |indent, unit| {
                                vec![render(body, &want, indent, unit)]
                            }));
                            list_slot.push(want);
                            HookOutcome::Added
                        }
                    };
                    events.push((*e, outcome));
                }
                if !new_props.is_empty() {
                    let ranges: Vec<Range> = hooks.properties.iter().map(|p| p.range).collect();
                    splices.push(append(body, hooks.range, &ranges, |indent, unit| {
                        new_props
                            .iter()
                            .map(|(k, v)| prop_text(body, k, v, indent, unit))
                            .collect()
                    }));
                }
            }
        }
        if !new_root.is_empty() {
            let map = expected.as_object_mut().ok_or(HookError::Verification)?;
            for (k, v) in &new_root {
                map.insert(k.clone(), v.clone());
            }
            let ranges: Vec<Range> = root.properties.iter().map(|p| p.range).collect();
            splices.push(append(body, root.range, &ranges, |indent, unit| {
                new_root
                    .iter()
                    .map(|(k, v)| prop_text(body, k, v, indent, unit))
                    .collect()
            }));
        }
        Ok(events)
    })
}

fn want_list(want: J) -> J {
    J::Array(vec![want])
}

/// Removes toolgate's entries (and an event's list, or `hooks`, that only they filled).
pub fn remove(text: &str, client: HookClient) -> Result<HookEdit, HookError> {
    edit(text, |_body, root, expected, splices| {
        let missing = || {
            client
                .events()
                .iter()
                .map(|e| (*e, HookOutcome::Missing))
                .collect::<Vec<_>>()
        };
        let Some((hooks_index, hooks_prop)) = root
            .properties
            .iter()
            .enumerate()
            .find(|(_, p)| prop_name(p) == "hooks")
        else {
            return Ok(missing());
        };
        let Value::Object(hooks) = &hooks_prop.value else {
            return Ok(missing());
        };
        let mut events = Vec::new();
        let mut drop_props = vec![false; hooks.properties.len()];
        let expected_hooks = expected
            .get_mut("hooks")
            .and_then(J::as_object_mut)
            .ok_or(HookError::Verification)?;
        for e in client.events() {
            let found = hooks
                .properties
                .iter()
                .enumerate()
                .find(|(_, p)| prop_name(p) == *e);
            let Some((pi, Value::Array(array))) = found.map(|(i, p)| (i, &p.value)) else {
                events.push((*e, HookOutcome::Missing));
                continue;
            };
            let drop: Vec<bool> = array
                .elements
                .iter()
                .map(|v| client.ours(e, &J::from(v.clone())).is_some())
                .collect();
            if !drop.contains(&true) {
                events.push((*e, HookOutcome::Missing));
                continue;
            }
            events.push((*e, HookOutcome::Removed));
            if drop.iter().all(|d| *d) {
                if let Some(d) = drop_props.get_mut(pi) {
                    *d = true;
                }
                expected_hooks.remove(*e);
            } else {
                let ranges: Vec<Range> = array.elements.iter().map(Ranged::range).collect();
                splices.extend(remove_items(array.range, &ranges, &drop));
                if let Some(list) = expected_hooks.get_mut(*e).and_then(J::as_array_mut) {
                    let mut keep = drop.iter().map(|d| !d);
                    list.retain(|_| keep.next().unwrap_or(true));
                }
            }
        }
        if !drop_props.is_empty() && drop_props.iter().all(|d| *d) {
            // Only toolgate's lists were in `hooks`: `hooks` goes too.
            let mut drop_root = vec![false; root.properties.len()];
            if let Some(d) = drop_root.get_mut(hooks_index) {
                *d = true;
            }
            let ranges: Vec<Range> = root.properties.iter().map(|p| p.range).collect();
            splices.extend(remove_items(root.range, &ranges, &drop_root));
            if let Some(map) = expected.as_object_mut() {
                map.remove("hooks");
            }
        } else {
            let ranges: Vec<Range> = hooks.properties.iter().map(|p| p.range).collect();
            splices.extend(remove_items(hooks.range, &ranges, &drop_props));
        }
        Ok(events)
    })
}

/// Parses `text`, lets `f` plan splices and the value they must produce, applies them and
/// checks the result.
fn edit(
    text: &str,
    f: impl FnOnce(
        &str,
        &Object<'_>,
        &mut J,
        &mut Vec<Splice>,
    ) -> Result<Vec<(&'static str, HookOutcome)>, HookError>,
) -> Result<HookEdit, HookError> {
    let (body, bom) = strip_bom(text);
    let parsed = parse_to_ast(body, &CollectOptions::default(), &parse_options())
        .map_err(|e| HookError::Parse(e.to_string()))?;
    let Some(Value::Object(root)) = parsed.value.as_ref() else {
        return Err(HookError::NotAnObject);
    };
    let mut expected: J = Value::Object(root.clone()).into();
    let mut splices = Vec::new();
    let events = f(body, root, &mut expected, &mut splices)?;
    if splices.is_empty() {
        return Ok(HookEdit {
            text: text.to_owned(),
            events,
        });
    }
    let new_body = apply(body, splices).map_err(|_| HookError::Verification)?;
    if parse(&new_body).ok() != Some(expected) {
        return Err(HookError::Verification);
    }
    Ok(HookEdit {
        text: format!("{bom}{new_body}"),
        events,
    })
}

/// Whether Gemini CLI reads the settings of `project` (hooks, MCP servers): only in a
/// folder the user trusts, unless folder trust is off (`security.folderTrust.enabled:
/// false` in `~/.gemini/settings.json`). Trust is `~/.gemini/trustedFolders.json`, a map
/// of paths to `TRUST_FOLDER` (the folder and below), `TRUST_PARENT` (the folder's parent
/// and below) or `DO_NOT_TRUST`; the longest path that holds the project decides. `Err`
/// when a file cannot be read as JSON.
pub fn gemini_trusts(env: &Env, project: &Path) -> Result<bool, String> {
    let read = |name: &str| -> Result<Option<J>, String> {
        let path = env.home.join(".gemini").join(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => parse(strip_bom(&text).0)
                .map(Some)
                .map_err(|e| format!("`{}`: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("`{}`: {e}", path.display())),
        }
    };
    let enabled = read("settings.json")?
        .and_then(|s| s.pointer("/security/folderTrust/enabled").cloned())
        .and_then(|v| v.as_bool());
    if enabled == Some(false) {
        return Ok(true);
    }
    let Some(J::Object(folders)) = read("trustedFolders.json")? else {
        return Ok(false);
    };
    let mut best: Option<(usize, bool)> = None;
    for (path, level) in &folders {
        let path = Path::new(path);
        let (root, trusted) = match level.as_str() {
            Some("TRUST_FOLDER") => (path, true),
            Some("TRUST_PARENT") => (path.parent().unwrap_or(path), true),
            Some("DO_NOT_TRUST") => (path, false),
            _ => continue,
        };
        let depth = root.components().count();
        if project.starts_with(root) && best.is_none_or(|(d, _)| depth > d) {
            best = Some((depth, trusted));
        }
    }
    Ok(best.is_some_and(|(_, trusted)| trusted))
}

/// Whether Copilot CLI runs the hooks of `project` (`.github/hooks`): only in a folder the
/// user trusts, one of the `trusted_folders` of `~/.copilot/config.json` or below it. `Err`
/// when the file cannot be read as JSON.
pub fn copilot_trusts(env: &Env, project: &Path) -> Result<bool, String> {
    let path = env.home.join(".copilot/config.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("`{}`: {e}", path.display())),
    };
    let config = parse(strip_bom(&text).0).map_err(|e| format!("`{}`: {e}", path.display()))?;
    Ok(config
        .get("trusted_folders")
        .and_then(J::as_array)
        .into_iter()
        .flatten()
        .filter_map(J::as_str)
        .any(|folder| project.starts_with(folder)))
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "tests: a failed expectation should stop the test with its message"
    )]

    use super::*;

    fn settings() -> HookSettings {
        HookSettings {
            exe: "/opt/tg/bin/toolgate".to_owned(),
            policy: Some("/home/u/my policy.yaml".to_owned()),
            workspace: Some("/home/u/proj".to_owned()),
        }
    }

    #[test]
    fn commands_quote_and_are_recognised() {
        let c = command(HookClient::ClaudeCode, &settings());
        assert_eq!(
            c,
            "/opt/tg/bin/toolgate hook claude-code --policy '/home/u/my policy.yaml' --workspace /home/u/proj || exit 2"
        );
        assert!(is_our_command(&c, HookClient::ClaudeCode) && fails_closed(&c));
        assert_eq!(program_of(&c).as_deref(), Some("/opt/tg/bin/toolgate"));
        assert_eq!(
            option_of(&c, "--policy").as_deref(),
            Some("/home/u/my policy.yaml")
        );
        assert_eq!(
            option_of(&c, "--workspace").as_deref(),
            Some("/home/u/proj")
        );
        // Entries written before `--workspace` and the fail-closed end existed are still
        // ours (`init` brings them up to date, `doctor` says they do not fail closed).
        let old = "/opt/tg/bin/toolgate hook claude-code --policy /p.yaml";
        assert!(is_our_command(old, HookClient::ClaudeCode) && !fails_closed(old));
        assert!(!is_our_command(&c, HookClient::Cursor));
        for other in [
            "/opt/tg/bin/toolgate hook claude-code; rm -rf ~",
            "/opt/tg/bin/toolgate hook claude-code || exit 0",
            "/opt/tg/bin/toolgate hook claude-code || exit 2 || exit 2",
            "/opt/tg/bin/toolgate hook claude-code  || exit 2",
            "/opt/tg/bin/toolgate hook claude-code --authoritative",
            "/opt/tg/bin/toolgate hook claude-code --workspace /a --workspace /b",
            "/opt/tg/bin/toolgate hook claude-code --workspace",
            "/opt/tg/bin/not-toolgate hook claude-code",
            "/opt/tg/bin/toolgate-hook hook claude-code",
            "toolgate  hook claude-code",
            "$HOME/toolgate hook claude-code",
            "'/x/toolgate hook claude-code",
        ] {
            assert!(!is_our_command(other, HookClient::ClaudeCode), "{other}");
        }
        assert!(is_our_command(
            "'/a b/toolgate' hook cursor",
            HookClient::Cursor
        ));
        // The small hook executable takes the client right away.
        let small = HookSettings {
            exe: "/opt/tg/bin/toolgate-hook".to_owned(),
            policy: None,
            workspace: None,
        };
        let c = command(HookClient::Cursor, &small);
        assert_eq!(c, "/opt/tg/bin/toolgate-hook cursor || exit 2");
        assert!(is_our_command(&c, HookClient::Cursor));
        assert!(!is_our_command(&c, HookClient::ClaudeCode));
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(split_words(&shell_word("it's")).unwrap(), ["it's"]);
    }

    #[test]
    fn a_build_directory_is_a_target_beside_a_cargo_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("repo/target/debug")).unwrap();
        std::fs::create_dir_all(root.join("opt/target/bin")).unwrap();
        std::fs::write(root.join("repo/Cargo.toml"), "[workspace]\n").unwrap();
        let built = root.join("repo/target/debug/toolgate");
        assert_eq!(
            build_dir_of(&built),
            Some(root.join("repo/target").as_path())
        );
        assert_eq!(build_dir_of(&root.join("opt/target/bin/toolgate")), None);
        assert_eq!(build_dir_of(Path::new("/usr/local/bin/toolgate")), None);
    }

    #[test]
    fn install_then_remove_restores_the_bytes() {
        let original = "{\n    // mine\n    \"model\": \"opus\",\n    \"hooks\": {\n        \"PreToolUse\": [\n            {\"matcher\": \"Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"lint.sh\"}]},\n        ],\n    },\n}\n";
        let edit = install(original, HookClient::ClaudeCode, &settings()).unwrap();
        assert!(edit.text.contains("// mine"));
        assert!(edit.text.contains("lint.sh"));
        let again = install(&edit.text, HookClient::ClaudeCode, &settings()).unwrap();
        assert_eq!(again.text, edit.text);
        assert!(again.events.iter().all(|(_, o)| *o == HookOutcome::Kept));
        let installed = installed(&edit.text, HookClient::ClaudeCode).unwrap();
        assert!(installed.iter().all(|(_, c)| c.is_some()), "{installed:?}");
        let removed = remove(&edit.text, HookClient::ClaudeCode).unwrap();
        assert_eq!(removed.text, original);
    }

    #[test]
    fn an_entry_the_user_changed_is_not_ours() {
        let cmd = command(HookClient::Cursor, &settings());
        let text = format!(
            "{{\"version\": 1, \"hooks\": {{\"beforeReadFile\": [{{\"command\": {}, \"timeout\": 5}}]}}}}",
            J::String(cmd)
        );
        let removed = remove(&text, HookClient::Cursor).unwrap();
        assert_eq!(removed.text, text);
        let edit = install(&text, HookClient::Cursor, &settings()).unwrap();
        assert!(edit.text.contains("\"timeout\": 5"));
        assert_eq!(
            edit.events
                .iter()
                .find(|(e, _)| *e == "beforeReadFile")
                .unwrap()
                .1,
            HookOutcome::Added
        );
    }

    #[test]
    fn another_binary_is_updated_in_place() {
        let old = HookSettings {
            exe: "/old/toolgate".to_owned(),
            policy: None,
            workspace: None,
        };
        let text = new_file(HookClient::Cursor, &old);
        let edit = install(&text, HookClient::Cursor, &settings()).unwrap();
        assert!(edit.events.iter().all(|(_, o)| *o == HookOutcome::Updated));
        assert!(!edit.text.contains("/old/toolgate"));
        let removed = remove(&edit.text, HookClient::Cursor).unwrap();
        assert_eq!(removed.text, "{\n  \"version\": 1\n}\n");
    }

    #[test]
    fn shapes_toolgate_cannot_edit_are_errors() {
        for (text, client) in [
            ("{\"hooks\": []}", HookClient::ClaudeCode),
            ("{\"hooks\": {\"PreToolUse\": {}}}", HookClient::ClaudeCode),
            ("{\"version\": 2}", HookClient::Cursor),
            ("[]", HookClient::Cursor),
            ("{", HookClient::Cursor),
        ] {
            assert!(install(text, client, &settings()).is_err(), "{text}");
        }
    }

    /// An environment whose home is `home`, in the project `/work/app`.
    fn env_at(home: &Path) -> Env {
        Env {
            home: home.to_path_buf(),
            xdg_config_home: None,
            claude_config_dir: None,
            project: PathBuf::from("/work/app"),
            platform: crate::discovery::Platform::Linux,
        }
    }

    #[test]
    fn gemini_trusts_folders_as_gemini_cli_does() {
        let home = tempfile::tempdir().unwrap();
        let env = env_at(home.path());
        let project = Path::new("/work/app");
        assert_eq!(gemini_trusts(&env, project), Ok(false));
        std::fs::create_dir_all(home.path().join(".gemini")).unwrap();
        let folders = home.path().join(".gemini/trustedFolders.json");
        for (json, want) in [
            (r#"{"/work/app": "TRUST_FOLDER"}"#, true),
            (
                r#"{"/work": "TRUST_FOLDER", "/work/app": "DO_NOT_TRUST"}"#,
                false,
            ),
            (r#"{"/work/app/sub": "TRUST_PARENT"}"#, true),
            (r#"{"/work/ap": "TRUST_FOLDER"}"#, false),
            (r#"{"/": "DO_NOT_TRUST", "/work": "TRUST_FOLDER"}"#, true),
        ] {
            std::fs::write(&folders, json).unwrap();
            assert_eq!(gemini_trusts(&env, project), Ok(want), "{json}");
        }
        std::fs::write(&folders, "{").unwrap();
        assert!(gemini_trusts(&env, project).is_err());
        std::fs::write(
            home.path().join(".gemini/settings.json"),
            r#"{"security": {"folderTrust": {"enabled": false}}}"#,
        )
        .unwrap();
        assert_eq!(gemini_trusts(&env, project), Ok(true));
    }

    #[test]
    fn copilot_trusts_its_folders_and_below() {
        let home = tempfile::tempdir().unwrap();
        let env = env_at(home.path());
        let project = Path::new("/work/app");
        assert_eq!(copilot_trusts(&env, project), Ok(false));
        std::fs::create_dir_all(home.path().join(".copilot")).unwrap();
        let config = home.path().join(".copilot/config.json");
        for (json, want) in [
            (r#"{"trusted_folders": ["/work/app"]}"#, true),
            (r#"{"trusted_folders": ["/work"]}"#, true),
            (r#"{"trusted_folders": ["/work/ap", "/other"]}"#, false),
            (r#"{"banner": "never"}"#, false),
        ] {
            std::fs::write(&config, json).unwrap();
            assert_eq!(copilot_trusts(&env, project), Ok(want), "{json}");
        }
        std::fs::write(&config, "[").unwrap();
        assert!(copilot_trusts(&env, project).is_err());
    }
}
