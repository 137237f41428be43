//! `toolgate hook <client>`: the command a client's hook configuration runs for
//! each hook event. Reads the event on stdin, asks the per-user broker (starting it if none
//! runs), writes the client's decision on stdout and exits the way the client honours.
//! Every failure is the client's deny with exit code 2, which both clients treat as blocking.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::hook::{self, Client, Output, Ruling};
use crate::proto::HookEffect;
use toolgate_runtime::paths::Layout;

/// The default `--timeout` for Claude Code, Qwen Code and Gemini CLI (whose own hook
/// timeouts are 60 s by default).
const CLAUDE_TIMEOUT: Duration = Duration::from_secs(10);
/// The default `--timeout` for Cursor (whose hook timeouts are a few seconds).
const CURSOR_TIMEOUT: Duration = Duration::from_secs(4);

/// Decide a coding agent's own tool calls (a client hook): reads the hook event on stdin.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  toolgate hook claude-code --policy \"$HOME/toolgate.yaml\"
  toolgate hook cursor --policy \"$HOME/toolgate.yaml\" --authoritative

These are the commands a client's hook entries run, with the event on stdin. Claude Code and Qwen Code: PreToolUse, PostToolUse, UserPromptSubmit, SessionStart. Cursor:
beforeShellExecution, afterShellExecution, beforeMCPExecution, afterMCPExecution,
beforeReadFile, afterFileEdit, beforeSubmitPrompt. Gemini CLI: BeforeTool, AfterTool,
BeforeAgent, SessionStart (an ask is a deny: its hooks cannot ask). Copilot CLI: PreToolUse,
PostToolUse, UserPromptSubmit. Codex: PreToolUse, PostToolUse, UserPromptSubmit, SessionStart (an
ask is a deny: Codex runs a call whose hook asks). OpenCode: the events its plugin (`toolgate init
--client opencode --hooks`) hands over. Windsurf: pre_run_command, post_run_command, pre_read_code,
post_read_code, pre_write_code, pre_mcp_tool_use, post_mcp_tool_use, pre_user_prompt (an ask is a
deny). A deny exits 2 (blocking for every
client); an allow says nothing unless --authoritative, so the client's own permission
rules still apply.")]
pub struct Args {
    /// The client whose hook format stdin and stdout use.
    #[arg(value_enum)]
    pub client: Client,
    /// The policy file [default: `toolgate.yaml` in the current directory when it exists and
    /// you trusted it (`toolgate policy trust`; untrusted, every call is denied), else the
    /// built-in starter policy, as for `wrap`].
    #[arg(long, value_name = "PATH")]
    pub policy: Option<PathBuf>,
    /// The audit log of the decisions [default: the workspace's `.toolgate/audit.jsonl`,
    /// as for `wrap`].
    #[arg(long, value_name = "PATH")]
    pub audit: Option<PathBuf>,
    /// The workspace (the policy's `${workspace}`, the default audit's directory) [default:
    /// the directory the client reports: Claude Code's `cwd`, Cursor's first workspace
    /// root]. Given, it wins over what the client reports, which the agent can change
    /// (`cd`); `toolgate init --hooks` writes it.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Answer an allowed call with an explicit allow (skipping the client's own permission
    /// prompt) instead of no decision.
    #[arg(long)]
    pub authoritative: bool,
    /// The agent session at the broker [default: ppid- and the client's pid, the session of
    /// the toolgate wrap proxies the same client started]
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// How long the whole hook may take before it denies; keep it below the client's own
    /// hook timeout, after which a client lets the action run [default: 10s for claude-code,
    /// 4s for cursor].
    #[arg(long, value_name = "DURATION", value_parser = toolgate_runtime::duration::parse_duration)]
    pub timeout: Option<Duration>,
}

/// The arguments of `toolgate hook` read without clap (`args` after `hook`), for the common
/// case: a client runs the hook for every tool call, and building the whole command-line
/// definition costs start-up time and memory. `None` (help, an unknown or malformed
/// option) leaves it to clap, which then reports or explains.
pub fn quick_args(args: &[std::ffi::OsString]) -> Option<Args> {
    let mut client = None;
    let mut parsed = Args {
        client: Client::ClaudeCode,
        policy: None,
        audit: None,
        workspace: None,
        authoritative: false,
        session: None,
        timeout: None,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let arg = arg.to_str()?;
        match arg {
            "claude-code" if client.is_none() => client = Some(Client::ClaudeCode),
            "cursor" if client.is_none() => client = Some(Client::Cursor),
            "qwen-code" if client.is_none() => client = Some(Client::QwenCode),
            "gemini-cli" if client.is_none() => client = Some(Client::GeminiCli),
            "copilot-cli" if client.is_none() => client = Some(Client::CopilotCli),
            "codex" if client.is_none() => client = Some(Client::Codex),
            "opencode" if client.is_none() => client = Some(Client::OpenCode),
            "windsurf" if client.is_none() => client = Some(Client::Windsurf),
            "--authoritative" => parsed.authoritative = true,
            "--policy" => parsed.policy = Some(PathBuf::from(it.next()?)),
            "--audit" => parsed.audit = Some(PathBuf::from(it.next()?)),
            "--workspace" => parsed.workspace = Some(PathBuf::from(it.next()?)),
            "--session" => parsed.session = Some(it.next()?.to_str()?.to_owned()),
            "--timeout" => {
                parsed.timeout =
                    Some(toolgate_runtime::duration::parse_duration(it.next()?.to_str()?).ok()?);
            }
            _ => return None,
        }
    }
    parsed.client = client?;
    Some(parsed)
}

/// Runs `toolgate hook`. Never returns: it exits with the client's code.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let client = args.client;
    // A panic would exit 101, a non-blocking error to both clients: it denies instead.
    std::panic::set_hook(Box::new(move |info| {
        let reason =
            format!("internal error ({info}). help: report it; until then the call is denied");
        hook::finish(&hook::fail(client, None, &reason));
    }));
    let timeout = args.timeout.unwrap_or(match client {
        Client::ClaudeCode
        | Client::QwenCode
        | Client::GeminiCli
        | Client::CopilotCli
        | Client::Codex
        | Client::OpenCode => CLAUDE_TIMEOUT,
        Client::Cursor | Client::Windsurf => CURSOR_TIMEOUT,
    });
    let deadline = Instant::now() + timeout;
    // The watchdog: whatever hangs (stdin never closed, a broker that does not answer)
    // ends in a deny before the client's own timeout lets the action run.
    let _ = std::thread::Builder::new()
        .name("toolgate-hook-watchdog".to_owned())
        .spawn(move || {
            std::thread::sleep(timeout);
            let reason = format!(
                "the hook did not finish within {} ms (timed out). help: check `toolgate status`; raise --timeout if the machine is very busy",
                timeout.as_millis()
            );
            hook::finish(&hook::fail(client, None, &reason));
        });
    let output = decide(&args, deadline);
    hook::finish(&output)
}

fn decide(args: &Args, deadline: Instant) -> Output {
    let client = args.client;
    let bytes = match hook::read_input(std::io::stdin().lock()) {
        Ok(b) => b,
        Err(reason) => return hook::fail(client, None, &reason),
    };
    let name = hook::event_name_of(&bytes);
    let mut parsed = match hook::parse(client, &bytes) {
        Ok(p) => p,
        Err(reason) => return hook::fail(client, name.as_deref(), &reason),
    };
    // An explicit workspace wins over the client's `cwd`, which follows the agent's `cd`.
    if let Some(workspace) = &args.workspace {
        if !workspace.is_absolute() || !workspace.is_dir() {
            let reason = format!(
                "the workspace `{}` (--workspace) is not an absolute path of a directory. help: fix the hook command, e.g. with `toolgate init --hooks`",
                workspace.display()
            );
            return hook::fail(client, Some(&parsed.name), &reason);
        }
        parsed.workspace.clone_from(workspace);
    }
    drop(bytes);
    let Some(event) = parsed.event else {
        let verdict = Ruling {
            decision: HookEffect::Abstain,
            reason: String::new(),
        };
        return hook::render(client, &parsed.name, &verdict, args.authoritative);
    };
    let absolute = |p: &Option<PathBuf>, what: &str| -> Result<Option<PathBuf>, String> {
        match p {
            Some(p) if p.is_absolute() => Ok(Some(p.clone())),
            Some(p) => std::env::current_dir()
                .map(|cwd| Some(cwd.join(p)))
                .map_err(|e| {
                    format!(
                        "cannot resolve the {what} path `{}` ({e}). help: pass an absolute --{what}",
                        p.display()
                    )
                }),
            None => Ok(None),
        }
    };
    let (policy, audit) = match (
        absolute(&args.policy, "policy"),
        absolute(&args.audit, "audit"),
    ) {
        (Ok(policy), Ok(audit)) => (policy, audit),
        (Err(reason), _) | (_, Err(reason)) => {
            return hook::fail(client, Some(&parsed.name), &reason);
        }
    };
    // Without --policy: `./toolgate.yaml` of the directory the client runs the hook in, only
    // as trusted (its digest goes along: the broker uses exactly that content), else the
    // starter; one that is there but not trusted denies.
    let (policy, sha256) = match policy {
        Some(p) => (Some(p), None),
        None => {
            let here = std::env::current_dir()
                .map_err(|e| {
                    format!("cannot read the working directory ({e}). help: pass --policy PATH")
                })
                .and_then(|cwd| toolgate_runtime::trust::enforcing_default(&cwd));
            match here {
                Ok(Some(here)) => (Some(here.path), Some(here.sha256)),
                Ok(None) => (None, None),
                Err(reason) => return hook::fail(client, Some(&parsed.name), &reason),
            }
        }
    };
    let session = hook::link::session_key(args.session.as_deref());
    match hook::link::ask(
        &Layout::for_user(),
        &session,
        policy.as_deref(),
        sha256.as_deref(),
        &parsed.workspace,
        audit.as_deref(),
        event,
        !client.can_ask(),
        deadline,
    ) {
        Ok(mut verdict) => {
            if verdict.decision != HookEffect::Abstain {
                verdict.reason = format!("toolgate: {}", verdict.reason);
            }
            hook::render(client, &parsed.name, &verdict, args.authoritative)
        }
        Err(reason) => hook::fail(client, Some(&parsed.name), &reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
        args.iter().map(std::ffi::OsString::from).collect()
    }

    #[test]
    fn quick_args_read_the_usual_options_and_leave_the_rest_to_clap() {
        let a = quick_args(&os(&[
            "cursor",
            "--policy",
            "/p.yaml",
            "--authoritative",
            "--session",
            "s",
            "--timeout",
            "2s",
            "--workspace",
            "/w",
        ]))
        .unwrap();
        assert_eq!(a.workspace, Some(PathBuf::from("/w")));
        assert_eq!(a.client, Client::Cursor);
        assert_eq!(a.policy, Some(PathBuf::from("/p.yaml")));
        assert!(a.authoritative);
        assert_eq!(a.session.as_deref(), Some("s"));
        assert_eq!(a.timeout, Some(Duration::from_secs(2)));
        let a = quick_args(&os(&["claude-code"])).unwrap();
        assert_eq!(a.timeout, None);
        for other in [
            &["--help"][..],
            &["claude-code", "--help"],
            &["vscode"],
            &[],
            &["cursor", "claude-code"],
            &["cursor", "--policy"],
            &["cursor", "--timeout", "soon"],
        ] {
            assert!(quick_args(&os(other)).is_none(), "{other:?}");
        }
    }
}
