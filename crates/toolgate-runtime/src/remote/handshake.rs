//! toolgate's own MCP-over-HTTP handshake, for the commands that talk to a remote server
//! themselves (doctor's probe, `auth login`, `auth status --check`): toolgate's
//! `initialize` request, its POST, reading the answer (a JSON body or an SSE stream, under a
//! byte bound), the session id and negotiated revision, and ending the session with
//! `DELETE`. The transport relays the client's own `initialize` and streams its answer, so
//! it uses only the pieces: the POST's headers, the session id, the revision, the `DELETE`.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{self, HeaderMap, HeaderValue};
use serde_json::Value;
use toolgate_mcp::protocol::{PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER};
use url::Url;

use super::sse::{Events, Limit, OverLimit};

/// The `Accept` of a POST: the answer may be a JSON body or an SSE stream.
pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// toolgate's `initialize` request with id `id`, as `client` (its `clientInfo.name`) asking
/// for `revision`, with no capabilities: the body of a POST.
pub fn initialize_request(id: &Value, client: &str, revision: &str) -> String {
    initialize_message(id, client, revision).to_string()
}

/// [`initialize_request`] as JSON (the stdio probes send it too).
pub fn initialize_message(id: &Value, client: &str, revision: &str) -> Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": revision,
            "capabilities": {},
            "clientInfo": {"name": client, "version": env!("CARGO_PKG_VERSION")}
        }
    })
}

/// Sets the headers of a POST of one JSON-RPC message: a JSON body, and a JSON or SSE
/// answer taken.
pub(super) fn set_post_headers(headers: &mut HeaderMap) {
    headers.insert(header::ACCEPT, HeaderValue::from_static(ACCEPT_BOTH));
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
}

/// POSTs `body` (an `initialize`) to `url` with `headers`, bounded by `timeout` when given.
pub async fn post_initialize(
    http: &reqwest::Client,
    url: &Url,
    mut headers: HeaderMap,
    body: String,
    timeout: Option<Duration>,
) -> reqwest::Result<reqwest::Response> {
    set_post_headers(&mut headers);
    let mut request = http.post(url.clone()).headers(headers).body(body);
    if let Some(timeout) = timeout {
        request = request.timeout(timeout);
    }
    request.send().await
}

/// The `Mcp-Session-Id` the server gave with its answer.
pub fn session_id(response: &reqwest::Response) -> Option<HeaderValue> {
    response.headers().get(SESSION_ID_HEADER).cloned()
}

/// The revision an `initialize` response (`body`) negotiated.
pub fn negotiated_revision(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Init {
        result: Option<InitResult>,
    }
    #[derive(serde::Deserialize)]
    struct InitResult {
        #[serde(rename = "protocolVersion")]
        protocol_version: Option<String>,
    }
    match serde_json::from_slice::<Init>(body) {
        Ok(Init {
            result: Some(InitResult {
                protocol_version: Some(v),
            }),
        }) => Some(v),
        _ => None,
    }
}

/// What an `initialize` result says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Initialized {
    /// The protocol revision (`protocolVersion`).
    pub protocol: Option<String>,
    /// The server's name (`serverInfo.name`).
    pub server: Option<String>,
}

/// The `initialize` response to request `id` in `text`, when `text` is that response; an
/// error response is an `Err` (with the server's message, shortened).
pub fn initialize_answer(text: &str, id: &Value) -> Result<Option<Initialized>, String> {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return Ok(None);
    };
    if value.get("id") != Some(id) {
        return Ok(None);
    }
    if let Some(error) = value.get("error") {
        let message = error
            .get("message")
            .and_then(|m| m.as_str())
            .unwrap_or("no message");
        return Err(format!(
            "the server refused `initialize`: {}",
            message.chars().take(200).collect::<String>()
        ));
    }
    let result = value.get("result");
    let text_at = |pointer: &str| {
        result
            .and_then(|r| r.pointer(pointer))
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    Ok(Some(Initialized {
        protocol: text_at("/protocolVersion"),
        server: text_at("/serverInfo/name"),
    }))
}

/// Reads the answer to toolgate's `initialize` (request `id`) from a successful POST: a JSON
/// body or an SSE stream, at most `max` bytes of either.
pub async fn read_initialize_answer(
    response: reqwest::Response,
    id: &Value,
    max: usize,
) -> Result<Initialized, String> {
    if content_type(&response).starts_with("text/event-stream") {
        let mut events = Events::of(response, Limit::Total(max));
        loop {
            match next_event(&mut events).await? {
                None => {
                    return Err(
                        "the server closed its event stream before answering `initialize`"
                            .to_owned(),
                    );
                }
                Some(event) if is_message(&event) => {
                    if let Some(result) = initialize_answer(&event.data.unwrap_or_default(), id)? {
                        return Ok(result);
                    }
                }
                Some(_) => {}
            }
        }
    }
    let body = read_body(response, max).await?;
    let text = String::from_utf8_lossy(&body);
    initialize_answer(&text, id)?
        .ok_or_else(|| "the answer to `initialize` is not its JSON-RPC response".to_owned())
}

/// Whether an event carries a message (no type, or `message`).
pub(super) fn is_message(event: &sse_stream::Sse) -> bool {
    event
        .event
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == "message")
}

/// The next event of a stream opened with a [`Limit::Total`]; `None` at its end.
pub(super) async fn next_event(events: &mut Events) -> Result<Option<sse_stream::Sse>, String> {
    match events.next().await {
        Ok(None) => Ok(None),
        Ok(Some(Ok(event))) => Ok(Some(event)),
        Ok(Some(Err(broken))) => Err(match broken.http() {
            Some(err) => describe(err),
            None => format!("the event stream is not valid SSE: {broken}"),
        }),
        Err(OverLimit(max)) => Err(format!(
            "the event stream sent more than {} without the answer",
            size(max)
        )),
    }
}

async fn read_body(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| describe(&e))? {
        body.extend_from_slice(&chunk);
        if body.len() > max {
            return Err(format!(
                "the answer to `initialize` is larger than {}",
                size(max)
            ));
        }
    }
    Ok(body)
}

fn size(bytes: usize) -> String {
    if bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else {
        format!("{bytes} bytes")
    }
}

/// The media type of an answer, lower case (empty when there is none).
pub(super) fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// Why a request failed, without the URL's query or any header: the innermost cause
/// (`connection refused`, a DNS or TLS error).
pub fn describe(error: &reqwest::Error) -> String {
    let mut cause = None;
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        cause = Some(e.to_string());
        source = e.source();
    }
    let cause = cause.map(|c| format!(": {c}")).unwrap_or_default();
    if error.is_connect() {
        format!("unreachable (cannot connect{cause})")
    } else if error.is_timeout() {
        format!("no answer in time{cause}")
    } else {
        format!("the request failed{cause}")
    }
}

/// Why ending a session failed.
#[derive(Debug)]
pub enum EndFailed {
    /// The `DELETE` could not be sent.
    Request(reqwest::Error),
    /// No answer within the time given.
    TimedOut,
}

/// Ends session `session` at `url` with `DELETE`, with `headers` (credentials) and, when
/// known, the session's `revision`, waiting at most `limit`. Failing is seldom worth
/// reporting: servers expire idle sessions.
pub async fn end_session(
    http: &reqwest::Client,
    url: &Url,
    mut headers: HeaderMap,
    session: HeaderValue,
    revision: Option<&str>,
    limit: Duration,
) -> Result<StatusCode, EndFailed> {
    headers.insert(SESSION_ID_HEADER, session);
    if let Some(value) = revision.and_then(|r| HeaderValue::from_str(r).ok()) {
        headers.insert(PROTOCOL_VERSION_HEADER, value);
    }
    let delete = http.delete(url.clone()).headers(headers).send();
    match tokio::time::timeout(limit, delete).await {
        Ok(Ok(response)) => Ok(response.status()),
        Ok(Err(err)) => Err(EndFailed::Request(err)),
        Err(_) => Err(EndFailed::TimedOut),
    }
}
