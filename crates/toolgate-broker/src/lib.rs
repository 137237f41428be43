//! The local approval broker: a per-user daemon on a Unix socket that gives every proxy of
//! a user one place to ask a human (`toolgate approvals`).
//!
//! Access control, in order: the directory (0700, ours, not group/world writable), the socket
//! (0600), the peer's uid (`SO_PEERCRED`, must be ours) and a 32-byte token from a 0600 file
//! compared in constant time. Anything wrong on the proxy side is a deny.
//!
//! - `daemon.rs`: the broker process; `hooks.rs`: how it decides a client hook's event;
//! - `client.rs`: a proxy's link to it ([`BrokerChannel`]), its approval channel and share;
//! - `proto.rs`: the line protocol; `transcript.rs`: the client's transcript, read to vouch
//!   for a prompt;
//! - [`hook`]: the hook process (`toolgate hook`, `toolgate-hook`): client formats in and out.

pub mod client;
pub mod daemon;
pub mod hook;
pub mod hooks;
pub mod proto;
pub mod transcript;

pub use client::{BrokerChannel, connect};
pub use toolgate_runtime::paths::{self, Layout};
