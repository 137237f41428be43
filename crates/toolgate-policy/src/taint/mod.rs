//! The taint index: destination-shaped tokens seen in tool outputs, for the sink gate.
//!
//! # Tokens
//! Text is decoded first (HTML entities, percent-encoding and NFKC, repeated until stable;
//! invisible format characters such as zero-width spaces removed), then these tokens are
//! found, each canonicalised to lower case:
//! - URLs (`http`, `https`, `ws`, `wss`, `ftp`) through the URL parser of
//!   [`crate::normalize::normalize_url`] (userinfo and fragment dropped, IDN as
//!   punycode, trailing dots removed), and the host of each URL;
//! - email addresses (`mailto:` falls away; the domain as punycode);
//! - bare domains such as `evil.com` (recorded as host tokens; names ending in a common file
//!   extension such as `notes.txt` are not domains here);
//! - phone numbers written E.164-style with a leading `+` (or `tel:`), 7 to 15 digits, as
//!   `+digits`;
//! - IBANs with a valid mod-97 checksum, without spaces;
//! - Slack-like channels `#name`, ids `C0123ABCD`/`U0123ABCD` (upper case in the text, with a
//!   digit), and handles `@name`.
//!
//! Matching is token equality, never substring: `bob@corp.com` is not tainted by
//! `bob@corp.com.evil.net`, but `BOB@Corp.COM`, `mailto:bob%40corp.com`, `bob&#64;corp.com` and
//! full-width look-alikes are the same token.
//!
//! # Verdicts
//! A sink value stands for its tokens ([`canonical_destination`]). Tokens inside a URL (an
//! email in its query string) do not count on their own; the URL's host does count for
//! taint (an attacker's host with another path is still the attacker's host) but never
//! vouches (a trusted `https://docs.example.com/mine` does not vouch for
//! `https://docs.example.com/theirs`). A value with no token stands for itself (lower-cased),
//! and a bare slug also for `#slug` and `@slug`.
//!
//! - Any token seen in untrusted output and not vouched for → [`Provenance::Tainted`].
//! - Every token seen in trusted output → [`Provenance::Vouched`].
//! - Otherwise → [`Provenance::Unproven`].
//!
//! A token seen in **both** trusted and untrusted output is vouched by default: a trusted
//! output (the user's contacts, channel list) is where legitimate destinations come from, and
//! the same addresses turn up in every untrusted mail body. [`TaintLimits::prefer_taint`]
//! flips this for users who want the stricter reading.
//!
//! Trusted structured output also vouches for whole short string values (a channel `name`
//! field `general`), untrusted output only for destination-shaped tokens.
//!
//! # Memory
//! At most [`TaintLimits::max_tokens`] tokens are kept; the least recently recorded is
//! evicted first. An evicted token is simply unknown again: [`Provenance::Unproven`], never
//! vouched. Text beyond [`TaintLimits::max_text_bytes`] per record is not scanned (its tokens
//! are unproven). Lookups are hash lookups, independent of how much output was recorded.

mod deferred;
mod scan;
mod tokens;
mod window;

pub use window::{DEFAULT_WINDOW_BYTES, MAX_SEARCHES_PER_CALL as MAX_VERBATIM_SEARCHES_PER_CALL};

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// The hasher of the index and of the tokenizer's sets: randomly seeded (tokens are chosen
/// by whoever wrote the output), and several times cheaper than SipHash on short keys.
type Hasher = foldhash::fast::RandomState;

use memchr::{memchr, memchr2};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::normalize::collect_strings;
use tokens::{decode, tokenize, tokenize_decoded, tokenize_shaped, truncate, value_token};

/// Bounds of the per-session taint index. Past them values degrade to unproven (ask), never
/// to trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(rename = "taint")]
pub struct TaintLimits {
    /// Maximum number of distinct tokens kept (least recently recorded evicted first).
    #[serde(deserialize_with = "crate::strict::whole_usize")]
    pub max_tokens: usize,
    /// Maximum bytes of one text scanned per record.
    #[serde(deserialize_with = "crate::strict::whole_usize")]
    pub max_text_bytes: usize,
    /// Tokens longer than this (in bytes, canonical) are not kept.
    #[serde(deserialize_with = "crate::strict::whole_usize")]
    pub max_token_len: usize,
    /// When a token was seen in both trusted and untrusted output: tainted (`true`) or
    /// vouched (`false`, the default).
    #[serde(deserialize_with = "crate::strict::boolean")]
    pub prefer_taint: bool,
    /// Bytes of the most recent untrusted text searched verbatim for destinations of any
    /// shape; `0` turns that search off.
    #[serde(deserialize_with = "crate::strict::whole_usize")]
    pub window_bytes: usize,
}

impl Default for TaintLimits {
    fn default() -> Self {
        TaintLimits {
            max_tokens: 100_000,
            max_text_bytes: 16 * 1024 * 1024,
            max_token_len: 512,
            prefer_taint: false,
            window_bytes: DEFAULT_WINDOW_BYTES,
        }
    }
}

/// Whether a tool's output vouches for the destinations in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputTrust {
    Trusted,
    Untrusted,
}

/// Which output a token came from, for explain.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TaintSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    pub tool: String,
    /// The caller's sequence number of that output (e.g. the call's position in the session).
    pub seq: u64,
}

/// Where a sink value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "provenance", content = "source")]
pub enum Provenance {
    /// Every token of the value was seen in trusted output (first such source).
    Vouched(TaintSource),
    /// A token of the value was seen in untrusted output (first such source).
    Tainted(TaintSource),
    /// Neither: never seen, or forgotten.
    Unproven,
}

#[derive(Debug, Clone)]
struct Entry {
    /// The map's own key, shared with the recency queue.
    key: Arc<str>,
    vouched: Option<Arc<TaintSource>>,
    tainted: Option<Arc<TaintSource>>,
    stamp: u64,
}

/// Destination tokens seen in tool outputs, bounded in memory.
#[derive(Debug, Clone)]
pub struct TaintIndex {
    limits: TaintLimits,
    entries: HashMap<Arc<str>, Entry, Hasher>,
    order: VecDeque<(Arc<str>, u64)>,
    clock: u64,
    evicted: u64,
    /// Tokens given a source since the last [`TaintIndex::take_recorded`] (bounded).
    recorded: Vec<Box<str>>,
    /// The most recent untrusted text, for [`TaintIndex::verbatim`].
    window: window::Window,
    /// The tails of large untrusted outputs whose tokens were not indexed (`deferred`).
    deferred: window::Window,
    /// The output being indexed (its `seq`) and how many of its tokens were indexed.
    eager: (u64, usize),
    /// Tokens of one untrusted output indexed as it arrives (`deferred::EAGER_TOKENS`).
    eager_tokens: usize,
}

/// At most this many tokens wait in [`TaintIndex::take_recorded`]'s list.
const MAX_RECORDED: usize = 4096;

impl TaintIndex {
    /// An empty index.
    pub fn new(limits: TaintLimits) -> Self {
        TaintIndex {
            limits,
            entries: HashMap::default(),
            order: VecDeque::new(),
            clock: 0,
            evicted: 0,
            recorded: Vec::new(),
            window: window::Window::default(),
            deferred: window::Window::with_separator(b'\n'),
            eager: (0, 0),
            eager_tokens: deferred::EAGER_TOKENS,
        }
    }

    /// Bytes of untrusted text kept whose tokens were not indexed (see [`TaintIndex::record_text`]).
    pub fn deferred_len(&self) -> usize {
        self.deferred.len()
    }

    /// Bytes of untrusted text kept for [`TaintIndex::verbatim`].
    pub fn window_len(&self) -> usize {
        self.window.len()
    }

    /// The newest untrusted output whose text holds `value` verbatim (ASCII case ignored, at
    /// word boundaries), among the most recent [`TaintLimits::window_bytes`] of untrusted
    /// text. `None` for values too short or too long to search (see the `window` module):
    /// what the sink gate asks about a value the token index calls unproven.
    pub fn verbatim(&self, value: &str) -> Option<TaintSource> {
        let needle = window::needle(value)?;
        self.window.find(&needle, false).cloned()
    }

    /// A short excerpt of untrusted output `seq` around `value` (lower-cased, as the
    /// verbatim window keeps it), for a person deciding whether the value is the one they
    /// meant; `None` when that output is no longer kept or does not hold it.
    pub fn excerpt(&self, value: &str, seq: u64) -> Option<String> {
        let needle = window::needle(value)?;
        self.window.excerpt(&needle, seq)
    }

    /// [`TaintIndex::verbatim`] for a repository slug `owner/repo`: a match right after a
    /// `/` counts only where that `/` ends a host (`github.com/owner/repo`), not a path
    /// segment (`lib/src/main`).
    pub fn verbatim_slug(&self, slug: &str) -> Option<TaintSource> {
        let needle = window::needle(slug)?;
        self.window.find(&needle, true).cloned()
    }

    /// Whether `value` is one [`TaintIndex::verbatim`] searches for.
    pub fn verbatim_searchable(value: &str) -> bool {
        window::needle(value).is_some()
    }

    /// The tokens that were given a source (seen for the first time, or seen for the first
    /// time in trusted or untrusted output) since the last call, in order, at most 4096:
    /// what a proxy shares with the other proxies of its session without tokenizing the
    /// output a second time.
    pub fn take_recorded(&mut self) -> Vec<Box<str>> {
        std::mem::take(&mut self.recorded)
    }

    fn note_recorded(&mut self, token: &str) {
        if self.recorded.len() < MAX_RECORDED {
            self.recorded.push(token.into());
        }
    }

    /// The limits this index was built with.
    pub fn limits(&self) -> &TaintLimits {
        &self.limits
    }

    /// Number of tokens currently kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no token is indexed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of tokens evicted so far (their values are unproven again).
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Record destination-shaped tokens from text.
    ///
    /// Of an untrusted output, the first 256 tokens are indexed now;
    /// when there are more and its text is ASCII after decoding, the rest of the text is kept
    /// (within `window_bytes`, like the verbatim window) and searched for a sink value when
    /// one is classified, with the tokenizer confirming each find: the verdict is the one
    /// indexing everything would give (see the `deferred` module), at a cost per MiB that
    /// no longer grows with the number of destinations in it.
    pub fn record_text(&mut self, text: &str, trust: OutputTrust, source: TaintSource) {
        let text = truncate(text, self.limits.max_text_bytes);
        let limit = self.limits.window_bytes;
        if trust == OutputTrust::Untrusted {
            self.window.begin(limit, &source);
            self.window.push(limit, text);
            self.window.end();
            self.deferred.begin(limit, &source);
        }
        let source = Arc::new(source);
        self.index_text(text, trust, &source);
        if trust == OutputTrust::Untrusted {
            self.deferred.end();
        }
    }

    /// Indexes the tokens of one string of an output (see [`TaintIndex::record_text`]).
    fn index_text(&mut self, text: &str, trust: OutputTrust, source: &Arc<TaintSource>) {
        let limit = self.limits.window_bytes;
        if trust == OutputTrust::Trusted || limit == 0 {
            for token in tokenize(text) {
                self.insert(&token.text, trust, source);
            }
            return;
        }
        let decoded = decode(text);
        let mut rest: &str = &decoded;
        // The search of deferred text needs canonical forms spelled out in ASCII.
        let deferrable = rest.is_ascii() && memchr(b'%', rest.as_bytes()).is_none();
        while !rest.is_empty() {
            let spent = if self.eager.0 == source.seq {
                self.eager.1
            } else {
                0
            };
            if deferrable && spent >= self.eager_tokens {
                self.deferred.push(limit, rest);
                return;
            }
            let (piece, tail) = if deferrable {
                split_piece(rest)
            } else {
                (rest, "")
            };
            let tokens = tokenize_decoded(piece);
            self.eager = (source.seq, spent.saturating_add(tokens.len()));
            for token in tokens {
                self.insert(&token.text, trust, source);
            }
            rest = tail;
        }
    }

    /// Record tokens from every string in a JSON value (object keys excluded). Trusted output
    /// also vouches for each whole short string value.
    pub fn record_json(&mut self, value: &Value, trust: OutputTrust, source: TaintSource) {
        let mut strings = Vec::new();
        collect_strings(value, &mut strings, 0);
        let mut budget = self.limits.max_text_bytes;
        let limit = self.limits.window_bytes;
        let untrusted = trust == OutputTrust::Untrusted;
        if untrusted {
            self.window.begin(limit, &source);
            self.deferred.begin(limit, &source);
        }
        let source = Arc::new(source);
        for s in strings {
            if budget == 0 {
                break;
            }
            let s = truncate(s, budget);
            budget = budget.saturating_sub(s.len());
            if untrusted {
                self.window.push(limit, s);
            }
            self.index_text(s, trust, &source);
            if trust == OutputTrust::Trusted
                && let Some(v) = value_token(s)
            {
                self.insert(&v, trust, &source);
            }
        }
        if untrusted {
            self.window.end();
            self.deferred.end();
        }
    }

    fn insert(&mut self, token: &str, trust: OutputTrust, source: &Arc<TaintSource>) {
        if self.limits.max_tokens == 0
            || token.is_empty()
            || token.len() > self.limits.max_token_len
        {
            return;
        }
        self.clock += 1;
        let stamp = self.clock;
        if let Some(entry) = self.entries.get_mut(token) {
            entry.stamp = stamp;
            let first = match trust {
                OutputTrust::Trusted => &mut entry.vouched,
                OutputTrust::Untrusted => &mut entry.tainted,
            };
            let fresh = first.is_none();
            first.get_or_insert_with(|| source.clone());
            let key = entry.key.clone();
            if fresh {
                self.note_recorded(token);
            }
            self.order.push_back((key, stamp));
            self.compact();
            return;
        }
        while self.entries.len() >= self.limits.max_tokens {
            if !self.evict_one() {
                break;
            }
        }
        let (vouched, tainted) = match trust {
            OutputTrust::Trusted => (Some(source.clone()), None),
            OutputTrust::Untrusted => (None, Some(source.clone())),
        };
        let key: Arc<str> = token.into();
        self.entries.insert(
            key.clone(),
            Entry {
                key: key.clone(),
                vouched,
                tainted,
                stamp,
            },
        );
        self.note_recorded(token);
        self.order.push_back((key, stamp));
        self.compact();
    }

    fn evict_one(&mut self) -> bool {
        while let Some((key, stamp)) = self.order.pop_front() {
            if self.entries.get(&key).is_some_and(|e| e.stamp == stamp) {
                self.entries.remove(&key);
                self.evicted += 1;
                return true;
            }
        }
        false
    }

    /// Drops stale queue entries once they outnumber live ones.
    fn compact(&mut self) {
        if self.order.len() <= 2 * self.entries.len() + 64 {
            return;
        }
        let mut live: Vec<(Arc<str>, u64)> = self
            .entries
            .iter()
            .map(|(k, e)| (k.clone(), e.stamp))
            .collect();
        live.sort_by_key(|(_, stamp)| *stamp);
        self.order = live.into();
    }

    fn status(&self, token: &str) -> TokenStatus {
        match self.entries.get(token) {
            None => TokenStatus::Unknown,
            Some(e) => match (&e.vouched, &e.tainted) {
                (Some(_), Some(t)) if self.limits.prefer_taint => {
                    TokenStatus::Tainted(TaintSource::clone(t))
                }
                (Some(v), _) => TokenStatus::Vouched(TaintSource::clone(v)),
                (None, Some(t)) => TokenStatus::Tainted(TaintSource::clone(t)),
                (None, None) => TokenStatus::Unknown,
            },
        }
    }

    /// Classifies a sink value (see the module documentation).
    pub fn classify(&self, sink_value: &str) -> Provenance {
        let tokens = sink_tokens(sink_value);
        if tokens.is_empty() {
            return Provenance::Unproven;
        }
        let mut first_vouch: Option<TaintSource> = None;
        let mut all_vouched = true;
        for t in &tokens {
            // Any alternative form vouching or tainting counts, by the index's own rule: a
            // form a trusted output holds vouches (`#general` tainted by a mail does not undo
            // `general` from the channel list) unless `prefer_taint`.
            let statuses: Vec<TokenStatus> = t.forms.iter().map(|f| self.status(f)).collect();
            let vouched = statuses
                .iter()
                .any(|s| matches!(s, TokenStatus::Vouched(_)));
            if (!vouched || self.limits.prefer_taint)
                && let Some(TokenStatus::Tainted(src)) = statuses
                    .iter()
                    .find(|s| matches!(s, TokenStatus::Tainted(_)))
            {
                return Provenance::Tainted(src.clone());
            }
            if (!vouched || self.limits.prefer_taint)
                && let Some(src) = t.forms.iter().find_map(|f| self.deferred_source(f))
            {
                return Provenance::Tainted(src);
            }
            if let Some(TokenStatus::Vouched(src)) = statuses
                .iter()
                .find(|s| matches!(s, TokenStatus::Vouched(_)))
            {
                first_vouch.get_or_insert_with(|| src.clone());
                continue;
            }
            // Not vouched itself: its host may taint it.
            if let Some(host) = &t.host {
                match self.status(host) {
                    TokenStatus::Tainted(src) => return Provenance::Tainted(src),
                    TokenStatus::Vouched(_) if !self.limits.prefer_taint => {}
                    _ => {
                        if let Some(src) = self.deferred_source(host) {
                            return Provenance::Tainted(src);
                        }
                    }
                }
            }
            all_vouched = false;
        }
        match first_vouch {
            Some(src) if all_vouched => Provenance::Vouched(src),
            _ => Provenance::Unproven,
        }
    }
}

impl TaintIndex {
    /// The newest deferred output that holds `token`, if any (see the `deferred` module).
    fn deferred_source(&self, token: &str) -> Option<TaintSource> {
        if token.len() > self.limits.max_token_len {
            return None;
        }
        deferred::find(&self.deferred, token).cloned()
    }
}

/// The first piece of decoded ASCII text to index: about [`deferred::PIECE`] bytes, cut
/// right after a newline or `"` (no token holds either, and the tokenizer reads the start
/// of a text as it reads the byte after one), or all of it.
fn split_piece(text: &str) -> (&str, &str) {
    let cut = text
        .as_bytes()
        .get(deferred::PIECE..)
        .and_then(|rest| memchr2(b'\n', b'"', rest))
        .map(|i| deferred::PIECE + i + 1);
    match cut {
        Some(cut) if cut < text.len() => text.split_at(cut),
        _ => (text, ""),
    }
}

#[derive(Debug, Clone)]
enum TokenStatus {
    Unknown,
    Vouched(TaintSource),
    Tainted(TaintSource),
}

/// One destination a sink value stands for: its canonical forms and, for a URL, its host.
#[derive(Debug)]
struct SinkToken {
    forms: Vec<String>,
    host: Option<String>,
    /// A token the tokenizer recognised (not the whole value standing for itself).
    shaped: bool,
}

fn sink_tokens(value: &str) -> Vec<SinkToken> {
    let mut out = shaped_tokens(tokenize(value));
    if out.is_empty()
        && let Some(v) = value_token(value)
    {
        let mut forms = vec![v.clone()];
        if v.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            forms.push(format!("#{v}"));
            forms.push(format!("@{v}"));
        }
        out.push(SinkToken {
            forms,
            host: None,
            shaped: false,
        });
    }
    out
}

/// The destinations of `tokens` (never the whole value standing for itself).
fn shaped_tokens(tokens: Vec<Token>) -> Vec<SinkToken> {
    let mut out: Vec<SinkToken> = Vec::new();
    for t in &tokens {
        if t.inside_url {
            continue;
        }
        if out.iter().any(|o| o.forms.first() == Some(&t.text)) {
            continue;
        }
        let mut forms = vec![t.text.clone()];
        // `#general` and `@alice` also stand for the bare names a trusted list holds.
        if let Some(bare) = t
            .text
            .strip_prefix('#')
            .or_else(|| t.text.strip_prefix('@'))
        {
            forms.push(bare.to_owned());
        }
        out.push(SinkToken {
            forms,
            host: t.host.clone(),
            shaped: true,
        });
    }
    out
}

/// The canonical token(s) a sink value stands for: its destination tokens (a URL is followed by
/// its host), or, when it has none, the whole value canonicalised.
pub fn canonical_destination(value: &str) -> Vec<String> {
    canonical_destination_shaped(value).0
}

/// [`canonical_destination`], and whether the value holds a destination of a recognised
/// shape (an email, a URL, a domain, …: judged by token equality only, never searched
/// verbatim) rather than standing for itself.
pub fn canonical_destination_shaped(value: &str) -> (Vec<String>, bool) {
    let tokens = sink_tokens(value);
    let shaped = tokens.iter().any(|t| t.shaped);
    (first_forms(tokens), shaped)
}

/// The destinations of a recognised shape in payload text (addresses, URLs and their hosts,
/// domains, phone numbers, IBANs, Slack ids), canonical: never the whole text standing for
/// itself, and no names with a sigil (`#general`, `@alice`: in free text they are words), so
/// a megabyte of prose costs one tokenizer pass and no copy.
/// Its base64 blobs (`blobs`, an attachment: [`crate::blob::base64_blobs`]) are skipped:
/// what looks like a destination inside one is noise.
pub(crate) fn shaped_destinations_in(text: &str, blobs: &[std::ops::Range<usize>]) -> Vec<String> {
    if blobs.is_empty() {
        return first_forms(shaped_tokens(tokenize_shaped(text)));
    }
    let tokens = crate::blob::outside(text, blobs)
        .into_iter()
        .flat_map(tokenize_shaped)
        .collect();
    first_forms(shaped_tokens(tokens))
}

/// [`shaped_destinations_in`], finding the blobs itself.
#[cfg(test)]
pub(crate) fn shaped_destinations(text: &str) -> Vec<String> {
    shaped_destinations_in(text, &crate::blob::base64_blobs(text))
}

/// Each token's first form and, for a URL, its host; each once.
fn first_forms(tokens: Vec<SinkToken>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in tokens {
        if let Some(first) = t.forms.into_iter().next()
            && !out.contains(&first)
        {
            out.push(first);
        }
        if let Some(h) = t.host
            && !out.contains(&h)
        {
            out.push(h);
        }
    }
    out
}

/// All destination tokens in a text, canonical, in order of appearance per kind. Exposed for
/// the fuzz targets and explain.
pub fn tokenize_destinations(text: &str) -> Vec<String> {
    tokenize(text).into_iter().map(|t| t.text).collect()
}

#[derive(Debug, Clone)]
struct Token {
    text: String,
    /// For URL tokens: the host.
    host: Option<String>,
    /// Found inside a URL (an email in a query string, the URL's own host as a bare domain).
    inside_url: bool,
}

#[cfg(test)]
mod tests;
