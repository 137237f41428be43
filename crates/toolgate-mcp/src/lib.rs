#![doc = include_str!("../README.md")]

pub mod build;
mod envelope;
mod id;
pub mod protocol;
mod recover;
pub mod spelling;
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
