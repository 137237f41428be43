//! The legacy HTTP+SSE transport (revision 2024-11-05): a GET opens an event stream whose
//! first event (`endpoint`) names the URL to POST messages to; every message from the
//! server, responses included, comes over that one stream.
//!
//! `--transport sse` uses it from the start; `--transport auto` falls back to it when the
//! server refuses the `initialize` POST. The stream cannot be resumed: when it ends, the
//! session is over, the transport ends, and the relay answers every request still waiting
//! (as when a stdio server exits).

use std::sync::Arc;

use bytes::Bytes;
use reqwest::header::{self, HeaderValue};
use tokio::sync::mpsc;
use toolgate_mcp::IdKey;
use tracing::{debug, info, warn};
use url::Url;

use super::exchange::{Failure, Inner, Outgoing};
use super::http::err_text;
use super::http::{redact, same_origin};
use super::sse::{Cursor, Events, Limit};

/// Runs the legacy transport from the start (`--transport sse`).
pub(super) async fn run(inner: Arc<Inner>, input: mpsc::Receiver<Bytes>) {
    serve(inner, input, None).await;
}

/// Takes over after the server refused the client's `initialize` POST.
pub(super) async fn continue_with(
    inner: Arc<Inner>,
    input: mpsc::Receiver<Bytes>,
    initialize: Outgoing,
) {
    info!("the remote server does not take Streamable HTTP POSTs: trying the HTTP+SSE transport");
    serve(inner, input, Some(initialize)).await;
}

async fn serve(inner: Arc<Inner>, mut input: mpsc::Receiver<Bytes>, first: Option<Outgoing>) {
    let (endpoint, mut events) = match open(&inner).await {
        Ok(opened) => opened,
        Err(failure) => {
            // Nothing can be delivered: every request is answered with why.
            if let Some(out) = first {
                inner.fail(&out, &failure).await;
            }
            while let Some(frame) = input.recv().await {
                if let Some(out) = Outgoing::parse(frame) {
                    inner.fail(&out, &failure).await;
                }
            }
            return;
        }
    };
    debug!("HTTP+SSE endpoint: `{}`", redact(&endpoint));
    let reader_inner = Arc::clone(&inner);
    let mut reader = tokio::spawn(async move {
        let mut cursor = Cursor::default();
        match reader_inner
            .drain_events(&mut events, &mut cursor, None, false)
            .await
        {
            Ok(_) => info!("the remote server closed its event stream: the session is over"),
            Err(Failure(why)) => warn!("the remote server's event stream failed: {why}"),
        }
    });
    if let Some(out) = first {
        post(&inner, &endpoint, &out).await;
    }
    loop {
        tokio::select! {
            _ = &mut reader => return,
            frame = input.recv() => {
                let Some(frame) = frame else { break };
                if let Some(out) = Outgoing::parse(frame) {
                    post(&inner, &endpoint, &out).await;
                }
            }
        }
    }
    // The client is done: what is in flight may still be answered, within the grace.
    if tokio::time::timeout(inner.options.grace, &mut reader)
        .await
        .is_err()
    {
        reader.abort();
    }
}

/// Opens the event stream and reads the `endpoint` event.
async fn open(inner: &Inner) -> Result<(Url, Events), Failure> {
    let url = &inner.options.url;
    let mut auth_retries = 0;
    let response = loop {
        let (mut headers, _, _) = inner.base_headers().await?;
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        let sent = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let response = inner
            .http
            .get(url.clone())
            .headers(headers)
            .send()
            .await
            .map_err(|err| {
                Failure(format!(
                    "cannot reach the remote server `{}`: {}",
                    redact(url),
                    err_text(&err)
                ))
            })?;
        if inner
            .answer_challenge(&response, sent.as_deref(), &mut auth_retries)
            .await?
        {
            continue;
        }
        break response;
    };
    let status = response.status();
    let sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.trim_start().starts_with("text/event-stream"));
    if !status.is_success() || !sse {
        return Err(Failure(format!(
            "the remote server speaks neither Streamable HTTP nor HTTP+SSE at `{}` (the event stream GET got HTTP {status}{})",
            redact(url),
            if sse { "" } else { ", not an event stream" }
        )));
    }
    let mut events = Events::of(response, Limit::PerEvent(inner.options.max_message_bytes));
    loop {
        let event = match events.next().await? {
            None => {
                return Err(Failure(
                    "the remote server closed its event stream before naming its endpoint"
                        .to_owned(),
                ));
            }
            Some(Err(why)) => {
                return Err(Failure(format!(
                    "the remote server's event stream failed before naming its endpoint: {why}"
                )));
            }
            Some(Ok(event)) => event,
        };
        if event.event.as_deref() != Some("endpoint") {
            continue;
        }
        let data = event.data.unwrap_or_default();
        let endpoint = url.join(data.trim()).map_err(|_| {
            Failure(format!(
                "the remote server named an endpoint that is not a URL: `{}`",
                data.escape_debug()
            ))
        })?;
        if !same_origin(&endpoint, url) {
            return Err(Failure(format!(
                "the remote server named an endpoint on another origin (`{}`): refused",
                redact(&endpoint)
            )));
        }
        return Ok((endpoint, events));
    }
}

/// POSTs one message to the endpoint; a request the server refuses is answered here (its
/// response would otherwise never come), and so is one whose response has not come over
/// the event stream within `--request-timeout`.
async fn post(inner: &Arc<Inner>, endpoint: &Url, out: &Outgoing) {
    if let Some(key) = out.id.as_deref().and_then(IdKey::from_raw) {
        inner.awaited_lock().insert(key.clone());
        let (waiting, request, to) = (Arc::clone(inner), out.clone(), endpoint.clone());
        tokio::spawn(async move {
            let limit = waiting.options.request_timeout;
            tokio::time::sleep(limit).await;
            if waiting.awaited_lock().remove(&key) {
                let failure = Failure(format!(
                    "no response from the remote server within {}s (help: raise `--request-timeout`)",
                    limit.as_secs()
                ));
                waiting.fail(&request, &failure).await;
                if let Some(cancel) = request.cancellation("toolgate: no response in time") {
                    send(&waiting, &to, &cancel).await;
                }
            }
        });
    }
    send(inner, endpoint, out).await;
}

async fn send(inner: &Inner, endpoint: &Url, out: &Outgoing) {
    let result = async {
        let (mut headers, _, _) = inner.base_headers().await?;
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let response = inner
            .http
            .post(endpoint.clone())
            .headers(headers)
            .body(out.body.clone())
            .send()
            .await
            .map_err(|err| {
                Failure(format!(
                    "cannot reach the remote server: {}",
                    err_text(&err)
                ))
            })?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(Failure(format!(
                "the remote server refused the message: HTTP {status}"
            )))
        }
    }
    .await;
    if let Err(failure) = result {
        let key = out.id.as_deref().and_then(IdKey::from_raw);
        if key.is_none_or(|key| inner.awaited_lock().remove(&key)) {
            inner.fail(out, &failure).await;
        }
    }
}
