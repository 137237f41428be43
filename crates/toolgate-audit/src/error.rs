//! Errors. Every one of them means "this record was not durably appended": the proxy
//! must deny the call it was recording (fail closed).

use std::path::PathBuf;

/// Why the audit log could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// A filesystem operation failed (create, open, lock, write, sync, read).
    #[error("{action} `{}`: {source}", path.display())]
    Io {
        /// What was being done, e.g. "cannot write audit record to".
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The path exists but is not a regular file (a directory, a symlink, a device…).
    #[error(
        "audit log `{}` is not a regular file\nhelp: point `--audit` at a file path; symlinks are refused so the log cannot be redirected",
        path.display()
    )]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// The end of an existing log is damaged, so the chain cannot be continued.
    #[error(
        "audit log `{}` cannot be continued: {detail}\nhelp: run `toolgate audit verify --audit {}` to see the damage, then move the file aside to start a new log",
        path.display(),
        path.display()
    )]
    DamagedTail {
        /// The log.
        path: PathBuf,
        /// What is wrong with its last lines.
        detail: String,
    },
    /// The log file was deleted or replaced while the writer had it open.
    #[error(
        "audit log `{}` was deleted while in use; refusing to write into an unlinked file",
        path.display()
    )]
    Unlinked {
        /// The log.
        path: PathBuf,
    },
    /// The caller asked to write a record this writer reserves for itself.
    #[error("cannot append a `{kind}` record: the writer writes headers itself")]
    ReservedKind {
        /// The refused kind.
        kind: &'static str,
    },
    /// The record could not be serialised.
    #[error("cannot encode audit record: {0}")]
    Encode(#[from] serde_json::Error),
    /// Another thread panicked while writing; the writer's state is unknown.
    #[error("audit writer is unusable: a previous write panicked")]
    Poisoned,
}
