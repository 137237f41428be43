//! The broker daemon: one per user, a Unix socket, a queue of questions from proxies and
//! any number of approval terminals. The first decision wins; everyone else sees it resolved.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;
use toolgate_store::{Cursor, EmbeddedStore};

use super::hooks::{Audits, HookSession, Policies};
use super::paths::{self, Layout};
use super::proto::{
    self, Choice, ErrorCode, FromBroker, HookEffect, HookEvent, MAX_PENDING_PER_PROXY,
    MAX_TIMEOUT_MS, Pending, Question, Role, SharedApproval, SharedAttempt, TaintToken, ToBroker,
    VERSION, Withdrawal,
};

/// How long a new connection has to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// The most connections served at once.
const MAX_CONNECTIONS: usize = 512;

fn decode_digest(hex_digest: &str) -> Option<[u8; 32]> {
    hex::decode(hex_digest)
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok())
}

use toolgate_runtime::clock::now_ms;
use toolgate_runtime::fsutil::{self, LockError};

struct Conn {
    role: Role,
    pid: u32,
    /// The proxy's `--server` name.
    server: Option<String>,
    session: Option<String>,
    tx: mpsc::UnboundedSender<FromBroker>,
}

struct Entry {
    view: Pending,
    conn: u64,
    /// The proxy's own id for the question.
    local: u64,
}

/// Tokens kept per agent session (oldest dropped first).
const MAX_SESSION_TOKENS: usize = 20_000;
/// Agent sessions kept (the one with the oldest activity dropped first).
const MAX_SESSIONS: usize = 256;

/// Session approvals kept per agent session (oldest dropped first; a proxy keeps its own).
const MAX_SESSION_APPROVALS: usize = 1024;
/// Budget attempts kept per agent session for proxies that join later (oldest dropped
/// first; every proxy still counts its own calls).
const MAX_SESSION_ATTEMPTS: usize = 20_000;

/// Prompt digests kept per agent session (oldest dropped first).
const MAX_SESSION_DIGESTS: usize = 10_000;
/// How long a hook connection has to send its event after `welcome`.
const HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an agent session's state is kept in the store after its last use (the gateway's
/// session TTL).
const SESSION_TTL: Duration = Duration::from_secs(24 * 3600);

/// The reason (and fix) the sink gate gives in a session whose state was lost.
const STATE_LOST: &str = "toolgate lost what it knew of this agent session (its state store in the broker directory was deleted or replaced while the session ran, so taint and the prompts' provenance are gone). help: start a new agent session (restart the client)";

/// One entry of an agent session's stream in the broker's store (`EmbeddedStore`, taint
/// stream; session approvals go to its approvals stream as `SharedApproval`s). Everything a
/// session shares is written before the broker relays or acts on it, so a broker that starts
/// again resumes the session from these.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case", deny_unknown_fields)]
enum Saved {
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
enum Standing {
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
struct Recent<T> {
    order: std::collections::VecDeque<T>,
    set: std::collections::HashSet<T>,
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
    fn add(&mut self, items: impl IntoIterator<Item = T>, max: usize) -> Vec<T> {
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

    fn len(&self) -> usize {
        self.order.len()
    }

    fn iter(&self) -> impl Iterator<Item = &T> {
        self.order.iter()
    }
}

/// What the proxies (and hooks) of one agent session share.
#[derive(Default)]
struct SharedSession {
    tokens: Recent<TaintToken>,
    approvals: Recent<SharedApproval>,
    /// With the pid of the proxy that made them (not replayed to that proxy).
    attempts: std::collections::VecDeque<(u32, SharedAttempt)>,
    /// Digests (hex) of destinations the user typed in a prompt (client hooks).
    vouched: Recent<String>,
    /// The policy session the session's hooks decide in, once a hook came.
    hook: Option<HookSession>,
    /// `(tool, at_ms)` attempts of budgeted tools the session's hooks made (for a hook
    /// session rebuilt by a broker that started again).
    hook_attempts: std::collections::VecDeque<(String, u64)>,
    standing: Standing,
    /// The store held nothing of the session when this broker loaded it.
    new_here: bool,
    touched: u64,
}

impl SharedSession {
    /// Whether it holds anything shared.
    fn shares(&self) -> bool {
        self.tokens.len() > 0
            || self.approvals.len() > 0
            || !self.attempts.is_empty()
            || self.vouched.len() > 0
            || !self.hook_attempts.is_empty()
    }

    /// Takes in one entry of the store.
    fn replay(&mut self, entry: Saved) {
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

/// The session `key` as the store holds it (empty, `Standing::Unknown`, when it holds
/// nothing of it). Anything unreadable fails closed: the session counts as lost.
fn load(store: &EmbeddedStore, key: &str) -> SharedSession {
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
fn predates(key: &str, created_ms: u64, replaced: bool) -> bool {
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
fn process_start_ms(pid: u32) -> Option<u64> {
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

#[derive(Default)]
struct BrokerState {
    next_conn: u64,
    next_request: u64,
    conns: HashMap<u64, Conn>,
    pending: BTreeMap<u64, Entry>,
    sessions: HashMap<String, SharedSession>,
    clock: u64,
    /// The policies hooks decide with, compiled.
    policies: Policies,
    /// The audit logs of hook decisions, open.
    audits: Audits,
    /// The agent sessions' durable state (none only in unit tests).
    store: Option<Arc<EmbeddedStore>>,
    /// This broker created the store although a broker ran in the directory before: what
    /// that one stored is gone.
    store_replaced: bool,
}

impl BrokerState {
    fn broadcast(&self, message: &FromBroker) {
        for conn in self.conns.values().filter(|c| c.role == Role::Approver) {
            let _ = conn.tx.send(message.clone());
        }
    }

    /// The shared state of the session of connection `from` (created, the oldest session
    /// dropped at the bound), with its key.
    fn session_of(&mut self, from: u64) -> Option<(String, &mut SharedSession)> {
        let session = self.conns.get(&from).and_then(|c| c.session.clone())?;
        Some((session.clone(), self.session_named(session)))
    }

    /// The shared state of the session `session` (created, the oldest session dropped at the
    /// bound).
    fn session_named(&mut self, session: String) -> &mut SharedSession {
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
    fn proxy_knows(&mut self, session: &str) {
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
    fn save(
        &self,
        session: &str,
        entries: &[Saved],
        approvals: &[SharedApproval],
    ) -> Result<(), String> {
        save(self.store.as_deref(), session, entries, approvals)
    }

    /// Sends `message` to the other proxies of `session`.
    fn relay(&self, from: u64, session: &str, message: &FromBroker) {
        for (id, conn) in &self.conns {
            if *id != from && conn.role == Role::Proxy && conn.session.as_deref() == Some(session) {
                let _ = conn.tx.send(message.clone());
            }
        }
    }

    /// Stores new session approvals of a session and relays them to its other proxies.
    fn share_approvals(&mut self, from: u64, approvals: Vec<SharedApproval>) {
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
    fn share_attempts(&mut self, from: u64, attempts: Vec<SharedAttempt>) {
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
    fn share(&mut self, from: u64, tokens: Vec<TaintToken>) {
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
    fn share_from_hook(&mut self, session: &str, tokens: Vec<TaintToken>) -> Result<(), String> {
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
    fn share_digests(&mut self, session: &str, digests: Vec<String>) {
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

    /// Decides (or records) one hook event of the agent session `key`.
    fn hook(
        &mut self,
        key: &str,
        policy: Option<&std::path::Path>,
        workspace: &std::path::Path,
        audit: &std::path::Path,
        event: HookEvent,
    ) -> (HookEffect, String) {
        // An MCP tool of a server that a proxy of this session wraps is decided once, there;
        // its output is indexed there too (and shared with this session).
        let (HookEvent::Before {
            server: Some(server),
            tool,
            ..
        }
        | HookEvent::After {
            server: Some(server),
            tool,
            ..
        }) = &event
        else {
            return self.hook_decide(key, policy, workspace, audit, event);
        };
        if self.conns.values().any(|c| {
            c.role == Role::Proxy
                && c.session.as_deref() == Some(key)
                && c.server.as_deref() == Some(server.as_str())
        }) {
            return (
                HookEffect::Abstain,
                format!(
                    "`{tool}` of `{server}` is decided by the `toolgate wrap` proxy of `{server}` in this session"
                ),
            );
        }
        self.hook_decide(key, policy, workspace, audit, event)
    }

    /// [`BrokerState::hook`] for an event no proxy of the session takes care of.
    fn hook_decide(
        &mut self,
        key: &str,
        policy: Option<&std::path::Path>,
        workspace: &std::path::Path,
        audit: &std::path::Path,
        event: HookEvent,
    ) -> (HookEffect, String) {
        let engine = match self.policies.get(policy, workspace, audit) {
            Ok(engine) => engine,
            Err(reason) => return (HookEffect::Deny, reason),
        };
        let starts = matches!(event, HookEvent::SessionStart {});
        let shared = self.session_named(key.to_owned());
        // A session whose client predates the store: a `SessionStart` says it is new; any
        // other event, that it ran before and what the store held of it is gone.
        let settled = (shared.standing == Standing::Suspect).then(|| {
            if starts {
                shared.standing = Standing::Whole;
                Saved::Started {}
            } else {
                tracing::warn!("agent session `{key}` ran before the broker's store was created: its state was lost, its sinks ask");
                shared.standing = Standing::Lost;
                Saved::Lost {}
            }
        });
        if shared.hook.is_none() {
            // The first hook of the session: it starts from what the proxies shared so far
            // (and, in a broker that started again, from what the store kept).
            let mut hook = HookSession::new(&engine);
            for t in shared.tokens.iter() {
                hook.import_token(t);
            }
            for d in shared.vouched.iter() {
                if let Some(d) = decode_digest(d) {
                    hook.import_digest(d);
                }
            }
            for (tool, at_ms) in &shared.hook_attempts {
                hook.import_attempt(tool, *at_ms);
            }
            shared.hook = Some(hook);
        }
        if shared.standing == Standing::Lost
            && let Some(hook) = shared.hook.as_mut()
        {
            hook.mark_state_lost(STATE_LOST);
        }
        if let Some(settled) = settled
            && let Err(why) = self.save(key, &[settled], &[])
        {
            return (HookEffect::Deny, why);
        }
        let Some(hook) = self
            .sessions
            .get_mut(key)
            .and_then(|shared| shared.hook.as_mut())
        else {
            return (
                HookEffect::Deny,
                "internal error: the agent session has no hook state".to_owned(),
            );
        };
        // Prompts that wait for their transcript: confirmed by any later event.
        if hook.has_pending() && !matches!(event, HookEvent::Prompt { .. }) {
            let fresh: Vec<String> = hook.confirm(now_ms()).iter().map(hex::encode).collect();
            if !fresh.is_empty() {
                self.share_digests(key, fresh);
            }
            return self.hook_event(key, &engine, audit, event);
        }
        self.hook_event(key, &engine, audit, event)
    }

    /// [`BrokerState::hook_decide`] once the session's hook state exists.
    fn hook_event(
        &mut self,
        key: &str,
        engine: &Arc<toolgate_policy::eval::Engine>,
        audit: &std::path::Path,
        event: HookEvent,
    ) -> (HookEffect, String) {
        let engine = engine.as_ref();
        let Some(hook) = self.sessions.get_mut(key).and_then(|s| s.hook.as_mut()) else {
            return (
                HookEffect::Deny,
                "internal error: the agent session has no hook state".to_owned(),
            );
        };
        match event {
            HookEvent::Before {
                server,
                tool,
                arguments,
                output,
            } => {
                let counted_before = hook.calls(&tool);
                let now = now_ms();
                let mut ruling = hook.decide(engine, server.as_deref(), &tool, &arguments, now);
                // A counted budget attempt is written before the verdict goes out.
                let attempt = (hook.calls(&tool) > counted_before).then(|| Saved::Attempt {
                    pid: 0,
                    hook: true,
                    attempt: SharedAttempt {
                        server: server.clone(),
                        tool: tool.clone(),
                        at_ms: now,
                    },
                });
                let mut tokens = Vec::new();
                if let Some(output) = output.filter(|_| ruling.decision != HookEffect::Deny) {
                    tokens = hook.record(engine, server.as_deref(), &tool, &output);
                }
                // No record, no call: a decision that cannot be written is a deny.
                ruling.event.session = Some(key.to_owned());
                if let Err(reason) = self.audits.record(audit, &ruling.event) {
                    return (HookEffect::Deny, reason);
                }
                if let Some(attempt) = attempt {
                    let shared = self.session_named(key.to_owned());
                    if let Saved::Attempt { attempt, .. } = &attempt {
                        shared
                            .hook_attempts
                            .push_back((attempt.tool.clone(), attempt.at_ms));
                        while shared.hook_attempts.len() > MAX_SESSION_ATTEMPTS {
                            shared.hook_attempts.pop_front();
                        }
                    }
                    if let Err(why) = self.save(key, &[attempt], &[]) {
                        return (HookEffect::Deny, why);
                    }
                }
                // What the call's output taints must outlive the broker, or the call waits.
                if let Err(why) = self.share_from_hook(key, tokens) {
                    return (HookEffect::Deny, why);
                }
                (ruling.decision, ruling.reason)
            }
            HookEvent::After {
                server,
                tool,
                output,
            } => {
                let tokens = hook.record(engine, server.as_deref(), &tool, &output);
                let n = tokens.len();
                // The output was delivered already: nothing to withhold; a restart would miss it.
                if let Err(why) = self.share_from_hook(key, tokens) {
                    tracing::error!("{why}");
                }
                (
                    HookEffect::Abstain,
                    format!("the output of `{tool}` was indexed ({n} new destinations)"),
                )
            }
            HookEvent::Prompt { text, transcript } => {
                let (fresh, waiting) = hook.vouch(&text, transcript.as_deref(), now_ms());
                drop(text);
                let fresh: Vec<String> = fresh.iter().map(hex::encode).collect();
                let n = fresh.len();
                self.share_digests(key, fresh);
                let reason = match waiting {
                    Ok(false) => {
                        format!("{n} destinations the user typed are vouched for in this session")
                    }
                    Ok(true) => "the prompt's destinations are vouched for once the prompt is in the client's transcript".to_owned(),
                    Err(why) => format!("the prompt vouches for nothing: {why}"),
                };
                (HookEffect::Abstain, reason)
            }
            HookEvent::SessionStart {} => {
                (HookEffect::Abstain, "joined the agent session".to_owned())
            }
        }
    }

    fn count(&self, role: Role) -> usize {
        self.conns.values().filter(|c| c.role == role).count()
    }

    /// Removes a request without a decision: the proxy gets a deny (unless it is gone),
    /// approvers see it withdrawn.
    fn withdraw(&mut self, id: u64, why: Withdrawal, reason: &str) {
        if let Some(entry) = self.pending.remove(&id) {
            if let Some(proxy) = self
                .conns
                .get(&entry.conn)
                .filter(|_| why == Withdrawal::Expired)
            {
                let _ = proxy.tx.send(FromBroker::Answer {
                    id: entry.local,
                    decision: Choice::Deny,
                    reason: reason.to_owned(),
                });
            }
            self.broadcast(&FromBroker::Withdrawn { id, why });
        }
    }
}

/// Writes entries of `session` to `store` (none: nothing to do).
fn save(
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

fn tokens_saved(tokens: &[TaintToken]) -> Vec<Saved> {
    tokens
        .iter()
        .map(|t| Saved::Token { token: t.clone() })
        .collect()
}

struct Daemon {
    state: Mutex<BrokerState>,
    token: [u8; paths::TOKEN_BYTES],
    me: u32,
}

impl Daemon {
    fn lock(&self) -> MutexGuard<'_, BrokerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running broker's socket: removed (with the token) when dropped.
#[derive(Debug)]
pub struct Bound {
    listener: UnixListener,
    layout: Layout,
    _lock: std::fs::File,
    token: [u8; paths::TOKEN_BYTES],
    store: Arc<EmbeddedStore>,
    store_replaced: bool,
}

impl Drop for Bound {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.layout.socket);
        let _ = std::fs::remove_file(&self.layout.token);
    }
}

/// Prepares the directory, refuses to start next to a live broker, replaces a stale
/// socket, writes a fresh token and binds the socket (0600).
pub fn bind(layout: &Layout) -> anyhow::Result<Bound> {
    paths::prepare_dir(&layout.dir).map_err(|e| {
        anyhow::anyhow!(
            "refusing to use the broker directory: {e}. help: remove it or fix its owner and mode (0700), or set {}",
            paths::DIR_ENV
        )
    })?;
    // One broker per directory: an exclusive lock held for the broker's lifetime. Its file
    // also says that a broker ran here before (see `store_replaced`).
    let lock_path = layout.dir.join("broker.lock");
    let ran_before = lock_path.exists();
    let live = || {
        anyhow::anyhow!(
            "a broker is already running on `{}`. help: use it (`toolgate approvals`), or stop it first",
            layout.socket.display()
        )
    };
    let lock = match fsutil::try_lock(&lock_path) {
        Ok(Some(lock)) => lock,
        Ok(None) | Err(LockError::Lock(_)) => return Err(live()),
        Err(LockError::Open(e)) => {
            return Err(e).with_context(|| format!("cannot open `{}`", lock_path.display()));
        }
    };
    match std::fs::symlink_metadata(&layout.socket) {
        Ok(meta) => {
            if std::os::unix::net::UnixStream::connect(&layout.socket).is_ok() {
                return Err(live());
            }
            if !meta.file_type().is_socket() {
                anyhow::bail!(
                    "`{}` exists and is not a socket. help: remove it",
                    layout.socket.display()
                );
            }
            tracing::info!("replacing the stale socket `{}`", layout.socket.display());
            std::fs::remove_file(&layout.socket)
                .with_context(|| format!("cannot remove `{}`", layout.socket.display()))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).context(format!("cannot inspect `{}`", layout.socket.display())),
    }
    // The agent sessions' state: opened before the socket, so that no hook is served by a
    // broker that cannot resume or record sessions.
    let store = EmbeddedStore::open(&layout.store, SESSION_TTL)
        .map_err(|e| anyhow::anyhow!("cannot open the broker's session store: {e}"))?;
    let token = paths::write_token(&layout.token)?;
    let listener = UnixListener::bind(&layout.socket)
        .with_context(|| format!("cannot listen on `{}`", layout.socket.display()))?;
    let bound = Bound {
        listener,
        layout: layout.clone(),
        _lock: lock,
        token,
        store_replaced: store.fresh() && ran_before,
        store: Arc::new(store),
    };
    std::fs::set_permissions(&layout.socket, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot set the mode of `{}`", layout.socket.display()))?;
    Ok(bound)
}

/// Serves until `shutdown` resolves; the socket and token are removed on return.
pub async fn serve(bound: Bound, shutdown: impl std::future::Future<Output = ()>) {
    let shared = Arc::new(Daemon {
        state: Mutex::new(BrokerState {
            store: Some(bound.store.clone()),
            store_replaced: bound.store_replaced,
            ..BrokerState::default()
        }),
        token: bound.token,
        me: paths::my_uid(),
    });
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = bound.listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let shared = shared.clone();
                    tokio::spawn(async move { serve_conn(shared, stream).await });
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    drop(bound);
}

async fn reject(write: &mut tokio::net::unix::OwnedWriteHalf, message: FromBroker) {
    let _ = write.write_all(&proto::line(&message)).await;
    let _ = write.flush().await;
}

async fn send_now(stream: &mut UnixStream, message: &FromBroker) {
    let _ = stream.write_all(&proto::line(message)).await;
    let _ = stream.flush().await;
}

fn error(code: ErrorCode, message: impl Into<String>) -> FromBroker {
    FromBroker::Error {
        code,
        message: message.into(),
        version: VERSION,
    }
}

async fn serve_conn(shared: Arc<Daemon>, mut stream: UnixStream) {
    // Only our own user: checked before a single byte is read.
    match stream.peer_cred() {
        Ok(cred) if paths::peer_allowed(cred.uid(), shared.me) => {}
        Ok(cred) => {
            tracing::warn!(
                "refused a connection from uid {} (the broker serves uid {})",
                cred.uid(),
                shared.me
            );
            return;
        }
        Err(e) => {
            tracing::warn!("refused a connection whose peer cannot be identified: {e}");
            return;
        }
    }
    if shared.lock().conns.len() >= MAX_CONNECTIONS {
        send_now(&mut stream, &error(ErrorCode::Busy, "too many connections")).await;
        return;
    }
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, proto::read_line(&mut reader)).await {
        Ok(Ok(Some(line))) => line,
        _ => return,
    };
    match proto::hello_version(&hello) {
        Some(v) if v == u64::from(VERSION) => {}
        Some(v) => {
            reject(
                &mut write,
                error(
                    ErrorCode::Incompatible,
                    format!("this broker speaks protocol {VERSION}, the peer {v}"),
                ),
            )
            .await;
            return;
        }
        None => {
            reject(
                &mut write,
                error(ErrorCode::Invalid, "the first message must be `hello`"),
            )
            .await;
            return;
        }
    }
    let (role, pid, server, session, known) = match serde_json::from_slice::<ToBroker>(&hello) {
        Ok(ToBroker::Hello {
            token,
            role,
            pid,
            server,
            session,
            known,
            ..
        }) => {
            let given = hex::decode(token.as_bytes()).unwrap_or_default();
            if !paths::token_matches(&given, &shared.token) {
                reject(&mut write, error(ErrorCode::Unauthenticated, "wrong token")).await;
                return;
            }
            (role, pid, server, session, known)
        }
        Ok(_) | Err(_) => {
            reject(&mut write, error(ErrorCode::Invalid, "malformed `hello`")).await;
            return;
        }
    };
    if role == Role::Hook && session.as_deref().is_none_or(str::is_empty) {
        reject(
            &mut write,
            error(ErrorCode::Invalid, "a hook must name its agent session"),
        )
        .await;
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<FromBroker>();
    let writer = tokio::spawn(async move {
        while let Some(message) = rx.recv().await {
            if write.write_all(&proto::line(&message)).await.is_err() {
                break;
            }
            let _ = write.flush().await;
        }
    });
    let _ = tx.send(FromBroker::Welcome {
        version: VERSION,
        broker_pid: std::process::id(),
    });
    let conn_id = {
        let mut st = shared.lock();
        st.next_conn = st.next_conn.wrapping_add(1);
        let id = st.next_conn;
        match role {
            Role::Status => {
                let _ = tx.send(FromBroker::Status {
                    version: VERSION,
                    pid: std::process::id(),
                    proxies: st.count(Role::Proxy),
                    approvers: st.count(Role::Approver),
                    pending: st.pending.len(),
                    // Those with anything shared (a proxy that joined, or a session resumed
                    // from the store, may have nothing yet).
                    sessions: st.sessions.values().filter(|s| s.shares()).count(),
                    shared_tokens: st.sessions.values().map(|s| s.tokens.len()).sum(),
                });
            }
            Role::Approver => {
                // Registered and given the snapshot under one lock: no event is missed.
                let _ = tx.send(FromBroker::Snapshot {
                    pending: st.pending.values().map(|e| e.view.clone()).collect(),
                });
            }
            Role::Proxy => {
                // A session this broker has not met yet is resumed from the store first.
                if let Some(key) = session.clone() {
                    st.session_named(key.clone());
                    if known {
                        st.proxy_knows(&key);
                    }
                }
                // What the session's other proxies saw before this one connected.
                let known: Vec<TaintToken> = session
                    .as_ref()
                    .and_then(|k| st.sessions.get(k))
                    .map(|s| s.tokens.iter().cloned().collect())
                    .unwrap_or_default();
                for chunk in known.chunks(proto::MAX_TOKENS_PER_MESSAGE) {
                    let _ = tx.send(FromBroker::Taint {
                        tokens: chunk.to_vec(),
                    });
                }
                if let Some(shared) = session.as_ref().and_then(|k| st.sessions.get(k)) {
                    let approvals: Vec<SharedApproval> = shared.approvals.iter().cloned().collect();
                    for chunk in approvals.chunks(proto::MAX_APPROVALS_PER_MESSAGE) {
                        let _ = tx.send(FromBroker::Approvals {
                            approvals: chunk.to_vec(),
                        });
                    }
                    let attempts: Vec<SharedAttempt> = shared
                        .attempts
                        .iter()
                        .filter(|(from, _)| *from != pid)
                        .map(|(_, a)| a.clone())
                        .collect();
                    for chunk in attempts.chunks(proto::MAX_ATTEMPTS_PER_MESSAGE) {
                        let _ = tx.send(FromBroker::Attempts {
                            attempts: chunk.to_vec(),
                        });
                    }
                }
                if let Some(shared) = session.as_ref().and_then(|k| st.sessions.get(k)) {
                    let digests: Vec<String> = shared.vouched.iter().cloned().collect();
                    for chunk in digests.chunks(proto::MAX_DIGESTS_PER_MESSAGE) {
                        let _ = tx.send(FromBroker::Vouched {
                            digests: chunk.to_vec(),
                        });
                    }
                }
                // Sent under the same lock: nothing shared later comes before it.
                let _ = tx.send(FromBroker::Synced {});
            }
            Role::Hook => {}
        }
        if !matches!(role, Role::Status | Role::Hook) {
            st.conns.insert(
                id,
                Conn {
                    role,
                    pid,
                    server,
                    session: session.clone(),
                    tx: tx.clone(),
                },
            );
        }
        id
    };
    if role == Role::Status {
        drop(tx);
        let _ = writer.await;
        return;
    }
    if role == Role::Hook {
        let verdict = hook_conn(&shared, &mut reader, session.unwrap_or_default()).await;
        let _ = tx.send(verdict);
        drop(tx);
        let _ = writer.await;
        return;
    }
    loop {
        let line = match proto::read_line(&mut reader).await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                let _ = tx.send(error(ErrorCode::Invalid, e.to_string()));
                break;
            }
        };
        let message = match serde_json::from_slice::<ToBroker>(&line) {
            Ok(m) => m,
            Err(e) => {
                let _ = tx.send(error(ErrorCode::Invalid, format!("invalid message: {e}")));
                break;
            }
        };
        if let Err(why) = handle(&shared, conn_id, role, message) {
            let _ = tx.send(error(ErrorCode::Invalid, why));
            break;
        }
    }
    // Gone: its questions are withdrawn.
    {
        let mut st = shared.lock();
        st.conns.remove(&conn_id);
        let mine: Vec<u64> = st
            .pending
            .iter()
            .filter(|(_, e)| e.conn == conn_id)
            .map(|(id, _)| *id)
            .collect();
        for id in mine {
            st.withdraw(id, Withdrawal::ProxyGone, "the proxy went away");
        }
    }
    drop(tx);
    let _ = writer.await;
}

/// Reads a hook's one event and decides it: a verdict, or an error that the hook turns into
/// a deny.
async fn hook_conn(
    shared: &Arc<Daemon>,
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    session: String,
) -> FromBroker {
    let line = match tokio::time::timeout(
        HOOK_TIMEOUT,
        proto::read_line_within(reader, proto::MAX_HOOK_LINE),
    )
    .await
    {
        Ok(Ok(Some(line))) => line,
        Ok(Ok(None)) => return error(ErrorCode::Invalid, "the hook sent no event"),
        Ok(Err(e)) => return error(ErrorCode::Invalid, e.to_string()),
        Err(_) => {
            return error(
                ErrorCode::Invalid,
                format!("the hook sent no event within {} s", HOOK_TIMEOUT.as_secs()),
            );
        }
    };
    let (policy, workspace, audit, event) = match serde_json::from_slice::<ToBroker>(&line) {
        Ok(ToBroker::Hook {
            policy,
            workspace,
            audit,
            event,
        }) => (policy, workspace, audit, event),
        Ok(_) => return error(ErrorCode::Invalid, "a hook may only send `hook`"),
        Err(e) => return error(ErrorCode::Invalid, format!("invalid hook event: {e}")),
    };
    if let Err(why) = event.validate() {
        return error(ErrorCode::Invalid, why);
    }
    let absolute = |p: &str| p.len() <= proto::MAX_PATH && p.starts_with('/');
    if !absolute(&workspace)
        || policy.as_deref().is_some_and(|p| !absolute(p))
        || audit.as_deref().is_some_and(|p| !absolute(p))
    {
        return error(
            ErrorCode::Invalid,
            format!(
                "the workspace and the policy must be absolute paths of at most {} bytes",
                proto::MAX_PATH
            ),
        );
    }
    let audit = match audit {
        Some(path) => std::path::PathBuf::from(path),
        None => paths::default_audit(std::path::Path::new(&workspace)),
    };
    let (decision, reason) = shared.lock().hook(
        &session,
        policy.as_deref().map(std::path::Path::new),
        std::path::Path::new(&workspace),
        &audit,
        event,
    );
    FromBroker::Verdict { decision, reason }
}

/// Handles one message; `Err` is a protocol violation that closes the connection.
fn handle(shared: &Arc<Daemon>, conn_id: u64, role: Role, message: ToBroker) -> Result<(), String> {
    match (role, message) {
        (
            Role::Proxy,
            ToBroker::Ask {
                id,
                question,
                timeout_ms,
            },
        ) => ask(shared, conn_id, id, question, timeout_ms),
        (Role::Proxy, ToBroker::Withdraw { id, why }) => {
            let mut st = shared.lock();
            let found = st
                .pending
                .iter()
                .find(|(_, e)| e.conn == conn_id && e.local == id)
                .map(|(k, _)| *k);
            if let Some(key) = found {
                let why = if why == Withdrawal::Expired {
                    Withdrawal::Expired
                } else {
                    Withdrawal::Cancelled
                };
                st.withdraw(key, why, "withdrawn by the proxy");
            }
            Ok(())
        }
        (Role::Proxy, ToBroker::Taint { tokens }) => {
            proto::validate_tokens(&tokens)?;
            shared.lock().share(conn_id, tokens);
            Ok(())
        }
        (Role::Proxy, ToBroker::Approvals { approvals }) => {
            proto::validate_approvals(&approvals)?;
            shared.lock().share_approvals(conn_id, approvals);
            Ok(())
        }
        (Role::Proxy, ToBroker::Attempts { attempts }) => {
            proto::validate_attempts(&attempts)?;
            shared.lock().share_attempts(conn_id, attempts);
            Ok(())
        }
        (Role::Approver, ToBroker::Decide { id, decision }) => {
            let mut st = shared.lock();
            let by = st
                .conns
                .get(&conn_id)
                .map(|c| format!("approver pid {}", c.pid))
                .unwrap_or_else(|| "an approver".to_owned());
            let result = match st.pending.remove(&id) {
                Some(entry) => {
                    if let Some(proxy) = st.conns.get(&entry.conn) {
                        let reason = match decision {
                            Choice::Deny => format!("denied in `toolgate approvals` ({by})"),
                            _ => format!("allowed in `toolgate approvals` ({by})"),
                        };
                        let _ = proxy.tx.send(FromBroker::Answer {
                            id: entry.local,
                            decision,
                            reason,
                        });
                    }
                    st.broadcast(&FromBroker::Resolved {
                        id,
                        decision,
                        by: by.clone(),
                    });
                    FromBroker::DecideResult {
                        id,
                        accepted: true,
                        message: format!("request {id}: {}", decision.cli_name()),
                    }
                }
                None => FromBroker::DecideResult {
                    id,
                    accepted: false,
                    message: format!(
                        "request {id} is not pending (already decided, withdrawn or expired)"
                    ),
                },
            };
            if let Some(me) = st.conns.get(&conn_id) {
                let _ = me.tx.send(result);
            }
            Ok(())
        }
        (role, other) => Err(format!(
            "a {role:?} connection may not send `{}`",
            serde_json::to_value(&other)
                .ok()
                .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
                .unwrap_or_default()
        )),
    }
}

fn ask(
    shared: &Arc<Daemon>,
    conn_id: u64,
    local: u64,
    question: Question,
    timeout_ms: u64,
) -> Result<(), String> {
    question.validate()?;
    let timeout_ms = timeout_ms.clamp(1, MAX_TIMEOUT_MS);
    let id = {
        let mut st = shared.lock();
        let mine = st.pending.values().filter(|e| e.conn == conn_id).count();
        if mine >= MAX_PENDING_PER_PROXY {
            return Err(format!(
                "more than {MAX_PENDING_PER_PROXY} questions pending from one proxy"
            ));
        }
        if st
            .pending
            .values()
            .any(|e| e.conn == conn_id && e.local == local)
        {
            return Err(format!("question {local} is already pending"));
        }
        let (session, pid) = st
            .conns
            .get(&conn_id)
            .map(|c| (c.session.clone(), c.pid))
            .unwrap_or_default();
        st.next_request = st.next_request.wrapping_add(1);
        let id = st.next_request;
        let created_ms = now_ms();
        let view = Pending {
            id,
            question,
            session,
            proxy_pid: pid,
            created_ms,
            expires_ms: created_ms.saturating_add(timeout_ms),
        };
        st.broadcast(&FromBroker::Added {
            request: view.clone(),
        });
        st.pending.insert(
            id,
            Entry {
                view,
                conn: conn_id,
                local,
            },
        );
        id
    };
    let shared = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(timeout_ms)).await;
        let secs = timeout_ms / 1000;
        shared.lock().withdraw(
            id,
            Withdrawal::Expired,
            &format!("no decision in `toolgate approvals` within {secs} s"),
        );
    });
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
pub async fn signals() {
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    match term {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
