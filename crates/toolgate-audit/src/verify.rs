//! Verifying a log: walk the chain and report the first problem, located.
//!
//! The rules, for line `n` (1-based) holding `seq` and `prev`:
//! - line 1 is the header: `kind: "header"`, `seq: 0`, `prev` = SHA-256 of [`crate::GENESIS`];
//! - every later line has `seq` = previous `seq` + 1 and `prev` = SHA-256 of the previous
//!   line's exact bytes (without its newline);
//! - every line is one JSON object ending in `\n`.
//!
//! When a rule breaks, the verifier looks at the rest of the file to say what most likely
//! happened: an edit, a deletion, an insertion or a reordering.
//!
//! Limits, as for any hash chain without an external anchor: removing records *from the
//! end* of the log (at a line boundary) or editing the very last record cannot be told
//! from a shorter log. [`Verification::last_seq`] and [`Verification::last_hash`] are the
//! values to keep elsewhere when that matters.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::chain::{ChainFields, genesis_hash, line_hash, parse_chain_fields};
use crate::error::AuditError;

/// The outcome of verifying a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Lines read (including the header and a broken line, if any).
    pub lines: u64,
    /// Records after the header that passed the checks.
    pub records: u64,
    /// The chain id from the header.
    pub chain: Option<String>,
    /// Time of the first record (the header's time).
    pub first_time: Option<String>,
    /// Time of the last good record.
    pub last_time: Option<String>,
    /// `seq` of the last good record.
    pub last_seq: Option<u64>,
    /// Link hash of the last good line: keep it elsewhere to detect truncation later.
    pub last_hash: Option<String>,
    /// The first problem found, or `None` when the log is intact.
    pub problem: Option<Problem>,
}

impl Verification {
    /// Whether the whole file verified.
    pub fn is_intact(&self) -> bool {
        self.problem.is_none()
    }
}

/// Where the chain breaks and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line number where the problem was detected.
    pub line: u64,
    /// `seq` written on that line, when it could be read.
    pub seq: Option<u64>,
    /// What is wrong.
    pub kind: ProblemKind,
}

/// The kinds of damage the verifier recognises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProblemKind {
    /// The file has no lines at all.
    Empty,
    /// The line is not a JSON object with a numeric `seq` and a string `prev`.
    InvalidJson {
        /// The parser's message.
        detail: String,
    },
    /// The last line has no newline: a write was cut off (or the file was truncated).
    Truncated,
    /// The first line is not a header with seq 0: the start of the log is missing.
    MissingHeader,
    /// The header's `prev` is not the genesis hash.
    BadGenesis,
    /// A header appears after line 1 (two logs concatenated, or a line inserted).
    UnexpectedHeader,
    /// A record was changed after it was written: its hash no longer matches the next
    /// line's `prev`.
    Edited {
        /// The line that was changed.
        edited_line: u64,
        /// Its seq.
        edited_seq: u64,
    },
    /// Records are missing between two lines.
    Deleted {
        /// First missing seq.
        from_seq: u64,
        /// Last missing seq (inclusive).
        to_seq: u64,
    },
    /// A line that does not belong to the chain was inserted.
    Inserted {
        /// The foreign line.
        inserted_line: u64,
    },
    /// The expected record exists but later in the file: records were moved.
    Reordered {
        /// The seq that should have come here.
        expected_seq: u64,
        /// Where that seq actually is.
        found_at_line: u64,
    },
    /// The line repeats a seq already seen (a copied or inserted record).
    Duplicate {
        /// Line where this seq first appeared.
        first_line: u64,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = match self.seq {
            Some(seq) => format!("line {} (seq {seq})", self.line),
            None => format!("line {}", self.line),
        };
        match &self.kind {
            ProblemKind::Empty => write!(f, "the file is empty: no header, no records"),
            ProblemKind::InvalidJson { detail } => {
                write!(f, "{at} is not a valid audit record: {detail}")
            }
            ProblemKind::Truncated => write!(
                f,
                "{at} is truncated: the last line has no newline (a write was cut off or the file was cut)"
            ),
            ProblemKind::MissingHeader => write!(
                f,
                "{at}: the log does not start with its header (seq 0): the beginning of the log was deleted"
            ),
            ProblemKind::BadGenesis => write!(
                f,
                "{at}: the header's `prev` is not the genesis hash: the header was edited"
            ),
            ProblemKind::UnexpectedHeader => write!(
                f,
                "{at} is a second header: another log was appended or a line was inserted"
            ),
            ProblemKind::Edited {
                edited_line,
                edited_seq,
            } => write!(
                f,
                "line {edited_line} (seq {edited_seq}) was edited: its hash does not match the `prev` of {at}"
            ),
            ProblemKind::Deleted { from_seq, to_seq } => {
                if from_seq == to_seq {
                    write!(
                        f,
                        "record seq {from_seq} was deleted: {at} follows seq {}",
                        from_seq.saturating_sub(1)
                    )
                } else {
                    write!(
                        f,
                        "records seq {from_seq} to {to_seq} were deleted: {at} follows seq {}",
                        from_seq.saturating_sub(1)
                    )
                }
            }
            ProblemKind::Inserted { inserted_line } => {
                if *inserted_line == self.line {
                    write!(f, "{at} was inserted: it does not belong to the chain")
                } else {
                    write!(
                        f,
                        "line {inserted_line} was inserted: {at} continues the chain from the line before it"
                    )
                }
            }
            ProblemKind::Reordered {
                expected_seq,
                found_at_line,
            } => write!(
                f,
                "records were reordered: seq {expected_seq} was expected at {at}, but it is at line {found_at_line}"
            ),
            ProblemKind::Duplicate { first_line } => write!(
                f,
                "{at} repeats the seq of line {first_line}: a record was copied or inserted"
            ),
        }
    }
}

/// Verifies the log at `path`.
pub fn verify_path(path: &Path) -> Result<Verification, AuditError> {
    let file = File::open(path).map_err(|source| AuditError::Io {
        action: "cannot open audit log",
        path: path.to_path_buf(),
        source,
    })?;
    verify_reader(file).map_err(|source| AuditError::Io {
        action: "cannot read audit log",
        path: path.to_path_buf(),
        source,
    })
}

/// One physical line.
struct RawLine {
    bytes: Vec<u8>,
    complete: bool,
}

struct Lines<R> {
    reader: BufReader<R>,
}

impl<R: Read> Lines<R> {
    fn next_line(&mut self) -> std::io::Result<Option<RawLine>> {
        let mut bytes = Vec::new();
        let n = self.reader.read_until(b'\n', &mut bytes)?;
        if n == 0 {
            return Ok(None);
        }
        let complete = bytes.last() == Some(&b'\n');
        if complete {
            bytes.pop();
        }
        Ok(Some(RawLine { bytes, complete }))
    }
}

/// The line after a problem.
struct Next {
    seq: Option<u64>,
    prev: Option<String>,
    hash: String,
}

/// What the rest of the file says about a problem.
struct Later {
    /// The line right after it.
    next: Option<Next>,
    /// Hash of the line after that.
    after_next_hash: Option<String>,
    /// The first later line holding the expected seq.
    expected_at: Option<u64>,
}

/// Verifies a log read from `reader`.
pub fn verify_reader<R: Read>(reader: R) -> std::io::Result<Verification> {
    let mut lines = Lines {
        reader: BufReader::with_capacity(64 * 1024, reader),
    };
    let mut v = Verification {
        lines: 0,
        records: 0,
        chain: None,
        first_time: None,
        last_time: None,
        last_seq: None,
        last_hash: None,
        problem: None,
    };
    // Hash of the line before the last good one (to spot a forged continuation).
    let mut before_last_hash: Option<String> = None;

    while let Some(raw) = lines.next_line()? {
        v.lines += 1;
        let no = v.lines;
        let parsed = parse_chain_fields(&raw.bytes);
        if !raw.complete {
            let seq = parsed.as_ref().ok().map(|f| f.seq);
            v.problem = Some(Problem {
                line: no,
                seq,
                kind: ProblemKind::Truncated,
            });
            return Ok(v);
        }
        let fields: ChainFields = match parsed {
            Ok(f) => f,
            Err(err) => {
                let detail = if raw.bytes.is_empty() {
                    "the line is empty".to_owned()
                } else {
                    err.to_string()
                };
                v.problem = Some(Problem {
                    line: no,
                    seq: None,
                    kind: ProblemKind::InvalidJson { detail },
                });
                return Ok(v);
            }
        };
        let hash = line_hash(&raw.bytes);
        let is_header = fields.kind.as_deref() == Some("header");

        let (expected_seq, expected_prev) = match (&v.last_seq, &v.last_hash) {
            (Some(seq), Some(h)) => (seq.saturating_add(1), h.clone()),
            _ => {
                // Line 1: the header.
                let kind = if !is_header || fields.seq != 0 {
                    Some(ProblemKind::MissingHeader)
                } else if fields.prev != genesis_hash() {
                    Some(ProblemKind::BadGenesis)
                } else {
                    None
                };
                if let Some(kind) = kind {
                    v.problem = Some(Problem {
                        line: no,
                        seq: Some(fields.seq),
                        kind,
                    });
                    return Ok(v);
                }
                v.chain = fields.chain.clone();
                v.first_time = fields.time.clone();
                v.last_time = fields.time.clone();
                v.last_seq = Some(0);
                v.last_hash = Some(hash);
                continue;
            }
        };

        if !is_header && fields.seq == expected_seq && fields.prev == expected_prev {
            v.records += 1;
            v.last_seq = Some(fields.seq);
            v.last_time = fields.time.clone();
            before_last_hash = v.last_hash.replace(hash);
            continue;
        }

        // Something is wrong here: look at the next line and search the rest for the
        // expected seq to say what (in constant memory).
        let mut later = Later {
            next: None,
            after_next_hash: None,
            expected_at: None,
        };
        while let Some(raw) = lines.next_line()? {
            v.lines += 1;
            let parsed = parse_chain_fields(&raw.bytes).ok();
            let seq = parsed.as_ref().map(|f| f.seq);
            if later.expected_at.is_none() && seq == Some(expected_seq) {
                later.expected_at = Some(v.lines);
            }
            if later.next.is_none() {
                later.next = Some(Next {
                    seq,
                    prev: parsed.map(|f| f.prev),
                    hash: line_hash(&raw.bytes),
                });
            } else if later.after_next_hash.is_none() {
                later.after_next_hash = Some(line_hash(&raw.bytes));
            }
        }
        let kind = classify(
            &fields,
            is_header,
            &hash,
            no,
            expected_seq,
            &expected_prev,
            before_last_hash.as_deref(),
            &later,
        );
        v.problem = Some(Problem {
            line: no,
            seq: Some(fields.seq),
            kind,
        });
        return Ok(v);
    }
    if v.lines == 0 {
        v.problem = Some(Problem {
            line: 1,
            seq: None,
            kind: ProblemKind::Empty,
        });
    }
    Ok(v)
}

#[allow(
    clippy::too_many_arguments,
    reason = "one call site; a struct would only rename the arguments"
)]
fn classify(
    fields: &ChainFields,
    is_header: bool,
    hash: &str,
    no: u64,
    expected_seq: u64,
    expected_prev: &str,
    before_last_hash: Option<&str>,
    later: &Later,
) -> ProblemKind {
    let next = later.next.as_ref();
    let next_continues_from_previous = next
        .is_some_and(|n| n.seq == Some(expected_seq) && n.prev.as_deref() == Some(expected_prev));
    let next_links_to_this = next.is_some_and(|n| n.prev.as_deref() == Some(hash));
    // Seq E+1 then seq E, each linking as if in the right order: a swap — unless the line
    // after them is this very line again (then this one is a copy inserted early).
    let swapped_with_next = fields.seq == expected_seq.saturating_add(1)
        && next.is_some_and(|n| n.seq == Some(expected_seq) && fields.prev == n.hash)
        && later.after_next_hash.as_deref() != Some(hash);

    // This line is foreign: the chain skips over it.
    if next_continues_from_previous && !next_links_to_this && !swapped_with_next {
        return ProblemKind::Inserted { inserted_line: no };
    }
    if is_header {
        return ProblemKind::UnexpectedHeader;
    }
    // The previous line is foreign: this one continues from the line before it.
    if fields.seq.saturating_add(1) == expected_seq
        && before_last_hash.is_some_and(|h| h == fields.prev)
    {
        return ProblemKind::Inserted {
            inserted_line: no.saturating_sub(1),
        };
    }
    if fields.seq > expected_seq {
        if let Some(found_at_line) = later.expected_at {
            return ProblemKind::Reordered {
                expected_seq,
                found_at_line,
            };
        }
        return ProblemKind::Deleted {
            from_seq: expected_seq,
            to_seq: fields.seq.saturating_sub(1),
        };
    }
    if fields.seq < expected_seq {
        // The chain was intact up to here, so seq s sits on line s + 1.
        return ProblemKind::Duplicate {
            first_line: fields.seq.saturating_add(1),
        };
    }
    // Right seq, wrong prev: the previous line changed, unless this line's own `prev`
    // was rewritten (then the next line no longer links to this one either).
    if next.is_some_and(|n| n.seq == Some(expected_seq.saturating_add(1))) && !next_links_to_this {
        return ProblemKind::Edited {
            edited_line: no,
            edited_seq: fields.seq,
        };
    }
    ProblemKind::Edited {
        edited_line: no.saturating_sub(1),
        edited_seq: expected_seq.saturating_sub(1),
    }
}
