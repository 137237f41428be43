//! What only the [`EmbeddedStore`] has: state that survives the process (a reopen, a
//! `SIGKILL` in the middle of writing), one opener at a time, private files, expiry by the
//! wall clock. The shared semantics are in `behaviour.rs`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stdout,
    missing_debug_implementations,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; prints what it ran for the person reading the test output; test fixtures and handles, never formatted"
)]

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use toolgate_store::{BudgetAsk, Cursor, EmbeddedStore, Store, StoreError};

const TTL: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn everything_committed_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state").join("store.redb");
    let ask = BudgetAsk {
        tool: "send",
        window: Some((5, 60_000)),
    };
    let (created, cursor) = {
        let store = EmbeddedStore::open(&path, TTL).unwrap();
        assert!(store.fresh());
        store
            .append("s", &["t0".into(), "t1".into()], &["a0".into()])
            .await
            .unwrap();
        let seen = store
            .prepare("s", &Cursor::default(), Some(ask), 1_000)
            .await
            .unwrap();
        assert_eq!(seen.counts, Some((1, 1)));
        store
            .save_pins("srv", &BTreeMap::from([("x".into(), "{}".into())]))
            .await
            .unwrap();
        assert!(store.redeem_once("n", 60_000).await.unwrap());
        store.append("s", &["t2".into()], &[]).await.unwrap();
        (store.created_ms(), seen.cursor)
    };
    let store = EmbeddedStore::open(&path, TTL).unwrap();
    assert!(!store.fresh());
    assert_eq!(
        store.created_ms(),
        created,
        "the creation time is the file's"
    );
    assert!(store.has_session("s").unwrap());
    assert!(!store.has_session("other").unwrap());
    let all = store
        .prepare("s", &Cursor::default(), None, 0)
        .await
        .unwrap();
    assert_eq!(all.taint, ["t0", "t1", "t2"]);
    assert_eq!(all.approvals, ["a0"]);
    // A cursor taken before the restart goes on where it was.
    let next = store.prepare("s", &cursor, Some(ask), 2_000).await.unwrap();
    assert_eq!(next.taint, ["t2"]);
    assert!(next.approvals.is_empty());
    assert_eq!(next.counts, Some((2, 2)), "budgets count on");
    assert_eq!(store.load_pins("srv").await.unwrap().len(), 1);
    assert!(
        !store.redeem_once("n", 60_000).await.unwrap(),
        "a nonce stays spent"
    );
    // New ids come after the old ones.
    store.append("s", &["t3".into()], &[]).await.unwrap();
    let last = store.prepare("s", &next.cursor, None, 0).await.unwrap();
    assert_eq!(last.taint, ["t3"]);
}

#[tokio::test]
async fn a_second_opener_is_refused_and_files_are_private() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("broker");
    let path = home.join("state.redb");
    let store = EmbeddedStore::open(&path, TTL).unwrap();
    let err = EmbeddedStore::open(&path, TTL).unwrap_err();
    assert!(matches!(err, StoreError::InUse { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("in use by another process") && text.contains("help:"),
        "{text}"
    );
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(&home).unwrap().mode() & 0o777, 0o700);
    drop(store);
    // Closed: it opens again.
    drop(EmbeddedStore::open(&path, TTL).unwrap());

    // Never through a symlink; never in a directory others may write.
    let link = dir.path().join("link.redb");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    assert!(EmbeddedStore::open(&link, TTL).is_err());
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = EmbeddedStore::open(&open.join("s.redb"), TTL).unwrap_err();
    assert!(err.to_string().contains("writable by others"), "{err}");
    // A file that is no store is an error, never an empty store over it.
    let junk = dir.path().join("junk.redb");
    std::fs::write(&junk, b"not a database at all, but long enough to look at").unwrap();
    let err = EmbeddedStore::open(&junk, TTL).unwrap_err();
    assert!(err.to_string().contains("help:"), "{err}");
}

#[tokio::test]
async fn sessions_expire_by_the_wall_clock_and_are_cleaned_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    {
        let store = EmbeddedStore::open(&path, Duration::from_millis(150)).unwrap();
        store
            .append("short", &["t".into()], &["a".into()])
            .await
            .unwrap();
        let ask = BudgetAsk {
            tool: "x",
            window: None,
        };
        store
            .prepare("short", &Cursor::default(), Some(ask), 0)
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let store = EmbeddedStore::open(&path, Duration::from_millis(150)).unwrap();
    while store.has_session("short").unwrap() {
        assert!(Instant::now() < deadline, "the session never expired");
        std::thread::sleep(Duration::from_millis(20));
    }
    let read = store
        .prepare("short", &Cursor::default(), None, 0)
        .await
        .unwrap();
    assert!(read.taint.is_empty() && read.approvals.is_empty());
    // Gone for good: a budget starts again, the old entries do not come back.
    let ask = BudgetAsk {
        tool: "x",
        window: None,
    };
    let p = store
        .prepare("short", &Cursor::default(), Some(ask), 0)
        .await
        .unwrap();
    assert_eq!(p.counts, Some((1, 0)));
    assert!(p.taint.is_empty());
}

/// The child of [`a_writer_killed_mid_write_loses_nothing_it_committed`]: appends numbered
/// entries, one transaction each, and prints each number once its append has returned.
#[test]
fn crash_child_writer() {
    let Some(path) = std::env::var_os("TOOLGATE_STORE_CRASH_CHILD") else {
        return;
    };
    let store = EmbeddedStore::open(std::path::Path::new(&path), TTL).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let big = "x".repeat(4096);
    for i in 0u64.. {
        // Large batches, so that the kill lands inside a write most of the time.
        let batch: Vec<String> = (0..50).map(|j| format!("{i}:{j}:{big}")).collect();
        rt.block_on(store.append("crash", &batch, &[format!("{i}")]))
            .unwrap();
        println!("committed {i}");
    }
}

#[test]
fn a_writer_killed_mid_write_loses_nothing_it_committed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.redb");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "embedded::crash_child_writer",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TOOLGATE_STORE_CRASH_CHILD", &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut committed = None;
    // Kill it at once after some commits: it is then in the middle of the next append.
    while let Some(Ok(line)) = lines.next() {
        if let Some(n) = line.strip_prefix("committed ") {
            let n: u64 = n.trim().parse().unwrap();
            committed = Some(n);
            if n >= 40 {
                break;
            }
        }
    }
    // `Child::kill` is SIGKILL on Unix: no chance to clean up.
    child.kill().unwrap();
    child.wait().unwrap();
    let committed = committed.expect("the child committed nothing");
    let store = EmbeddedStore::open(&path, TTL).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut cursor = Cursor::default();
    let mut approvals = Vec::new();
    let mut taint = 0usize;
    loop {
        let page = rt
            .block_on(store.prepare("crash", &cursor, None, 0))
            .unwrap();
        if page.taint.is_empty() && page.approvals.is_empty() {
            break;
        }
        taint += page.taint.len();
        approvals.extend(page.approvals);
        cursor = page.cursor;
    }
    // Every append that returned is there, whole (and those it made before the kill landed).
    let numbers: Vec<u64> = approvals.iter().map(|a| a.parse().unwrap()).collect();
    assert!(
        numbers.len() as u64 > committed,
        "{} of {}",
        numbers.len(),
        committed + 1
    );
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
    assert_eq!(taint, numbers.len() * 50, "no append is there in part");
    // And the store takes writes again.
    rt.block_on(store.append("crash", &["after".into()], &[]))
        .unwrap();
}
