//! [`MemoryStore`]: the [`Store`] semantics in one process (one replica).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::store::{
    APPROVALS_MAXLEN, BoxFuture, BudgetAsk, Cursor, PINS_TTL, Prepared, READ_LIMIT, Store,
    StoreError, TAINT_MAXLEN, bounded, millis, ttl_ms,
};

/// Expired entries are swept every this many writes (otherwise expiry is checked on access).
const SWEEP_EVERY: u64 = 1024;

/// The [`Store`] in memory, for a single gateway process: the same semantics as
/// [`RedisStore`](crate::RedisStore), bounded (streams capped as in Redis, expired entries
/// dropped on access and swept every 1024 writes).
///
/// Stream cursors are decimal sequence numbers, unique across the store, so a cursor stays
/// valid when its session expired and started again.
pub struct MemoryStore {
    state: Mutex<Contents>,
    session_ttl: Duration,
    /// Bumped on every put, answer and removal of a pending approval.
    events: watch::Sender<u64>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("session_ttl", &self.session_ttl)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Contents {
    /// The id of the last stream entry appended (any session).
    last_id: u64,
    /// The creation number of the last pending approval put.
    last_pending: u64,
    writes: u64,
    sessions: HashMap<String, Session>,
    pins: HashMap<String, (BTreeMap<String, String>, Instant)>,
    nonces: HashMap<String, Instant>,
    pending: HashMap<String, Pending>,
}

struct Session {
    taint: VecDeque<(u64, String)>,
    approvals: VecDeque<(u64, String)>,
    calls: HashMap<String, u64>,
    windows: HashMap<String, Window>,
    expires: Instant,
}

struct Window {
    /// `now_ms` of the attempts, oldest first.
    stamps: VecDeque<u64>,
    expires: Instant,
}

struct Pending {
    created: u64,
    request: String,
    answer: Option<String>,
    expires: Instant,
}

impl MemoryStore {
    /// A new empty store whose session state expires `session_ttl` after its last use.
    pub fn new(session_ttl: Duration) -> MemoryStore {
        MemoryStore {
            state: Mutex::new(Contents::default()),
            session_ttl: Duration::from_millis(millis(session_ttl)),
            events: watch::Sender::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Contents> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn notify(&self) {
        self.events.send_modify(|n| *n = n.wrapping_add(1));
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

    fn prepare_now(
        &self,
        session: &str,
        cursor: &Cursor,
        budget: Option<BudgetAsk<'_>>,
        now_ms: u64,
    ) -> Result<Prepared, StoreError> {
        let after_taint = self.parse_cursor(&cursor.taint)?;
        let after_approvals = self.parse_cursor(&cursor.approvals)?;
        let now = Instant::now();
        let mut state = self.lock();
        state.tick(now);
        if state
            .sessions
            .get(session)
            .is_some_and(|s| s.expires <= now)
        {
            state.sessions.remove(session);
        }
        let mut prepared = Prepared {
            cursor: cursor.clone(),
            ..Prepared::default()
        };
        if budget.is_none() && !state.sessions.contains_key(session) {
            return Ok(prepared);
        }
        let entry = state
            .sessions
            .entry(session.to_owned())
            .or_insert_with(|| Session {
                taint: VecDeque::new(),
                approvals: VecDeque::new(),
                calls: HashMap::new(),
                windows: HashMap::new(),
                expires: now,
            });
        entry.expires = now + self.session_ttl;
        read(
            &entry.taint,
            after_taint,
            &mut prepared.taint,
            &mut prepared.cursor.taint,
        );
        read(
            &entry.approvals,
            after_approvals,
            &mut prepared.approvals,
            &mut prepared.cursor.approvals,
        );
        if let Some(ask) = budget {
            let calls = entry.calls.entry(ask.tool.to_owned()).or_insert(0);
            *calls += 1;
            let calls = *calls;
            let mut within = 0;
            if let Some((max, per_ms)) = ask.window {
                let window = entry
                    .windows
                    .entry(ask.tool.to_owned())
                    .or_insert_with(|| Window {
                        stamps: VecDeque::new(),
                        expires: now,
                    });
                if window.expires <= now {
                    window.stamps.clear();
                }
                let cutoff = i128::from(now_ms) - i128::from(per_ms);
                window.stamps.retain(|&t| i128::from(t) > cutoff);
                // Kept sorted, as Redis's sorted set is.
                let at = window.stamps.partition_point(|&t| t <= now_ms);
                window.stamps.insert(at, now_ms);
                let keep = usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX);
                while window.stamps.len() > keep {
                    window.stamps.pop_front();
                }
                window.expires = now + self.session_ttl.max(Duration::from_millis(ttl_ms(per_ms)));
                within = window.stamps.len() as u64;
            }
            prepared.counts = Some((calls, within));
        }
        Ok(prepared)
    }
}

/// Entries after `after`, at most [`READ_LIMIT`]; moves `cursor` to the last one.
fn read(stream: &VecDeque<(u64, String)>, after: u64, out: &mut Vec<String>, cursor: &mut String) {
    let start = stream.partition_point(|(id, _)| *id <= after);
    for (id, entry) in stream.iter().skip(start).take(READ_LIMIT) {
        out.push(entry.clone());
        *cursor = id.to_string();
    }
}

impl Contents {
    /// Counts a write; sweeps everything expired every [`SWEEP_EVERY`] writes.
    fn tick(&mut self, now: Instant) {
        self.writes = self.writes.wrapping_add(1);
        if !self.writes.is_multiple_of(SWEEP_EVERY) {
            return;
        }
        self.sessions.retain(|_, s| {
            s.windows.retain(|_, w| w.expires > now);
            s.expires > now
        });
        self.pins.retain(|_, (_, expires)| *expires > now);
        self.nonces.retain(|_, expires| *expires > now);
        self.pending.retain(|_, p| p.expires > now);
    }

    fn append(&mut self, stream: Stream, session: &mut Session, entries: &[String]) {
        let (queue, cap) = match stream {
            Stream::Taint => (&mut session.taint, TAINT_MAXLEN),
            Stream::Approvals => (&mut session.approvals, APPROVALS_MAXLEN),
        };
        for entry in entries {
            self.last_id += 1;
            queue.push_back((self.last_id, entry.clone()));
        }
        while queue.len() > cap {
            queue.pop_front();
        }
    }

    fn live_pending(&mut self, id: &str, now: Instant) -> Option<&mut Pending> {
        if self.pending.get(id).is_some_and(|p| p.expires <= now) {
            self.pending.remove(id);
        }
        self.pending.get_mut(id)
    }
}

#[derive(Clone, Copy)]
enum Stream {
    Taint,
    Approvals,
}

impl Store for MemoryStore {
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
        Box::pin(async move {
            if taint.is_empty() && approvals.is_empty() {
                return Ok(());
            }
            let now = Instant::now();
            let mut state = self.lock();
            state.tick(now);
            let mut entry = match state.sessions.remove(session) {
                Some(s) if s.expires > now => s,
                _ => Session {
                    taint: VecDeque::new(),
                    approvals: VecDeque::new(),
                    calls: HashMap::new(),
                    windows: HashMap::new(),
                    expires: now,
                },
            };
            state.append(Stream::Taint, &mut entry, taint);
            state.append(Stream::Approvals, &mut entry, approvals);
            entry.expires = now + self.session_ttl;
            state.sessions.insert(session.to_owned(), entry);
            Ok(())
        })
    }

    fn load_pins<'a>(
        &'a self,
        server: &'a str,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, StoreError>> {
        Box::pin(async move {
            let now = Instant::now();
            let state = self.lock();
            Ok(match state.pins.get(server) {
                Some((pins, expires)) if *expires > now => pins.clone(),
                _ => BTreeMap::new(),
            })
        })
    }

    fn save_pins<'a>(
        &'a self,
        server: &'a str,
        pins: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if pins.is_empty() {
                return Ok(());
            }
            let now = Instant::now();
            let mut state = self.lock();
            state.tick(now);
            let (stored, expires) = state
                .pins
                .entry(server.to_owned())
                .or_insert_with(|| (BTreeMap::new(), now));
            if *expires <= now {
                stored.clear();
            }
            stored.extend(pins.iter().map(|(k, v)| (k.clone(), v.clone())));
            *expires = now + PINS_TTL;
            Ok(())
        })
    }

    fn redeem_once<'a>(
        &'a self,
        nonce: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let now = Instant::now();
            let mut state = self.lock();
            state.tick(now);
            if state.nonces.get(nonce).is_some_and(|e| *e > now) {
                return Ok(false);
            }
            let ttl = Duration::from_millis(crate::store::ttl_ms(ttl_ms));
            state.nonces.insert(nonce.to_owned(), now + ttl);
            Ok(true)
        })
    }

    fn put_pending<'a>(
        &'a self,
        id: &'a str,
        request_json: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let now = Instant::now();
            {
                let mut state = self.lock();
                state.tick(now);
                state.last_pending += 1;
                let created = state.last_pending;
                state.pending.insert(
                    id.to_owned(),
                    Pending {
                        created,
                        request: request_json.to_owned(),
                        answer: None,
                        expires: now + Duration::from_millis(crate::store::ttl_ms(ttl_ms)),
                    },
                );
            }
            self.notify();
            Ok(())
        })
    }

    fn list_pending<'a>(&'a self) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>> {
        Box::pin(async move {
            let now = Instant::now();
            let state = self.lock();
            let mut open: Vec<(u64, String, String)> = state
                .pending
                .iter()
                .filter(|(_, p)| p.expires > now && p.answer.is_none())
                .map(|(id, p)| (p.created, id.clone(), p.request.clone()))
                .collect();
            open.sort();
            Ok(open.into_iter().map(|(_, id, r)| (id, r)).collect())
        })
    }

    fn answer_pending<'a>(
        &'a self,
        id: &'a str,
        answer_json: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let recorded = {
                let mut state = self.lock();
                match state.live_pending(id, Instant::now()) {
                    Some(p) if p.answer.is_none() => {
                        p.answer = Some(answer_json.to_owned());
                        true
                    }
                    _ => false,
                }
            };
            if recorded {
                self.notify();
            }
            Ok(recorded)
        })
    }

    fn wait_answer<'a>(
        &'a self,
        id: &'a str,
        within: Duration,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + bounded(within);
            loop {
                // Subscribed before looking, so an answer recorded in between still wakes us.
                let mut changes = self.events.subscribe();
                {
                    let mut state = self.lock();
                    match state.live_pending(id, Instant::now()) {
                        None => return Ok(None),
                        Some(p) => {
                            if let Some(answer) = &p.answer {
                                return Ok(Some(answer.clone()));
                            }
                        }
                    }
                }
                if tokio::time::Instant::now() >= deadline {
                    return Ok(None);
                }
                // A timeout (or a closed sender, impossible while `self` lives) ends the wait
                // after one more look.
                let _ = tokio::time::timeout_at(deadline, changes.changed()).await;
            }
        })
    }

    fn remove_pending<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let removed = self.lock().pending.remove(id).is_some();
            if removed {
                self.notify();
            }
            Ok(())
        })
    }

    fn wait_pending_change<'a>(
        &'a self,
        within: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut changes = self.events.subscribe();
            let _ = tokio::time::timeout(bounded(within), changes.changed()).await;
            Ok(())
        })
    }

    fn ping<'a>(&'a self) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }

    fn describe(&self) -> String {
        "memory".to_owned()
    }
}
