//! `tools/list`: every page pins the server's tool definitions (a changed one asks), a
//! repeated listing is recognised, and tools the policy forbids outright are hidden.

#[allow(unused_imports, reason = "the enforcer's imports, shared by its parts")]
use super::*;

/// The part of a `tools/list` result toolgate reads; other fields are skipped.
#[derive(serde::Deserialize)]
pub(super) struct Page {
    #[serde(default)]
    pub(super) tools: Vec<Value>,
    #[serde(default, rename = "nextCursor")]
    pub(super) next_cursor: Option<Value>,
}

/// A `tools/list` response without the tools the policy forbids outright (`max_calls: 0`),
/// so the agent never tries them; every other byte is kept (`toolgate_mcp::splice`).
/// Hiding is a courtesy, not the enforcement: a call to a hidden tool is still denied by
/// its budget, so a frame that cannot be spliced is forwarded as it is (and logged).
pub(super) fn hide_tools(frame: &[u8], hidden: &[&str]) -> Verdict {
    if hidden.is_empty() {
        return Verdict::Forward;
    }
    match toolgate_mcp::splice::splice_tools_list(frame, |name, _| hidden.contains(&name)) {
        Ok(Some(spliced)) => {
            tracing::debug!(
                "tools/list: hid `{}` from the client (`max_calls: 0`)",
                spliced.removed.join("`, `")
            );
            Verdict::Replace(spliced.frame)
        }
        Ok(None) => Verdict::Forward,
        Err(e) => {
            tracing::warn!(
                "{e}; forwarded with `{}` listed (calls to it are still denied)",
                hidden.join("`, `")
            );
            Verdict::Forward
        }
    }
}

impl Enforcer {
    /// Saves the accepted definitions; a failure is logged (the next run re-pins as new).
    pub(super) fn persist_pins(&self) {
        if let Some(shared) = &self.inner.settings.shared_session {
            shared.pins_accepted(&lock(&self.inner.backend).pins_to_persist());
        }
        let Some(pins) = &self.inner.settings.pins else {
            return;
        };
        let accepted = lock(&self.inner.backend).pins_to_persist();
        if let Err(e) = pins.store.pin_definitions(&pins.server, accepted.values()) {
            tracing::warn!("cannot save the pins of `{}`: {e}", pins.server);
        }
    }

    /// A `tools/list` page: pins every tool (the full page), then hides the tools the
    /// policy forbids outright from the client.
    pub(super) fn on_tools_list(&self, first: bool, result: &RawValue, frame: &[u8]) -> Verdict {
        if first {
            let repeat = lock(&self.inner.last_listing)
                .as_ref()
                .filter(|(last, _)| last.matches(result.get().as_bytes()))
                .map(|(_, hidden)| hidden.clone());
            if let Some(hidden) = repeat {
                // The same bytes as the last complete listing: every definition equals the
                // one pinned from it (or its pending change), so pinning would change
                // nothing; only the announcement of a change is answered.
                {
                    let mut st = lock(&self.inner.state);
                    st.tools_stale = false;
                    st.complete_listings += 1;
                }
                let hidden: Vec<&str> = hidden.iter().map(String::as_str).collect();
                return hide_tools(frame, &hidden);
            }
        }
        let Ok(page) = serde_json::from_str::<Page>(result.get()) else {
            // Nothing is pinned: calls to these tools ask (or are denied) as unlisted.
            tracing::warn!("tools/list result not understood: nothing pinned from it");
            return Verdict::Forward;
        };
        let complete = page.next_cursor.as_ref().is_none_or(Value::is_null);
        let names: Vec<String> = page
            .tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect();
        let one_page = first && complete;
        let listing = {
            let mut st = lock(&self.inner.state);
            if first {
                st.listing.clear();
            }
            if complete {
                st.complete_listings += 1;
            }
            if complete && st.listing.is_empty() {
                // A listing of one page (the common case): pinned as it is, no copy.
                st.tools_stale = false;
                page.tools
            } else {
                // Bounded: a listing longer than this is pinned page by page.
                if st.listing.len() < 100_000 {
                    st.listing.extend(page.tools);
                }
                if complete {
                    st.tools_stale = false;
                    std::mem::take(&mut st.listing)
                } else {
                    st.listing.clone()
                }
            }
        };
        self.pin_listing(listing, complete);
        // Pinned from the full page above; the client sees it without the tools the
        // policy forbids outright.
        let hidden: Vec<&str> = {
            let mut backend = lock(&self.inner.backend);
            names
                .iter()
                .map(String::as_str)
                .filter(|name| backend.forbidden_outright(name))
                .collect()
        };
        *lock(&self.inner.last_listing) = one_page.then(|| {
            (
                SameBytes::of(result.get().as_bytes()),
                hidden.iter().map(|&h| h.to_owned()).collect(),
            )
        });
        hide_tools(frame, &hidden)
    }

    /// Pins a listing (the client's or toolgate's own), persists what changed once it is
    /// complete, and audits every new or changed definition.
    pub(super) fn pin_listing(&self, listing: Vec<Value>, complete: bool) {
        let changes = lock(&self.inner.backend).pin_tools(listing, complete);
        // Only new or changed accepted definitions need saving (a repeated listing
        // changes nothing on disk).
        if complete && !(changes.added.is_empty() && changes.changed.is_empty()) {
            self.persist_pins();
        }
        let mut events = Vec::with_capacity(changes.changed.len() + changes.added.len());
        for (tool, what) in &changes.changed {
            let mut ev = Event::new(AuditKind::Pin);
            ev.tool = Some(tool.clone());
            ev.reason = Some(format!("definition changed: {}", what.join(", ")));
            events.push(ev);
        }
        for tool in &changes.added {
            let mut ev = Event::new(AuditKind::Pin);
            ev.tool = Some(tool.clone());
            ev.reason = Some("pinned".to_owned());
            events.push(ev);
        }
        if let Err(why) = self.audit_all(events) {
            tracing::warn!("pins not audited: {why}");
        }
    }
}
