//! The local approval broker: a per-user daemon on a Unix socket that gives every proxy of
//! a user one place to ask a human (`toolgate approvals`).
//!
//! Access control, in order: the directory (0700, ours, not group/world writable), the socket
//! (0600), the peer's uid (`SO_PEERCRED`, must be ours) and a 32-byte token from a 0600 file
//! compared in constant time. Anything wrong on the proxy side is a deny.

pub mod client;
pub mod daemon;
pub mod hooks;
pub mod paths;
pub mod proto;
pub mod transcript;

pub use client::{BrokerChannel, connect};
pub use paths::Layout;
