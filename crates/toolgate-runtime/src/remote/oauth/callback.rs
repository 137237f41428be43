//! The redirect target of the authorization flow: a listener on 127.0.0.1 that waits for
//! exactly one authorization response carrying the expected `state`. A response with
//! another `state` (or none) is answered with an error page and the wait goes on; a valid
//! `error=` response ends it with the server's error.

use std::time::Duration;

use anyhow::Context as _;
use subtle::ConstantTimeEq as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// The path of the redirect URI.
pub const CALLBACK_PATH: &str = "/callback";

/// How long one connection may take to send its request head.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest request head read.
const MAX_HEAD: usize = 16 * 1024;

/// What a valid authorization response carried.
#[derive(Clone, PartialEq, Eq)]
pub struct Response {
    /// The authorization code.
    pub code: String,
    /// The `iss` parameter (RFC 9207), if sent.
    pub iss: Option<String>,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("code", &"<redacted>")
            .field("iss", &self.iss)
            .finish()
    }
}

/// The authorization server refused (`error=` with the right `state`).
#[derive(Debug, thiserror::Error)]
#[error("the authorization server refused the authorization: `{error}`{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
pub struct Refused {
    /// The OAuth error code.
    pub error: String,
    /// Its description, if any (control characters removed, shortened).
    pub description: Option<String>,
}

/// A bound callback listener.
#[derive(Debug)]
pub struct Listener {
    listener: TcpListener,
    port: u16,
}

impl Listener {
    /// Binds 127.0.0.1:`port` (0: any free port).
    pub async fn bind(port: u16) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| {
                format!("cannot listen on 127.0.0.1:{port} for the authorization callback\n  help: choose another `--callback-port`")
            })?;
        let port = listener.local_addr()?.port();
        Ok(Listener { listener, port })
    }

    /// The port it listens on.
    #[cfg(test)]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The redirect URI to register and send.
    pub fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}{CALLBACK_PATH}", self.port)
    }

    /// Waits for the authorization response with `state`. Not bounded itself: the caller
    /// bounds the whole flow (`--auth-timeout`).
    pub async fn wait(&self, state: &str) -> anyhow::Result<Response> {
        loop {
            let (stream, _) = self
                .listener
                .accept()
                .await
                .context("the authorization callback listener failed")?;
            match tokio::time::timeout(REQUEST_TIMEOUT, handle(stream, state)).await {
                Ok(Ok(Some(outcome))) => return outcome,
                Ok(Ok(None)) | Err(_) => {}
                Ok(Err(e)) => tracing::debug!("authorization callback connection: {e:#}"),
            }
        }
    }
}

type Outcome = anyhow::Result<Response>;

/// Reads one request and answers it; `Some` ends the wait.
async fn handle(mut stream: TcpStream, state: &str) -> anyhow::Result<Option<Outcome>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(buf.get(..n).unwrap_or_default());
        if head.len() > MAX_HEAD {
            respond(&mut stream, 431, "Request too large.").await?;
            return Ok(None);
        }
    }
    let text = String::from_utf8_lossy(&head);
    let line = text.lines().next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (method, target) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if method != "GET" || path != CALLBACK_PATH {
        respond(&mut stream, 404, "Not found.").await?;
        return Ok(None);
    }
    let mut got_state = None;
    let mut code = None;
    let mut error = None;
    let mut description = None;
    let mut iss = None;
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        let slot = match k.as_ref() {
            "state" => &mut got_state,
            "code" => &mut code,
            "error" => &mut error,
            "error_description" => &mut description,
            "iss" => &mut iss,
            _ => continue,
        };
        if slot.is_some() {
            // A parameter twice (RFC 6749 §3.1: MUST NOT): not a response we accept.
            respond(
                &mut stream,
                400,
                "Invalid authorization response (a parameter is repeated).",
            )
            .await?;
            return Ok(None);
        }
        *slot = Some(v.into_owned());
    }
    let state_ok = got_state.as_deref().is_some_and(|s| {
        s.len() == state.len() && bool::from(s.as_bytes().ct_eq(state.as_bytes()))
    });
    if !state_ok {
        tracing::warn!(
            "an authorization response with a wrong `state` reached the callback; ignored (still waiting)"
        );
        respond(
            &mut stream,
            400,
            "This authorization response does not belong to the login toolgate is waiting for (its state does not match). It was ignored.",
        )
        .await?;
        return Ok(None);
    }
    if let Some(error) = error {
        respond(
            &mut stream,
            200,
            "The authorization was refused. You can close this tab and return to your terminal.",
        )
        .await?;
        return Ok(Some(Err(Refused {
            error: clean(&error),
            description: description.as_deref().map(clean),
        }
        .into())));
    }
    let Some(code) = code else {
        respond(
            &mut stream,
            400,
            "Invalid authorization response (no code).",
        )
        .await?;
        return Ok(None);
    };
    respond(
        &mut stream,
        200,
        "toolgate is authorized. You can close this tab and return to your terminal.",
    )
    .await?;
    Ok(Some(Ok(Response { code, iss })))
}

/// A value from the network, safe to print: printable ASCII, at most 200 characters.
pub fn clean(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(200)
        .collect()
}

async fn respond(stream: &mut TcpStream, status: u16, message: &str) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Error",
    };
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>toolgate</title></head>\
         <body><p>{message}</p></body></html>\n"
    );
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n\
         Content-Length: {}\r\nCache-Control: no-store\r\nReferrer-Policy: no-referrer\r\n\
         Content-Security-Policy: default-src 'none'\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests {
    use super::*;

    async fn get(port: u16, target: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn a_wrong_state_does_not_end_the_wait() {
        let listener = Listener::bind(0).await.unwrap();
        let port = listener.port();
        let waiter = tokio::spawn(async move { listener.wait("expected-state").await });
        let other = get(port, "/callback?code=evil&state=forged").await;
        assert!(other.starts_with("HTTP/1.1 400"), "{other}");
        let missing = get(port, "/callback?code=evil").await;
        assert!(missing.starts_with("HTTP/1.1 400"), "{missing}");
        let error_forged = get(port, "/callback?error=access_denied&state=forged").await;
        assert!(error_forged.starts_with("HTTP/1.1 400"), "{error_forged}");
        assert!(get(port, "/favicon.ico").await.starts_with("HTTP/1.1 404"));
        assert!(!waiter.is_finished());
        let ok = get(
            port,
            "/callback?code=the-code&state=expected-state&iss=https%3A%2F%2Fas",
        )
        .await;
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        let got = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(got.code, "the-code");
        assert_eq!(got.iss.as_deref(), Some("https://as"));
        assert!(!format!("{got:?}").contains("the-code"));
    }

    #[tokio::test]
    async fn an_error_response_ends_the_wait() {
        let listener = Listener::bind(0).await.unwrap();
        let port = listener.port();
        let waiter = tokio::spawn(async move { listener.wait("s").await });
        get(
            port,
            "/callback?error=access_denied&error_description=user%20said%20no%1b&state=s",
        )
        .await;
        let err = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .unwrap()
            .unwrap()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the authorization server refused the authorization: `access_denied` (user said no)"
        );
    }
}
