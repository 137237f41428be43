//! [`ProxyHandle`]: what an interceptor may do through the relay that called it (requests of
//! toolgate's own to the client or the server, frames to either side). The relay implements
//! [`Channels`]; an interceptor sees only the handle, so the interception seam does not
//! depend on the relay's insides.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use toolgate_mcp::RawValue;

/// A future the relay hands back to a [`ProxyHandle`].
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the relay does for a [`ProxyHandle`]; the methods are documented there.
pub(crate) trait Channels: Send + Sync {
    fn new_origin_id(&self) -> String;
    fn origin_prefix(&self) -> &str;
    fn request_client_as<'a>(
        &'a self,
        id: &'a str,
        method: &'a str,
        params: Option<&'a RawValue>,
    ) -> Boxed<'a, Result<Vec<u8>, ProxyError>>;
    fn withdraw_client_request<'a>(&'a self, id: &'a str, reason: &'a str) -> Boxed<'a, bool>;
    fn request_server<'a>(
        &'a self,
        method: &'a str,
        params: Option<&'a RawValue>,
    ) -> Boxed<'a, Result<Vec<u8>, ProxyError>>;
    fn send_to_client(&self, message: Vec<u8>) -> Boxed<'_, Result<(), ProxyError>>;
    fn send_to_server(&self, message: Vec<u8>) -> Boxed<'_, Result<(), ProxyError>>;
}

/// A handle on the running relay, given to the interceptor.
#[derive(Clone)]
pub struct ProxyHandle {
    relay: Arc<dyn Channels>,
}

/// A proxy-originated request could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The client is gone (or never answered before shutdown).
    #[error("the client closed the connection before answering")]
    ClientGone,
    /// The upstream is gone.
    #[error("the upstream server is gone")]
    UpstreamGone,
}

impl ProxyHandle {
    pub(crate) fn new(relay: Arc<dyn Channels>) -> Self {
        Self { relay }
    }

    /// Sends a request to the client with an id from toolgate's reserved id space and
    /// waits for its response. Returns the response frame (without newline); the
    /// response is never forwarded to the server.
    pub async fn request_client(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Vec<u8>, ProxyError> {
        let id = self.new_origin_id();
        self.request_client_as(&id, method, params).await
    }

    /// A fresh id in toolgate's reserved id space, for [`ProxyHandle::request_client_as`].
    pub fn new_origin_id(&self) -> String {
        self.relay.new_origin_id()
    }

    /// [`ProxyHandle::request_client`] with a caller-chosen id (from
    /// [`ProxyHandle::new_origin_id`]), so the caller can withdraw the request with
    /// [`ProxyHandle::withdraw_client_request`].
    pub async fn request_client_as(
        &self,
        id: &str,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Vec<u8>, ProxyError> {
        self.relay.request_client_as(id, method, params).await
    }

    /// Withdraws a request toolgate sent to the client and no longer waits for: forgets it
    /// (a late answer is consumed, never forwarded) and tells the client with
    /// `notifications/cancelled`. Returns false when it was no longer outstanding (answered
    /// already, or never sent); then nothing is sent.
    pub async fn withdraw_client_request(&self, id: &str, reason: &str) -> bool {
        self.relay.withdraw_client_request(id, reason).await
    }

    /// Sends a request to the upstream with an id from toolgate's reserved id space (which
    /// the client cannot use) and waits for its response. Returns the response frame
    /// (without newline); neither the request nor its response ever reaches the client.
    /// Dropping the future forgets the request (a late response is consumed); an upstream
    /// that exits fails it.
    pub async fn request_server(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Vec<u8>, ProxyError> {
        self.relay.request_server(method, params).await
    }

    /// Sends one message (no trailing newline) to the client.
    pub async fn send_to_client(&self, message: Vec<u8>) -> Result<(), ProxyError> {
        self.relay.send_to_client(message).await
    }

    /// Sends one message (no trailing newline) to the upstream server.
    pub async fn send_to_server(&self, message: Vec<u8>) -> Result<(), ProxyError> {
        self.relay.send_to_server(message).await
    }

    /// The reserved id prefix of this relay's own requests.
    pub fn origin_prefix(&self) -> &str {
        self.relay.origin_prefix()
    }
}

impl fmt::Debug for ProxyHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyHandle")
            .field("origin_prefix", &self.relay.origin_prefix())
            .finish_non_exhaustive()
    }
}
