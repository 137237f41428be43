//! Tamper-evident, privacy-preserving audit records for toolgate.
//!
//! # Format
//!
//! A log is a file of JSON lines. Line 1 is a header record
//! (`{"seq":0,"prev":<sha256 of GENESIS>,"time":…,"kind":"header","format":"toolgate-audit/1","chain":<random id>}`);
//! every later line is a [`Record`] whose `seq` is one more than the line before and whose
//! `prev` is the hex SHA-256 of the previous line's exact bytes (without its `\n`). Editing,
//! deleting, inserting or reordering a line therefore breaks a link that [`verify_path`]
//! reports with its line number and seq.
//!
//! Records hold digests, not data: `args_sha256` and `result_sha256` are SHA-256 of the
//! RFC 8785 canonical JSON ([`canonical_sha256`]); network destinations are host and
//! method only. Raw arguments and results go in [`Raw`] only when the user asked for it.
//!
//! # Use from the proxy
//!
//! ```no_run
//! use toolgate_audit::{AuditWriter, Event, Kind};
//! # fn main() -> Result<(), toolgate_audit::AuditError> {
//! let audit = AuditWriter::open(".toolgate/audit.jsonl")?;
//! let mut event = Event::new(Kind::Decision);
//! event.tool = Some("read_file".into());
//! event.effect = Some("deny".into());
//! audit.append(&event)?; // on error: deny the call (fail closed)
//! # Ok(()) }
//! ```

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
    Approval, ApprovalHow, ApprovalScope, Event, FORMAT, Kind, Net, Raw, Record, sanitize_host,
};
pub use verify::{Problem, ProblemKind, Verification, verify_path, verify_reader};
pub use writer::{Appended, AuditWriter, Durability, WriterOptions, now_rfc3339};
