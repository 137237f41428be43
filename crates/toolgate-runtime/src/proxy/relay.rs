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

/// One event from the client's stdin reader.
#[derive(Debug)]
pub enum ClientEvent {
    /// A line (or an oversize line) from the client.
    Line(Line),
    /// The client closed its end (or reading failed).
    Eof,
}

/// One item for the client's stdout writer.
#[derive(Debug)]
pub enum ClientOut {
    /// A frame, newline included.
    Frame(Bytes),
    /// Acknowledge once every earlier frame has been written.
    Barrier(oneshot::Sender<()>),
}

/// The client's input: read on the runtime, or by a thread through a channel.
pub enum ClientInput {
    /// Events from a reader thread (or a test).
    Queue(mpsc::Receiver<ClientEvent>),
    /// stdin driven by the runtime: a pipe or socket of toolgate's own.
    Direct(AsyncLines<BufReader<AsyncIn>>),
}

impl std::fmt::Debug for ClientInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClientInput::Queue(_) => "ClientInput::Queue",
            ClientInput::Direct(_) => "ClientInput::Direct",
        })
    }
}

impl ClientInput {
    async fn next(&mut self) -> ClientEvent {
        match self {
            ClientInput::Queue(rx) => rx.recv().await.unwrap_or(ClientEvent::Eof),
            ClientInput::Direct(lines) => match lines.next_line().await {
                Ok(Some(line)) => ClientEvent::Line(line),
                Ok(None) => ClientEvent::Eof,
                Err(err) => {
                    warn!("reading stdin failed: {err}");
                    ClientEvent::Eof
                }
            },
        }
    }
}

/// Where frames for the client go: written in place, or queued for a writer thread.
pub enum ClientSink {
    /// To a writer thread (or a test).
    Queue(mpsc::Sender<ClientOut>),
    /// Written by the sending task; the lock keeps writers in order (it is fair).
    Direct(tokio::sync::Mutex<FrameWriter<AsyncOut>>),
}

impl std::fmt::Debug for ClientSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClientSink::Queue(_) => "ClientSink::Queue",
            ClientSink::Direct(_) => "ClientSink::Direct",
        })
    }
}

/// Writes whole frames to a non-blocking stream, even when a writer is cancelled halfway
/// (a task aborted while the peer was slow to read): the rest of its frame is written
/// before the next one, so the peer never sees two frames run together.
pub struct FrameWriter<W> {
    out: W,
    /// The pipe written to, grown to the frames it carries.
    growth: PipeGrowth,
    /// The frame being written and how much of it is out.
    pending: Bytes,
    done: usize,
    /// A write failed: the peer is gone; later frames are discarded.
    broken: bool,
}

impl<W> std::fmt::Debug for FrameWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameWriter").finish_non_exhaustive()
    }
}

impl<W: tokio::io::AsyncWrite + Unpin> FrameWriter<W> {
    fn new(out: W, growth: PipeGrowth) -> Self {
        FrameWriter {
            out,
            growth,
            pending: Bytes::new(),
            done: 0,
            broken: false,
        }
    }

    /// Writes one frame (newline included) after the rest of any interrupted one.
    async fn write_frame(&mut self, frame: impl Into<Bytes>) -> std::io::Result<()> {
        let frame = frame.into();
        self.finish().await?;
        self.growth.fit(frame.len());
        self.pending = frame;
        self.done = 0;
        self.finish().await
    }

    /// Completes the frame in progress. Cancel-safe: `done` only counts bytes written.
    async fn finish(&mut self) -> std::io::Result<()> {
        if self.broken {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        while let Some(rest) = self.pending.get(self.done..).filter(|r| !r.is_empty()) {
            match self.out.write(rest).await {
                Ok(0) => {
                    self.broken = true;
                    return Err(std::io::ErrorKind::WriteZero.into());
                }
                Ok(n) => self.done += n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => {
                    self.broken = true;
                    return Err(err);
                }
            }
        }
        // Dropped, not kept: the interceptor may still hold a part of it (a result it
        // indexes), and the buffer is freed when both are done.
        self.pending = Bytes::new();
        self.done = 0;
        Ok(())
    }
}

impl ClientSink {
    /// Sends one frame (newline included). `Err` when the client can no longer get it.
    async fn send(&self, frame: impl Into<Bytes>) -> Result<(), ProxyError> {
        let frame = frame.into();
        match self {
            ClientSink::Queue(tx) => tx
                .send(ClientOut::Frame(frame))
                .await
                .map_err(|_| ProxyError::ClientGone),
            ClientSink::Direct(out) => out.lock().await.write_frame(frame).await.map_err(|err| {
                debug!("writing to the client failed: {err}");
                ProxyError::ClientGone
            }),
        }
    }

    /// Waits until every frame sent before has been written, up to `limit`.
    async fn flush(&self, limit: Duration) {
        match self {
            ClientSink::Queue(tx) => {
                let (ack, done) = oneshot::channel();
                let sent = tokio::time::timeout(limit, tx.send(ClientOut::Barrier(ack)));
                if matches!(sent.await, Ok(Ok(()))) {
                    let _ = tokio::time::timeout(limit, done).await;
                }
            }
            // The lock is fair: once it is ours, every earlier writer has finished (or was
            // cancelled, and its frame is completed here).
            ClientSink::Direct(out) => {
                let _ =
                    tokio::time::timeout(limit, async { out.lock().await.finish().await }).await;
            }
        }
    }
}

/// The upstream's two directions: a child's pipes, or a transport's channels.
#[derive(Debug)]
pub enum UpstreamIo {
    /// A child process's stdin and stdout.
    Child(ChildStdin, ChildStdout),
    /// A transport (`remote`): the frames to send (newline included), and the lines it
    /// received (each one message, newline included). Closing the sender tells the
    /// transport the client is done; the transport ends the receiver when it is.
    Channel(mpsc::Sender<Bytes>, mpsc::Receiver<Line>),
}

/// Where frames for the upstream go; `None` once closed.
enum ServerSink {
    /// The child's stdin, written by the sending task under a fair lock.
    Pipe(tokio::sync::Mutex<Option<FrameWriter<ChildStdin>>>),
    /// A transport's input queue (bounded: a slow upstream applies back-pressure).
    Channel(tokio::sync::Mutex<Option<mpsc::Sender<Bytes>>>),
}

impl ServerSink {
    async fn send(&self, frame: impl Into<Bytes>) -> Result<(), ProxyError> {
        let frame = frame.into();
        match self {
            ServerSink::Pipe(stdin) => {
                let mut stdin = stdin.lock().await;
                let Some(pipe) = stdin.as_mut() else {
                    return Err(ProxyError::UpstreamGone);
                };
                if let Err(err) = pipe.write_frame(frame).await {
                    debug!("writing to the upstream failed: {err}");
                    *stdin = None;
                    return Err(ProxyError::UpstreamGone);
                }
                Ok(())
            }
            ServerSink::Channel(tx) => {
                let mut tx = tx.lock().await;
                let Some(queue) = tx.as_ref() else {
                    return Err(ProxyError::UpstreamGone);
                };
                if queue.send(frame).await.is_err() {
                    *tx = None;
                    return Err(ProxyError::UpstreamGone);
                }
                Ok(())
            }
        }
    }

    /// Closes the upstream's input (after any write in progress).
    async fn close(&self) {
        match self {
            ServerSink::Pipe(stdin) => drop(stdin.lock().await.take()),
            ServerSink::Channel(tx) => drop(tx.lock().await.take()),
        }
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

/// A handle on the running relay, given to the interceptor.
#[derive(Clone)]
pub struct ProxyHandle {
    shared: Arc<RelayParts>,
}

impl std::fmt::Debug for ProxyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyHandle")
            .field("origin_prefix", &self.shared.origin_prefix)
            .finish_non_exhaustive()
    }
}

/// A proxy-originated request could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The client is gone (or never answered before shutdown).
    #[error("the client closed the connection before answering")]
    ClientGone,
    /// The upstream is gone.
    #[error("the upstream server is gone")]
    UpstreamGone,
}

impl ProxyHandle {
    /// Sends a request to the client with an id from toolgate's reserved id space and
    /// waits for its response. Returns the response frame (without newline); the
    /// response is never forwarded to the server.
    pub async fn request_client(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Vec<u8>, ProxyError> {
        let id = self.new_origin_id();
        self.request_client_as(&id, method, params).await
    }

    /// A fresh id in toolgate's reserved id space, for [`ProxyHandle::request_client_as`].
    pub fn new_origin_id(&self) -> String {
        let n = self.shared.next_origin.fetch_add(1, Ordering::Relaxed);
        format!("{}{n}", self.shared.origin_prefix)
    }

    /// [`ProxyHandle::request_client`] with a caller-chosen id (from
    /// [`ProxyHandle::new_origin_id`]), so the caller can withdraw the request with
    /// [`ProxyHandle::withdraw_client_request`].
    pub async fn request_client_as(
        &self,
        id: &str,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Vec<u8>, ProxyError> {
        let id = id.to_owned();
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.shared.lock();
            if st.client_gone {
                return Err(ProxyError::ClientGone);
            }
            st.origin.insert(id.clone().into_boxed_str(), tx);
        }
        let frame = with_newline(build::request(&id, method, params));
        if self.shared.to_client.send(frame).await.is_err() {
            self.shared.lock().origin.remove(id.as_str());
            return Err(ProxyError::ClientGone);
        }
        rx.await.map_err(|_| ProxyError::ClientGone)
    }

    /// Withdraws a request toolgate sent to the client and no longer waits for: forgets it
    /// (a late answer is consumed, never forwarded) and tells the client with
    /// `notifications/cancelled`. Returns false when it was no longer outstanding (answered
    /// already, or never sent); then nothing is sent.
    pub async fn withdraw_client_request(&self, id: &str, reason: &str) -> bool {
        if self.shared.lock().origin.remove(id).is_none() {
            return false;
        }
        let params = serde_json::json!({ "requestId": id, "reason": reason });
        let Ok(params) = serde_json::value::to_raw_value(&params) else {
            return false;
        };
        let frame = build::notification("notifications/cancelled", Some(&params));
        self.send_to_client(frame).await.is_ok()
    }

    /// Sends a request to the upstream with an id from toolgate's reserved id space (which
    /// the client cannot use: see `own_server_response`) and waits for its response.
    /// Returns the response frame (without newline); neither the request nor its response
    /// ever reaches the client. Dropping the future forgets the request (a late response is
    /// consumed); an upstream that exits fails it.
    pub async fn request_server(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Vec<u8>, ProxyError> {
        struct Forget<'a>(&'a RelayParts, Box<str>);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                self.0.lock().server_origin.remove(&self.1);
            }
        }
        let id = self.new_origin_id();
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.shared.lock();
            if st.upstream_gone {
                return Err(ProxyError::UpstreamGone);
            }
            st.server_origin.insert(id.clone().into_boxed_str(), tx);
        }
        let _forget = Forget(&self.shared, id.clone().into_boxed_str());
        self.send_to_server(build::request(&id, method, params))
            .await?;
        rx.await.map_err(|_| ProxyError::UpstreamGone)
    }

    /// Sends one message (no trailing newline) to the client.
    pub async fn send_to_client(&self, message: Vec<u8>) -> Result<(), ProxyError> {
        self.shared.to_client.send(with_newline(message)).await
    }

    /// Sends one message (no trailing newline) to the upstream server.
    pub async fn send_to_server(&self, message: Vec<u8>) -> Result<(), ProxyError> {
        if self.shared.lock().upstream_gone {
            return Err(ProxyError::UpstreamGone);
        }
        self.shared.to_server.send(with_newline(message)).await
    }

    /// The reserved id prefix of this relay's own requests.
    pub fn origin_prefix(&self) -> &str {
        &self.shared.origin_prefix
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

/// Decides one classified message. Never holds the state lock across the interceptor call.
/// `raw` is the message's bytes, a part of `frame`.
fn decide(
    shared: &Arc<RelayParts>,
    from: Direction,
    env: &Envelope<'_>,
    raw: &[u8],
    frame: &Bytes,
) -> Step {
    let handle = ProxyHandle {
        shared: Arc::clone(shared),
    };
    match env.kind {
        Kind::Invalid(why) => match from {
            Direction::ClientToServer => {
                debug!("client sent an invalid message: {why}");
                let msg = format!("invalid request: {why}");
                Step::Done(Out::to_sender(
                    from,
                    build::error_response(env.reply_id(), INVALID_REQUEST, &msg),
                ))
            }
            Direction::ServerToClient => {
                warn!("upstream sent an invalid message, dropped: {why}");
                Step::Done(Out::Nothing)
            }
        },
        Kind::Request => {
            let Some(raw_id) = env.id else {
                return Step::Done(Out::Nothing);
            };
            let Some(key) = IdKey::from_raw(raw_id) else {
                return Step::Done(Out::Nothing);
            };
            {
                let mut st = shared.lock();
                if from == Direction::ClientToServer && st.upstream_gone {
                    return Step::Done(Out::to_sender(
                        from,
                        build::error_response(Some(raw_id), INTERNAL_ERROR, shared.gone_message),
                    ));
                }
                if from == Direction::ServerToClient
                    && key
                        .as_str()
                        .is_some_and(|s| s.starts_with(ORIGIN_ID_PREFIX))
                {
                    warn!("upstream used an id reserved for toolgate: refused");
                    let msg = format!(
                        "invalid request: ids starting with `{ORIGIN_ID_PREFIX}` are reserved"
                    );
                    return Step::Done(Out::to_sender(
                        from,
                        build::error_response(Some(raw_id), INVALID_REQUEST, &msg),
                    ));
                }
                if reserved_client_id(shared, from, &key) {
                    warn!("client used an id reserved for toolgate: refused");
                    let msg = format!(
                        "invalid request: ids starting with `{}` are reserved",
                        shared.origin_prefix
                    );
                    return Step::Done(Out::to_sender(
                        from,
                        build::error_response(Some(raw_id), INVALID_REQUEST, &msg),
                    ));
                }
                if st.pending(from).contains_key(&key) {
                    warn!("{} request reuses a pending id: refused", from.label());
                    let msg = "invalid request: a request with this id is still pending";
                    return Step::Done(Out::to_sender(
                        from,
                        build::error_response(Some(raw_id), INVALID_REQUEST, msg),
                    ));
                }
            }
            let verdict = shared.interceptor.on_message(
                &Message {
                    direction: from,
                    envelope: env,
                    raw,
                    frame,
                    answers: None,
                },
                &handle,
            );
            let raw_id_text: Box<str> = raw_id.get().into();
            let insert = |tag: Option<u64>, parked: bool| {
                shared.lock().pending(from).insert(
                    key.clone(),
                    Pending {
                        raw_id: raw_id_text.clone(),
                        tag,
                        parked,
                        cancelled: false,
                    },
                );
            };
            match verdict {
                Verdict::Forward => {
                    insert(None, false);
                    Step::Forward
                }
                Verdict::Watch(tag) => {
                    insert(Some(tag), false);
                    Step::Forward
                }
                Verdict::Replace(bytes) => {
                    insert(None, false);
                    Step::ForwardBytes(bytes)
                }
                Verdict::ReplaceWatch(bytes, tag) => {
                    insert(Some(tag), false);
                    Step::ForwardBytes(bytes)
                }
                Verdict::Reply(bytes) => Step::Done(Out::to_sender(from, bytes)),
                Verdict::Withdraw => Step::Done(Out::Nothing),
                Verdict::Drop => Step::Done(Out::to_sender(
                    from,
                    build::error_response(
                        Some(raw_id),
                        INTERNAL_ERROR,
                        "request dropped by toolgate",
                    ),
                )),
                Verdict::Park(fut) => {
                    insert(None, true);
                    Step::Park(fut, Some(key), Some(raw_id_text))
                }
            }
        }
        Kind::Notification => {
            if env.method_str() == "notifications/cancelled" {
                mark_cancelled(shared, from, env.params);
            }
            let verdict = shared.interceptor.on_message(
                &Message {
                    direction: from,
                    envelope: env,
                    raw,
                    frame,
                    answers: None,
                },
                &handle,
            );
            simple(from, verdict)
        }
        Kind::Response | Kind::ErrorResponse => {
            let key = env.id.and_then(IdKey::from_raw);
            let mut answers = None;
            if let Some(key) = &key {
                let mut st = shared.lock();
                if from == Direction::ClientToServer
                    && let Some(id) = key.as_str()
                    && id.starts_with(ORIGIN_ID_PREFIX)
                {
                    match st.origin.remove(id) {
                        Some(waiter) => {
                            let _ = waiter.send(raw.to_vec());
                        }
                        None => debug!("client answered an unknown toolgate request: consumed"),
                    }
                    return Step::Done(Out::Nothing);
                }
                if from == Direction::ServerToClient
                    && own_server_response(shared, &mut st, key, raw)
                {
                    return Step::Done(Out::Nothing);
                }
                let peer = match from {
                    Direction::ClientToServer => Direction::ServerToClient,
                    Direction::ServerToClient => Direction::ClientToServer,
                };
                match st.pending(peer).get(key) {
                    Some(p) if !p.parked => {
                        answers = p.tag;
                        st.pending(peer).remove(key);
                    }
                    Some(_) | None => {
                        warn!(
                            "{} response to a request that is not pending: dropped",
                            from.label()
                        );
                        return Step::Done(Out::Nothing);
                    }
                }
            }
            let verdict = shared.interceptor.on_message(
                &Message {
                    direction: from,
                    envelope: env,
                    raw,
                    frame,
                    answers,
                },
                &handle,
            );
            simple(from, verdict)
        }
    }
}

/// A response from the upstream to a request toolgate sent itself
/// ([`ProxyHandle::request_server`]): handed to its waiter and consumed (true). Ids in this
/// relay's reserved space never belong to the client (its requests with such ids are
/// refused, see [`reserved_client_id`]), so a late answer is consumed too.
fn own_server_response(shared: &RelayParts, st: &mut InFlight, key: &IdKey, raw: &[u8]) -> bool {
    let Some(id) = key
        .as_str()
        .filter(|id| id.starts_with(&shared.origin_prefix))
    else {
        return false;
    };
    match st.server_origin.remove(id) {
        Some(waiter) => {
            let _ = waiter.send(raw.to_vec());
        }
        None => debug!("upstream answered a toolgate request no longer awaited: consumed"),
    }
    true
}

/// A client request whose id lies in this relay's reserved id space (its random prefix):
/// refused, so that toolgate's own requests to the upstream can never share an id with one
/// of the client's.
fn reserved_client_id(shared: &RelayParts, from: Direction, key: &IdKey) -> bool {
    from == Direction::ClientToServer
        && key
            .as_str()
            .is_some_and(|s| s.starts_with(&shared.origin_prefix))
}

/// Notes that the sender of a pending request cancelled it. The request stays pending (a
/// late response is still relayed, as without toolgate), but the proxy will not answer it
/// itself when the other side exits.
fn mark_cancelled(shared: &RelayParts, from: Direction, params: Option<&RawValue>) {
    let Some(params) = params else { return };
    let Ok(view) = toolgate_mcp::views::CancelledParams::parse(params) else {
        return;
    };
    let Some(key) = IdKey::from_raw(view.request_id) else {
        return;
    };
    if let Some(p) = shared.lock().pending(from).get_mut(&key) {
        p.cancelled = true;
    }
}

fn simple(from: Direction, verdict: Verdict) -> Step {
    match verdict {
        Verdict::Forward | Verdict::Watch(_) => Step::Forward,
        Verdict::Replace(bytes) | Verdict::ReplaceWatch(bytes, _) => Step::ForwardBytes(bytes),
        Verdict::Reply(bytes) => Step::Done(Out::to_sender(from, bytes)),
        Verdict::Drop | Verdict::Withdraw => Step::Done(Out::Nothing),
        Verdict::Park(fut) => Step::Park(fut, None, None),
    }
}

async fn resolve_parked(
    shared: Arc<RelayParts>,
    from: Direction,
    key: Option<IdKey>,
    raw_id: Option<Box<str>>,
    frame: Bytes,
    fut: Parked,
) {
    let mut verdict = fut.await;
    while let Verdict::Park(next) = verdict {
        verdict = next.await;
    }
    let out = match key {
        None => match verdict {
            Verdict::Forward | Verdict::Watch(_) => Out::to_peer(from, frame),
            Verdict::Replace(bytes) | Verdict::ReplaceWatch(bytes, _) => {
                Out::to_peer(from, with_newline(bytes))
            }
            Verdict::Reply(bytes) => Out::to_sender(from, bytes),
            Verdict::Drop | Verdict::Withdraw | Verdict::Park(_) => Out::Nothing,
        },
        Some(key) => {
            let mut st = shared.lock();
            let upstream_gone = st.upstream_gone;
            let map = st.pending(from);
            if !map.get(&key).is_some_and(|p| p.parked) {
                // Already answered (e.g. the upstream exited while this was parked).
                return;
            }
            let forward = |map: &mut HashMap<IdKey, Pending>, tag: Option<u64>| {
                if let Some(p) = map.get_mut(&key) {
                    p.parked = false;
                    p.tag = tag;
                }
            };
            let raw_id = raw_id
                .as_deref()
                .and_then(|r| RawValue::from_string(r.to_owned()).ok());
            match verdict {
                Verdict::Forward
                | Verdict::Watch(_)
                | Verdict::Replace(_)
                | Verdict::ReplaceWatch(..)
                    if from == Direction::ClientToServer && upstream_gone =>
                {
                    map.remove(&key);
                    Out::to_sender(
                        from,
                        build::error_response(
                            raw_id.as_deref(),
                            INTERNAL_ERROR,
                            shared.gone_message,
                        ),
                    )
                }
                Verdict::Forward => {
                    forward(map, None);
                    Out::to_peer(from, frame)
                }
                Verdict::Watch(tag) => {
                    forward(map, Some(tag));
                    Out::to_peer(from, frame)
                }
                Verdict::Replace(bytes) => {
                    forward(map, None);
                    Out::to_peer(from, with_newline(bytes))
                }
                Verdict::ReplaceWatch(bytes, tag) => {
                    forward(map, Some(tag));
                    Out::to_peer(from, with_newline(bytes))
                }
                Verdict::Reply(bytes) => {
                    map.remove(&key);
                    Out::to_sender(from, bytes)
                }
                Verdict::Withdraw => {
                    map.remove(&key);
                    Out::Nothing
                }
                Verdict::Drop | Verdict::Park(_) => {
                    map.remove(&key);
                    Out::to_sender(
                        from,
                        build::error_response(
                            raw_id.as_deref(),
                            INTERNAL_ERROR,
                            "request dropped by toolgate",
                        ),
                    )
                }
            }
        }
    };
    dispatch(&shared, out).await;
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

async fn client_reader(shared: Arc<RelayParts>, mut input: ClientInput) {
    loop {
        match input.next().await {
            ClientEvent::Line(Line::Frame(frame)) => {
                on_frame_then_poll(&shared, Direction::ClientToServer, frame).await;
            }
            ClientEvent::Line(Line::Oversize { prefix, len }) => {
                let id = recover_id(&prefix);
                warn!(
                    "client sent a {len}-byte message, over the limit: dropped{}",
                    if id.is_some() {
                        " (request answered with an error)"
                    } else {
                        ""
                    }
                );
                let msg = format!(
                    "invalid request: message of {len} bytes exceeds the limit \
                     (help: raise `--max-message-bytes`)"
                );
                let reply = build::error_response(id.as_deref(), INVALID_REQUEST, &msg);
                dispatch(&shared, Out::Client(with_newline(reply).into())).await;
            }
            ClientEvent::Eof => break,
        }
    }
    debug!("client input closed; closing the upstream's stdin");
    shared.lock().client_gone = true;
    shared.lock().origin.clear();
    shared.to_server.close().await;
}

/// What the upstream reader reads.
enum UpstreamOut {
    Pipe(ChildStdout),
    Channel(mpsc::Receiver<Line>),
}

/// The upstream's lines, from a pipe or from a transport.
enum UpstreamLines {
    Pipe(AsyncLines<BufReader<ChildStdout>>),
    Channel(mpsc::Receiver<Line>),
}

impl UpstreamLines {
    async fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        match self {
            UpstreamLines::Pipe(lines) => lines.next_line().await,
            UpstreamLines::Channel(rx) => Ok(rx.recv().await),
        }
    }
}

async fn upstream_reader(shared: Arc<RelayParts>, upstream: UpstreamOut, max: usize) {
    let mut lines = match upstream {
        UpstreamOut::Pipe(stdout) => {
            let growth = PipeGrowth::of(stdout.as_fd());
            UpstreamLines::Pipe(
                AsyncLines::new(BufReader::with_capacity(64 * 1024, stdout), max).growing(growth),
            )
        }
        UpstreamOut::Channel(rx) => UpstreamLines::Channel(rx),
    };
    loop {
        match lines.next_line().await {
            Ok(Some(Line::Frame(frame))) => {
                on_frame_then_poll(&shared, Direction::ServerToClient, frame).await;
            }
            Ok(Some(Line::Oversize { prefix, len })) => {
                warn!("upstream wrote a {len}-byte line, over the limit: dropped");
                // If it was the response to a pending client request, answer that request.
                let reply = recover_id(&prefix).and_then(|raw| {
                    let key = IdKey::from_raw(&raw)?;
                    shared.lock().client_pending.remove(&key)?;
                    let msg = format!(
                        "upstream response of {len} bytes exceeds the limit \
                         (help: raise `--max-message-bytes`)"
                    );
                    Some(build::error_response(Some(&raw), INTERNAL_ERROR, &msg))
                });
                if let Some(reply) = reply {
                    dispatch(&shared, Out::Client(with_newline(reply).into())).await;
                }
            }
            Ok(None) => break,
            Err(err) => {
                warn!("reading the upstream's stdout failed: {err}");
                break;
            }
        }
    }
    debug!("upstream stdout closed");
}

/// The client's stdout: written in place when it is a pipe or a socket of toolgate's own
/// (the case under an MCP client: `O_NONBLOCK` on toolgate's end, driven by epoll, no
/// thread hand-off per frame); otherwise (a terminal, a file, or the same pipe or socket
/// as stdin or stderr) a dedicated thread writes it, so that toolgate never makes a file
/// description non-blocking under another reader or writer.
pub fn client_sink() -> std::io::Result<ClientSink> {
    let stdout = std::io::stdout();
    match own_stream(
        stdout.as_fd(),
        [std::io::stdin().as_fd(), std::io::stderr().as_fd()],
    )
    .and_then(writer_of)
    {
        Some(out) => Ok(ClientSink::Direct(tokio::sync::Mutex::new(
            FrameWriter::new(out, PipeGrowth::of(stdout.as_fd())),
        ))),
        None => {
            let (tx, rx) = mpsc::channel(QUEUE);
            spawn_stdout_writer(rx)?;
            Ok(ClientSink::Queue(tx))
        }
    }
}

/// The client's stdin: read on the runtime when it is a pipe or a socket of toolgate's
/// own, else by a dedicated thread (a blocking read that shutdown never waits for).
pub fn client_input(max: usize) -> std::io::Result<ClientInput> {
    let stdin = std::io::stdin();
    match own_stream(
        stdin.as_fd(),
        [std::io::stdout().as_fd(), std::io::stderr().as_fd()],
    )
    .and_then(reader_of)
    {
        Some(input) => Ok(ClientInput::Direct(
            AsyncLines::new(BufReader::with_capacity(64 * 1024, input), max)
                .growing(PipeGrowth::of(stdin.as_fd())),
        )),
        None => {
            let (tx, rx) = mpsc::channel(QUEUE);
            spawn_stdin_reader(max, tx)?;
            Ok(ClientInput::Queue(rx))
        }
    }
}

type AsyncOut = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send + Sync>>;
type AsyncIn = std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send + Sync>>;

/// A stream toolgate may make non-blocking: a pipe or socket that is not also one of
/// `others` (O_NONBLOCK applies to the open file description, which the upstream inherits
/// for stderr). Returns a duplicate of the descriptor and whether it is a socket.
fn own_stream<const N: usize>(
    fd: std::os::fd::BorrowedFd<'_>,
    others: [std::os::fd::BorrowedFd<'_>; N],
) -> Option<(std::os::fd::OwnedFd, bool)> {
    use rustix::fs::{FileType, fstat};
    let st = fstat(fd).ok()?;
    let same = |other: std::os::fd::BorrowedFd<'_>| {
        fstat(other).is_ok_and(|o| o.st_dev == st.st_dev && o.st_ino == st.st_ino)
    };
    if others.into_iter().any(same) {
        return None;
    }
    let socket = match FileType::from_raw_mode(st.st_mode) {
        FileType::Fifo => false,
        FileType::Socket => true,
        _ => return None,
    };
    Some((rustix::io::dup(fd).ok()?, socket))
}

fn writer_of((fd, socket): (std::os::fd::OwnedFd, bool)) -> Option<AsyncOut> {
    if socket {
        unix_stream(fd).map(|w| Box::pin(w) as AsyncOut)
    } else {
        tokio::net::unix::pipe::Sender::from_owned_fd(fd)
            .ok()
            .map(|w| Box::pin(w) as AsyncOut)
    }
}

fn reader_of((fd, socket): (std::os::fd::OwnedFd, bool)) -> Option<AsyncIn> {
    if socket {
        unix_stream(fd).map(|r| Box::pin(r) as AsyncIn)
    } else {
        tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
            .ok()
            .map(|r| Box::pin(r) as AsyncIn)
    }
}

/// A socket of toolgate's own, non-blocking, on the runtime.
fn unix_stream(fd: std::os::fd::OwnedFd) -> Option<tokio::net::UnixStream> {
    let std = std::os::unix::net::UnixStream::from(fd);
    std.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(std).ok()
}

/// Writes frames to the client's stdout on a dedicated thread (a blocking write must
/// never stall the relay). One write per frame, flushed.
pub fn spawn_stdout_writer(
    mut rx: mpsc::Receiver<ClientOut>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("toolgate-stdout".into())
        .spawn(move || {
            use std::io::Write;
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            let mut broken = false;
            while let Some(msg) = rx.blocking_recv() {
                match msg {
                    ClientOut::Frame(frame) => {
                        if broken {
                            continue;
                        }
                        if let Err(err) = out.write_all(&frame).and_then(|()| out.flush()) {
                            debug!("writing to the client failed: {err}");
                            broken = true;
                        }
                    }
                    ClientOut::Barrier(ack) => {
                        let _ = ack.send(());
                    }
                }
            }
        })
}

/// Reads the client's stdin on a dedicated thread (tokio stdin reads cannot be
/// cancelled, so shutdown never waits for it).
pub fn spawn_stdin_reader(
    max: usize,
    tx: mpsc::Sender<ClientEvent>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("toolgate-stdin".into())
        .spawn(move || {
            let reader = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin());
            let mut lines = super::lines::SyncLines::new(reader, max);
            loop {
                let event = match lines.next_line() {
                    Ok(Some(line)) => ClientEvent::Line(line),
                    Ok(None) => ClientEvent::Eof,
                    Err(err) => {
                        warn!("reading stdin failed: {err}");
                        ClientEvent::Eof
                    }
                };
                let eof = matches!(event, ClientEvent::Eof);
                if tx.blocking_send(event).is_err() || eof {
                    return;
                }
            }
        })
}

/// A per-process random value (std's hasher keys are seeded from the OS).
fn random_u64() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(u64::from(std::process::id()));
    hasher.finish()
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
