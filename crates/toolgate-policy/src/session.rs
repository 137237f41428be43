//! Per-session state: pinned tool definitions, budget counters, the taint index and the
//! approvals the human gave for this session. Pure: time comes in as `now_ms`.
//!
//! Memory is bounded by [`SessionLimits`]: past a bound nothing new is remembered, and what
//! is not remembered degrades to asking (an unpinned tool, an unproven destination, an
//! approval that has to be given again), never to allowing.

mod approvals;
mod budgets;
mod outputs;
mod pins;
mod secrets;

pub(crate) use secrets::unchecked_reason;
pub use secrets::{
    MAX_CHECKED_BYTES, MAX_SECRETS, NewSecret, SecretCheck, SecretFinding, SecretSource,
    secret_digest,
};

pub use outputs::RecordedOutput;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::contracts_impl::Resolution;
use crate::taint::{TaintIndex, TaintLimits};

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
    /// Keyed digests ([`token_digest`]) of the destinations and phrases the user typed in a
    /// prompt of this agent session ([`prompt_digests`]): such a value passes the sink gate as
    /// [`crate::SinkVerdict::UserVouched`], even when untrusted output repeats it. Only
    /// digests are kept, never the prompt. Bounded by [`MAX_USER_VOUCHED`] (oldest forgotten first).
    user_vouched: HashSet<[u8; 32]>,
    user_vouched_order: VecDeque<[u8; 32]>,
    /// The key of those digests.
    vouch_key: VouchKey,
    /// Keyed digests of the secret values recorded outputs held, and where each came from
    /// (`session/secrets.rs`).
    secrets: HashMap<[u8; 32], (SecretSource, Option<usize>)>,
    secrets_order: VecDeque<[u8; 32]>,
    /// How many of those fingerprints are of values of each length, and how many of values
    /// of a length not known: the check hashes only tokens of these lengths.
    secret_lengths: BTreeMap<usize, usize>,
    secrets_of_any_length: usize,
    /// Fingerprints recorded here and not yet shared.
    new_secrets: Vec<NewSecret>,
    /// Why what toolgate knew of this agent session is gone (its state store was deleted or
    /// replaced while the session ran): the sink gate then proves no destination from
    /// session state ([`Session::mark_state_lost`]).
    state_lost: Option<String>,
}

/// The most prompt digests a session keeps ([`Session::vouch_user_digest`]).
pub const MAX_USER_VOUCHED: usize = 20_000;

/// The key of the digests kept of what the user typed ([`prompt_digests`]): a secret of the
/// user's broker (a 0600 file beside its token), so that the digests of common words, kept
/// on disk with the broker's sessions, cannot be turned back into the prompt by hashing a
/// dictionary. [`VouchKey::default`] (all zeros) serves tests and processes that never
/// receive digests.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct VouchKey([u8; 32]);

impl VouchKey {
    /// The key with these bytes.
    pub const fn new(bytes: [u8; 32]) -> Self {
        VouchKey(bytes)
    }
}

impl std::fmt::Debug for VouchKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VouchKey(..)")
    }
}

/// The keyed digest (HMAC-SHA-256 under `key`) of one canonical destination token or phrase,
/// as [`Session::vouch_user_digest`] keeps it.
pub fn token_digest(key: &VouchKey, token: &str) -> [u8; 32] {
    use hmac::{Hmac, KeyInit, Mac as _};
    use sha2::Digest as _;
    match <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&key.0) {
        Ok(mut mac) => {
            mac.update(token.as_bytes());
            mac.finalize().into_bytes().into()
        }
        // HMAC takes a key of any length, so this does not happen; a plain keyed hash is
        // still a digest of the same token.
        Err(_) => sha2::Sha256::new()
            .chain_update(key.0)
            .chain_update(token.as_bytes())
            .finalize()
            .into(),
    }
}

/// The most words at the start of one prompt whose phrases [`prompt_digests`] vouches for.
pub const MAX_PROMPT_WORDS: usize = 512;

/// The longest phrase, in words, a prompt vouches for ([`prompt_digests`]).
pub const MAX_PHRASE_WORDS: usize = 8;

/// The words of a text as prompts and values are compared: split on white space, each
/// lower-cased, with quotes, brackets and the punctuation that ends a clause trimmed from its
/// edges (`'Le Marais Boutique',` → `le`, `marais`, `boutique`).
fn phrase_words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| {
                matches!(
                    c,
                    '"' | '\''
                        | '`'
                        | '‘'
                        | '’'
                        | '“'
                        | '”'
                        | '«'
                        | '»'
                        | '('
                        | ')'
                        | '['
                        | ']'
                        | '{'
                        | '}'
                        | '<'
                        | '>'
                        | ','
                        | ';'
                        | ':'
                        | '.'
                        | '!'
                        | '?'
                        | '*'
                        // `#design` and `@alice` name the channel `design`, the user `alice`.
                        | '#'
                        | '@'
                )
            })
            .to_lowercase()
        })
        .filter(|w| !w.is_empty())
}

/// A value as a phrase of a prompt: its words (split on white space, lower-cased, quotes,
/// brackets and clause punctuation trimmed from their edges) joined by one space, when it has
/// between one and [`MAX_PHRASE_WORDS`] of them. A value the user typed, whatever its
/// shape, has the key of one of the phrases [`prompt_digests`] keeps.
pub fn phrase_key(text: &str) -> Option<String> {
    let words: Vec<String> = phrase_words(text).take(MAX_PHRASE_WORDS + 1).collect();
    (!words.is_empty() && words.len() <= MAX_PHRASE_WORDS).then(|| words.join(" "))
}

/// The digests of what a user typed in a prompt: every destination token the taint tokenizer
/// finds (addresses, URLs and their hosts, bare domains, phone numbers, IBANs, channel and
/// user names), every repository slug `owner/repo` (lower case), each as [`token_digest`] of
/// its canonical form, and every phrase of one to [`MAX_PHRASE_WORDS`] words among its first
/// [`MAX_PROMPT_WORDS`] ([`phrase_key`]), so a name the user typed (`Le Marais Boutique`)
/// vouches for that value whatever its shape. The text itself is not kept.
pub fn prompt_digests(key: &VouchKey, prompt: &str) -> Vec<[u8; 32]> {
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
    let words: Vec<String> = phrase_words(prompt).take(MAX_PROMPT_WORDS).collect();
    for start in 0..words.len() {
        for end in start + 1..=(start + MAX_PHRASE_WORDS).min(words.len()) {
            if let Some(phrase) = words.get(start..end) {
                tokens.push(phrase.join(" "));
            }
        }
    }
    let mut seen = HashSet::with_capacity(tokens.len());
    tokens
        .into_iter()
        .map(|t| token_digest(key, &t))
        .filter(|d| seen.insert(*d))
        .collect()
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
    /// Destinations of `ask_fields` that no untrusted part of the output repeats (at most
    /// [`MAX_NOTED_VALUES`]): a call to one asks.
    ask: HashSet<String>,
    /// Those fields, for the question.
    ask_fields: Vec<String>,
}

/// Outputs whose [`FieldNote`] is kept.
const MAX_FIELD_NOTES: usize = 32;
/// Overridden values kept per [`FieldNote`].
const MAX_NOTED_VALUES: usize = 256;

impl Session {
    /// A new, empty session.
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
            vouch_key: VouchKey::default(),
            secrets: HashMap::new(),
            secrets_order: VecDeque::new(),
            secret_lengths: BTreeMap::new(),
            secrets_of_any_length: 0,
            new_secrets: Vec::new(),
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
        !self.user_vouched.is_empty()
            && self
                .user_vouched
                .contains(&token_digest(&self.vouch_key, token))
    }

    /// Sets the key the digests of what the user typed are made with ([`VouchKey`]): the
    /// broker's, before any digest of it is taken in.
    pub fn set_vouch_key(&mut self, key: VouchKey) {
        self.vouch_key = key;
    }

    /// The key of the digests this session takes in.
    pub fn vouch_key(&self) -> &VouchKey {
        &self.vouch_key
    }

    /// Whether the user typed this value, as a phrase of a prompt of the session
    /// ([`phrase_key`]), whatever its shape.
    pub fn user_vouched_phrase(&self, value: &str) -> bool {
        !self.user_vouched.is_empty() && phrase_key(value).is_some_and(|k| self.user_vouched(&k))
    }

    /// When `destination`, tainted by output `seq`, came from an `ask_fields` field of that
    /// output (and nothing untrusted in it repeats it): those fields, for the question.
    pub fn asked_by_field(&self, seq: u64, destination: &str) -> Option<&[String]> {
        let note = self.field_notes.iter().find(|n| n.seq == seq)?;
        note.ask
            .contains(destination)
            .then_some(note.ask_fields.as_slice())
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

    /// The limits it was created with.
    pub fn limits(&self) -> &SessionLimits {
        &self.limits
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
