//! One behavioural suite, run on every store: `memory::*` on a [`MemoryStore`] (both
//! "replicas" are the same store), `embedded::*` on an [`EmbeddedStore`] in a temporary
//! directory (likewise one process), and `redis::*` on two [`RedisStore`]s sharing a real
//! `redis-server` (two replicas). The Redis-only faults (garbage under our keys, Redis going
//! away and coming back, TTLs, namespaces) are in `redis_faults.rs`.
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
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use toolgate_store::{
    BudgetAsk, Cursor, EmbeddedStore, MemoryStore, READ_LIMIT, RedisStore, Store, StoreError,
};
use toolgate_testkit::redis::RedisServer;

const SESSION_TTL: Duration = Duration::from_secs(3600);

/// How long a waiter is told to wait when the test expects it to be woken: far beyond
/// [`toolgate_testkit::TIMEOUT`], so returning within that bound means it was woken (or saw
/// the end), not that `within` ran out.
const FOREVER: Duration = Duration::from_secs(3600);

/// Polls a store's waiting future once, so that it has subscribed to changes (every store
/// subscribes on the first poll, before it looks or waits) before the test makes the change
/// it waits for; it must not be done yet.
fn subscribed<F: Future + Unpin>(mut waiting: F) -> F {
    let mut cx = Context::from_waker(Waker::noop());
    assert!(
        Pin::new(&mut waiting).poll(&mut cx).is_pending(),
        "the wait ended before anything changed"
    );
    waiting
}

/// Awaits a waiter that the test has just woken, bounded by [`toolgate_testkit::TIMEOUT`].
async fn woken<T>(what: &str, waiting: impl Future<Output = T>) -> T {
    match tokio::time::timeout(toolgate_testkit::TIMEOUT, waiting).await {
        Ok(out) => out,
        Err(_) => panic!("{what}: not woken within {:?}", toolgate_testkit::TIMEOUT),
    }
}

/// Two replicas of one deployment (and the server behind them, kept alive).
struct Replicas {
    a: Arc<dyn Store>,
    b: Arc<dyn Store>,
    _server: Option<RedisServer>,
    _dir: Option<tempfile::TempDir>,
}

fn memory() -> Replicas {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new(SESSION_TTL));
    Replicas {
        a: store.clone(),
        b: store,
        _server: None,
        _dir: None,
    }
}

fn embedded() -> Replicas {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(EmbeddedStore::open(&dir.path().join("state.redb"), SESSION_TTL).unwrap());
    Replicas {
        a: store.clone(),
        b: store,
        _server: None,
        _dir: Some(dir),
    }
}

async fn redis() -> Option<Replicas> {
    let server = RedisServer::start()?;
    let url = server.url();
    let connect = || RedisStore::connect(&url, "tg", Duration::from_secs(5), SESSION_TTL);
    let a = connect().await.unwrap();
    let b = connect().await.unwrap();
    Some(Replicas {
        a: Arc::new(a),
        b: Arc::new(b),
        _server: Some(server),
        _dir: None,
    })
}

macro_rules! on_every_store {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $( #[tokio::test] async fn $name() { super::$name(super::memory()).await } )*
        }
        mod embedded {
            $( #[tokio::test] async fn $name() { super::$name(super::embedded()).await } )*
        }
        mod redis {
            $( #[tokio::test] async fn $name() {
                if let Some(replicas) = super::redis().await { super::$name(replicas).await }
            } )*
        }
    };
}

on_every_store!(
    streams_are_read_from_the_cursor_on_and_across_replicas,
    more_than_the_read_limit_is_read_in_several_calls,
    the_approvals_stream_is_capped_and_cursors_survive_trimming,
    a_budget_is_checked_and_consumed_atomically_across_replicas,
    a_window_slides_with_now_ms_and_saturates_at_max_plus_one,
    a_bad_cursor_is_an_error,
    pins_are_shared_and_merged,
    a_nonce_is_redeemed_exactly_once_across_replicas,
    pending_approvals_are_listed_oldest_first_and_the_first_answer_wins,
    wait_answer_is_woken_by_an_answer_on_the_other_replica,
    wait_answer_gives_up_after_within_or_when_the_approval_is_gone,
    wait_pending_change_is_woken_by_a_put_on_the_other_replica,
    a_pending_approval_expires,
    extreme_numbers_are_no_error,
);

fn strings(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i}")).collect()
}

async fn streams_are_read_from_the_cursor_on_and_across_replicas(r: Replicas) {
    let start = Cursor::default();
    let nothing = r.a.prepare("s1", &start, None, 0).await.unwrap();
    assert_eq!(nothing.cursor, start);
    assert!(nothing.taint.is_empty() && nothing.approvals.is_empty() && nothing.counts.is_none());

    r.a.append("s1", &strings("t", 0..2), &strings("a", 0..1))
        .await
        .unwrap();
    r.a.append("other", &strings("x", 0..3), &strings("y", 0..3))
        .await
        .unwrap();
    let first = r.b.prepare("s1", &start, None, 0).await.unwrap();
    assert_eq!(first.taint, ["t0", "t1"]);
    assert_eq!(first.approvals, ["a0"]);
    assert!(!first.cursor.taint.is_empty() && !first.cursor.approvals.is_empty());

    // Nothing new: the same cursor back.
    let again = r.a.prepare("s1", &first.cursor, None, 0).await.unwrap();
    assert!(again.taint.is_empty() && again.approvals.is_empty());
    assert_eq!(again.cursor, first.cursor);

    // Appends on the other replica; only taint this time, then only approvals.
    r.b.append("s1", &strings("t", 2..4), &[]).await.unwrap();
    r.b.append("s1", &[], &strings("a", 1..2)).await.unwrap();
    r.b.append("s1", &[], &[]).await.unwrap();
    let next = r.a.prepare("s1", &first.cursor, None, 0).await.unwrap();
    assert_eq!(next.taint, ["t2", "t3"]);
    assert_eq!(next.approvals, ["a1"]);
    assert_ne!(next.cursor, first.cursor);

    // Entries are opaque text, kept byte for byte.
    let odd = vec!["".to_owned(), "ü \n\0 {\"json\": true}".to_owned()];
    r.a.append("s1", &odd, &[]).await.unwrap();
    let read = r.b.prepare("s1", &next.cursor, None, 0).await.unwrap();
    assert_eq!(read.taint, odd);

    // The other session saw none of it.
    let other = r.a.prepare("other", &start, None, 0).await.unwrap();
    assert_eq!(other.taint, ["x0", "x1", "x2"]);
}

async fn more_than_the_read_limit_is_read_in_several_calls(r: Replicas) {
    let total = READ_LIMIT + 2_500;
    r.a.append("big", &strings("e", 0..total), &strings("a", 0..3))
        .await
        .unwrap();
    let first =
        r.b.prepare("big", &Cursor::default(), None, 0)
            .await
            .unwrap();
    assert_eq!(first.taint.len(), READ_LIMIT);
    assert_eq!(first.taint[0], "e0");
    assert_eq!(first.taint[READ_LIMIT - 1], format!("e{}", READ_LIMIT - 1));
    assert_eq!(first.approvals, ["a0", "a1", "a2"]);
    let second = r.a.prepare("big", &first.cursor, None, 0).await.unwrap();
    assert_eq!(second.taint, strings("e", READ_LIMIT..total));
    assert!(second.approvals.is_empty());
    let third = r.b.prepare("big", &second.cursor, None, 0).await.unwrap();
    assert!(third.taint.is_empty());
    assert_eq!(third.cursor, second.cursor);
}

async fn the_approvals_stream_is_capped_and_cursors_survive_trimming(r: Replicas) {
    let seen = {
        r.a.append("cap", &[], &strings("old", 0..5)).await.unwrap();
        r.a.prepare("cap", &Cursor::default(), None, 0)
            .await
            .unwrap()
    };
    r.a.append("cap", &[], &strings("a", 0..12_000))
        .await
        .unwrap();
    // Trimmed to about 10 000 (Redis trims whole nodes: at least 10 000 are kept).
    let mut all = Vec::new();
    let mut cursor = Cursor::default();
    loop {
        let page = r.b.prepare("cap", &cursor, None, 0).await.unwrap();
        if page.approvals.is_empty() {
            break;
        }
        all.extend(page.approvals);
        cursor = page.cursor;
    }
    assert!((10_000..=10_100).contains(&all.len()), "{} kept", all.len());
    assert_eq!(all.last().unwrap(), "a11999");
    assert!(!all.contains(&"old0".to_owned()));
    // A reader whose cursor points at a trimmed entry continues with what is left.
    let after = r.b.prepare("cap", &seen.cursor, None, 0).await.unwrap();
    assert_eq!(after.approvals.first(), all.first());
}

async fn a_budget_is_checked_and_consumed_atomically_across_replicas(r: Replicas) {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..50 {
        let store = if i % 2 == 0 { r.a.clone() } else { r.b.clone() };
        tasks.spawn(async move {
            let ask = BudgetAsk {
                tool: "send_email",
                window: Some((20, 60_000)),
            };
            let p = store
                .prepare("budget", &Cursor::default(), Some(ask), 1_000_000)
                .await
                .unwrap();
            p.counts.unwrap()
        });
    }
    let mut counts = tasks.join_all().await;
    counts.sort();
    let session: Vec<u64> = counts.iter().map(|c| c.0).collect();
    assert_eq!(
        session,
        (1..=50).collect::<Vec<_>>(),
        "every attempt has its own count"
    );
    let mut allowed: Vec<u64> = counts.iter().map(|c| c.1).filter(|&w| w <= 20).collect();
    allowed.sort();
    assert_eq!(
        allowed,
        (1..=20).collect::<Vec<_>>(),
        "exactly 20 attempts fit the window"
    );
    assert!(
        counts.iter().all(|c| c.1 <= 21),
        "the window count saturates at max + 1"
    );

    // Without a window: the session count only; another tool and session count apart.
    let plain = BudgetAsk {
        tool: "send_email",
        window: None,
    };
    let p =
        r.a.prepare("budget", &Cursor::default(), Some(plain), 0)
            .await
            .unwrap();
    assert_eq!(p.counts, Some((51, 0)));
    let other = BudgetAsk {
        tool: "read_file",
        window: None,
    };
    let p =
        r.b.prepare("budget", &Cursor::default(), Some(other), 0)
            .await
            .unwrap();
    assert_eq!(p.counts, Some((1, 0)));
    let p =
        r.b.prepare("budget-2", &Cursor::default(), Some(plain), 0)
            .await
            .unwrap();
    assert_eq!(p.counts, Some((1, 0)));
}

async fn a_window_slides_with_now_ms_and_saturates_at_max_plus_one(r: Replicas) {
    let ask = BudgetAsk {
        tool: "fetch",
        window: Some((2, 1_000)),
    };
    let mut counts = Vec::new();
    for (i, now) in [0, 0, 500, 1_000, 1_499, 1_500, 1_501, 10_000]
        .into_iter()
        .enumerate()
    {
        let store = if i % 2 == 0 { &r.a } else { &r.b };
        let p = store
            .prepare("win", &Cursor::default(), Some(ask), now)
            .await
            .unwrap();
        counts.push(p.counts.unwrap());
    }
    // The window is (now - per_ms, now]: the attempts at 0 leave it at 1 000, the one at
    // 500 at 1 500; at most max + 1 = 3 are kept.
    assert_eq!(
        counts,
        [
            (1, 1),
            (2, 2),
            (3, 3),
            (4, 2),
            (5, 3),
            (6, 3),
            (7, 3),
            (8, 1)
        ]
    );
    // A window shorter than the time since the start, with now_ms below per_ms.
    let long = BudgetAsk {
        tool: "slow",
        window: Some((5, 86_400_000)),
    };
    let p =
        r.a.prepare("win", &Cursor::default(), Some(long), 10)
            .await
            .unwrap();
    assert_eq!(p.counts, Some((1, 1)));
    let p =
        r.b.prepare("win", &Cursor::default(), Some(long), 20)
            .await
            .unwrap();
    assert_eq!(p.counts, Some((2, 2)));
}

async fn a_bad_cursor_is_an_error(r: Replicas) {
    let bad = Cursor {
        taint: "not a cursor".to_owned(),
        approvals: String::new(),
    };
    let err = r.a.prepare("s", &bad, None, 0).await.unwrap_err();
    assert!(matches!(err, StoreError::BadCursor { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("`not a cursor`") && text.contains(&r.a.describe()),
        "{text}"
    );
}

async fn pins_are_shared_and_merged(r: Replicas) {
    assert!(r.a.load_pins("github").await.unwrap().is_empty());
    let first = BTreeMap::from([
        (
            "create_issue".to_owned(),
            r#"{"name":"create_issue"}"#.to_owned(),
        ),
        ("search".to_owned(), r#"{"name":"search","v":1}"#.to_owned()),
    ]);
    r.a.save_pins("github", &first).await.unwrap();
    assert_eq!(r.b.load_pins("github").await.unwrap(), first);
    let more = BTreeMap::from([
        ("search".to_owned(), r#"{"name":"search","v":2}"#.to_owned()),
        ("ünïcode tool".to_owned(), "{}".to_owned()),
    ]);
    r.b.save_pins("github", &more).await.unwrap();
    r.b.save_pins("github", &BTreeMap::new()).await.unwrap();
    let mut expected = first.clone();
    expected.extend(more);
    assert_eq!(r.a.load_pins("github").await.unwrap(), expected);
    assert!(r.a.load_pins("gitlab").await.unwrap().is_empty());
}

async fn a_nonce_is_redeemed_exactly_once_across_replicas(r: Replicas) {
    assert!(r.a.redeem_once("n1", 60_000).await.unwrap());
    assert!(!r.b.redeem_once("n1", 60_000).await.unwrap());
    assert!(!r.a.redeem_once("n1", 60_000).await.unwrap());
    assert!(r.b.redeem_once("n2", 60_000).await.unwrap());

    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..20 {
        let store = if i % 2 == 0 { r.a.clone() } else { r.b.clone() };
        tasks.spawn(async move { store.redeem_once("raced", 60_000).await.unwrap() });
    }
    let won = tasks.join_all().await.into_iter().filter(|&w| w).count();
    assert_eq!(won, 1);
}

async fn pending_approvals_are_listed_oldest_first_and_the_first_answer_wins(r: Replicas) {
    assert!(r.a.list_pending().await.unwrap().is_empty());
    for (i, id) in ["p1", "p2", "p3", "p4"].into_iter().enumerate() {
        let store = if i % 2 == 0 { &r.a } else { &r.b };
        store
            .put_pending(id, &format!(r#"{{"call":{i}}}"#), 60_000)
            .await
            .unwrap();
    }
    let ids = |list: Vec<(String, String)>| list.into_iter().map(|(id, _)| id).collect::<Vec<_>>();
    let listed = r.b.list_pending().await.unwrap();
    assert_eq!(listed[0], ("p1".to_owned(), r#"{"call":0}"#.to_owned()));
    assert_eq!(ids(listed), ["p1", "p2", "p3", "p4"]);

    assert!(r.b.answer_pending("p2", r#"{"allow":true}"#).await.unwrap());
    assert!(
        !r.a.answer_pending("p2", r#"{"allow":false}"#)
            .await
            .unwrap()
    );
    assert_eq!(ids(r.a.list_pending().await.unwrap()), ["p1", "p3", "p4"]);
    let answer = r.a.wait_answer("p2", Duration::from_secs(5)).await.unwrap();
    assert_eq!(answer.as_deref(), Some(r#"{"allow":true}"#));

    r.b.remove_pending("p1").await.unwrap();
    r.b.remove_pending("never-put").await.unwrap();
    assert_eq!(ids(r.a.list_pending().await.unwrap()), ["p3", "p4"]);
    assert!(!r.a.answer_pending("p1", "{}").await.unwrap(), "removed");
    assert!(
        !r.a.answer_pending("unknown", "{}").await.unwrap(),
        "unknown"
    );

    // Racing answers from both replicas: exactly one wins, and it is the one waited for.
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..10 {
        let store = if i % 2 == 0 { r.a.clone() } else { r.b.clone() };
        tasks.spawn(async move {
            let answer = format!(r#"{{"by":{i}}}"#);
            let won = store.answer_pending("p3", &answer).await.unwrap();
            (won, answer)
        });
    }
    let winners: Vec<String> = tasks
        .join_all()
        .await
        .into_iter()
        .filter(|(won, _)| *won)
        .map(|(_, a)| a)
        .collect();
    assert_eq!(winners.len(), 1);
    let seen = r.b.wait_answer("p3", Duration::from_secs(5)).await.unwrap();
    assert_eq!(seen.as_ref(), winners.first());

    // Put again under the same id: a new, unanswered request.
    r.a.put_pending("p3", r#"{"call":"again"}"#, 60_000)
        .await
        .unwrap();
    assert_eq!(ids(r.b.list_pending().await.unwrap()), ["p4", "p3"]);
}

async fn wait_answer_is_woken_by_an_answer_on_the_other_replica(r: Replicas) {
    r.a.put_pending("w1", "{}", 60_000).await.unwrap();
    // Subscribed (and looking) before the answer is recorded.
    let waiter = subscribed(r.a.wait_answer("w1", FOREVER));
    assert!(r.b.answer_pending("w1", r#""yes""#).await.unwrap());
    let answer = woken("wait_answer", waiter).await.unwrap();
    assert_eq!(answer.as_deref(), Some(r#""yes""#));
}

async fn wait_answer_gives_up_after_within_or_when_the_approval_is_gone(r: Replicas) {
    r.a.put_pending("slow", "{}", 60_000).await.unwrap();
    let started = Instant::now();
    let answer =
        r.b.wait_answer("slow", Duration::from_millis(300))
            .await
            .unwrap();
    let took = started.elapsed();
    assert_eq!(answer, None);
    assert!(took >= Duration::from_millis(300), "{took:?}");

    // Unknown: no wait at all (`within` is far beyond the bound).
    assert_eq!(
        woken(
            "wait_answer of an unknown id",
            r.b.wait_answer("unknown", FOREVER)
        )
        .await
        .unwrap(),
        None
    );

    // Removed while waited for: the wait ends.
    let waiter = subscribed(r.b.wait_answer("slow", FOREVER));
    r.a.remove_pending("slow").await.unwrap();
    let answer = woken("wait_answer of a removed approval", waiter)
        .await
        .unwrap();
    assert_eq!(answer, None);
}

async fn wait_pending_change_is_woken_by_a_put_on_the_other_replica(r: Replicas) {
    let started = Instant::now();
    r.b.wait_pending_change(Duration::from_millis(200))
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "nothing changed: waits it out"
    );

    for change in 0..3 {
        // Subscribed before the change, so the change (not `within`) ends the wait.
        let waiter = subscribed(r.b.wait_pending_change(FOREVER));
        match change {
            0 => r.a.put_pending("c1", "{}", 60_000).await.unwrap(),
            1 => assert!(r.a.answer_pending("c1", "{}").await.unwrap()),
            _ => r.a.remove_pending("c1").await.unwrap(),
        }
        woken(&format!("change {change}"), waiter).await.unwrap();
    }
}

async fn a_pending_approval_expires(r: Replicas) {
    r.a.put_pending("short", "{}", 100).await.unwrap();
    r.a.put_pending("long", "{}", 60_000).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = r.b.list_pending().await.unwrap();
        if listed.len() == 1 {
            assert_eq!(listed[0].0, "long");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "`short` did not expire: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!r.b.answer_pending("short", "{}").await.unwrap());
    assert_eq!(
        r.a.wait_answer("short", Duration::from_secs(5))
            .await
            .unwrap(),
        None
    );
}

async fn extreme_numbers_are_no_error(r: Replicas) {
    let huge = BudgetAsk {
        tool: "t",
        window: Some((u64::MAX, u64::MAX)),
    };
    let p =
        r.a.prepare("x", &Cursor::default(), Some(huge), u64::MAX)
            .await
            .unwrap();
    assert_eq!(p.counts, Some((1, 1)));
    let zero = BudgetAsk {
        tool: "z",
        window: Some((0, 0)),
    };
    let p =
        r.b.prepare("x", &Cursor::default(), Some(zero), 0)
            .await
            .unwrap();
    assert_eq!(p.counts, Some((1, 1)));
    assert!(r.a.redeem_once("forever", u64::MAX).await.unwrap());
    assert!(r.b.redeem_once("at once", 0).await.unwrap());
    r.a.put_pending("forever", "{}", u64::MAX).await.unwrap();
    assert!(r.b.answer_pending("forever", "{}").await.unwrap());
    let answer = r.a.wait_answer("forever", Duration::MAX).await.unwrap();
    assert_eq!(answer.as_deref(), Some("{}"));
    r.b.wait_pending_change(Duration::ZERO).await.unwrap();
}
