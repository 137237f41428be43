//! Cost of one audited record: `cargo bench -p toolgate-audit --bench append [-- FILTER]`.
//!
//! Prints p50/p99/max of `AuditWriter::append` (lock, tail check, encode, hash, one write)
//! for a typical decision record, with the default durability and with `Durability::Sync`,
//! and the throughput of `verify_path`; then the cost of the canonical hash of raw JSON
//! (`canonical_sha256_of_json`) against parsing into a value and hashing that, for a 1 MiB
//! text result and a small arguments object. A FILTER runs only the cases whose name
//! contains it (`append`, `canonical`). No assertions: figures go to docs/benchmarks.md.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    reason = "a benchmark tool: a failed setup step aborts the run with a message; a benchmark tool: its report is printed"
)]

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use toolgate_audit::{
    AuditWriter, Durability, Event, Kind, WriterOptions, canonical_sha256,
    canonical_sha256_of_json, verify_path,
};

fn event(i: u64) -> Event {
    let mut e = Event::new(Kind::Decision);
    e.session = Some("0123456789abcdef".into());
    e.request_id = Some(i.to_string());
    e.server = Some("filesystem".into());
    e.tool = Some("read_file".into());
    e.fingerprint = Some("ab".repeat(32));
    e.operations = vec!["fs.read".into()];
    e.resources = vec![format!("/home/user/project/src/module{i}.rs")];
    e.effect = Some("allow".into());
    e.rule = Some("workspace-read".into());
    e.args_sha256 =
        Some(canonical_sha256(&serde_json::json!({"path": format!("src/module{i}.rs")})).unwrap());
    e.latency_us = Some(12);
    e
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn run(name: &str, durability: Durability, n: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let w = AuditWriter::open_with(&path, WriterOptions { durability }).unwrap();
    for i in 0..100 {
        w.append(&event(i)).unwrap();
    }
    let mut times = Vec::with_capacity(n as usize);
    for i in 0..n {
        let e = event(i);
        let start = Instant::now();
        w.append(&e).unwrap();
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        "append ({name}): n={n} p50={:?} p99={:?} max={:?}",
        percentile(&times, 0.50),
        percentile(&times, 0.99),
        times[times.len() - 1]
    );
    let size = std::fs::metadata(&path).unwrap().len();
    let start = Instant::now();
    let v = verify_path(&path).unwrap();
    let took = start.elapsed();
    assert!(v.is_intact());
    println!(
        "verify: {} records, {} KiB in {took:?} ({:.0} records/s)",
        v.records,
        size / 1024,
        v.records as f64 / took.as_secs_f64()
    );
}

/// A text result of about 1 MiB as servers write it (members not sorted), a line every 137
/// bytes.
fn large_result() -> Vec<u8> {
    let line = format!("{}\n", "x".repeat(136));
    let text = line.repeat((1 << 20) / line.len());
    serde_json::to_vec(&serde_json::json!({
        "content": [{"type": "text", "text": text}],
        "isError": false,
    }))
    .unwrap()
}

/// Arguments of a typical call, about 200 bytes.
fn small_arguments() -> Vec<u8> {
    br#"{"path":"/home/user/project/src/module17.rs","encoding":"utf-8","options":{"recursive":false,"max_bytes":1048576,"follow_symlinks":true},"pattern":"fn main\\(\\)","context_lines":3}"#
        .to_vec()
}

fn timed(f: &mut impl FnMut()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

/// Median times of `f` and `g` over `n` runs each, taken in turns (after a few to warm up),
/// so both see the allocator in the same state.
fn medians(n: usize, mut f: impl FnMut(), mut g: impl FnMut()) -> (Duration, Duration) {
    let (mut fs, mut gs) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n + n.div_ceil(10) {
        let (tf, tg) = (timed(&mut f), timed(&mut g));
        if i >= n.div_ceil(10) {
            fs.push(tf);
            gs.push(tg);
        }
    }
    fs.sort();
    gs.sort();
    (fs[n / 2], gs[n / 2])
}

fn canonical(name: &str, json: &[u8], n: usize) {
    let value_path = || {
        let value: serde_json::Value = serde_json::from_slice(json).unwrap();
        canonical_sha256(&value).unwrap()
    };
    assert_eq!(canonical_sha256_of_json(json).unwrap(), value_path());
    let (raw, value) = medians(
        n,
        || {
            std::hint::black_box(canonical_sha256_of_json(std::hint::black_box(json)).unwrap());
        },
        || {
            std::hint::black_box(value_path());
        },
    );
    let (sha, _) = medians(
        n,
        || {
            std::hint::black_box(Sha256::digest(std::hint::black_box(json)));
        },
        || {},
    );
    println!(
        "canonical ({name}, {} bytes): canonical_sha256_of_json p50={raw:?}  parse + canonical_sha256 p50={value:?}  plain SHA-256 of the bytes p50={sha:?}",
        json.len()
    );
}

fn main() {
    // `cargo test --benches` runs this too; keep that quick.
    let quick =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .unwrap_or_default();
    let n = if quick { 200 } else { 20_000 };
    if "append (flush)".contains(&filter) {
        run("flush", Durability::Flush, n);
    }
    if "append (sync)".contains(&filter) {
        run("sync", Durability::Sync, if quick { 20 } else { 500 });
    }
    if "canonical 1 MiB result".contains(&filter) {
        canonical("1 MiB result", &large_result(), if quick { 5 } else { 300 });
    }
    if "canonical small arguments".contains(&filter) {
        canonical(
            "small arguments",
            &small_arguments(),
            if quick { 50 } else { 100_000 },
        );
    }
}
