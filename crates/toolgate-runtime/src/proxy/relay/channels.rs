//! The relay's side of [`ProxyHandle`]: requests of toolgate's own to the client or the
//! server, and frames to either side.

#[allow(unused_imports, reason = "the relay's imports, shared by its parts")]
use super::*;

/// A per-process random value (std's hasher keys are seeded from the OS).
pub(super) fn random_u64() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(u64::from(std::process::id()));
    hasher.finish()
}

impl Channels for RelayParts {
    fn new_origin_id(&self) -> String {
        let n = self.next_origin.fetch_add(1, Ordering::Relaxed);
        format!("{}{n}", self.origin_prefix)
    }

    fn origin_prefix(&self) -> &str {
        &self.origin_prefix
    }

    fn request_client_as<'a>(
        &'a self,
        id: &'a str,
        method: &'a str,
        params: Option<&'a RawValue>,
    ) -> Boxed<'a, Result<Vec<u8>, ProxyError>> {
        Box::pin(async move {
            let id = id.to_owned();
            let (tx, rx) = oneshot::channel();
            {
                let mut st = self.lock();
                if st.client_gone {
                    return Err(ProxyError::ClientGone);
                }
                st.origin.insert(id.clone().into_boxed_str(), tx);
            }
            let frame = with_newline(build::request(&id, method, params));
            if self.to_client.send(frame).await.is_err() {
                self.lock().origin.remove(id.as_str());
                return Err(ProxyError::ClientGone);
            }
            rx.await.map_err(|_| ProxyError::ClientGone)
        })
    }

    fn withdraw_client_request<'a>(&'a self, id: &'a str, reason: &'a str) -> Boxed<'a, bool> {
        Box::pin(async move {
            if self.lock().origin.remove(id).is_none() {
                return false;
            }
            let params = serde_json::json!({ "requestId": id, "reason": reason });
            let Ok(params) = serde_json::value::to_raw_value(&params) else {
                return false;
            };
            let frame = build::notification("notifications/cancelled", Some(&params));
            self.send_to_client(frame).await.is_ok()
        })
    }

    fn request_server<'a>(
        &'a self,
        method: &'a str,
        params: Option<&'a RawValue>,
    ) -> Boxed<'a, Result<Vec<u8>, ProxyError>> {
        struct Forget<'a>(&'a RelayParts, Box<str>);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                self.0.lock().server_origin.remove(&self.1);
            }
        }
        Box::pin(async move {
            let id = self.new_origin_id();
            let (tx, rx) = oneshot::channel();
            {
                let mut st = self.lock();
                if st.upstream_gone {
                    return Err(ProxyError::UpstreamGone);
                }
                st.server_origin.insert(id.clone().into_boxed_str(), tx);
            }
            let _forget = Forget(self, id.clone().into_boxed_str());
            self.send_to_server(build::request(&id, method, params))
                .await?;
            rx.await.map_err(|_| ProxyError::UpstreamGone)
        })
    }

    fn send_to_client(&self, message: Vec<u8>) -> Boxed<'_, Result<(), ProxyError>> {
        Box::pin(async move { self.to_client.send(with_newline(message)).await })
    }

    fn send_to_server(&self, message: Vec<u8>) -> Boxed<'_, Result<(), ProxyError>> {
        Box::pin(async move {
            if self.lock().upstream_gone {
                return Err(ProxyError::UpstreamGone);
            }
            self.to_server.send(with_newline(message)).await
        })
    }
}
