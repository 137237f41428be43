//! The gateway's HTTP side: Streamable HTTP at `/servers/<name>/mcp`, the RFC 9728
//! metadata, health, readiness and metrics. Every MCP message goes through a session's relay
//! and its enforcer: there is no other path to a server.

mod approvals_api;
mod mcp;
mod respond;
mod sessions;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use sha2::Digest as _;
use subtle::ConstantTimeEq as _;
use toolgate_audit::AuditWriter;
use toolgate_mcp::{RawValue, build};
use toolgate_policy::{Engine, TaintLimits};
use toolgate_store::Store;

use toolgate_runtime::approval::Mode;
use toolgate_runtime::enforce::{Enforcer, EngineBackend, Settings};

use super::auth::Authenticator;
use super::config::{GatewayConfig, ServerConfig};
use super::metrics::Metrics;
use super::session::{Parts, Session, Upstream};
use super::share::StoreShare;
use super::sid::{IdSealer, SessionInfo, derive};
use toolgate_runtime::clock::now_ms;

use approvals_api::{approvals_answer, approvals_list};
use mcp::{mcp_delete, mcp_get, mcp_post};

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

async fn metrics(State(gw): State<Shared>, headers: HeaderMap) -> Response {
    if let Some(m) = &gw.loaded().config.metrics {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(|t| sha2::Sha256::digest(t.trim().as_bytes()));
        let want = hex::decode(m.token_sha256.trim()).unwrap_or_default();
        let equal = given.is_some_and(|d| bool::from(d.as_slice().ct_eq(&want)));
        if !equal {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer realm=\"metrics\"")],
                "the metrics need the token of `metrics.token_sha256`: send `Authorization: Bearer <token>`\n",
            )
                .into_response();
        }
    }
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

fn jsonrpc_error(status: StatusCode, id: Option<&RawValue>, code: i64, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        build::error_response(id, code, message),
    )
        .into_response()
}
