//! The gateway's HTTP side: Streamable HTTP at `/servers/<name>/mcp`, the RFC 9728
//! metadata, health, readiness and metrics. Every MCP message goes through a session's relay
//! and its enforcer: there is no other path to a server.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use toolgate_audit::AuditWriter;
use toolgate_mcp::{Frame, IdKey, Kind, RawValue, build, classify, protocol};
use toolgate_policy::eval::Engine;
use toolgate_policy::taint::TaintLimits;
use toolgate_store::Store;

use toolgate_runtime::approval::Mode;
use toolgate_runtime::enforce::{Enforcer, EngineBackend, Settings};

use super::auth::{Authenticator, Denied, Principal};
use super::config::{GatewayConfig, ServerConfig};
use super::metrics::Metrics;
use super::session::{Parts, Session, Upstream, Waiter};
use super::share::StoreShare;
use super::sid::{IdSealer, SessionInfo, derive};
use toolgate_runtime::clock::now_ms;

/// The header that names the agent session a client's sessions share (taint, approvals,
/// budgets across servers). Scoped to the user; default: the MCP session itself.
pub const AGENT_SESSION_HEADER: &str = "toolgate-agent-session";

/// A server as the gateway runs it.
pub struct ServerRuntime {
    pub name: String,
    pub config: ServerConfig,
    /// The compiled policy, or why there is none (every call is then denied with it).
    pub engine: Result<Arc<Engine>, String>,
    pub workspace: PathBuf,
}

/// What a reload replaces.
pub struct Loaded {
    pub config: GatewayConfig,
    pub servers: BTreeMap<String, Arc<ServerRuntime>>,
    pub auth: Authenticator,
}

/// The gateway's shared state.
pub struct Gateway {
    pub replica: String,
    pub ids: IdSealer,
    /// The key of `input_required` approval states (shared by the replicas).
    pub approval_sealer: toolgate_runtime::approval::seal::Sealer,
    pub secret: [u8; 32],
    pub store: Arc<dyn Store>,
    pub audit: Result<Arc<AuditWriter>, String>,
    pub metrics: Arc<Metrics>,
    pub current: RwLock<Arc<Loaded>>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// One lock per session being resumed here (two requests of one session resume it
    /// once; other sessions never wait for it).
    resuming: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    pub draining: AtomicBool,
    pub max_message_bytes: usize,
    pub idle_timeout: Duration,
    pub max_sessions: usize,
    pub http: reqwest::Client,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How long a resumed session's server has to answer the replayed `initialize`.
const RESUME_WITHIN: Duration = Duration::from_secs(30);

impl Gateway {
    #[allow(
        clippy::too_many_arguments,
        reason = "one call site; a struct would only rename the arguments"
    )]
    pub fn new(
        replica: String,
        secret: [u8; 32],
        store: Arc<dyn Store>,
        audit: Result<Arc<AuditWriter>, String>,
        loaded: Loaded,
        idle_timeout: Duration,
        max_sessions: usize,
        http: reqwest::Client,
    ) -> anyhow::Result<Gateway> {
        Ok(Gateway {
            metrics: Arc::new(Metrics::new(&replica)),
            replica,
            ids: IdSealer::new(&secret)?,
            approval_sealer: toolgate_runtime::approval::seal::Sealer::with_key(derive(
                &secret,
                "approval state",
            )),
            secret,
            store,
            audit,
            current: RwLock::new(Arc::new(loaded)),
            sessions: Mutex::new(HashMap::new()),
            resuming: Mutex::new(HashMap::new()),
            draining: AtomicBool::new(false),
            max_message_bytes: 16 << 20,
            idle_timeout,
            max_sessions,
            http,
        })
    }

    pub fn loaded(&self) -> Arc<Loaded> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The session `id` if this replica holds it and it has not ended.
    fn live(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.sessions).get(id).filter(|s| !s.ended()).cloned()
    }

    pub fn session_count(&self) -> usize {
        lock(&self.sessions).len()
    }

    /// Closes sessions idle longer than the idle timeout and forgets ended ones.
    pub fn reap(&self) {
        let now = now_ms();
        let idle = u64::try_from(self.idle_timeout.as_millis()).unwrap_or(u64::MAX);
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, s| {
            if s.ended() {
                return false;
            }
            if s.idle_ms(now) > idle {
                s.close();
                return false;
            }
            true
        });
        self.metrics.sessions(sessions.len());
    }

    /// Closes every session (shutdown).
    pub fn close_all(&self) -> Vec<Arc<Session>> {
        let sessions: Vec<Arc<Session>> = lock(&self.sessions).drain().map(|(_, s)| s).collect();
        for s in &sessions {
            s.close();
        }
        sessions
    }

    /// Starts a session (its upstream and relay) for `info`.
    async fn open(
        &self,
        server: &Arc<ServerRuntime>,
        info: SessionInfo,
    ) -> anyhow::Result<Arc<Session>> {
        let share = Arc::new(StoreShare::new(
            Arc::clone(&self.store),
            info.agent.clone(),
            server.name.clone(),
            info.id.clone(),
            Arc::clone(&self.metrics),
        ));
        let backend: Box<dyn toolgate_runtime::enforce::Backend> = match &server.engine {
            Ok(engine) => {
                // Pins are shared by every session of the server (trust on first use).
                let pins = match self.store.load_pins(&server.name).await {
                    Ok(pins) => pins
                        .into_iter()
                        .filter_map(|(k, v)| serde_json::from_str::<Value>(&v).ok().map(|v| (k, v)))
                        .collect(),
                    Err(e) => {
                        self.metrics.store_round_trip(false);
                        anyhow::bail!("{e}");
                    }
                };
                let taint: TaintLimits = engine.policy().taint.clone().unwrap_or_default();
                Box::new(
                    EngineBackend::new(Arc::clone(engine), taint, pins).with_shared(share.clone()),
                )
            }
            Err(reason) => Box::new(toolgate_runtime::enforce::setup::BrokenPolicy {
                reason: reason.clone(),
            }),
        };
        let metrics = Arc::clone(&self.metrics);
        let server_name = server.name.clone();
        let observer: Arc<dyn Fn(&toolgate_audit::Event) + Send + Sync> =
            Arc::new(move |event: &toolgate_audit::Event| {
                if event.kind == toolgate_audit::Kind::Decision
                    && let (Some(effect), Some(contract)) = (&event.effect, &event.contract)
                {
                    metrics.decision(&server_name, effect, contract);
                }
            });
        let (audit, audit_error) = match &self.audit {
            Ok(w) => (Some(Arc::clone(w)), None),
            Err(why) => (None, Some(why.clone())),
        };
        let settings = Settings {
            server: Some(server.name.clone()),
            upstream: server
                .config
                .url
                .as_deref()
                .and_then(|u| url::Url::parse(u).ok())
                .map(|u| toolgate_runtime::remote::http::redact(&u)),
            approval: Mode::Auto,
            approval_timeout: Duration::from_secs(120),
            listing_timeout: Duration::from_secs(10),
            tty: None,
            // The gateway's approvers, when there are any (else an ask that the client
            // cannot put to its user is denied with the reason).
            broker: has_approvers(&self.loaded().config).then(|| {
                Arc::new(super::approvals::GatewayApprovals {
                    store: Arc::clone(&self.store),
                    session: format!("{} / {}", info.user, info.id),
                }) as Arc<dyn toolgate_runtime::approval::ApprovalChannel>
            }),
            shared_session: Some(share.clone()),
            audit,
            audit_error,
            audit_raw: false,
            pins: None,
            session_id: info.id.clone(),
            index_before_delivery: true,
            user: Some(info.user.clone()),
            replica: Some(self.replica.clone()),
            seal_key: Some(derive(&self.secret, "approval state")),
            observer: Some(observer),
        };
        let enforcer = Enforcer::new(backend, settings)?;
        let upstream = match (&server.config.command, &server.config.url) {
            (Some(command), _) => Upstream::Command {
                command: command.clone(),
                workspace: server.workspace.clone(),
                env: expand_all(&server.config.env)?,
            },
            (None, Some(url)) => {
                let url = url::Url::parse(url)?;
                let headers: Vec<String> = expand_all(&server.config.headers)?
                    .into_iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect();
                let headers = toolgate_runtime::remote::headers::parse(&headers, |_| None)?;
                Upstream::Remote(toolgate_runtime::remote::streamable::start(
                    self.http.clone(),
                    toolgate_runtime::remote::streamable::Options {
                        url,
                        headers,
                        auth: None,
                        max_message_bytes: self.max_message_bytes,
                        kind: toolgate_runtime::remote::streamable::TransportKind::StreamableHttp,
                        request_timeout: Duration::from_secs(600),
                        grace: Duration::from_secs(2),
                    },
                ))
            }
            (None, None) => anyhow::bail!(
                "the server `{}` has neither `command` nor `url`",
                server.name
            ),
        };
        Session::start(Parts {
            info,
            enforcer,
            share,
            upstream,
            max_message_bytes: self.max_message_bytes,
            grace: Duration::from_secs(2),
        })
        .await
    }
}

fn has_approvers(config: &GatewayConfig) -> bool {
    !config.auth.approvers.users.is_empty() || !config.auth.approvers.groups.is_empty()
}

fn expand_all(map: &BTreeMap<String, String>) -> anyhow::Result<Vec<(String, String)>> {
    map.iter()
        .map(|(k, v)| {
            toolgate_runtime::remote::headers::expand(v, &|name: &str| std::env::var(name).ok())
                .map(|v| (k.clone(), v))
                .map_err(|e| anyhow::anyhow!("`{k}`: {e}"))
        })
        .collect()
}

type Shared = Arc<Gateway>;

/// The router.
pub fn router(gateway: Shared) -> axum::Router {
    use axum::routing::get;
    axum::Router::new()
        .route(
            "/servers/{name}/mcp",
            axum::routing::post(mcp_post)
                .get(mcp_get)
                .delete(mcp_delete),
        )
        .route(
            "/.well-known/oauth-protected-resource/servers/{name}/mcp",
            get(metadata),
        )
        .route("/approvals", get(approvals_list))
        .route("/approvals/{id}", axum::routing::post(approvals_answer))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .layer(axum::extract::DefaultBodyLimit::max(
            gateway.max_message_bytes,
        ))
        .with_state(gateway)
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(gw): State<Shared>) -> Response {
    if gw.draining.load(Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    }
    match tokio::time::timeout(Duration::from_secs(2), gw.store.ping()).await {
        Ok(Ok(())) => (StatusCode::OK, "ready\n").into_response(),
        Ok(Err(e)) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the state store `{}` did not answer within 2 s\n",
                gw.store.describe()
            ),
        )
            .into_response(),
    }
}

async fn metrics(State(gw): State<Shared>) -> Response {
    gw.metrics.sessions(gw.session_count());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        gw.metrics.encode(),
    )
        .into_response()
}

fn server_url(loaded: &Loaded, name: &str) -> String {
    loaded.config.server_url(name)
}

fn metadata_url(loaded: &Loaded, name: &str) -> String {
    format!(
        "{}/.well-known/oauth-protected-resource/servers/{name}/mcp",
        loaded.config.public_url.trim_end_matches('/')
    )
}

async fn metadata(State(gw): State<Shared>, Path(name): Path<String>) -> Response {
    let loaded = gw.loaded();
    if !loaded.servers.contains_key(&name) {
        return (StatusCode::NOT_FOUND, "no such server\n").into_response();
    }
    axum::Json(loaded.auth.metadata(&server_url(&loaded, &name))).into_response()
}

/// Authenticates the request and authorizes it for the server.
async fn admit(
    gw: &Gateway,
    headers: &HeaderMap,
    name: &str,
) -> Result<(Principal, Arc<Loaded>, Arc<ServerRuntime>), Response> {
    let loaded = gw.loaded();
    check_transport(&loaded, headers)?;
    let Some(server) = loaded.servers.get(name).cloned() else {
        return Err((StatusCode::NOT_FOUND, format!("no server `{name}` here\n")).into_response());
    };
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let principal = match loaded.auth.authenticate(authorization, Some(name)).await {
        Ok(p) => p,
        Err(denied) => return Err(refuse(gw, &loaded, name, &denied)),
    };
    if let Err(denied) = loaded.auth.may_reach(&principal, name) {
        return Err(refuse(gw, &loaded, name, &denied));
    }
    Ok((principal, loaded, server))
}

fn refuse(gw: &Gateway, loaded: &Loaded, name: &str, denied: &Denied) -> Response {
    let status = StatusCode::from_u16(denied.status()).unwrap_or(StatusCode::UNAUTHORIZED);
    let why = denied.description();
    gw.metrics.refused(status.as_u16());
    tracing::info!(status = status.as_u16(), server = name, "refused: {why}");
    let challenge = loaded.auth.challenge(denied, &metadata_url(loaded, name));
    let mut response = (status, axum::Json(json!({ "error": why }))).into_response();
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    response
}

fn jsonrpc_error(status: StatusCode, id: Option<&RawValue>, code: i64, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        build::error_response(id, code, message),
    )
        .into_response()
}

/// Refuses what the transport forbids before anything else is read: an `Origin` that is not
/// the gateway's own (DNS rebinding: a web page in a browser reaching a gateway on the
/// user's network), and a protocol revision the gateway does not carry.
#[allow(
    clippy::result_large_err,
    reason = "a handler's early answer, returned once per request"
)]
fn check_transport(loaded: &Loaded, headers: &HeaderMap) -> Result<(), Response> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ours = url::Url::parse(&loaded.config.public_url)
            .ok()
            .map(|u| u.origin());
        let theirs = origin.to_str().ok().and_then(|o| url::Url::parse(o).ok());
        let loopback = |u: &url::Url| {
            u.host().is_some_and(|h| match h {
                url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
                url::Host::Ipv4(ip) => ip.is_loopback(),
                url::Host::Ipv6(ip) => ip.is_loopback(),
            })
        };
        let ok = match (&ours, &theirs) {
            (Some(ours), Some(theirs)) => {
                theirs.origin() == *ours
                    // A gateway on loopback also accepts pages of loopback origins.
                    || (url::Url::parse(&loaded.config.public_url).is_ok_and(|u| loopback(&u))
                        && loopback(theirs))
            }
            _ => false,
        };
        if !ok {
            return Err((
                StatusCode::FORBIDDEN,
                axum::Json(json!({ "error": format!(
                    "the origin `{}` is not this gateway's (`{}`)",
                    origin.to_str().unwrap_or("?"),
                    loaded.config.public_url
                ) })),
            )
                .into_response());
        }
    }
    // A client may name any revision toolgate knows: the gateway carries them all.
    if let Some(version) = headers.get(protocol::PROTOCOL_VERSION_HEADER)
        && !version.to_str().is_ok_and(protocol::is_known_revision)
    {
        return Err(jsonrpc_error(
            StatusCode::BAD_REQUEST,
            None,
            toolgate_mcp::INVALID_REQUEST,
            &format!(
                "unsupported `MCP-Protocol-Version` `{}`; this gateway carries {}",
                version.to_str().unwrap_or("?"),
                protocol::REVISIONS.join(", ")
            ),
        ));
    }
    Ok(())
}

/// A POST's body must be JSON, and the client must take JSON or an SSE stream back.
fn check_media_types(headers: &HeaderMap) -> Option<Response> {
    let value = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase)
    };
    if let Some(ct) = value(header::CONTENT_TYPE)
        && !ct.trim_start().starts_with("application/json")
    {
        return Some(jsonrpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            toolgate_mcp::INVALID_REQUEST,
            &format!("the body must be `application/json`, not `{ct}`"),
        ));
    }
    if let Some(accept) = value(header::ACCEPT)
        && ![
            "application/json",
            "text/event-stream",
            "*/*",
            "application/*",
        ]
        .iter()
        .any(|t| accept.contains(t))
    {
        return Some(jsonrpc_error(
            StatusCode::NOT_ACCEPTABLE,
            None,
            toolgate_mcp::INVALID_REQUEST,
            "the client must accept `application/json` and `text/event-stream`",
        ));
    }
    None
}

fn session_header(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(protocol::SESSION_ID_HEADER)
        .and_then(|v| v.to_str().ok())
}

async fn mcp_post(
    State(gw): State<Shared>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let started = Instant::now();
    let (principal, loaded, server) = match admit(&gw, &headers, &name).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    if let Some(r) = check_media_types(&headers) {
        return r;
    }
    let env = match classify(&body) {
        Frame::Single(env) => env,
        Frame::Batch(_) => {
            return jsonrpc_error(
                StatusCode::BAD_REQUEST,
                None,
                toolgate_mcp::INVALID_REQUEST,
                "batches are not accepted: send one message per request",
            );
        }
        Frame::ParseError(_) => {
            return jsonrpc_error(
                StatusCode::BAD_REQUEST,
                None,
                toolgate_mcp::PARSE_ERROR,
                "the body is not a JSON-RPC message",
            );
        }
    };
    let method = env.method_str().to_owned();
    if env.kind == Kind::Request && method == "initialize" {
        let response = initialize(&gw, &loaded, &server, &principal, &headers, &env, &body).await;
        gw.metrics.request(&method, started.elapsed().as_secs_f64());
        return response;
    }
    let session = match session_header(&headers) {
        Some(sealed) => session_for(&gw, &server, &principal, sealed).await,
        // 2026-07-28: no session; any replica carries the request.
        None if is_stateless(&headers, &env) => {
            stateless_session(&gw, &server, &principal, &headers).await
        }
        None => {
            return jsonrpc_error(
                StatusCode::BAD_REQUEST,
                env.id,
                toolgate_mcp::INVALID_REQUEST,
                "no `Mcp-Session-Id`: send `initialize` first (or, as a 2026-07-28 client, `MCP-Protocol-Version: 2026-07-28`)",
            );
        }
    };
    let session = match session {
        Ok(s) => s,
        Err(r) => return r,
    };
    let _busy = session.busy();
    match env.kind {
        Kind::Request => {
            let Some(id) = env.id.and_then(IdKey::from_raw) else {
                return jsonrpc_error(
                    StatusCode::BAD_REQUEST,
                    None,
                    toolgate_mcp::INVALID_REQUEST,
                    "the request's id is not usable",
                );
            };
            if method != "tools/call" {
                // What other replicas recorded (an ended session above all); a store that
                // cannot be read does not hold up what needs no shared state.
                if let Err(e) = session.share.prepare(None).await {
                    tracing::debug!("{e}");
                }
            }
            // Read once for what the gateway itself looks at (the enforcer reads its own).
            let params: Option<Value> = env.params.and_then(|p| serde_json::from_str(p.get()).ok());
            if let Some(reply) = redeem_state(&gw, &session, &env, params.as_ref()).await {
                return json_body(StatusCode::OK, reply, None);
            }
            if method == "tools/call" {
                let tool = params
                    .as_ref()
                    .and_then(|p| p.get("name").and_then(Value::as_str));
                let budget = tool.and_then(|t| session.enforcer.budget_of(t).map(|w| (t, w)));
                if let Err(e) = session.share.prepare(budget).await {
                    let reason = format!(
                        "{e}; toolgate denies calls it cannot decide on the agent session's current state"
                    );
                    tracing::warn!(server = %name, user = %principal.name(), "{reason}");
                    let reply = match env.id {
                        Some(raw) => session
                            .enforcer
                            .deny_undecidable(raw, env.params, "store", &reason),
                        None => build::error_response(None, toolgate_mcp::INTERNAL_ERROR, &reason),
                    };
                    return json_body(StatusCode::OK, reply, None);
                }
            }
            if session.share.closed() {
                lock(&gw.sessions).remove(&session.info.id);
                session.close();
                return jsonrpc_error(
                    StatusCode::NOT_FOUND,
                    env.id,
                    toolgate_mcp::INVALID_REQUEST,
                    "the session was ended: initialize a new one",
                );
            }
            let waiter = match session.request(id.clone(), &body).await {
                Ok(w) => w,
                Err(super::session::Refused::DuplicateId) => {
                    return jsonrpc_error(
                        StatusCode::BAD_REQUEST,
                        env.id,
                        toolgate_mcp::INVALID_REQUEST,
                        "a request with this id is already in flight",
                    );
                }
                Err(super::session::Refused::Ended) => {
                    return jsonrpc_error(
                        StatusCode::NOT_FOUND,
                        env.id,
                        toolgate_mcp::INTERNAL_ERROR,
                        "the session ended: initialize a new one",
                    );
                }
            };
            let response = answer(Arc::clone(&session), id, waiter, None).await;
            gw.metrics.request(&method, started.elapsed().as_secs_f64());
            response
        }
        _ => match session.send(&body).await {
            Ok(()) => StatusCode::ACCEPTED.into_response(),
            Err(_) => jsonrpc_error(
                StatusCode::NOT_FOUND,
                None,
                toolgate_mcp::INTERNAL_ERROR,
                "the session ended: initialize a new one",
            ),
        },
    }
}

fn json_body(status: StatusCode, body: Vec<u8>, session: Option<&str>) -> Response {
    let mut r = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    if let Some(s) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
        r.headers_mut().insert(protocol::SESSION_ID_HEADER, s);
    }
    r
}

/// The response to a request: JSON when nothing else came first, else an SSE stream of what
/// the server sent meanwhile, ending with the response. What the response tainted is in the
/// store before the response leaves (else it is withheld).
async fn answer(
    session: Arc<Session>,
    id: IdKey,
    mut waiter: Waiter,
    session_id: Option<String>,
) -> Response {
    struct Forget(Arc<Session>, IdKey, bool);
    impl Drop for Forget {
        fn drop(&mut self) {
            if !self.2 {
                self.0.forget(&self.1);
            }
        }
    }
    let mut guard = Forget(Arc::clone(&session), id, false);
    let first = tokio::select! {
        biased;
        done = &mut waiter.done => Err(done),
        Some(msg) = waiter.stream.recv() => Ok(msg),
    };
    match first {
        Err(done) => {
            guard.2 = true;
            let body = finish(&session, done).await;
            json_body(StatusCode::OK, body, session_id.as_deref())
        }
        Ok(first) => {
            guard.2 = true;
            let stream = futures_util::stream::unfold(
                (Some(first), Some(waiter), session, Some(guard)),
                |(pending, waiter, session, guard)| async move {
                    if let Some(msg) = pending {
                        return Some((
                            Ok::<_, Infallible>(sse(&msg)),
                            (None, waiter, session, guard),
                        ));
                    }
                    let mut waiter = waiter?;
                    tokio::select! {
                        biased;
                        Some(msg) = waiter.stream.recv() => Some((Ok(sse(&msg)), (None, Some(waiter), session, guard))),
                        done = &mut waiter.done => {
                            let body = finish(&session, done).await;
                            drop(guard);
                            Some((Ok(sse(&body)), (None, None, session, None)))
                        }
                    }
                },
            );
            sse_response(Body::from_stream(stream), session_id.as_deref())
        }
    }
}

/// An SSE response (with the session id it opened, if any).
fn sse_response(body: Body, session_id: Option<&str>) -> Response {
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(s) = session_id.and_then(|s| HeaderValue::from_str(s).ok()) {
        h.insert(protocol::SESSION_ID_HEADER, s);
    }
    r
}

fn sse(message: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(message.len() + 24);
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(message);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// The response as the client gets it: its taint written to the store first, or an error
/// in its place.
async fn finish(
    session: &Session,
    done: Result<bytes::Bytes, tokio::sync::oneshot::error::RecvError>,
) -> Vec<u8> {
    let Ok(response) = done else {
        return build::error_response(
            None,
            toolgate_mcp::INTERNAL_ERROR,
            "the session ended before the server answered",
        );
    };
    match session.share.flush().await {
        Ok(()) => response.to_vec(),
        Err(e) => {
            tracing::warn!("a result was withheld: {e}");
            let id = match classify(&response) {
                Frame::Single(env) => env.id.map(|r| r.to_owned()),
                _ => None,
            };
            build::error_response(
                id.as_deref(),
                toolgate_mcp::INTERNAL_ERROR,
                &format!(
                    "toolgate withheld the result: {e}, so the other replicas could not learn what it contains (its taint)"
                ),
            )
        }
    }
}

async fn initialize(
    gw: &Shared,
    loaded: &Loaded,
    server: &Arc<ServerRuntime>,
    principal: &Principal,
    headers: &HeaderMap,
    env: &toolgate_mcp::Envelope<'_>,
    body: &[u8],
) -> Response {
    let _ = loaded;
    if gw.draining.load(Ordering::SeqCst) {
        return jsonrpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            env.id,
            toolgate_mcp::INTERNAL_ERROR,
            "the gateway is shutting down",
        );
    }
    if gw.session_count() >= gw.max_sessions {
        gw.reap();
        if gw.session_count() >= gw.max_sessions {
            return jsonrpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                env.id,
                toolgate_mcp::INTERNAL_ERROR,
                "this replica holds as many sessions as it may",
            );
        }
    }
    let Some(id) = env.id.and_then(IdKey::from_raw) else {
        return jsonrpc_error(
            StatusCode::BAD_REQUEST,
            None,
            toolgate_mcp::INVALID_REQUEST,
            "the request's id is not usable",
        );
    };
    let mut raw = [0u8; 16];
    if getrandom::fill(&mut raw).is_err() {
        return jsonrpc_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            env.id,
            toolgate_mcp::INTERNAL_ERROR,
            "no randomness",
        );
    }
    let session_id = hex::encode(raw);
    let agent = headers
        .get(AGENT_SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128)
        .unwrap_or(&session_id);
    let info = SessionInfo {
        id: session_id.clone(),
        server: server.name.clone(),
        user: principal.name(),
        principal: principal.session_key(),
        agent: format!("{}\u{0}{agent}", principal.session_key()),
        init: env
            .params
            .map_or_else(|| "{}".to_owned(), |p| p.get().to_owned()),
        created_ms: now_ms(),
    };
    let sealed = match gw.ids.seal(&info) {
        Ok(s) => s,
        Err(e) => {
            return jsonrpc_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                env.id,
                toolgate_mcp::INTERNAL_ERROR,
                &e.to_string(),
            );
        }
    };
    let session = match gw.open(server, info).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(server = %server.name, "cannot open a session: {e:#}");
            return jsonrpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                env.id,
                toolgate_mcp::INTERNAL_ERROR,
                &format!(
                    "toolgate cannot open a session with `{}`: {e:#}",
                    server.name
                ),
            );
        }
    };
    lock(&gw.sessions).insert(session.info.id.clone(), Arc::clone(&session));
    gw.metrics.sessions(gw.session_count());
    let _busy = session.busy();
    let waiter = match session.request(id.clone(), body).await {
        Ok(w) => w,
        Err(_) => {
            return jsonrpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                env.id,
                toolgate_mcp::INTERNAL_ERROR,
                "the server ended before it answered `initialize`",
            );
        }
    };
    answer(session, id, waiter, Some(sealed)).await
}

/// The session a sealed id names: this replica's, or resumed here.
async fn session_for(
    gw: &Shared,
    server: &Arc<ServerRuntime>,
    principal: &Principal,
    sealed: &str,
) -> Result<Arc<Session>, Response> {
    let not_found = |why: &str| {
        jsonrpc_error(
            StatusCode::NOT_FOUND,
            None,
            toolgate_mcp::INVALID_REQUEST,
            &format!("unknown session ({why}): initialize a new one"),
        )
    };
    let info = gw.ids.open(sealed).map_err(not_found)?;
    if info.principal != principal.session_key() || info.server != server.name {
        return Err(not_found("it belongs to another user or server"));
    }
    resume(gw, server, info, true).await
}

/// A retry that carries an approval state sealed by this gateway: its nonce is redeemed in
/// the store, so that a state is used once across every replica (each replica's enforcer
/// also keeps its own ledger). The denial when it was used before or the store cannot say.
async fn redeem_state(
    gw: &Gateway,
    session: &Session,
    env: &toolgate_mcp::Envelope<'_>,
    params: Option<&Value>,
) -> Option<Vec<u8>> {
    let raw = env.params?;
    let state = params?.get("requestState")?.as_str()?;
    if !toolgate_runtime::approval::seal::claims_toolgate(state) {
        return None;
    }
    let (nonce, expires_ms) = gw.approval_sealer.nonce_of(state)?;
    let ttl = expires_ms.saturating_sub(now_ms()).max(1);
    let why = match gw
        .store
        .redeem_once(&format!("approval:{nonce}"), ttl)
        .await
    {
        Ok(true) => return None,
        Ok(false) => "the approval was refused: this approval state was already used".to_owned(),
        Err(e) => format!("{e}; toolgate cannot tell whether this approval was already used"),
    };
    let id = env.id?;
    Some(
        session
            .enforcer
            .deny_undecidable(id, Some(raw), "approval", &why),
    )
}

/// A request of the 2026-07-28 revision (by its header or its own `_meta`), which carries no
/// session.
fn is_stateless(headers: &HeaderMap, env: &toolgate_mcp::Envelope<'_>) -> bool {
    let by_header = headers
        .get(protocol::PROTOCOL_VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(protocol::is_stateless);
    let by_meta = env
        .params
        .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
        .and_then(|p| {
            p.pointer("/_meta/io.modelcontextprotocol~1protocolVersion")
                .and_then(Value::as_str)
                .map(protocol::is_stateless)
        })
        .unwrap_or(false);
    by_header || by_meta
}

/// The session that carries a user's stateless (2026-07-28) requests to a server on this
/// replica: one per user, server and agent session (`Toolgate-Agent-Session`, default
/// `default`), the same id on every replica, so that its state in the store is one agent
/// session's wherever its requests land. Its upstream is opened with an `initialize` of
/// toolgate's own (the client sends none); each request still carries the client's own
/// revision and capabilities in its `_meta`.
async fn stateless_session(
    gw: &Shared,
    server: &Arc<ServerRuntime>,
    principal: &Principal,
    headers: &HeaderMap,
) -> Result<Arc<Session>, Response> {
    use sha2::Digest as _;
    let agent = headers
        .get(AGENT_SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128)
        .unwrap_or("default");
    let mut h = sha2::Sha256::new();
    let key = principal.session_key();
    for part in ["stateless", &key, &server.name, agent] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    let id = hex::encode(h.finalize())
        .chars()
        .take(32)
        .collect::<String>();
    let info = SessionInfo {
        id: id.clone(),
        server: server.name.clone(),
        user: principal.name(),
        principal: principal.session_key(),
        agent: format!("{}\u{0}{agent}", principal.session_key()),
        init: json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "toolgate-gateway", "version": env!("CARGO_PKG_VERSION")}
        })
        .to_string(),
        created_ms: now_ms(),
    };
    // A stdio server needs an `initialize` before anything (an older one would refuse the
    // rest); a remote one is sent each request under its own revision by the transport,
    // which a 2026-07-28 server answers without one.
    let replay = server.config.command.is_some();
    resume(gw, server, info, replay).await
}

/// Opens a session on this replica; with `replay`, the session's `initialize` is replayed to
/// its fresh upstream first.
async fn resume(
    gw: &Shared,
    server: &Arc<ServerRuntime>,
    info: SessionInfo,
    replay: bool,
) -> Result<Arc<Session>, Response> {
    if let Some(s) = gw.live(&info.id) {
        return Ok(s);
    }
    if gw.draining.load(Ordering::SeqCst) {
        return Err(jsonrpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            None,
            toolgate_mcp::INTERNAL_ERROR,
            "the gateway is shutting down",
        ));
    }
    let id = info.id.clone();
    let one = Arc::clone(
        lock(&gw.resuming)
            .entry(id.clone())
            .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(()))),
    );
    let opened = open_here(gw, server, info, &one, replay).await;
    let mut resuming = lock(&gw.resuming);
    // The map's and ours: nobody else waits for this session.
    if resuming.get(&id).is_some_and(|e| Arc::strong_count(e) <= 2) {
        resuming.remove(&id);
    }
    drop(resuming);
    opened
}

/// [`resume`] under the session's own lock (two requests of one session open it once).
async fn open_here(
    gw: &Shared,
    server: &Arc<ServerRuntime>,
    info: SessionInfo,
    one: &tokio::sync::Mutex<()>,
    replay: bool,
) -> Result<Arc<Session>, Response> {
    let not_found = |why: &str| {
        jsonrpc_error(
            StatusCode::NOT_FOUND,
            None,
            toolgate_mcp::INVALID_REQUEST,
            &format!("unknown session ({why}): initialize a new one"),
        )
    };
    let _one = one.lock().await;
    if let Some(s) = gw.live(&info.id) {
        return Ok(s);
    }
    tracing::info!(session = %info.id, server = %server.name, "resuming a session opened elsewhere");
    let session = gw.open(server, info).await.map_err(|e| {
        jsonrpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            None,
            toolgate_mcp::INTERNAL_ERROR,
            &format!("toolgate cannot resume the session: {e:#}"),
        )
    })?;
    if session.share.closed() {
        session.close();
        return Err(not_found("it was ended"));
    }
    if replay && let Err(e) = session.replay_initialize(RESUME_WITHIN).await {
        session.close();
        return Err(not_found(&format!("it could not be resumed here: {e:#}")));
    }
    lock(&gw.sessions).insert(session.info.id.clone(), Arc::clone(&session));
    gw.metrics.sessions(gw.session_count());
    Ok(session)
}

async fn mcp_get(
    State(gw): State<Shared>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (principal, _loaded, server) = match admit(&gw, &headers, &name).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let Some(sealed) = session_header(&headers) else {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            "a GET stream needs a session\n",
        )
            .into_response();
    };
    let session = match session_for(&gw, &server, &principal, sealed).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let rx = session.listen();
    let stream = futures_util::stream::unfold((rx, session), |(mut rx, session)| async move {
        let msg = rx.recv().await?;
        Some((Ok::<_, Infallible>(sse(&msg)), (rx, session)))
    });
    sse_response(Body::from_stream(stream), None)
}

async fn mcp_delete(
    State(gw): State<Shared>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (principal, _loaded, server) = match admit(&gw, &headers, &name).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let Some(info) = session_header(&headers).and_then(|s| gw.ids.open(s).ok()) else {
        return (StatusCode::NOT_FOUND, "unknown session\n").into_response();
    };
    if info.principal != principal.session_key() || info.server != server.name {
        return (StatusCode::NOT_FOUND, "unknown session\n").into_response();
    }
    let local = lock(&gw.sessions).remove(&info.id);
    if let Some(s) = &local {
        s.close();
    }
    // Every other replica ends it too, and none resumes it.
    let entry = format!("!closed {}", info.id);
    if let Err(e) = gw.store.append(&info.agent, &[], &[entry]).await {
        tracing::warn!("the end of session `{}` could not be shared: {e}", info.id);
        return jsonrpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            None,
            toolgate_mcp::INTERNAL_ERROR,
            &format!("the session ended here, but other replicas could not be told: {e}"),
        );
    }
    gw.metrics.sessions(gw.session_count());
    StatusCode::NO_CONTENT.into_response()
}

/// Authenticates an approver.
async fn approver(gw: &Gateway, headers: &HeaderMap) -> Result<Principal, Response> {
    let loaded = gw.loaded();
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let metadata = format!(
        "{}/.well-known/oauth-protected-resource",
        loaded.config.public_url.trim_end_matches('/')
    );
    let refuse = |denied: &Denied| {
        let status = StatusCode::from_u16(denied.status()).unwrap_or(StatusCode::UNAUTHORIZED);
        gw.metrics.refused(status.as_u16());
        let mut r = (status, axum::Json(json!({ "error": denied.description() }))).into_response();
        if let Ok(v) = HeaderValue::from_str(&loaded.auth.challenge(denied, &metadata)) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        r
    };
    let principal = loaded
        .auth
        .authenticate(authorization, None)
        .await
        .map_err(|d| refuse(&d))?;
    loaded
        .auth
        .may_approve(&principal)
        .map_err(|d| refuse(&d))?;
    Ok(principal)
}

#[derive(Debug, serde::Deserialize)]
struct ListQuery {
    /// Wait up to this many seconds (at most 30) for the pending set to differ from `known`.
    wait: Option<u64>,
    /// The ids the approver already has, comma-separated.
    known: Option<String>,
}

fn store_unavailable(e: &toolgate_store::StoreError) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(json!({ "error": e.to_string() })),
    )
        .into_response()
}

async fn pending_list(gw: &Gateway) -> Result<Vec<Value>, toolgate_store::StoreError> {
    let now = now_ms();
    Ok(gw
        .store
        .list_pending()
        .await?
        .into_iter()
        .filter_map(|(_, json)| serde_json::from_str::<Value>(&json).ok())
        .filter(|p| p["expires_ms"].as_u64().is_none_or(|e| e > now))
        .collect())
}

async fn approvals_list(
    State(gw): State<Shared>,
    headers: HeaderMap,
    axum::extract::Query(query): axum::extract::Query<ListQuery>,
) -> Response {
    if let Err(r) = approver(&gw, &headers).await {
        return r;
    }
    let ids = |list: &[Value]| -> Vec<String> {
        let mut ids: Vec<String> = list.iter().map(|p| p["id"].to_string()).collect();
        ids.sort();
        ids
    };
    let mut list = match pending_list(&gw).await {
        Ok(l) => l,
        Err(e) => return store_unavailable(&e),
    };
    if let (Some(wait), Some(known)) = (query.wait, query.known.as_deref()) {
        let mut known: Vec<String> = known
            .split(',')
            .filter(|k| !k.is_empty())
            .map(str::to_owned)
            .collect();
        known.sort();
        let deadline = Instant::now() + Duration::from_secs(wait.min(30));
        while ids(&list) == known {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            if let Err(e) = gw.store.wait_pending_change(left).await {
                return store_unavailable(&e);
            }
            list = match pending_list(&gw).await {
                Ok(l) => l,
                Err(e) => return store_unavailable(&e),
            };
        }
    }
    axum::Json(Value::Array(list)).into_response()
}

#[derive(Debug, serde::Deserialize)]
struct AnswerBody {
    decision: String,
}

async fn approvals_answer(
    State(gw): State<Shared>,
    Path(id): Path<u64>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<AnswerBody>,
) -> Response {
    let principal = match approver(&gw, &headers).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let decision: toolgate_runtime::approval::question::Choice = match body.decision.parse() {
        Ok(d) => d,
        Err(why) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({ "accepted": false, "message": why })),
            )
                .into_response();
        }
    };
    let recorded = super::approvals::Recorded {
        decision,
        by: principal.name(),
    };
    let Ok(text) = serde_json::to_string(&recorded) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    match gw.store.answer_pending(&id.to_string(), &text).await {
        Ok(true) => {
            tracing::info!(approver = %principal.name(), id, decision = decision.cli_name(), "approval answered");
            axum::Json(json!({ "accepted": true, "message": format!("#{id}: {} by {}", decision.cli_name(), principal.name()) }))
                .into_response()
        }
        Ok(false) => (
            StatusCode::CONFLICT,
            axum::Json(json!({ "accepted": false, "message": format!("#{id} was already answered, withdrawn or has expired") })),
        )
            .into_response(),
        Err(e) => store_unavailable(&e),
    }
}
