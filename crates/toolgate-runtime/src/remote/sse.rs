//! Reading `text/event-stream` bodies: one parser (the `sse-stream` crate) under a byte
//! bound, for the transport and for doctor's probe alike.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt as _;

use super::http::err_text;

/// How many bytes a stream may send.
#[derive(Debug, Clone, Copy)]
pub(super) enum Limit {
    /// At most this many bytes per event (plus 4 KiB of framing): the transport, whose
    /// streams may run for as long as the session.
    PerEvent(usize),
    /// At most this many bytes in all: a probe, which wants one answer.
    Total(usize),
}

/// The events of one SSE response, with a count of the bytes read (since the last event,
/// or in all).
pub(super) struct Events {
    stream: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Send>,
    >,
    fed: Arc<AtomicU64>,
    limit: Limit,
}

/// The stream sent more than its [`Limit`] allows (the limit's bytes).
#[derive(Debug, Clone, Copy)]
pub(super) struct OverLimit(pub(super) usize);

/// Why a stream ended early: its body broke off, or it was not valid SSE.
#[derive(Debug)]
pub(super) struct Broken(sse_stream::Error);

impl Broken {
    /// The HTTP error that broke the body off, when that is what happened.
    pub(super) fn http(&self) -> Option<&reqwest::Error> {
        match &self.0 {
            sse_stream::Error::Body(err) => match err.downcast_ref::<BodyError>() {
                Some(BodyError::Http(err)) => Some(err),
                _ => None,
            },
            _ => None,
        }
    }
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// An error of the bytes under the parser.
#[derive(Debug)]
enum BodyError {
    Http(reqwest::Error),
    OverLimit,
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // Without the URL, which may carry a query secret.
            BodyError::Http(err) => f.write_str(&err_text(err)),
            BodyError::OverLimit => f.write_str("an event over the size limit"),
        }
    }
}

impl std::error::Error for BodyError {}

impl Events {
    /// The events of `response`; more bytes than `limit` allows end the stream before they
    /// are buffered.
    pub(super) fn of(response: reqwest::Response, limit: Limit) -> Events {
        let fed = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&fed);
        let most = match limit {
            Limit::PerEvent(max) => max as u64 + 4096,
            Limit::Total(max) => max as u64,
        };
        let bytes = response.bytes_stream().map(move |chunk| match chunk {
            Ok(chunk) => {
                let total =
                    counter.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64;
                if total > most {
                    counter.store(u64::MAX, Ordering::Relaxed);
                    Err(BodyError::OverLimit)
                } else {
                    Ok(chunk)
                }
            }
            Err(err) => Err(BodyError::Http(err)),
        });
        Events {
            stream: Box::pin(sse_stream::SseByteStream::new(bytes)),
            fed,
            limit,
        }
    }

    /// The next event; `Some(Err(_))` when the stream broke, `None` at its end, `Err` when
    /// it outgrew the limit.
    pub(super) async fn next(
        &mut self,
    ) -> Result<Option<Result<sse_stream::Sse, Broken>>, OverLimit> {
        let next = self.stream.next().await;
        let fed = match self.limit {
            Limit::PerEvent(_) => self.fed.swap(0, Ordering::Relaxed),
            Limit::Total(_) => self.fed.load(Ordering::Relaxed),
        };
        if fed == u64::MAX {
            let (Limit::PerEvent(max) | Limit::Total(max)) = self.limit;
            return Err(OverLimit(max));
        }
        Ok(next.map(|event| event.map_err(Broken)))
    }
}

/// Where an SSE stream stands: what resuming it needs.
#[derive(Debug, Default)]
pub(super) struct Cursor {
    pub(super) last_id: Option<String>,
    pub(super) retry: Option<Duration>,
    pub(super) events: u64,
    pub(super) ended: Option<String>,
}

impl Cursor {
    /// Why the stream ended, as ` (why)`, or nothing.
    pub(super) fn why(&self) -> String {
        self.ended
            .as_deref()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default()
    }
}
