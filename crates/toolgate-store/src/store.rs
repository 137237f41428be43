//! The [`Store`] trait every store implements, the values it passes, and the limits and
//! time helpers the stores share.

use std::collections::BTreeMap;
use std::time::Duration;

/// A boxed future that can be sent between threads (the [`Store`] methods return these so
/// that the trait is object-safe).
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// The most entries of one stream that one [`Store::prepare`] returns.
pub const READ_LIMIT: usize = 10_000;
/// About how many entries a session's taint stream keeps (older ones are trimmed).
pub const TAINT_MAXLEN: usize = 100_000;
/// About how many entries a session's approvals stream keeps.
pub const APPROVALS_MAXLEN: usize = 10_000;
/// How long a server's pins live after their last [`Store::save_pins`].
pub const PINS_TTL: Duration = Duration::from_secs(90 * 24 * 3600);

/// Where a reader of an agent session's two append-only streams has read up to.
/// Empty strings = from the start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cursor {
    /// The id of the last taint entry read.
    pub taint: String,
    /// The id of the last approvals entry read.
    pub approvals: String,
}

/// A budgeted call to count: `window` is `Some((max, per_ms))` for a windowed budget.
#[derive(Debug, Clone, Copy)]
pub struct BudgetAsk<'a> {
    /// The tool called.
    pub tool: &'a str,
    /// `(max, per_ms)`: at most `max` attempts within any `per_ms` milliseconds.
    pub window: Option<(u64, u64)>,
}

/// What [`Store::prepare`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prepared {
    /// Entries appended to the session's taint stream after the cursor, oldest first.
    pub taint: Vec<String>,
    /// Entries appended to the session's approvals stream after the cursor.
    pub approvals: Vec<String>,
    /// The cursor after these entries.
    pub cursor: Cursor,
    /// With a budget ask: (attempts of the tool in this session including this one,
    /// attempts within the window including this one; 0 without a window). The count within
    /// the window saturates at `max + 1`.
    pub counts: Option<(u64, u64)>,
}

/// Why a [`Store`] operation failed. Every message names the store (its URL without
/// password).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No connection to the store.
    #[error("the state store `{store}` is unreachable: {why}")]
    Unreachable {
        /// The store, as [`Store::describe`] shows it.
        store: String,
        /// The cause.
        why: String,
    },
    /// The store did not answer in time.
    #[error("the state store `{store}` did not answer within {ms} ms")]
    Timeout {
        /// The store, as [`Store::describe`] shows it.
        store: String,
        /// The timeout.
        ms: u64,
    },
    /// A key of ours holds something we did not write (a value of another type, an
    /// unparsable value).
    #[error(
        "the state store `{store}` holds unexpected data under `{key}`: {why}\n\
         help: something else writes under this deployment's namespace; give toolgate a namespace of its own, or delete the key"
    )]
    BadData {
        /// The store, as [`Store::describe`] shows it.
        store: String,
        /// The key.
        key: String,
        /// What is wrong with it.
        why: String,
    },
    /// The store answered with an error (out of memory, a read-only replica, …) or with a
    /// reply of an unexpected shape.
    #[error("the state store `{store}` failed: {why}")]
    Failed {
        /// The store, as [`Store::describe`] shows it.
        store: String,
        /// The store's answer.
        why: String,
    },
    /// A cursor that this store did not make.
    #[error(
        "the state store `{store}` cannot read from the cursor `{cursor}`: it is not a stream entry id"
    )]
    BadCursor {
        /// The store, as [`Store::describe`] shows it.
        store: String,
        /// The cursor given.
        cursor: String,
    },
    /// The store's URL cannot be used.
    #[error(
        "invalid state store url `{url}`: {why}\n\
         help: use `redis://[:password@]host[:port][/db]`, `rediss://…` (TLS) or `redis+unix:///path`"
    )]
    BadUrl {
        /// The URL without password.
        url: String,
        /// Why it cannot be used.
        why: String,
    },
    /// Another process (or another [`EmbeddedStore`](crate::EmbeddedStore) of this one) has the embedded store open.
    #[error(
        "the state store {store} is in use by another process (one writer at a time)\n\
         help: stop the other toolgate that uses it (`toolgate status` shows a running broker), or give this one another path"
    )]
    InUse {
        /// The store, as [`Store::describe`] shows it.
        store: String,
    },
    /// The namespace cannot be used.
    #[error(
        "invalid state store namespace `{namespace}`: {why}\n\
         help: use letters, digits, `-`, `_`, `.` and `:`, e.g. `toolgate` or `toolgate:prod`"
    )]
    BadNamespace {
        /// The namespace given.
        namespace: String,
        /// Why it cannot be used.
        why: String,
    },
}

/// The state shared by the replicas of a gateway. See the crate documentation for what is
/// stored where.
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// ONE round trip (a Lua script): what was appended to the agent session since `cursor`
    /// (at most [`READ_LIMIT`] entries per stream per call; the cursor then points after the
    /// last one returned), and, with `budget`, one attempt of the tool counted ATOMICALLY
    /// (check-and-consume across replicas: the returned counts include this attempt and every
    /// attempt serialised before it; two replicas can never both see the same count).
    /// Refreshes the session keys' TTL.
    fn prepare<'a>(
        &'a self,
        session: &'a str,
        cursor: &'a Cursor,
        budget: Option<BudgetAsk<'a>>,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Prepared, StoreError>>;

    /// Appends entries to the session's taint and approvals streams (one round trip, none
    /// when both are empty).
    fn append<'a>(
        &'a self,
        session: &'a str,
        taint: &'a [String],
        approvals: &'a [String],
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// A server's pinned tool definitions: tool name → definition JSON text.
    fn load_pins<'a>(
        &'a self,
        server: &'a str,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, StoreError>>;

    /// Sets these tools' pinned definitions (others untouched).
    fn save_pins<'a>(
        &'a self,
        server: &'a str,
        pins: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// True exactly once per `nonce` across all replicas (single-use approval states), kept
    /// `ttl_ms`.
    fn redeem_once<'a>(
        &'a self,
        nonce: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Stores the request JSON of a pending approval under `id` for `ttl_ms` (replacing one
    /// with the same id) and notifies waiting approvers.
    fn put_pending<'a>(
        &'a self,
        id: &'a str,
        request_json: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The unanswered pending approvals (id, request JSON), oldest first.
    fn list_pending<'a>(&'a self) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>>;

    /// Records an answer: the FIRST answer wins. False if already answered, or unknown,
    /// removed or expired.
    fn answer_pending<'a>(
        &'a self,
        id: &'a str,
        answer_json: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// The answer, as soon as any replica records one; None after `within`, or as soon as
    /// the pending approval is gone (unknown, removed or expired).
    fn wait_answer<'a>(
        &'a self,
        id: &'a str,
        within: Duration,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>>;

    /// Forgets a pending approval (answered or not).
    fn remove_pending<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Returns when the pending set may have changed (a put, an answer or a removal on any
    /// replica), or after `within`. Expiry is not notified.
    fn wait_pending_change<'a>(&'a self, within: Duration)
    -> BoxFuture<'a, Result<(), StoreError>>;

    /// A cheap health check (for /readyz).
    fn ping<'a>(&'a self) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The store as logs and errors show it (no password).
    fn describe(&self) -> String;
}

/// Lower-case hex SHA-256 of `text`: how names chosen by others appear in keys.
#[cfg(feature = "redis")]
pub(crate) fn hash_hex(text: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// The longest TTL or wait that the stores honour: 100 years (longer ones are cut to it, so
/// that no deadline overflows).
pub const MAX_TTL: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A TTL in milliseconds as the stores use it: at least 1 (Redis rejects an expiry of 0), at
/// most [`MAX_TTL`].
pub(crate) fn ttl_ms(ms: u64) -> u64 {
    ms.clamp(1, millis(MAX_TTL))
}

/// Milliseconds of a duration, at least 1, at most [`MAX_TTL`].
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.min(MAX_TTL).as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// A wait or TTL cut to [`MAX_TTL`].
pub(crate) fn bounded(d: Duration) -> Duration {
    d.min(MAX_TTL)
}
