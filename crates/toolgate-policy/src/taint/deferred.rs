//! Deferred text: the tail of a large untrusted output whose tokens were not indexed as it
//! arrived, searched for a destination when a sink call needs to know.
//!
//! Indexing a token costs a canonical form, a hash insertion and a place in the recency
//! order: a few hundred nanoseconds. A destination-dense output (a CRM export, a mailing
//! list: 20 000 and more addresses and URLs per MiB) would cost 15 ms a MiB, on the path of
//! every message after it. So an untrusted output indexes its first
//! [`EAGER_TOKENS`] tokens as it arrives and keeps the rest of its text here: decoded (HTML
//! entities, percent-encoding), ASCII lower-cased, its strings joined by newlines, bounded
//! like the verbatim window (`window_bytes`, oldest outputs dropped first). Text that is not
//! ASCII after decoding, or still holds a `%`, is always indexed whole: the search below
//! relies on a destination's canonical form being spelled out in ASCII text.
//!
//! # The search is the tokenizer's own verdict
//! For a canonical token, [`find`] looks for a *key*: a piece of text that every spelling of
//! the token in decoded ASCII text contains (its lower case):
//! - an e-mail address `local@domain`: `@domain`, the text before it (past any dots) ending
//!   in `local`;
//! - a URL: its last path segment and query (`/contacts/42?tab=notes`): dot segments,
//!   a default port, user information and a fragment change everything but those; with
//!   an empty last segment its query (`?q=1`), else its host;
//! - a host: itself, not preceded by a letter, digit, `.`, `-` or `_` (that is a longer
//!   name); without a dot (only a URL has such a host), right after `/` or `@`; an IP
//!   address, which a URL may spell in other forms (`0x7f.1`): `://`;
//! - a phone number: `+` and `tel:`; an IBAN: its first four characters; a channel or
//!   handle: itself; a Slack-like id: itself, at word boundaries.
//!
//! Each key found is confirmed by running the tokenizer over the text around it, out to the
//! nearest byte no token of that kind can contain (a newline or `"`; any white space for the
//! kinds without inner spaces) and including that byte, so the tokenizer sees the same
//! context as when the whole text is scanned: the answer is the one indexing the whole output
//! would have given. Two approximations, both toward taint: the text is lower-cased (a URL
//! path differing only in ASCII case, and a Slack id written in lower case, count as the
//! same), and text around a key with no such byte within [`MAX_CONTEXT`] counts as holding
//! the token.

use memchr::memmem;

use super::{TaintSource, tokenize_decoded, window::Window};

/// Tokens of one untrusted output indexed as it arrives; the rest of its text is deferred.
pub(super) const EAGER_TOKENS: usize = 256;
/// Text is indexed in pieces of about this many bytes (cut after a newline or `"`), the
/// eager budget checked between them.
pub(super) const PIECE: usize = 4 * 1024;
/// How far from a key the confirmation looks for the text's ends.
pub(super) const MAX_CONTEXT: usize = 64 * 1024;

/// What must hold around a key before the tokenizer is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Nothing: confirm every occurrence.
    None,
    /// `@domain`: the text before it, past trailing dots, ends with this local part.
    EmailLocal,
    /// A host: not preceded by a letter, digit, `.`, `-` or `_`.
    Host,
    /// A host without a dot, which only a URL has: right after `/` or `@`.
    UrlHost,
    /// A Slack-like id: found at word boundaries (the lower-cased text cannot be confirmed
    /// by the tokenizer, which wants upper case).
    Slack,
}

#[derive(Debug)]
struct Key {
    needle: Vec<u8>,
    check: Check,
    /// Whether the token can hold a space or tab (phone numbers, IBANs).
    spaced: bool,
}

/// The newest deferred output in `text` whose tokens include `token` (canonical).
pub(super) fn find<'w>(text: &'w Window, token: &str) -> Option<&'w TaintSource> {
    if text.len() == 0 || token.is_empty() {
        return None;
    }
    let token = token.to_ascii_lowercase();
    let keys = keys(&token);
    for (hay, source) in text.newest_first() {
        for key in &keys {
            if found_in(hay, &token, key) {
                return Some(source);
            }
        }
    }
    None
}

fn found_in(hay: &[u8], token: &str, key: &Key) -> bool {
    let finder = memmem::Finder::new(&key.needle);
    for at in finder.find_iter(hay) {
        let before = hay.get(..at).unwrap_or_default();
        let after = hay.get(at + key.needle.len()..).unwrap_or_default();
        let pass = match key.check {
            Check::None => true,
            Check::EmailLocal => {
                let local = token.rsplit_once('@').map_or("", |(l, _)| l).as_bytes();
                let trimmed = before
                    .iter()
                    .rposition(|&b| b != b'.')
                    .map_or(&[][..], |i| before.get(..=i).unwrap_or_default());
                trimmed.ends_with(local)
            }
            Check::Host => !before
                .last()
                .is_some_and(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_')),
            Check::UrlHost => matches!(before.last(), Some(b'/' | b'@')),
            Check::Slack => {
                let word =
                    |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
                if !word(before.last()) && !word(after.first()) {
                    return true;
                }
                false
            }
        };
        if !pass {
            continue;
        }
        match context(hay, at, key.needle.len(), key.spaced) {
            // Too far from any end: count it (toward taint, never away from it).
            None => return true,
            Some(around) => {
                let Ok(around) = std::str::from_utf8(around) else {
                    return true;
                };
                if tokenize_decoded(around)
                    .iter()
                    .any(|t| t.text.eq_ignore_ascii_case(token))
                {
                    return true;
                }
            }
        }
    }
    false
}

/// The text around `at..at + len` out to the nearest byte no token contains, that byte
/// included; `None` when there is none within [`MAX_CONTEXT`]. For the kinds with inner
/// spaces (`spaced`), white space right after the key is skipped first (`tel:` may be
/// followed by a line break before its number).
fn context(hay: &[u8], at: usize, len: usize, spaced: bool) -> Option<&[u8]> {
    let end_of_token = |b: &u8| match *b {
        b'\n' | b'"' | b'\r' | 0x0b | 0x0c => true,
        b' ' | b'\t' => !spaced,
        _ => false,
    };
    let lo = at.saturating_sub(MAX_CONTEXT);
    let start = match hay.get(lo..at)?.iter().rposition(end_of_token) {
        Some(i) => lo + i,
        None if lo == 0 => 0,
        None => return None,
    };
    let mut from = at + len;
    if spaced {
        // `tel:` may be followed by any white space, a line break included.
        while hay
            .get(from)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
        {
            from += 1;
        }
    }
    let hi = from.saturating_add(MAX_CONTEXT).min(hay.len());
    let end = match hay.get(from..hi)?.iter().position(end_of_token) {
        Some(i) => from + i + 1,
        None if hi == hay.len() => hay.len(),
        None => return None,
    };
    hay.get(start..end)
}

/// The keys of a canonical token (lower case), every one sound for its kind (see the module
/// documentation); none for a value that is no token.
fn keys(token: &str) -> Vec<Key> {
    let key = |needle: &str, check: Check, spaced: bool| Key {
        needle: needle.as_bytes().to_vec(),
        check,
        spaced,
    };
    if let Some((_, after)) = token.split_once("://") {
        let host_len = after.find(['/', '?']).unwrap_or(after.len());
        let (host, rest) = after.split_at(host_len);
        let (path, query) = match rest.find('?') {
            Some(q) => rest.split_at(q),
            None => (rest, ""),
        };
        let segment = path.rsplit('/').next().unwrap_or_default();
        if !segment.is_empty() && segment != "." && segment != ".." {
            return vec![key(&format!("/{segment}{query}"), Check::None, false)];
        }
        if !query.is_empty() {
            return vec![key(query, Check::None, false)];
        }
        let name = host.rsplit_once(':').map_or(host, |(h, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                h
            } else {
                host
            }
        });
        if name.starts_with('[') || name.parse::<std::net::Ipv4Addr>().is_ok() {
            return vec![key("://", Check::None, false)];
        }
        return vec![key(name, Check::Host, false)];
    }
    if token.starts_with('#') || token.starts_with('@') {
        return vec![key(token, Check::None, false)];
    }
    if let Some((local, domain)) = token.rsplit_once('@') {
        if local.is_empty() || domain.is_empty() {
            return Vec::new();
        }
        return vec![key(&format!("@{domain}"), Check::EmailLocal, false)];
    }
    if let Some(digits) = token.strip_prefix('+')
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
    {
        return vec![key("+", Check::None, true), key("tel:", Check::None, true)];
    }
    // What is left is a host (of a URL, or a bare domain), a Slack-like id or an IBAN.
    let mut out = Vec::new();
    if token.bytes().all(|b| b.is_ascii_alphanumeric()) {
        if is_slack_shaped(token) {
            out.push(key(token, Check::Slack, false));
        }
        if token.len() >= 15 {
            out.push(key(token.get(..4).unwrap_or(token), Check::None, true));
        }
    }
    if token.starts_with('[') || token.parse::<std::net::Ipv4Addr>().is_ok() {
        // An IP address is a host only in a URL, and may be written in other forms there.
        out.push(key("://", Check::None, false));
    } else if token.contains('.') {
        out.push(key(token, Check::Host, false));
    } else {
        out.push(key(token, Check::UrlHost, false));
    }
    out
}

/// A Slack-like id in lower case: `c`, `d`, `g`, `u` or `w`, then 8 to 11 letters or digits,
/// at least one a digit (what the tokenizer takes, upper case, for one).
fn is_slack_shaped(token: &str) -> bool {
    (9..=12).contains(&token.len())
        && token.starts_with(['c', 'd', 'g', 'u', 'w'])
        && token.bytes().any(|b| b.is_ascii_digit())
}
