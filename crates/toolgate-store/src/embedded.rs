//! [`EmbeddedStore`]: the [`Store`] semantics in one file on disk, for one process (the
//! per-user broker; the gateway's single replica).
//!
//! The file is a [redb](https://www.redb.org) database. redb was chosen because it is pure
//! Rust with no dependencies and no server, keeps everything in one file, and is ACID and
//! crash-safe: every commit is copy-on-write with checksums and two commit slots, so a process
//! killed in the middle of a write (`SIGKILL`, a crash) reopens with exactly the transactions
//! committed before; it is well kept (regular releases, a stable file format since 1.0, fuzzed).
//! Each write is one transaction committed with `Durability::Immediate` (fsync; a no-op on the
//! tmpfs of `$XDG_RUNTIME_DIR`, where the broker keeps it).
//!
//! Expiry uses the wall clock (milliseconds since the Unix epoch), because the state outlives
//! the process: an entry whose time has passed is ignored when read and removed then or by the
//! sweep every 1024 writes. Pending approvals are not persisted (their askers are connections
//! of this process): they live in memory, as in [`MemoryStore`].

use std::collections::BTreeMap;
use std::ops::Bound;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redb::{
    Database, ReadableDatabase as _, ReadableTable as _, TableDefinition, WriteTransaction,
};

use crate::memory::MemoryStore;
use crate::store::{
    APPROVALS_MAXLEN, BoxFuture, BudgetAsk, Cursor, PINS_TTL, Prepared, READ_LIMIT, Store,
    StoreError, TAINT_MAXLEN, millis, ttl_ms,
};

/// `created_ms` (when the file was made), `last_id` (the last stream entry id).
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// Session → (expires, taint entries, approval entries).
const SESSIONS: TableDefinition<&str, (u64, u64, u64)> = TableDefinition::new("sessions");
const TAINT: TableDefinition<(&str, u64), &str> = TableDefinition::new("taint");
const APPROVALS: TableDefinition<(&str, u64), &str> = TableDefinition::new("approvals");
/// (session, tool) → attempts.
const CALLS: TableDefinition<(&str, &str), u64> = TableDefinition::new("calls");
/// (session, tool) → expires (8 bytes LE) then the attempts' `now_ms` (8 bytes LE each),
/// oldest first.
const WINDOWS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("windows");
/// (server, tool) → definition.
const PINS: TableDefinition<(&str, &str), &str> = TableDefinition::new("pins");
/// Server → when its pins expire.
const PINS_EXPIRY: TableDefinition<&str, u64> = TableDefinition::new("pins_expiry");
/// Nonce → when it expires.
const NONCES: TableDefinition<&str, u64> = TableDefinition::new("nonces");

/// Expired entries are swept every this many writes (otherwise expiry is checked on access).
const SWEEP_EVERY: u64 = 1024;

/// The [`Store`] in one redb file (see the module documentation): the same semantics as
/// [`MemoryStore`] and [`RedisStore`](crate::RedisStore), and what it holds survives the
/// process. One process at a time: a second [`EmbeddedStore::open`] of the same file (in this
/// process or another) is refused with [`StoreError::InUse`].
///
/// Stream cursors are decimal sequence numbers, unique across the file, so a cursor stays valid
/// when its session expired and started again, and across restarts.
pub struct EmbeddedStore {
    db: Database,
    path: PathBuf,
    session_ttl: u64,
    created_ms: u64,
    fresh: bool,
    writes: AtomicU64,
    /// Pending approvals (in memory: their askers are this process's).
    pending: MemoryStore,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("path", &self.path)
            .field("session_ttl_ms", &self.session_ttl)
            .finish_non_exhaustive()
    }
}

/// Milliseconds since the Unix epoch.
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl EmbeddedStore {
    /// Opens the store at `path`, creating it (mode 0600, its directory 0700 when missing) if
    /// it does not exist. Refuses a path that is a symlink, a directory that others may write,
    /// and a file another process (or another `EmbeddedStore` of this one) has open.
    pub fn open(path: &Path, session_ttl: Duration) -> Result<EmbeddedStore, StoreError> {
        let shown = format!("embedded `{}`", path.display());
        let failed = |why: String| StoreError::Failed {
            store: shown.clone(),
            why,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|e| failed(format!("cannot create `{}`: {e}", dir.display())))?;
            }
            let meta = std::fs::metadata(dir)
                .map_err(|e| failed(format!("cannot inspect `{}`: {e}", dir.display())))?;
            if meta.mode() & 0o022 != 0 {
                return Err(failed(format!(
                    "its directory `{}` is writable by others (mode {:04o})\nhelp: make it 0700",
                    dir.display(),
                    meta.mode() & 0o7777
                )));
            }
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            // Never through a symlink.
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| failed(format!("cannot open it: {e}")))?;
        let meta = file
            .metadata()
            .map_err(|e| failed(format!("cannot inspect it: {e}")))?;
        if !meta.is_file() {
            return Err(failed("it is not a regular file".to_owned()));
        }
        if meta.mode() & 0o077 != 0 {
            use std::os::unix::fs::PermissionsExt as _;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(|e| failed(format!("cannot make it private (0600): {e}")))?;
        }
        let db = match Database::builder().create_file(file) {
            Ok(db) => db,
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                return Err(StoreError::InUse { store: shown });
            }
            Err(e) => {
                return Err(failed(format!(
                    "it cannot be read as a state store: {e}\nhelp: if it is damaged, move it away; toolgate then starts an empty one"
                )));
            }
        };
        let now = wall_ms();
        let (created_ms, fresh) = (|| -> Result<(u64, bool), redb::Error> {
            let txn = db.begin_write()?;
            let found = {
                let mut meta = txn.open_table(META)?;
                let found = meta.get("created_ms")?.map(|v| v.value());
                if found.is_none() {
                    meta.insert("created_ms", now)?;
                }
                found
            };
            txn.commit()?;
            Ok((found.unwrap_or(now), found.is_none()))
        })()
        .map_err(|e| failed(e.to_string()))?;
        Ok(EmbeddedStore {
            db,
            path: path.to_path_buf(),
            session_ttl: millis(session_ttl),
            created_ms,
            fresh,
            writes: AtomicU64::new(0),
            pending: MemoryStore::new(session_ttl),
        })
    }

    /// When the file was created (ms since the Unix epoch): state older than this is not in it.
    pub fn created_ms(&self) -> u64 {
        self.created_ms
    }

    /// Whether this [`EmbeddedStore::open`] created the file (it held nothing before).
    pub fn fresh(&self) -> bool {
        self.fresh
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn fail(&self, e: impl Into<redb::Error>) -> StoreError {
        StoreError::Failed {
            store: self.describe(),
            why: e.into().to_string(),
        }
    }

    fn parse_cursor(&self, cursor: &str) -> Result<u64, StoreError> {
        if cursor.is_empty() {
            return Ok(0);
        }
        cursor.parse().map_err(|_| StoreError::BadCursor {
            store: self.describe(),
            cursor: cursor.to_owned(),
        })
    }

    /// Counts a write; every [`SWEEP_EVERY`] writes, removes what expired.
    fn tick(&self, txn: &WriteTransaction, now: u64) -> Result<(), redb::Error> {
        let n = self.writes.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        if !n.is_multiple_of(SWEEP_EVERY) {
            return Ok(());
        }
        let expired: Vec<String> = {
            let sessions = txn.open_table(SESSIONS)?;
            let mut out = Vec::new();
            for item in sessions.iter()? {
                let (k, v) = item?;
                if v.value().0 <= now {
                    out.push(k.value().to_owned());
                }
            }
            out
        };
        for s in &expired {
            purge_session(txn, s)?;
        }
        txn.open_table(WINDOWS)?
            .retain(|_, v| expiry_of(v).is_some_and(|e| e > now))?;
        txn.open_table(NONCES)?.retain(|_, e| e > now)?;
        let servers: Vec<String> = {
            let expiry = txn.open_table(PINS_EXPIRY)?;
            let mut out = Vec::new();
            for item in expiry.iter()? {
                let (k, v) = item?;
                if v.value() <= now {
                    out.push(k.value().to_owned());
                }
            }
            out
        };
        for s in &servers {
            clear_pins(txn, s)?;
        }
        Ok(())
    }

    /// [`Store::prepare`], synchronously (the work is local and short).
    pub fn prepare_now(
        &self,
        session: &str,
        cursor: &Cursor,
        budget: Option<BudgetAsk<'_>>,
        now_ms: u64,
    ) -> Result<Prepared, StoreError> {
        let after_taint = self.parse_cursor(&cursor.taint)?;
        let after_approvals = self.parse_cursor(&cursor.approvals)?;
        let mut prepared = Prepared {
            cursor: cursor.clone(),
            ..Prepared::default()
        };
        let now = wall_ms();
        let txn = self.db.begin_write().map_err(|e| self.fail(e))?;
        let live = live_session(&txn, session, now).map_err(|e| self.fail(e))?;
        if budget.is_none() && live.is_none() {
            txn.abort().map_err(|e| self.fail(e))?;
            return Ok(prepared);
        }
        (|| -> Result<(), redb::Error> {
            self.tick(&txn, now)?;
            let (taint_len, approvals_len) = live.unwrap_or((0, 0));
            txn.open_table(SESSIONS)?.insert(
                session,
                (
                    now.saturating_add(self.session_ttl),
                    taint_len,
                    approvals_len,
                ),
            )?;
            read(
                &txn,
                TAINT,
                session,
                after_taint,
                &mut prepared.taint,
                &mut prepared.cursor.taint,
            )?;
            read(
                &txn,
                APPROVALS,
                session,
                after_approvals,
                &mut prepared.approvals,
                &mut prepared.cursor.approvals,
            )?;
            if let Some(ask) = budget {
                let calls = {
                    let mut calls = txn.open_table(CALLS)?;
                    let n = calls
                        .get((session, ask.tool))?
                        .map_or(0, |v| v.value())
                        .saturating_add(1);
                    calls.insert((session, ask.tool), n)?;
                    n
                };
                let mut within = 0;
                if let Some((max, per_ms)) = ask.window {
                    let mut windows = txn.open_table(WINDOWS)?;
                    let mut stamps: Vec<u64> = match windows.get((session, ask.tool))? {
                        Some(v) if expiry_of(v.value()).is_some_and(|e| e > now) => {
                            stamps_of(v.value())
                        }
                        _ => Vec::new(),
                    };
                    let cutoff = i128::from(now_ms) - i128::from(per_ms);
                    stamps.retain(|&t| i128::from(t) > cutoff);
                    let at = stamps.partition_point(|&t| t <= now_ms);
                    stamps.insert(at, now_ms);
                    let keep = usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX);
                    if stamps.len() > keep {
                        stamps.drain(..stamps.len() - keep);
                    }
                    let expires = now.saturating_add(self.session_ttl.max(ttl_ms(per_ms)));
                    let mut bytes = Vec::with_capacity(8 * (stamps.len() + 1));
                    bytes.extend_from_slice(&expires.to_le_bytes());
                    for s in &stamps {
                        bytes.extend_from_slice(&s.to_le_bytes());
                    }
                    windows.insert((session, ask.tool), bytes.as_slice())?;
                    within = stamps.len() as u64;
                }
                prepared.counts = Some((calls, within));
            }
            Ok(())
        })()
        .map_err(|e| self.fail(e))?;
        txn.commit().map_err(|e| self.fail(e))?;
        Ok(prepared)
    }

    /// [`Store::append`], synchronously: committed (durable) when it returns.
    pub fn append_now(
        &self,
        session: &str,
        taint: &[String],
        approvals: &[String],
    ) -> Result<(), StoreError> {
        if taint.is_empty() && approvals.is_empty() {
            return Ok(());
        }
        let now = wall_ms();
        let txn = self.db.begin_write().map_err(|e| self.fail(e))?;
        (|| -> Result<(), redb::Error> {
            self.tick(&txn, now)?;
            let (taint_len, approvals_len) = live_session(&txn, session, now)?.unwrap_or((0, 0));
            let mut last = txn
                .open_table(META)?
                .get("last_id")?
                .map_or(0, |v| v.value());
            let taint_len = push(
                &txn,
                TAINT,
                session,
                taint,
                taint_len,
                TAINT_MAXLEN,
                &mut last,
            )?;
            let approvals_len = push(
                &txn,
                APPROVALS,
                session,
                approvals,
                approvals_len,
                APPROVALS_MAXLEN,
                &mut last,
            )?;
            txn.open_table(META)?.insert("last_id", last)?;
            txn.open_table(SESSIONS)?.insert(
                session,
                (
                    now.saturating_add(self.session_ttl),
                    taint_len,
                    approvals_len,
                ),
            )?;
            Ok(())
        })()
        .map_err(|e| self.fail(e))?;
        txn.commit().map_err(|e| self.fail(e))
    }

    /// Whether the store holds live state of `session` (without refreshing it).
    pub fn has_session(&self, session: &str) -> Result<bool, StoreError> {
        let txn = self.db.begin_read().map_err(|e| self.fail(e))?;
        let sessions = match txn.open_table(SESSIONS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(false),
            Err(e) => return Err(self.fail(e)),
        };
        Ok(sessions
            .get(session)
            .map_err(|e| self.fail(e))?
            .is_some_and(|v| v.value().0 > wall_ms()))
    }

    fn load_pins_now(&self, server: &str) -> Result<BTreeMap<String, String>, StoreError> {
        let now = wall_ms();
        (|| -> Result<BTreeMap<String, String>, redb::Error> {
            let txn = self.db.begin_read()?;
            let mut out = BTreeMap::new();
            let expiry = match txn.open_table(PINS_EXPIRY) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(out),
                Err(e) => return Err(e.into()),
            };
            if expiry.get(server)?.is_none_or(|e| e.value() <= now) {
                return Ok(out);
            }
            let pins = txn.open_table(PINS)?;
            for item in pins.range((server, "")..)? {
                let (k, v) = item?;
                let (s, tool) = k.value();
                if s != server {
                    break;
                }
                out.insert(tool.to_owned(), v.value().to_owned());
            }
            Ok(out)
        })()
        .map_err(|e| self.fail(e))
    }

    fn save_pins_now(
        &self,
        server: &str,
        pins: &BTreeMap<String, String>,
    ) -> Result<(), StoreError> {
        if pins.is_empty() {
            return Ok(());
        }
        let now = wall_ms();
        let txn = self.db.begin_write().map_err(|e| self.fail(e))?;
        (|| -> Result<(), redb::Error> {
            self.tick(&txn, now)?;
            let expired = txn
                .open_table(PINS_EXPIRY)?
                .get(server)?
                .is_none_or(|e| e.value() <= now);
            if expired {
                clear_pins(&txn, server)?;
            }
            let mut table = txn.open_table(PINS)?;
            for (tool, definition) in pins {
                table.insert((server, tool.as_str()), definition.as_str())?;
            }
            txn.open_table(PINS_EXPIRY)?
                .insert(server, now.saturating_add(millis(PINS_TTL)))?;
            Ok(())
        })()
        .map_err(|e| self.fail(e))?;
        txn.commit().map_err(|e| self.fail(e))
    }

    fn redeem_once_now(&self, nonce: &str, ttl: u64) -> Result<bool, StoreError> {
        let now = wall_ms();
        let txn = self.db.begin_write().map_err(|e| self.fail(e))?;
        let fresh = (|| -> Result<bool, redb::Error> {
            self.tick(&txn, now)?;
            let mut nonces = txn.open_table(NONCES)?;
            if nonces.get(nonce)?.is_some_and(|e| e.value() > now) {
                return Ok(false);
            }
            nonces.insert(nonce, now.saturating_add(ttl_ms(ttl)))?;
            Ok(true)
        })()
        .map_err(|e| self.fail(e))?;
        if fresh {
            txn.commit().map_err(|e| self.fail(e))?;
        } else {
            txn.abort().map_err(|e| self.fail(e))?;
        }
        Ok(fresh)
    }
}

fn expiry_of(bytes: &[u8]) -> Option<u64> {
    let head: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(head))
}

fn stamps_of(bytes: &[u8]) -> Vec<u64> {
    bytes
        .get(8..)
        .unwrap_or_default()
        .chunks_exact(8)
        .filter_map(|c| <[u8; 8]>::try_from(c).ok().map(u64::from_le_bytes))
        .collect()
}

/// The (taint, approvals) entry counts of a live session; an expired one is removed first.
fn live_session(
    txn: &WriteTransaction,
    session: &str,
    now: u64,
) -> Result<Option<(u64, u64)>, redb::Error> {
    let found = txn.open_table(SESSIONS)?.get(session)?.map(|v| v.value());
    match found {
        Some((expires, t, a)) if expires > now => Ok(Some((t, a))),
        Some(_) => {
            purge_session(txn, session)?;
            Ok(None)
        }
        None => Ok(None),
    }
}

/// Removes everything of `session`.
fn purge_session(txn: &WriteTransaction, session: &str) -> Result<(), redb::Error> {
    for table in [TAINT, APPROVALS] {
        let mut t = txn.open_table(table)?;
        let keys: Vec<u64> = t
            .range((session, 0)..=(session, u64::MAX))?
            .map(|item| item.map(|(k, _)| k.value().1))
            .collect::<Result<_, _>>()?;
        for k in keys {
            t.remove((session, k))?;
        }
    }
    {
        let mut calls = txn.open_table(CALLS)?;
        for tool in tools_of(&calls, session)? {
            calls.remove((session, tool.as_str()))?;
        }
    }
    {
        let mut windows = txn.open_table(WINDOWS)?;
        for tool in tools_of(&windows, session)? {
            windows.remove((session, tool.as_str()))?;
        }
    }
    txn.open_table(SESSIONS)?.remove(session)?;
    Ok(())
}

/// The second halves of the `(first, _)` keys of a table.
fn tools_of<V: redb::Value + 'static>(
    table: &impl redb::ReadableTable<(&'static str, &'static str), V>,
    first: &str,
) -> Result<Vec<String>, redb::Error> {
    let mut out = Vec::new();
    for item in table.range((first, "")..)? {
        let (k, _) = item?;
        let (f, second) = k.value();
        if f != first {
            break;
        }
        out.push(second.to_owned());
    }
    Ok(out)
}

fn clear_pins(txn: &WriteTransaction, server: &str) -> Result<(), redb::Error> {
    let mut pins = txn.open_table(PINS)?;
    for tool in tools_of(&pins, server)? {
        pins.remove((server, tool.as_str()))?;
    }
    txn.open_table(PINS_EXPIRY)?.remove(server)?;
    Ok(())
}

/// Entries after `after`, at most [`READ_LIMIT`]; moves `cursor` to the last one.
fn read(
    txn: &WriteTransaction,
    table: TableDefinition<(&str, u64), &str>,
    session: &str,
    after: u64,
    out: &mut Vec<String>,
    cursor: &mut String,
) -> Result<(), redb::Error> {
    let t = txn.open_table(table)?;
    let range = t.range::<(&str, u64)>((
        Bound::Excluded((session, after)),
        Bound::Included((session, u64::MAX)),
    ))?;
    for item in range.take(READ_LIMIT) {
        let (k, v) = item?;
        out.push(v.value().to_owned());
        *cursor = k.value().1.to_string();
    }
    Ok(())
}

/// Appends `entries` with new ids and trims the stream to `cap`; returns its new length.
fn push(
    txn: &WriteTransaction,
    table: TableDefinition<(&str, u64), &str>,
    session: &str,
    entries: &[String],
    len: u64,
    cap: usize,
    last: &mut u64,
) -> Result<u64, redb::Error> {
    if entries.is_empty() {
        return Ok(len);
    }
    let mut t = txn.open_table(table)?;
    for entry in entries {
        *last = last.saturating_add(1);
        t.insert((session, *last), entry.as_str())?;
    }
    let len = len.saturating_add(entries.len() as u64);
    let cap = cap as u64;
    if len <= cap {
        return Ok(len);
    }
    let excess = usize::try_from(len - cap).unwrap_or(usize::MAX);
    let oldest: Vec<u64> = t
        .range((session, 0)..=(session, u64::MAX))?
        .take(excess)
        .map(|item| item.map(|(k, _)| k.value().1))
        .collect::<Result<_, _>>()?;
    for k in oldest {
        t.remove((session, k))?;
    }
    Ok(cap)
}

impl Store for EmbeddedStore {
    fn prepare<'a>(
        &'a self,
        session: &'a str,
        cursor: &'a Cursor,
        budget: Option<BudgetAsk<'a>>,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Prepared, StoreError>> {
        Box::pin(async move { self.prepare_now(session, cursor, budget, now_ms) })
    }

    fn append<'a>(
        &'a self,
        session: &'a str,
        taint: &'a [String],
        approvals: &'a [String],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.append_now(session, taint, approvals) })
    }

    fn load_pins<'a>(
        &'a self,
        server: &'a str,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, StoreError>> {
        Box::pin(async move { self.load_pins_now(server) })
    }

    fn save_pins<'a>(
        &'a self,
        server: &'a str,
        pins: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.save_pins_now(server, pins) })
    }

    fn redeem_once<'a>(
        &'a self,
        nonce: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move { self.redeem_once_now(nonce, ttl_ms) })
    }

    fn put_pending<'a>(
        &'a self,
        id: &'a str,
        request_json: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.pending.put_pending(id, request_json, ttl_ms)
    }

    fn list_pending<'a>(&'a self) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>> {
        self.pending.list_pending()
    }

    fn answer_pending<'a>(
        &'a self,
        id: &'a str,
        answer_json: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.pending.answer_pending(id, answer_json)
    }

    fn wait_answer<'a>(
        &'a self,
        id: &'a str,
        within: Duration,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        self.pending.wait_answer(id, within)
    }

    fn remove_pending<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        self.pending.remove_pending(id)
    }

    fn wait_pending_change<'a>(
        &'a self,
        within: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.pending.wait_pending_change(within)
    }

    fn ping<'a>(&'a self) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.db.begin_read().map(drop).map_err(|e| self.fail(e)) })
    }

    fn describe(&self) -> String {
        format!("embedded `{}`", self.path.display())
    }
}
