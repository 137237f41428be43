//! One downstream MCP session of the gateway: an upstream of its own (a child process for a
//! stdio server, a Streamable HTTP session for a remote one), the relay with the enforcing
//! interceptor between them, exactly as `toolgate wrap` runs them, and the routing of what
//! the relay sends the client to the HTTP exchanges waiting for it.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};
use toolgate_mcp::{Frame, IdKey, Kind, classify};

use toolgate_runtime::enforce::Enforcer;
use toolgate_runtime::proxy::Interceptor;
use toolgate_runtime::proxy::lines::Line;
use toolgate_runtime::proxy::relay::{
    ClientEvent, ClientInput, ClientOut, ClientSink, Relay, RelayConfig, UpstreamIo,
};

use super::share::StoreShare;
use super::sid::SessionInfo;
use toolgate_runtime::clock::now_ms;

/// What the relay sends while a request is in flight, and its response.
pub struct Waiter {
    /// Server requests and notifications sent meanwhile (an SSE response carries them).
    pub stream: mpsc::Receiver<Bytes>,
    /// The response (or the error that answers the request).
    pub done: oneshot::Receiver<Bytes>,
}

struct Route {
    stream: mpsc::Sender<Bytes>,
    done: oneshot::Sender<Bytes>,
}

#[derive(Default)]
struct Routes {
    waiting: HashMap<IdKey, Route>,
    /// Requests in flight, oldest first: server messages go to the newest.
    order: VecDeque<IdKey>,
    /// The client's GET stream, if open.
    listener: Option<mpsc::Sender<Bytes>>,
    /// Server messages no stream could take yet.
    backlog: VecDeque<Bytes>,
}

/// Most server messages kept for a client with no open stream.
const BACKLOG: usize = 1024;
/// Most server messages queued for one stream before the oldest are dropped.
const STREAM_QUEUE: usize = 256;

/// One session.
pub struct Session {
    pub info: SessionInfo,
    to_relay: mpsc::Sender<ClientEvent>,
    routes: Mutex<Routes>,
    pub enforcer: Enforcer,
    pub share: Arc<StoreShare>,
    last_active_ms: AtomicU64,
    inflight: AtomicUsize,
    stop: watch::Sender<bool>,
    ended: AtomicBool,
    next_own: AtomicU64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.info.id)
            .field("server", &self.info.server)
            .finish_non_exhaustive()
    }
}

fn lock(m: &Mutex<Routes>) -> MutexGuard<'_, Routes> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How a session reaches its server.
pub enum Upstream {
    /// A stdio server: `command`, run in `workspace` with `env` added.
    Command {
        command: Vec<String>,
        workspace: std::path::PathBuf,
        env: Vec<(String, String)>,
    },
    /// A remote server through the Streamable HTTP transport.
    Remote(toolgate_runtime::remote::streamable::Started),
}

/// Everything a new session is built from.
pub struct Parts {
    pub info: SessionInfo,
    pub enforcer: Enforcer,
    pub share: Arc<StoreShare>,
    pub upstream: Upstream,
    pub max_message_bytes: usize,
    pub grace: Duration,
}

/// Why a request could not be handed to the session.
#[derive(Debug)]
pub enum Refused {
    /// The session has ended.
    Ended,
    /// A request with the same id is in flight.
    DuplicateId,
}

impl Session {
    /// Starts the upstream and the relay. Nothing is sent upstream yet.
    pub async fn start(parts: Parts) -> anyhow::Result<Arc<Session>> {
        let Parts {
            info,
            enforcer,
            share,
            upstream,
            max_message_bytes,
            grace,
        } = parts;
        let (to_relay, from_client) = mpsc::channel::<ClientEvent>(64);
        let (to_client, from_relay) = mpsc::channel::<ClientOut>(64);
        let (stop, stopped) = watch::channel(false);
        let interceptor: Arc<dyn Interceptor> = Arc::new(enforcer.clone());
        interceptor.on_start().await;
        let config = RelayConfig {
            max_message_bytes,
            poll: Duration::ZERO,
        };
        let (io, life) = match upstream {
            Upstream::Command {
                command,
                workspace,
                env,
            } => {
                let mut child = spawn(&command, &workspace, &env)?;
                let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                    anyhow::bail!("the server's stdin/stdout are not piped");
                };
                (UpstreamIo::Child(stdin, stdout), Life::Child(child))
            }
            Upstream::Remote(started) => (
                UpstreamIo::Channel(started.to_upstream, started.from_upstream),
                Life::Transport(started.task),
            ),
        };
        let relay = Relay::start(
            &config,
            Arc::clone(&interceptor),
            ClientInput::Queue(from_client),
            ClientSink::Queue(to_client),
            io,
        );
        let session = Arc::new(Session {
            info,
            to_relay,
            routes: Mutex::new(Routes::default()),
            enforcer,
            share,
            last_active_ms: AtomicU64::new(now_ms()),
            inflight: AtomicUsize::new(0),
            stop,
            ended: AtomicBool::new(false),
            next_own: AtomicU64::new(1),
        });
        tokio::spawn(route(Arc::downgrade(&session), from_relay));
        tokio::spawn(lifecycle(
            Arc::clone(&session),
            relay,
            life,
            stopped,
            grace,
            interceptor,
        ));
        Ok(session)
    }

    /// True once the upstream is gone (or the session was closed).
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// Milliseconds since the last request, 0 while one is in flight.
    pub fn idle_ms(&self, now: u64) -> u64 {
        if self.inflight.load(Ordering::SeqCst) > 0 {
            return 0;
        }
        now.saturating_sub(self.last_active_ms.load(Ordering::SeqCst))
    }

    /// Marks activity; the guard keeps the session from idling out while it lives.
    pub fn busy(self: &Arc<Self>) -> Busy {
        self.inflight.fetch_add(1, Ordering::SeqCst);
        self.last_active_ms.store(now_ms(), Ordering::SeqCst);
        Busy(Arc::clone(self))
    }

    /// Hands a request (one JSON-RPC message, no newline) to the relay and returns where
    /// its response and the messages sent meanwhile will arrive.
    pub async fn request(&self, id: IdKey, frame: &[u8]) -> Result<Waiter, Refused> {
        if self.ended() {
            return Err(Refused::Ended);
        }
        let (stream_tx, stream) = mpsc::channel(STREAM_QUEUE);
        let (done_tx, done) = oneshot::channel();
        {
            let mut routes = lock(&self.routes);
            if routes.waiting.contains_key(&id) {
                return Err(Refused::DuplicateId);
            }
            // Whatever waited for a stream goes to this one.
            while let Some(frame) = routes.backlog.pop_front() {
                if stream_tx.try_send(frame).is_err() {
                    break;
                }
            }
            routes.waiting.insert(
                id.clone(),
                Route {
                    stream: stream_tx,
                    done: done_tx,
                },
            );
            routes.order.push_back(id.clone());
        }
        if self.send(frame).await.is_err() {
            self.forget(&id);
            return Err(Refused::Ended);
        }
        Ok(Waiter { stream, done })
    }

    /// Hands a notification or a response (to a server request) to the relay.
    pub async fn send(&self, frame: &[u8]) -> Result<(), Refused> {
        let mut line = Vec::with_capacity(frame.len() + 1);
        line.extend_from_slice(frame);
        line.push(b'\n');
        self.to_relay
            .send(ClientEvent::Line(Line::Frame(line)))
            .await
            .map_err(|_| Refused::Ended)
    }

    /// Stops waiting for `id` (the HTTP exchange went away).
    pub fn forget(&self, id: &IdKey) {
        let mut routes = lock(&self.routes);
        routes.waiting.remove(id);
        routes.order.retain(|k| k != id);
    }

    /// Opens the client's GET stream (replacing an older one).
    pub fn listen(&self) -> mpsc::Receiver<Bytes> {
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        let mut routes = lock(&self.routes);
        while let Some(frame) = routes.backlog.pop_front() {
            if tx.try_send(frame).is_err() {
                break;
            }
        }
        routes.listener = Some(tx);
        rx
    }

    /// Ends the session: the upstream is closed (a child gets its grace period, then its
    /// group is killed); what is in flight is answered.
    pub fn close(&self) {
        let _ = self.stop.send(true);
    }

    /// Replays the client's `initialize` to a fresh upstream (a session resumed on this
    /// replica), then `notifications/initialized`. Its answer never reaches the client.
    pub async fn replay_initialize(&self, within: Duration) -> anyhow::Result<()> {
        let n = self.next_own.fetch_add(1, Ordering::SeqCst);
        let id = format!("toolgate-gateway-init-{n}");
        let key = IdKey::Str(id.clone().into());
        let frame = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"initialize","params":{}}}"#,
            serde_json::to_string(&id)?,
            self.info.init
        );
        let waiter = self
            .request(key.clone(), frame.as_bytes())
            .await
            .map_err(|e| anyhow::anyhow!("the session ended while resuming it ({e:?})"))?;
        let answer = tokio::time::timeout(within, waiter.done).await;
        self.forget(&key);
        let answer = match answer {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => anyhow::bail!("the server ended before it answered `initialize`"),
            Err(_) => anyhow::bail!(
                "the server did not answer `initialize` within {} s",
                within.as_secs()
            ),
        };
        let value: serde_json::Value = serde_json::from_slice(&answer).unwrap_or_default();
        if value.get("result").is_none() {
            anyhow::bail!(
                "the server refused the session's `initialize`: {}",
                String::from_utf8_lossy(&answer)
            );
        }
        self.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await
            .map_err(|_| anyhow::anyhow!("the session ended while resuming it"))
    }

    /// Routes one frame the relay sent toward the client.
    fn deliver(&self, frame: Bytes) {
        let body = frame
            .strip_suffix(b"\n")
            .map_or(frame.clone(), |b| frame.slice_ref(b));
        let response_to = match classify(&body) {
            Frame::Single(env) if matches!(env.kind, Kind::Response | Kind::ErrorResponse) => {
                env.id.and_then(IdKey::from_raw)
            }
            _ => None,
        };
        let mut routes = lock(&self.routes);
        if let Some(key) = response_to {
            if let Some(route) = routes.waiting.remove(&key) {
                routes.order.retain(|k| *k != key);
                let _ = route.done.send(body);
            } else {
                tracing::debug!("a response for a request nobody waits for any more was dropped");
            }
            return;
        }
        // A server request or notification: to the newest request's stream, else the
        // GET stream, else kept until one opens.
        let mut frame = body;
        let newest: Vec<IdKey> = routes.order.iter().rev().cloned().collect();
        for key in newest {
            if let Some(route) = routes.waiting.get(&key) {
                match route.stream.try_send(frame) {
                    Ok(()) => return,
                    Err(
                        mpsc::error::TrySendError::Full(f) | mpsc::error::TrySendError::Closed(f),
                    ) => {
                        frame = f;
                    }
                }
            }
        }
        if let Some(listener) = &routes.listener {
            match listener.try_send(frame) {
                Ok(()) => return,
                Err(mpsc::error::TrySendError::Full(f) | mpsc::error::TrySendError::Closed(f)) => {
                    frame = f;
                    routes.listener = None;
                }
            }
        }
        if routes.backlog.len() >= BACKLOG {
            routes.backlog.pop_front();
            tracing::warn!(
                "session `{}`: a server message was dropped (no stream open to the client)",
                self.info.id
            );
        }
        routes.backlog.push_back(frame);
    }

    /// Answers every waiting exchange that the relay will never answer.
    fn fail_waiting(&self) {
        let mut routes = lock(&self.routes);
        routes.order.clear();
        routes.listener = None;
        for (_, route) in routes.waiting.drain() {
            drop(route);
        }
    }
}

/// Keeps a session from idling out while a request is in flight.
pub struct Busy(Arc<Session>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.last_active_ms.store(now_ms(), Ordering::SeqCst);
        self.0.inflight.fetch_sub(1, Ordering::SeqCst);
    }
}

enum Life {
    Child(tokio::process::Child),
    Transport(tokio::task::JoinHandle<()>),
}

fn spawn(
    command: &[String],
    workspace: &std::path::Path,
    env: &[(String, String)],
) -> anyhow::Result<tokio::process::Child> {
    use anyhow::Context as _;
    let (program, args) = command
        .split_first()
        .context("the server's `command` is empty")?;
    let mut cmd = tokio::process::Command::new(OsString::from(program));
    cmd.args(args)
        .current_dir(workspace)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .process_group(0)
        .kill_on_drop(false);
    cmd.spawn().with_context(|| {
        format!(
            "cannot start the server `{program}` in `{}`",
            workspace.display()
        )
    })
}

async fn route(session: std::sync::Weak<Session>, mut from_relay: mpsc::Receiver<ClientOut>) {
    while let Some(item) = from_relay.recv().await {
        match item {
            ClientOut::Barrier(ack) => {
                let _ = ack.send(());
            }
            ClientOut::Frame(frame) => match session.upgrade() {
                Some(session) => session.deliver(frame),
                None => return,
            },
        }
    }
}

/// Runs until the upstream ends or the session is closed; then answers what is pending.
async fn lifecycle(
    session: Arc<Session>,
    mut relay: Relay,
    life: Life,
    mut stopped: watch::Receiver<bool>,
    grace: Duration,
    interceptor: Arc<dyn Interceptor>,
) {
    match life {
        Life::Child(mut child) => {
            let pid = child.id().unwrap_or(0);
            tokio::select! {
                _ = child.wait() => {}
                _ = stop_requested(&mut stopped) => {
                    // EOF to the relay closes the child's stdin; then TERM, then KILL.
                    let _ = session.to_relay.send(ClientEvent::Eof).await;
                    if tokio::time::timeout(grace, child.wait()).await.is_err() {
                        toolgate_runtime::child::signal_group(pid, rustix::process::Signal::TERM);
                        if tokio::time::timeout(grace, child.wait()).await.is_err() {
                            toolgate_runtime::child::signal_group(pid, rustix::process::Signal::KILL);
                            let _ = tokio::time::timeout(grace, child.wait()).await;
                        }
                    }
                }
            }
        }
        Life::Transport(mut task) => {
            tokio::select! {
                _ = &mut task => {}
                _ = stop_requested(&mut stopped) => {
                    relay.close_upstream().await;
                    if tokio::time::timeout(grace, &mut task).await.is_err() {
                        task.abort();
                    }
                }
            }
        }
    }
    session.ended.store(true, Ordering::SeqCst);
    let _ = tokio::time::timeout(Duration::from_secs(1), relay.upstream_done()).await;
    relay.upstream_gone().await;
    relay.flush_client(Duration::from_secs(2)).await;
    interceptor.after_delivery();
    session.fail_waiting();
}

async fn stop_requested(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}
