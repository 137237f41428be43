//! `toolgate demo`: a scripted agent, an embedded MCP server and the real proxy.
//!
//! The demo builds a throw-away workspace and a fake home directory (never the user's own),
//! starts `toolgate wrap` (this same binary) with an embedded policy in front of the embedded
//! demo server (`toolgate demo --internal-server`, also this binary), and drives it with a
//! scripted MCP client whose approval prompts are answered by a scripted human. Every printed
//! verdict is read from the proxy's actual replies: a call is ASK when the proxy sent an
//! `elicitation/create` for it, DENY when the proxy answered with its own error result, and
//! ALLOW when the server's answer came back untouched.

pub mod agent;
pub mod server;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use agent::{Agent, Exchange};

/// The demo's policy, embedded in the binary.
pub const DEMO_POLICY: &str = include_str!("policy.yaml");

/// Where verdict lines go and how they look.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
}

impl Style {
    /// Colour only when stdout is a terminal and `NO_COLOR` is unset.
    pub fn detect() -> Style {
        Style {
            color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}

/// A verdict as observed by the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    Allow,
    Deny,
    Ask,
    /// A JSON-RPC error (a protocol fault, not a verdict).
    Error,
}

impl Seen {
    fn label(self) -> &'static str {
        match self {
            Seen::Allow => "ALLOW",
            Seen::Deny => "DENY ",
            Seen::Ask => "ASK  ",
            Seen::Error => "ERROR",
        }
    }

    fn color(self) -> &'static str {
        match self {
            Seen::Allow => "1;32",
            Seen::Deny => "1;31",
            Seen::Ask => "1;33",
            Seen::Error => "1;35",
        }
    }
}

/// What the scripted human answers when asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Human {
    AllowOnce,
    AllowSession,
    Deny,
}

impl Human {
    fn choice(self) -> &'static str {
        match self {
            Human::AllowOnce => toolgate_runtime::approval::CHOICE_ALLOW_ONCE,
            Human::AllowSession => toolgate_runtime::approval::CHOICE_ALLOW_SESSION,
            Human::Deny => toolgate_runtime::approval::CHOICE_DENY,
        }
    }

    fn said(self) -> &'static str {
        match self {
            Human::AllowOnce => "the human allowed it once",
            Human::AllowSession => "the human allowed it for the session",
            Human::Deny => "the human denied it",
        }
    }
}

/// One observed call, as printed.
#[derive(Debug, Clone)]
pub struct Observed {
    pub seen: Seen,
    /// The call, e.g. `read_file ~/.ssh/id_rsa`.
    pub call: String,
    /// Why, from the proxy's reply or prompt.
    pub reason: String,
    /// What happened in the end (for an ASK: the human's answer and the outcome).
    pub outcome: Option<String>,
    /// True when the call's final answer was the tool's own result.
    pub reached_server: bool,
}

impl Observed {
    /// The one printed line.
    pub fn line(&self, style: Style) -> String {
        let mut line = format!(
            "{}  {}  {}",
            style.paint(self.seen.color(), self.seen.label()),
            style.paint("1", &self.call),
            self.reason
        );
        if let Some(outcome) = &self.outcome {
            line.push_str(" → ");
            line.push_str(outcome);
        }
        line
    }
}

/// Classifies a `tools/call` exchange from the client's side.
pub fn observe(call: String, exchange: &Exchange) -> Observed {
    let text = exchange
        .result()
        .map(result_text)
        .or_else(|| {
            exchange
                .response
                .pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let is_error = exchange
        .result()
        .and_then(|r| r.get("isError"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let by_toolgate = is_error && is_toolgate_result(exchange.result());
    let first_line = |s: &str| s.lines().next().unwrap_or("").to_owned();
    if let Some((prompt, answer)) = exchange.prompts.first() {
        let human = answer_choice(answer);
        let message = prompt
            .get("message")
            .and_then(Value::as_str)
            .map(prompt_reason)
            .unwrap_or_default();
        let outcome = if exchange.result().is_none() {
            format!("{human}; error: {text}")
        } else if by_toolgate {
            format!("{human}: blocked")
        } else {
            format!("{human}: forwarded")
        };
        return Observed {
            seen: Seen::Ask,
            call,
            reason: message,
            outcome: Some(outcome),
            reached_server: exchange.result().is_some() && !by_toolgate,
        };
    }
    match exchange.result() {
        None => Observed {
            seen: Seen::Error,
            call,
            reason: text,
            outcome: None,
            reached_server: false,
        },
        Some(_) if by_toolgate => Observed {
            seen: Seen::Deny,
            call,
            reason: deny_reason(&text),
            outcome: None,
            reached_server: false,
        },
        Some(_) => Observed {
            seen: Seen::Allow,
            call,
            reason: format!("forwarded; the server said: {}", first_line(&text)),
            outcome: None,
            reached_server: true,
        },
    }
}

/// The reason in a denial text: without the `toolgate blocked TOOL: ` prefix and the advice.
pub fn deny_reason(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    let body = line
        .strip_prefix("toolgate blocked ")
        .and_then(|rest| rest.split_once(": ").map(|(_, r)| r))
        .unwrap_or(line);
    body.split(". This call was not run")
        .next()
        .unwrap_or(body)
        .to_owned()
}

/// The "why" of an approval prompt (the line toolgate starts with `Why you are asked: `).
pub fn prompt_reason(message: &str) -> String {
    let why = message
        .lines()
        .find_map(|l| l.strip_prefix("Why you are asked: "))
        .unwrap_or_else(|| message.lines().next().unwrap_or(""));
    let extra = message
        .lines()
        .find_map(|l| l.strip_prefix("What changed: "))
        .filter(|_| !why.contains("changed"))
        .map(|c| format!(" ({c})"))
        .unwrap_or_default();
    format!("{why}{extra}")
}

/// The reason the proxy recorded in its audit log for an allowed request, if any.
pub fn audited_reason(audit: &Path, request_id: i64) -> Option<String> {
    let log = std::fs::read_to_string(audit).ok()?;
    let id = request_id.to_string();
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r.get("kind").and_then(Value::as_str) == Some("decision"))
        .filter(|r| r.get("request_id").and_then(Value::as_str) == Some(id.as_str()))
        .filter_map(|r| r.get("reason").and_then(Value::as_str).map(str::to_owned))
        .next_back()
}

fn answer_choice(answer: &Value) -> String {
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => match answer
            .pointer(&format!(
                "/content/{}",
                toolgate_runtime::approval::DECISION_FIELD
            ))
            .and_then(Value::as_str)
        {
            Some(c) if c == Human::AllowOnce.choice() => Human::AllowOnce.said().to_owned(),
            Some(c) if c == Human::AllowSession.choice() => Human::AllowSession.said().to_owned(),
            _ => Human::Deny.said().to_owned(),
        },
        _ => Human::Deny.said().to_owned(),
    }
}

/// True when a tool result was written by toolgate rather than the upstream server.
pub fn is_toolgate_result(result: Option<&Value>) -> bool {
    let Some(result) = result else { return false };
    result
        .pointer(&format!(
            "/_meta/{}",
            toolgate_runtime::approval::META_DECISION
        ))
        .is_some()
        || result_text(result).starts_with("toolgate ")
}

/// The concatenated text content of a tool result.
pub fn result_text(result: &Value) -> String {
    result
        .get("content")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|c| c.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The throw-away directories of one demo run.
#[derive(Debug)]
pub struct Sandbox {
    _root: tempfile::TempDir,
    pub workspace: PathBuf,
    pub home: PathBuf,
    pub outbox: PathBuf,
    pub policy: PathBuf,
    pub audit: PathBuf,
    pub proxy_log: PathBuf,
}

impl Sandbox {
    /// Creates the workspace, the fake home (with a fake SSH key) and the policy file.
    pub fn create() -> anyhow::Result<Sandbox> {
        let root = tempfile::Builder::new()
            .prefix("toolgate-demo-")
            .tempdir()
            .context("cannot create a temporary directory for the demo")?;
        // Canonical paths, so what the proxy prints matches what we show.
        let base = root.path().canonicalize()?;
        let workspace = base.join("workspace");
        let home = base.join("home");
        std::fs::create_dir_all(workspace.join("src"))?;
        std::fs::create_dir_all(home.join(".ssh"))?;
        std::fs::write(
            workspace.join("README.md"),
            "# acme-app\nA small web app. Run `npm test` before pushing.\n",
        )?;
        std::fs::write(
            workspace.join("package.json"),
            "{ \"name\": \"acme-app\", \"scripts\": { \"test\": \"node --test\" } }\n",
        )?;
        std::fs::write(
            home.join(".ssh").join("id_rsa"),
            "-----BEGIN OPENSSH PRIVATE KEY-----\nTOOLGATE-DEMO-FAKE-KEY-NOT-A-SECRET\n-----END OPENSSH PRIVATE KEY-----\n",
        )?;
        let policy = base.join("policy.yaml");
        std::fs::write(&policy, DEMO_POLICY)?;
        Ok(Sandbox {
            outbox: base.join("outbox.jsonl"),
            audit: base.join("audit.jsonl"),
            proxy_log: base.join("proxy.log"),
            policy,
            workspace,
            home,
            _root: root,
        })
    }

    /// Keeps the directory on disk and returns its path.
    pub fn keep(self) -> PathBuf {
        self._root.keep()
    }

    /// The command line of the real proxy in front of the demo server.
    pub fn proxy_command(&self, exe: &Path) -> anyhow::Result<Command> {
        let log = std::fs::File::create(&self.proxy_log)?;
        let mut cmd = Command::new(exe);
        cmd.arg("wrap")
            .arg("--policy")
            .arg(&self.policy)
            .arg("--workspace")
            .arg(&self.workspace)
            .arg("--audit")
            .arg(&self.audit)
            .arg("--approval")
            .arg("client")
            .arg("--server")
            .arg("demo")
            .arg("--")
            .arg(exe)
            .arg("demo")
            .arg("--internal-server")
            .arg("--workspace")
            .arg(&self.workspace)
            .arg("--outbox")
            .arg(&self.outbox)
            .arg("--rug-pull-after")
            .arg(RUG_PULL_AFTER.to_string())
            .env("HOME", &self.home)
            .env("USERPROFILE", &self.home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_STATE_HOME")
            // Never touch the user's own pin store or approval broker.
            .env_remove("TOOLGATE_PINS_DIR")
            .env(
                toolgate_broker::paths::DIR_ENV,
                self.workspace.with_file_name("broker"),
            )
            .env("TOOLGATE_LOG", "info")
            .stderr(Stdio::from(log));
        Ok(cmd)
    }
}

/// The demo server rug-pulls `fetch` after this many forwarded calls (see the script).
pub const RUG_PULL_AFTER: u64 = 6;

const STEP_TIMEOUT: Duration = Duration::from_secs(20);

/// One scripted call.
#[derive(Debug, Clone)]
struct Step {
    tool: &'static str,
    arguments: Value,
    /// How the call is shown.
    shown: String,
    /// What the scripted human answers if the proxy asks.
    human: Human,
    /// Before this step, wait for the rug pull and list the tools again.
    after_rug_pull: bool,
}

fn script() -> Vec<Step> {
    let step = |tool, arguments: Value, shown: &str, human| Step {
        tool,
        arguments,
        shown: shown.to_owned(),
        human,
        after_rug_pull: false,
    };
    vec![
        step(
            "read_file",
            json!({"path": "README.md"}),
            "read_file README.md",
            Human::Deny,
        ),
        step(
            "read_file",
            json!({"path": "~/.ssh/id_rsa"}),
            "read_file ~/.ssh/id_rsa",
            Human::Deny,
        ),
        step(
            "run_command",
            json!({"command": "npm test"}),
            "run_command `npm test`",
            Human::Deny,
        ),
        step(
            "run_command",
            json!({"command": "sudo rm -rf ~"}),
            "run_command `sudo rm -rf ~`",
            Human::Deny,
        ),
        step("read_inbox", json!({}), "read_inbox", Human::Deny),
        step(
            "send_email",
            json!({"to": server::ATTACKER, "subject": "key", "body": "as requested"}),
            &format!("send_email to {}", server::ATTACKER),
            Human::AllowOnce,
        ),
        step(
            "send_email",
            json!({"to": server::NEW_ADDRESS, "subject": "release checklist", "body": "attached"}),
            &format!("send_email to {}", server::NEW_ADDRESS),
            Human::AllowOnce,
        ),
        step(
            "send_email",
            json!({"to": server::TRUSTED, "subject": "release checklist", "body": "attached"}),
            &format!("send_email to {}", server::TRUSTED),
            Human::Deny,
        ),
        step(
            "fetch",
            json!({"url": "https://docs.rs/serde"}),
            "fetch https://docs.rs/serde",
            Human::Deny,
        ),
        Step {
            after_rug_pull: true,
            ..step(
                "fetch",
                json!({"url": "https://docs.rs/serde"}),
                "fetch https://docs.rs/serde (description changed)",
                Human::Deny,
            )
        },
    ]
}

/// The outcome of a whole demo run.
#[derive(Debug)]
pub struct Report {
    pub observed: Vec<Observed>,
    /// Lines in the demo server's outbox: what really was sent.
    pub outbox: Vec<String>,
}

/// Runs the scripted session against `exe wrap …`, calling `on_line` as each call completes.
pub fn run_session(
    exe: &Path,
    sandbox: &Sandbox,
    on_line: &mut dyn FnMut(&Observed),
) -> anyhow::Result<Report> {
    let mut agent = Agent::spawn(sandbox.proxy_command(exe)?)?;
    let mut no_prompt = |_: &Value| json!({"action": "decline"});
    let init = agent.request(
        "initialize",
        json!({
            "protocolVersion": toolgate_mcp::protocol::V2025_06_18,
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "toolgate-demo-agent", "version": env!("CARGO_PKG_VERSION")}
        }),
        STEP_TIMEOUT,
        &mut no_prompt,
    )?;
    if init.result().is_none() {
        anyhow::bail!("the proxy refused `initialize`: {}", init.response);
    }
    agent.notify("notifications/initialized", json!({}))?;
    list_all_tools(&mut agent)?;

    let mut observed = Vec::new();
    for step in script() {
        if step.after_rug_pull {
            agent.wait_for_notification("notifications/tools/list_changed", STEP_TIMEOUT)?;
            list_all_tools(&mut agent)?;
        }
        let mut human = |params: &Value| {
            // The scripted human reads the choices the prompt offers and picks one.
            let offered = params
                .pointer(&format!(
                    "/requestedSchema/properties/{}/enum",
                    toolgate_runtime::approval::DECISION_FIELD
                ))
                .and_then(Value::as_array)
                .is_some_and(|choices| {
                    choices
                        .iter()
                        .any(|c| c.as_str() == Some(step.human.choice()))
                });
            if offered && step.human != Human::Deny {
                json!({"action": "accept",
                       "content": {toolgate_runtime::approval::DECISION_FIELD: step.human.choice()}})
            } else {
                json!({"action": "decline"})
            }
        };
        let exchange = agent.request(
            "tools/call",
            json!({"name": step.tool, "arguments": step.arguments}),
            STEP_TIMEOUT,
            &mut human,
        )?;
        let mut seen = observe(step.shown.clone(), &exchange);
        if seen.seen == Seen::Allow
            && let Some(reason) = audited_reason(&sandbox.audit, exchange.id)
        {
            seen.reason = reason;
        }
        on_line(&seen);
        observed.push(seen);
    }
    let _ = agent.shutdown(Duration::from_secs(5));
    let outbox = std::fs::read_to_string(&sandbox.outbox)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    Ok(Report { observed, outbox })
}

/// Lists every page of tools, following `nextCursor` like a real client.
fn list_all_tools(agent: &mut Agent) -> anyhow::Result<Vec<Value>> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut decline = |_: &Value| json!({"action": "decline"});
    for _ in 0..100 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = agent.request("tools/list", params, STEP_TIMEOUT, &mut decline)?;
        let result = page
            .result()
            .with_context(|| format!("`tools/list` failed: {}", page.response))?;
        if let Some(list) = result.get("tools").and_then(Value::as_array) {
            tools.extend(list.iter().cloned());
        }
        cursor = result
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            return Ok(tools);
        }
    }
    anyhow::bail!("`tools/list` did not end after 100 pages")
}

/// Shows the last lines of the proxy's log, for an error report.
pub fn proxy_log_tail(sandbox: &Sandbox) -> String {
    let log = std::fs::read_to_string(&sandbox.proxy_log).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines
        .iter()
        .skip(lines.len().saturating_sub(15))
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}
