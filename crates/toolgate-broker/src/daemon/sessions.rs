//! An agent session at the broker: what its proxies and hooks shared, appended to the store
//! before it is relayed, and replayed to a proxy that joins later or a broker that starts
//! again.

#[allow(unused_imports, reason = "the daemon's imports, shared by its parts")]
use super::*;

/// One entry of an agent session's stream in the broker's store (`EmbeddedStore`, taint
/// stream; session approvals go to its approvals stream as `SharedApproval`s). Everything a
/// session shares is written before the broker relays or acts on it, so a broker that starts
/// again resumes the session from these.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case", deny_unknown_fields)]
pub(super) enum Saved {
    /// The broker met the session after the store was created: nothing of it can be lost.
    Seen {},
    /// The session's client is older than the store: it may have had state that a deleted
    /// store took with it. Settled by its next hook event (below).
    Suspect {},
    /// A suspect session's next hook event was `SessionStart`: a new session.
    Started {},
    /// A suspect session's next hook event was another: its state was lost.
    Lost {},
    Token {
        token: TaintToken,
    },
    Digest {
        digest: String,
    },
    /// A budget attempt, by a proxy (`pid`) or by the session's hooks (`hook`).
    Attempt {
        pid: u32,
        hook: bool,
        attempt: SharedAttempt,
    },
}

/// What the store says about whether a session's earlier state is all there.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Standing {
    /// Not looked up yet (or no store).
    #[default]
    Unknown,
    /// All of it is in the store.
    Whole,
    /// Its client predates the store; the next hook event settles it.
    Suspect,
    /// Its earlier state is gone: its sinks ask.
    Lost,
}

/// A set that keeps the order things were added in and forgets the oldest past its bound.
pub(super) struct Recent<T> {
    pub(super) order: std::collections::VecDeque<T>,
    pub(super) set: std::collections::HashSet<T>,
}

/// What the proxies (and hooks) of one agent session share.
#[derive(Default)]
pub(super) struct SharedSession {
    pub(super) tokens: Recent<TaintToken>,
    pub(super) approvals: Recent<SharedApproval>,
    /// With the pid of the proxy that made them (not replayed to that proxy).
    pub(super) attempts: std::collections::VecDeque<(u32, SharedAttempt)>,
    /// Digests (hex) of destinations the user typed in a prompt (client hooks).
    pub(super) vouched: Recent<String>,
    /// The policy session the session's hooks decide in, once a hook came.
    pub(super) hook: Option<HookSession>,
    /// `(tool, at_ms)` attempts of budgeted tools the session's hooks made (for a hook
    /// session rebuilt by a broker that started again).
    pub(super) hook_attempts: std::collections::VecDeque<(String, u64)>,
    pub(super) standing: Standing,
    /// The store held nothing of the session when this broker loaded it.
    pub(super) new_here: bool,
    pub(super) touched: u64,
}

/// The session `key` as the store holds it (empty, `Standing::Unknown`, when it holds
/// nothing of it). Anything unreadable fails closed: the session counts as lost.
pub(super) fn load(store: &EmbeddedStore, key: &str) -> SharedSession {
    let mut shared = SharedSession::default();
    let mut cursor = Cursor::default();
    loop {
        let page = match store.prepare_now(key, &cursor, None, now_ms()) {
            Ok(page) => page,
            Err(e) => {
                tracing::error!("cannot read agent session `{key}` from the store: {e}");
                shared.standing = Standing::Lost;
                return shared;
            }
        };
        if page.taint.is_empty() && page.approvals.is_empty() {
            return shared;
        }
        for entry in &page.taint {
            match serde_json::from_str::<Saved>(entry) {
                Ok(saved) => shared.replay(saved),
                Err(e) => {
                    tracing::error!("unreadable entry of agent session `{key}` in the store: {e}");
                    shared.standing = Standing::Lost;
                }
            }
        }
        let approvals = page
            .approvals
            .iter()
            .filter_map(|a| serde_json::from_str::<SharedApproval>(a).ok());
        shared.approvals.add(approvals, MAX_SESSION_APPROVALS);
        cursor = page.cursor;
    }
}

/// Whether session `key`, which the store holds nothing of, may have had events before the
/// store existed. `ppid-<pid>`: its client started before the store was created (a client whose
/// start cannot be read: yes, fail closed). Another name (`--session`): only when this broker
/// replaced a store that a broker before it had (`replaced`), as there is no process to ask.
pub(super) fn predates(key: &str, created_ms: u64, replaced: bool) -> bool {
    match key
        .strip_prefix("ppid-")
        .and_then(|p| p.parse::<u32>().ok())
    {
        Some(pid) => process_start_ms(pid).is_none_or(|started| started < created_ms),
        None => replaced,
    }
}

/// When process `pid` started (ms since the Unix epoch; up to a second early, as the boot
/// time is whole seconds), from `/proc/<pid>/stat` and `/proc/stat`.
pub(super) fn process_start_ms(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`: field 22 is the start time in clock ticks after boot.
    let rest = stat.get(stat.rfind(')')?.checked_add(1)?..)?;
    let ticks: u64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: u64 = boot
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let hz = rustix::param::clock_ticks_per_second().max(1);
    btime
        .checked_mul(1000)?
        .checked_add(ticks.checked_mul(1000)? / hz)
}

/// Writes entries of `session` to `store` (none: nothing to do).
pub(super) fn save(
    store: Option<&EmbeddedStore>,
    session: &str,
    entries: &[Saved],
    approvals: &[SharedApproval],
) -> Result<(), String> {
    let Some(store) = store else { return Ok(()) };
    let entries: Vec<String> = entries
        .iter()
        .filter_map(|e| serde_json::to_string(e).ok())
        .collect();
    let approvals: Vec<String> = approvals
        .iter()
        .filter_map(|a| serde_json::to_string(a).ok())
        .collect();
    store.append_now(session, &entries, &approvals).map_err(|e| {
        format!("toolgate cannot record this agent session's state, so it would not survive a restart of the broker: {e}")
    })
}

pub(super) fn tokens_saved(tokens: &[TaintToken]) -> Vec<Saved> {
    tokens
        .iter()
        .map(|t| Saved::Token { token: t.clone() })
        .collect()
}

impl<T> Default for Recent<T> {
    fn default() -> Self {
        Recent {
            order: std::collections::VecDeque::new(),
            set: std::collections::HashSet::new(),
        }
    }
}

impl<T: Clone + Eq + std::hash::Hash> Recent<T> {
    /// Adds the items not held yet, keeps at most `max` (oldest forgotten first), and
    /// returns the new ones in order.
    pub(super) fn add(&mut self, items: impl IntoIterator<Item = T>, max: usize) -> Vec<T> {
        let mut fresh = Vec::new();
        for item in items {
            if self.set.insert(item.clone()) {
                self.order.push_back(item.clone());
                fresh.push(item);
            }
        }
        while self.order.len() > max {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
        fresh
    }

    pub(super) fn len(&self) -> usize {
        self.order.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.order.iter()
    }
}

impl SharedSession {
    /// Whether it holds anything shared.
    pub(super) fn shares(&self) -> bool {
        self.tokens.len() > 0
            || self.approvals.len() > 0
            || !self.attempts.is_empty()
            || self.vouched.len() > 0
            || !self.hook_attempts.is_empty()
    }

    /// Takes in one entry of the store.
    pub(super) fn replay(&mut self, entry: Saved) {
        match entry {
            Saved::Seen {} | Saved::Started {} => {
                if self.standing != Standing::Lost {
                    self.standing = Standing::Whole;
                }
            }
            Saved::Suspect {} => {
                if self.standing != Standing::Lost {
                    self.standing = Standing::Suspect;
                }
            }
            Saved::Lost {} => self.standing = Standing::Lost,
            Saved::Token { token } => {
                self.tokens.add([token], MAX_SESSION_TOKENS);
            }
            Saved::Digest { digest } => {
                self.vouched.add([digest], MAX_SESSION_DIGESTS);
            }
            Saved::Attempt {
                hook: true,
                attempt,
                ..
            } => {
                self.hook_attempts.push_back((attempt.tool, attempt.at_ms));
                while self.hook_attempts.len() > MAX_SESSION_ATTEMPTS {
                    self.hook_attempts.pop_front();
                }
            }
            Saved::Attempt { pid, attempt, .. } => {
                self.attempts.push_back((pid, attempt));
                while self.attempts.len() > MAX_SESSION_ATTEMPTS {
                    self.attempts.pop_front();
                }
            }
        }
    }
}

impl BrokerState {
    /// The shared state of the session of connection `from` (created, the oldest session
    /// dropped at the bound), with its key.
    pub(super) fn session_of(&mut self, from: u64) -> Option<(String, &mut SharedSession)> {
        let session = self.conns.get(&from).and_then(|c| c.session.clone())?;
        Some((session.clone(), self.session_named(session)))
    }

    /// The shared state of the session `session` (created, the oldest session dropped at the
    /// bound).
    pub(super) fn session_named(&mut self, session: String) -> &mut SharedSession {
        self.clock = self.clock.wrapping_add(1);
        if !self.sessions.contains_key(&session) && self.sessions.len() >= MAX_SESSIONS {
            let oldest = self
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.touched)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.sessions.remove(&k);
            }
        }
        if !self.sessions.contains_key(&session)
            && let Some(store) = self.store.clone()
        {
            // Resumed from the store (a broker that started again, or a session dropped at
            // the bound); a session it holds nothing of is recorded as met.
            let mut loaded = load(&store, &session);
            if loaded.standing == Standing::Unknown {
                let suspect = predates(&session, store.created_ms(), self.store_replaced);
                let (first, standing) = if suspect {
                    (Saved::Suspect {}, Standing::Suspect)
                } else {
                    (Saved::Seen {}, Standing::Whole)
                };
                loaded.standing = standing;
                loaded.new_here = true;
                if let Err(why) = save(Some(&store), &session, &[first], &[]) {
                    tracing::error!("{why}");
                }
            }
            self.sessions.insert(session.clone(), loaded);
        }
        let shared = self.sessions.entry(session).or_default();
        shared.touched = self.clock;
        shared
    }

    /// A proxy of `session` says it shared or received state of the session before it
    /// connected (to a broker that started again): if the store held nothing of the session
    /// when this broker met it, that state was lost (what a broker is sent is stored before
    /// it is relayed; a proxy's connection ends only with its broker).
    pub(super) fn proxy_knows(&mut self, session: &str) {
        let Some(shared) = self.sessions.get_mut(session) else {
            return;
        };
        if !shared.new_here || shared.standing == Standing::Lost {
            return;
        }
        tracing::warn!(
            "a proxy of agent session `{session}` had state the broker does not: it was lost, the session's sinks ask"
        );
        shared.standing = Standing::Lost;
        if let Some(hook) = shared.hook.as_mut() {
            hook.mark_state_lost(STATE_LOST);
        }
        if let Err(why) = self.save(session, &[Saved::Lost {}], &[]) {
            tracing::error!("{why}");
        }
    }

    /// Writes entries of `session` to the store: durable when it returns `Ok`.
    pub(super) fn save(
        &self,
        session: &str,
        entries: &[Saved],
        approvals: &[SharedApproval],
    ) -> Result<(), String> {
        save(self.store.as_deref(), session, entries, approvals)
    }

    /// Sends `message` to the other proxies of `session`.
    pub(super) fn relay(&self, from: u64, session: &str, message: &FromBroker) {
        for (id, conn) in &self.conns {
            if *id != from && conn.role == Role::Proxy && conn.session.as_deref() == Some(session) {
                let _ = conn.tx.send(message.clone());
            }
        }
    }

    /// Stores new session approvals of a session and relays them to its other proxies.
    pub(super) fn share_approvals(&mut self, from: u64, approvals: Vec<SharedApproval>) {
        let Some((session, shared)) = self.session_of(from) else {
            return;
        };
        let fresh = shared.approvals.add(approvals, MAX_SESSION_APPROVALS);
        if !fresh.is_empty() {
            if let Err(why) = self.save(&session, &[], &fresh) {
                tracing::error!("{why}");
            }
            self.relay(from, &session, &FromBroker::Approvals { approvals: fresh });
        }
    }

    /// Stores attempts of a session and relays them to its other proxies.
    pub(super) fn share_attempts(&mut self, from: u64, attempts: Vec<SharedAttempt>) {
        let pid = self.conns.get(&from).map_or(0, |c| c.pid);
        let Some((session, shared)) = self.session_of(from) else {
            return;
        };
        shared
            .attempts
            .extend(attempts.iter().map(|a| (pid, a.clone())));
        while shared.attempts.len() > MAX_SESSION_ATTEMPTS {
            shared.attempts.pop_front();
        }
        if !attempts.is_empty() {
            let saved: Vec<Saved> = attempts
                .iter()
                .map(|a| Saved::Attempt {
                    pid,
                    hook: false,
                    attempt: a.clone(),
                })
                .collect();
            if let Err(why) = self.save(&session, &saved, &[]) {
                tracing::error!("{why}");
            }
            self.relay(from, &session, &FromBroker::Attempts { attempts });
        }
    }

    /// Stores new tokens of a session and relays them to its other proxies.
    pub(super) fn share(&mut self, from: u64, tokens: Vec<TaintToken>) {
        let Some((session, shared)) = self.session_of(from) else {
            return;
        };
        let fresh = shared.tokens.add(tokens, MAX_SESSION_TOKENS);
        if let Some(hook) = shared.hook.as_mut() {
            for t in &fresh {
                hook.import_token(t);
            }
        }
        if fresh.is_empty() {
            return;
        }
        if let Err(why) = self.save(&session, &tokens_saved(&fresh), &[]) {
            tracing::error!("{why}");
        }
        for (id, conn) in &self.conns {
            if *id != from && conn.role == Role::Proxy && conn.session.as_deref() == Some(&session)
            {
                let _ = conn.tx.send(FromBroker::Taint {
                    tokens: fresh.clone(),
                });
            }
        }
    }

    /// Stores tokens a hook's tool output added and relays them to the session's proxies
    /// (the hook session has them already). `Err`: they could not be written to the store.
    pub(super) fn share_from_hook(
        &mut self,
        session: &str,
        tokens: Vec<TaintToken>,
    ) -> Result<(), String> {
        let fresh = self
            .session_named(session.to_owned())
            .tokens
            .add(tokens, MAX_SESSION_TOKENS);
        let saved = self.save(session, &tokens_saved(&fresh), &[]);
        for chunk in fresh.chunks(proto::MAX_TOKENS_PER_MESSAGE) {
            self.relay(
                0,
                session,
                &FromBroker::Taint {
                    tokens: chunk.to_vec(),
                },
            );
        }
        saved
    }

    /// Stores prompt digests (hex) of a session and relays them to its proxies.
    pub(super) fn share_digests(&mut self, session: &str, digests: Vec<String>) {
        let fresh = self
            .session_named(session.to_owned())
            .vouched
            .add(digests, MAX_SESSION_DIGESTS);
        let saved: Vec<Saved> = fresh
            .iter()
            .map(|d| Saved::Digest { digest: d.clone() })
            .collect();
        if let Err(why) = self.save(session, &saved, &[]) {
            tracing::error!("{why}");
        }
        for chunk in fresh.chunks(proto::MAX_DIGESTS_PER_MESSAGE) {
            self.relay(
                0,
                session,
                &FromBroker::Vouched {
                    digests: chunk.to_vec(),
                },
            );
        }
    }
}
