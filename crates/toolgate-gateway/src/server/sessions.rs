//! Sessions behind the MCP endpoint: opened by `initialize`, found, resumed on another
//! replica, redeemed from a state token, or stateless.

use super::respond::answer;
use super::{
    AGENT_SESSION_HEADER, Gateway, Loaded, RESUME_WITHIN, ServerRuntime, Shared, jsonrpc_error,
    lock,
};
use crate::auth::Principal;
use crate::session::Session;
use crate::sid::SessionInfo;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use toolgate_mcp::{IdKey, protocol};
use toolgate_runtime::clock::now_ms;

pub(super) async fn initialize(
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
pub(super) async fn session_for(
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
pub(super) async fn redeem_state(
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
pub(super) fn is_stateless(headers: &HeaderMap, env: &toolgate_mcp::Envelope<'_>) -> bool {
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
pub(super) async fn stateless_session(
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
