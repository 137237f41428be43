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

mod asking;
mod calls;
mod outputs;
mod pinning;
mod records;
mod unjudged;
use calls::*;
use outputs::*;
use records::*;
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
        /// The secret file the call reads, if any: its result is fingerprinted.
        secret_file: Option<String>,
        /// Secrets of a known shape in the result are replaced before it is delivered.
        redact: bool,
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

    fn server(&self) -> Option<&str> {
        self.inner.settings.server.as_deref()
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
