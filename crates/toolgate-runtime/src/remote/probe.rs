//! `toolgate doctor`'s look at a remote MCP server: can it be reached, which transport does
//! it speak, which protocol revision, and does it want authorization. Bounded in time; a
//! session the probe opens is closed again (`DELETE`); no header value (token) is ever part
//! of what it reports.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{self, HeaderMap, HeaderValue};
use toolgate_mcp::protocol;
use url::Url;

/// The transports the probe may try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP, then the legacy HTTP+SSE transport.
    Auto,
    /// Streamable HTTP only.
    StreamableHttp,
    /// The legacy HTTP+SSE transport only.
    Sse,
}

/// What to probe.
#[derive(Debug, Clone)]
pub struct Target {
    /// The server's URL.
    pub url: Url,
    /// Which transports to try.
    pub transport: Transport,
    /// Headers to send (the entry's, resolved); marked sensitive, never reported.
    pub headers: HeaderMap,
    /// The whole probe's time limit.
    pub timeout: Duration,
    /// Plain http to a host that is not loopback is allowed (`mcp-remote --allow-http`).
    pub allow_http: bool,
}

/// The authorization state the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// The server answered without any `Authorization` header.
    NotRequired,
    /// The server answered the `Authorization` header the entry sends.
    Authorized,
    /// 401: the server wants a token (`challenge`: it sent `WWW-Authenticate`).
    NeedsAuthorization {
        /// Whether a `WWW-Authenticate` header came with the 401.
        challenge: bool,
        /// Whether the probe sent an `Authorization` header (then it was refused).
        sent: bool,
    },
    /// 403: the token is not good enough.
    Forbidden,
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// `Streamable HTTP` or `legacy HTTP+SSE`, when known.
    pub transport: Option<&'static str>,
    /// The protocol revision of the `initialize` result.
    pub protocol: Option<String>,
    /// `serverInfo.name` of the `initialize` result.
    pub server: Option<String>,
    /// The authorization state.
    pub auth: Auth,
}

/// The id of the probe's `initialize`.
const INIT_ID: &str = "toolgate-doctor";
/// The revision the probe asks for (a server that does not support it answers with its own):
/// the newest with sessions, since the probe begins with `initialize`.
const REVISION: &str = protocol::V2025_11_25;
/// The most the probe reads of one answer.
const MAX_BODY: usize = 4 * 1024 * 1024;
/// How long the `DELETE` of the probe's session may take.
const DELETE_TIMEOUT: Duration = Duration::from_secs(2);

fn initialize_body() -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": INIT_ID,
        "method": "initialize",
        "params": {
            "protocolVersion": REVISION,
            "capabilities": {},
            "clientInfo": {"name": "toolgate-doctor", "version": env!("CARGO_PKG_VERSION")}
        }
    })
    .to_string()
}

/// Probes `target` with `client`. `Err` says why the server could not be used (unreachable,
/// not an MCP endpoint, no answer in time); it never contains a header value.
pub async fn probe(client: &reqwest::Client, target: &Target) -> Result<Report, String> {
    super::http::check_url(&target.url, target.allow_http, "server URL")
        .map_err(|e| format!("{e:#}"))?;
    match tokio::time::timeout(target.timeout, run(client, target)).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "no answer within {} s",
            target.timeout.as_secs_f32()
        )),
    }
}

async fn run(client: &reqwest::Client, target: &Target) -> Result<Report, String> {
    let mut refused_post = None;
    if target.transport != Transport::Sse {
        match streamable(client, target).await? {
            Ok(report) => return Ok(report),
            Err(status) if target.transport == Transport::Auto => refused_post = Some(status),
            Err(status) => {
                return Err(format!(
                    "POST `initialize` was answered with HTTP {status}: not a Streamable HTTP endpoint"
                ));
            }
        }
    }
    legacy_sse(client, target, refused_post).await
}

fn sent_authorization(target: &Target) -> bool {
    target.headers.contains_key(header::AUTHORIZATION)
}

fn refused(status: StatusCode, response: &reqwest::Response, target: &Target) -> Option<Auth> {
    match status {
        StatusCode::UNAUTHORIZED => Some(Auth::NeedsAuthorization {
            challenge: response.headers().contains_key(header::WWW_AUTHENTICATE),
            sent: sent_authorization(target),
        }),
        StatusCode::FORBIDDEN => Some(Auth::Forbidden),
        _ => None,
    }
}

fn answered(target: &Target) -> Auth {
    if sent_authorization(target) {
        Auth::Authorized
    } else {
        Auth::NotRequired
    }
}

/// Why a request failed, without the URL's query or any header: the innermost cause
/// (`connection refused`, a DNS or TLS error).
fn describe(error: &reqwest::Error) -> String {
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

/// `Ok(Ok(report))`: a Streamable HTTP server (or one that wants authorization first);
/// `Ok(Err(status))`: the POST was refused in a way that says "not here" (400, 404, 405);
/// `Err`: unreachable or broken.
async fn streamable(
    client: &reqwest::Client,
    target: &Target,
) -> Result<Result<Report, StatusCode>, String> {
    let response = client
        .post(target.url.clone())
        .headers(target.headers.clone())
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::CONTENT_TYPE, "application/json")
        .body(initialize_body())
        .send()
        .await
        .map_err(|e| describe(&e))?;
    let status = response.status();
    if let Some(auth) = refused(status, &response, target) {
        return Ok(Ok(Report {
            transport: None,
            protocol: None,
            server: None,
            auth,
        }));
    }
    if matches!(
        status,
        StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED
    ) {
        return Ok(Err(status));
    }
    if !status.is_success() {
        return Err(format!("POST `initialize` was answered with HTTP {status}"));
    }
    let session = response.headers().get(protocol::SESSION_ID_HEADER).cloned();
    let is_sse = content_type(&response).starts_with("text/event-stream");
    let result = if is_sse {
        let mut events = SseReader::new(response);
        loop {
            match events.next().await? {
                None => {
                    break Err(
                        "the server closed its event stream before answering `initialize`"
                            .to_owned(),
                    );
                }
                Some(event) if event.name == "message" || event.name.is_empty() => {
                    if let Some(result) = initialize_result(&event.data)? {
                        break Ok(result);
                    }
                }
                Some(_) => {}
            }
        }
    } else {
        let body = read_body(response).await?;
        let text = String::from_utf8_lossy(&body);
        initialize_result(&text)?
            .ok_or_else(|| "the answer to `initialize` is not its JSON-RPC response".to_owned())
    };
    if let Some(session) = session {
        close_session(client, target, session, result.as_ref().ok()).await;
    }
    let (protocol, server) = result?;
    Ok(Ok(Report {
        transport: Some("Streamable HTTP"),
        protocol,
        server,
        auth: answered(target),
    }))
}

/// Ends the session the probe opened. Failing to is not worth reporting: the server
/// expires idle sessions.
async fn close_session(
    client: &reqwest::Client,
    target: &Target,
    session: HeaderValue,
    result: Option<&Initialized>,
) {
    let mut request = client
        .delete(target.url.clone())
        .headers(target.headers.clone())
        .header(protocol::SESSION_ID_HEADER, session)
        .timeout(DELETE_TIMEOUT);
    if let Some((Some(protocol), _)) = result
        && let Ok(value) = HeaderValue::from_str(protocol)
    {
        request = request.header(protocol::PROTOCOL_VERSION_HEADER, value);
    }
    let _ = request.send().await;
}

async fn legacy_sse(
    client: &reqwest::Client,
    target: &Target,
    refused_post: Option<StatusCode>,
) -> Result<Report, String> {
    let response = client
        .get(target.url.clone())
        .headers(target.headers.clone())
        .header(header::ACCEPT, "text/event-stream")
        .send()
        .await
        .map_err(|e| describe(&e))?;
    let status = response.status();
    if let Some(auth) = refused(status, &response, target) {
        return Ok(Report {
            transport: None,
            protocol: None,
            server: None,
            auth,
        });
    }
    let neither = |what: String| match refused_post {
        Some(post) => format!(
            "neither Streamable HTTP (POST answered HTTP {post}) nor legacy HTTP+SSE ({what})"
        ),
        None => format!("not a legacy HTTP+SSE endpoint ({what})"),
    };
    if !status.is_success() {
        return Err(neither(format!("GET answered HTTP {status}")));
    }
    if !content_type(&response).starts_with("text/event-stream") {
        return Err(neither("GET did not open an event stream".to_owned()));
    }
    let mut events = SseReader::new(response);
    let endpoint = loop {
        match events.next().await? {
            None => {
                return Err(neither(
                    "the event stream closed without an `endpoint` event".to_owned(),
                ));
            }
            Some(event) if event.name == "endpoint" => break event.data,
            Some(_) => {}
        }
    };
    let endpoint = target
        .url
        .join(endpoint.trim())
        .map_err(|_| "the `endpoint` event does not hold a URL".to_owned())?;
    let mut report = Report {
        transport: Some("legacy HTTP+SSE"),
        protocol: None,
        server: None,
        auth: answered(target),
    };
    if !super::http::same_origin(&endpoint, &target.url) {
        // The headers (a token) are not sent to another origin.
        return Ok(report);
    }
    let posted = client
        .post(endpoint)
        .headers(target.headers.clone())
        .header(header::CONTENT_TYPE, "application/json")
        .body(initialize_body())
        .send()
        .await
        .map_err(|e| describe(&e))?;
    if !posted.status().is_success() {
        return Err(format!(
            "the `endpoint` answered `initialize` with HTTP {}",
            posted.status()
        ));
    }
    loop {
        match events.next().await? {
            None => {
                return Err("the event stream closed before the answer to `initialize`".to_owned());
            }
            Some(event) if event.name == "message" || event.name.is_empty() => {
                if let Some((protocol, server)) = initialize_result(&event.data)? {
                    report.protocol = protocol;
                    report.server = server;
                    // Dropping the stream ends the session.
                    return Ok(report);
                }
            }
            Some(_) => {}
        }
    }
}

fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

async fn read_body(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| describe(&e))? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_BODY {
            return Err("the answer to `initialize` is larger than 4 MiB".to_owned());
        }
    }
    Ok(body)
}

/// The protocol revision and the server's name, from an `initialize` result.
type Initialized = (Option<String>, Option<String>);

/// The protocol revision and server name of the `initialize` response in `text`, when
/// `text` is that response; an error response is an `Err`.
fn initialize_result(text: &str) -> Result<Option<Initialized>, String> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return Ok(None);
    };
    if value.get("id").and_then(|i| i.as_str()) != Some(INIT_ID) {
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
    Ok(Some((
        text_at("/protocolVersion"),
        text_at("/serverInfo/name"),
    )))
}

/// One server-sent event.
#[derive(Debug, Default)]
struct Event {
    name: String,
    data: String,
}

/// A bounded reader of a `text/event-stream` body.
struct SseReader {
    response: reqwest::Response,
    buffer: Vec<u8>,
    read: usize,
    done: bool,
}

impl SseReader {
    fn new(response: reqwest::Response) -> Self {
        SseReader {
            response,
            buffer: Vec::new(),
            read: 0,
            done: false,
        }
    }

    /// The next line, without its line ending; `None` at the end of the stream.
    async fn line(&mut self) -> Result<Option<String>, String> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(Some(String::from_utf8_lossy(&line).into_owned()));
            }
            if self.done {
                if self.buffer.is_empty() {
                    return Ok(None);
                }
                let rest = std::mem::take(&mut self.buffer);
                return Ok(Some(String::from_utf8_lossy(&rest).into_owned()));
            }
            match self.response.chunk().await.map_err(|e| describe(&e))? {
                Some(chunk) => {
                    self.read += chunk.len();
                    if self.read > MAX_BODY {
                        return Err(
                            "the event stream sent more than 4 MiB without the answer".to_owned()
                        );
                    }
                    self.buffer.extend_from_slice(&chunk);
                }
                None => self.done = true,
            }
        }
    }

    /// The next event; `None` at the end of the stream.
    async fn next(&mut self) -> Result<Option<Event>, String> {
        let mut event = Event::default();
        let mut any = false;
        while let Some(line) = self.line().await? {
            if line.is_empty() {
                if any {
                    return Ok(Some(event));
                }
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line.as_str(), ""),
            };
            match field {
                "event" => {
                    event.name = value.to_owned();
                    any = true;
                }
                "data" => {
                    if !event.data.is_empty() {
                        event.data.push('\n');
                    }
                    event.data.push_str(value);
                    any = true;
                }
                _ => {}
            }
        }
        Ok(any.then_some(event))
    }
}
