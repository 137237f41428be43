//! The tokenizer: decoding text and finding the destination-shaped tokens in it.

use super::scan::{self, Span};
use super::{Hasher, Token};
use crate::normalize::normalize_url;
use memchr::{memchr, memchr_iter, memchr2, memmem};
use percent_encoding::percent_decode_str;
use regex::Regex;
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::LazyLock;
use unicode_normalization::UnicodeNormalization;

pub(super) fn truncate(text: &str, max: usize) -> &str {
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
pub(super) fn decode(text: &str) -> Cow<'_, str> {
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
pub(super) fn value_token(value: &str) -> Option<String> {
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
    // A name of a few words (`hotel montmartre vue`) is one value, its white space one
    // space; longer text is prose, no destination.
    if v.split_whitespace().nth(MAX_VALUE_WORDS).is_some() {
        return None;
    }
    if v.chars().any(char::is_whitespace) {
        v = v.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    if v.is_empty() || v.len() > 256 {
        return None;
    }
    Some(v)
}

/// The most words a whole value may hold to be one destination (as a prompt's phrases).
const MAX_VALUE_WORDS: usize = 8;

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

/// The country codes that IBANs are issued under (the SWIFT IBAN registry, with the
/// countries that use IBANs outside it, such as most of West and Central Africa).
const IBAN_COUNTRIES: &[&str] = &[
    "AD", "AE", "AL", "AO", "AT", "AZ", "BA", "BE", "BF", "BG", "BH", "BI", "BJ", "BR", "BY", "CF",
    "CG", "CH", "CI", "CM", "CR", "CV", "CY", "CZ", "DE", "DJ", "DK", "DO", "DZ", "EE", "EG", "ES",
    "FI", "FK", "FO", "FR", "GA", "GB", "GE", "GI", "GL", "GQ", "GR", "GT", "GW", "HN", "HR", "HU",
    "IE", "IL", "IQ", "IR", "IS", "IT", "JO", "KM", "KW", "KZ", "LB", "LC", "LI", "LT", "LU", "LV",
    "LY", "MA", "MC", "MD", "ME", "MG", "MK", "ML", "MN", "MR", "MT", "MU", "MZ", "NE", "NI", "NL",
    "NO", "OM", "PK", "PL", "PS", "PT", "QA", "RO", "RS", "RU", "SA", "SC", "SD", "SE", "SI", "SK",
    "SM", "SN", "SO", "ST", "SV", "TD", "TG", "TL", "TN", "TR", "UA", "VA", "VG", "XK", "YE",
];

fn iban_valid(compact: &str) -> bool {
    if !(15..=34).contains(&compact.len()) || !compact.chars().all(|c| c.is_ascii_alphanumeric()) {
        return false;
    }
    if !compact
        .get(..2)
        .is_some_and(|cc| IBAN_COUNTRIES.contains(&cc))
    {
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

pub(super) fn tokenize(text: &str) -> Vec<Token> {
    tokenize_decoded(&decode(text))
}

/// The tokens of [`tokenize`] but names with a sigil (`#general`, `@alice`), which in free
/// text are words.
pub(super) fn tokenize_shaped(text: &str) -> Vec<Token> {
    tokenize_kinds(&decode(text), false)
}

/// [`tokenize`] of text that is already decoded.
pub(super) fn tokenize_decoded(text: &str) -> Vec<Token> {
    tokenize_kinds(text, true)
}

/// [`tokenize_decoded`], with the names with a sigil or without them ([`tokenize_shaped`]).
fn tokenize_kinds(text: &str, sigils: bool) -> Vec<Token> {
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
            // An IBAN is written in one case; mixed case (`Ic72jrLkFd9Q…`) is base64 or an
            // identifier that passes the checksum by chance (one in 97).
            let raw = slice(span);
            if raw.bytes().any(|b| b.is_ascii_uppercase())
                && raw.bytes().any(|b| b.is_ascii_lowercase())
            {
                continue;
            }
            let compact: String = raw
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
        if !present || !sigils {
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
mod tests;
