//! How a request's response reaches the client: JSON when nothing came before it, else an SSE
//! stream of what the server sent meanwhile, ending with the response; its taint shared first.

use crate::session::{Session, Waiter};
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use std::sync::Arc;
use toolgate_mcp::{Frame, IdKey, build, classify, protocol};

pub(super) fn json_body(status: StatusCode, body: Vec<u8>, session: Option<&str>) -> Response {
    let mut r = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    if let Some(s) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
        r.headers_mut().insert(protocol::SESSION_ID_HEADER, s);
    }
    r
}

/// The response to a request: JSON when nothing else came first, else an SSE stream of what
/// the server sent meanwhile, ending with the response. What the response tainted is in the
/// store before the response leaves (else it is withheld).
pub(super) async fn answer(
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
pub(super) fn sse_response(body: Body, session_id: Option<&str>) -> Response {
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

pub(super) fn sse(message: &[u8]) -> Bytes {
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
