//! The relay: one task per direction, one writer per output, pending requests per side.
//!
//! ```text
//!  client stdin ──► client task ──► Interceptor ──► (writer lock) ─► child stdin
//!  client stdout ◄─ (writer lock) ◄── Interceptor ◄── upstream task ◄─ child stdout
//! ```
//!
//! Each direction is handled by exactly one task, so per-direction order is preserved;
//! forwarded frames are moved, never copied or re-serialised. Parked decisions run in
//! their own tasks and never block other traffic.
//!
//! The hot path has no thread hand-off: when stdin and stdout are pipes or sockets of
//! toolgate's own (the case under an MCP client) they are driven by the runtime's epoll
//! like the child's pipes, and a frame is written by the task that decided it, under a
//! fair lock that keeps the order of writers. Otherwise (a terminal, a file, a pipe shared
//! with another stream) a dedicated thread reads stdin or writes stdout, so toolgate never
//! makes a shared file description non-blocking.

mod decide;
use decide::*;
mod channels;
mod io;
use channels::random_u64;
pub use io::*;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};
use toolgate_mcp::{
    Envelope, Frame, INTERNAL_ERROR, INVALID_REQUEST, IdKey, Kind, PARSE_ERROR, RawValue, build,
    classify, classify_value, recover_id,
};
use tracing::{debug, warn};

use super::handle::{Boxed, Channels, ProxyError, ProxyHandle};
use super::intercept::{Direction, Interceptor, Message, Parked, Verdict};
use super::lines::{AsyncLines, Line};
use super::pipes::PipeGrowth;

/// The prefix of every id toolgate uses for requests it originates itself.
///
/// Responses from the client with such an id are consumed by toolgate and never
/// forwarded; requests from the server with such an id are refused.
pub const ORIGIN_ID_PREFIX: &str = "toolgate-";

/// The reply every outstanding client request gets when the upstream goes away.
pub const UPSTREAM_EXITED: &str = "upstream server exited before responding";

/// The same for a remote server (a transport that ended).
pub const UPSTREAM_DISCONNECTED: &str =
    "the connection to the remote server ended before it responded";

/// Capacity (in frames) of each output queue: bounded, so a peer that stops reading
/// applies back-pressure instead of growing memory.
const QUEUE: usize = 32;

impl std::fmt::Debug for ClientInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClientInput::Queue(_) => "ClientInput::Queue",
            ClientInput::Direct(_) => "ClientInput::Direct",
        })
    }
}

impl std::fmt::Debug for ClientSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClientSink::Queue(_) => "ClientSink::Queue",
            ClientSink::Direct(_) => "ClientSink::Direct",
        })
    }
}

impl<W> std::fmt::Debug for FrameWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameWriter").finish_non_exhaustive()
    }
}

/// A request waiting for its response.
#[derive(Debug)]
struct Pending {
    raw_id: Box<str>,
    tag: Option<u64>,
    parked: bool,
    /// The sender cancelled it (`notifications/cancelled`): it expects no answer any more,
    /// so none is made up when the other side goes away.
    cancelled: bool,
}

#[derive(Debug, Default)]
struct InFlight {
    /// Requests from the client, awaiting the server's response.
    client_pending: HashMap<IdKey, Pending>,
    /// Requests from the server, awaiting the client's response.
    server_pending: HashMap<IdKey, Pending>,
    /// Requests toolgate sent to the client, awaiting its response.
    origin: HashMap<Box<str>, oneshot::Sender<Vec<u8>>>,
    /// Requests toolgate sent to the upstream (e.g. its own `tools/list`), awaiting its
    /// response. Their responses are consumed, never forwarded to the client.
    server_origin: HashMap<Box<str>, oneshot::Sender<Vec<u8>>>,
    upstream_gone: bool,
    client_gone: bool,
}

impl InFlight {
    fn pending(&mut self, from: Direction) -> &mut HashMap<IdKey, Pending> {
        match from {
            Direction::ClientToServer => &mut self.client_pending,
            Direction::ServerToClient => &mut self.server_pending,
        }
    }
}

struct RelayParts {
    interceptor: Arc<dyn Interceptor>,
    /// What a request gets when the upstream goes away before answering it.
    gone_message: &'static str,
    state: Mutex<InFlight>,
    to_client: ClientSink,
    to_server: ServerSink,
    origin_prefix: String,
    next_origin: AtomicU64,
    /// Small frames handled so far: the poller keeps polling for its window after the last.
    small_frames: AtomicU64,
    /// Wakes the poller when it sleeps.
    activity: tokio::sync::Notify,
}

impl RelayParts {
    fn lock(&self) -> MutexGuard<'_, InFlight> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn with_newline(mut message: Vec<u8>) -> Vec<u8> {
    message.push(b'\n');
    message
}

/// Where one processed frame goes.
enum Out {
    Client(Bytes),
    Server(Bytes),
    Nothing,
}

impl Out {
    fn to_sender(from: Direction, message: Vec<u8>) -> Out {
        match from {
            Direction::ClientToServer => Out::Client(with_newline(message).into()),
            Direction::ServerToClient => Out::Server(with_newline(message).into()),
        }
    }

    /// `frame` must already end with a newline.
    fn to_peer(from: Direction, frame: impl Into<Bytes>) -> Out {
        let frame = frame.into();
        match from {
            Direction::ClientToServer => Out::Server(frame),
            Direction::ServerToClient => Out::Client(frame),
        }
    }
}

/// The decision for one message, no longer borrowing its frame.
enum Step {
    Done(Out),
    Forward,
    ForwardBytes(Vec<u8>),
    Park(Parked, Option<IdKey>, Option<Box<str>>),
}

fn body(frame: &[u8]) -> &[u8] {
    frame.strip_suffix(b"\n").unwrap_or(frame)
}

/// The answer to a client message with a carriage return inside it.
const CR_INSIDE: &str = "invalid request: the message has a carriage return inside it; \
    some servers end a line there and would read what follows as another message; \
    help: write each message on one line, ending with `\\n` or `\\r\\n`";

/// True when a carriage return comes before the last non-blank byte of `body`.
///
/// `\r` is whitespace to JSON but a line end to readers with universal newlines (Python's
/// `TextIOWrapper`, which the Python MCP SDK reads stdin with): forwarded, such a frame
/// could carry a second message that toolgate never judged, e.g.
/// `{"jsonrpc":"2.0","id":1,"method":"ping","x":\r{"jsonrpc":"2.0","id":2,"method":"tools/call",…}\r}`.
/// No JSON serialiser writes one (JSON strings cannot hold a raw `\r`), so such frames are
/// refused, not rewritten (frames pass byte for byte or not at all).
fn inner_carriage_return(body: &[u8]) -> bool {
    let end = body
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .unwrap_or(0);
    body.get(..end)
        .is_some_and(|head| memchr::memchr(b'\r', head).is_some())
}

/// The answer to a client request whose response the upstream wrote with a carriage return
/// inside it.
const UPSTREAM_CR_RESPONSE: &str = "upstream response refused: it has a carriage return inside it, \
    where some clients end a line and would read what follows as another message \
    (help: the server must write each message on one line)";

/// The answer to an upstream request written with a carriage return inside it.
const UPSTREAM_CR_REQUEST: &str = "invalid request: the message has a carriage return inside it; \
    some clients end a line there and would read what follows as another message; \
    help: write each message on one line, ending with `\\n` or `\\r\\n`";

/// Refuses an upstream frame (one message, or every message of a batch) with a carriage
/// return inside it: a client that splits lines at `\r` (Node's `readline`, readers with
/// universal newlines) would read what follows as another message, one that toolgate
/// neither judged nor indexed (a forged result, a server request). Nothing of it reaches
/// the client. A response to a pending client request answers that request with `-32603`
/// instead; a request from the server is answered with `-32600`; the rest is dropped.
fn refuse_upstream_cr(shared: &RelayParts, envs: &[Envelope<'_>]) -> Vec<Out> {
    let mut outs = Vec::new();
    for env in envs {
        warn!(
            "upstream sent a message with a carriage return inside it: dropped ({})",
            env.method.as_deref().map_or_else(
                || "not a request".to_owned(),
                |m| format!("method `{}`", m.escape_debug())
            )
        );
        match env.kind {
            Kind::Request => {
                if let Some(raw_id) = env.id {
                    outs.push(Out::to_sender(
                        Direction::ServerToClient,
                        build::error_response(Some(raw_id), INVALID_REQUEST, UPSTREAM_CR_REQUEST),
                    ));
                }
            }
            Kind::Response | Kind::ErrorResponse => {
                let Some(raw_id) = env.id else { continue };
                let Some(key) = IdKey::from_raw(raw_id) else {
                    continue;
                };
                let answered = {
                    let mut st = shared.lock();
                    match st.client_pending.get(&key) {
                        Some(p) if !p.parked => st.client_pending.remove(&key).is_some(),
                        Some(_) | None => false,
                    }
                };
                if answered {
                    outs.push(Out::Client(
                        with_newline(build::error_response(
                            Some(raw_id),
                            INTERNAL_ERROR,
                            UPSTREAM_CR_RESPONSE,
                        ))
                        .into(),
                    ));
                }
            }
            Kind::Notification | Kind::Invalid(_) => {}
        }
    }
    outs
}

fn is_blank(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

async fn dispatch(shared: &RelayParts, out: Out) {
    match out {
        Out::Client(frame) => {
            // A closed client writer means stdout is gone; nothing left to tell.
            let _ = shared.to_client.send(frame).await;
        }
        Out::Server(frame) => {
            if shared.to_server.send(frame).await.is_err() {
                debug!("upstream writer is gone; frame dropped");
            }
        }
        Out::Nothing => {}
    }
}

/// Processes one frame (newline included) read from `from`.
async fn on_frame(shared: &Arc<RelayParts>, from: Direction, frame: Vec<u8>) {
    if is_blank(&frame) {
        return;
    }
    // Shared from here on, so the interceptor can keep a part of it (a result to index
    // and hash after delivery) without a copy.
    let frame = Bytes::from(frame);
    let outs = {
        let b = body(&frame);
        match classify(b) {
            Frame::ParseError(err) => {
                let out = match from {
                    Direction::ClientToServer => {
                        debug!("client sent unparsable frame: {err}");
                        let msg = format!("parse error: {err}");
                        Out::to_sender(from, build::error_response(None, PARSE_ERROR, &msg))
                    }
                    Direction::ServerToClient => {
                        warn!(
                            "upstream wrote a non-json line to stdout ({} bytes), dropped: {err}",
                            b.len()
                        );
                        Out::Nothing
                    }
                };
                Some(vec![out])
            }
            Frame::Single(env) if from == Direction::ServerToClient && inner_carriage_return(b) => {
                Some(refuse_upstream_cr(shared, std::slice::from_ref(&env)))
            }
            Frame::Batch(items)
                if from == Direction::ServerToClient && inner_carriage_return(b) =>
            {
                let envs: Vec<Envelope<'_>> =
                    items.iter().map(|item| classify_value(item)).collect();
                Some(refuse_upstream_cr(shared, &envs))
            }
            Frame::Batch(items) => Some(on_batch(shared, from, &items, &frame)),
            Frame::Single(env) if from == Direction::ClientToServer && inner_carriage_return(b) => {
                warn!(
                    "client sent a message with a carriage return inside it: refused ({})",
                    env.method.as_deref().map_or_else(
                        || "not a request".to_owned(),
                        |m| format!("method `{}`", m.escape_debug())
                    )
                );
                Some(vec![Out::to_sender(
                    from,
                    build::error_response(env.reply_id(), INVALID_REQUEST, CR_INSIDE),
                )])
            }
            Frame::Single(env) => match decide(shared, from, &env, b, &frame) {
                Step::Done(out) => Some(vec![out]),
                Step::Forward => None,
                Step::ForwardBytes(bytes) => Some(vec![Out::to_peer(from, with_newline(bytes))]),
                Step::Park(fut, key, raw_id) => {
                    let parked_frame = frame.clone();
                    tokio::spawn(resolve_parked(
                        Arc::clone(shared),
                        from,
                        key,
                        raw_id,
                        parked_frame,
                        fut,
                    ));
                    Some(vec![])
                }
            },
        }
    };
    match outs {
        None => dispatch(shared, Out::to_peer(from, frame)).await,
        Some(outs) => {
            for out in outs {
                dispatch(shared, out).await;
            }
        }
    }
    // Work the interceptor kept off the latency path (e.g. auditing a result the client
    // now has) runs before the next frame is read.
    shared.interceptor.after_delivery();
}

/// Batches from the client are rejected: every request in it gets a `-32600` error (in
/// one array, as JSON-RPC asks), nothing in it is forwarded. Batches from the server
/// are split and each element takes the per-message path on its own.
fn on_batch(
    shared: &Arc<RelayParts>,
    from: Direction,
    items: &[&RawValue],
    frame: &Bytes,
) -> Vec<Out> {
    match from {
        Direction::ClientToServer => {
            warn!(
                "client sent a json-rpc batch of {} messages: rejected",
                items.len()
            );
            if items.is_empty() {
                let msg = "invalid request: empty batch";
                return vec![Out::to_sender(
                    from,
                    build::error_response(None, INVALID_REQUEST, msg),
                )];
            }
            let msg = "invalid request: json-rpc batches are not supported by toolgate; \
                       send each message on its own line";
            let replies: Vec<Vec<u8>> = items
                .iter()
                .filter_map(|item| {
                    let env = classify_value(item);
                    match env.kind {
                        Kind::Request => Some(build::error_response(env.id, INVALID_REQUEST, msg)),
                        Kind::Invalid(_) => {
                            Some(build::error_response(env.reply_id(), INVALID_REQUEST, msg))
                        }
                        Kind::Notification | Kind::Response | Kind::ErrorResponse => None,
                    }
                })
                .collect();
            if replies.is_empty() {
                return vec![];
            }
            vec![Out::to_sender(
                from,
                build::batch(replies.iter().map(Vec::as_slice)),
            )]
        }
        Direction::ServerToClient => {
            warn!(
                "upstream sent a json-rpc batch of {} messages: split",
                items.len()
            );
            let mut outs = Vec::new();
            for item in items {
                let env = classify_value(item);
                let element = item.get().as_bytes();
                match decide(shared, from, &env, element, frame) {
                    Step::Done(out) => outs.push(out),
                    Step::Forward => outs.push(Out::to_peer(from, with_newline(element.to_vec()))),
                    Step::ForwardBytes(bytes) => {
                        outs.push(Out::to_peer(from, with_newline(bytes)));
                    }
                    Step::Park(fut, key, raw_id) => {
                        tokio::spawn(resolve_parked(
                            Arc::clone(shared),
                            from,
                            key,
                            raw_id,
                            with_newline(element.to_vec()).into(),
                            fut,
                        ));
                    }
                }
            }
            outs
        }
    }
}

/// Relay settings.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// Longest accepted line, newline excluded.
    pub max_message_bytes: usize,
    /// After a message, how long the relay keeps polling for the next one before it
    /// sleeps (zero: it sleeps at once). See `poller`.
    pub poll: Duration,
}

/// The default of [`RelayConfig::poll`], in microseconds (`toolgate wrap --poll-us`).
pub const DEFAULT_POLL_US: u64 = 50;

/// Frames at least this long do not start a poll: their transfer takes far longer than a
/// wake-up, and the CPU is better left to the peers and the recorder thread.
const POLL_MAX_FRAME: usize = 64 * 1024;

/// The running relay, minus the lifecycle (see `proxy::run`).
pub struct Relay {
    shared: Arc<RelayParts>,
    client_task: tokio::task::JoinHandle<()>,
    upstream_task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").finish_non_exhaustive()
    }
}

impl Relay {
    /// Starts the relay tasks over the given client channels and upstream pipes.
    pub fn start(
        config: &RelayConfig,
        interceptor: Arc<dyn Interceptor>,
        client_in: ClientInput,
        to_client: ClientSink,
        upstream: UpstreamIo,
    ) -> Relay {
        let gone_message = match upstream {
            UpstreamIo::Child(..) => UPSTREAM_EXITED,
            UpstreamIo::Channel(..) => UPSTREAM_DISCONNECTED,
        };
        let (to_server, upstream_out) = match upstream {
            UpstreamIo::Child(stdin, stdout) => {
                let growth = PipeGrowth::of(stdin.as_fd());
                let writer = FrameWriter::new(stdin, growth);
                (
                    ServerSink::Pipe(tokio::sync::Mutex::new(Some(writer))),
                    UpstreamOut::Pipe(stdout),
                )
            }
            UpstreamIo::Channel(tx, rx) => (
                ServerSink::Channel(tokio::sync::Mutex::new(Some(tx))),
                UpstreamOut::Channel(rx),
            ),
        };
        let shared = Arc::new(RelayParts {
            interceptor,
            gone_message,
            state: Mutex::new(InFlight::default()),
            to_client,
            to_server,
            origin_prefix: format!("{ORIGIN_ID_PREFIX}{:016x}-", random_u64()),
            next_origin: AtomicU64::new(1),
            small_frames: AtomicU64::new(0),
            activity: tokio::sync::Notify::new(),
        });
        if !config.poll.is_zero() {
            tokio::spawn(poller(Arc::clone(&shared), config.poll));
        }
        let upstream_task = tokio::spawn(upstream_reader(
            Arc::clone(&shared),
            upstream_out,
            config.max_message_bytes,
        ));
        let client_task = tokio::spawn(client_reader(Arc::clone(&shared), client_in));
        Relay {
            shared,
            client_task,
            upstream_task,
        }
    }

    /// Completes when the client has closed its input (the upstream's stdin is then closed).
    pub fn client_done(&mut self) -> &mut tokio::task::JoinHandle<()> {
        &mut self.client_task
    }

    /// Completes when the upstream's stdout has ended.
    pub fn upstream_done(&mut self) -> &mut tokio::task::JoinHandle<()> {
        &mut self.upstream_task
    }

    /// The upstream is gone: every outstanding client request gets a `-32603` reply.
    pub async fn upstream_gone(&mut self) {
        self.upstream_task.abort();
        let replies: Vec<Vec<u8>> = {
            let mut st = self.shared.lock();
            st.upstream_gone = true;
            // toolgate's own requests to the upstream fail (their waiters see it gone).
            st.server_origin.clear();
            st.client_pending
                .drain()
                .filter(|(_, p)| !p.cancelled)
                .map(|(_, p)| {
                    let raw = RawValue::from_string(p.raw_id.into_string()).ok();
                    with_newline(build::error_response(
                        raw.as_deref(),
                        INTERNAL_ERROR,
                        self.shared.gone_message,
                    ))
                })
                .collect()
        };
        for reply in replies {
            dispatch(&self.shared, Out::Client(reply.into())).await;
        }
        self.shared.to_server.close().await;
    }

    /// Closes the upstream's input: a transport then finishes and ends its session.
    pub async fn close_upstream(&self) {
        self.shared.to_server.close().await;
    }

    /// Waits until everything queued for the client has been written, up to `limit`.
    pub async fn flush_client(&self, limit: Duration) {
        self.shared.to_client.flush(limit).await;
    }
}

/// Keeps the relay awake for `window` after each small frame.
///
/// A thread that sleeps in `epoll_wait` takes a wake-up to resume when the next message
/// arrives: a few microseconds on bare metal, 5 to 10 on a busy virtual machine, paid
/// once per hop. Messages often come in quick succession (a response right after its
/// request, the client's next call right after a result), so after each small frame the
/// relay polls instead of sleeping: each turn yields to the runtime, which then checks
/// the pipes without blocking (`epoll_wait` with a zero timeout) and runs whatever became
/// ready. Once `window` has passed since the last small frame, the relay sleeps as before.
/// The cost is at most `window` of CPU per message; an idle proxy does not poll at all.
/// (One task, on the runtime's one thread: between the end of a poll and the wait for the
/// next frame nothing else runs, so no frame goes unnoticed.) Polling only helps
/// when the peers run on other CPUs, so on a single CPU it is off by default (see
/// `toolgate wrap --poll-us`).
async fn poller(shared: Arc<RelayParts>, window: Duration) {
    loop {
        shared.activity.notified().await;
        let mut seen = shared.small_frames.load(Ordering::Relaxed);
        let mut until = std::time::Instant::now() + window;
        loop {
            tokio::task::yield_now().await;
            let now = std::time::Instant::now();
            let frames = shared.small_frames.load(Ordering::Relaxed);
            if frames != seen {
                seen = frames;
                until = now + window;
            }
            if now >= until {
                break;
            }
        }
    }
}

/// Handles one frame, then starts a poll if it was small.
async fn on_frame_then_poll(shared: &Arc<RelayParts>, from: Direction, frame: Vec<u8>) {
    let small = frame.len() < POLL_MAX_FRAME;
    on_frame(shared, from, frame).await;
    if small {
        shared.small_frames.fetch_add(1, Ordering::Relaxed);
        // Wakes the poller if it sleeps; a polling one sees the count change.
        shared.activity.notify_waiters();
    }
}

#[cfg(test)]
mod frame_writer_tests {
    #![allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        reason = "tests: a failed expectation should stop the test with its message"
    )]
    use super::{FrameWriter, PipeGrowth};
    use std::time::Duration;
    use tokio::io::AsyncReadExt;

    /// A writer cancelled halfway through a frame (the peer reads slowly) leaves the rest
    /// to the next writer: frames never run together.
    #[tokio::test]
    async fn a_cancelled_frame_is_completed_before_the_next() {
        let (tx, mut rx) = tokio::io::duplex(16);
        let mut w = FrameWriter::new(tx, PipeGrowth::none());
        let first = format!("{{\"n\":1,\"pad\":\"{}\"}}\n", "x".repeat(100)).into_bytes();
        let second = b"{\"n\":2}\n".to_vec();
        // Nobody reads yet: the write stalls after 16 bytes and is cancelled.
        let cancelled =
            tokio::time::timeout(Duration::from_millis(50), w.write_frame(first.clone())).await;
        assert!(cancelled.is_err(), "the write should have stalled");
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            rx.read_to_end(&mut all).await.unwrap();
            all
        });
        w.write_frame(second.clone()).await.unwrap();
        drop(w);
        let all = tokio::time::timeout(Duration::from_secs(10), reader)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(all, [first, second].concat());
    }

    #[tokio::test]
    async fn a_closed_peer_makes_later_frames_fail_fast() {
        let (tx, rx) = tokio::io::duplex(16);
        drop(rx);
        let mut w = FrameWriter::new(tx, PipeGrowth::none());
        assert!(w.write_frame(b"{}\n".to_vec()).await.is_err());
        assert!(w.write_frame(b"{}\n".to_vec()).await.is_err());
    }
}

#[cfg(test)]
mod carriage_return_tests {
    use super::inner_carriage_return;

    #[test]
    fn only_a_carriage_return_inside_the_message_counts() {
        for inside in [
            &b"{\"a\":\r1}"[..],
            b"\r{\"a\":1}",
            b"{\"a\":1}\r{\"b\":2}",
            b"{\"a\":[1,\r2]}\r\n",
        ] {
            assert!(inner_carriage_return(inside), "{inside:?}");
        }
        for fine in [
            &b"{\"a\":1}"[..],
            b"{\"a\":1}\r",
            b"{\"a\":1}\r\r \t",
            b"{\"a\":1} \r\n",
            b"",
            b"\r",
        ] {
            assert!(!inner_carriage_return(fine), "{fine:?}");
        }
    }
}
