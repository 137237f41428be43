//! The interception seam: every message, in order, through one synchronous call.
//!
//! The relay calls [`Interceptor::on_message`] for every well-formed message in both
//! directions, in the order it was read. The common answer is [`Verdict::Forward`], which
//! forwards the original bytes untouched (no copy, no re-serialisation). A verdict can
//! instead answer the sender, replace the bytes, drop the message, or park it: parking
//! spawns the given future and lets other traffic flow; when it resolves, its verdict is
//! applied as if it had been returned directly.
//!
//! Requests keep their pending entry while parked, so a parked request is still answered
//! (with `-32603`) if the upstream exits. A request is never silently dropped:
//! [`Verdict::Drop`] on a request is turned into an error reply.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use toolgate_mcp::Envelope;

use super::handle::ProxyHandle;

/// Which way a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the MCP client (toolgate's stdin) to the upstream server.
    ClientToServer,
    /// From the upstream server (its stdout) to the client (toolgate's stdout).
    ServerToClient,
}

impl Direction {
    /// A short label for logs.
    pub fn label(self) -> &'static str {
        match self {
            Direction::ClientToServer => "client->server",
            Direction::ServerToClient => "server->client",
        }
    }
}

/// One message as the interceptor sees it.
#[derive(Debug)]
pub struct Message<'a> {
    /// Which way it travels.
    pub direction: Direction,
    /// The classified envelope, borrowed from `raw`.
    pub envelope: &'a Envelope<'a>,
    /// The message's bytes, without the trailing newline.
    pub raw: &'a [u8],
    /// The frame `raw` is part of (the whole line; a batch when the message is one of its
    /// elements). A part of it can be kept without a copy: `frame.slice_ref(part)`.
    pub frame: &'a bytes::Bytes,
    /// For a response: the tag given by [`Verdict::Watch`] to the request it answers.
    pub answers: Option<u64>,
}

/// A parked decision: resolves later to a verdict.
pub type Parked = Pin<Box<dyn Future<Output = Verdict> + Send + 'static>>;

/// What to do with one message.
pub enum Verdict {
    /// Forward the original bytes to the other side.
    Forward,
    /// Forward the original bytes; the response to this request will carry `tag` in
    /// [`Message::answers`] (to observe `tools/list` or `tools/call` results).
    Watch(u64),
    /// Forward these bytes instead (one JSON message, no trailing newline).
    Replace(Vec<u8>),
    /// Forward these bytes instead, and hand `tag` back with the response (as
    /// [`Verdict::Watch`]). On anything but a request this is [`Verdict::Replace`].
    ReplaceWatch(Vec<u8>, u64),
    /// Do not forward; send these bytes (one JSON message) back to the sender instead.
    Reply(Vec<u8>),
    /// Forward nothing. For a request this becomes a `-32603` error reply.
    Drop,
    /// Decide later without blocking other traffic.
    Park(Parked),
    /// Forward nothing and answer nothing: the sender withdrew the request (e.g. a parked
    /// call the client cancelled; MCP: a cancelled request gets no response). The request
    /// is forgotten. Elsewhere this is [`Verdict::Drop`] without the error reply.
    Withdraw,
}

impl fmt::Debug for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Forward => f.write_str("Forward"),
            Verdict::Watch(tag) => write!(f, "Watch({tag})"),
            Verdict::Replace(b) => write!(f, "Replace({} bytes)", b.len()),
            Verdict::ReplaceWatch(b, tag) => write!(f, "ReplaceWatch({} bytes, {tag})", b.len()),
            Verdict::Reply(b) => write!(f, "Reply({} bytes)", b.len()),
            Verdict::Drop => f.write_str("Drop"),
            Verdict::Park(_) => f.write_str("Park(..)"),
            Verdict::Withdraw => f.write_str("Withdraw"),
        }
    }
}

/// Decides every message the relay carries.
///
/// Called synchronously on the relay's hot path: return quickly, and park anything that
/// must wait (a human, a timer, a request to the client through [`ProxyHandle`]).
pub trait Interceptor: Send + Sync + 'static {
    /// Decides one message.
    fn on_message(&self, message: &Message<'_>, proxy: &ProxyHandle) -> Verdict;

    /// Called after the outputs of a message have been written (a forwarded response is
    /// with the client), before the relay reads the next message from the same side: the
    /// place for work that must happen but need not delay delivery, such as auditing a
    /// result. Must be quick when there is nothing to do.
    fn after_delivery(&self) {}

    /// Called once before the relay carries any message (e.g. to join an agent session at
    /// the broker). The relay waits for it, so it must be bounded.
    fn on_start(&self) -> StartFuture<'_> {
        Box::pin(std::future::ready(()))
    }
}

/// What [`Interceptor::on_start`] returns.
pub type StartFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;

/// Forwards everything untouched: the transparent relay.
#[derive(Debug, Clone, Copy, Default)]
pub struct Passthrough;

impl Interceptor for Passthrough {
    #[inline]
    fn on_message(&self, _message: &Message<'_>, _proxy: &ProxyHandle) -> Verdict {
        Verdict::Forward
    }
}
