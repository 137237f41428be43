//! The broker daemon: one per user, a Unix socket, a queue of questions from proxies and
//! any number of approval terminals. The first decision wins; everyone else sees it resolved.

mod conns;
mod hook_events;
mod sessions;
use conns::*;
use hook_events::*;
use sessions::*;
use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;
use toolgate_store::{Cursor, EmbeddedStore};

use super::hooks::{Audits, Held, HookSession, Policies};
use super::proto::{
    self, Choice, ErrorCode, FromBroker, HookEffect, HookEvent, MAX_PENDING_PER_PROXY,
    MAX_TIMEOUT_MS, Pending, Question, Role, SharedApproval, SharedAttempt, TaintToken, ToBroker,
    VERSION, Withdrawal,
};
use toolgate_policy::VouchKey;
use toolgate_runtime::paths::{self, Layout};

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
    asker: Asker,
}

/// Who waits for a request's answer.
enum Asker {
    /// A proxy's question, by its own id for it.
    Proxy { conn: u64, local: u64 },
    /// A hook's ask its client cannot show.
    Hook(Box<HeldAsk>),
}

impl Asker {
    fn proxy(&self) -> Option<(u64, u64)> {
        match self {
            Asker::Proxy { conn, local } => Some((*conn, *local)),
            Asker::Hook(_) => None,
        }
    }
}

/// A hook's ask held in the queue: its agent session, what an answer grants, and the hook
/// still waiting for it, if any.
struct HeldAsk {
    session: String,
    held: Box<Held>,
    audit: std::path::PathBuf,
    waiter: Option<tokio::sync::oneshot::Sender<Choice>>,
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
const MAX_SESSION_DIGESTS: usize = 20_000;
/// How long a hook connection has to send its event after `welcome`.
const HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an agent session's state is kept in the store after its last use (the gateway's
/// session TTL).
const SESSION_TTL: Duration = Duration::from_secs(24 * 3600);

/// The reason (and fix) the sink gate gives in a session whose state was lost.
const STATE_LOST: &str = "toolgate lost what it knew of this agent session (its state store in the broker directory was deleted or replaced while the session ran, so taint and the prompts' provenance are gone). help: start a new agent session (restart the client)";

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
    /// The key of the digests of the user's prompts ([`VouchKey`]; all zeros only in unit
    /// tests).
    vouch_key: VouchKey,
    /// This broker created the store although a broker ran in the directory before: what
    /// that one stored is gone.
    store_replaced: bool,
    /// When a connection last came or went (`None`: none has yet).
    last_active: Option<Instant>,
}

impl BrokerState {
    fn broadcast(&self, message: &FromBroker) {
        for conn in self.conns.values().filter(|c| c.role == Role::Approver) {
            let _ = conn.tx.send(message.clone());
        }
    }

    fn count(&self, role: Role) -> usize {
        self.conns.values().filter(|c| c.role == role).count()
    }

    /// Puts a request in the queue, shown to the approvers now and to those who connect
    /// later; it expires `timeout_ms` from now. Returns its id.
    fn enqueue(
        &mut self,
        question: Question,
        session: Option<String>,
        pid: u32,
        timeout_ms: u64,
        asker: Asker,
    ) -> u64 {
        self.next_request = self.next_request.wrapping_add(1);
        let id = self.next_request;
        let created_ms = now_ms();
        let view = Pending {
            id,
            question,
            session,
            proxy_pid: pid,
            created_ms,
            expires_ms: created_ms.saturating_add(timeout_ms),
        };
        self.broadcast(&FromBroker::Added {
            request: view.clone(),
        });
        self.pending.insert(id, Entry { view, asker });
        id
    }

    /// Removes a request without a decision: the proxy gets a deny (unless it is gone),
    /// approvers see it withdrawn.
    fn withdraw(&mut self, id: u64, why: Withdrawal, reason: &str) {
        if let Some(entry) = self.pending.remove(&id) {
            if let Some((proxy, local)) = entry
                .asker
                .proxy()
                .and_then(|(conn, local)| self.conns.get(&conn).map(|c| (c, local)))
                .filter(|_| why == Withdrawal::Expired)
            {
                let _ = proxy.tx.send(FromBroker::Answer {
                    id: local,
                    decision: Choice::Deny,
                    reason: reason.to_owned(),
                });
            }
            self.broadcast(&FromBroker::Withdrawn { id, why });
        }
    }
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
    vouch_key: VouchKey,
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
    let vouch_key = VouchKey::new(paths::vouch_key(&layout.vouch_key)?);
    let listener = UnixListener::bind(&layout.socket)
        .with_context(|| format!("cannot listen on `{}`", layout.socket.display()))?;
    let bound = Bound {
        listener,
        layout: layout.clone(),
        _lock: lock,
        token,
        store_replaced: store.fresh() && ran_before,
        store: Arc::new(store),
        vouch_key,
    };
    std::fs::set_permissions(&layout.socket, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot set the mode of `{}`", layout.socket.display()))?;
    Ok(bound)
}

/// Serves until `shutdown` resolves, or, with `idle_exit`, until that long has passed with
/// no connection and no request waiting (the agent sessions' state is in the durable store,
/// and the next hook or proxy starts a broker again); the socket and token are removed on
/// return.
pub async fn serve(
    bound: Bound,
    shutdown: impl std::future::Future<Output = ()>,
    idle_exit: Option<Duration>,
) {
    let started = Instant::now();
    let shared = Arc::new(Daemon {
        state: Mutex::new(BrokerState {
            store: Some(bound.store.clone()),
            store_replaced: bound.store_replaced,
            vouch_key: bound.vouch_key,
            ..BrokerState::default()
        }),
        token: bound.token,
        me: paths::my_uid(),
    });
    tokio::pin!(shutdown);
    // Looked at often enough to exit within a tenth of the idle time (at most a minute).
    let mut idle_check = tokio::time::interval(idle_exit.map_or(Duration::from_secs(60), |d| {
        (d / 10).clamp(Duration::from_millis(10), Duration::from_secs(60))
    }));
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            _ = idle_check.tick(), if idle_exit.is_some() => {
                let st = shared.lock();
                let quiet = st.last_active.unwrap_or(started).elapsed();
                if st.conns.is_empty() && st.pending.is_empty() && idle_exit.is_some_and(|d| quiet >= d) {
                    tracing::info!(
                        "no connection and no request for {} s: exiting (the next hook or proxy starts a broker again)",
                        quiet.as_secs()
                    );
                    break;
                }
            }
            accepted = bound.listener.accept() => match accepted {
                Ok((stream, _)) => {
                    shared.lock().last_active = Some(Instant::now());
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
