//! The core both HTTP transports share: the transport's state ([`Inner`]), the messages
//! it sends ([`Outgoing`]), and what both do alike: the headers of every request, answering
//! an authorization challenge, handing what the server sent to the relay, and failing a
//! request with a JSON-RPC error. Streamable HTTP (`streamable.rs`) and the legacy HTTP+SSE
//! transport (`legacy.rs`) each build on this and neither on the other's internals.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::header::{self, HeaderMap, HeaderValue};
use tokio::sync::mpsc;
use toolgate_mcp::protocol::{PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER};
use toolgate_mcp::{Frame, INTERNAL_ERROR, IdKey, Kind, RawValue, build, classify};
use tracing::{debug, warn};
use url::Url;

use super::authorizer::{AuthError, Authorizer};
use super::http::redact;
use super::sse::{Cursor, Events, OverLimit};
use crate::proxy::lines::{Line, OVERSIZE_PREFIX};

/// Authorization attempts per request: a 401 (or 403 step-up) retried at most this often.
const MAX_AUTH_RETRIES: u32 = 2;

/// Which transport to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TransportKind {
    /// Streamable HTTP, falling back to the legacy HTTP+SSE transport when the server
    /// refuses the `initialize` POST with 400, 404 or 405.
    Auto,
    /// Streamable HTTP only.
    StreamableHttp,
    /// The legacy HTTP+SSE transport (2024-11-05) only.
    Sse,
}

/// Settings of one remote upstream.
#[derive(Debug)]
pub struct Options {
    /// The server's MCP endpoint.
    pub url: Url,
    /// `--header` values (already expanded), sent with every request.
    pub headers: HeaderMap,
    /// OAuth, when the server needs it and no `Authorization` header was given.
    pub auth: Option<Arc<dyn Authorizer>>,
    /// The longest message relayed.
    pub max_message_bytes: usize,
    /// The transport (and fallback).
    pub kind: TransportKind,
    /// The longest a request waits for its response.
    pub request_timeout: Duration,
    /// After the client is done: how long in-flight requests may still take.
    pub grace: Duration,
}

/// The session as the server sees it.
#[derive(Debug, Default)]
pub(super) struct Session {
    /// `Mcp-Session-Id`, once the server gave one.
    pub(super) id: Option<HeaderValue>,
    /// The protocol revision `initialize` negotiated.
    pub(super) version: Option<String>,
    /// The client's `initialize` params, to initialize again after the session expired.
    pub(super) init_params: Option<Box<RawValue>>,
    /// Bumped by every (re-)initialization: a request that saw an older one and got 404
    /// re-initializes once, not once per request.
    pub(super) generation: u64,
    /// The GET stream of server-initiated messages.
    pub(super) listener: Option<tokio::task::AbortHandle>,
    /// The server forgot the session and no re-initialization has succeeded since.
    pub(super) reinit_pending: bool,
}

pub(super) struct Inner {
    /// This transport, for the tasks it starts.
    pub(super) me: std::sync::Weak<Inner>,
    pub(super) http: reqwest::Client,
    pub(super) options: Options,
    pub(super) output: mpsc::Sender<Line>,
    pub(super) session: Mutex<Session>,
    /// Per tool, the arguments mirrored in `Mcp-Param-*` headers (2026-07-28).
    pub(super) param_headers: Mutex<HashMap<String, Vec<Mirrored>>>,
    /// Requests whose response comes on another stream (the legacy transport), until it
    /// comes: a request still here at `--request-timeout` is answered with an error.
    pub(super) awaited: Mutex<std::collections::HashSet<IdKey>>,
    /// Held while re-initializing.
    pub(super) reinit: tokio::sync::Mutex<()>,
    pub(super) next_own_id: AtomicU64,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("url", &redact(&self.options.url))
            .finish_non_exhaustive()
    }
}

/// One message to send, with what the transport needs to know of it.
#[derive(Debug, Clone)]
pub(super) struct Outgoing {
    pub(super) body: Bytes,
    pub(super) kind: Kind,
    pub(super) method: Option<String>,
    /// The raw id (requests only).
    pub(super) id: Option<Box<RawValue>>,
    /// `params.name` (or `params.uri`): `Mcp-Name`.
    pub(super) name: Option<String>,
    /// `params._meta["io.modelcontextprotocol/protocolVersion"]`, for stateless requests.
    pub(super) meta_version: Option<String>,
}

impl Outgoing {
    /// Reads what the transport needs from one frame; `None` for what the relay never
    /// sends (a batch, unparsable bytes).
    pub(super) fn parse(frame: Bytes) -> Option<Outgoing> {
        let body = frame.slice(..frame.strip_suffix(b"\n").map_or(frame.len(), <[u8]>::len));
        let (kind, method, id, name, meta_version) = {
            let Frame::Single(env) = classify(&body) else {
                return None;
            };
            let (name, meta_version) = env.params.map_or((None, None), params_facts);
            (
                env.kind,
                env.method.map(|m| m.into_owned()),
                env.id.map(|id| id.to_owned()),
                name,
                meta_version,
            )
        };
        Some(Outgoing {
            body,
            kind,
            method,
            id: if kind == Kind::Request { id } else { None },
            name,
            meta_version,
        })
    }

    /// The `notifications/cancelled` of this request.
    pub(super) fn cancellation(&self, reason: &str) -> Option<Outgoing> {
        let id = self.id.as_deref()?;
        let params = format!(
            r#"{{"requestId":{},"reason":{}}}"#,
            id.get(),
            serde_json::Value::from(reason)
        );
        let params = RawValue::from_string(params).ok()?;
        let frame = build::notification("notifications/cancelled", Some(&params));
        Outgoing::parse(Bytes::from(frame))
    }

    pub(super) fn is_request(&self) -> bool {
        self.kind == Kind::Request
    }

    pub(super) fn key(&self) -> Option<IdKey> {
        self.id.as_deref().and_then(IdKey::from_raw)
    }

    pub(super) fn describe(&self) -> String {
        self.method
            .as_deref()
            .map_or_else(|| "a response".to_owned(), |m| format!("`{m}`"))
    }
}

fn params_facts(params: &RawValue) -> (Option<String>, Option<String>) {
    #[derive(serde::Deserialize)]
    struct Params {
        name: Option<String>,
        uri: Option<String>,
        #[serde(rename = "_meta")]
        meta: Option<HashMap<String, serde_json::Value>>,
    }
    let Ok(p) = serde_json::from_str::<Params>(params.get()) else {
        return (None, None);
    };
    let version = p
        .meta
        .as_ref()
        .and_then(|m| m.get(toolgate_mcp::views::META_PROTOCOL_VERSION))
        .and_then(|v| v.as_str().map(str::to_owned));
    (p.name.or(p.uri), version)
}

/// Why a message could not be delivered. The text is the JSON-RPC error message the
/// client gets for a request.
#[derive(Debug)]
pub(super) struct Failure(pub(super) String);

/// What [`Inner::receive`] did with a message.
pub(super) enum Received {
    /// It was the awaited response (not delivered).
    Answer(Bytes),
    /// Handed to the relay.
    Delivered,
    /// Not JSON: dropped.
    Dropped,
}

pub(super) fn www_authenticate(response: &reqwest::Response) -> Option<String> {
    let all: Vec<&str> = response
        .headers()
        .get_all(header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!all.is_empty()).then(|| all.join(", "))
}

fn insufficient_scope(response: &reqwest::Response) -> bool {
    www_authenticate(response).is_some_and(|c| c.contains("insufficient_scope"))
}

pub(super) fn auth_failure(err: &AuthError) -> Failure {
    Failure(format!(
        "authorization with the remote server failed: {err}"
    ))
}

/// An argument mirrored in a header: its path in `arguments`, and the header's token.
pub(super) type Mirrored = (Vec<String>, String);

impl From<OverLimit> for Failure {
    fn from(OverLimit(max): OverLimit) -> Self {
        Failure(format!(
            "the remote server sent an event over the limit of {max} bytes (help: raise `--max-message-bytes`)"
        ))
    }
}

impl Inner {
    /// A transport's state, before anything was sent.
    pub(super) fn new(
        http: reqwest::Client,
        options: Options,
        output: mpsc::Sender<Line>,
    ) -> Arc<Inner> {
        Arc::new_cyclic(|me| Inner {
            me: me.clone(),
            http,
            options,
            output,
            session: Mutex::new(Session::default()),
            param_headers: Mutex::new(HashMap::new()),
            awaited: Mutex::new(std::collections::HashSet::new()),
            reinit: tokio::sync::Mutex::new(()),
            next_own_id: AtomicU64::new(1),
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Session> {
        self.session
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn awaited_lock(&self) -> MutexGuard<'_, std::collections::HashSet<IdKey>> {
        self.awaited
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Answers a request that will get no response from the server.
    pub(super) async fn fail(&self, out: &Outgoing, failure: &Failure) {
        warn!("{}: {}", out.describe(), failure.0);
        if let Some(id) = out.id.as_deref() {
            let reply = build::error_response(Some(id), INTERNAL_ERROR, &failure.0);
            self.deliver_line(reply).await;
        }
    }

    /// Hands one received message to the relay (as one line).
    pub(super) async fn deliver_line(&self, mut message: Vec<u8>) {
        for b in &mut message {
            if matches!(*b, b'\n' | b'\r') {
                *b = b' ';
            }
        }
        let line = if message.len() > self.options.max_message_bytes {
            let len = message.len() as u64;
            message.truncate(OVERSIZE_PREFIX);
            Line::Oversize {
                prefix: message,
                len,
            }
        } else {
            message.push(b'\n');
            Line::Frame(message)
        };
        if self.output.send(line).await.is_err() {
            debug!("the relay is gone; message dropped");
        }
    }

    /// Handles one message the server sent: a response to `capture` is returned instead of
    /// delivered; anything that is not JSON is dropped (and reported).
    pub(super) async fn receive(
        &self,
        payload: &[u8],
        capture: Option<&IdKey>,
    ) -> Result<Received, Failure> {
        // Checked here, where the request it answers is known: the relay could not always
        // tell which request an oversize line answers (its id may come last).
        let max = self.options.max_message_bytes;
        if payload.len() > max {
            return Err(Failure(format!(
                "the remote server sent a message of {} bytes, over the limit of {max} (help: raise `--max-message-bytes`)",
                payload.len()
            )));
        }
        let (is_answer, is_json) = match classify(payload) {
            Frame::Single(env) => {
                let response = matches!(env.kind, Kind::Response | Kind::ErrorResponse);
                let key = env.id.and_then(IdKey::from_raw);
                if response && let Some(key) = &key {
                    self.awaited_lock().remove(key);
                }
                let answers = response && capture.is_some() && key.as_ref() == capture;
                (answers, true)
            }
            Frame::Batch(_) => (false, true),
            Frame::ParseError(err) => {
                warn!(
                    "the remote server sent a message that is not JSON ({} bytes), dropped: {err}",
                    payload.len()
                );
                (false, false)
            }
        };
        if !is_json {
            return Ok(Received::Dropped);
        }
        if is_answer {
            return Ok(Received::Answer(Bytes::copy_from_slice(payload)));
        }
        self.deliver_line(payload.to_vec()).await;
        Ok(Received::Delivered)
    }

    /// The headers every request carries: the user's, the session's, the credentials.
    pub(super) async fn base_headers(&self) -> Result<(HeaderMap, u64, bool), Failure> {
        let mut headers = self.options.headers.clone();
        let (generation, had_session) = {
            let session = self.lock();
            if let Some(id) = &session.id {
                headers.insert(SESSION_ID_HEADER, id.clone());
            }
            if let Some(version) = session
                .version
                .as_deref()
                .and_then(|v| HeaderValue::from_str(v).ok())
            {
                headers.insert(PROTOCOL_VERSION_HEADER, version);
            }
            (session.generation, session.id.is_some())
        };
        if let Some(auth) = &self.options.auth
            && !headers.contains_key(header::AUTHORIZATION)
        {
            match auth.authorization().await {
                Ok(Some(value)) => {
                    let mut value = HeaderValue::from_str(&value)
                        .map_err(|_| Failure("the stored access token is not a valid header value (help: run `toolgate auth login`)".to_owned()))?;
                    value.set_sensitive(true);
                    headers.insert(header::AUTHORIZATION, value);
                }
                Ok(None) => {}
                Err(err) => return Err(auth_failure(&err)),
            }
        }
        Ok((headers, generation, had_session))
    }

    /// A 401, or a 403 asking for more scope, when OAuth is on: the authorizer gets new
    /// credentials and the caller retries (`Ok(true)`), at most [`MAX_AUTH_RETRIES`] times
    /// per request. `sent` is the `Authorization` value the refused request carried.
    pub(super) async fn answer_challenge(
        &self,
        response: &reqwest::Response,
        sent: Option<&str>,
        retries: &mut u32,
    ) -> Result<bool, Failure> {
        let status = response.status();
        let Some(auth) = &self.options.auth else {
            return Ok(false);
        };
        let challenged = status == StatusCode::UNAUTHORIZED
            || (status == StatusCode::FORBIDDEN && insufficient_scope(response));
        if !challenged || *retries >= MAX_AUTH_RETRIES {
            return Ok(false);
        }
        *retries += 1;
        let challenge = www_authenticate(response);
        auth.challenge(status.as_u16(), challenge.as_deref(), sent)
            .await
            .map_err(|err| auth_failure(&err))?;
        Ok(true)
    }

    /// [`Inner::drain`] over events already opened.
    pub(super) async fn drain_events(
        &self,
        events: &mut Events,
        cursor: &mut Cursor,
        key: Option<&IdKey>,
        initial: bool,
    ) -> Result<Option<Bytes>, Failure> {
        loop {
            let event = match events.next().await? {
                None => {
                    cursor.ended = None;
                    return Ok(None);
                }
                Some(Err(why)) => {
                    cursor.ended = Some(why.to_string());
                    return Ok(None);
                }
                Some(Ok(event)) => event,
            };
            if let Some(id) = event.id {
                cursor.last_id = Some(id);
            }
            if let Some(retry) = event.retry {
                cursor.retry = Some(Duration::from_millis(retry));
            }
            cursor.events += 1;
            let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                continue;
            };
            if event.event.as_deref().is_some_and(|e| e != "message") {
                debug!(
                    "ignoring an SSE event of type `{}`",
                    event.event.as_deref().unwrap_or_default()
                );
                continue;
            }
            if initial && key.is_some() {
                self.record_version(data.as_bytes());
            }
            if let Received::Answer(bytes) = self.receive(data.as_bytes(), key).await? {
                return Ok(Some(bytes));
            }
        }
    }

    /// Records the revision an `initialize` response negotiated.
    pub(super) fn record_version(&self, body: &[u8]) {
        if let Some(v) = super::handshake::negotiated_revision(body) {
            debug!("the remote server speaks revision {v}");
            self.lock().version = Some(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outgoing_facts_come_from_the_body() {
        let frame = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}
"#,
        );
        let out = Outgoing::parse(frame).unwrap();
        assert_eq!(out.method.as_deref(), Some("tools/call"));
        assert_eq!(out.name.as_deref(), Some("echo"));
        assert_eq!(out.meta_version.as_deref(), Some("2026-07-28"));
        assert_eq!(out.id.as_deref().map(RawValue::get), Some("7"));
        assert!(!out.body.ends_with(b"\n"));
    }
}
