//! The `toolgate report` benchmark: writes an audit log of N records (default 1,000,000)
//! in a temporary directory, runs `toolgate report --json --audit LOG` on it, and prints the
//! wall time and the child's peak RSS.
//!
//! `cargo build --release -p toolgate -p toolgate-testkit &&
//!  target/release/bench_report [N] [path/to/toolgate]`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::indexing_slicing,
    reason = "a benchmark tool: a failed setup step aborts the run with a message; a benchmark tool: its report is printed"
)]

use std::process::{Command, Stdio};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(1_000_000, |a| a.parse().expect("N"));
    let toolgate = args.next().map_or_else(
        || toolgate_testkit::built_binary("toolgate"),
        |p| std::fs::canonicalize(p).expect("the toolgate binary"),
    );
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let t = Instant::now();
    toolgate_testkit::auditlog::write_log(&log, toolgate_testkit::auditlog::synthetic_events(n));
    let size = std::fs::metadata(&log).unwrap().len();
    println!(
        "wrote {n} records ({:.1} MB) in {:.2} s",
        size as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    for run in 1..=3 {
        let t = Instant::now();
        let out = Command::new(&toolgate)
            .args(["report", "--json", "--audit"])
            .arg(&log)
            .current_dir(dir.path())
            .env("TOOLGATE_PINS_DIR", dir.path().join("pins"))
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        let wall = t.elapsed().as_secs_f64();
        assert!(out.status.success(), "toolgate report failed");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["audit"]["records"], n, "every record counted");
        assert_eq!(v["audit"]["chain"]["intact"], true);
        let rss_kb = max_child_rss_kb();
        println!(
            "run {run}: {wall:.2} s, peak RSS {:.1} MB",
            rss_kb as f64 / 1024.0
        );
    }
}

/// The peak RSS of the largest child waited for, in KiB (`getrusage(RUSAGE_CHILDREN)`).
#[allow(
    unsafe_code,
    reason = "getrusage(2) through libc, the only way to read the children's peak RSS"
)]
fn max_child_rss_kb() -> i64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable `rusage`; getrusage only writes into it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) };
    if rc != 0 {
        return -1;
    }
    // SAFETY: getrusage succeeded, so it initialised the struct.
    unsafe { usage.assume_init() }.ru_maxrss
}
