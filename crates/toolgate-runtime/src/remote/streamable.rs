//! The client side of the MCP Streamable HTTP transport (revisions 2025-03-26 to
//! 2026-07-28), as a relay upstream.
//!
//! The relay sends it frames (one JSON-RPC message each) and reads back lines, exactly as
//! it would write a child's stdin and read its stdout, so the interceptor sees the same
//! messages in the same order. Each outgoing message becomes one POST; what comes back (a
//! JSON body, or the `data:` of each SSE event, in order) becomes one line each, bytes
//! unchanged except that line breaks between JSON tokens become spaces (the stdio framing
//! needs one message per line; JSON strings cannot hold a raw line break).
//!
//! Every request the relay sends gets exactly one answer line: the server's response, or a
//! JSON-RPC error saying why there is none (unreachable, an HTTP error, a stream that
//! ended and cannot be resumed, the session expired and the request could not be
//! replayed, a timeout). Notifications and responses wait for the server's acceptance
//! before the next message is sent, so their order is kept; requests run concurrently.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt as _;
use reqwest::StatusCode;
use reqwest::header::{self, HeaderValue};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use toolgate_mcp::protocol::{LAST_EVENT_ID_HEADER, PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER};
use toolgate_mcp::{Frame, IdKey, Kind, RawValue, build, classify};
use tracing::{debug, info, warn};
use url::Url;

use super::exchange::{Failure, Inner, Outgoing, Received, www_authenticate};
pub use super::exchange::{Options, TransportKind};
use super::handshake::{self, EndFailed};
use super::http::err_text;
use super::http::{redact, same_origin};
use super::sse::{Cursor, Events, Limit};
use crate::proxy::lines::Line;

/// How many times a dropped stream is resumed (with `Last-Event-ID`) in a row without
/// receiving an event before the request is given up.
const MAX_RESUMES: u32 = 5;
/// The reconnection delay when the server gave no `retry:`; and the longest honoured.
const DEFAULT_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(30);
/// Attempts to open a GET stream the server refused with 5xx or 429, or could not be
/// reached for.
const MAX_STREAM_RETRIES: u32 = 3;
/// The longest a notification or response holds up what follows it while the server has
/// not accepted it.
const ORDER_WAIT: Duration = Duration::from_secs(5);
/// Capacity of the queues between the relay and the transport.
const QUEUE: usize = 32;

/// A running transport: the relay's two queues and the task.
#[derive(Debug)]
pub struct Started {
    /// Frames to send (newline included).
    pub to_upstream: mpsc::Sender<Bytes>,
    /// Messages received, one line each.
    pub from_upstream: mpsc::Receiver<Line>,
    /// Ends once the input is closed and everything in flight is settled.
    pub task: JoinHandle<()>,
}

/// Starts the transport.
pub fn start(http: reqwest::Client, options: Options) -> Started {
    let (to_upstream, input) = mpsc::channel::<Bytes>(QUEUE);
    let (output, from_upstream) = mpsc::channel::<Line>(QUEUE);
    let legacy_only = options.kind == TransportKind::Sse;
    let inner = Inner::new(http, options, output);
    let task = if legacy_only {
        tokio::spawn(super::legacy::run(inner, input))
    } else {
        tokio::spawn(run(inner, input))
    };
    Started {
        to_upstream,
        from_upstream,
        task,
    }
}

/// How an exchange ended.
enum Answer {
    /// The message was accepted (202), or a request's response was delivered.
    Done,
    /// A captured response (toolgate's own requests).
    Captured(Bytes),
}

async fn run(inner: Arc<Inner>, mut input: mpsc::Receiver<Bytes>) {
    let mut tasks = JoinSet::new();
    while let Some(frame) = input.recv().await {
        while tasks.try_join_next().is_some() {}
        let Some(out) = Outgoing::parse(frame) else {
            warn!("the relay sent a frame the transport cannot read: dropped");
            continue;
        };
        match (out.kind, out.method.as_deref()) {
            (Kind::Request, Some("initialize")) => {
                if inner.initialize(&out).await {
                    // The server speaks the legacy transport: it takes over from here.
                    super::legacy::continue_with(Arc::clone(&inner), input, out).await;
                    return;
                }
            }
            (Kind::Request, _) => {
                let inner = Arc::clone(&inner);
                tasks.spawn(async move { inner.send_request(out).await });
            }
            (_, Some("notifications/initialized")) => {
                inner.send_in_order(out).await;
                inner.start_listener();
            }
            _ => inner.send_in_order(out).await,
        }
    }
    debug!("client done: settling {} request(s) in flight", tasks.len());
    let grace = inner.options.grace;
    if tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} })
        .await
        .is_err()
    {
        // Their requests are answered by the relay when this task ends.
        tasks.abort_all();
    }
    inner.end_session().await;
}

impl Inner {
    fn kind_is_auto(&self) -> bool {
        self.options.kind == TransportKind::Auto
    }

    /// Sends the client's `initialize` (and waits for its answer before anything else is
    /// sent). Returns true when the server does not take POSTs at this URL (400, 404 or
    /// 405 without a JSON-RPC body) in `auto` mode: the legacy transport is tried instead.
    async fn initialize(&self, out: &Outgoing) -> bool {
        self.remember_init(out);
        let limit = self.options.request_timeout;
        let failure = match tokio::time::timeout(limit, self.exchange(out, false, true)).await {
            Ok(Ok(_)) => return false,
            Ok(Err(Fallback::Legacy)) => return true,
            Ok(Err(Fallback::Failed(failure))) => failure,
            Err(_) => Failure(format!(
                "the remote server did not answer `initialize` within {}s",
                limit.as_secs()
            )),
        };
        self.fail(out, &failure).await;
        false
    }

    fn remember_init(&self, out: &Outgoing) {
        if let Frame::Single(env) = classify(&out.body) {
            self.lock().init_params = env.params.map(ToOwned::to_owned);
        }
    }

    /// Sends one request and delivers its answer (or an error) to the relay.
    async fn send_request(&self, out: Outgoing) {
        let limit = self.options.request_timeout;
        let outcome = tokio::time::timeout(limit, self.exchange(&out, false, false)).await;
        let failure = match outcome {
            Ok(Ok(_)) => return,
            Ok(Err(Fallback::Failed(failure))) => failure,
            Ok(Err(Fallback::Legacy)) => Failure("the server refused the request".to_owned()),
            Err(_) => {
                self.cancel_upstream(&out, "toolgate: no response in time")
                    .await;
                Failure(format!(
                    "no response from the remote server within {}s (help: raise `--request-timeout`)",
                    limit.as_secs()
                ))
            }
        };
        self.fail(&out, &failure).await;
    }

    /// Sends a notification or a response, and waits until the server accepted it, so
    /// that what follows reaches the server after it; but not longer than [`ORDER_WAIT`]
    /// (or `--request-timeout`): a server that never accepts a notification must not hold
    /// up every later message. The POST goes on in the background then.
    async fn send_in_order(self: &Arc<Self>, out: Outgoing) {
        let describe = out.describe();
        let inner = Arc::clone(self);
        let post = tokio::spawn(async move { inner.send_message(&out).await });
        let bound = self.options.request_timeout.min(ORDER_WAIT);
        if tokio::time::timeout(bound, post).await.is_err() {
            warn!(
                "the remote server has not accepted {describe} within {}s: sending what follows without waiting",
                bound.as_secs_f32()
            );
        }
    }

    /// Sends a notification or a response and waits until the server accepted it.
    pub(super) async fn send_message(&self, out: &Outgoing) {
        if let Err(fallback) = self.exchange(out, false, false).await {
            let Failure(why) = fallback.into_failure();
            warn!(
                "{} could not be delivered to the remote server: {why}",
                out.describe()
            );
        }
    }

    /// Tells the server a request is no longer waited for.
    async fn cancel_upstream(&self, out: &Outgoing, reason: &str) {
        if let Some(cancel) = out.cancellation(reason) {
            let _ =
                tokio::time::timeout(Duration::from_secs(5), self.exchange(&cancel, false, false))
                    .await;
        }
    }

    /// POSTs one message and handles the answer: delivers it, or (with `capture`) returns
    /// the response. `initial` marks the client's `initialize` (whose session id and
    /// revision are recorded, and whose refusal may mean a legacy server).
    async fn exchange(
        &self,
        out: &Outgoing,
        capture: bool,
        initial: bool,
    ) -> Result<Answer, Fallback> {
        let mut auth_retries = 0;
        let mut reinitialized = false;
        loop {
            let pending = self.lock().reinit_pending;
            if pending && !initial && !reinitialized {
                let generation = self.lock().generation;
                self.reinitialize(generation)
                    .await
                    .map_err(Fallback::Failed)?;
                reinitialized = true;
            }
            let (mut headers, generation, had_session) = self.base_headers().await?;
            handshake::set_post_headers(&mut headers);
            if initial {
                headers.remove(SESSION_ID_HEADER);
                headers.remove(PROTOCOL_VERSION_HEADER);
            }
            self.stateless_headers(out, &mut headers);
            let sent = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let response = self
                .http
                .post(self.options.url.clone())
                .headers(headers)
                .body(out.body.clone())
                .send()
                .await
                .map_err(|err| Fallback::Failed(unreachable(&self.options.url, &err)))?;
            let status = response.status();
            if self
                .answer_challenge(&response, sent.as_deref(), &mut auth_retries)
                .await?
            {
                continue;
            }
            match status {
                StatusCode::NOT_FOUND if had_session && !initial && !reinitialized => {
                    info!("the remote server no longer knows the session: initializing again");
                    self.reinitialize(generation)
                        .await
                        .map_err(Fallback::Failed)?;
                    reinitialized = true;
                    continue;
                }
                StatusCode::BAD_REQUEST
                | StatusCode::NOT_FOUND
                | StatusCode::METHOD_NOT_ALLOWED
                    if initial && self.kind_is_auto() && !is_json(&response) =>
                {
                    return Err(Fallback::Legacy);
                }
                _ => {}
            }
            if initial && status.is_success() {
                self.record_session(&response);
            }
            return self
                .answer(out, response, capture, initial)
                .await
                .map_err(Fallback::Failed);
        }
    }

    fn record_session(&self, response: &reqwest::Response) {
        let id = handshake::session_id(response);
        let mut session = self.lock();
        session.id = id.map(|mut v| {
            v.set_sensitive(true);
            v
        });
        session.generation += 1;
    }

    /// Reads the answer to a POST.
    async fn answer(
        &self,
        out: &Outgoing,
        response: reqwest::Response,
        capture: bool,
        initial: bool,
    ) -> Result<Answer, Failure> {
        let status = response.status();
        if status.is_redirection() {
            let to = response
                .headers()
                .get(header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|loc| self.options.url.join(loc).ok());
            return Err(Failure(match to {
                Some(to) if !same_origin(&to, &self.options.url) => format!(
                    "the remote server redirected to another origin (`{}`): refused; toolgate follows redirects only within one origin (help: use the final URL in `--url`)",
                    redact(&to)
                ),
                _ => format!(
                    "the remote server answered HTTP {status} (a redirect toolgate did not follow)"
                ),
            }));
        }
        let key = out.key();
        if !status.is_success() {
            return match self.http_error(out, response).await {
                HttpError::Relay(error) if capture => Ok(Answer::Captured(Bytes::from(error))),
                HttpError::Relay(error) => {
                    self.deliver_line(error).await;
                    Ok(Answer::Done)
                }
                HttpError::Failed(failure) => Err(failure),
            };
        }
        if !out.is_request() {
            // 202 Accepted (or any 2xx): nothing to relay. A body, if any, is ignored.
            return Ok(Answer::Done);
        }
        if status == StatusCode::ACCEPTED {
            return Err(Failure(
                "the remote server accepted the request but sent no response (HTTP 202)".to_owned(),
            ));
        }
        let capture_key = key.as_ref();
        if is_sse(&response) {
            return self.read_stream(out, response, capture, initial).await;
        }
        let body = self.read_body(response).await?;
        if initial {
            self.record_version(&body);
        }
        match self.receive(&body, capture_key).await? {
            Received::Answer(bytes) if capture => Ok(Answer::Captured(bytes)),
            Received::Answer(bytes) => {
                self.observe_answer(out, &bytes);
                self.deliver_line(bytes.to_vec()).await;
                Ok(Answer::Done)
            }
            Received::Delivered => Ok(Answer::Done),
            Received::Dropped => Err(Failure(
                "the remote server answered with a body that is not JSON".to_owned(),
            )),
        }
    }

    /// The answer to a request refused with an HTTP error status: the server's own
    /// JSON-RPC error when the body is one (re-addressed to the request: a client needs its
    /// code, e.g. to fall back to an older revision), else an error naming the status.
    async fn http_error(&self, out: &Outgoing, response: reqwest::Response) -> HttpError {
        let status = response.status();
        let challenge = www_authenticate(&response);
        let json = is_json(&response);
        let body = self.read_body(response).await.unwrap_or_default();
        if json {
            if let Some(id) = out.id.as_deref()
                && let Some(error) = readdress_error(&body, id)
            {
                debug!("the remote server answered HTTP {status} with a JSON-RPC error");
                return HttpError::Relay(error);
            }
            if let Some(message) = jsonrpc_error_message(&body) {
                return HttpError::Failed(Failure(format!(
                    "the remote server answered HTTP {status}: {message}"
                )));
            }
        }
        let hint = match status {
            StatusCode::UNAUTHORIZED if self.options.auth.is_none() => format!(
                " (help: the server needs authorization: run `toolgate auth login {}`, or pass the credentials with `--header 'Authorization: Bearer ${{TOKEN}}'`)",
                redact(&self.options.url)
            ),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => challenge
                .map(|c| format!(" ({})", c.chars().take(200).collect::<String>()))
                .unwrap_or_default(),
            _ => String::new(),
        };
        HttpError::Failed(Failure(format!(
            "the remote server answered HTTP {status}{hint}"
        )))
    }

    /// Reads a whole body, up to the message limit.
    async fn read_body(&self, response: reqwest::Response) -> Result<Vec<u8>, Failure> {
        let max = self.options.max_message_bytes;
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|err| {
                Failure(format!(
                    "reading the remote server's answer failed: {}",
                    err_text(&err)
                ))
            })?;
            if body.len() + chunk.len() > max {
                return Err(Failure(format!(
                    "the remote server's answer exceeds the limit of {max} bytes (help: raise `--max-message-bytes`)"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// Reads an SSE stream until the request's response, resuming it with `Last-Event-ID`
    /// when it drops first.
    async fn read_stream(
        &self,
        out: &Outgoing,
        response: reqwest::Response,
        capture: bool,
        initial: bool,
    ) -> Result<Answer, Failure> {
        let key = out.key();
        let mut cursor = Cursor::default();
        let mut response = response;
        let mut resumes = 0;
        loop {
            let before = cursor.events;
            match self
                .drain(response, &mut cursor, key.as_ref(), initial)
                .await?
            {
                Some(bytes) if capture => return Ok(Answer::Captured(bytes)),
                Some(bytes) => {
                    self.observe_answer(out, &bytes);
                    self.deliver_line(bytes.to_vec()).await;
                    return Ok(Answer::Done);
                }
                None => {}
            }
            if cursor.events > before {
                resumes = 0;
            }
            resumes += 1;
            let Some(last) = cursor.last_id.clone() else {
                return Err(Failure(format!(
                    "the remote server closed the stream before responding{}",
                    cursor.why()
                )));
            };
            if resumes > MAX_RESUMES {
                return Err(Failure(format!(
                    "the remote server's stream kept closing before the response ({MAX_RESUMES} resumptions){}",
                    cursor.why()
                )));
            }
            let retry = cursor.retry.unwrap_or(DEFAULT_RETRY).min(MAX_RETRY);
            tokio::time::sleep(retry).await;
            debug!(
                "resuming the stream of {} after event `{last}`",
                out.describe()
            );
            response = self.resume(&last, retry).await?;
        }
    }

    /// Opens a GET stream after `last` (or the listening stream, without): answers a 401
    /// (or a 403 step-up) through the authorizer and retries a 5xx or 429 a few times
    /// (after the server's `retry:`), like a dropped stream.
    pub(super) async fn open_stream(
        &self,
        last: Option<&str>,
        retry: Duration,
    ) -> Result<reqwest::Response, StreamRefused> {
        let mut auth_retries = 0;
        let mut failures = 0;
        loop {
            let (mut headers, _, _) = self.base_headers().await.map_err(StreamRefused::Other)?;
            headers.insert(
                header::ACCEPT,
                HeaderValue::from_static("text/event-stream"),
            );
            if let Some(value) = last.and_then(|l| HeaderValue::from_str(l).ok()) {
                headers.insert(LAST_EVENT_ID_HEADER, value);
            }
            let sent = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let outcome = self
                .http
                .get(self.options.url.clone())
                .headers(headers)
                .send()
                .await;
            let response = match outcome {
                Ok(response) => response,
                Err(err) if failures < MAX_STREAM_RETRIES => {
                    failures += 1;
                    debug!(
                        "opening the stream failed, trying again: {}",
                        err_text(&err)
                    );
                    tokio::time::sleep(retry).await;
                    continue;
                }
                Err(err) => return Err(StreamRefused::Other(unreachable(&self.options.url, &err))),
            };
            let status = response.status();
            match status {
                s if s.is_success() && is_sse(&response) => return Ok(response),
                StatusCode::NOT_FOUND => return Err(StreamRefused::SessionGone),
                StatusCode::METHOD_NOT_ALLOWED => return Err(StreamRefused::NotAllowed),
                _ if self
                    .answer_challenge(&response, sent.as_deref(), &mut auth_retries)
                    .await
                    .map_err(StreamRefused::Other)? => {}
                s if (s.is_server_error() || s == StatusCode::TOO_MANY_REQUESTS)
                    && failures < MAX_STREAM_RETRIES =>
                {
                    failures += 1;
                    debug!("the stream was refused with HTTP {s}, trying again");
                    tokio::time::sleep(retry).await;
                }
                _ => return Err(StreamRefused::Other(self.http_error_text(&response))),
            }
        }
    }

    /// Opens the stream of a request after `last`.
    pub(super) async fn resume(
        &self,
        last: &str,
        retry: Duration,
    ) -> Result<reqwest::Response, Failure> {
        self.open_stream(Some(last), retry).await.map_err(|refused| match refused {
            StreamRefused::SessionGone => Failure(
                "the remote server's session ended (it restarted?) before it responded; the request may or may not have run".to_owned(),
            ),
            StreamRefused::NotAllowed => Failure(
                "the remote server closed the stream before responding and does not support resuming it".to_owned(),
            ),
            StreamRefused::Other(Failure(why)) => Failure(format!("resuming the remote server's stream failed: {why}")),
        })
    }

    /// The message for an HTTP error status of a GET: the status, and a help line for 401.
    fn http_error_text(&self, response: &reqwest::Response) -> Failure {
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED && self.options.auth.is_none() {
            return Failure(format!(
                "the remote server answered HTTP {status} (help: the server needs authorization: run `toolgate auth login {}`, or pass the credentials with `--header 'Authorization: Bearer ${{TOKEN}}'`)",
                redact(&self.options.url)
            ));
        }
        Failure(format!("the remote server answered HTTP {status}"))
    }

    /// Relays the events of one SSE response until it ends; returns the response to `key`
    /// when it came (not delivered).
    pub(super) async fn drain(
        &self,
        response: reqwest::Response,
        cursor: &mut Cursor,
        key: Option<&IdKey>,
        initial: bool,
    ) -> Result<Option<Bytes>, Failure> {
        let mut events = Events::of(response, Limit::PerEvent(self.options.max_message_bytes));
        self.drain_events(&mut events, cursor, key, initial).await
    }

    /// [`Inner::exchange`], boxed: re-initialization runs inside an exchange.
    fn exchange_boxed<'a>(
        &'a self,
        out: &'a Outgoing,
        capture: bool,
        initial: bool,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Answer, Fallback>> + Send + 'a>>
    {
        Box::pin(self.exchange(out, capture, initial))
    }

    /// Initializes a new session with the client's original parameters, after the server
    /// forgot the old one. Concurrent requests that hit the same expiry wait for one
    /// re-initialization.
    async fn reinitialize(&self, stale: u64) -> Result<(), Failure> {
        let _one = self.reinit.lock().await;
        {
            let session = self.lock();
            if session.generation != stale && !session.reinit_pending {
                return Ok(());
            }
        }
        let params = self.lock().init_params.clone().ok_or_else(|| {
            Failure(
                "the remote server's session expired and there is no initialize to replay"
                    .to_owned(),
            )
        })?;
        {
            // Until a re-initialization succeeds, every request tries one first (a failed
            // attempt must not leave requests going out without a session).
            let mut session = self.lock();
            session.id = None;
            session.reinit_pending = true;
            if let Some(listener) = session.listener.take() {
                listener.abort();
            }
        }
        let id = format!(
            "{}reinit-{}",
            crate::proxy::ORIGIN_ID_PREFIX,
            self.next_own_id.fetch_add(1, Ordering::Relaxed)
        );
        let request = build::request(&id, "initialize", Some(&params));
        let out = Outgoing::parse(Bytes::from(request))
            .ok_or_else(|| Failure("cannot build the initialize request".to_owned()))?;
        let answer = match self.exchange_boxed(&out, true, true).await {
            Ok(answer) => answer,
            Err(fallback) => {
                let Failure(why) = fallback.into_failure();
                return Err(Failure(format!(
                    "the remote server's session expired and initializing again failed: {why}"
                )));
            }
        };
        if let Answer::Captured(body) = &answer
            && jsonrpc_error_message(body).is_some()
        {
            return Err(Failure(
                "the remote server's session expired and it refused to initialize again".to_owned(),
            ));
        }
        // Initialized: the notification below (and every request) goes in this session.
        self.lock().reinit_pending = false;
        let initialized = build::notification("notifications/initialized", None);
        if let Some(note) = Outgoing::parse(Bytes::from(initialized))
            && let Err(fallback) = self.exchange_boxed(&note, false, false).await
        {
            let Failure(why) = fallback.into_failure();
            warn!("`notifications/initialized` could not be delivered to the remote server: {why}");
        }
        self.start_listener();
        info!("initialized a new session with the remote server");
        Ok(())
    }

    /// Starts the GET stream of server-initiated messages (once per session).
    fn start_listener(&self) {
        let mut session = self.lock();
        if session.listener.is_some() || session.id.is_none() && session.version.is_none() {
            return;
        }
        let Some(inner) = self.me.upgrade() else {
            return;
        };
        let task = tokio::spawn(async move { inner.listen().await });
        session.listener = Some(task.abort_handle());
    }

    async fn listen(&self) {
        let mut cursor = Cursor::default();
        let mut failures = 0u32;
        loop {
            let retry = cursor.retry.unwrap_or(DEFAULT_RETRY).min(MAX_RETRY);
            let response = match self.open_stream(cursor.last_id.as_deref(), retry).await {
                Ok(response) => response,
                Err(StreamRefused::NotAllowed) => {
                    debug!("the remote server has no listening stream (405)");
                    return;
                }
                Err(StreamRefused::SessionGone) => {
                    // The next request re-initializes, which opens a new listening stream.
                    debug!("the listening stream's session is gone");
                    return;
                }
                Err(StreamRefused::Other(Failure(why))) => {
                    warn!(
                        "the remote server refused the stream of its own messages (notifications, requests): {why}"
                    );
                    return;
                }
            };
            let before = cursor.events;
            if let Err(Failure(why)) = self.drain(response, &mut cursor, None, false).await {
                warn!("the listening stream ended: {why}");
            }
            failures = if cursor.events > before {
                0
            } else {
                failures + 1
            };
            if failures > MAX_RESUMES {
                warn!(
                    "the remote server keeps closing the stream of its own messages: not opened again"
                );
                return;
            }
            tokio::time::sleep(cursor.retry.unwrap_or(DEFAULT_RETRY).min(MAX_RETRY)).await;
        }
    }

    /// Ends the session: stops the listening stream, sends DELETE.
    async fn end_session(&self) {
        let id = {
            let mut session = self.lock();
            if let Some(listener) = session.listener.take() {
                listener.abort();
            }
            session.id.take()
        };
        let Some(id) = id else { return };
        // The headers carry the session's revision already.
        let Ok((headers, _, _)) = self.base_headers().await else {
            return;
        };
        let url = &self.options.url;
        let limit = Duration::from_secs(3);
        match handshake::end_session(&self.http, url, headers, id, None, limit).await {
            Ok(status) => debug!("ended the session: HTTP {status}"),
            Err(EndFailed::Request(err)) => {
                debug!("ending the session failed: {}", err_text(&err));
            }
            Err(EndFailed::TimedOut) => debug!("ending the session timed out"),
        }
    }
}

/// Why a GET stream could not be opened.
#[derive(Debug)]
pub(super) enum StreamRefused {
    /// 404: the session is gone.
    SessionGone,
    /// 405: the server offers no such stream.
    NotAllowed,
    /// Anything else, after the retries.
    Other(Failure),
}

/// An exchange failed, or (for `initialize` in `auto` mode) the server is a legacy one.
#[derive(Debug)]
enum Fallback {
    Failed(Failure),
    Legacy,
}

impl From<Failure> for Fallback {
    fn from(f: Failure) -> Self {
        Fallback::Failed(f)
    }
}

impl Fallback {
    fn into_failure(self) -> Failure {
        match self {
            Fallback::Failed(f) => f,
            Fallback::Legacy => Failure("the server does not take POSTs at this URL".to_owned()),
        }
    }
}

fn is_sse(response: &reqwest::Response) -> bool {
    content_type(response).is_some_and(|t| t.eq_ignore_ascii_case("text/event-stream"))
}

fn is_json(response: &reqwest::Response) -> bool {
    content_type(response).is_some_and(|t| t.eq_ignore_ascii_case("application/json"))
}

fn content_type(response: &reqwest::Response) -> Option<&str> {
    let value = response
        .headers()
        .get(header::CONTENT_TYPE)?
        .to_str()
        .ok()?;
    Some(value.split(';').next().unwrap_or(value).trim())
}

/// How a request refused with an HTTP error status is answered.
enum HttpError {
    /// With the server's JSON-RPC error, addressed to the request.
    Relay(Vec<u8>),
    /// With an error of toolgate's.
    Failed(Failure),
}

/// The JSON-RPC error in `body`, addressed to request `id`: the body itself when it already
/// is, else the same `error` member under that id (a server that could not read the
/// request answers with id `null`).
fn readdress_error(body: &[u8], id: &RawValue) -> Option<Vec<u8>> {
    #[derive(serde::Deserialize)]
    struct Body<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
        #[serde(borrow)]
        error: Option<&'a RawValue>,
    }
    let parsed: Body<'_> = serde_json::from_slice(body).ok()?;
    let error = parsed.error?;
    if parsed.id.map(RawValue::get) == Some(id.get()) {
        return Some(body.to_vec());
    }
    Some(
        format!(
            r#"{{"jsonrpc":"2.0","id":{},"error":{}}}"#,
            id.get(),
            error.get()
        )
        .into_bytes(),
    )
}

/// The `error.message` of a JSON-RPC error body.
fn jsonrpc_error_message(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Body {
        error: Option<Error>,
    }
    #[derive(serde::Deserialize)]
    struct Error {
        code: Option<i64>,
        message: Option<String>,
    }
    let Body { error: Some(e) } = serde_json::from_slice(body).ok()? else {
        return None;
    };
    Some(match (e.code, e.message) {
        (Some(code), Some(m)) => format!("{m} ({code})"),
        (None, Some(m)) => m,
        (Some(code), None) => format!("error {code}"),
        (None, None) => "an error".to_owned(),
    })
}

fn unreachable(url: &Url, err: &reqwest::Error) -> Failure {
    Failure(format!(
        "cannot reach the remote server `{}`: {}",
        redact(url),
        err_text(err)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonrpc_errors_are_read_from_bodies() {
        assert_eq!(
            jsonrpc_error_message(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32020,"message":"header mismatch"}}"#).as_deref(),
            Some("header mismatch (-32020)")
        );
        assert_eq!(jsonrpc_error_message(b"<html>"), None);
    }
}
