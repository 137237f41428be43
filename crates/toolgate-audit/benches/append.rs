//! Cost of one audited record: `cargo bench -p toolgate-audit --bench append`.
//!
//! Prints p50/p99/max of `AuditWriter::append` (lock, tail check, encode, hash, one write)
//! for a typical decision record, with the default durability and with `Durability::Sync`,
//! and the throughput of `verify_path`. No assertions: figures go to docs/benchmarks.md.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::time::{Duration, Instant};

use toolgate_audit::{
    AuditWriter, Durability, Event, Kind, WriterOptions, canonical_sha256, verify_path,
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

fn main() {
    // `cargo test --benches` runs this too; keep that quick.
    let quick =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let n = if quick { 200 } else { 20_000 };
    run("flush", Durability::Flush, n);
    run("sync", Durability::Sync, if quick { 20 } else { 500 });
}
