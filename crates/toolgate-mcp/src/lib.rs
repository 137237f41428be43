//! Zero-copy JSON-RPC and MCP views over raw bytes.
//!
//! Everything here is pure: it looks at the bytes of one newline-delimited frame and
//! tells the proxy what it is, without re-serialising anything the proxy forwards.
//!
//! - [`classify`] turns one line (without its newline) into a [`Frame`]: a parse
//!   error, a batch of raw elements, or a single [`Envelope`] borrowed from the
//!   bytes and classified as a request, notification, response, error response or
//!   invalid message. Classification is total and never panics.
//! - [`IdKey`] is a hashable key for a JSON-RPC id, used to match responses to
//!   requests.
//! - [`build`] writes the few frames the proxy originates itself (error replies,
//!   tool-error results, requests), echoing raw ids byte for byte.
//! - [`views`] are borrowed views of the MCP params and results the enforcement
//!   layer needs (`tools/call`, `initialize`, per-request `_meta`, `tools/list`,
//!   `notifications/cancelled`).
//! - [`splice`] removes tools from a `tools/list` response frame, keeping every other
//!   byte.

pub mod build;
mod envelope;
mod id;
mod recover;
pub mod splice;
pub mod views;

pub use envelope::{Envelope, Frame, Invalid, Kind, ParseError, classify, classify_value};
pub use id::{IdKey, IdKind, id_kind};
pub use recover::recover_id;
pub use serde_json::value::RawValue;

/// JSON-RPC error code: invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC error code: the JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC error code: the method does not exist or is not available.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC error code: invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC error code: internal error.
pub const INTERNAL_ERROR: i64 = -32603;
