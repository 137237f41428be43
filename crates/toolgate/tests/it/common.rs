//! Shared helpers for the npm-backed integration tests (`everything_*`, `filesystem_*`).
//!
//! - Locating `node` and the pinned packages in `tests/node_modules` (installed by
//!   `npm ci --prefix tests`, which `scripts/test` runs). With `CI=true` a missing node or
//!   package is a failure; locally a test skips with a message only when `node` is absent.
//! - Spawning a real server either directly or behind `toolgate wrap --`, each in its own
//!   process group that is killed on drop, with the server's stdout teed so that every raw
//!   frame the client receives is recorded.
//! - [`Session`]: an rmcp client (the official Rust SDK) that records what it observes —
//!   results, server notifications and server-initiated requests — as a transcript of
//!   JSON values, so a scenario run directly and through toolgate can be compared.
//!
//! Every wait is bounded by [`STEP_TIMEOUT`].
#![allow(
    dead_code,
    deprecated,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stdout,
    clippy::print_stderr,
    missing_debug_implementations,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; prints what it ran for the person reading the test output; test fixtures and handles, never formatted; helpers shared by several tests, not every one uses every helper; some rmcp client items the harness drives are deprecated upstream"
)]

use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use rmcp::model::{
    CancelledNotificationParam, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ListRootsResult, LoggingMessageNotificationParam,
    ProgressNotificationParam, ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ErrorData, ServiceError, ServiceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

/// Upper bound for every single wait in these tests.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crate lives in crates/<name>")
        .to_path_buf()
}

/// `tests/node_modules` of the repository.
pub fn node_modules() -> PathBuf {
    repo_root().join("tests").join("node_modules")
}

/// Waits for `child` at most `limit` and collects its output; kills it and fails past that
/// (`what` names it).
pub fn wait_with_output(
    child: std::process::Child,
    limit: std::time::Duration,
    what: &str,
) -> std::process::Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("waiting for a child"),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
            panic!("`{what}` did not finish within {limit:?}");
        }
    }
}

/// The toolgate binary under test.
pub fn toolgate_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_toolgate"))
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// Finds `node` and a file inside `tests/node_modules`.
///
/// Returns `None` (after printing why) only when `node` is absent and we are not in CI.
/// Panics with a `help:` line when the package is missing or when CI lacks node.
pub fn node_and(entry_in_node_modules: &str) -> Option<(PathBuf, PathBuf)> {
    let Some(node) = find_on_path("node") else {
        if in_ci() {
            panic!(
                "`node` is not on PATH but CI=true: the npm-backed integration tests must run in CI\n\
                 help: install Node.js ≥ 18, then run `scripts/test`"
            );
        }
        eprintln!(
            "skipped: no node (the npm-backed integration tests need it: \
             install Node.js ≥ 18 and run `scripts/test`)"
        );
        return None;
    };
    let entry = node_modules().join(entry_in_node_modules);
    assert!(
        entry.is_file(),
        "`{}` is missing\nhelp: run `npm ci --prefix tests` (scripts/test does it for you)",
        entry.display()
    );
    Some((node, entry))
}

/// A real MCP server command line: `node <entry> <args...>` run in `cwd`.
#[derive(Debug, Clone)]
pub struct ServerCmd {
    pub node: PathBuf,
    pub entry: PathBuf,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
}

/// `@modelcontextprotocol/server-everything` in stdio mode, or `None` if node is absent.
pub fn everything_server() -> Option<ServerCmd> {
    let (node, entry) = node_and("@modelcontextprotocol/server-everything/dist/index.js")?;
    Some(ServerCmd {
        node,
        entry,
        args: vec!["stdio".into()],
        cwd: std::env::temp_dir(),
    })
}

/// `@modelcontextprotocol/server-filesystem` allowed to access `dir`, or `None` if node is absent.
pub fn filesystem_server(dir: &Path) -> Option<ServerCmd> {
    let (node, entry) = node_and("@modelcontextprotocol/server-filesystem/dist/index.js")?;
    Some(ServerCmd {
        node,
        entry,
        args: vec![dir.as_os_str().to_owned()],
        cwd: dir.to_path_buf(),
    })
}

/// How the client reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The client spawns the server itself.
    Direct,
    /// The client spawns `toolgate wrap -- <server>`.
    Toolgate,
}

impl Route {
    pub fn label(self) -> &'static str {
        match self {
            Route::Direct => "direct",
            Route::Toolgate => "through toolgate wrap",
        }
    }
}

/// The permissive policy used for parity runs: these tests check that the relay is
/// transparent, so every call is allowed and no built-in pack adds checks (enforcement has
/// its own tests). Tool pinning still applies, so scenarios list tools before calling them,
/// as real clients do.
pub const PARITY_POLICY: &str = "version: 1\ndefault: allow\npacks: []\n";

/// How to start a server on a route: argv, extra environment, and the private state
/// directory (policy, audit log, pins) of a toolgate run, deleted on drop.
pub struct Launch {
    pub argv: Vec<OsString>,
    pub envs: Vec<(OsString, OsString)>,
    pub state: Option<tempfile::TempDir>,
}

/// Prepares `server` on `route`. Through toolgate, each run gets its own policy file, audit
/// log and pin store (`TOOLGATE_PINS_DIR`), so concurrent tests never share state, and
/// `--approval none` turns any unexpected "ask" into a visible deny instead of a prompt.
pub fn launch(route: Route, server: &ServerCmd) -> anyhow::Result<Launch> {
    let mut argv: Vec<OsString> = Vec::new();
    let mut envs = Vec::new();
    let mut state = None;
    if route == Route::Toolgate {
        let dir = tempfile::Builder::new()
            .prefix("toolgate-parity-")
            .tempdir()?;
        let policy = dir.path().join("policy.yaml");
        std::fs::write(&policy, PARITY_POLICY)?;
        let pins = dir.path().join("pins");
        std::fs::create_dir(&pins)?;
        argv.push(toolgate_bin().into_os_string());
        argv.push("wrap".into());
        argv.push("--policy".into());
        argv.push(policy.into_os_string());
        argv.push("--audit".into());
        argv.push(dir.path().join("audit.jsonl").into_os_string());
        argv.push("--approval".into());
        argv.push("none".into());
        argv.push("--".into());
        envs.push((OsString::from("TOOLGATE_PINS_DIR"), pins.into_os_string()));
        state = Some(dir);
    }
    argv.push(server.node.clone().into_os_string());
    argv.push(server.entry.clone().into_os_string());
    argv.extend(server.args.iter().cloned());
    Ok(Launch { argv, envs, state })
}

/// A spawned process in its own process group; the group is killed when this is dropped.
pub struct Proc {
    child: Child,
    pgid: Option<rustix::process::Pid>,
}

impl Proc {
    /// Spawns `argv` in `cwd` with piped stdin/stdout; stderr is inherited (shown on failure).
    pub fn spawn(
        argv: &[OsString],
        envs: &[(OsString, OsString)],
        cwd: &Path,
    ) -> anyhow::Result<(Proc, ChildStdin, ChildStdout)> {
        let (program, args) = argv.split_first().context("empty argv")?;
        let mut child = Command::new(program)
            .args(args)
            .envs(envs.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot spawn `{}`", program.to_string_lossy()))?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw);
        Ok((Proc { child, pgid }, stdin, stdout))
    }

    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Sends SIGTERM to the process (not its group: toolgate forwards signals itself).
    pub fn terminate(&self) {
        if let Some(pid) = self.pgid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }

    /// Waits (bounded) for the process to exit after its stdin was closed.
    pub async fn wait(&mut self, limit: Duration) -> anyhow::Result<ExitStatus> {
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(status) => Ok(status?),
            Err(_) => bail!("the process did not exit within {limit:?} of stdin EOF"),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }
}

/// An append-only log with a change counter that waiters can watch.
#[derive(Clone)]
pub struct Log {
    items: Arc<Mutex<Vec<Value>>>,
    count: watch::Sender<usize>,
}

impl Default for Log {
    fn default() -> Self {
        Log {
            items: Arc::default(),
            count: watch::Sender::new(0),
        }
    }
}

impl Log {
    pub fn push(&self, value: Value) {
        let mut items = self.items.lock().unwrap();
        items.push(value);
        let len = items.len();
        drop(items);
        self.count.send_replace(len);
    }

    pub fn len(&self) -> usize {
        self.items.lock().unwrap().len()
    }

    pub fn snapshot(&self) -> Vec<Value> {
        self.items.lock().unwrap().clone()
    }

    pub fn slice_from(&self, start: usize) -> Vec<Value> {
        self.items
            .lock()
            .unwrap()
            .get(start..)
            .map(<[Value]>::to_vec)
            .unwrap_or_default()
    }

    /// Waits until the log holds at least `target` items.
    pub async fn wait_len(&self, target: usize, limit: Duration) -> anyhow::Result<()> {
        let mut rx = self.count.subscribe();
        match tokio::time::timeout(limit, rx.wait_for(|n| *n >= target)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => bail!("log closed"),
            Err(_) => bail!(
                "timed out after {limit:?} waiting for {target} items; have {}: {}",
                self.len(),
                serde_json::to_string(&self.snapshot()).unwrap_or_default()
            ),
        }
    }
}

/// Reads newline-delimited frames from `from`, records each (parsed) in `log`, and passes the
/// bytes on unchanged to the returned reader.
fn tee_frames(from: ChildStdout, log: Log) -> tokio::io::DuplexStream {
    let (mut writer, reader) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let mut lines = BufReader::new(from);
        let mut line = Vec::new();
        loop {
            line.clear();
            match lines.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line);
            let frame = serde_json::from_str::<Value>(text.trim_end())
                .unwrap_or_else(|_| json!({ "non_json_line": text.trim_end() }));
            log.push(frame);
            if writer.write_all(&line).await.is_err() {
                break;
            }
        }
        let _ = writer.shutdown().await;
    });
    reader
}

/// Copies what the client writes to `to` (the child's stdin) until `close` fires or the
/// client side ends; then drops `to`, so the child sees EOF at a moment the test chooses.
fn pump_to_child(
    mut to: ChildStdin,
    log: Log,
) -> (tokio::io::DuplexStream, tokio::sync::oneshot::Sender<()>) {
    let (client_side, pump_side) = tokio::io::duplex(1 << 20);
    let (close_tx, mut close_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let mut lines = BufReader::new(pump_side);
        let mut line = Vec::new();
        loop {
            line.clear();
            tokio::select! {
                read = lines.read_until(b'\n', &mut line) => {
                    match read {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
                _ = &mut close_rx => break,
            }
            let text = String::from_utf8_lossy(&line);
            log.push(serde_json::from_str::<Value>(text.trim_end()).unwrap_or(Value::Null));
            if to.write_all(&line).await.is_err() || to.flush().await.is_err() {
                break;
            }
        }
        drop(to);
    });
    (client_side, close_tx)
}

/// Deserialises an rmcp model type from JSON (their structs are `#[non_exhaustive]`).
pub fn model<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("valid rmcp model JSON")
}

/// Answers the client can give to server-initiated requests.
#[derive(Clone)]
pub struct ClientAnswers {
    pub sampling: Value,
    pub elicitation: Value,
    /// The roots returned by successive `roots/list` calls; the last one repeats.
    pub roots: Vec<Value>,
    /// The client capabilities declared in `initialize`.
    pub capabilities: Value,
}

impl Default for ClientAnswers {
    fn default() -> Self {
        ClientAnswers {
            sampling: json!({
                "role": "assistant",
                "content": { "type": "text", "text": "a canned completion from the toolgate test client" },
                "model": "toolgate-test-model",
                "stopReason": "endTurn"
            }),
            elicitation: json!({
                "action": "accept",
                "content": { "name": "Ada Lovelace", "check": true, "email": "ada@example.org", "integer": 7 }
            }),
            roots: vec![
                json!({ "roots": [ { "uri": "file:///tmp/toolgate-root-a", "name": "Root A" } ] }),
                json!({ "roots": [
                    { "uri": "file:///tmp/toolgate-root-a", "name": "Root A" },
                    { "uri": "file:///tmp/toolgate-root-b", "name": "Root B" }
                ] }),
            ],
            capabilities: json!({
                "roots": { "listChanged": true },
                "sampling": {},
                "elicitation": { "form": {} }
            }),
        }
    }
}

/// An rmcp client handler that records every notification and server-initiated request.
#[derive(Clone)]
pub struct RecordingClient {
    pub events: Log,
    answers: ClientAnswers,
    roots_calls: Arc<Mutex<usize>>,
    config: ClientConfig,
}

impl RecordingClient {
    pub fn new(answers: ClientAnswers) -> RecordingClient {
        let config = model(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": answers.capabilities,
            "clientInfo": { "name": "toolgate-parity-test", "version": "0.0.0" }
        }));
        RecordingClient {
            events: Log::default(),
            answers,
            roots_calls: Arc::default(),
            config,
        }
    }

    fn record<T: Serialize>(&self, kind: &str, params: &T) {
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.events.push(json!({ "kind": kind, "params": params }));
    }
}

impl ClientHandler for RecordingClient {
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.record("request sampling/createMessage", &params);
        Ok(model(self.answers.sampling.clone()))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.record("request elicitation/create", &request);
        Ok(model(self.answers.elicitation.clone()))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let call = {
            let mut calls = self.roots_calls.lock().unwrap();
            *calls += 1;
            *calls
        };
        self.record("request roots/list", &json!({ "call": call }));
        let answer = self
            .answers
            .roots
            .get(call - 1)
            .or_else(|| self.answers.roots.last())
            .cloned()
            .unwrap_or_else(|| json!({ "roots": [] }));
        Ok(model(answer))
    }

    async fn on_cancelled(
        &self,
        params: CancelledNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.record("notifications/cancelled", &params);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.record("notifications/progress", &params);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.record("notifications/message", &params);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.record("notifications/resources/updated", &params);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.record("notifications/resources/list_changed", &Value::Null);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.record("notifications/tools/list_changed", &Value::Null);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.record("notifications/prompts/list_changed", &Value::Null);
    }

    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }
}

/// Replaces inherently variable values (timestamps in server-everything's dynamic resources).
pub fn normalise(value: &mut Value) {
    match value {
        Value::String(text) => {
            if let Some(at) = text.find(" created at ") {
                text.truncate(at);
                text.push_str(" created at <time>");
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalise),
        Value::Object(map) => {
            let dynamic_blob = map
                .get("uri")
                .and_then(Value::as_str)
                .is_some_and(|uri| uri.starts_with("demo://resource/dynamic/blob/"));
            for (key, item) in map.iter_mut() {
                if dynamic_blob && key == "blob" {
                    *item = Value::String("<base64 with a timestamp>".to_owned());
                } else {
                    normalise(item);
                }
            }
        }
        _ => {}
    }
}

fn sorted(mut values: Vec<Value>) -> Vec<Value> {
    for value in &mut values {
        normalise(value);
    }
    values.sort_by_cached_key(|v| serde_json::to_string(v).unwrap_or_default());
    values
}

/// A client session recording a transcript of what it observed.
pub struct Session {
    pub route: Route,
    pub client: RunningService<RoleClient, RecordingClient>,
    pub events: Log,
    pub frames: Log,
    /// Frames the client sent (for debugging and outbound checks).
    pub sent: Log,
    close_stdin: Option<tokio::sync::oneshot::Sender<()>>,
    proc: Proc,
    /// The toolgate run's private state (policy, audit, pins), if any.
    pub state: Option<tempfile::TempDir>,
    transcript: Vec<Value>,
    events_seen: usize,
    frames_seen: usize,
}

impl Session {
    /// Spawns `server` on `route`, performs the MCP handshake and records the server's
    /// answer. When `roots_sync_events` is non-zero, also waits for that many events (the
    /// roots sync server-everything performs after `initialized`).
    pub async fn start(
        route: Route,
        server: &ServerCmd,
        answers: ClientAnswers,
    ) -> anyhow::Result<Session> {
        let launch = launch(route, server)?;
        let (proc, stdin, stdout) = Proc::spawn(&launch.argv, &launch.envs, &server.cwd)?;
        let frames = Log::default();
        let reader = tee_frames(stdout, frames.clone());
        let sent = Log::default();
        let (writer, close_stdin) = pump_to_child(stdin, sent.clone());
        let handler = RecordingClient::new(answers);
        let events = handler.events.clone();
        let client = tokio::time::timeout(STEP_TIMEOUT, handler.serve((reader, writer)))
            .await
            .map_err(|_| anyhow!("initialize timed out after {STEP_TIMEOUT:?}"))?
            .map_err(|err| anyhow!("initialize failed: {err}"))?;
        let mut session = Session {
            route,
            client,
            events,
            frames,
            sent,
            close_stdin: Some(close_stdin),
            proc,
            state: launch.state,
            transcript: Vec::new(),
            events_seen: 0,
            frames_seen: 0,
        };
        let info = session
            .client
            .peer_info()
            .map(|info| serde_json::to_value(&*info).unwrap_or(Value::Null))
            .unwrap_or(Value::Null);
        session
            .transcript
            .push(json!({ "step": "initialize", "result": info }));
        Ok(session)
    }

    fn drain(&mut self) -> (Vec<Value>, Vec<Value>) {
        let events = self.events.slice_from(self.events_seen);
        let frames = self.frames.slice_from(self.frames_seen);
        self.events_seen += events.len();
        self.frames_seen += frames.len();
        (sorted(events), sorted(frames))
    }

    /// Runs one client request (bounded) and records its outcome and the frames that
    /// arrived since the previous entry.
    pub async fn step<T: Serialize>(
        &mut self,
        label: &str,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> anyhow::Result<Value> {
        let outcome = tokio::time::timeout(STEP_TIMEOUT, request)
            .await
            .map_err(|_| {
                anyhow!(
                    "`{label}` timed out after {STEP_TIMEOUT:?} ({})",
                    self.route.label()
                )
            })?;
        let mut result = match outcome {
            Ok(value) => serde_json::to_value(&value)?,
            Err(err) => json!({ "client_error": err.to_string() }),
        };
        normalise(&mut result);
        // Frames arrive in stream order, so those before the response belong to this step.
        // Handler events are only collected at `expect_events` points and at the end: rmcp
        // dispatches them on tasks, so their timing relative to a result is not exact.
        let frames = self.frames.slice_from(self.frames_seen);
        self.frames_seen += frames.len();
        self.transcript.push(json!({
            "step": label,
            "result": result.clone(),
            "frames": sorted(frames)
        }));
        Ok(result)
    }

    /// Waits (bounded) until the events that arrived since the previous `expect_events`
    /// include at least `n` of each `(kind, n)` in `wanted`, then records all of them (sorted)
    /// with the frames that arrived since the previous entry.
    pub async fn expect_events(
        &mut self,
        label: &str,
        wanted: &[(&str, usize)],
    ) -> anyhow::Result<Vec<Value>> {
        let satisfied = |events: &[Value]| {
            wanted.iter().all(|(kind, n)| {
                events
                    .iter()
                    .filter(|e| e.get("kind").and_then(Value::as_str) == Some(kind))
                    .count()
                    >= *n
            })
        };
        let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
        let mut rx = self.events.count.subscribe();
        while !satisfied(&self.events.slice_from(self.events_seen)) {
            let changed = tokio::time::timeout_at(deadline, rx.changed()).await;
            if !matches!(changed, Ok(Ok(()))) {
                bail!(
                    "timed out after {STEP_TIMEOUT:?} waiting for {label} {wanted:?} ({}); new events: {}",
                    self.route.label(),
                    serde_json::to_string(&self.events.slice_from(self.events_seen))
                        .unwrap_or_default()
                );
            }
        }
        let (events, frames) = self.drain();
        self.transcript
            .push(json!({ "awaited": label, "events": events.clone(), "frames": frames }));
        Ok(events)
    }

    /// Records a client notification sent (no reply expected).
    pub fn note(&mut self, label: &str) {
        self.transcript.push(json!({ "sent": label }));
    }

    /// Closes the client's side (stdin EOF), waits for the process to exit and returns the
    /// transcript.
    ///
    /// Follows the MCP stdio shutdown sequence: EOF, then (after 3 s, longer than toolgate's
    /// 2 s grace period) SIGTERM, then failure if the process is still alive 10 s later.
    pub async fn finish(mut self) -> anyhow::Result<Vec<Value>> {
        if let Some(close) = self.close_stdin.take() {
            let _ = close.send(());
        }
        let status = match self.proc.wait(Duration::from_secs(3)).await {
            Ok(status) => Ok(status),
            Err(_) => {
                self.proc.terminate();
                self.proc.wait(Duration::from_secs(10)).await
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(5), self.client.close()).await;
        let (events, frames) = self.drain();
        if !events.is_empty() || !frames.is_empty() {
            self.transcript
                .push(json!({ "after_close": true, "events": events, "frames": frames }));
        }
        status.with_context(|| format!("shutting down ({})", self.route.label()))?;
        Ok(self.transcript)
    }
}

/// Runs `scenario` directly and through `toolgate wrap` (concurrently), checks the direct
/// transcript with `expect`, and asserts both transcripts are equal.
pub async fn assert_parity<S, F, E>(server: &ServerCmd, scenario: S, expect: E)
where
    S: Fn(Route) -> F,
    F: Future<Output = anyhow::Result<Vec<Value>>>,
    E: FnOnce(&[Value]),
{
    let (direct, wrapped) = tokio::join!(scenario(Route::Direct), scenario(Route::Toolgate));
    let _ = server;
    let direct = direct
        .unwrap_or_else(|err| panic!("the scenario failed against the server directly: {err:#}"));
    expect(&direct);
    let wrapped = wrapped.unwrap_or_else(|err| {
        panic!("the scenario failed through `toolgate wrap` (it passed directly): {err:#}")
    });
    assert_same_transcript(&direct, &wrapped);
}

/// Panics with a unified diff when the two transcripts differ.
pub fn assert_same_transcript(direct: &[Value], wrapped: &[Value]) {
    let left = serde_json::to_string_pretty(direct).unwrap();
    let right = serde_json::to_string_pretty(wrapped).unwrap();
    if left != right {
        let diff = similar::TextDiff::from_lines(&left, &right)
            .unified_diff()
            .context_radius(6)
            .header("direct", "through toolgate wrap")
            .to_string();
        panic!("the client observed something different through `toolgate wrap`:\n{diff}");
    }
}

/// All events of `kind` in a transcript.
pub fn events_of<'a>(transcript: &'a [Value], kind: &str) -> Vec<&'a Value> {
    transcript
        .iter()
        .filter_map(|entry| entry.get("events").and_then(Value::as_array))
        .flatten()
        .filter(|event| event.get("kind").and_then(Value::as_str) == Some(kind))
        .collect()
}

/// The result recorded for step `label`.
pub fn result_of<'a>(transcript: &'a [Value], label: &str) -> &'a Value {
    transcript
        .iter()
        .find(|entry| entry.get("step").and_then(Value::as_str) == Some(label))
        .and_then(|entry| entry.get("result"))
        .unwrap_or_else(|| panic!("no step `{label}` in transcript"))
}

/// All text content of a tool result, joined.
pub fn text_of(result: &Value) -> String {
    result
        .get("content")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Parameters for `tools/call`.
pub fn call(name: &str, arguments: Value) -> rmcp::model::CallToolRequestParams {
    model(json!({ "name": name, "arguments": arguments }))
}
