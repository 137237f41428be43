//! The seam between the transport and OAuth: the transport asks for the `Authorization`
//! header of each request and reports the server's challenges; the implementation
//! (`remote::oauth`) finds, refreshes and stores tokens.

use std::future::Future;
use std::pin::Pin;

/// A boxed future, so the trait stays object-safe.
pub type AuthFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, AuthError>> + Send + 'a>>;

/// Supplies credentials for requests to one MCP server.
pub trait Authorizer: Send + Sync + std::fmt::Debug {
    /// The `Authorization` header value for the next request (`Bearer …`), refreshed ahead
    /// of its expiry; `None` when no credentials exist yet (the request goes without, and a
    /// 401 starts the flow through [`Authorizer::challenge`]).
    fn authorization(&self) -> AuthFuture<'_, Option<String>>;

    /// The server refused a request: `status` is 401 (no or bad token) or 403 (with
    /// `insufficient_scope`: step-up), `www_authenticate` is its `WWW-Authenticate`
    /// header. Obtains new credentials (refresh, or the full authorization flow); `Ok`
    /// means the request may be retried with [`Authorizer::authorization`]. `rejected`
    /// is the header value the refused request carried, so that a token another request
    /// already replaced is not refreshed twice.
    fn challenge<'a>(
        &'a self,
        status: u16,
        www_authenticate: Option<&'a str>,
        rejected: Option<&'a str>,
    ) -> AuthFuture<'a, ()>;
}

/// Why no credentials could be had. The message never contains a token or secret.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The user must act (log in again, grant more scope): the message names the command.
    #[error("{0}")]
    NeedsLogin(String),
    /// The authorization did not complete in time (`--auth-timeout`).
    #[error(
        "authorization did not complete within {0:?}; help: run `toolgate auth login {1}` first"
    )]
    Timeout(std::time::Duration, String),
    /// Anything else: discovery, registration, the token endpoint, the store.
    #[error("{0}")]
    Failed(String),
}
