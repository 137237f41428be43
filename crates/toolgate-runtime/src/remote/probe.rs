//! `toolgate doctor`'s look at a remote MCP server: can it be reached, which transport does
//! it speak, which protocol revision, and does it want authorization. Bounded in time; a
//! session the probe opens is closed again (`DELETE`); no header value (token) is ever part
//! of what it reports.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{self, HeaderMap};
use serde_json::Value;
use toolgate_mcp::protocol;
use url::Url;

use super::handshake::{
    self, Initialized, content_type, describe, initialize_answer, initialize_request, is_message,
    next_event,
};
use super::sse::{Events, Limit};

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

fn init_id() -> Value {
    Value::from(INIT_ID)
}

fn initialize_body() -> String {
    initialize_request(&init_id(), "toolgate-doctor", REVISION)
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

/// `Ok(Ok(report))`: a Streamable HTTP server (or one that wants authorization first);
/// `Ok(Err(status))`: the POST was refused in a way that says "not here" (400, 404, 405);
/// `Err`: unreachable or broken.
async fn streamable(
    client: &reqwest::Client,
    target: &Target,
) -> Result<Result<Report, StatusCode>, String> {
    let response = handshake::post_initialize(
        client,
        &target.url,
        target.headers.clone(),
        initialize_body(),
        None,
    )
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
    let session = handshake::session_id(&response);
    let result = handshake::read_initialize_answer(response, &init_id(), MAX_BODY).await;
    if let Some(session) = session {
        // Failing to end it is not worth reporting: the server expires idle sessions.
        let revision = result.as_ref().ok().and_then(|r| r.protocol.as_deref());
        let _ = handshake::end_session(
            client,
            &target.url,
            target.headers.clone(),
            session,
            revision,
            DELETE_TIMEOUT,
        )
        .await;
    }
    let Initialized { protocol, server } = result?;
    Ok(Ok(Report {
        transport: Some("Streamable HTTP"),
        protocol,
        server,
        auth: answered(target),
    }))
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
    let mut events = Events::of(response, Limit::Total(MAX_BODY));
    let endpoint = loop {
        match next_event(&mut events).await? {
            None => {
                return Err(neither(
                    "the event stream closed without an `endpoint` event".to_owned(),
                ));
            }
            Some(event) if event.event.as_deref() == Some("endpoint") => {
                break event.data.unwrap_or_default();
            }
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
        match next_event(&mut events).await? {
            None => {
                return Err("the event stream closed before the answer to `initialize`".to_owned());
            }
            Some(event) if is_message(&event) => {
                let data = event.data.unwrap_or_default();
                if let Some(Initialized { protocol, server }) =
                    initialize_answer(&data, &init_id())?
                {
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
