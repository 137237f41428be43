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
mod window;

pub use window::{
    DEFAULT_WINDOW_BYTES, MAX_SEARCHES_PER_CALL as MAX_VERBATIM_SEARCHES_PER_CALL,
    MIN_DIGITS_LEN as MIN_VERBATIM_DIGITS, MIN_LEN as MIN_VERBATIM_LEN,
};

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, LazyLock};

/// The hasher of the index and of the tokenizer's sets: randomly seeded (tokens are chosen
/// by whoever wrote the output), and several times cheaper than SipHash on short keys.
type Hasher = foldhash::fast::RandomState;

use memchr::{memchr, memchr_iter, memchr2, memmem};

use percent_encoding::percent_decode_str;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use unicode_normalization::UnicodeNormalization;

use crate::normalize::{collect_strings, normalize_url};
use scan::Span;

/// Bounds of a [`TaintIndex`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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
    /// Bytes of the most recent untrusted text kept verbatim for [`TaintIndex::verbatim`]
    /// (destinations of any shape); `0` turns that search off.
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
            // Any alternative form vouching or tainting counts; taint is checked first.
            let statuses: Vec<TokenStatus> = t.forms.iter().map(|f| self.status(f)).collect();
            if let Some(TokenStatus::Tainted(src)) = statuses
                .iter()
                .find(|s| matches!(s, TokenStatus::Tainted(_)))
            {
                return Provenance::Tainted(src.clone());
            }
            let vouched = statuses
                .iter()
                .any(|s| matches!(s, TokenStatus::Vouched(_)));
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
    let tokens = tokenize(value);
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
    (out, shaped)
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

fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

/// Characters that render as nothing and only serve to split tokens.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}' | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}' | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// HTML entities, percent-encoding, NFKC; repeated until stable (at most a few rounds).
fn decode(text: &str) -> Cow<'_, str> {
    // ASCII without `&` or `%` is its own decoding (NFKC leaves ASCII alone): the common
    // case needs no copy.
    if text.is_ascii() && memchr2(b'&', b'%', text.as_bytes()).is_none() {
        return Cow::Borrowed(text);
    }
    let mut current = nfkc_visible(text);
    for _ in 0..4 {
        let mut next = current.clone();
        if next.contains('&') {
            next = html_escape::decode_html_entities(&next).into_owned();
        }
        if next.contains('%') {
            next = percent_decode_str(&next).decode_utf8_lossy().into_owned();
        }
        let next = nfkc_visible(&next);
        if next == current {
            break;
        }
        current = next;
    }
    Cow::Owned(current)
}

/// NFKC without invisible format characters; ASCII needs neither.
fn nfkc_visible(text: &str) -> String {
    if text.is_ascii() {
        return text.to_owned();
    }
    text.nfkc().filter(|c| !is_invisible(*c)).collect()
}

/// The whole value as one token: decoded, trimmed, lower case, `mailto:` and trailing dots
/// removed. `None` for empty or long values and values with inner whitespace.
fn value_token(value: &str) -> Option<String> {
    // Lower-casing can create an entity (`&DD;` → `&dd;`), stripping can expose one: repeat
    // until stable so the canonical form is a fixpoint.
    let mut v = value.to_owned();
    for _ in 0..4 {
        let next = value_token_step(&v);
        if next == v {
            break;
        }
        v = next;
    }
    if v.is_empty() || v.len() > 256 || v.chars().any(char::is_whitespace) {
        return None;
    }
    Some(v)
}

fn value_token_step(value: &str) -> String {
    let decoded = decode(value);
    let mut v = decoded.trim().to_lowercase();
    if let Some(rest) = v.strip_prefix("mailto:") {
        v = rest.to_owned();
    }
    v.trim_end_matches(|c: char| c == '.' || c.is_whitespace())
        .trim_start()
        .to_owned()
}

/// A token pattern in two equivalent forms, each compiled on first use.
///
/// Most tool output is ASCII, and on ASCII text every Unicode class and assertion of the
/// patterns below means its ASCII part: `\p{L}\p{N}` is `A-Za-z0-9`, `\d` is `[0-9]`, `\s`
/// and `\b` are their ASCII forms, and `(?i)` folds no letter to a non-ASCII one that ASCII
/// text could contain. The ASCII forms compile to a fraction of the automaton (the Unicode
/// letter classes are most of the cost of building these regexes), so text that is ASCII
/// after decoding uses them and the Unicode forms are only built when non-ASCII text
/// arrives. A property test checks that both forms find the same matches on ASCII text.
///
/// `tokenize` checks its cheap precondition (a `://`, an `@`, a minimum length, …) before
/// asking for a regex, so a pattern is only compiled once text could contain its token.
struct TokenRegex {
    ascii: LazyLock<Option<Regex>>,
    unicode: LazyLock<Option<Regex>>,
}

impl TokenRegex {
    /// The ASCII form when the text to search is ASCII, else the Unicode form.
    fn get(&self, ascii: bool) -> Option<&Regex> {
        if ascii {
            self.ascii.as_ref()
        } else {
            self.unicode.as_ref()
        }
    }
}

macro_rules! token_regex {
    ($name:ident, ascii: $ascii:expr, unicode: $unicode:expr $(,)?) => {
        static $name: TokenRegex = TokenRegex {
            ascii: LazyLock::new(|| Regex::new($ascii).ok()),
            unicode: LazyLock::new(|| Regex::new($unicode).ok()),
        };
    };
}

token_regex!(
    URL_RE,
    ascii: r#"(?-u:\b)(?i-u:https?|wss?|ftp)://[\x00-\x7F&&[^\s<>"'`{}|\\^\[\]]]+"#,
    unicode: r#"(?i)\b(?:https?|wss?|ftp)://[^\s<>"'`{}|\\^\[\]]+"#,
);
token_regex!(
    EMAIL_RE,
    ascii: r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)+",
    unicode: r"[\p{L}\p{N}._%+\-]+@[\p{L}\p{N}](?:[\p{L}\p{N}\-]*[\p{L}\p{N}])?(?:\.[\p{L}\p{N}](?:[\p{L}\p{N}\-]*[\p{L}\p{N}])?)+",
);
token_regex!(
    DOMAIN_RE,
    ascii: r"[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+",
    unicode: r"[\p{L}\p{N}\-]+(?:\.[\p{L}\p{N}\-]+)+",
);
token_regex!(
    PHONE_RE,
    ascii: r"(?:\+|(?-u:\b)(?i-u:tel):(?-u:\s)*\+?)[0-9][0-9 \t().\-]{4,24}[0-9]",
    unicode: r"(?i)(?:\+|\btel:\s*\+?)\d[\d \t().\-]{4,24}\d",
);
token_regex!(
    IBAN_RE,
    ascii: r"(?-u:\b)[A-Za-z]{2}[0-9]{2}(?: ?[A-Za-z0-9]{4}){2,7}(?: ?[A-Za-z0-9]{1,4})?(?-u:\b)",
    unicode: r"(?i)\b[a-z]{2}\d{2}(?: ?[a-z0-9]{4}){2,7}(?: ?[a-z0-9]{1,4})?\b",
);
token_regex!(
    CHANNEL_RE,
    ascii: r"#([A-Za-z0-9][A-Za-z0-9._\-]*)",
    unicode: r"#([\p{L}\p{N}][\p{L}\p{N}._\-]*)",
);
token_regex!(
    SLACK_ID_RE,
    ascii: r"(?-u:\b)[CDGUW][A-Z0-9]{8,11}(?-u:\b)",
    unicode: r"\b[CDGUW][A-Z0-9]{8,11}\b",
);
token_regex!(
    HANDLE_RE,
    ascii: r"@([A-Za-z0-9][A-Za-z0-9._\-]*)",
    unicode: r"@([\p{L}\p{N}][\p{L}\p{N}._\-]*)",
);

/// Common file extensions that are also TLDs: `notes.md` is a file name, not a host.
const FILE_EXTENSIONS: &[&str] = &[
    "md", "rs", "py", "sh", "zip", "txt", "json", "yaml", "yml", "toml", "html", "htm", "css",
    "js", "ts", "tsx", "jsx", "png", "jpg", "jpeg", "gif", "svg", "pdf", "csv", "log", "lock",
    "exe", "gz", "tar", "mov", "mp3", "mp4", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "xml",
    "ini", "cfg", "conf", "rb", "go", "java", "kt", "swift", "php", "pl", "sql", "db", "bak",
    "tmp", "old", "orig", "env", "pem", "key", "crt", "pub", "so", "dll", "bin", "dat", "out",
    "ipynb", "vue", "scss", "map", "wasm", "c", "h", "cpp", "hpp",
];

/// Labels of 1 to 63 characters without a leading or trailing `-`, and a top-level label of
/// at least two letters.
fn is_domain_shape(domain: &str) -> bool {
    if domain.is_ascii() {
        return is_ascii_domain_shape(domain.as_bytes());
    }
    let (labels, tld) = match domain.rsplit_once('.') {
        Some((labels, tld)) => (Some(labels), tld),
        None => (None, domain),
    };
    (2..=63).contains(&tld.chars().count())
        && tld.chars().all(char::is_alphabetic)
        && labels.is_none_or(|labels| {
            labels.split('.').all(|label| {
                (1..=63).contains(&label.chars().count())
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
        })
}

/// [`is_domain_shape`] of ASCII text, byte by byte (candidates are short, and most are
/// dotted words such as `v1.2.3` or `10.0.0.1`): the top-level label first, which turns
/// those away without looking at the others.
fn is_ascii_domain_shape(domain: &[u8]) -> bool {
    let tld_start = domain
        .iter()
        .rposition(|&b| b == b'.')
        .map_or(0, |dot| dot + 1);
    let tld = domain.get(tld_start..).unwrap_or_default();
    if !(2..=63).contains(&tld.len()) || !tld.iter().all(u8::is_ascii_alphabetic) {
        return false;
    }
    let Some(labels) = tld_start.checked_sub(1).and_then(|dot| domain.get(..dot)) else {
        return true;
    };
    labels.split(|&b| b == b'.').all(|label| {
        (1..=63).contains(&label.len())
            && label.first() != Some(&b'-')
            && label.last() != Some(&b'-')
    })
}

fn canonical_domain(domain: &str) -> Option<String> {
    let d = domain.trim_end_matches('.').to_lowercase();
    if d.is_empty() {
        return None;
    }
    if d.is_ascii() {
        // Lower-case ASCII is already what IDNA would give (and is cheaper).
        return Some(d);
    }
    match idna::domain_to_ascii(&d) {
        Ok(a) if !a.is_empty() => Some(a.trim_end_matches('.').to_owned()),
        _ => Some(d),
    }
}

fn iban_valid(compact: &str) -> bool {
    if !(15..=34).contains(&compact.len()) || !compact.chars().all(|c| c.is_ascii_alphanumeric()) {
        return false;
    }
    let (head, tail) = compact.split_at(4);
    let mut remainder: u64 = 0;
    for c in tail.chars().chain(head.chars()) {
        let v = match c.to_digit(36) {
            Some(v) => u64::from(v),
            None => return false,
        };
        remainder = if v >= 10 {
            (remainder * 100 + v) % 97
        } else {
            (remainder * 10 + v) % 97
        };
    }
    remainder == 1
}

/// Whether the text has a `tel:` in any ASCII case.
fn has_tel(bytes: &[u8]) -> bool {
    memchr_iter(b':', bytes).any(|colon| {
        colon
            .checked_sub(3)
            .and_then(|start| bytes.get(start..colon))
            .is_some_and(|w| w.eq_ignore_ascii_case(b"tel"))
    })
}

/// The canonical URL and host of a URL in the plainest form (`https://Host.example/path?q`):
/// what [`normalize_url`] returns for it, without a full URL parse. `None` for anything
/// else (a port, userinfo, a fragment, `%`, quotes, dot segments, an IP address, an IDN or
/// `xn--` label, a label with a leading or trailing `-`, non-ASCII), which takes the parser.
/// A destination-dense output (a CRM export, a mailing list) holds thousands of distinct
/// URLs; parsing each one cost most of the time of indexing it. A property test checks
/// this against [`normalize_url`].
fn simple_url(raw: &str) -> Option<(String, String)> {
    let bytes = raw.as_bytes();
    let sep = memmem::find(bytes, b"://")?;
    let scheme = bytes.get(..sep)?;
    if ![&b"http"[..], b"https", b"ws", b"wss", b"ftp"]
        .iter()
        .any(|s| s.eq_ignore_ascii_case(scheme))
    {
        return None;
    }
    let after = bytes.get(sep + 3..)?;
    let host_len = after
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(after.len());
    let (host, rest) = after.split_at(host_len);
    // Labels of letters, digits and inner `-`, no `xn--`; a top-level label of 2+ letters
    // (never an IPv4 address).
    let mut labels = host.split(|&b| b == b'.').peekable();
    while let Some(label) = labels.next() {
        if label.is_empty()
            || label.len() > 63
            || label.first() == Some(&b'-')
            || label.last() == Some(&b'-')
            || label
                .get(..4)
                .is_some_and(|p| p.eq_ignore_ascii_case(b"xn--"))
            || !label
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return None;
        }
        if labels.peek().is_none()
            && (label.len() < 2 || !label.iter().all(u8::is_ascii_alphabetic))
        {
            return None;
        }
    }
    // Path and query of characters the URL parser keeps as they are.
    if !rest.iter().all(|&b| {
        b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'@'
                    | b'/'
                    | b'?'
            )
    }) {
        return None;
    }
    let path_end = rest.iter().position(|&b| b == b'?').unwrap_or(rest.len());
    let path = rest.get(..path_end)?;
    if path
        .split(|&b| b == b'/')
        .any(|seg| seg == b"." || seg == b"..")
    {
        return None;
    }
    let host = std::str::from_utf8(host).ok()?.to_ascii_lowercase();
    let rest = std::str::from_utf8(rest).ok()?;
    let scheme = std::str::from_utf8(scheme).ok()?.to_ascii_lowercase();
    let slash = if path.is_empty() { "/" } else { "" };
    Some((format!("{scheme}://{host}{slash}{rest}"), host))
}

/// The spans of a token regex's matches (for the kinds `scan` has no scanner for, and for
/// non-ASCII text).
fn regex_spans(re: &TokenRegex, ascii: bool, text: &str) -> Vec<Span> {
    re.get(ascii)
        .map(|re| re.find_iter(text).map(|m| (m.start(), m.end())).collect())
        .unwrap_or_default()
}

fn tokenize(text: &str) -> Vec<Token> {
    tokenize_decoded(&decode(text))
}

/// [`tokenize`] of text that is already decoded.
fn tokenize_decoded(text: &str) -> Vec<Token> {
    let bytes = text.as_bytes();
    // ASCII text (most tool output) is scanned by `scan` where a regex would cost a pass
    // over the whole text; the regexes' Unicode forms handle everything else.
    let ascii = text.is_ascii();
    // Emails and handles both need an `@`.
    let has_at = memchr(b'@', bytes).is_some();
    let mut out: Vec<Token> = Vec::new();
    let mut url_spans: Vec<(usize, usize)> = Vec::new();
    let mut seen: HashSet<(String, bool), Hasher> = HashSet::default();
    // Text already turned into tokens (URLs, emails, domains as found, with whether they
    // lie inside a URL), so that repeats are skipped before any work or allocation. Each
    // kind's text has a character the others' lack (`://`, `@`, neither), so one set serves.
    let mut seen_raw: HashSet<(&str, bool), Hasher> = HashSet::default();
    let mut push = |out: &mut Vec<Token>, t: Token| {
        if seen.insert((t.text.clone(), t.inside_url)) {
            out.push(t);
        }
    };
    let slice = |(start, end): Span| text.get(start..end).unwrap_or_default();

    let urls = if memmem::find(bytes, b"://").is_none() {
        Vec::new()
    } else if ascii {
        scan::urls(text)
    } else {
        regex_spans(&URL_RE, false, text)
    };
    for span in urls {
        // Sentence punctuation and control characters after a URL are not part of it
        // (the URL parser drops trailing controls itself, so trim both together: the
        // result must be a fixpoint).
        let raw = slice(span).trim_end_matches(|c: char| {
            c.is_control()
                || c.is_whitespace()
                || matches!(
                    c,
                    '.' | ',' | ';' | ':' | '!' | '?' | ')' | '\'' | '"' | '>' | '*'
                )
        });
        let end = span.0 + raw.len();
        url_spans.push((span.0, end));
        // The same text gives the same tokens: a URL repeated (a log's referrer) is parsed
        // once.
        if !seen_raw.insert((raw, false)) {
            continue;
        }
        if let Some((url, host)) = simple_url(raw) {
            push(
                &mut out,
                Token {
                    text: url,
                    host: Some(host.clone()),
                    inside_url: false,
                },
            );
            push(
                &mut out,
                Token {
                    text: host,
                    host: None,
                    inside_url: true,
                },
            );
        } else if let Ok(net) = normalize_url(raw, "") {
            push(
                &mut out,
                Token {
                    text: net.url,
                    host: Some(net.host.clone()),
                    inside_url: false,
                },
            );
            push(
                &mut out,
                Token {
                    text: net.host,
                    host: None,
                    inside_url: true,
                },
            );
        }
    }
    // Spans are in order and do not overlap: binary search.
    let inside = |(start, end): Span| {
        let idx = url_spans.partition_point(|(s, _)| *s <= start);
        idx.checked_sub(1)
            .and_then(|i| url_spans.get(i))
            .is_some_and(|(_, e)| end <= *e)
    };
    // A token other than a URL, found at `span`.
    let plain = |text: String, span: Span| Token {
        text,
        host: None,
        inside_url: inside(span),
    };

    if has_at {
        for span in regex_spans(&EMAIL_RE, ascii, text) {
            let raw = slice(span).trim_start_matches('.');
            if !seen_raw.insert((raw, inside(span))) {
                continue;
            }
            let Some((local, domain)) = raw.rsplit_once('@') else {
                continue;
            };
            let local = local.trim_matches('.').to_lowercase();
            let local = local.strip_prefix("mailto:").unwrap_or(&local).to_owned();
            if local.is_empty() {
                continue;
            }
            let Some(domain) = canonical_domain(domain) else {
                continue;
            };
            push(&mut out, plain(format!("{local}@{domain}"), span));
        }
    }
    if memchr(b'.', bytes).is_some() {
        let domains = if ascii {
            scan::domains(text)
        } else {
            regex_spans(&DOMAIN_RE, false, text)
        };
        for span in domains {
            let (start, end) = span;
            let before = text.get(..start).and_then(|s| s.chars().next_back());
            let after = text.get(end..).and_then(|s| s.chars().next());
            // Part of an email, a longer word, or a path: not a bare domain.
            if matches!(
                before,
                Some('@' | '.' | '-' | '_' | '/' | '\\' | '%' | '+' | '=' | '#')
            ) || before.is_some_and(char::is_alphanumeric)
            {
                continue;
            }
            if matches!(after, Some('@' | '-' | '_')) || after.is_some_and(char::is_alphanumeric) {
                continue;
            }
            let domain = slice(span);
            // The shape first: it turns most dotted words (`v1.2`, `10.0.0.1`) away at once.
            if !is_domain_shape(domain) || !seen_raw.insert((domain, inside(span))) {
                continue;
            }
            let tld = domain.rsplit('.').next().unwrap_or_default();
            let file_extension = if tld.is_ascii() {
                FILE_EXTENSIONS
                    .iter()
                    .any(|ext| ext.eq_ignore_ascii_case(tld))
            } else {
                FILE_EXTENSIONS.contains(&tld.to_lowercase().as_str())
            };
            if file_extension {
                continue;
            }
            let Some(domain) = canonical_domain(domain) else {
                continue;
            };
            push(&mut out, plain(domain, span));
        }
    }
    let phones = if ascii {
        PHONE_RE
            .get(true)
            .filter(|_| memchr2(b'+', b':', bytes).is_some())
            .map(|re| scan::phones(text, re))
            .unwrap_or_default()
    } else if memchr(b'+', bytes).is_some() || has_tel(bytes) {
        regex_spans(&PHONE_RE, false, text)
    } else {
        Vec::new()
    };
    for span in phones {
        let digits: String = slice(span).chars().filter(char::is_ascii_digit).collect();
        if (7..=15).contains(&digits.len()) {
            push(&mut out, plain(format!("+{digits}"), span));
        }
    }
    // An IBAN match is at least 12 characters long, a Slack id at least 9: shorter text
    // (a one-word result) skips both searches.
    if text.len() >= 12 {
        let ibans = if ascii {
            IBAN_RE
                .get(true)
                .map(|re| scan::ibans(text, re))
                .unwrap_or_default()
        } else {
            regex_spans(&IBAN_RE, false, text)
        };
        for span in ibans {
            let compact: String = slice(span)
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect::<String>()
                .to_ascii_uppercase();
            // `#ab12…`, `@ab12…`, `/ab12…` are a channel, handle or path, not an IBAN.
            let before = text.get(..span.0).and_then(|s| s.chars().next_back());
            if iban_valid(&compact) && !matches!(before, Some('#' | '@' | '/' | '_' | '-' | '.')) {
                push(&mut out, plain(compact.to_ascii_lowercase(), span));
            }
        }
    }
    for (re, sigil, present) in [
        (&CHANNEL_RE, b'#', memchr(b'#', bytes).is_some()),
        (&HANDLE_RE, b'@', has_at),
    ] {
        if !present {
            continue;
        }
        // (sigil, name start, name end): on ASCII text a scan of the sigils (every `@` of an
        // address list would otherwise run the capturing regex), else the regex.
        let found: Vec<(usize, usize, usize)> = if ascii {
            scan::sigil_names(bytes, sigil)
        } else {
            let Some(re) = re.get(false) else {
                continue;
            };
            re.captures_iter(text)
                .filter_map(|c| {
                    let (all, name) = (c.get(0)?, c.get(1)?);
                    Some((all.start(), name.start(), name.end()))
                })
                .collect()
        };
        let sigil = char::from(sigil);
        for (start, name_start, name_end) in found {
            // The sigil starts a word: `a#b` and `bob@x` are something else.
            let before = text.get(..start).and_then(|s| s.chars().next_back());
            if before.is_some_and(|b| {
                !(b.is_whitespace()
                    || matches!(b, '(' | ',' | ';' | ':' | '[' | '<' | '|' | '"' | '\''))
            }) {
                continue;
            }
            let name = text.get(name_start..name_end).unwrap_or_default();
            let n = name.trim_end_matches(['.', '-', '_']).to_lowercase();
            if n.is_empty() || n.chars().count() > 80 || n.chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            // `@corp.com` style: the domain part of something else.
            if sigil == '@' && text.get(name_end..).is_some_and(|r| r.starts_with('@')) {
                continue;
            }
            push(
                &mut out,
                plain(format!("{sigil}{n}"), (name_start, name_end)),
            );
        }
    }
    if text.len() >= 9 {
        let ids = if ascii {
            scan::slack_ids(text)
        } else {
            regex_spans(&SLACK_ID_RE, false, text)
        };
        for span in ids {
            let id = slice(span);
            if id.chars().any(|c| c.is_ascii_digit()) {
                push(&mut out, plain(id.to_lowercase(), span));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(tool: &str) -> TaintSource {
        TaintSource {
            server: None,
            tool: tool.to_owned(),
            seq: 1,
        }
    }

    const ALL: [(&str, &TokenRegex); 8] = [
        ("url", &URL_RE),
        ("email", &EMAIL_RE),
        ("domain", &DOMAIN_RE),
        ("phone", &PHONE_RE),
        ("iban", &IBAN_RE),
        ("channel", &CHANNEL_RE),
        ("slack id", &SLACK_ID_RE),
        ("handle", &HANDLE_RE),
    ];

    /// Every (start, end) of every group of every match, in order.
    fn spans(re: &Regex, text: &str) -> Vec<Option<(usize, usize)>> {
        re.captures_iter(text)
            .flat_map(|c| {
                c.iter()
                    .map(|m| m.map(|m| (m.start(), m.end())))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn ascii_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let piece = prop_oneof![
            Just("http".to_owned()),
            Just("HTTPS".to_owned()),
            Just("wss".to_owned()),
            Just("fTp".to_owned()),
            Just("://".to_owned()),
            Just("mailto:".to_owned()),
            Just("tel:".to_owned()),
            Just("TEL: ".to_owned()),
            Just("@".to_owned()),
            Just(".".to_owned()),
            Just("#".to_owned()),
            Just("+".to_owned()),
            Just("-".to_owned()),
            Just("_".to_owned()),
            Just("%".to_owned()),
            Just("(".to_owned()),
            Just(")".to_owned()),
            Just(" ".to_owned()),
            Just("\t".to_owned()),
            Just("\n".to_owned()),
            Just("\u{b}".to_owned()),
            Just("\u{1}".to_owned()),
            Just("<".to_owned()),
            Just("\"".to_owned()),
            Just("`".to_owned()),
            Just("[".to_owned()),
            Just("/".to_owned()),
            Just("?".to_owned()),
            Just("=".to_owned()),
            Just("com".to_owned()),
            Just("Corp".to_owned()),
            Just("bob".to_owned()),
            Just("k".to_owned()),
            Just("S".to_owned()),
            Just("DE89".to_owned()),
            Just("3704".to_owned()),
            Just("0044".to_owned()),
            Just("C0123ABCD9".to_owned()),
            Just("U012".to_owned()),
            Just("4155550100".to_owned()),
            Just("7".to_owned()),
            Just("x".to_owned()),
            "[ -~]",
            "[\\x00-\\x7f]",
        ];
        proptest::collection::vec(piece, 0..24).prop_map(|v| v.concat())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        /// On ASCII text the ASCII form of each token regex finds exactly what the Unicode
        /// form finds: the same matches and groups at the same offsets.
        #[test]
        fn ascii_forms_match_like_unicode_forms(text in ascii_text()) {
            proptest::prop_assume!(text.is_ascii());
            for (name, re) in ALL {
                let a = re.get(true).unwrap();
                let u = re.get(false).unwrap();
                proptest::prop_assert_eq!(spans(a, &text), spans(u, &text), "{} on {:?}", name, text);
            }
        }
    }

    /// The domain-shape test as first written (every label in order, then the last one's
    /// letters): the oracle for the faster form.
    fn is_domain_shape_by_labels(domain: &str) -> bool {
        let mut labels = domain.split('.').peekable();
        let mut ok = true;
        while let Some(label) = labels.next() {
            let len = label.chars().count();
            ok &= (1..=63).contains(&len) && !label.starts_with('-') && !label.ends_with('-');
            if labels.peek().is_none() {
                ok &= len >= 2 && label.chars().all(char::is_alphabetic);
            }
        }
        ok
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

        #[test]
        fn domain_shape_is_the_per_label_definition(
            domain in "(([a-z0-9\\-]{0,3}|[a-zé1]{60,66}|ß|xn--ü)\\.){0,4}([a-z0-9\\-]{0,3}|[a-zé]{60,66}|ü|中文)"
        ) {
            proptest::prop_assert_eq!(
                is_domain_shape(&domain),
                is_domain_shape_by_labels(&domain),
                "{:?}",
                domain
            );
        }
    }

    fn find_spans(re: &Regex, text: &str) -> Vec<Span> {
        re.find_iter(text).map(|m| (m.start(), m.end())).collect()
    }

    /// The scanners against the ASCII regexes they stand in for.
    fn check_scanners(text: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        fn re(r: &'static TokenRegex) -> &'static Regex {
            r.get(true).unwrap()
        }
        proptest::prop_assert_eq!(
            scan::urls(text),
            find_spans(re(&URL_RE), text),
            "urls in {:?}",
            text
        );
        proptest::prop_assert_eq!(
            scan::domains(text),
            find_spans(re(&DOMAIN_RE), text),
            "domains in {:?}",
            text
        );
        proptest::prop_assert_eq!(
            scan::phones(text, re(&PHONE_RE)),
            find_spans(re(&PHONE_RE), text),
            "phones in {:?}",
            text
        );
        proptest::prop_assert_eq!(
            scan::ibans(text, re(&IBAN_RE)),
            find_spans(re(&IBAN_RE), text),
            "ibans in {:?}",
            text
        );
        proptest::prop_assert_eq!(
            scan::slack_ids(text),
            find_spans(re(&SLACK_ID_RE), text),
            "slack ids in {:?}",
            text
        );
        for (sigil, r) in [(b'#', &CHANNEL_RE), (b'@', &HANDLE_RE)] {
            let want: Vec<(usize, usize, usize)> = re(r)
                .captures_iter(text)
                .map(|c| {
                    let (all, name) = (c.get(0).unwrap(), c.get(1).unwrap());
                    (all.start(), name.start(), name.end())
                })
                .collect();
            proptest::prop_assert_eq!(
                scan::sigil_names(text.as_bytes(), sigil),
                want,
                "{} names in {:?}",
                char::from(sigil),
                text
            );
        }
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

        /// On ASCII text each scanner finds exactly the matches of the regex it replaces.
        #[test]
        fn scanners_match_like_the_regexes(text in ascii_text()) {
            proptest::prop_assume!(text.is_ascii());
            check_scanners(&text)?;
        }

        /// The same on text built from the pieces that make long and adjacent matches.
        #[test]
        fn scanners_match_like_the_regexes_on_dense_text(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just("DE89 3704 0044 0532 0130 00"),
                    proptest::strategy::Just("GB82WEST12345698765432"),
                    proptest::strategy::Just("ab12"),
                    proptest::strategy::Just("CDEF"),
                    proptest::strategy::Just("1"),
                    proptest::strategy::Just("tel:"),
                    proptest::strategy::Just("TeL:\n\t "),
                    proptest::strategy::Just("+"),
                    proptest::strategy::Just("+1 (415) 555-0100"),
                    proptest::strategy::Just("0123456789"),
                    proptest::strategy::Just(" "),
                    proptest::strategy::Just("."),
                    proptest::strategy::Just(".."),
                    proptest::strategy::Just("a-b"),
                    proptest::strategy::Just("https://"),
                    proptest::strategy::Just("ws://"),
                    proptest::strategy::Just("://"),
                    proptest::strategy::Just("x"),
                    proptest::strategy::Just("_"),
                    proptest::strategy::Just("\""),
                    proptest::strategy::Just("C0123ABCD"),
                    proptest::strategy::Just("W0123ABCDEFG"),
                    proptest::strategy::Just("GET"),
                    proptest::strategy::Just("U"),
                    proptest::strategy::Just("D9"),
                    proptest::strategy::Just("Z"),
                    proptest::strategy::Just("q"),
                ],
                0..40,
            )
        ) {
            check_scanners(&pieces.concat())?;
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// The same where the generated text straddles the end of a scanner's block or
        /// segment (the dots of 8 KiB are listed at a time, blocks are 32 and 128 bytes): a
        /// long run of one filler piece first, then generated text around the boundary.
        #[test]
        fn scanners_match_like_the_regexes_across_blocks(
            fill in proptest::prop_oneof![
                proptest::strategy::Just("a"),
                proptest::strategy::Just("a."),
                proptest::strategy::Just("."),
                proptest::strategy::Just(" "),
                proptest::strategy::Just("7"),
                proptest::strategy::Just("x+"),
                proptest::strategy::Just("W "),
                proptest::strategy::Just("D"),
            ],
            before in 8140..8200_usize,
            text in ascii_text(),
        ) {
            proptest::prop_assume!(text.is_ascii());
            let mut long = fill.repeat(before / fill.len());
            long.push_str(&text);
            long.push_str(&fill.repeat(40));
            check_scanners(&long)?;
        }
    }

    #[test]
    fn scanners_on_the_benchmark_prose() {
        let line = "The quarterly report covers revenue, churn and the hiring plan for the next two quarters; see /srv/reports/q3/summary.md for the tables.\n";
        let mut text = "Reply to alice@example.com, https://example.org/x?y=1 +44 20 7946 0958 DE89370400440532013000\n".to_owned();
        for _ in 0..50 {
            text.push_str(line);
        }
        check_scanners(&text).unwrap();
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

        /// The URL fast path gives exactly what the URL parser gives, whenever it answers.
        #[test]
        fn simple_url_is_normalize_url(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just("http://"),
                    proptest::strategy::Just("HTTPS://"),
                    proptest::strategy::Just("wS://"),
                    proptest::strategy::Just("ftp://"),
                    proptest::strategy::Just("gopher://"),
                    proptest::strategy::Just("Crm"),
                    proptest::strategy::Just("example"),
                    proptest::strategy::Just(".com"),
                    proptest::strategy::Just(".Org"),
                    proptest::strategy::Just(".1"),
                    proptest::strategy::Just("0x7f"),
                    proptest::strategy::Just("xn--"),
                    proptest::strategy::Just("XN--"),
                    proptest::strategy::Just("-"),
                    proptest::strategy::Just("."),
                    proptest::strategy::Just(".."),
                    proptest::strategy::Just("/"),
                    proptest::strategy::Just("//"),
                    proptest::strategy::Just("?"),
                    proptest::strategy::Just("#"),
                    proptest::strategy::Just("%2e"),
                    proptest::strategy::Just("%41"),
                    proptest::strategy::Just(":"),
                    proptest::strategy::Just(":80"),
                    proptest::strategy::Just("@"),
                    proptest::strategy::Just("'"),
                    proptest::strategy::Just("&"),
                    proptest::strategy::Just("="),
                    proptest::strategy::Just("~!$()*+,;"),
                    proptest::strategy::Just("a"),
                    proptest::strategy::Just("7"),
                    proptest::strategy::Just("é"),
                    proptest::strategy::Just("\\"),
                    proptest::strategy::Just(" "),
                ],
                0..16,
            )
        ) {
            let raw = pieces.concat();
            if let Some((url, host)) = simple_url(&raw) {
                let net = normalize_url(&raw, "");
                proptest::prop_assert!(net.is_ok(), "{:?}: {:?}", raw, net);
                let net = net.unwrap();
                proptest::prop_assert_eq!(&url, &net.url, "{:?}", raw);
                proptest::prop_assert_eq!(&host, &net.host, "{:?}", raw);
            }
        }
    }

    #[test]
    fn simple_url_takes_the_plain_forms() {
        for (raw, url, host) in [
            (
                "https://CRM.Example.com/contacts/7?tab=notes",
                "https://crm.example.com/contacts/7?tab=notes",
                "crm.example.com",
            ),
            ("HTTP://a-b.example", "http://a-b.example/", "a-b.example"),
            ("wss://x.example?q=1", "wss://x.example/?q=1", "x.example"),
        ] {
            assert_eq!(
                simple_url(raw),
                Some((url.to_owned(), host.to_owned())),
                "{raw}"
            );
            let net = normalize_url(raw, "").unwrap();
            assert_eq!((net.url.as_str(), net.host.as_str()), (url, host));
        }
        for raw in [
            "https://u:p@a.example/",
            "https://a.example:8443/",
            "https://a.example/x#f",
            "https://a.example/%41",
            "https://a.example/a/../b",
            "https://10.0.0.1/",
            "https://xn--bcher-kva.example/",
            "https://bücher.example/",
            "https://a.example/it's",
        ] {
            assert_eq!(simple_url(raw), None, "{raw}");
        }
    }

    #[test]
    fn every_token_regex_compiles_in_both_forms() {
        for (name, re) in ALL {
            assert!(re.get(true).is_some(), "{name} (ascii)");
            assert!(re.get(false).is_some(), "{name} (unicode)");
        }
    }

    #[test]
    fn iban_checksum() {
        assert!(iban_valid("DE89370400440532013000"));
        assert!(iban_valid("GB82WEST12345698765432"));
        assert!(!iban_valid("DE89370400440532013001"));
    }

    #[test]
    fn take_recorded_lists_each_token_once_per_new_source() {
        let mut index = TaintIndex::new(TaintLimits::default());
        let text = "write to bob@evil.example or https://hooks.evil.example/x";
        index.record_text(text, OutputTrust::Untrusted, src("a"));
        let first: Vec<String> = index
            .take_recorded()
            .into_iter()
            .map(String::from)
            .collect();
        assert!(first.contains(&"bob@evil.example".to_owned()), "{first:?}");
        assert_eq!(first, tokenize_destinations(text));
        assert!(index.take_recorded().is_empty());
        // Seen again in untrusted output: no new source, nothing to share.
        index.record_text(text, OutputTrust::Untrusted, src("b"));
        assert!(index.take_recorded().is_empty());
        // Seen in trusted output for the first time: a new (vouching) source.
        index.record_text("bob@evil.example", OutputTrust::Trusted, src("c"));
        let again: Vec<String> = index
            .take_recorded()
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(again, vec!["bob@evil.example".to_owned()]);
    }

    #[test]
    fn tokens() {
        let t = tokenize_destinations(
            "Mail BOB@Corp.COM or see https://Evil.com./x?a=1#f, call +1 (415) 555-0100, pay DE89 3704 0044 0532 0130 00, #General @alice C0123ABCD9 notes.md",
        );
        for want in [
            "bob@corp.com",
            "https://evil.com/x?a=1",
            "evil.com",
            "+14155550100",
            "de89370400440532013000",
            "#general",
            "@alice",
            "c0123abcd9",
        ] {
            assert!(t.contains(&want.to_owned()), "{want} not in {t:?}");
        }
        assert!(!t.contains(&"notes.md".to_owned()));
    }

    #[test]
    fn equality_not_substring() {
        let mut idx = TaintIndex::new(TaintLimits::default());
        idx.record_text(
            "reply to bob@corp.com.evil.net",
            OutputTrust::Untrusted,
            src("read_email"),
        );
        assert_eq!(idx.classify("bob@corp.com"), Provenance::Unproven);
        assert!(matches!(
            idx.classify("bob@corp.com.evil.net"),
            Provenance::Tainted(_)
        ));
    }

    /// An index that indexes `eager` tokens of each untrusted output and defers the rest.
    fn index_with(eager: usize, texts: &[&str]) -> TaintIndex {
        let mut idx = TaintIndex::new(TaintLimits::default());
        idx.eager_tokens = eager;
        for (i, t) in texts.iter().enumerate() {
            idx.record_text(
                t,
                OutputTrust::Untrusted,
                TaintSource {
                    server: None,
                    tool: "read".into(),
                    seq: i as u64 + 1,
                },
            );
        }
        idx
    }

    #[test]
    fn deferred_text_answers_as_the_index_would() {
        let text = "intro\n\
            1,Jane,.Jane.Roe.@Customer1.Example.,HTTPS://CRM.example.com:443/a/../contacts/42?tab=notes#x\n\
            2,Bob,bob@corp.com.evil.net,http://user:pw@evil.com/x/.\n\
            3,x.carol@corp.com, call tel:\n+1 (415) 555-0100 or DE89 3704 0044 0532 0130 00\n\
            4,\"#General-\",@alice.,U0123ABCD9,a@b.com_dave@corp.com,\\hidden.org,notes.txt\n";
        let lazy = index_with(0, &[text]);
        assert_eq!(lazy.len(), 0, "nothing indexed eagerly");
        assert!(lazy.deferred_len() > 0);
        let tainted = [
            "jane.roe@customer1.example",
            "https://crm.example.com/contacts/42?tab=notes",
            "crm.example.com",
            "bob@corp.com.evil.net",
            "https://evil.com/x/",
            "https://other.example/?a=1#ignored",
            "evil.com",
            "x.carol@corp.com",
            "+14155550100",
            "DE89370400440532013000",
            "#general",
            "@alice",
            "U0123ABCD9",
            "_dave@corp.com",
        ];
        let eager = index_with(usize::MAX, &[text]);
        for v in tainted {
            let want = eager.classify(v);
            assert_eq!(lazy.classify(v), want, "{v}");
            if v != "https://other.example/?a=1#ignored" {
                assert!(matches!(want, Provenance::Tainted(_)), "{v}: {want:?}");
            }
        }
        for v in [
            "bob@corp.com",
            "carol@corp.com",
            "dave@corp.com",
            "roe@customer1.example",
            "https://crm.example.org/contacts/42?tab=notes",
            "example.com",
            "hidden.org",
            "notes.txt",
            "+1415555010",
            "#gen",
            "@ali",
        ] {
            assert_eq!(lazy.classify(v), eager.classify(v), "{v}");
            assert_eq!(lazy.classify(v), Provenance::Unproven, "{v}");
        }
    }

    #[test]
    fn a_dense_output_indexes_its_first_tokens_and_defers_the_rest() {
        let mut text = String::new();
        for n in 0..5000 {
            text.push_str(&format!(
                "{n},c{n}@customer{}.example,https://crm.example.com/c/{n}\n",
                n % 97
            ));
        }
        let idx = index_with(deferred::EAGER_TOKENS, &[&text]);
        assert!(idx.len() >= deferred::EAGER_TOKENS, "{}", idx.len());
        assert!(idx.len() < 3 * deferred::EAGER_TOKENS, "{}", idx.len());
        assert!(idx.deferred_len() > text.len() / 2);
        for v in [
            "c0@customer0.example",
            "c4999@customer52.example",
            "https://crm.example.com/c/4321",
        ] {
            assert!(matches!(idx.classify(v), Provenance::Tainted(_)), "{v}");
        }
        assert_eq!(
            idx.classify("c5000@customer53.example"),
            Provenance::Unproven
        );
        // Non-ASCII text is indexed whole.
        let accented = text.replace("customer", "cüstomer");
        let idx = index_with(deferred::EAGER_TOKENS, &[&accented]);
        assert_eq!(idx.deferred_len(), 0);
        assert!(matches!(
            idx.classify("c4999@cüstomer52.example"),
            Provenance::Tainted(_)
        ));
    }

    /// Found by the property test below: a host of Slack-id length that is no Slack id
    /// (`7u012de89`) is not matched by the Slack id's word-boundary approximation.
    #[test]
    fn only_slack_shaped_values_get_the_slack_approximation() {
        let text = "bob@cohttp://7U012DE89)rp.com and U0123ABCD9";
        let (eager, lazy) = (index_with(usize::MAX, &[text]), index_with(0, &[text]));
        for v in ["http://7u012de89/", "7u012de89", "U0123ABCD9"] {
            assert_eq!(lazy.classify(v), eager.classify(v), "{v}");
        }
        assert_eq!(lazy.classify("7u012de89"), Provenance::Unproven);
        assert!(matches!(
            lazy.classify("U0123ABCD9"),
            Provenance::Tainted(_)
        ));
    }

    fn dense_piece() -> impl proptest::strategy::Strategy<Value = &'static str> {
        use proptest::strategy::Just;
        proptest::prop_oneof![
            Just("bob@corp.com"),
            Just("BOB@Corp.COM"),
            Just(".bob.@corp.com."),
            Just("x.bob@corp.com"),
            Just("_bob@evil.com"),
            Just("a@b.com_bob@evil.com"),
            Just("mailto:bob@corp.com"),
            Just("bob%40corp.com"),
            Just("bob&#64;corp.com"),
            Just("https://crm.example.com/contacts/42?tab=notes"),
            Just("HTTPS://CRM.Example.com:443/a/../contacts/42?tab=notes#frag"),
            Just("http://user:pw@evil.com/x"),
            Just("http://evil.com"),
            Just("http://evil.com./"),
            Just("https://evil.com/x/."),
            Just("http://10.0.0.1/"),
            Just("http://0x0a.0.0.1/"),
            Just("evil.com"),
            Just("sub.evil.com"),
            Just("evil.com.au"),
            Just("notes.txt"),
            Just("\\evil.org"),
            Just("+1 (415) 555-0100"),
            Just("tel:\n4155550100"),
            Just("TEL: +44 20 7946 0958"),
            Just("DE89 3704 0044 0532 0130 00"),
            Just("GB82WEST12345698765432"),
            Just("#general"),
            Just("#General-"),
            Just("@alice"),
            Just("@alice."),
            Just("U0123ABCD9"),
            Just("C0123ABCD"),
            Just("bücher.de"),
            Just(" "),
            Just("\n"),
            Just("\""),
            Just(","),
            Just("("),
            Just(")"),
            Just("<"),
            Just("/"),
            Just("@"),
            Just("."),
            Just(":"),
            Just("-"),
            Just("_"),
            Just("x"),
            Just("1"),
            Just("%2e"),
            Just("&amp;"),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

        /// Deferring a text's tokens never changes a verdict to anything but taint, and
        /// changes none at all for lower-case values that are not Slack-like ids.
        #[test]
        fn deferred_text_is_as_strict_as_indexing_it(
            pieces in proptest::collection::vec(dense_piece(), 0..40),
            noise in ascii_text(),
            probe in proptest::collection::vec(dense_piece(), 0..12),
        ) {
            let mut text = pieces.concat();
            let mut mid = text.len() / 2;
            while !text.is_char_boundary(mid) {
                mid -= 1;
            }
            text.insert_str(mid, &noise);
            let eager = index_with(usize::MAX, &[&text]);
            let lazy = index_with(0, &[&text]);
            let mut values: Vec<String> = tokenize_destinations(&text);
            values.extend(tokenize_destinations(&probe.concat()));
            values.extend(tokenize_destinations(&noise));
            values.extend(probe.iter().map(|p| (*p).to_owned()));
            for v in values {
                let (want, got) = (eager.classify(&v), lazy.classify(&v));
                if matches!(want, Provenance::Tainted(_)) {
                    proptest::prop_assert!(matches!(got, Provenance::Tainted(_)), "{:?} in {:?}: {:?}", v, text, got);
                }
                // A Slack-like id is searched in lower case: written in lower case (or a
                // channel or handle with such a name) it counts too, toward taint.
                // (A URL's host is checked on its own, so the same holds for it.)
                let host = v.split_once("://").map(|(_, rest)| {
                    rest.split(['/', '?', ':']).next().unwrap_or_default()
                });
                let slack_like = [Some(v.trim_start_matches(['#', '@'])), host]
                    .into_iter()
                    .flatten()
                    .any(|name| {
                        name.len() <= 12 && name.bytes().all(|b| b.is_ascii_alphanumeric())
                    });
                if v == v.to_lowercase() && !slack_like {
                    proptest::prop_assert_eq!(&got, &want, "{:?} in {:?}", v, text);
                }
            }
        }
    }
}
