#![doc = include_str!("../README.md")]

mod chain;
mod error;
mod read;
mod record;
mod verify;
mod writer;

pub use chain::{
    GENESIS, canonical_sha256, canonical_sha256_of_json, genesis_hash, line_hash, sha256_hex,
};
pub use error::AuditError;
pub use read::{ReadLine, Summary, read_records, summarize, tail};
pub use record::{
    Approval, ApprovalHow, ApprovalScope, Event, FORMAT, Kind, Net, Raw, Record, Redaction,
    sanitize_host,
};
pub use verify::{Problem, ProblemKind, Verification, verify_path, verify_reader};
pub use writer::{Appended, AuditWriter, Durability, WriterOptions, now_rfc3339};

/// Makes text from the log safe for a terminal: control characters (ANSI escapes,
/// carriage returns a server could have put in a tool name or path) are shown escaped.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}
