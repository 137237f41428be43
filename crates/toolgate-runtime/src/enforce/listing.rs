//! A call to a tool the session has not listed is decided on the server's real definition.
//!
//! Clients may call a tool without listing first (scripted SDK users, the MCP conformance
//! suite, 2026-07-28 clients that reuse a cached listing), or send `tools/list` and a
//! `tools/call` back to back. Such a call is parked (other traffic keeps flowing) until the
//! server's tools are pinned:
//!
//! - a listing already under way (the client's pages awaiting their response, or
//!   toolgate's own) is waited for;
//! - otherwise toolgate lists the server's tools itself: its own `tools/list` requests
//!   (ids in the relay's reserved space, [`ProxyHandle::request_server`]), every
//!   `nextCursor` page followed, pinned like a client's listing (same pin store, same
//!   rug-pull check). Neither the requests nor their replies reach the client.
//!
//! Then the call is decided as usual: only a tool the server really does not list is
//! unlisted. The wait is bounded (`--listing-timeout`); a listing that fails or times out
//! leaves the tool unpinned, so the call fails closed (it asks, with the reason).

use std::time::Duration;

use serde_json::{Map, Value};
use toolgate_mcp::{IdKey, RawValue};

use super::pinning::Page;
use super::{Enforcer, Listing, lock, raw_value};
use crate::proxy::{ProxyHandle, Verdict};

/// toolgate's own listing stops after this many pages (a server that never ends its
/// cursor chain); the call then fails closed.
const MAX_PAGES: usize = 1_000;

/// Bound on the definitions kept from toolgate's own listing (as for a client's).
const MAX_TOOLS: usize = 100_000;

/// Members of a 2026-07-28 call's per-request `_meta` that a `tools/list` request of the
/// same era carries too (protocol version and client capabilities); a legacy call has none.
const ERA_META: [&str; 3] = [
    toolgate_mcp::views::META_PROTOCOL_VERSION,
    toolgate_mcp::views::META_CLIENT_CAPABILITIES,
    toolgate_mcp::views::META_CLIENT_INFO,
];

/// Removes one listing from the count of those under way when dropped (also when the
/// waiting call times out), and wakes the calls waiting for it.
struct InFlight<'a>(&'a Enforcer);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.listing_ended(true);
    }
}

impl Enforcer {
    /// A listing ended (its last page answered, an error, or toolgate's own gave up):
    /// wakes the calls waiting for it. `own`: toolgate's own listing.
    pub(super) fn listing_ended(&self, own: bool) {
        {
            let mut st = lock(&self.inner.state);
            st.listings_in_flight = st.listings_in_flight.saturating_sub(1);
            if own {
                tracing::debug!("toolgate's own listing of the server's tools ended");
            }
        }
        self.inner
            .listing_events
            .send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Parks a `tools/call` (`params`: as received, and parsed) for a tool the session has
    /// not listed, until a listing pins the server's tools; `None` when the call can be
    /// decided now (the tool is listed, or a complete listing without it is current).
    pub(super) fn list_before_deciding(
        &self,
        id: &RawValue,
        params: &RawValue,
        parsed: &Value,
        tool: &str,
        proxy: &ProxyHandle,
    ) -> Option<Verdict> {
        if lock(&self.inner.backend).listed(tool) {
            return None;
        }
        let seen = {
            let st = lock(&self.inner.state);
            let current = st.complete_listings > 0 && !st.tools_stale && st.listings_in_flight == 0;
            if current {
                // The server's current listing does not have it: really unlisted.
                return None;
            }
            st.complete_listings
        };
        let key = IdKey::from_raw(id)?;
        let meta = era_meta(parsed);
        let (cancel_tx, cancel_rx) = tokio::sync::oneshot::channel();
        lock(&self.inner.state)
            .parked
            .insert(key.clone(), cancel_tx);
        let this = self.clone();
        let proxy = proxy.clone();
        let id: Box<RawValue> = id.to_owned();
        let params: Box<RawValue> = params.to_owned();
        let tool = tool.to_owned();
        let timeout = self.inner.settings.listing_timeout;
        tracing::debug!("`{tool}` is not listed yet: its call waits for a listing");
        Some(Verdict::Park(Box::pin(async move {
            let waited = tokio::select! {
                waited = tokio::time::timeout(
                    timeout,
                    this.await_listing(&tool, seen, meta, timeout, &proxy),
                ) => Some(waited),
                Ok(()) = cancel_rx => None,
            };
            lock(&this.inner.state).parked.remove(&key);
            let failed = match waited {
                // The client cancelled the call: the server never saw it.
                None => return Verdict::Withdraw,
                Some(Ok(Ok(()))) => None,
                Some(Ok(Err(why))) => Some(why),
                Some(Err(_)) => Some(format!("no listing within {} ms", timeout.as_millis())),
            };
            if let Some(why) = &failed {
                tracing::warn!("the call to `{tool}` fails closed: {why}");
            }
            let listing = match &failed {
                None => Listing::Done,
                Some(why) => Listing::Failed(why),
            };
            this.decide_tools_call(&id, Some(&params), &proxy, listing)
        })))
    }

    /// Waits until the server's tools are pinned: for the listings under way (the
    /// client's), then, unless one of them completed since the call arrived (`seen`) or
    /// listed `tool`, through toolgate's own listing.
    async fn await_listing(
        &self,
        tool: &str,
        seen: u64,
        meta: Option<Map<String, Value>>,
        timeout: Duration,
        proxy: &ProxyHandle,
    ) -> Result<(), String> {
        let mut events = self.inner.listing_events.subscribe();
        // A client listing that never ends (cancelled, unanswered) is waited for only so
        // long; then toolgate lists for itself.
        let others = tokio::time::sleep(timeout / 2);
        tokio::pin!(others);
        loop {
            let idle = {
                let mut st = lock(&self.inner.state);
                if st.complete_listings != seen {
                    return Ok(());
                }
                if st.listings_in_flight == 0 || others.is_elapsed() {
                    // Counted before the first await: a call arriving now waits for it.
                    st.listings_in_flight += 1;
                    true
                } else {
                    false
                }
            };
            if idle {
                break;
            }
            if lock(&self.inner.backend).listed(tool) {
                return Ok(());
            }
            tokio::select! {
                changed = events.changed() => {
                    changed.map_err(|_| "toolgate is shutting down".to_owned())?;
                }
                () = &mut others => {}
            }
        }
        let in_flight = InFlight(self);
        let listing = self.list_tools(meta, proxy).await;
        let result = listing.map(|tools| {
            {
                let mut st = lock(&self.inner.state);
                st.tools_stale = false;
                st.complete_listings += 1;
            }
            // The client's last listing may no longer be what is pinned.
            *lock(&self.inner.last_listing) = None;
            self.pin_listing(tools, true);
        });
        drop(in_flight);
        result
    }

    /// toolgate's own listing of the server's tools: every page, in order.
    async fn list_tools(
        &self,
        meta: Option<Map<String, Value>>,
        proxy: &ProxyHandle,
    ) -> Result<Vec<Value>, String> {
        let mut tools = Vec::new();
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_PAGES {
            let mut params = Map::new();
            if let Some(cursor) = cursor.take() {
                params.insert("cursor".to_owned(), cursor);
            }
            if let Some(meta) = &meta {
                params.insert("_meta".to_owned(), Value::Object(meta.clone()));
            }
            let params = if params.is_empty() {
                None
            } else {
                Some(raw_value(&Value::Object(params)).ok_or("the request cannot be built")?)
            };
            let frame = proxy
                .request_server("tools/list", params.as_deref())
                .await
                .map_err(|e| format!("its `tools/list` failed: {e}"))?;
            let response: Value = serde_json::from_slice(&frame)
                .map_err(|e| format!("its `tools/list` response is not JSON: {e}"))?;
            let Some(result) = response.get("result") else {
                let why = response
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("no result");
                return Err(format!(
                    "the server answered `tools/list` with an error: {why}"
                ));
            };
            let page: Page = serde_json::from_value(result.clone())
                .map_err(|e| format!("the `tools/list` result is not understood: {e}"))?;
            if tools.len() < MAX_TOOLS {
                tools.extend(page.tools);
            }
            match page.next_cursor {
                Some(next) if !next.is_null() => cursor = Some(next),
                _ => return Ok(tools),
            }
        }
        Err(format!("the listing did not end within {MAX_PAGES} pages"))
    }
}

/// What a `tools/list` request of the call's era carries in `_meta`: the 2026-07-28
/// per-request protocol version, client capabilities and client info; `None` for a call of
/// an earlier revision (the session's `initialize` covers them).
fn era_meta(params: &Value) -> Option<Map<String, Value>> {
    let meta = params.get("_meta")?.as_object()?;
    let copied: Map<String, Value> = ERA_META
        .iter()
        .filter_map(|&key| Some((key.to_owned(), meta.get(key)?.clone())))
        .collect();
    (!copied.is_empty()).then_some(copied)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::era_meta;

    #[test]
    fn only_the_era_members_of_meta_are_copied() {
        let call = json!({"name": "x", "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            "progressToken": 7,
        }});
        let meta = era_meta(&call).unwrap_or_default();
        assert_eq!(
            serde_json::Value::Object(meta),
            json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            })
        );
        assert!(era_meta(&json!({"name": "x"})).is_none());
        assert!(era_meta(&json!({"name": "x", "_meta": {"progressToken": 1}})).is_none());
    }
}
