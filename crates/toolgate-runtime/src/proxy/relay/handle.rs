//! `ProxyHandle`: what the interceptor may do through the relay (requests of toolgate's own
//! to the client or the server, frames to either side).

#[allow(unused_imports, reason = "the relay's imports, shared by its parts")]
use super::*;

/// A handle on the running relay, given to the interceptor.
#[derive(Clone)]
pub struct ProxyHandle {
    pub(super) shared: Arc<RelayParts>,
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

/// A per-process random value (std's hasher keys are seeded from the OS).
pub(super) fn random_u64() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(u64::from(std::process::id()));
    hasher.finish()
}

impl ProxyHandle {
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
        let n = self.shared.next_origin.fetch_add(1, Ordering::Relaxed);
        format!("{}{n}", self.shared.origin_prefix)
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
        let id = id.to_owned();
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.shared.lock();
            if st.client_gone {
                return Err(ProxyError::ClientGone);
            }
            st.origin.insert(id.clone().into_boxed_str(), tx);
        }
        let frame = with_newline(build::request(&id, method, params));
        if self.shared.to_client.send(frame).await.is_err() {
            self.shared.lock().origin.remove(id.as_str());
            return Err(ProxyError::ClientGone);
        }
        rx.await.map_err(|_| ProxyError::ClientGone)
    }

    /// Withdraws a request toolgate sent to the client and no longer waits for: forgets it
    /// (a late answer is consumed, never forwarded) and tells the client with
    /// `notifications/cancelled`. Returns false when it was no longer outstanding (answered
    /// already, or never sent); then nothing is sent.
    pub async fn withdraw_client_request(&self, id: &str, reason: &str) -> bool {
        if self.shared.lock().origin.remove(id).is_none() {
            return false;
        }
        let params = serde_json::json!({ "requestId": id, "reason": reason });
        let Ok(params) = serde_json::value::to_raw_value(&params) else {
            return false;
        };
        let frame = build::notification("notifications/cancelled", Some(&params));
        self.send_to_client(frame).await.is_ok()
    }

    /// Sends a request to the upstream with an id from toolgate's reserved id space (which
    /// the client cannot use: see `own_server_response`) and waits for its response.
    /// Returns the response frame (without newline); neither the request nor its response
    /// ever reaches the client. Dropping the future forgets the request (a late response is
    /// consumed); an upstream that exits fails it.
    pub async fn request_server(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Vec<u8>, ProxyError> {
        struct Forget<'a>(&'a RelayParts, Box<str>);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                self.0.lock().server_origin.remove(&self.1);
            }
        }
        let id = self.new_origin_id();
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.shared.lock();
            if st.upstream_gone {
                return Err(ProxyError::UpstreamGone);
            }
            st.server_origin.insert(id.clone().into_boxed_str(), tx);
        }
        let _forget = Forget(&self.shared, id.clone().into_boxed_str());
        self.send_to_server(build::request(&id, method, params))
            .await?;
        rx.await.map_err(|_| ProxyError::UpstreamGone)
    }

    /// Sends one message (no trailing newline) to the client.
    pub async fn send_to_client(&self, message: Vec<u8>) -> Result<(), ProxyError> {
        self.shared.to_client.send(with_newline(message)).await
    }

    /// Sends one message (no trailing newline) to the upstream server.
    pub async fn send_to_server(&self, message: Vec<u8>) -> Result<(), ProxyError> {
        if self.shared.lock().upstream_gone {
            return Err(ProxyError::UpstreamGone);
        }
        self.shared.to_server.send(with_newline(message)).await
    }

    /// The reserved id prefix of this relay's own requests.
    pub fn origin_prefix(&self) -> &str {
        &self.shared.origin_prefix
    }
}
