//! Talking to the broker: connecting and authenticating, the approval channel `wrap` uses,
//! and the connections `toolgate approvals` and `toolgate status` use.
//!
//! Every failure on the proxy side is a deny whose reason names the cause and the fix.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot, watch};

use super::proto::{
    self, Choice, ErrorCode, FromBroker, Role, SharedApproval, SharedAttempt, TaintToken, ToBroker,
    VERSION, Withdrawal,
};
use toolgate_runtime::approval::question::question_of;
use toolgate_runtime::approval::{Answer, AnswerFuture, ApprovalChannel, Question};
use toolgate_runtime::paths::{self, Layout};

/// How long connecting and the hello exchange may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The fix named in every "no broker" reason.
pub const HELP_START: &str = "help: run `toolgate broker` in another terminal";

/// An authenticated connection.
#[derive(Debug)]
pub struct Connection {
    pub reader: BufReader<OwnedReadHalf>,
    pub writer: OwnedWriteHalf,
    pub broker_pid: u32,
}

impl Connection {
    /// Sends one message.
    pub async fn send(&mut self, message: &ToBroker) -> std::io::Result<()> {
        self.writer.write_all(&proto::line(message)).await?;
        self.writer.flush().await
    }

    /// Receives one message; `Ok(None)` when the broker closed the connection.
    pub async fn recv(&mut self) -> anyhow::Result<Option<FromBroker>> {
        match proto::read_line(&mut self.reader).await? {
            None => Ok(None),
            Some(line) => Ok(Some(serde_json::from_slice(&line).map_err(|e| {
                anyhow::anyhow!("the broker sent a message this toolgate does not understand: {e}")
            })?)),
        }
    }
}

/// Connects to the broker at `layout` and says hello. The error text names the cause and
/// the fix.
pub async fn connect(
    layout: &Layout,
    role: Role,
    server: Option<&str>,
    session: Option<&str>,
) -> Result<Connection, String> {
    connect_known(layout, role, server, session, false).await
}

/// [`connect`], saying whether this proxy shared or received state of its session before
/// (`known` in `hello`).
async fn connect_known(
    layout: &Layout,
    role: Role,
    server: Option<&str>,
    session: Option<&str>,
    known: bool,
) -> Result<Connection, String> {
    tokio::time::timeout(
        CONNECT_TIMEOUT,
        connect_inner(layout, role, server, session, known),
    )
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "the approval broker on `{}` did not answer within {} s. help: restart `toolgate broker`",
                layout.socket.display(),
                CONNECT_TIMEOUT.as_secs()
            ))
        })
}

async fn connect_inner(
    layout: &Layout,
    role: Role,
    server: Option<&str>,
    session: Option<&str>,
    known: bool,
) -> Result<Connection, String> {
    let socket = layout.socket.display();
    match std::fs::symlink_metadata(&layout.dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "no approval broker is running (`{}` does not exist). {HELP_START}",
                layout.dir.display()
            ));
        }
        _ => {}
    }
    paths::check_dir(&layout.dir).map_err(|e| {
        format!("the approval broker's directory cannot be trusted: {e}. help: remove it and run `toolgate broker`")
    })?;
    if std::fs::symlink_metadata(&layout.socket).is_err() {
        return Err(format!(
            "no approval broker is running (`{socket}` does not exist). {HELP_START}"
        ));
    }
    let token = paths::read_token(&layout.token).map_err(|e| {
        format!("the approval broker's token cannot be used: {e}. help: restart `toolgate broker`")
    })?;
    let stream = UnixStream::connect(&layout.socket).await.map_err(|e| {
        format!("no approval broker is running (cannot connect to `{socket}`: {e}). {HELP_START}")
    })?;
    let (read, writer) = stream.into_split();
    let mut conn = Connection {
        reader: BufReader::new(read),
        writer,
        broker_pid: 0,
    };
    let hello = ToBroker::Hello {
        version: VERSION,
        token: hex::encode(token),
        role,
        pid: std::process::id(),
        server: server.map(str::to_owned),
        session: session.map(str::to_owned),
        known,
    };
    conn.send(&hello)
        .await
        .map_err(|e| format!("the approval broker closed the connection ({e}). {HELP_START}"))?;
    match conn.recv().await {
        Ok(Some(FromBroker::Welcome {
            version,
            broker_pid,
        })) if version == VERSION => {
            conn.broker_pid = broker_pid;
            Ok(conn)
        }
        Ok(Some(FromBroker::Error {
            code: ErrorCode::Incompatible,
            version,
            ..
        })) => Err(format!(
            "the approval broker speaks protocol {version}, this toolgate speaks {VERSION}. help: restart `toolgate broker` with this toolgate"
        )),
        Ok(Some(FromBroker::Error {
            code: ErrorCode::Unauthenticated,
            ..
        })) => Err(
            "the approval broker refused this toolgate's token (unauthenticated). help: restart `toolgate broker`"
                .to_owned(),
        ),
        Ok(Some(FromBroker::Error { message, .. })) => Err(format!(
            "the approval broker refused the connection: {message}. help: restart `toolgate broker`"
        )),
        Ok(Some(_)) => Err(
            "the approval broker answered out of protocol (incompatible). help: restart `toolgate broker` with this toolgate"
                .to_owned(),
        ),
        Ok(None) => Err(format!(
            "the approval broker closed the connection without a greeting (it serves only its own user). {HELP_START}"
        )),
        Err(e) => Err(format!(
            "the approval broker could not be read ({e}). help: restart `toolgate broker`"
        )),
    }
}

type Waiters = Arc<Mutex<HashMap<u64, oneshot::Sender<Answer>>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A live proxy connection: a writer queue and the questions awaiting answers.
struct Link {
    tx: mpsc::UnboundedSender<ToBroker>,
    waiters: Waiters,
    alive: Arc<AtomicBool>,
    /// Becomes `true` when the broker has sent the session's state as of this connection
    /// (`synced`); closed when the connection ends.
    synced: watch::Receiver<bool>,
}

/// What the session's other proxies shared, not yet imported.
#[derive(Default)]
struct Inbox {
    tokens: Vec<TaintToken>,
    /// Approval keys given on this proxy's server.
    approvals: Vec<String>,
    /// `(tool, at_ms)` attempts on this proxy's server.
    attempts: Vec<(String, u64)>,
    /// Digests of destinations the user typed in a prompt of the session (client hooks).
    vouched: Vec<[u8; 32]>,
}

/// What this proxy has to share, not yet sent.
#[derive(Default)]
struct Outbox {
    tokens: Vec<TaintToken>,
    approvals: Vec<SharedApproval>,
    attempts: Vec<SharedAttempt>,
}

/// Bounds of what waits for import or sending (the local session is bounded too).
const MAX_INBOX_TOKENS: usize = 100_000;
const MAX_QUEUED_APPROVALS: usize = 4096;
const MAX_QUEUED_ATTEMPTS: usize = 100_000;
const MAX_INBOX_DIGESTS: usize = 10_000;

/// The broker as an approval channel for `toolgate wrap`.
pub struct BrokerChannel {
    layout: Layout,
    /// `--approval broker`: always "available", so a missing broker is reported by `ask`.
    forced: bool,
    server: Option<String>,
    session: Option<String>,
    link: tokio::sync::Mutex<Option<Arc<Link>>>,
    next: AtomicU64,
    /// What other proxies of the session shared, not yet fed into the local session.
    inbox: Arc<Mutex<Inbox>>,
    /// What this proxy has to share, not yet sent.
    outbox: Mutex<Outbox>,
    /// Approval keys already sent or received (so none is sent twice).
    known_approvals: Arc<Mutex<std::collections::HashSet<String>>>,
    wake: tokio::sync::Notify,
    started: AtomicBool,
    /// This proxy shared or received state of its session (said in the next `hello`).
    known: Arc<AtomicBool>,
    /// The broker's key of the digests of the user's prompts, once read.
    vouch_key: std::sync::OnceLock<[u8; 32]>,
}

impl std::fmt::Debug for BrokerChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerChannel")
            .field("layout", &self.layout)
            .field("forced", &self.forced)
            .finish_non_exhaustive()
    }
}

impl BrokerChannel {
    pub fn new(
        layout: Layout,
        forced: bool,
        server: Option<String>,
        session: Option<String>,
    ) -> BrokerChannel {
        BrokerChannel {
            layout,
            forced,
            server,
            session,
            link: tokio::sync::Mutex::new(None),
            next: AtomicU64::new(1),
            inbox: Arc::new(Mutex::new(Inbox::default())),
            outbox: Mutex::new(Outbox::default()),
            known_approvals: Arc::new(Mutex::new(std::collections::HashSet::new())),
            wake: tokio::sync::Notify::new(),
            started: AtomicBool::new(false),
            known: Arc::new(AtomicBool::new(false)),
            vouch_key: std::sync::OnceLock::new(),
        }
    }

    /// Starts (once) the background connection that shares this proxy's session at the
    /// broker; later calls wake it to send what `share` queued. Without a runtime or a
    /// session key it does nothing. Without a broker the proxy keeps its local session.
    pub fn kick(self: &Arc<Self>) {
        if self.session.is_none() {
            return;
        }
        if self.started.swap(true, Ordering::SeqCst) {
            self.wake.notify_one();
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let this = self.clone();
                handle.spawn(async move { this.sync_loop().await });
            }
            Err(_) => self.started.store(false, Ordering::SeqCst),
        }
    }

    /// Joins the agent session at start-up: connects to the broker and waits, at most
    /// `within` in all (connecting included), until it has sent what the session's other
    /// proxies shared so far, so that even the first call is decided knowing it (a
    /// destination tainted through another server is a hard deny from the start). Returns at
    /// once without a session key or a broker (the proxy then keeps a session of its own); a
    /// broker that does not answer in time delays start-up by `within` and is logged, and
    /// what it sends later is imported as it arrives (the connection is then made again in
    /// the background, under [`CONNECT_TIMEOUT`]).
    pub async fn join_session(self: &Arc<Self>, within: Duration) {
        if self.session.is_none() {
            return;
        }
        let deadline = tokio::time::Instant::now() + within;
        let link = match tokio::time::timeout_at(deadline, self.link()).await {
            Ok(Ok(link)) => link,
            Ok(Err(why)) => {
                // No broker yet (the client may start its servers before its first hook
                // starts one): what this proxy sees later is shared once one runs.
                tracing::debug!("not sharing the agent session yet: {why}");
                self.kick();
                return;
            }
            Err(_) => {
                tracing::warn!(
                    "the approval broker did not answer within {} ms; calls are decided without what this agent session's other proxies saw until it does",
                    within.as_millis()
                );
                self.kick();
                return;
            }
        };
        let mut synced = link.synced.clone();
        match tokio::time::timeout_at(deadline, synced.wait_for(|done| *done)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => tracing::debug!(
                "the approval broker closed the connection before sending the agent session's shared state"
            ),
            Err(_) => tracing::warn!(
                "the approval broker did not send this agent session's shared state within {} ms; calls are decided without what the session's other proxies saw until it arrives",
                within.as_millis()
            ),
        }
        self.kick();
    }

    async fn sync_loop(self: Arc<Self>) {
        loop {
            let batch = std::mem::take(&mut *lock(&self.outbox));
            // Connecting also receives what the session's other proxies saw so far.
            // Without a broker the batch is dropped: every proxy keeps its local session.
            if let Ok(link) = self.link().await {
                // Attempts first: they are counted before the output they led to is seen.
                for chunk in batch.attempts.chunks(proto::MAX_ATTEMPTS_PER_MESSAGE) {
                    let _ = link.tx.send(ToBroker::Attempts {
                        attempts: chunk.to_vec(),
                    });
                }
                for chunk in batch.approvals.chunks(proto::MAX_APPROVALS_PER_MESSAGE) {
                    let _ = link.tx.send(ToBroker::Approvals {
                        approvals: chunk.to_vec(),
                    });
                }
                for chunk in batch.tokens.chunks(proto::MAX_TOKENS_PER_MESSAGE) {
                    let _ = link.tx.send(ToBroker::Taint {
                        tokens: chunk.to_vec(),
                    });
                }
            }
            self.wake.notified().await;
        }
    }

    /// Queues destination tokens this proxy saw for the session's other proxies.
    pub fn share(&self, tokens: Vec<TaintToken>) {
        if tokens.is_empty() || self.session.is_none() {
            return;
        }
        self.known.store(true, Ordering::SeqCst);
        lock(&self.outbox).tokens.extend(tokens);
        self.wake.notify_one();
    }

    /// Takes the tokens the session's other proxies shared since the last call.
    pub fn take_shared(&self) -> Vec<TaintToken> {
        std::mem::take(&mut lock(&self.inbox).tokens)
    }

    /// Queues the session approvals of this proxy (keys from
    /// `Session::export_approvals`) for the session's other proxies; keys already sent or
    /// received are skipped. Keys are bound to this proxy's server by the broker message.
    pub fn share_approvals(&self, keys: Vec<String>) {
        if self.session.is_none() {
            return;
        }
        let fresh: Vec<SharedApproval> = {
            let mut known = lock(&self.known_approvals);
            keys.into_iter()
                .filter(|k| k.len() <= proto::MAX_FIELD && !k.is_empty())
                .filter(|k| known.len() < MAX_QUEUED_APPROVALS && known.insert(k.clone()))
                .map(|key| SharedApproval {
                    server: self.server.clone(),
                    key,
                })
                .collect()
        };
        if fresh.is_empty() {
            return;
        }
        self.known.store(true, Ordering::SeqCst);
        lock(&self.outbox).approvals.extend(fresh);
        self.wake.notify_one();
    }

    /// Queues one attempt to call a budgeted `tool` of this proxy's server at `at_ms`.
    pub fn share_attempt(&self, tool: &str, at_ms: u64) {
        if self.session.is_none() || tool.is_empty() || tool.len() > proto::MAX_NAME {
            return;
        }
        self.known.store(true, Ordering::SeqCst);
        {
            let mut out = lock(&self.outbox);
            if out.attempts.len() >= MAX_QUEUED_ATTEMPTS {
                return;
            }
            out.attempts.push(SharedAttempt {
                server: self.server.clone(),
                tool: tool.to_owned(),
                at_ms,
            });
        }
        self.wake.notify_one();
    }

    /// Takes the approval keys the session's other proxies shared for this server.
    pub fn take_approvals(&self) -> Vec<String> {
        std::mem::take(&mut lock(&self.inbox).approvals)
    }

    /// Takes the digests of destinations the user typed in a prompt of the session.
    pub fn take_vouched(&self) -> Vec<[u8; 32]> {
        std::mem::take(&mut lock(&self.inbox).vouched)
    }

    /// The broker's key of those digests (`paths::vouch_key`), read once it exists.
    pub fn vouch_key(&self) -> Option<[u8; 32]> {
        if let Some(key) = self.vouch_key.get() {
            return Some(*key);
        }
        match paths::read_token(&self.layout.vouch_key) {
            Ok(key) => Some(*self.vouch_key.get_or_init(|| key)),
            Err(e) => {
                tracing::warn!("the broker's key of the user's prompts cannot be read: {e}");
                None
            }
        }
    }

    /// Takes the `(tool, at_ms)` attempts the session's other proxies made on this server.
    pub fn take_attempts(&self) -> Vec<(String, u64)> {
        std::mem::take(&mut lock(&self.inbox).attempts)
    }

    async fn link(&self) -> Result<Arc<Link>, String> {
        let mut slot = self.link.lock().await;
        if let Some(link) = slot.as_ref().filter(|l| l.alive.load(Ordering::SeqCst)) {
            return Ok(link.clone());
        }
        let conn = connect_known(
            &self.layout,
            Role::Proxy,
            self.server.as_deref(),
            self.session.as_deref(),
            self.known.load(Ordering::SeqCst),
        )
        .await?;
        let Connection {
            mut reader,
            mut writer,
            ..
        } = conn;
        let (tx, mut rx) = mpsc::unbounded_channel::<ToBroker>();
        let waiters: Waiters = Arc::new(Mutex::new(HashMap::new()));
        let alive = Arc::new(AtomicBool::new(true));
        let (w_alive, r_alive, r_waiters) = (alive.clone(), alive.clone(), waiters.clone());
        let r_inbox = self.inbox.clone();
        let r_known = self.known_approvals.clone();
        let r_server = self.server.clone();
        let r_has_state = self.known.clone();
        let (synced_tx, synced) = watch::channel(false);
        tokio::spawn(async move {
            while let Some(message) = rx.recv().await {
                if writer.write_all(&proto::line(&message)).await.is_err()
                    || writer.flush().await.is_err()
                {
                    w_alive.store(false, Ordering::SeqCst);
                    break;
                }
            }
        });
        tokio::spawn(async move {
            loop {
                let line = match proto::read_line(&mut reader).await {
                    Ok(Some(line)) => line,
                    _ => break,
                };
                let message = serde_json::from_slice::<FromBroker>(&line);
                if let Ok(
                    FromBroker::Taint { .. }
                    | FromBroker::Approvals { .. }
                    | FromBroker::Attempts { .. }
                    | FromBroker::Vouched { .. },
                ) = &message
                {
                    r_has_state.store(true, Ordering::SeqCst);
                }
                match message {
                    Ok(FromBroker::Answer {
                        id,
                        decision,
                        reason,
                    }) => {
                        if let Some(waiter) = lock(&r_waiters).remove(&id) {
                            let _ = waiter.send(match decision {
                                Choice::AllowOnce => Answer::AllowOnce,
                                Choice::AllowSession => Answer::AllowSession,
                                Choice::Deny => Answer::Deny(reason),
                            });
                        }
                    }
                    Ok(FromBroker::Taint { tokens }) => {
                        if proto::validate_tokens(&tokens).is_ok() {
                            let mut inbox = lock(&r_inbox);
                            // Bounded: the local index is bounded too.
                            if inbox.tokens.len() < MAX_INBOX_TOKENS {
                                inbox.tokens.extend(tokens);
                            }
                        }
                    }
                    // Approvals and budgets are per server + tool: only those given on (or
                    // spent against) this proxy's server are imported.
                    Ok(FromBroker::Approvals { approvals }) => {
                        if proto::validate_approvals(&approvals).is_ok() {
                            let mut known = lock(&r_known);
                            let mut inbox = lock(&r_inbox);
                            for a in approvals.into_iter().filter(|a| a.server == r_server) {
                                if inbox.approvals.len() < MAX_QUEUED_APPROVALS {
                                    known.insert(a.key.clone());
                                    inbox.approvals.push(a.key);
                                }
                            }
                        }
                    }
                    Ok(FromBroker::Attempts { attempts }) => {
                        if proto::validate_attempts(&attempts).is_ok() {
                            let mut inbox = lock(&r_inbox);
                            for a in attempts.into_iter().filter(|a| a.server == r_server) {
                                if inbox.attempts.len() < MAX_QUEUED_ATTEMPTS {
                                    inbox.attempts.push((a.tool, a.at_ms));
                                }
                            }
                        }
                    }
                    Ok(FromBroker::Vouched { digests }) => {
                        if proto::validate_digests(&digests).is_ok() {
                            let mut inbox = lock(&r_inbox);
                            for d in digests {
                                let Some(d) = hex::decode(d)
                                    .ok()
                                    .and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok())
                                else {
                                    continue;
                                };
                                if inbox.vouched.len() < MAX_INBOX_DIGESTS {
                                    inbox.vouched.push(d);
                                }
                            }
                        }
                    }
                    Ok(FromBroker::Synced {}) => {
                        synced_tx.send_replace(true);
                    }
                    Ok(FromBroker::Error { message, .. }) => {
                        tracing::warn!("the approval broker reported: {message}");
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!("unreadable message from the approval broker: {e}");
                        break;
                    }
                }
            }
            r_alive.store(false, Ordering::SeqCst);
            // Dropping the senders tells every waiting question the broker is gone.
            lock(&r_waiters).clear();
        });
        let link = Arc::new(Link {
            tx,
            waiters,
            alive,
            synced,
        });
        *slot = Some(link.clone());
        Ok(link)
    }
}

/// Withdraws a question at the broker when its asker stops waiting (client cancellation or
/// local timeout).
struct Withdraw {
    link: Arc<Link>,
    id: u64,
    why: Withdrawal,
    armed: bool,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        if self.armed {
            lock(&self.link.waiters).remove(&self.id);
            let _ = self.link.tx.send(ToBroker::Withdraw {
                id: self.id,
                why: self.why,
            });
        }
    }
}

impl ApprovalChannel for BrokerChannel {
    fn name(&self) -> &'static str {
        "broker"
    }

    fn available(&self) -> bool {
        self.forced || std::fs::symlink_metadata(&self.layout.socket).is_ok()
    }

    fn ask<'a>(&'a self, prompt: &'a Question, timeout: Duration) -> AnswerFuture<'a> {
        Box::pin(async move {
            let link = match self.link().await {
                Ok(link) => link,
                Err(why) => return Answer::Deny(why),
            };
            let id = self.next.fetch_add(1, Ordering::SeqCst);
            let (tx, rx) = oneshot::channel();
            lock(&link.waiters).insert(id, tx);
            let mut guard = Withdraw {
                link: link.clone(),
                id,
                why: Withdrawal::Cancelled,
                armed: true,
            };
            let ask = ToBroker::Ask {
                id,
                question: question_of(prompt),
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            };
            if link.tx.send(ask).is_err() {
                guard.armed = false;
                return Answer::Deny(format!("the approval broker disconnected. {HELP_START}"));
            }
            match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(answer)) => {
                    guard.armed = false;
                    answer
                }
                Ok(Err(_)) => {
                    guard.armed = false;
                    Answer::Deny(format!(
                        "the approval broker disconnected while the call awaited a decision. {HELP_START}"
                    ))
                }
                Err(_) => {
                    guard.why = Withdrawal::Expired;
                    Answer::Deny(format!(
                        "no decision from the approval broker within {} s (timed out)",
                        timeout.as_secs()
                    ))
                }
            }
        })
    }
}

/// The session key of this proxy: `--session NAME`, else the parent process (the client).
pub fn default_session() -> String {
    format!(
        "ppid-{}",
        rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get())
    )
}

/// The local approval broker as the share of `toolgate wrap`.
#[derive(Debug)]
pub struct BrokerShare(pub Arc<BrokerChannel>);

impl toolgate_runtime::enforce::share::SessionShare for BrokerShare {
    fn join(&self, within: Duration) -> toolgate_runtime::proxy::StartFuture<'_> {
        Box::pin(async move { self.0.join_session(within).await })
    }
    fn kick(&self) {
        self.0.kick();
    }
    fn take_tokens(&self) -> Vec<TaintToken> {
        self.0.take_shared()
    }
    fn take_approvals(&self) -> Vec<String> {
        self.0.take_approvals()
    }
    fn take_attempts(&self) -> Vec<(String, u64)> {
        self.0.take_attempts()
    }
    fn take_vouched(&self) -> Vec<[u8; 32]> {
        self.0.take_vouched()
    }
    fn vouch_key(&self) -> Option<[u8; 32]> {
        self.0.vouch_key()
    }
    fn share_tokens(&self, tokens: Vec<TaintToken>) {
        self.0.share(tokens);
    }
    fn share_approvals(&self, keys: Vec<String>) {
        self.0.share_approvals(keys);
    }
    fn share_attempt(&self, tool: &str, at_ms: u64) {
        self.0.share_attempt(tool, at_ms);
    }
}
