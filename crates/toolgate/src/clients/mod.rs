//! Client integration: finding MCP clients' configuration files and wrapping (or
//! unwrapping) their servers with toolgate. Used by `toolgate init` and
//! `toolgate unwrap`.

pub mod discovery;
pub mod document;
pub mod hooks;
pub mod remote;
mod rewrite;
pub mod session;
pub mod write;

pub use session::{Action, Selection, run};
