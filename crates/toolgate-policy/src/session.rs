//! Per-session state: pinned tool definitions, budget counters, the taint index and the
//! approvals the human gave for this session. Pure: time comes in as `now_ms`.
//!
//! Memory is bounded by [`SessionLimits`]: past a bound nothing new is remembered, and what
//! is not remembered degrades to asking (an unpinned tool, an unproven destination, an
//! approval that has to be given again), never to allowing.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::action::{Action, Operation};
use crate::contracts::fields::{self, FieldPath};
use crate::contracts::{Resolution, TrustedFields};
use crate::decision::{SinkFinding, SinkVerdict};
use crate::fingerprint::fingerprint;
use crate::normalize::collect_strings;
use crate::taint::{OutputTrust, TaintIndex, TaintLimits, TaintSource};

/// Bounds of a session's memory.
#[derive(Debug, Clone)]
pub struct SessionLimits {
    pub taint: TaintLimits,
    /// Most tools pinned (and counted for budgets).
    pub max_tools: usize,
    /// Most approvals remembered.
    pub max_approvals: usize,
    /// Pinning on (the proxy) or off (`policy explain` without tool definitions).
    pub pinning: bool,
}

impl SessionLimits {
    /// Defaults around the given taint limits: 4096 tools, 1024 approvals, pinning on.
    pub fn new(taint: TaintLimits) -> Self {
        SessionLimits {
            taint,
            max_tools: 4096,
            max_approvals: 1024,
            pinning: true,
        }
    }
}

/// What [`Session::pin_tools`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinReport {
    /// Tools seen for the first time (pinned now).
    pub added: Vec<String>,
    /// Tools whose definition differs from the pinned one: `(tool, what changed)`.
    pub changed: Vec<(String, Vec<String>)>,
    /// Pinned tools missing from this listing.
    pub removed: Vec<String>,
    /// Tools not pinned because the session is full.
    pub dropped: Vec<String>,
}

/// The pinning state of one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum PinState {
    /// Never listed by the server in this session.
    Unlisted,
    /// Listed, and unchanged since pinned.
    Pinned { fingerprint: String },
    /// The server now lists a definition that differs from the pinned one.
    Changed {
        pinned: String,
        current: String,
        /// What changed, e.g. `description`, `inputSchema (properties: bcc)`.
        changes: Vec<String>,
        /// The pinned definition was persisted by an earlier session (trust on first use).
        since_last_session: bool,
    },
    /// Pinned, but missing from the latest listing.
    Removed { fingerprint: String },
}

/// What an approval covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalScope {
    /// Exactly this normalised action (and arguments when the action is opaque) of this tool
    /// definition.
    Action,
    /// This destination of this tool definition.
    Destination(String),
}

#[derive(Debug, Clone)]
struct PinEntry {
    accepted: Value,
    accepted_fp: String,
    pending: Option<(Value, String, Vec<String>)>,
    from_last_session: bool,
    removed: bool,
}

#[derive(Debug)]
struct Kept {
    contracts: u64,
    pinned: Option<String>,
    resolution: Arc<Resolution>,
}

#[derive(Debug, Clone, Default)]
struct Counter {
    total: u64,
    window: VecDeque<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum ApprovalKey {
    Action {
        key: String,
        fingerprint: Option<String>,
    },
    Destination {
        tool: String,
        fingerprint: Option<String>,
        destination: String,
    },
}

/// The state of one proxied session.
#[derive(Debug)]
pub struct Session {
    limits: SessionLimits,
    pins: HashMap<String, PinEntry>,
    persisted: HashMap<String, Value>,
    counters: HashMap<String, Counter>,
    /// The counts of the next attempt of a tool, counted elsewhere
    /// ([`Session::count_externally`]).
    counted_externally: Option<(String, u64, u64)>,
    taint: TaintIndex,
    approvals: HashSet<ApprovalKey>,
    seq: u64,
    /// A complete listing was pinned: a tool that appears after it is new, not pinned.
    baseline: bool,
    /// The contract each tool resolved to
    /// ([`Contracts::lookup_in`](crate::contracts::Contracts::lookup_in)), with the id of
    /// the contracts that resolved it and the fingerprint of the pinned definition it was
    /// resolved under (none when no definition was pinned). A pinned definition changes
    /// only together with its fingerprint, so a listing that repeats the tools keeps them.
    resolutions: HashMap<String, Kept>,
    /// What `record_output_fields` noted about the latest outputs, for the sink gate's
    /// reason (at most [`MAX_FIELD_NOTES`]).
    field_notes: VecDeque<FieldNote>,
    /// SHA-256 digests of the destination tokens the user typed in a prompt of this agent
    /// session ([`prompt_digests`]): such a destination passes the sink gate as
    /// [`SinkVerdict::UserVouched`], even when untrusted output repeats it. Only digests are
    /// kept, never the prompt. Bounded by [`MAX_USER_VOUCHED`] (oldest forgotten first).
    user_vouched: HashSet<[u8; 32]>,
    user_vouched_order: VecDeque<[u8; 32]>,
    /// Why what toolgate knew of this agent session is gone (its state store was deleted or
    /// replaced while the session ran): the sink gate then proves no destination from
    /// session state ([`Session::mark_state_lost`]).
    state_lost: Option<String>,
}

/// The most prompt digests a session keeps ([`Session::vouch_user_digest`]).
pub const MAX_USER_VOUCHED: usize = 10_000;

/// The SHA-256 of one canonical destination token, as [`Session::vouch_user_digest`] keeps it.
pub fn token_digest(token: &str) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(token.as_bytes()).into()
}

/// The digests of the destinations a user typed in a prompt: every destination token the
/// taint tokenizer finds (addresses, URLs and their hosts, bare domains, phone numbers,
/// IBANs, channel and user names) and every repository slug `owner/repo` (lower case), each
/// as [`token_digest`] of its canonical form. The text itself is not kept.
pub fn prompt_digests(prompt: &str) -> Vec<[u8; 32]> {
    let mut tokens: Vec<String> = crate::taint::tokenize_destinations(prompt);
    for word in prompt.split(|c: char| {
        c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '"' | '\'' | '`' | '<' | '>')
    }) {
        let word = word.trim_end_matches(['.', ':', '!', '?']);
        if let Some((owner, repo)) = word.split_once('/') {
            let part_ok = |p: &str| {
                !p.is_empty()
                    && p.len() <= 100
                    && p.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                    && p.chars().any(|c| c.is_ascii_alphanumeric())
            };
            if part_ok(owner) && part_ok(repo) {
                tokens.push(word.to_ascii_lowercase());
            }
        }
    }
    let mut out: Vec<[u8; 32]> = Vec::with_capacity(tokens.len());
    for t in tokens {
        let d = token_digest(&t);
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// What reading one output under `trusted_fields` found that makes a destination in it
/// untrusted although the contract trusts fields of it.
#[derive(Debug)]
struct FieldNote {
    seq: u64,
    /// Positions of the text blocks that were not a document.
    unparsed: Vec<usize>,
    /// Destinations (and other values) of trusted fields that an untrusted part of the same
    /// output repeats (at most [`MAX_NOTED_VALUES`]).
    overridden: HashSet<String>,
}

/// Outputs whose [`FieldNote`] is kept.
const MAX_FIELD_NOTES: usize = 32;
/// Overridden values kept per [`FieldNote`].
const MAX_NOTED_VALUES: usize = 256;

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

/// The arguments in an approval key: the SHA-256 of their canonical form (equal arguments,
/// however written, give equal keys).
fn canonical_json(v: &Value) -> String {
    toolgate_jcs::canonical_sha256(v).unwrap_or_else(|_| v.to_string())
}

fn action_needs_arguments(action: &Action) -> bool {
    action.parts.is_empty()
        || action
            .parts
            .iter()
            .any(|p| p.opaque || p.operation == Operation::Unknown)
}

fn action_key(action: &Action, arguments: Option<&Value>) -> Option<String> {
    let mut key = serde_json::to_string(action).ok()?;
    if action_needs_arguments(action) {
        // An opaque action says too little: bind the approval to the exact arguments.
        key.push('\u{0}');
        key.push_str(&canonical_json(arguments?));
    }
    Some(key)
}

impl Session {
    pub fn new(limits: SessionLimits) -> Self {
        Session {
            taint: TaintIndex::new(limits.taint.clone()),
            limits,
            pins: HashMap::new(),
            persisted: HashMap::new(),
            counters: HashMap::new(),
            counted_externally: None,
            approvals: HashSet::new(),
            seq: 0,
            baseline: false,
            resolutions: HashMap::new(),
            field_notes: VecDeque::new(),
            user_vouched: HashSet::new(),
            user_vouched_order: VecDeque::new(),
            state_lost: None,
        }
    }

    /// Marks the session as one whose earlier state (taint, the user's prompts, approvals,
    /// budgets) toolgate lost: from now on every destination of a sink that only session state
    /// could prove (approved, vouched for, named by the user, or unproven) asks, with `why` in
    /// the reason. A destination the policy itself trusts (`trusted_destinations`, an allow
    /// rule) still passes; a tainted one is still denied. There is no way back: the taint that
    /// was lost could name any destination.
    pub fn mark_state_lost(&mut self, why: impl Into<String>) {
        self.state_lost = Some(why.into());
    }

    /// Why this session's earlier state was lost, if it was ([`Session::mark_state_lost`]).
    pub fn state_lost(&self) -> Option<&str> {
        self.state_lost.as_deref()
    }

    /// Remembers the digest of a destination the user typed ([`prompt_digests`]). Returns
    /// false when it was already known.
    pub fn vouch_user_digest(&mut self, digest: [u8; 32]) -> bool {
        if !self.user_vouched.insert(digest) {
            return false;
        }
        self.user_vouched_order.push_back(digest);
        while self.user_vouched_order.len() > MAX_USER_VOUCHED {
            if let Some(old) = self.user_vouched_order.pop_front() {
                self.user_vouched.remove(&old);
            }
        }
        true
    }

    /// Whether the user typed this canonical destination token in a prompt of the session.
    pub fn user_vouched(&self, token: &str) -> bool {
        !self.user_vouched.is_empty() && self.user_vouched.contains(&token_digest(token))
    }

    /// Why the output `seq` taints `destination` although its contract trusts some of its
    /// fields, when that is the reason (for the sink gate's explanation): the value is in a
    /// trusted field but an untrusted part of the same output repeats it, or a text block of
    /// that output was not a JSON/YAML document.
    pub fn output_note(&self, seq: u64, destination: &str) -> Option<String> {
        let note = self.field_notes.iter().find(|n| n.seq == seq)?;
        if note.overridden.contains(destination) {
            return Some(
                "it is in a trusted field of that output, but an untrusted part of the same output repeats it; `trusted_wins: true` would trust it".to_owned(),
            );
        }
        if note.unparsed.is_empty() {
            return None;
        }
        let list = note
            .unparsed
            .iter()
            .map(|i| format!("#{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        Some(format!(
            "text content {list} of that output is not a JSON/YAML document, so all of it is untrusted"
        ))
    }

    pub fn limits(&self) -> &SessionLimits {
        &self.limits
    }

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

    fn insert_approval(&mut self, key: ApprovalKey) -> bool {
        if self.approvals.contains(&key) {
            return true;
        }
        if self.approvals.len() >= self.limits.max_approvals {
            return false;
        }
        self.approvals.insert(key)
    }

    /// Remember that the human approved this exact action for the session. `arguments` is
    /// required when the action has an opaque or unknown part (the action alone says too
    /// little). Returns false when nothing was remembered (memory bound, or missing
    /// arguments): the next identical call asks again.
    pub fn approve(&mut self, action: &Action, arguments: Option<&Value>) -> bool {
        let Some(key) = action_key(action, arguments) else {
            return false;
        };
        let fingerprint = self.fingerprint_of(&action.tool).map(str::to_owned);
        self.insert_approval(ApprovalKey::Action { key, fingerprint })
    }

    /// Whether this exact action was approved for this tool definition. Actions with an
    /// opaque or unknown part need [`Session::approval_for_call`].
    pub fn approval_for(
        &self,
        action: &Action,
        fingerprint: Option<&str>,
    ) -> Option<ApprovalScope> {
        self.approval_for_call(action, None, fingerprint)
    }

    /// Like [`Session::approval_for`], with the call's arguments for opaque actions.
    pub fn approval_for_call(
        &self,
        action: &Action,
        arguments: Option<&Value>,
        fingerprint: Option<&str>,
    ) -> Option<ApprovalScope> {
        let key = action_key(action, arguments)?;
        let k = ApprovalKey::Action {
            key,
            fingerprint: fingerprint.map(str::to_owned),
        };
        self.approvals.contains(&k).then_some(ApprovalScope::Action)
    }

    /// Remember that the human approved a destination (canonical form, as in
    /// [`SinkFinding::destination`]) of a tool for the session.
    pub fn approve_destination(&mut self, tool: &str, destination: &str) -> bool {
        let fingerprint = self.fingerprint_of(tool).map(str::to_owned);
        self.insert_approval(ApprovalKey::Destination {
            tool: tool.to_owned(),
            fingerprint,
            destination: destination.to_owned(),
        })
    }

    /// Approve every unproven destination of a sink-gate result (what the approval prompt
    /// showed). Tainted destinations are approved too when `include_tainted` (the contract
    /// said `on_tainted: ask` and the human agreed). Returns false if any was not remembered.
    pub fn approve_sinks(
        &mut self,
        tool: &str,
        findings: &[SinkFinding],
        include_tainted: bool,
    ) -> bool {
        let mut all = true;
        for f in findings {
            let approvable = f.verdict == SinkVerdict::Unproven
                || (include_tainted && f.verdict == SinkVerdict::Tainted);
            if approvable && !self.approve_destination(tool, &f.destination) {
                all = false;
            }
        }
        all
    }

    /// Whether a destination of a tool was approved for the current definition.
    pub fn destination_approved(&self, tool: &str, destination: &str) -> bool {
        let k = ApprovalKey::Destination {
            tool: tool.to_owned(),
            fingerprint: self.fingerprint_of(tool).map(str::to_owned),
            destination: destination.to_owned(),
        };
        self.approvals.contains(&k)
    }

    /// Count one attempt to call `tool` at `now_ms`. Returns `(calls this session,
    /// calls within the window)` including this one, or None when the session cannot track
    /// another tool (memory bound). `window` is `(max, per_ms)`; timestamps older than the
    /// window are forgotten and at most `max + 1` are kept.
    pub fn record_attempt(
        &mut self,
        tool: &str,
        now_ms: u64,
        window: Option<(u64, u64)>,
    ) -> Option<(u64, u64)> {
        if let Some((t, total, in_window)) = self.counted_externally.take()
            && t == tool
        {
            if !self.counters.contains_key(tool) && self.counters.len() >= self.limits.max_tools {
                return None;
            }
            let c = self.counters.entry(tool.to_owned()).or_default();
            c.total = c.total.max(total);
            return Some((total, if window.is_some() { in_window } else { 0 }));
        }
        if !self.counters.contains_key(tool) && self.counters.len() >= self.limits.max_tools {
            return None;
        }
        let c = self.counters.entry(tool.to_owned()).or_default();
        c.total = c.total.saturating_add(1);
        let mut in_window = 0;
        if let Some((max, per_ms)) = window {
            // The window is (now - per, now]; nothing has expired before `per` has passed.
            if let Some(start) = now_ms.checked_sub(per_ms) {
                while c.window.front().is_some_and(|t| *t <= start) {
                    c.window.pop_front();
                }
            }
            c.window.push_back(now_ms);
            let keep = usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX);
            while c.window.len() > keep {
                c.window.pop_front();
            }
            in_window = c.window.len() as u64;
        }
        Some((c.total, in_window))
    }

    /// The session approvals as opaque keys, to share with the other proxies of the same
    /// agent session. Each key stays bound to the normalised action (or destination) and the
    /// tool's definition fingerprint. Approvals bound to the call's exact arguments (opaque
    /// actions) are not exported: a key never carries raw arguments.
    pub fn export_approvals(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .approvals
            .iter()
            .filter(|k| !matches!(k, ApprovalKey::Action { key, .. } if key.contains('\u{0}')))
            .filter_map(|k| serde_json::to_string(k).ok())
            .collect();
        out.sort();
        out
    }

    /// Imports a key from [`Session::export_approvals`] (of another proxy of the same agent
    /// session). It covers only the same action or destination of a tool with the same
    /// definition fingerprint. Returns false when the key is malformed or the memory bound
    /// is reached.
    pub fn import_approval(&mut self, key: &str) -> bool {
        match serde_json::from_str::<ApprovalKey>(key) {
            Ok(ApprovalKey::Action { key, .. }) if key.contains('\u{0}') => false,
            Ok(k) => self.insert_approval(k),
            Err(_) => false,
        }
    }

    /// The next attempt of `tool` was counted elsewhere, atomically across the processes
    /// that share this agent session (the gateway's store): `total` attempts this session
    /// and `in_window` within the budget window, this one included. The next
    /// [`Session::record_attempt`] of `tool` returns these counts instead of counting.
    pub fn count_externally(&mut self, tool: &str, total: u64, in_window: u64) {
        self.counted_externally = Some((tool.to_owned(), total, in_window));
    }

    /// Counts an attempt to call `tool` made at `at_ms` by another proxy of the same agent
    /// session (and the same server), so budgets count across proxies. Only ever adds to the
    /// count. Returns false when the session cannot track another tool.
    pub fn import_attempt(&mut self, tool: &str, at_ms: u64) -> bool {
        /// Remote timestamps kept per tool until the next local attempt trims the window.
        const MAX_IMPORTED: usize = 4096;
        if !self.counters.contains_key(tool) && self.counters.len() >= self.limits.max_tools {
            return false;
        }
        let c = self.counters.entry(tool.to_owned()).or_default();
        c.total = c.total.saturating_add(1);
        let at = c.window.partition_point(|t| *t <= at_ms);
        c.window.insert(at, at_ms);
        while c.window.len() > MAX_IMPORTED {
            c.window.pop_front();
        }
        true
    }

    /// Calls to `tool` counted so far.
    pub fn calls(&self, tool: &str) -> u64 {
        self.counters.get(tool).map_or(0, |c| c.total)
    }

    pub fn taint(&self) -> &TaintIndex {
        &self.taint
    }

    pub fn taint_mut(&mut self) -> &mut TaintIndex {
        &mut self.taint
    }

    fn next_source(&mut self, server: Option<&str>, tool: &str) -> TaintSource {
        self.seq += 1;
        TaintSource {
            server: server.map(str::to_owned),
            tool: tool.to_owned(),
            seq: self.seq,
        }
    }

    /// Feed a `tools/call` result (text content, embedded resource text, resource links and
    /// `structuredContent`) into the taint index with one trust label. Returns the sequence
    /// number given to this output.
    pub fn record_output(
        &mut self,
        server: Option<&str>,
        tool: &str,
        result: &Value,
        trust: OutputTrust,
    ) -> u64 {
        let source = self.next_source(server, tool);
        let seq = source.seq;
        record_result(&mut self.taint, result, trust, &source);
        seq
    }

    /// Feed a result whose output is trusted only at `spec`'s fields: in
    /// `structuredContent`, and in each text content block that holds a JSON (or, with
    /// `text_format: yaml`, YAML) document (see [`crate::contracts::TrustedFields`]). The
    /// values at those fields vouch, everything else taints: the rest of each document (its
    /// member names too), text that is not such a document (as a whole), and every other
    /// content item. A text block that repeats `structuredContent` is not recorded twice.
    ///
    /// Unless `trusted_wins`, a trusted string whose destination (or, for a string that is
    /// no destination, whose text at word boundaries) the untrusted part of the same output
    /// also holds does not vouch: an injection in a free-text field that repeats a
    /// participant's address keeps that address tainted. When the untrusted part is larger
    /// than [`TaintLimits::max_text_bytes`] (so it cannot be compared in full), nothing in the
    /// output vouches.
    ///
    /// Bounds: each text block is parsed at most once, and only while the text parsed for
    /// this output stays within [`TaintLimits::max_text_bytes`] (a block past that is text);
    /// YAML is parsed under serde-saphyr's budget.
    pub fn record_output_fields(
        &mut self,
        server: Option<&str>,
        tool: &str,
        result: &Value,
        spec: &TrustedFields,
    ) -> RecordedOutput {
        let source = self.next_source(server, tool);
        let mut out = RecordedOutput::plain(source.seq);
        let Some(obj) = result.as_object() else {
            self.taint
                .record_json(result, OutputTrust::Untrusted, source);
            return out;
        };
        let paths: Vec<FieldPath> = spec
            .trusted_fields
            .iter()
            .filter_map(|f| fields::parse_path(f).ok())
            .collect();
        let limit = self.taint.limits().max_text_bytes;
        let mut trusted: Vec<Value> = Vec::new();
        // The untrusted parts of the documents, each followed by an array of its member names
        // and numbers.
        let mut rests: Vec<Value> = Vec::new();
        let split = |mut doc: Value, trusted: &mut Vec<Value>, rests: &mut Vec<Value>| {
            for p in &paths {
                fields::take(&mut doc, p, trusted);
            }
            let mut names = Vec::new();
            collect_names(&doc, &mut names, 0);
            rests.push(doc);
            rests.push(Value::Array(names));
        };
        let structured = obj.get("structuredContent");
        if let Some(sc) = structured {
            split(sc.clone(), &mut trusted, &mut rests);
        }
        // Text blocks that are not a document, and every other content item.
        let mut texts: Vec<&str> = Vec::new();
        let mut items_left: Vec<&Value> = Vec::new();
        let mut parse_budget = limit;
        if let Some(items) = obj.get("content").and_then(Value::as_array) {
            for (i, item) in items.iter().enumerate() {
                if item.get("type").and_then(Value::as_str) != Some("text") {
                    items_left.push(item);
                    continue;
                }
                let Some(t) = item.get("text").and_then(Value::as_str) else {
                    continue;
                };
                let doc = if t.len() <= parse_budget {
                    parse_budget -= t.len();
                    fields::parse_text(t, spec.format())
                } else {
                    None
                };
                match doc {
                    Some(d) if structured == Some(&d) => {}
                    Some(d) => split(d, &mut trusted, &mut rests),
                    None => {
                        texts.push(t);
                        out.unparsed_texts.push(i);
                    }
                }
            }
        }
        let mut overridden: HashSet<String> = HashSet::new();
        if !trusted.is_empty() && !spec.trusted_wins() {
            let mut strings: Vec<&str> = Vec::new();
            for r in &rests {
                collect_strings(r, &mut strings, 0);
            }
            for item in &items_left {
                item_strings(item, &mut strings);
            }
            strings.extend(texts.iter().copied());
            match Untrusted::of(&strings, limit, &trusted) {
                Some(untrusted) => {
                    for v in &mut trusted {
                        out.overridden += untrusted.drop_repeated(v, &mut overridden);
                    }
                }
                None => {
                    out.too_large = true;
                    trusted.clear();
                }
            }
        }
        for v in &trusted {
            self.taint
                .record_json(v, OutputTrust::Trusted, source.clone());
        }
        for r in &rests {
            self.taint
                .record_json(r, OutputTrust::Untrusted, source.clone());
        }
        for t in texts {
            self.taint
                .record_text(t, OutputTrust::Untrusted, source.clone());
        }
        for item in items_left {
            record_item(&mut self.taint, item, OutputTrust::Untrusted, &source);
        }
        if !out.unparsed_texts.is_empty() || !overridden.is_empty() {
            if self.field_notes.len() >= MAX_FIELD_NOTES {
                self.field_notes.pop_front();
            }
            self.field_notes.push_back(FieldNote {
                seq: out.seq,
                unparsed: out.unparsed_texts.clone(),
                overridden,
            });
        }
        out
    }
}

/// What recording one output did, for the caller to report (see
/// [`crate::contracts::Contracts::record_output_noted`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedOutput {
    /// The sequence number given to this output.
    pub seq: u64,
    /// With `trusted_fields`: the positions in `content` of the text blocks that were not a
    /// JSON (or YAML) document, so untrusted as a whole.
    pub unparsed_texts: Vec<usize>,
    /// With `trusted_fields`: trusted strings that did not vouch because an untrusted field
    /// of the same output repeats them.
    pub overridden: usize,
    /// With `trusted_fields`: the untrusted part was too large to compare, so nothing
    /// vouched.
    pub too_large: bool,
}

impl RecordedOutput {
    pub(crate) fn plain(seq: u64) -> RecordedOutput {
        RecordedOutput {
            seq,
            ..RecordedOutput::default()
        }
    }

    /// A sentence for the log when something in the output was read as untrusted against
    /// the contract's `trusted_fields` (`None` when nothing was).
    pub fn note(&self, tool: &str) -> Option<String> {
        let mut parts = Vec::new();
        if !self.unparsed_texts.is_empty() {
            let list = self
                .unparsed_texts
                .iter()
                .map(|i| format!("#{i}"))
                .collect::<Vec<_>>()
                .join(", ");
            parts.push(format!(
                "text content {list} is not a JSON/YAML document: untrusted as a whole"
            ));
        }
        if self.overridden > 0 {
            parts.push(format!(
                "{} trusted value(s) also appear in an untrusted field: untrusted (`trusted_wins: true` trusts them)",
                self.overridden
            ));
        }
        if self.too_large {
            parts.push(
                "the untrusted part is too large to compare with the trusted fields: nothing vouched"
                    .to_owned(),
            );
        }
        (!parts.is_empty()).then(|| format!("output of `{tool}`: {}", parts.join("; ")))
    }
}

/// The untrusted part of one output, to find the trusted strings it repeats.
struct Untrusted {
    /// The destination tokens of the untrusted part.
    tokens: HashSet<String>,
    /// The trusted strings that are no destination and that the untrusted part holds at
    /// word boundaries (lower-cased).
    repeated: HashSet<String>,
    /// Such strings past [`MAX_SEARCHED_VALUES`]: not searched, so counted as repeated.
    unsearched: HashSet<String>,
}

/// Trusted strings that are no destination searched in one output (all at once); past it
/// such a string counts as repeated (it does not vouch).
const MAX_SEARCHED_VALUES: usize = 10_000;

impl Untrusted {
    /// `None` when the strings are longer than `limit` bytes in all.
    fn of(strings: &[&str], limit: usize, trusted: &[Value]) -> Option<Untrusted> {
        let total = strings.iter().map(|s| s.len()).sum::<usize>();
        if total > limit {
            return None;
        }
        let mut tokens = HashSet::new();
        for s in strings {
            tokens.extend(crate::taint::tokenize_destinations(s));
        }
        // The trusted strings that are no destination: searched in one pass over the text.
        let mut needles: Vec<String> = Vec::new();
        let mut seen = HashSet::new();
        for v in trusted {
            let mut found = Vec::new();
            collect_strings(v, &mut found, 0);
            for s in found {
                if let Some(n) = needle(s)
                    && crate::taint::tokenize_destinations(s).is_empty()
                    && seen.insert(n.clone())
                {
                    needles.push(n);
                }
            }
        }
        let unsearched: HashSet<String> = needles
            .get(MAX_SEARCHED_VALUES..)
            .unwrap_or_default()
            .iter()
            .cloned()
            .collect();
        needles.truncate(MAX_SEARCHED_VALUES);
        let mut repeated = HashSet::new();
        if !needles.is_empty() {
            let mut text = String::with_capacity(total.saturating_add(strings.len()));
            for s in strings {
                text.push_str(&s.to_lowercase());
                text.push('\n');
            }
            match aho_corasick::AhoCorasick::new(&needles) {
                Ok(ac) => {
                    let hay = text.as_bytes();
                    let word =
                        |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
                    for m in ac.find_overlapping_iter(hay) {
                        let bounded = !word(m.start().checked_sub(1).and_then(|i| hay.get(i)))
                            && !word(hay.get(m.end()));
                        if bounded && let Some(n) = needles.get(m.pattern().as_usize()) {
                            repeated.insert(n.clone());
                        }
                    }
                }
                // Cannot search: none of them vouches.
                Err(_) => repeated.extend(needles),
            }
        }
        Some(Untrusted {
            tokens,
            repeated,
            unsearched,
        })
    }

    /// Replaces every string in `value` that the untrusted part repeats by `null`; returns
    /// how many, and notes their destinations (or values) in `noted`.
    fn drop_repeated(&self, value: &mut Value, noted: &mut HashSet<String>) -> usize {
        match value {
            Value::String(s) if self.repeats(s) => {
                if noted.len() < MAX_NOTED_VALUES {
                    let tokens = crate::taint::tokenize_destinations(s);
                    if tokens.is_empty() {
                        noted.extend(needle(s));
                    } else {
                        noted.extend(tokens);
                    }
                }
                *value = Value::Null;
                1
            }
            Value::Array(items) => items.iter_mut().map(|v| self.drop_repeated(v, noted)).sum(),
            Value::Object(map) => map.values_mut().map(|v| self.drop_repeated(v, noted)).sum(),
            _ => 0,
        }
    }

    fn repeats(&self, s: &str) -> bool {
        let tokens = crate::taint::tokenize_destinations(s);
        if !tokens.is_empty() {
            return tokens.iter().any(|t| self.tokens.contains(t));
        }
        // A string with whitespace, or too long, is never vouched as a whole value (see
        // `TaintIndex::record_json`).
        needle(s).is_some_and(|n| self.repeated.contains(&n) || self.unsearched.contains(&n))
    }
}

/// A trusted string as searched in the untrusted text: trimmed, lower-cased, without
/// whitespace, at most 256 bytes.
fn needle(s: &str) -> Option<String> {
    let n = s.trim().to_lowercase();
    (!n.is_empty() && !n.chars().any(char::is_whitespace) && n.len() <= 256).then_some(n)
}

/// Every member name and every number in `value` (as strings), to index them as untrusted
/// text: the model reads them too (an address as a name, an account number as a number),
/// and the index reads only string values.
fn collect_names(value: &Value, out: &mut Vec<Value>, depth: usize) {
    if depth > 64 {
        return;
    }
    match value {
        Value::Number(n) => out.push(Value::String(n.to_string())),
        Value::Array(items) => items.iter().for_each(|v| collect_names(v, out, depth + 1)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(Value::String(k.clone()));
                collect_names(v, out, depth + 1);
            }
        }
        _ => {}
    }
}

fn record_result(taint: &mut TaintIndex, result: &Value, trust: OutputTrust, source: &TaintSource) {
    let Some(obj) = result.as_object() else {
        taint.record_json(result, trust, source.clone());
        return;
    };
    if let Some(items) = obj.get("content").and_then(Value::as_array) {
        for item in items {
            record_item(taint, item, trust, source);
        }
    }
    if let Some(sc) = obj.get("structuredContent") {
        taint.record_json(sc, trust, source.clone());
    }
}

/// The strings of a `content` item that [`record_item`] indexes.
fn item_strings<'v>(item: &'v Value, out: &mut Vec<&'v str>) {
    let mut fields = |v: &'v Value, keys: &[&str]| {
        for k in keys {
            if let Some(t) = v.get(*k).and_then(Value::as_str) {
                out.push(t);
            }
        }
    };
    match item.get("type").and_then(Value::as_str) {
        Some("text") => fields(item, &["text"]),
        Some("resource") => {
            if let Some(r) = item.get("resource") {
                fields(r, &["text", "uri"]);
            }
        }
        Some("resource_link") => fields(item, &["uri", "name", "description"]),
        Some("image" | "audio") => {}
        _ => collect_strings(item, out, 0),
    }
}

/// One item of a result's `content`.
fn record_item(taint: &mut TaintIndex, item: &Value, trust: OutputTrust, source: &TaintSource) {
    match item.get("type").and_then(Value::as_str) {
        Some("text") => {
            if let Some(t) = item.get("text").and_then(Value::as_str) {
                taint.record_text(t, trust, source.clone());
            }
        }
        Some("resource") => {
            if let Some(r) = item.get("resource") {
                for k in ["text", "uri"] {
                    if let Some(t) = r.get(k).and_then(Value::as_str) {
                        taint.record_text(t, trust, source.clone());
                    }
                }
            }
        }
        Some("resource_link") => {
            for k in ["uri", "name", "description"] {
                if let Some(t) = item.get(k).and_then(Value::as_str) {
                    taint.record_text(t, trust, source.clone());
                }
            }
        }
        Some("image" | "audio") => {}
        _ => taint.record_json(item, trust, source.clone()),
    }
}

#[cfg(test)]
mod sharing_tests {
    use super::*;

    fn session() -> Session {
        Session::new(SessionLimits::new(TaintLimits::default()))
    }

    #[test]
    fn destination_approvals_travel_bound_to_the_fingerprint() {
        let tool = serde_json::json!({"name": "send", "description": "sends"});
        let mut a = session();
        a.pin_tools(std::slice::from_ref(&tool));
        assert!(a.approve_destination("send", "bob@example.com"));
        let keys = a.export_approvals();
        assert_eq!(keys.len(), 1);

        let mut same = session();
        same.pin_tools(std::slice::from_ref(&tool));
        assert!(same.import_approval(&keys[0]));
        assert!(same.destination_approved("send", "bob@example.com"));
        assert!(!same.destination_approved("send", "eve@example.com"));

        let mut changed = session();
        changed.pin_tools(&[serde_json::json!({"name": "send", "description": "other"})]);
        assert!(changed.import_approval(&keys[0]));
        assert!(!changed.destination_approved("send", "bob@example.com"));

        assert!(!same.import_approval("{\"bogus\":1}"));
    }

    #[test]
    fn imported_attempts_only_add_to_the_count() {
        let mut s = session();
        assert!(s.import_attempt("t", 1_000));
        assert!(s.import_attempt("t", 500));
        assert_eq!(s.calls("t"), 2);
        let (total, in_window) = s.record_attempt("t", 1_100, Some((2, 1_000))).unwrap();
        assert_eq!((total, in_window), (3, 3));
        // 500 left the window (600, 1600]; the local count alone would be 1.
        let (_, in_window) = s.record_attempt("t", 1_600, Some((2, 1_000))).unwrap();
        assert_eq!(in_window, 3);
    }
}
