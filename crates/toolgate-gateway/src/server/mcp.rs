//! The MCP endpoint (`/servers/<name>/mcp`): admission, transport checks, and POST, GET and
//! DELETE over Streamable HTTP.

use super::respond::{answer, json_body, sse, sse_response};
use super::sessions::{initialize, is_stateless, redeem_state, session_for, stateless_session};
use super::{Gateway, Loaded, ServerRuntime, Shared, jsonrpc_error, lock, metadata_url};
use crate::auth::{Denied, Principal};
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;
use toolgate_mcp::{Frame, IdKey, Kind, build, classify, protocol};

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

pub(super) async fn mcp_post(
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
                Err(crate::session::Refused::DuplicateId) => {
                    return jsonrpc_error(
                        StatusCode::BAD_REQUEST,
                        env.id,
                        toolgate_mcp::INVALID_REQUEST,
                        "a request with this id is already in flight",
                    );
                }
                Err(crate::session::Refused::Ended) => {
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

pub(super) async fn mcp_get(
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

pub(super) async fn mcp_delete(
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
