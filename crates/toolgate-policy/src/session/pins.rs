//! Pins: the tool definitions a session trusts, what changed in them, and the resolutions kept
//! per pinned definition.

use super::{ApprovalKey, Kept, PinEntry, PinReport, PinState, Session};
use crate::contracts_impl::Resolution;
use crate::fingerprint::fingerprint;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// The fields of a definition that the fingerprint covers.
const PINNED_FIELDS: [&str; 4] = ["description", "inputSchema", "outputSchema", "annotations"];

/// What changed between two definitions, e.g. `["description", "inputSchema (properties: bcc)"]`.
pub fn definition_changes(old: &Value, new: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for f in PINNED_FIELDS {
        let (a, b) = (old.get(f), new.get(f));
        if a == b {
            continue;
        }
        if f == "inputSchema" {
            let props = |v: Option<&Value>| {
                v.and_then(|s| s.get("properties"))
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default()
            };
            let (pa, pb) = (props(a), props(b));
            let mut names: Vec<String> = pa
                .iter()
                .filter(|(k, v)| pb.get(*k) != Some(*v))
                .map(|(k, _)| k.clone())
                .collect();
            for k in pb.keys() {
                if !pa.contains_key(k) {
                    names.push(k.clone());
                }
            }
            names.sort();
            names.dedup();
            if names.is_empty() {
                out.push(f.to_owned());
            } else {
                out.push(format!("{f} (properties: {})", names.join(", ")));
            }
        } else {
            out.push(f.to_owned());
        }
    }
    if out.is_empty() && old.get("name") != new.get("name") {
        out.push("name".to_owned());
    }
    out
}

impl Session {
    /// Definitions persisted by an earlier session of the same server (trust on first use).
    /// A later [`Session::pin_tools`] listing that differs from them asks once, showing what
    /// changed. Call before the first `pin_tools`.
    pub fn load_persisted_pins(&mut self, pins: impl IntoIterator<Item = (String, Value)>) {
        for (name, def) in pins {
            if self.persisted.len() >= self.limits.max_tools {
                break;
            }
            self.persisted.insert(name, def);
        }
    }

    /// The accepted definitions to persist for the next session (pending changes excluded).
    pub fn pins_to_persist(&self) -> BTreeMap<String, Value> {
        self.pins
            .iter()
            .filter(|(_, p)| !p.removed && !p.accepted.is_null())
            .map(|(k, p)| (k.clone(), p.accepted.clone()))
            .collect()
    }

    /// Pin the tools of a `tools/list` result (its `tools` array). New tools are pinned; a
    /// tool whose definition changed is held as changed until [`Session::approve_pin`], and
    /// its session approvals are revoked.
    pub fn pin_tools(&mut self, tools: &[Value]) -> PinReport {
        self.pin_listing(tools.iter().map(Cow::Borrowed))
    }

    /// [`Session::pin_tools`] of a listing the caller no longer needs: the definitions it
    /// pins are moved in rather than copied.
    pub fn pin_tools_owned(&mut self, tools: Vec<Value>) -> PinReport {
        self.pin_listing(tools.into_iter().map(Cow::Owned))
    }

    fn pin_listing<'a>(&mut self, tools: impl Iterator<Item = Cow<'a, Value>>) -> PinReport {
        let mut report = PinReport::default();
        let mut seen = HashSet::new();
        for def in tools {
            let Some(name) = def.get("name").and_then(Value::as_str) else {
                continue;
            };
            // Owned: `def` may be moved into the pins below.
            let name = name.to_owned();
            let name = name.as_str();
            seen.insert(name.to_owned());
            // A definition equal to the accepted one has its fingerprint (a repeated listing
            // costs a comparison per tool, not a canonicalisation).
            let fp = match self.pins.get(name) {
                Some(pin) if !pin.accepted.is_null() && pin.accepted == *def => {
                    pin.accepted_fp.clone()
                }
                _ => fingerprint(&def),
            };
            if let Some(pin) = self.pins.get_mut(name) {
                pin.removed = false;
                if fp == pin.accepted_fp {
                    pin.pending = None;
                    continue;
                }
                if pin.pending.as_ref().is_some_and(|(_, p, _)| *p == fp) {
                    continue;
                }
                let changes = definition_changes(&pin.accepted, &def);
                pin.pending = Some((def.into_owned(), fp, changes.clone()));
                report.changed.push((name.to_owned(), changes));
                self.revoke_tool(name);
                continue;
            }
            if self.pins.len() >= self.limits.max_tools {
                report.dropped.push(name.to_owned());
                continue;
            }
            // A tool that was not in the session's first complete listing, or not among the
            // tools an earlier session of this server pinned, appeared late: it is not
            // trusted on sight (a rug pull may add a tool instead of changing one).
            let late = if self.baseline {
                Some(false)
            } else if !self.persisted.is_empty() && !self.persisted.contains_key(name) {
                Some(true)
            } else {
                None
            };
            if let Some(since_last_session) = late {
                let what = if since_last_session {
                    "a new tool (not among the tools pinned by an earlier session)"
                } else {
                    "a new tool (not in the server's first listing)"
                };
                report
                    .changed
                    .push((name.to_owned(), vec![what.to_owned()]));
                self.pins.insert(
                    name.to_owned(),
                    PinEntry {
                        accepted: Value::Null,
                        accepted_fp: String::new(),
                        pending: Some((def.into_owned(), fp, vec![what.to_owned()])),
                        from_last_session: since_last_session,
                        removed: false,
                    },
                );
                continue;
            }
            // A definition equal to the persisted one needs no second fingerprint.
            let old_fp = self
                .persisted
                .get(name)
                .filter(|old| **old != *def)
                .map(|old| (old, fingerprint(old)))
                .filter(|(_, old_fp)| *old_fp != fp);
            let entry = match old_fp {
                Some((old, old_fp)) => {
                    let changes = definition_changes(old, &def);
                    report.changed.push((name.to_owned(), changes.clone()));
                    PinEntry {
                        accepted_fp: old_fp,
                        accepted: old.clone(),
                        pending: Some((def.into_owned(), fp, changes)),
                        from_last_session: true,
                        removed: false,
                    }
                }
                _ => {
                    report.added.push(name.to_owned());
                    PinEntry {
                        accepted: def.into_owned(),
                        accepted_fp: fp,
                        pending: None,
                        from_last_session: false,
                        removed: false,
                    }
                }
            };
            self.pins.insert(name.to_owned(), entry);
        }
        let mut removed: Vec<String> = self
            .pins
            .iter_mut()
            .filter(|(k, p)| !p.removed && !seen.contains(*k))
            .map(|(k, p)| {
                p.removed = true;
                k.clone()
            })
            .collect();
        removed.sort();
        report.removed = removed;
        report.added.sort();
        report.changed.sort();
        report
    }

    /// Marks the end of a complete listing (the last page of a `tools/list`). From then on
    /// a tool the server adds is held as new until a human accepts it ([`Session::approve_pin`]).
    pub fn listing_complete(&mut self) {
        self.baseline = true;
    }

    /// The pinning state of a tool.
    pub fn pin_state(&self, tool: &str) -> PinState {
        match self.pins.get(tool) {
            None => PinState::Unlisted,
            Some(p) => match &p.pending {
                Some((_, fp, changes)) => PinState::Changed {
                    pinned: p.accepted_fp.clone(),
                    current: fp.clone(),
                    changes: changes.clone(),
                    since_last_session: p.from_last_session,
                },
                None if p.removed => PinState::Removed {
                    fingerprint: p.accepted_fp.clone(),
                },
                None => PinState::Pinned {
                    fingerprint: p.accepted_fp.clone(),
                },
            },
        }
    }

    /// The pinned definition of a tool, only while it is pinned and unchanged (annotations
    /// and schemas count only from such a definition).
    pub fn pinned_definition(&self, tool: &str) -> Option<&Value> {
        self.pinned(tool).map(|p| &p.accepted)
    }

    /// The pin of `tool` when its definition is pinned: accepted, unchanged, still listed.
    fn pinned(&self, tool: &str) -> Option<&PinEntry> {
        self.pins
            .get(tool)
            .filter(|p| p.pending.is_none() && !p.removed)
    }

    /// The resolution of `tool` kept by [`Session::keep_resolution`] for the same contracts
    /// and the same pinned definition.
    pub(crate) fn resolution(&self, contracts: u64, tool: &str) -> Option<Arc<Resolution>> {
        self.resolutions
            .get(tool)
            .filter(|k| k.contracts == contracts && k.pinned.as_deref() == self.pinned_fp(tool))
            .map(|k| Arc::clone(&k.resolution))
    }

    /// Keeps what `tool` resolved to under its pinned definition, or under none when none is
    /// pinned (bounded like the pins).
    pub(crate) fn keep_resolution(
        &mut self,
        contracts: u64,
        tool: &str,
        resolution: Arc<Resolution>,
    ) {
        if self.resolutions.len() >= self.limits.max_tools && !self.resolutions.contains_key(tool) {
            self.resolutions.clear();
        }
        let pinned = self.pinned_fp(tool).map(str::to_owned);
        self.resolutions.insert(
            tool.to_owned(),
            Kept {
                contracts,
                pinned,
                resolution,
            },
        );
    }

    /// The fingerprint of [`Session::pinned_definition`].
    fn pinned_fp(&self, tool: &str) -> Option<&str> {
        self.pinned(tool).map(|p| p.accepted_fp.as_str())
    }

    /// The fingerprint approvals of this tool are bound to: the pinned one, or the changed
    /// definition's while a change is pending.
    pub fn fingerprint_of(&self, tool: &str) -> Option<&str> {
        self.pins.get(tool).map(|p| match &p.pending {
            Some((_, fp, _)) => fp.as_str(),
            None => p.accepted_fp.as_str(),
        })
    }

    /// Accept the changed definition of a tool (the human approved the change). Returns
    /// false when nothing was pending.
    pub fn approve_pin(&mut self, tool: &str) -> bool {
        let Some(p) = self.pins.get_mut(tool) else {
            return false;
        };
        let Some((def, fp, _)) = p.pending.take() else {
            return false;
        };
        p.accepted = def;
        p.accepted_fp = fp;
        p.from_last_session = false;
        true
    }

    fn revoke_tool(&mut self, tool: &str) {
        let prefix = format!("\"tool\":{}", Value::String(tool.to_owned()));
        self.approvals.retain(|k| match k {
            ApprovalKey::Destination { tool: t, .. } => t != tool,
            ApprovalKey::Action { key, .. } => !key.contains(&prefix),
        });
    }
}
