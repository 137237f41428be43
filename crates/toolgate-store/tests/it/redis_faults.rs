//! What only a [`RedisStore`] can meet: garbage under its keys, Redis going away and coming
//! back, key expiry, namespaces, bad configuration. Against a real `redis-server`.
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
use std::future::Future as _;
use std::time::{Duration, Instant};

use sha2::Digest as _;
use toolgate_store::{BudgetAsk, Cursor, RedisStore, Store, StoreError};
use toolgate_testkit::redis::RedisServer;

const SESSION_TTL: Duration = Duration::from_secs(3600);

fn h(text: &str) -> String {
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

async fn store(server: &RedisServer, namespace: &str, timeout: Duration) -> RedisStore {
    RedisStore::connect(&server.url(), namespace, timeout, SESSION_TTL)
        .await
        .unwrap()
}

/// Asserts a `BadData` error naming `key` and the store.
fn assert_bad_data(
    result: Result<impl std::fmt::Debug, StoreError>,
    key: &str,
    server: &RedisServer,
) -> String {
    let err = result.expect_err("garbage must be an error");
    let text = err.to_string();
    assert!(matches!(err, StoreError::BadData { .. }), "{err:?}");
    assert!(
        text.starts_with(&format!(
            "the state store `{}` holds unexpected data under `{key}`: ",
            server.url()
        )),
        "{text}"
    );
    text
}

#[tokio::test]
async fn garbage_under_our_keys_is_an_error_naming_the_key() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let s = store(&server, "tg", Duration::from_secs(5)).await;
    let session = format!("tg:{{s:{}}}", h("agent-1"));
    let ask = BudgetAsk {
        tool: "send",
        window: Some((3, 1000)),
    };
    let start = Cursor::default();

    // A string where the taint stream belongs.
    let taint = format!("{session}:taint");
    server.cli(&["SET", &taint, "garbage"]);
    assert_bad_data(s.prepare("agent-1", &start, None, 0).await, &taint, &server);
    assert_bad_data(
        s.append("agent-1", &["t".to_owned()], &[]).await,
        &taint,
        &server,
    );
    server.cli(&["DEL", &taint]);

    // A stream entry that we did not write.
    server.cli(&["XADD", &taint, "*", "other", "field"]);
    assert_bad_data(s.prepare("agent-1", &start, None, 0).await, &taint, &server);
    server.cli(&["DEL", &taint]);

    // A list where the approvals stream belongs.
    let approvals = format!("{session}:approvals");
    server.cli(&["RPUSH", &approvals, "x"]);
    assert_bad_data(
        s.prepare("agent-1", &start, None, 0).await,
        &approvals,
        &server,
    );
    server.cli(&["DEL", &approvals]);

    // The attempts counter: a string where the hash belongs, then a field that is no number.
    let calls = format!("{session}:calls");
    server.cli(&["SET", &calls, "7"]);
    assert_bad_data(
        s.prepare("agent-1", &start, Some(ask), 0).await,
        &calls,
        &server,
    );
    server.cli(&["DEL", &calls]);
    server.cli(&["HSET", &calls, "send", "many"]);
    assert_bad_data(
        s.prepare("agent-1", &start, Some(ask), 0).await,
        &calls,
        &server,
    );
    server.cli(&["DEL", &calls]);

    // A hash where the window's sorted set belongs.
    let window = format!("{session}:window:{}", h("send"));
    server.cli(&["HSET", &window, "a", "b"]);
    assert_bad_data(
        s.prepare("agent-1", &start, Some(ask), 0).await,
        &window,
        &server,
    );
    server.cli(&["DEL", &window]);
    assert_eq!(
        s.prepare("agent-1", &start, Some(ask), 0)
            .await
            .unwrap()
            .counts,
        Some((1, 1)),
        "the session works again once the garbage is gone"
    );

    // Pins.
    let pins = format!("tg:pins:{}", h("github"));
    server.cli(&["SET", &pins, "garbage"]);
    assert_bad_data(s.load_pins("github").await, &pins, &server);
    let one = BTreeMap::from([("t".to_owned(), "{}".to_owned())]);
    assert_bad_data(s.save_pins("github", &one).await, &pins, &server);
    server.cli(&["DEL", &pins]);

    // Pending approvals: the index, then an item.
    let index = "tg:{pending}:index";
    server.cli(&["SET", index, "garbage"]);
    assert_bad_data(s.put_pending("p1", "{}", 60_000).await, index, &server);
    assert_bad_data(s.list_pending().await, index, &server);
    assert_bad_data(s.remove_pending("p1").await, index, &server);
    server.cli(&["DEL", index]);
    s.put_pending("p1", "{}", 60_000).await.unwrap();
    let item = format!("tg:{{pending}}:{}", h("p1"));
    server.cli(&["DEL", &item]);
    server.cli(&["SET", &item, "garbage"]);
    assert_bad_data(s.list_pending().await, &item, &server);
    assert_bad_data(s.answer_pending("p1", "{}").await, &item, &server);
    assert_bad_data(
        s.wait_answer("p1", Duration::from_secs(1)).await,
        &item,
        &server,
    );
    server.cli(&["DEL", &item]);
    server.cli(&["HSET", &item, "request", "{}"]);
    assert_bad_data(s.list_pending().await, &item, &server);

    // The store still works.
    s.ping().await.unwrap();
}

/// Awaits `operation`, bounded by [`toolgate_testkit::TIMEOUT`] (far beyond the store's own
/// timeout, so a failure here means the store hung instead of giving up).
async fn unhung<T>(what: &str, operation: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(toolgate_testkit::TIMEOUT, operation).await {
        Ok(out) => out,
        Err(_) => panic!(
            "{what}: no answer within {:?}: the store's timeout did not end it",
            toolgate_testkit::TIMEOUT
        ),
    }
}

/// Asserts that an operation fails as unreachable (or timed out) instead of hanging.
async fn fails_in_time<T: std::fmt::Debug>(
    (attempt, what, url, _timeout): (usize, &str, &str, Duration),
    operation: impl std::future::Future<Output = Result<T, StoreError>>,
) {
    let err = unhung(what, operation).await.expect_err("redis is down");
    assert!(
        matches!(
            err,
            StoreError::Unreachable { .. } | StoreError::Timeout { .. }
        ),
        "{what} (attempt {attempt}): {err:?}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("the state store `{url}` ")),
        "{err}"
    );
}

#[tokio::test]
async fn redis_stopped_fails_within_the_timeout_and_recovers_by_itself() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let timeout = Duration::from_millis(500);
    let a = store(&server, "tg", timeout).await;
    let b = store(&server, "tg", timeout).await;
    a.append("s", &["before".to_owned()], &[]).await.unwrap();
    a.put_pending("p", "{}", 60_000).await.unwrap();

    server.stop();
    let ask = BudgetAsk {
        tool: "t",
        window: None,
    };
    for attempt in 0..3 {
        let url = server.url();
        let down = |what: &'static str| (attempt, what, url.as_str(), timeout);
        fails_in_time(
            down("prepare"),
            a.prepare("s", &Cursor::default(), Some(ask), 0),
        )
        .await;
        fails_in_time(down("append"), a.append("s", &["during".to_owned()], &[])).await;
        fails_in_time(down("ping"), a.ping()).await;
        fails_in_time(down("list_pending"), a.list_pending()).await;
        fails_in_time(
            down("wait_answer"),
            a.wait_answer("p", Duration::from_secs(5)),
        )
        .await;
        fails_in_time(down("redeem_once"), b.redeem_once("n", 1000)).await;
    }

    server.restart();
    // No new store: the same one succeeds again by itself (polled, bounded).
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.ping().await.is_err() {
        assert!(Instant::now() < deadline, "the store did not recover");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The restarted Redis is empty (no persistence): the session starts afresh.
    a.append("s", &["after".to_owned()], &[]).await.unwrap();
    let p = b
        .prepare("s", &Cursor::default(), Some(ask), 0)
        .await
        .unwrap();
    assert_eq!(p.taint, ["after"]);
    assert_eq!(p.counts, Some((1, 0)));

    // Notifications work again: a waiter on `a` is woken by an answer through `b` (the
    // subscriber reconnects; poll until it has).
    a.put_pending("q", "{}", 60_000).await.unwrap();
    let waiter = {
        let a = std::sync::Arc::new(a);
        let waiting = a.clone();
        tokio::spawn(async move { waiting.wait_answer("q", Duration::from_secs(20)).await })
    };
    assert!(b.answer_pending("q", "\"ok\"").await.unwrap());
    let answer = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer.unwrap().as_deref(), Some("\"ok\""));
}

#[tokio::test]
async fn an_unreachable_redis_fails_connect_within_the_timeout_without_showing_the_password() {
    let Some(mut server) = RedisServer::start_tcp() else {
        return;
    };
    let port = server.port();
    server.stop();
    let url = format!("redis://:hunter2@127.0.0.1:{port}");
    let err = unhung(
        "connect",
        RedisStore::connect(&url, "tg", Duration::from_millis(500), SESSION_TTL),
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "the state store `redis://127.0.0.1:{port}` is unreachable: "
        )),
        "{text}"
    );
    assert!(!text.contains("hunter2") && !format!("{err:?}").contains("hunter2"));

    // TLS (`rediss://`) is built in: against a plain-text server the handshake fails, as an
    // error within the timeout.
    server.restart();
    let tls = format!("rediss://127.0.0.1:{port}");
    let err = unhung(
        "connect over TLS",
        RedisStore::connect(&tls, "tg", Duration::from_millis(500), SESSION_TTL),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Unreachable { .. } | StoreError::Timeout { .. }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("the state store `{tls}` ")),
        "{err}"
    );

    // Bad configuration.
    let err = RedisStore::connect("http://x", "tg", Duration::from_secs(1), SESSION_TTL)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::BadUrl { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("invalid state store url `http://x`: redis URL did not parse\nhelp: "),
        "{err}"
    );
    for namespace in ["", "a{b}", "with space"] {
        let err = RedisStore::connect(
            &server.url(),
            namespace,
            Duration::from_secs(1),
            SESSION_TTL,
        )
        .await
        .unwrap_err();
        assert!(
            matches!(err, StoreError::BadNamespace { .. }),
            "{namespace}: {err:?}"
        );
    }
}

/// `PTTL` of every key of the namespace: all must expire, within their bound.
fn ttls(server: &RedisServer, namespace: &str) -> BTreeMap<String, i64> {
    let keys = server.cli(&["--scan", "--pattern", &format!("{namespace}:*")]);
    keys.lines()
        .map(|key| {
            let pttl: i64 = server.cli(&["PTTL", key]).parse().unwrap();
            (key.to_owned(), pttl)
        })
        .collect()
}

#[tokio::test]
async fn every_key_has_a_ttl() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let session_ttl = Duration::from_secs(600);
    let s = RedisStore::connect(&server.url(), "tg", Duration::from_secs(5), session_ttl)
        .await
        .unwrap();
    s.append("s", &["t".to_owned()], &["a".to_owned()])
        .await
        .unwrap();
    let windowed = BudgetAsk {
        tool: "w",
        window: Some((5, 7_200_000)),
    };
    s.prepare("s", &Cursor::default(), Some(windowed), 0)
        .await
        .unwrap();
    let short = BudgetAsk {
        tool: "short",
        window: Some((5, 1_000)),
    };
    s.prepare("s", &Cursor::default(), Some(short), 0)
        .await
        .unwrap();
    s.save_pins("srv", &BTreeMap::from([("t".to_owned(), "{}".to_owned())]))
        .await
        .unwrap();
    assert!(s.redeem_once("nonce", 30_000).await.unwrap());
    s.put_pending("p1", "{}", 40_000).await.unwrap();
    s.put_pending("p2", "{}", 50_000).await.unwrap();
    assert!(s.answer_pending("p2", "{}").await.unwrap());

    let session = format!("tg:{{s:{}}}", h("s"));
    let day = 24 * 3600 * 1000;
    let bounds: BTreeMap<String, (i64, i64)> = BTreeMap::from([
        (format!("{session}:taint"), (590_000, 600_000)),
        (format!("{session}:approvals"), (590_000, 600_000)),
        (format!("{session}:calls"), (590_000, 600_000)),
        (
            format!("{session}:window:{}", h("w")),
            (7_190_000, 7_200_000),
        ),
        (
            format!("{session}:window:{}", h("short")),
            (590_000, 600_000),
        ),
        (
            format!("tg:pins:{}", h("srv")),
            (90 * day - 10_000, 90 * day),
        ),
        (format!("tg:nonce:{}", h("nonce")), (20_000, 30_000)),
        (format!("tg:{{pending}}:{}", h("p1")), (30_000, 40_000)),
        (format!("tg:{{pending}}:{}", h("p2")), (40_000, 50_000)),
        ("tg:{pending}:index".to_owned(), (40_000, 50_000)),
    ]);
    let found = ttls(&server, "tg");
    assert_eq!(
        found.keys().collect::<Vec<_>>(),
        bounds.keys().collect::<Vec<_>>(),
        "the key layout"
    );
    for (key, (low, high)) in &bounds {
        let pttl = found[key];
        assert!(
            (*low..=*high).contains(&pttl),
            "`{key}`: PTTL {pttl}, expected {low}..={high}"
        );
    }

    // prepare and append refresh the session's keys.
    server.cli(&["PEXPIRE", &format!("{session}:taint"), "1000000"]);
    server.cli(&["PEXPIRE", &format!("{session}:calls"), "5000"]);
    s.prepare("s", &Cursor::default(), None, 0).await.unwrap();
    let after = ttls(&server, "tg");
    assert!(after[&format!("{session}:taint")] <= 600_000);
    assert!(after[&format!("{session}:calls")] > 590_000);
    server.cli(&["PEXPIRE", &format!("{session}:approvals"), "5000"]);
    s.append("s", &["t2".to_owned()], &[]).await.unwrap();
    assert!(ttls(&server, "tg")[&format!("{session}:approvals")] > 590_000);
}

#[tokio::test]
async fn namespaces_are_isolated() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let one = store(&server, "one", Duration::from_secs(5)).await;
    let two = store(&server, "two", Duration::from_secs(5)).await;
    let ask = BudgetAsk {
        tool: "t",
        window: Some((1, 1000)),
    };
    one.append("s", &["t".to_owned()], &["a".to_owned()])
        .await
        .unwrap();
    one.prepare("s", &Cursor::default(), Some(ask), 0)
        .await
        .unwrap();
    one.save_pins("srv", &BTreeMap::from([("t".to_owned(), "{}".to_owned())]))
        .await
        .unwrap();
    assert!(one.redeem_once("n", 60_000).await.unwrap());
    one.put_pending("p", "{}", 60_000).await.unwrap();

    let seen = two
        .prepare("s", &Cursor::default(), Some(ask), 0)
        .await
        .unwrap();
    assert!(seen.taint.is_empty() && seen.approvals.is_empty());
    assert_eq!(seen.counts, Some((1, 1)));
    assert!(two.load_pins("srv").await.unwrap().is_empty());
    assert!(two.redeem_once("n", 60_000).await.unwrap());
    assert!(two.list_pending().await.unwrap().is_empty());
    assert!(!two.answer_pending("p", "{}").await.unwrap());
    assert_eq!(one.list_pending().await.unwrap().len(), 1);

    let keys = server.cli(&["--scan"]);
    assert!(
        keys.lines()
            .all(|k| k.starts_with("one:") || k.starts_with("two:")),
        "{keys}"
    );
}

#[tokio::test]
async fn after_redis_restarted_the_first_operation_succeeds() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let s = store(&server, "tg", Duration::from_millis(500)).await;
    s.ping().await.unwrap();
    // Polled once, so it is subscribed before the server goes; `within` is far beyond the
    // bound below, so returning means it was told.
    let mut listening = s.wait_pending_change(Duration::from_secs(3600));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(
        std::pin::Pin::new(&mut listening)
            .poll(&mut cx)
            .is_pending()
    );
    server.stop();
    // The subscriber sees its connection end, drops the command connection too and tells
    // the waiters (the pending set may have changed while nobody listened).
    unhung("wait_pending_change when redis stopped", listening)
        .await
        .unwrap();
    server.restart();
    // No operation failed on the dead connection in between: the first one connects afresh.
    s.ping().await.unwrap();
    s.append("s", &["t".to_owned()], &[]).await.unwrap();
}

#[tokio::test]
async fn a_hung_redis_times_out_and_is_used_again_once_it_answers() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let timeout = Duration::from_millis(300);
    let s = store(&server, "tg", timeout).await;
    s.append("s", &["t".to_owned()], &[]).await.unwrap();
    server.pause();
    for what in ["prepare", "ping"] {
        let started = Instant::now();
        let err = unhung(what, async {
            match what {
                "prepare" => s.prepare("s", &Cursor::default(), None, 0).await.map(drop),
                _ => s.ping().await,
            }
        })
        .await
        .unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(err, StoreError::Timeout { ms: 300, .. }),
            "{what}: {err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "the state store `{}` did not answer within 300 ms",
                server.url()
            )
        );
        assert!(took >= timeout, "{what}: {took:?}");
    }
    server.resume();
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.ping().await.is_err() {
        assert!(Instant::now() < deadline, "the store did not recover");
    }
    let p = s.prepare("s", &Cursor::default(), None, 0).await.unwrap();
    assert_eq!(p.taint, ["t"]);
}
