//! The state that the replicas of `toolgate gateway` share: per agent session, two append-only
//! streams (taint and approvals) and budget counters; per upstream server, pinned tool
//! definitions; single-use nonces; and pending approvals that any replica may answer.
//!
//! This crate stores opaque strings. It knows nothing about MCP or policy: the gateway decides
//! what the entries mean. Three implementations of [`Store`]: [`RedisStore`] (Redis ≥ 6.2 or
//! Valkey, shared by every replica), [`MemoryStore`] (one process, same semantics) and
//! [`EmbeddedStore`] (one process, the same semantics in one crash-safe redb file that
//! survives it: the per-user broker keeps its agent sessions there).
//!
//! # Key layout (Redis)
//!
//! Every key starts with the deployment's namespace `<ns>`. Names chosen by others (session
//! ids, tool and server names, nonces, approval ids) never appear in a key as they are: each
//! is replaced by the lower-case hex SHA-256 of its UTF-8 bytes, written `H(...)` below. All
//! keys of one agent session share the hash tag `{s:H(session)}`, so they live in one Redis
//! Cluster hash slot and the one script that [`Store::prepare`] runs is cluster-safe.
//!
//! | key | type | holds | expires |
//! | --- | --- | --- | --- |
//! | `<ns>:{s:H(session)}:taint` | stream | taint entries, field `v`; `XADD MAXLEN ~ 100000` | `session_ttl`, refreshed by `prepare` and `append` |
//! | `<ns>:{s:H(session)}:approvals` | stream | approval entries, field `v`; `XADD MAXLEN ~ 10000` | as above |
//! | `<ns>:{s:H(session)}:calls` | hash | tool name → attempts in the session | as above |
//! | `<ns>:{s:H(session)}:window:H(tool)` | sorted set | one member per attempt of a windowed budget, scored by its `now_ms`; trimmed to the window and to `max + 1` members | the longer of the window and `session_ttl`, refreshed by each attempt |
//! | `<ns>:pins:H(server)` | hash | tool name → pinned definition JSON | 90 days, refreshed by `save_pins` |
//! | `<ns>:nonce:H(nonce)` | string | `1` (`SET NX PX`) | the nonce's `ttl_ms` |
//! | `<ns>:{pending}:index` | sorted set | `H(id)` of each pending approval, scored by its deadline (ms, Redis clock) | the longest `ttl_ms` put, refreshed by `put_pending` |
//! | `<ns>:{pending}:H(id)` | hash | `id`, `request` (JSON), `created` (µs, Redis clock), `answer` (JSON, once answered) | the approval's `ttl_ms` |
//!
//! And one pub/sub channel, `<ns>:events`: `put_pending`, `answer_pending` and `remove_pending`
//! publish on it; each [`RedisStore`] keeps one subscriber connection to wake its
//! `wait_answer` and `wait_pending_change` callers.
//!
//! Stream entry ids are Redis's (`<ms>-<seq>`); a [`Cursor`] holds the id of the last entry
//! read and the next read is `XRANGE key (<id> + COUNT 10000`, so a cursor stays valid when
//! the stream is trimmed (entries trimmed before they were read are skipped) and when the key
//! expired and came back (new ids are later). Budgets: `HINCRBY` on `calls` counts the
//! session's attempts; a windowed budget also drops the members at or before
//! `now_ms - per_ms`, adds this attempt and keeps the newest `max + 1`, so the count within
//! the window saturates at `max + 1`.
//!
//! A value of the wrong type under one of these keys (something else wrote there) is a
//! [`StoreError::BadData`] naming the key, never a panic.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use toolgate_store::{BudgetAsk, Cursor, MemoryStore, Store};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let store = MemoryStore::new(Duration::from_secs(3600));
//! store.append("session-1", &["tainted:abc".to_owned()], &[]).await?;
//! let ask = BudgetAsk { tool: "send_email", window: Some((2, 60_000)) };
//! let seen = store.prepare("session-1", &Cursor::default(), Some(ask), 1_000).await?;
//! assert_eq!(seen.taint, ["tainted:abc"]);
//! assert_eq!(seen.counts, Some((1, 1)));
//! // The next read starts after what was seen.
//! let next = store.prepare("session-1", &seen.cursor, None, 1_001).await?;
//! assert!(next.taint.is_empty());
//! # Ok::<(), toolgate_store::StoreError>(())
//! # }).unwrap();
//! ```

mod embedded;
mod memory;
#[cfg(feature = "redis")]
mod redis_store;
mod store;

pub use embedded::EmbeddedStore;
pub use memory::MemoryStore;
#[cfg(feature = "redis")]
pub use redis_store::RedisStore;
pub use store::{
    APPROVALS_MAXLEN, BoxFuture, BudgetAsk, Cursor, MAX_TTL, PINS_TTL, Prepared, READ_LIMIT, Store,
    StoreError, TAINT_MAXLEN,
};
