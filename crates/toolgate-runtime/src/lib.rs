//! The enforcement runtime of toolgate: everything between an MCP client and a server that
//! `toolgate wrap`, `toolgate serve`, the broker's hooks and the gateway share.
//!
//! - [`proxy`]: the byte-exact JSON-RPC relay and the [`proxy::Interceptor`] seam;
//! - [`enforce`]: the one interceptor that decides every call (engine, audit, pins, asks);
//! - [`approval`]: how a person is asked (terminal, elicitation, broker) and sealed answers;
//! - [`remote`]: the MCP-over-HTTP upstream transport (`wrap --url`) with OAuth;
//! - [`selfprotect`]: toolgate's own files and processes, judged against the live system;
//! - [`pins`], [`fsfacts`], [`fsutil`], [`paths`], [`child`], [`clock`], [`duration`], [`rt`]:
//!   small services.
//!
//! The policy itself is decided by `toolgate-policy`, which does no IO; this crate feeds it
//! facts (files, processes, time) and carries out what it decides.

pub mod approval;
pub mod child;
pub mod clock;
pub mod duration;
pub mod enforce;
pub mod fsfacts;
pub mod fsutil;
pub mod paths;
pub mod pins;
pub mod proxy;
pub mod remote;
pub mod rt;
pub mod selfprotect;
pub mod serve;
pub mod stdio_probe;
pub mod trust;
