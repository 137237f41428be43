//! Reading a log: records, summary, tail.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::error::AuditError;
use crate::record::{Kind, Record};
use crate::verify::{Verification, verify_path};

/// One line read back from a log.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadLine {
    /// 1-based line number.
    pub line: u64,
    /// The record, or why the line could not be read as one.
    pub record: Result<Record, String>,
}

/// Counts over a log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    /// Records after the header that could be read.
    pub records: u64,
    /// Lines that could not be read as records.
    pub unreadable: u64,
    /// Time of the first record after the header.
    pub first_time: Option<String>,
    /// Time of the last record.
    pub last_time: Option<String>,
    /// Records per kind (`decision`, `result`, …).
    pub by_kind: BTreeMap<String, u64>,
    /// Decisions per effect (`allow`, `deny`, `ask`).
    pub by_effect: BTreeMap<String, u64>,
    /// Decisions per contract that decided.
    pub by_contract: BTreeMap<String, u64>,
    /// Decisions per rule that decided.
    pub by_rule: BTreeMap<String, u64>,
    /// Decisions per tool.
    pub by_tool: BTreeMap<String, u64>,
    /// Decisions per server.
    pub by_server: BTreeMap<String, u64>,
    /// The chain check (serialised as `chain`).
    #[serde(rename = "chain", serialize_with = "chain_json")]
    pub verification: Verification,
}

/// The chain check as `audit summary --json` and `serve`'s `audit_summary` show it.
fn chain_json<S: serde::Serializer>(v: &Verification, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(
        &serde_json::json!({
            "intact": v.is_intact(),
            "problem": v.problem.as_ref().map(ToString::to_string),
            "line": v.problem.as_ref().map(|p| p.line),
            "id": v.chain,
            "verified_records": v.records,
            "last_seq": v.last_seq,
            "last_hash": v.last_hash,
        }),
        s,
    )
}

fn open(path: &Path) -> Result<BufReader<File>, AuditError> {
    File::open(path)
        .map(|f| BufReader::with_capacity(64 * 1024, f))
        .map_err(|source| AuditError::Io {
            action: "cannot open audit log",
            path: path.to_path_buf(),
            source,
        })
}

/// Calls `each` for every line of the log (header included), in order.
pub fn read_records(path: &Path, mut each: impl FnMut(ReadLine)) -> Result<(), AuditError> {
    let mut reader = open(path)?;
    let mut buf = Vec::new();
    let mut line = 0u64;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|source| AuditError::Io {
                action: "cannot read audit log",
                path: path.to_path_buf(),
                source,
            })?;
        if n == 0 {
            return Ok(());
        }
        line += 1;
        let record = serde_json::from_slice::<Record>(buf.strip_suffix(b"\n").unwrap_or(&buf))
            .map_err(|e| e.to_string());
        each(ReadLine { line, record });
    }
}

/// Summarises the log at `path` and verifies its chain.
pub fn summarize(path: &Path) -> Result<Summary, AuditError> {
    let verification = verify_path(path)?;
    let mut s = Summary {
        records: 0,
        unreadable: 0,
        first_time: None,
        last_time: None,
        by_kind: BTreeMap::new(),
        by_effect: BTreeMap::new(),
        by_contract: BTreeMap::new(),
        by_rule: BTreeMap::new(),
        by_tool: BTreeMap::new(),
        by_server: BTreeMap::new(),
        verification,
    };
    read_records(path, |l| {
        let record = match l.record {
            Ok(r) => r,
            Err(_) => {
                s.unreadable += 1;
                return;
            }
        };
        if record.event.kind == Kind::Header {
            return;
        }
        s.records += 1;
        if s.first_time.is_none() {
            s.first_time = Some(record.time.clone());
        }
        s.last_time = Some(record.time.clone());
        *s.by_kind
            .entry(record.event.kind.as_str().to_owned())
            .or_default() += 1;
        if record.event.kind != Kind::Decision {
            return;
        }
        let e = record.event;
        for (map, key) in [
            (&mut s.by_effect, e.effect),
            (&mut s.by_contract, e.contract),
            (&mut s.by_rule, e.rule),
            (&mut s.by_tool, e.tool),
            (&mut s.by_server, e.server),
        ] {
            if let Some(key) = key {
                *map.entry(key).or_default() += 1;
            }
        }
    })?;
    Ok(s)
}

/// The last `n` lines after the header, oldest first.
pub fn tail(path: &Path, n: usize) -> Result<Vec<ReadLine>, AuditError> {
    let mut last: VecDeque<ReadLine> = VecDeque::with_capacity(n.min(4096).saturating_add(1));
    if n == 0 {
        return Ok(Vec::new());
    }
    read_records(path, |l| {
        if matches!(&l.record, Ok(r) if r.event.kind == Kind::Header) {
            return;
        }
        if last.len() == n {
            last.pop_front();
        }
        last.push_back(l);
    })?;
    Ok(last.into())
}
