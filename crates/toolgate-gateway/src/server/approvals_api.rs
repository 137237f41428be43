//! The approvals API: approvers list pending approvals and answer them.

use super::{Gateway, Shared};
use crate::auth::{Denied, Principal};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use toolgate_runtime::clock::now_ms;

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
pub(super) struct ListQuery {
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

pub(super) async fn approvals_list(
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
pub(super) struct AnswerBody {
    decision: String,
}

pub(super) async fn approvals_answer(
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
    let recorded = crate::approvals::Recorded {
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
