//! Enforcement: the interceptor that puts the policy engine in front of the relay.
//!
//! - `tools/call`: decided before anything reaches the server. Allow forwards the original
//!   bytes; deny answers with an `isError` tool result and never forwards; ask parks the
//!   call (other traffic keeps flowing), asks a human, then forwards or denies.
//! - `tools/list` results (every page) pin tool definitions; a changed definition asks.
//! - Results of `tools/call`, `resources/read` and `prompts/get` feed the taint index.
//! - `resources/read` is policed as fs.read (file://) or net.request (http(s)://).
//! - Every decision and result is audited; when the decision cannot be written, the call
//!   is denied. A result's record is written right after the result is delivered (off the
//!   latency path, before the next message is read); if that write fails it is logged, and
//!   the next decision, which must be written too, is denied. Any error on the decision
//!   path denies.

pub mod backend;
pub mod event;
mod listing;
mod recorder;
use recorder::Recorder;
pub mod reply;
pub mod setup;
pub mod share;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate_audit::{Approval, ApprovalHow, ApprovalScope, AuditWriter, Event, Kind as AuditKind};
use toolgate_mcp::{IdKey, Kind, RawValue, build};
use toolgate_policy::Effect;

use crate::approval::seal::{NonceLedger, Sealer, call_digest};
use crate::approval::{
    self, Answer, ApprovalChannel, ClientAbilities, Mode, Question, Route, elicitation_params,
    input_required_result, parse_elicitation_result,
};
use crate::proxy::{Direction, Interceptor, Message, ProxyHandle, StartFuture, Verdict};

pub use backend::{Backend, Call, EngineBackend, Ruling, Scope};
use reply::Blocked;

/// A request retried with toolgate's sealed `requestState`.
struct Retried<'a> {
    params: &'a Value,
    method: &'a str,
    retry: &'a approval::Retry,
}

/// Whether a `tools/call` waited for a listing of the server's tools (`listing.rs`).
#[derive(Debug, Clone, Copy)]
enum Listing<'a> {
    /// It just arrived: a tool not yet listed waits for a listing first.
    NotYet,
    /// It waited, and the listing pinned the server's tools.
    Done,
    /// It waited, and no listing came (why): the call fails closed.
    Failed(&'a str),
}

/// The method name (and audit "tool") of a resource read.
const RESOURCES_READ: &str = "resources/read";

/// The client methods enforcement intercepts: judged (`tools/call`, `resources/read`) or
/// watched for what their results teach it (`prompts/get` feeds the taint index, `tools/list`
/// pins definitions). None reaches the server without its verdict: never without an id (a
/// notification could not be answered, so it could not be judged), never under another
/// spelling a lenient server would take for it ([`toolgate_mcp::spelling::resembles`]).
pub const INTERCEPTED: [&str; 4] = ["tools/call", RESOURCES_READ, "prompts/get", "tools/list"];

/// The `params` members of an intercepted method that must be unambiguous: each at most
/// once, and none also spelled in another letter case (Go's `encoding/json` would read
/// `Name` as `name`).
fn params_read_by(method: &str) -> &'static [&'static str] {
    match method {
        "tools/call" => &[
            "name",
            "arguments",
            "_meta",
            "requestState",
            "inputResponses",
        ],
        RESOURCES_READ => &["uri", "_meta", "requestState", "inputResponses"],
        "prompts/get" => &["name", "arguments", "_meta"],
        _ => &[],
    }
}

/// A method as the messages and the log show it: escaped, so an invisible or control
/// character in it is seen.
fn shown(method: &str) -> String {
    method.escape_debug().to_string()
}

/// Told of every record as it is written (the gateway's metrics).
pub type Observer = Arc<dyn Fn(&Event) + Send + Sync>;

/// How the enforcer asks and audits.
pub struct Settings {
    /// The `--server` name.
    pub server: Option<String>,
    /// A remote server's URL, redacted (`wrap --url`).
    pub upstream: Option<String>,
    pub approval: Mode,
    pub approval_timeout: Duration,
    /// How long a call to a tool not yet listed waits for a listing of the server's tools
    /// (toolgate's own, or one in flight) before it fails closed.
    pub listing_timeout: Duration,
    /// The terminal channel (for `--approval tty|auto`), if any.
    pub tty: Option<Arc<dyn ApprovalChannel>>,
    /// The local broker as an approval channel, if any.
    pub broker: Option<Arc<dyn ApprovalChannel>>,
    /// The agent session shared with other proxies (the broker, the gateway's store),
    /// joined before the first message.
    pub shared_session: Option<Arc<dyn share::SessionShare>>,
    /// Index a result's taint (and write its record) before it is delivered, not after: the
    /// gateway, whose other replicas must see the taint before the client does.
    pub index_before_delivery: bool,
    /// Who made the calls (the gateway's authenticated user), written into every record.
    pub user: Option<String>,
    /// The gateway replica that wrote the record.
    pub replica: Option<String>,
    /// The key that seals `input_required` approval states [default: a random key of this
    /// process]. The gateway's replicas share theirs, so a retry may land on any of them.
    pub seal_key: Option<[u8; 32]>,
    /// Told of every decision as it is recorded (the gateway's metrics).
    pub observer: Option<Observer>,
    /// The audit log. `None` only in tests of the protocol mechanics.
    pub audit: Option<Arc<AuditWriter>>,
    /// Set when the audit log could not be opened: every call is denied with this reason.
    pub audit_error: Option<String>,
    /// Record raw arguments and results (`--audit-raw`).
    pub audit_raw: bool,
    /// Where accepted tool definitions persist across runs (a named server only).
    pub pins: Option<PinSink>,
    /// The session id written into audit records.
    pub session_id: String,
}

/// The persistent pin store of one server.
#[derive(Debug)]
pub struct PinSink {
    pub store: crate::pins::PinStore,
    pub server: String,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("server", &self.server)
            .field("approval", &self.approval)
            .field("approval_timeout", &self.approval_timeout)
            .field("audit_raw", &self.audit_raw)
            .finish_non_exhaustive()
    }
}

/// What a watched request was, to handle its response.
#[derive(Debug, Clone)]
enum Watched {
    /// A `tools/list` page; `first` when it had no cursor (a new listing starts).
    ToolsList {
        first: bool,
    },
    ToolCall {
        tool: String,
        request_id: String,
        fingerprint: Option<String>,
        started: Instant,
    },
    Resource {
        uri: String,
        request_id: String,
        started: Instant,
    },
    Prompt {
        name: String,
    },
}

#[derive(Debug, Default)]
struct Conversation {
    client: ClientAbilities,
    next_tag: u64,
    watched: HashMap<u64, Watched>,
    /// Parked calls awaiting a human: cancelling one withdraws its prompt.
    parked: HashMap<IdKey, tokio::sync::oneshot::Sender<()>>,
    nonces: NonceLedger,
    /// The pages of the `tools/list` listing in progress.
    listing: Vec<Value>,
    /// The server announced `notifications/tools/list_changed` and no complete listing
    /// has been seen since: no definition is known to be current.
    tools_stale: bool,
    /// Listings of the server's tools under way: the client's `tools/list` pages awaiting
    /// their response, and toolgate's own listing (see `listing.rs`).
    listings_in_flight: usize,
    /// Complete listings pinned so far (the client's and toolgate's own).
    complete_listings: u64,
}

struct Enforcement {
    backend: Mutex<Box<dyn Backend>>,
    state: Mutex<Conversation>,
    settings: Settings,
    sealer: Sealer,
    /// Result records waiting for [`Interceptor::after_delivery`].
    deferred: Mutex<Vec<Deferred>>,
    /// Hashes and records large results while they are indexed and delivered.
    recorder: Recorder,
    /// Results received but not yet in the taint index.
    pending_taint: Mutex<Vec<TaintLater>>,
    /// The last complete one-page `tools/list` result and the tools it hid: a
    /// byte-identical repeat pins nothing new, so it is not pinned again. Cleared when an
    /// approval may have changed a pin.
    last_listing: Mutex<Option<(SameBytes, Vec<String>)>>,
    /// Bumped whenever a listing ends or a complete one is pinned: wakes the calls that
    /// wait for a listing (`listing.rs`).
    listing_events: tokio::sync::watch::Sender<u64>,
}

/// A record kept off the latency path.
enum Deferred {
    /// A result's (its hash is computed when it is written; large results go to the
    /// [`recorder`] thread instead), or any record already built.
    Record {
        event: Event,
        result: Option<ResultText>,
    },
    /// A denial's, built when it is written: the client has its answer by then.
    Denial(Denial),
}

/// What the record of a denied call is built from.
struct Denial {
    request_id: String,
    tool: String,
    arguments: Value,
    ruling: Ruling,
}

/// A result's JSON text, exactly as the server sent it: shared by its audit record and the
/// taint index, both done after the result is delivered (nothing parses it before).
#[derive(Clone)]
struct ResultText {
    /// A part of the frame it came in (not a copy).
    text: Bytes,
    /// A `tools/call` result: its record's `isError` is read from the text.
    tool_call: bool,
}

/// The `isError` of a `tools/call` result's JSON text: its (last) top-level `isError` if
/// that is a boolean, else false. Other members are skipped, not built.
fn is_error_of(result: &[u8]) -> bool {
    struct Flag(Option<bool>);
    impl<'de> serde::Deserialize<'de> for Flag {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Flag, D::Error> {
            struct Members;
            impl<'de> serde::de::Visitor<'de> for Members {
                type Value = Flag;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a result object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Flag, A::Error> {
                    let mut flag = None;
                    while let Some(name) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                        if name == "isError" {
                            flag = map.next_value::<Value>()?.as_bool();
                        } else {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                    Ok(Flag(flag))
                }
            }
            d.deserialize_map(Members)
        }
    }
    serde_json::from_slice::<Flag>(result)
        .ok()
        .and_then(|f| f.0)
        .unwrap_or(false)
}

/// What recognises a repeat of some bytes: the bytes themselves (a comparison runs at
/// memory speed), or their SHA-256 when they are too large to keep.
enum SameBytes {
    Bytes(Box<[u8]>),
    Digest([u8; 32]),
}

impl SameBytes {
    /// Up to this size the bytes are kept (a 1,000-tool listing is about 0.9 MB).
    const KEEP: usize = 4 << 20;

    fn of(bytes: &[u8]) -> SameBytes {
        if bytes.len() <= Self::KEEP {
            SameBytes::Bytes(bytes.into())
        } else {
            SameBytes::Digest(Sha256::digest(bytes).into())
        }
    }

    fn matches(&self, bytes: &[u8]) -> bool {
        match self {
            SameBytes::Bytes(kept) => **kept == *bytes,
            SameBytes::Digest(digest) => {
                bytes.len() > Self::KEEP && *digest == <[u8; 32]>::from(Sha256::digest(bytes))
            }
        }
    }
}

/// How a result feeds the taint index.
#[derive(Debug, Clone, Copy)]
enum TaintAs {
    ToolResult,
    Resource,
    Prompt,
}

/// A result whose tokens go into the taint index before anything else is decided (see
/// [`Enforcement::feed_taint`]).
struct TaintLater {
    tool: String,
    kind: TaintAs,
    /// The result's JSON text.
    result: Bytes,
}

impl Enforcement {
    /// Fills in what every record of this proxy carries: the session and the server.
    fn stamp(&self, event: &mut Event) {
        event.session = Some(self.settings.session_id.clone());
        if event.user.is_none() {
            event.user = self.settings.user.clone();
        }
        if event.replica.is_none() {
            event.replica = self.settings.replica.clone();
        }
        if let Some(observe) = &self.settings.observer {
            observe(event);
        }
        if event.server.is_none() {
            event.server = self.settings.server.clone();
        }
        if event.upstream.is_none() {
            event.upstream = self.settings.upstream.clone();
        }
    }

    /// Writes one audit record; `Err` means the call must be denied.
    fn write_event(&self, mut event: Event) -> Result<(), String> {
        if let Some(why) = &self.settings.audit_error {
            return Err(why.clone());
        }
        let Some(writer) = &self.settings.audit else {
            return Ok(());
        };
        self.stamp(&mut event);
        writer.append(&event).map(|_| ()).map_err(|e| {
            format!("the audit log cannot be written ({e}); toolgate denies calls it cannot record")
        })
    }

    /// Writes several records in one append; `Err` means none of them was written.
    fn write_events(&self, events: &mut [Event]) -> Result<(), String> {
        if let Some(why) = &self.settings.audit_error {
            return Err(why.clone());
        }
        let Some(writer) = &self.settings.audit else {
            return Ok(());
        };
        for event in events.iter_mut() {
            self.stamp(event);
        }
        writer.append_all(events).map(|_| ()).map_err(|e| {
            format!("the audit log cannot be written ({e}); toolgate denies calls it cannot record")
        })
    }

    /// Feeds the results received so far into the taint index, oldest first.
    ///
    /// A result is indexed right after it is delivered, off its own latency path, and in
    /// any case before toolgate decides anything the client sends after it: the relay runs
    /// on one thread and calls [`Interceptor::after_delivery`] before it reads the next
    /// frame, and [`Enforcer::on_client_message`] feeds whatever is still pending first.
    fn feed_taint(&self) {
        let pending = std::mem::take(&mut *lock(&self.pending_taint));
        if pending.is_empty() {
            return;
        }
        let server = self.settings.server.as_deref();
        let mut backend = lock(&self.backend);
        for TaintLater { tool, kind, result } in pending {
            // The text is JSON (its frame was parsed), but a value serde_json cannot hold
            // (a number like `1e400`) must not keep the output out of the taint index:
            // then every token of the whole text is recorded, as for a text result.
            let (result, kind) = match serde_json::from_slice::<Value>(&result) {
                Ok(value) => (value, kind),
                Err(_) => (
                    Value::String(String::from_utf8_lossy(&result).into_owned()),
                    TaintAs::ToolResult,
                ),
            };
            match kind {
                TaintAs::ToolResult => backend.record_output(server, &tool, &result),
                TaintAs::Resource => {
                    backend.record_output(server, &tool, &resource_as_tool_result(&result));
                }
                TaintAs::Prompt => {
                    backend.record_output(server, &tool, &prompt_as_tool_result(&result));
                }
            }
        }
    }

    /// The record of a decision (`reason` is the ruling's).
    fn decision_event(
        &self,
        request_id: &str,
        call: &Call<'_>,
        ruling: &Ruling,
        effect: Effect,
    ) -> Event {
        let mut e = event::decision_event(
            call.tool,
            call.arguments,
            ruling.decision.as_ref().map(|d| &d.action),
            effect,
            &ruling.contract,
            ruling.rule.clone(),
            &ruling.reason,
        );
        e.request_id = Some(request_id.to_owned());
        e.fingerprint = ruling.fingerprint.clone();
        if self.settings.audit_raw {
            e.raw = Some(toolgate_audit::Raw {
                arguments: Some(call.arguments.clone()),
                result: None,
            });
        }
        e
    }

    /// Writes the deferred records, oldest first, in one append.
    fn write_deferred(&self) {
        let pending = std::mem::take(&mut *lock(&self.deferred));
        if pending.is_empty() || self.settings.audit.is_none() {
            return;
        }
        let mut events: Vec<Event> = pending
            .into_iter()
            .map(|deferred| match deferred {
                Deferred::Record { mut event, result } => {
                    if let Some(result) = &result {
                        add_result(&mut event, result, self.settings.audit_raw);
                    }
                    event
                }
                Deferred::Denial(denial) => {
                    let Denial {
                        request_id,
                        tool,
                        arguments,
                        ruling,
                    } = denial;
                    let call = Call {
                        server: self.settings.server.as_deref(),
                        tool: &tool,
                        arguments: &arguments,
                    };
                    self.decision_event(&request_id, &call, &ruling, Effect::Deny)
                }
            })
            .collect();
        if let Err(why) = self.write_events(&mut events) {
            for event in &events {
                tracing::warn!(
                    "{} `{}` (request {}) reached the client but was not audited: {why}",
                    match event.kind {
                        AuditKind::Decision => "the denial of",
                        _ => "the result of",
                    },
                    event.tool.as_deref().unwrap_or("?"),
                    event.request_id.as_deref().unwrap_or("?")
                );
            }
        }
    }
}

impl Drop for Enforcement {
    fn drop(&mut self) {
        self.write_deferred();
        self.recorder.finish();
    }
}

/// The enforcing interceptor.
#[derive(Clone)]
pub struct Enforcer {
    inner: Arc<Enforcement>,
}

impl std::fmt::Debug for Enforcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enforcer")
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

use crate::clock::now_ms;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Hex SHA-256 of the RFC 8785 canonical JSON of a value (a parsed value always has a
/// canonical form; the empty-input hash stands in should that ever fail).
pub fn canonical_sha256(value: &Value) -> String {
    toolgate_audit::canonical_sha256(value).unwrap_or_else(|_| hex::encode(Sha256::digest(b"")))
}

/// Completes a result record off the latency path: the canonical SHA-256 of the result,
/// computed from the JSON text the server sent (no value tree; the same hash as
/// [`canonical_sha256`] of its value), the `isError` of a `tools/call` result, and with
/// `--audit-raw` the result itself.
fn add_result(event: &mut Event, result: &ResultText, keep_raw: bool) {
    let ResultText {
        text: result,
        tool_call,
    } = result;
    if *tool_call {
        event.is_error = Some(is_error_of(result));
    }
    event.result_sha256 = Some(
        toolgate_audit::canonical_sha256_of_json(result)
            .unwrap_or_else(|_| hex::encode(Sha256::digest(b""))),
    );
    if keep_raw {
        event.raw = Some(toolgate_audit::Raw {
            arguments: None,
            result: serde_json::from_slice(result).ok(),
        });
    }
}

/// `part` (a slice of `frame`'s bytes) as a share of `frame`; a copy should it lie
/// elsewhere.
fn part_of(frame: &Bytes, part: &[u8]) -> Bytes {
    let start = (part.as_ptr() as usize).wrapping_sub(frame.as_ptr() as usize);
    match start.checked_add(part.len()) {
        Some(end) if start <= frame.len() && end <= frame.len() => frame.slice(start..end),
        _ => Bytes::copy_from_slice(part),
    }
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}

fn raw_value(v: &Value) -> Option<Box<RawValue>> {
    serde_json::value::to_raw_value(v).ok()
}

fn result_bytes(id: &RawValue, result: &Value) -> Vec<u8> {
    match raw_value(result) {
        Some(raw) => build::result_response(id, &raw),
        None => build::tool_error_result(id, "toolgate blocked this call: internal error"),
    }
}

impl Enforcer {
    /// An enforcer over a policy backend. Fails only when the OS gives no randomness.
    pub fn new(backend: Box<dyn Backend>, settings: Settings) -> anyhow::Result<Enforcer> {
        let sealer = match settings.seal_key {
            Some(key) => Sealer::with_key(key),
            None => Sealer::random()?,
        };
        Ok(Enforcer {
            inner: Arc::new(Enforcement {
                backend: Mutex::new(backend),
                state: Mutex::new(Conversation::default()),
                settings,
                sealer,
                deferred: Mutex::new(Vec::new()),
                recorder: Recorder::default(),
                pending_taint: Mutex::new(Vec::new()),
                last_listing: Mutex::new(None),
                listing_events: tokio::sync::watch::channel(0).0,
            }),
        })
    }

    /// Whether `tool`'s contract has a budget (see [`Backend::budget_of`]): what the gateway
    /// asks its store to count before the call is decided.
    pub fn budget_of(&self, tool: &str) -> Option<Option<(u64, u64)>> {
        lock(&self.inner.backend).budget_of(tool)
    }

    /// Denies a `tools/call` that cannot be decided because what it must be decided on is
    /// unavailable (the gateway's store): the reply, and its record written first.
    pub fn deny_undecidable(
        &self,
        id: &RawValue,
        params: Option<&RawValue>,
        contract: &str,
        reason: &str,
    ) -> Vec<u8> {
        let parsed: Value = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let tool = parsed
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("tools/call");
        let arguments = parsed
            .get("arguments")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let call = Call {
            server: self.server(),
            tool,
            arguments: &arguments,
        };
        let mut ruling = Ruling::error(tool, reason);
        ruling.contract = contract.to_owned();
        match self.finish_deny(id, id.get(), &call, &ruling, None) {
            Verdict::Reply(bytes) => bytes,
            _ => build::tool_error_result(id, &format!("toolgate blocked this call: {reason}")),
        }
    }

    /// Saves the accepted definitions; a failure is logged (the next run re-pins as new).
    fn persist_pins(&self) {
        if let Some(shared) = &self.inner.settings.shared_session {
            shared.pins_accepted(&lock(&self.inner.backend).pins_to_persist());
        }
        let Some(pins) = &self.inner.settings.pins else {
            return;
        };
        let accepted = lock(&self.inner.backend).pins_to_persist();
        if let Err(e) = pins.store.pin_definitions(&pins.server, accepted.values()) {
            tracing::warn!("cannot save the pins of `{}`: {e}", pins.server);
        }
    }

    fn server(&self) -> Option<&str> {
        self.inner.settings.server.as_deref()
    }

    /// Writes one audit record (after any deferred ones, so the log keeps the order of
    /// events); `Err` means the call must be denied.
    fn audit(&self, event: Event) -> Result<(), String> {
        self.inner.write_deferred();
        self.inner.write_event(event)
    }

    /// Writes several records at once (one lock, one write): e.g. the pins of a listing.
    fn audit_all(&self, mut events: Vec<Event>) -> Result<(), String> {
        if events.is_empty() {
            return Ok(());
        }
        self.inner.write_deferred();
        self.inner.write_events(&mut events)
    }

    /// Queues a record; written by [`Interceptor::after_delivery`] (or before any later
    /// record, whichever comes first).
    fn defer(&self, event: Event, result: Option<ResultText>) {
        lock(&self.inner.deferred).push(Deferred::Record { event, result });
    }

    /// Starts the record of a result (its JSON text as the server sent it): a large one
    /// goes to the recorder thread at once (it hashes while the result is delivered and
    /// indexed), a small one is written after delivery.
    fn record_result(&self, mut event: Event, result: ResultText) {
        let large = result.text.len() >= recorder::LARGE_RESULT;
        let settings = &self.inner.settings;
        if let Some(writer) = &settings.audit
            && large
            && settings.audit_error.is_none()
        {
            self.inner.stamp(&mut event);
            let job = Box::new(recorder::Job {
                event,
                result,
                raw: settings.audit_raw,
                writer: Arc::clone(writer),
            });
            match self.inner.recorder.submit(job) {
                Ok(()) => return,
                // No thread, or its queue is full: written after delivery like any other.
                Err(job) => {
                    let recorder::Job { event, result, .. } = *job;
                    self.defer(event, Some(result));
                    return;
                }
            }
        }
        self.defer(event, Some(result));
    }

    /// Queues a result for the taint index (see [`Enforcement::feed_taint`]).
    fn taint_later(&self, tool: String, kind: TaintAs, result: Bytes) {
        lock(&self.inner.pending_taint).push(TaintLater { tool, kind, result });
    }

    fn watch(&self, w: Watched) -> u64 {
        let mut st = lock(&self.inner.state);
        st.next_tag = st.next_tag.wrapping_add(1);
        let tag = st.next_tag;
        st.watched.insert(tag, w);
        tag
    }

    /// A deny reply for a request, audited. If even the audit fails, the deny stands.
    fn deny_reply(
        &self,
        id: &RawValue,
        tool: &str,
        reason: &str,
        contract: &str,
        rule: Option<&str>,
    ) -> Verdict {
        if tool == RESOURCES_READ {
            // Not a tool call: a JSON-RPC error is the only denial a client understands.
            let message = format!("toolgate blocked resources/read: {reason}");
            return Verdict::Reply(build::error_response(
                Some(id),
                toolgate_mcp::INVALID_REQUEST,
                &message,
            ));
        }
        let blocked = Blocked {
            tool,
            reason,
            contract,
            rule,
        };
        Verdict::Reply(blocked.response(id))
    }

    fn on_tools_call(
        &self,
        id: &RawValue,
        params: Option<&RawValue>,
        proxy: &ProxyHandle,
    ) -> Verdict {
        self.decide_tools_call(id, params, proxy, Listing::NotYet)
    }

    /// Decides a `tools/call`; `listing`: whether it already waited for a listing of the
    /// server's tools, and how that went.
    fn decide_tools_call(
        &self,
        id: &RawValue,
        raw_params: Option<&RawValue>,
        proxy: &ProxyHandle,
        listing: Listing<'_>,
    ) -> Verdict {
        let started = Instant::now();
        let request_id = id.get().to_owned();
        let parsed: Option<Value> = raw_params.and_then(|p| serde_json::from_str(p.get()).ok());
        let Some(params) = parsed else {
            return self.deny_reply(
                id,
                "tools/call",
                "the request has no readable params",
                "error",
                None,
            );
        };
        let Some(tool) = params
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return self.deny_reply(id, "tools/call", "the request names no tool", "error", None);
        };
        let arguments = params
            .get("arguments")
            .cloned()
            .unwrap_or_else(|| json!({}));
        if !arguments.is_object() {
            return self.deny_reply(id, &tool, "`arguments` is not an object", "error", None);
        }
        // A 2026-07-28 client announces itself per request.
        if let Some(abilities) = ClientAbilities::from_request_meta(&params) {
            lock(&self.inner.state).client = abilities;
        }
        // Another proxy of the agent session saw the server's tools change (a gateway
        // replica): this session's listing is no longer trusted until it lists again.
        if lock(&self.inner.backend).tools_changed_elsewhere() {
            lock(&self.inner.state).tools_stale = true;
        }
        // A tool the session has not listed yet is decided on the server's definition:
        // the call waits (parked) for a listing, toolgate's own if none is under way.
        let listing_failed = match listing {
            Listing::NotYet => {
                if let Some(raw) = raw_params
                    && let Some(parked) = self.list_before_deciding(id, raw, &params, &tool, proxy)
                {
                    return parked;
                }
                None
            }
            Listing::Done => None,
            Listing::Failed(why) => Some(why),
        };
        let call = Call {
            server: self.server(),
            tool: &tool,
            arguments: &arguments,
        };
        let mut ruling = lock(&self.inner.backend).decide(&call, now_ms());
        if let Some(why) = listing_failed
            && ruling.effect != Effect::Deny
            && !lock(&self.inner.backend).listed(&tool)
        {
            ruling.effect = Effect::Ask;
            ruling.contract = "pinning".to_owned();
            ruling.rule = None;
            ruling.reason = format!(
                "`{tool}` is not pinned: toolgate could not list the server's tools to read its definition ({why})"
            );
            ruling.prompt = lock(&self.inner.backend).prompt(&call, &ruling);
            ruling.prompt.why = ruling.reason.clone();
        }
        if ruling.effect == Effect::Allow && lock(&self.inner.state).tools_stale {
            ruling.effect = Effect::Ask;
            ruling.contract = "pinning".to_owned();
            ruling.rule = None;
            ruling.reason = format!(
                "the server announced that its tools changed (`notifications/tools/list_changed`) and they were not listed again, so the definition of `{tool}` is unknown"
            );
            ruling.prompt = lock(&self.inner.backend).prompt(&call, &ruling);
            ruling.prompt.why = ruling.reason.clone();
        }
        let retry = approval::retry_of(&params);
        let on_allow = Watched::ToolCall {
            tool: tool.clone(),
            request_id: request_id.clone(),
            fingerprint: ruling.fingerprint.clone(),
            started,
        };
        match (ruling.effect, retry) {
            (Effect::Deny, _) => self.deny_as_it_arrives(id, request_id, tool, arguments, ruling),
            (Effect::Allow, retry) => {
                if let Err(why) = self.audit(self.inner.decision_event(
                    &request_id,
                    &call,
                    &ruling,
                    Effect::Allow,
                )) {
                    return self.deny_reply(id, &tool, &why, "audit", None);
                }
                match retry {
                    // toolgate's own retry fields never reach the server; its result is
                    // audited and taint-fed like any other.
                    Some(_) => self.forward_stripped(id, "tools/call", &params, on_allow),
                    None => Verdict::Watch(self.watch(on_allow)),
                }
            }
            (Effect::Ask, Some(retry)) => self.on_retry(
                id,
                &request_id,
                &call,
                &ruling,
                Retried {
                    params: &params,
                    method: "tools/call",
                    retry: &retry,
                },
                on_allow,
            ),
            (Effect::Ask, None) => self.ask(id, &request_id, &call, ruling, on_allow, proxy),
        }
    }

    /// Forwards a verified retry without toolgate's own fields, watching its response.
    fn forward_stripped(
        &self,
        id: &RawValue,
        method: &str,
        params: &Value,
        on_allow: Watched,
    ) -> Verdict {
        let stripped = approval::strip_retry(params);
        let Some(params) = raw_value(&stripped) else {
            return Verdict::Reply(build::tool_error_result(
                id,
                "toolgate blocked this call: internal error",
            ));
        };
        // The id is echoed byte for byte (an id such as 18446744073709551615 stays exact).
        let frame = build::request_raw_id(id, method, Some(&params));
        Verdict::ReplaceWatch(frame, self.watch(on_allow))
    }

    /// A call the policy denies as it arrives: answered at once, its record built (the
    /// arguments' hash included) and written right after the answer is delivered ([`Interceptor::after_delivery`], before anything else
    /// is decided). Nothing waits for that record, because an audit failure cannot make a
    /// deny less of a deny: it is logged, and the next call that must be recorded is denied
    /// for it. A log that could not be opened at all is named in the answer, as always.
    fn deny_as_it_arrives(
        &self,
        id: &RawValue,
        request_id: String,
        tool: String,
        arguments: Value,
        ruling: Ruling,
    ) -> Verdict {
        if self.inner.settings.audit_error.is_some() {
            let call = Call {
                server: self.server(),
                tool: &tool,
                arguments: &arguments,
            };
            return self.finish_deny(id, &request_id, &call, &ruling, None);
        }
        let reply = self.deny_reply(
            id,
            &tool,
            &ruling.reason,
            &ruling.contract,
            ruling.rule.as_deref(),
        );
        lock(&self.inner.deferred).push(Deferred::Denial(Denial {
            request_id,
            tool,
            arguments,
            ruling,
        }));
        reply
    }

    fn finish_deny(
        &self,
        id: &RawValue,
        request_id: &str,
        call: &Call<'_>,
        ruling: &Ruling,
        extra: Option<&str>,
    ) -> Verdict {
        let mut ev = self
            .inner
            .decision_event(request_id, call, ruling, Effect::Deny);
        let reason = match extra {
            Some(x) => format!("{}; {x}", ruling.reason),
            None => ruling.reason.clone(),
        };
        ev.reason = Some(reason.clone());
        // An audit failure cannot make a deny less of a deny; it is reported in the text.
        let reason = match self.audit(ev) {
            Ok(()) => reason,
            Err(why) => format!("{reason} (and {why})"),
        };
        self.deny_reply(
            id,
            call.tool,
            &reason,
            &ruling.contract,
            ruling.rule.as_deref(),
        )
    }

    fn on_retry(
        &self,
        id: &RawValue,
        request_id: &str,
        call: &Call<'_>,
        ruling: &Ruling,
        Retried {
            params,
            method,
            retry,
        }: Retried<'_>,
        on_allow: Watched,
    ) -> Verdict {
        let now = now_ms();
        let digest = call_digest(call.server, call.tool, call.arguments);
        let opened = self
            .inner
            .sealer
            .open(&retry.request_state, &digest, now)
            .and_then(|state| {
                lock(&self.inner.state).nonces.redeem(&state, now)?;
                Ok(state)
            });
        if let Err(why) = opened {
            return self.finish_deny(
                id,
                request_id,
                call,
                ruling,
                Some(&format!("the approval was refused: {why}")),
            );
        }
        let answer = retry
            .response
            .as_ref()
            .map(parse_elicitation_result)
            .unwrap_or_else(|| Answer::Deny("the retry carried no answer".to_owned()));
        match self.conclude(
            call,
            ruling,
            request_id,
            &answer,
            ApprovalHow::InputRequired,
        ) {
            Ok(()) => self.forward_stripped(id, method, params, on_allow),
            Err(why) => self.finish_deny(id, request_id, call, ruling, Some(&why)),
        }
    }

    /// Records the human's answer; `Ok` means forward, `Err(reason)` deny.
    fn conclude(
        &self,
        call: &Call<'_>,
        ruling: &Ruling,
        request_id: &str,
        answer: &Answer,
        how: ApprovalHow,
    ) -> Result<(), String> {
        let scope = match answer {
            Answer::AllowOnce => Scope::Once,
            Answer::AllowSession => Scope::Session,
            Answer::Deny(why) => return Err(why.clone()),
        };
        lock(&self.inner.backend).approve(call, ruling, scope);
        *lock(&self.inner.last_listing) = None;
        if scope == Scope::Session && ruling.contract == "pinning" {
            self.persist_pins();
        }
        let mut ev = self
            .inner
            .decision_event(request_id, call, ruling, Effect::Allow);
        ev.kind = AuditKind::Approval;
        ev.approval = Some(Approval {
            how,
            scope: match scope {
                Scope::Once => ApprovalScope::Once,
                Scope::Session => ApprovalScope::Session,
            },
        });
        self.audit(ev)
    }

    fn ask(
        &self,
        id: &RawValue,
        request_id: &str,
        call: &Call<'_>,
        ruling: Ruling,
        on_allow: Watched,
        proxy: &ProxyHandle,
    ) -> Verdict {
        let settings = &self.inner.settings;
        let client = lock(&self.inner.state).client;
        let broker = settings.broker.as_ref().filter(|b| b.available()).cloned();
        let tty = settings.tty.as_ref().filter(|t| t.available()).cloned();
        let route = match approval::choose_route(
            settings.approval,
            client,
            broker.is_some(),
            tty.is_some(),
        ) {
            Ok(route) => route,
            Err(no_way) => return self.finish_deny(id, request_id, call, &ruling, Some(&no_way)),
        };
        let mut asked = self
            .inner
            .decision_event(request_id, call, &ruling, Effect::Ask);
        asked.reason = Some(format!("{} (asking via {route:?})", ruling.reason));
        if let Err(why) = self.audit(asked) {
            return self.deny_reply(id, call.tool, &why, "audit", None);
        }
        if route == Route::InputRequired {
            let state = match self.inner.sealer.seal(
                &call_digest(call.server, call.tool, call.arguments),
                approval::INPUT_KEY,
                now_ms(),
                u64::try_from(settings.approval_timeout.as_millis()).unwrap_or(u64::MAX),
            ) {
                Ok(s) => s,
                Err(why) => {
                    return self.finish_deny(id, request_id, call, &ruling, Some(&why.to_string()));
                }
            };
            return Verdict::Reply(result_bytes(
                id,
                &input_required_result(&ruling.prompt, &state),
            ));
        }
        let Some(key) = IdKey::from_raw(id) else {
            return self.finish_deny(
                id,
                request_id,
                call,
                &ruling,
                Some("the request id is unusable"),
            );
        };
        let (cancel_tx, cancel_rx) = tokio::sync::oneshot::channel();
        lock(&self.inner.state)
            .parked
            .insert(key.clone(), cancel_tx);
        let this = self.clone();
        let proxy = proxy.clone();
        let id: Box<RawValue> = id.to_owned();
        let request_id = request_id.to_owned();
        let tool = call.tool.to_owned();
        let arguments = call.arguments.clone();
        let timeout = settings.approval_timeout;
        // The id of the `elicitation/create` toolgate sends, so it can be withdrawn.
        let elicitation_id = proxy.new_origin_id();
        let channel = match route {
            Route::Broker => broker,
            Route::Tty => tty,
            _ => None,
        };
        Verdict::Park(Box::pin(async move {
            let how = match route {
                Route::Broker => ApprovalHow::Broker,
                Route::Tty => ApprovalHow::Tty,
                _ => ApprovalHow::Client,
            };
            let asking = async {
                match &channel {
                    Some(chan) => {
                        tracing::debug!("asking on the {} channel", chan.name());
                        chan.ask(&ruling.prompt, timeout).await
                    }
                    None => ask_client(&proxy, &elicitation_id, &ruling.prompt, timeout).await,
                }
            };
            let outcome = tokio::select! {
                answer = asking => Some(answer),
                _ = cancel_rx => None,
            };
            lock(&this.inner.state).parked.remove(&key);
            if channel.is_none() {
                // A prompt nobody waits for any more (cancelled, timed out) is withdrawn from
                // the client; after an answer it is no longer outstanding and nothing is sent.
                let why = match &outcome {
                    None => "the call awaiting this approval was cancelled",
                    Some(_) => "toolgate no longer waits for this answer",
                };
                proxy.withdraw_client_request(&elicitation_id, why).await;
            }
            let call = Call {
                server: this.server(),
                tool: &tool,
                arguments: &arguments,
            };
            let Some(answer) = outcome else {
                let mut ev = this
                    .inner
                    .decision_event(&request_id, &call, &ruling, Effect::Deny);
                ev.kind = AuditKind::Cancelled;
                ev.reason =
                    Some("the client cancelled the call while it awaited approval".to_owned());
                let _ = this.audit(ev);
                // A cancelled request gets no response (MCP: the receiver stops processing
                // and sends nothing); the relay forgets it.
                return Verdict::Withdraw;
            };
            match this.conclude(&call, &ruling, &request_id, &answer, how) {
                Ok(()) => Verdict::Watch(this.watch(on_allow)),
                Err(why) => this.finish_deny(&id, &request_id, &call, &ruling, Some(&why)),
            }
        }))
    }

    fn on_resources_read(
        &self,
        id: &RawValue,
        params: Option<&RawValue>,
        proxy: &ProxyHandle,
    ) -> Verdict {
        let started = Instant::now();
        let request_id = id.get().to_owned();
        let params: Option<Value> = params.and_then(|p| serde_json::from_str(p.get()).ok());
        let uri = params
            .as_ref()
            .and_then(|p| p.get("uri").and_then(Value::as_str).map(str::to_owned));
        let (Some(params), Some(uri)) = (params, uri) else {
            return Verdict::Reply(build::error_response(
                Some(id),
                toolgate_mcp::INVALID_PARAMS,
                "resources/read needs a `uri`",
            ));
        };
        if let Some(abilities) = ClientAbilities::from_request_meta(&params) {
            lock(&self.inner.state).client = abilities;
        }
        let ruling = lock(&self.inner.backend).decide_resource(self.server(), &uri, now_ms());
        let args = json!({ "uri": uri });
        let call = Call {
            server: self.server(),
            tool: RESOURCES_READ,
            arguments: &args,
        };
        let on_allow = Watched::Resource {
            uri: uri.clone(),
            request_id: request_id.clone(),
            started,
        };
        let retry = approval::retry_of(&params);
        match (ruling.effect, retry) {
            (Effect::Deny, _) => {
                self.deny_as_it_arrives(id, request_id, RESOURCES_READ.to_owned(), args, ruling)
            }
            (Effect::Allow, retry) => {
                if let Err(why) = self.audit(self.inner.decision_event(
                    &request_id,
                    &call,
                    &ruling,
                    Effect::Allow,
                )) {
                    return self.deny_reply(id, RESOURCES_READ, &why, "audit", None);
                }
                match retry {
                    Some(_) => self.forward_stripped(id, RESOURCES_READ, &params, on_allow),
                    None => Verdict::Watch(self.watch(on_allow)),
                }
            }
            // A resource read that is asked about is asked through the same channels as
            // a tool call (elicitation, input_required, broker, terminal).
            (Effect::Ask, Some(retry)) => self.on_retry(
                id,
                &request_id,
                &call,
                &ruling,
                Retried {
                    params: &params,
                    method: RESOURCES_READ,
                    retry: &retry,
                },
                on_allow,
            ),
            (Effect::Ask, None) => self.ask(id, &request_id, &call, ruling, on_allow, proxy),
        }
    }

    /// A `tools/list` page: pins every tool (the full page), then hides the tools the
    /// policy forbids outright from the client.
    fn on_tools_list(&self, first: bool, result: &RawValue, frame: &[u8]) -> Verdict {
        /// The part of a `tools/list` result pinning reads; other fields are skipped.
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            tools: Vec<Value>,
            #[serde(default, rename = "nextCursor")]
            next_cursor: Option<Value>,
        }
        if first {
            let repeat = lock(&self.inner.last_listing)
                .as_ref()
                .filter(|(last, _)| last.matches(result.get().as_bytes()))
                .map(|(_, hidden)| hidden.clone());
            if let Some(hidden) = repeat {
                // The same bytes as the last complete listing: every definition equals the
                // one pinned from it (or its pending change), so pinning would change
                // nothing; only the announcement of a change is answered.
                {
                    let mut st = lock(&self.inner.state);
                    st.tools_stale = false;
                    st.complete_listings += 1;
                }
                let hidden: Vec<&str> = hidden.iter().map(String::as_str).collect();
                return hide_tools(frame, &hidden);
            }
        }
        let Ok(page) = serde_json::from_str::<Page>(result.get()) else {
            // Nothing is pinned: calls to these tools ask (or are denied) as unlisted.
            tracing::warn!("tools/list result not understood: nothing pinned from it");
            return Verdict::Forward;
        };
        let complete = page.next_cursor.as_ref().is_none_or(Value::is_null);
        let names: Vec<String> = page
            .tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect();
        let one_page = first && complete;
        let listing = {
            let mut st = lock(&self.inner.state);
            if first {
                st.listing.clear();
            }
            if complete {
                st.complete_listings += 1;
            }
            if complete && st.listing.is_empty() {
                // A listing of one page (the common case): pinned as it is, no copy.
                st.tools_stale = false;
                page.tools
            } else {
                // Bounded: a listing longer than this is pinned page by page.
                if st.listing.len() < 100_000 {
                    st.listing.extend(page.tools);
                }
                if complete {
                    st.tools_stale = false;
                    std::mem::take(&mut st.listing)
                } else {
                    st.listing.clone()
                }
            }
        };
        self.pin_listing(listing, complete);
        // Pinned from the full page above; the client sees it without the tools the
        // policy forbids outright.
        let hidden: Vec<&str> = {
            let mut backend = lock(&self.inner.backend);
            names
                .iter()
                .map(String::as_str)
                .filter(|name| backend.forbidden_outright(name))
                .collect()
        };
        *lock(&self.inner.last_listing) = one_page.then(|| {
            (
                SameBytes::of(result.get().as_bytes()),
                hidden.iter().map(|&h| h.to_owned()).collect(),
            )
        });
        hide_tools(frame, &hidden)
    }

    /// Pins a listing (the client's or toolgate's own), persists what changed once it is
    /// complete, and audits every new or changed definition.
    fn pin_listing(&self, listing: Vec<Value>, complete: bool) {
        let changes = lock(&self.inner.backend).pin_tools(listing, complete);
        // Only new or changed accepted definitions need saving (a repeated listing
        // changes nothing on disk).
        if complete && !(changes.added.is_empty() && changes.changed.is_empty()) {
            self.persist_pins();
        }
        let mut events = Vec::with_capacity(changes.changed.len() + changes.added.len());
        for (tool, what) in &changes.changed {
            let mut ev = Event::new(AuditKind::Pin);
            ev.tool = Some(tool.clone());
            ev.reason = Some(format!("definition changed: {}", what.join(", ")));
            events.push(ev);
        }
        for tool in &changes.added {
            let mut ev = Event::new(AuditKind::Pin);
            ev.tool = Some(tool.clone());
            ev.reason = Some("pinned".to_owned());
            events.push(ev);
        }
        if let Err(why) = self.audit_all(events) {
            tracing::warn!("pins not audited: {why}");
        }
    }

    fn on_response(&self, tag: u64, message: &Message<'_>) -> Verdict {
        let Some(watched) = lock(&self.inner.state).watched.remove(&tag) else {
            return Verdict::Forward;
        };
        if let Watched::ToolsList { first } = watched {
            let verdict = match message.envelope.result {
                Some(result) => self.on_tools_list(first, result, message.raw),
                None => Verdict::Forward,
            };
            self.listing_ended(false);
            return verdict;
        }
        let Some(result_raw) = message.envelope.result else {
            // An error response: nothing to learn; audit tool-call errors.
            if let Watched::ToolCall {
                tool,
                request_id,
                fingerprint,
                started,
            } = watched
            {
                let mut ev = Event::new(AuditKind::Result);
                ev.request_id = Some(request_id);
                ev.tool = Some(tool);
                ev.fingerprint = fingerprint;
                ev.is_error = Some(true);
                ev.latency_us = Some(micros(started));
                self.defer(ev, None);
            }
            return Verdict::Forward;
        };
        // Nothing reads the result before it is delivered: its record (hash, `isError`)
        // and its taint are computed from the text afterwards, which stays where it came
        // (in the frame, shared, not copied).
        let text = part_of(message.frame, result_raw.get().as_bytes());
        match watched {
            // Handled above.
            Watched::ToolsList { .. } => Verdict::Forward,
            Watched::ToolCall {
                tool,
                request_id,
                fingerprint,
                started,
            } => {
                let mut ev = Event::new(AuditKind::Result);
                ev.request_id = Some(request_id);
                ev.tool = Some(tool.clone());
                ev.fingerprint = fingerprint;
                ev.latency_us = Some(micros(started));
                // A large result's record is hashed while the result is delivered and
                // taint-indexed.
                self.record_result(
                    ev,
                    ResultText {
                        text: text.clone(),
                        tool_call: true,
                    },
                );
                self.taint_later(tool, TaintAs::ToolResult, text);
                Verdict::Forward
            }
            Watched::Resource {
                uri,
                request_id,
                started,
            } => {
                let mut ev = Event::new(AuditKind::Result);
                ev.request_id = Some(request_id);
                ev.tool = Some("resources/read".to_owned());
                ev.resources = vec![uri];
                ev.latency_us = Some(micros(started));
                self.record_result(
                    ev,
                    ResultText {
                        text: text.clone(),
                        tool_call: false,
                    },
                );
                self.taint_later("resources/read".to_owned(), TaintAs::Resource, text);
                Verdict::Forward
            }
            Watched::Prompt { name } => {
                self.taint_later(format!("prompts/get:{name}"), TaintAs::Prompt, text);
                Verdict::Forward
            }
        }
    }

    /// Refuses a client message that a lenient server could run as an intercepted method
    /// without toolgate's verdict: an intercepted method without an id, the same method
    /// spelled otherwise, or its params with a member twice or in another letter case.
    /// `None`: nothing to refuse.
    fn refuse_unjudged(&self, env: &toolgate_mcp::Envelope<'_>) -> Option<Verdict> {
        let method = env.method_str();
        let (reason, help) = if let Some(&like) = INTERCEPTED
            .iter()
            .find(|m| toolgate_mcp::spelling::resembles(method, m))
        {
            (
                format!(
                    "method `{}` is not `{like}`; toolgate never forwards a method that differs from one it judges only in letter case, whitespace or invisible characters",
                    shown(method)
                ),
                format!("send `{like}` exactly"),
            )
        } else if !INTERCEPTED.contains(&method) {
            return None;
        } else if env.kind == Kind::Notification {
            (
                format!(
                    "a `{method}` without an id is never forwarded: toolgate decides each such request and answers it, and a notification cannot be answered"
                ),
                "give the request an id".to_owned(),
            )
        } else {
            let names = params_read_by(method);
            let ambiguity = env
                .params
                .filter(|_| !names.is_empty())
                .and_then(|p| toolgate_mcp::spelling::ambiguous_member(p, names).err())
                .filter(|a| !matches!(a, toolgate_mcp::spelling::Ambiguity::NotAnObject))?;
            (
                format!(
                    "the params of this `{method}` are ambiguous: {ambiguity}; servers disagree on which one counts"
                ),
                "send each member once, spelled exactly".to_owned(),
            )
        };
        tracing::warn!("client message refused: {reason}");
        let mut ev = Event::new(AuditKind::Decision);
        ev.request_id = env.reply_id().map(|id| id.get().to_owned());
        ev.tool = Some(method.to_owned());
        ev.effect = Some(Effect::Deny.as_str().to_owned());
        ev.contract = Some("protocol".to_owned());
        ev.reason = Some(reason.clone());
        if let Some(params) = env
            .params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
        {
            ev.args_sha256 = Some(canonical_sha256(&params));
        }
        if let Err(why) = self.audit(ev) {
            tracing::warn!("the refusal above was not audited: {why}");
        }
        Some(match (env.kind, env.reply_id()) {
            (Kind::Request, Some(id)) => Verdict::Reply(build::error_response(
                Some(id),
                toolgate_mcp::INVALID_REQUEST,
                &format!("invalid request: {reason}; help: {help}"),
            )),
            // A notification gets no reply; a request without a usable id cannot get one.
            _ => Verdict::Drop,
        })
    }

    fn on_client_message(&self, message: &Message<'_>, proxy: &ProxyHandle) -> Verdict {
        // Whatever the client sends next is decided knowing every result received so far.
        self.inner.feed_taint();
        let env = message.envelope;
        if env.is_call()
            && let Some(refused) = self.refuse_unjudged(env)
        {
            return refused;
        }
        match env.kind {
            Kind::Request => {
                // A request always has an id; should it not, nothing is forwarded unjudged.
                let Some(id) = env.id else {
                    return Verdict::Drop;
                };
                match env.method_str() {
                    "initialize" => {
                        if let Some(p) = env
                            .params
                            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                        {
                            lock(&self.inner.state).client = ClientAbilities::from_initialize(&p);
                        }
                        Verdict::Forward
                    }
                    "tools/call" => self.on_tools_call(id, env.params, proxy),
                    "tools/list" => {
                        let first = env
                            .params
                            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                            .is_none_or(|p| p.get("cursor").is_none_or(Value::is_null));
                        lock(&self.inner.state).listings_in_flight += 1;
                        Verdict::Watch(self.watch(Watched::ToolsList { first }))
                    }
                    "resources/read" => self.on_resources_read(id, env.params, proxy),
                    "prompts/get" => {
                        let name = env
                            .params
                            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                            .and_then(|p| p.get("name").and_then(Value::as_str).map(str::to_owned))
                            .unwrap_or_default();
                        Verdict::Watch(self.watch(Watched::Prompt { name }))
                    }
                    _ => Verdict::Forward,
                }
            }
            Kind::Notification if env.method_str() == "notifications/cancelled" => {
                let target = env
                    .params
                    .and_then(|p| toolgate_mcp::views::CancelledParams::parse(p).ok())
                    .and_then(|c| IdKey::from_raw(c.request_id));
                if let Some(key) = target
                    && let Some(cancel) = lock(&self.inner.state).parked.remove(&key)
                {
                    let _ = cancel.send(());
                    // The server never saw the parked request: nothing to forward.
                    return Verdict::Drop;
                }
                Verdict::Forward
            }
            _ => Verdict::Forward,
        }
    }
}

/// A `tools/list` response without the tools the policy forbids outright (`max_calls: 0`),
/// so the agent never tries them; every other byte is kept (`toolgate_mcp::splice`).
/// Hiding is a courtesy, not the enforcement: a call to a hidden tool is still denied by
/// its budget, so a frame that cannot be spliced is forwarded as it is (and logged).
fn hide_tools(frame: &[u8], hidden: &[&str]) -> Verdict {
    if hidden.is_empty() {
        return Verdict::Forward;
    }
    match toolgate_mcp::splice::splice_tools_list(frame, |name, _| hidden.contains(&name)) {
        Ok(Some(spliced)) => {
            tracing::debug!(
                "tools/list: hid `{}` from the client (`max_calls: 0`)",
                spliced.removed.join("`, `")
            );
            Verdict::Replace(spliced.frame)
        }
        Ok(None) => Verdict::Forward,
        Err(e) => {
            tracing::warn!(
                "{e}; forwarded with `{}` listed (calls to it are still denied)",
                hidden.join("`, `")
            );
            Verdict::Forward
        }
    }
}

/// A `resources/read` result shaped as a tool result (embedded resources), so the taint
/// index reads its text the way it reads tool output.
fn resource_as_tool_result(result: &Value) -> Value {
    let items: Vec<Value> = result
        .get("contents")
        .and_then(Value::as_array)
        .map(|contents| {
            contents
                .iter()
                .map(|c| json!({"type": "resource", "resource": c}))
                .collect()
        })
        .unwrap_or_default();
    json!({ "content": items })
}

/// A `prompts/get` result shaped as a tool result: every message's content item.
fn prompt_as_tool_result(result: &Value) -> Value {
    let mut items: Vec<Value> = result
        .get("messages")
        .and_then(Value::as_array)
        .map(|messages| {
            messages
                .iter()
                .filter_map(|m| m.get("content").cloned())
                .collect()
        })
        .unwrap_or_default();
    if let Some(description) = result.get("description").and_then(Value::as_str) {
        items.push(json!({"type": "text", "text": description}));
    }
    json!({ "content": items })
}

/// Asks the client with `elicitation/create`; a timeout or any failure is a deny.
async fn ask_client(
    proxy: &ProxyHandle,
    request_id: &str,
    prompt: &Question,
    timeout: Duration,
) -> Answer {
    let Some(params) = raw_value(&elicitation_params(prompt)) else {
        return Answer::Deny("internal error building the prompt".to_owned());
    };
    match tokio::time::timeout(
        timeout,
        proxy.request_client_as(request_id, "elicitation/create", Some(&params)),
    )
    .await
    {
        Err(_) => Answer::Deny(format!("no answer within {} s", timeout.as_secs())),
        Ok(Err(e)) => Answer::Deny(format!("the approval channel is down: {e}")),
        Ok(Ok(frame)) => {
            let response: Value = serde_json::from_slice(&frame).unwrap_or(Value::Null);
            match response.get("result") {
                Some(result) => parse_elicitation_result(result),
                None => Answer::Deny(format!(
                    "the client could not ask: {}",
                    response
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("malformed response")
                )),
            }
        }
    }
}

/// How long start-up waits, connecting included, for the broker to send the agent
/// session's shared state (it answers within a millisecond or two when it runs; without a
/// broker there is no wait).
const JOIN_SESSION_WITHIN: Duration = Duration::from_secs(1);

impl Interceptor for Enforcer {
    fn on_start(&self) -> StartFuture<'_> {
        Box::pin(async move {
            if let Some(session) = &self.inner.settings.shared_session {
                session.join(JOIN_SESSION_WITHIN).await;
            }
        })
    }

    fn after_delivery(&self) {
        self.inner.feed_taint();
        self.inner.write_deferred();
    }

    fn on_message(&self, message: &Message<'_>, proxy: &ProxyHandle) -> Verdict {
        match message.direction {
            Direction::ClientToServer => self.on_client_message(message, proxy),
            Direction::ServerToClient => match message.answers {
                Some(tag) if self.inner.settings.index_before_delivery => {
                    let verdict = self.on_response(tag, message);
                    self.after_delivery();
                    verdict
                }
                Some(tag) => self.on_response(tag, message),
                None => {
                    if message.envelope.kind == Kind::Notification
                        && message.envelope.method_str() == "notifications/tools/list_changed"
                    {
                        lock(&self.inner.state).tools_stale = true;
                        let mut ev = Event::new(AuditKind::Pin);
                        ev.reason = Some("the server announced that its tools changed".to_owned());
                        let _ = self.audit(ev);
                    }
                    Verdict::Forward
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{SameBytes, is_error_of, part_of};

    #[test]
    fn a_result_is_kept_as_a_share_of_its_frame_not_a_copy() {
        let frame = bytes::Bytes::from(br#"{"id":1,"result":{"n":1}}"#.to_vec());
        let inside = frame.get(17..24).unwrap();
        let part = part_of(&frame, inside);
        assert_eq!(&part[..], br#"{"n":1}"#);
        assert_eq!(part.as_ptr(), inside.as_ptr(), "shared, not copied");
        // Bytes from elsewhere (or only partly inside) are copied.
        let elsewhere = br#"{"n":2}"#.to_vec();
        let copied = part_of(&frame, &elsewhere);
        assert_eq!(&copied[..], &elsewhere[..]);
        assert_ne!(copied.as_ptr(), elsewhere.as_ptr());
        let empty = part_of(&frame, frame.get(25..).unwrap());
        assert!(empty.is_empty());
    }

    #[test]
    fn is_error_is_read_from_the_top_level_of_the_text() {
        for (text, expected) in [
            (r#"{"content":[],"isError":true}"#, true),
            (r#"{"isError":false,"content":[]}"#, false),
            (
                r#"{"content":[{"type":"text","text":"{\"isError\":true}"}]}"#,
                false,
            ),
            (r#"{"structuredContent":{"isError":true}}"#, false),
            // The last of two wins, as in a parsed object.
            (r#"{"isError":false,"isError":true}"#, true),
            (r#"{"isError":true,"isError":false}"#, false),
            // Not a boolean, or no object: not an error result.
            (r#"{"isError":"yes"}"#, false),
            (r#"{"isError":1}"#, false),
            ("[true]", false),
            ("true", false),
            // A number serde_json cannot hold elsewhere does not hide the flag.
            (r#"{"content":[{"n":1e400}],"isError":true}"#, true),
            (r#"{"\u0069sError":true}"#, true),
        ] {
            assert_eq!(is_error_of(text.as_bytes()), expected, "{text}");
        }
    }

    #[test]
    fn same_bytes_recognises_exactly_the_same_bytes() {
        let small = SameBytes::of(b"{\"tools\":[]}");
        assert!(matches!(small, SameBytes::Bytes(_)));
        assert!(small.matches(b"{\"tools\":[]}"));
        assert!(!small.matches(b"{\"tools\":[] }"));
        assert!(!small.matches(b"{\"tools\":[]"));
        assert!(!small.matches(b""));

        let mut large = vec![b'a'; SameBytes::KEEP + 1];
        let kept = SameBytes::of(&large);
        assert!(matches!(kept, SameBytes::Digest(_)));
        assert!(kept.matches(&large));
        if let Some(last) = large.last_mut() {
            *last = b'b';
        }
        assert!(!kept.matches(&large));
        assert!(!kept.matches(b"a"));
    }
}
