//! Exact scanners for the token patterns that have no cheap literal to look for, on ASCII
//! text.
//!
//! Run over a whole text, the URL, domain, phone and IBAN regexes cost a pass each (a bare
//! domain's `.` and a phone's `+` are everywhere in prose; an IBAN has no literal at all):
//! about 6 ms for 1 MiB of prose. These scanners find the same matches in a fraction of that:
//! - URLs and domains are runs of a character class after a literal (`://`, `.`): their spans
//!   are computed directly from the literal's positions, found with `memchr`;
//! - phone numbers and IBANs are short (at most [`PHONE_MAX`] and [`IBAN_MAX`] bytes after
//!   their start): the places a match could start (a `+`, a `tel:`, two letters and two
//!   digits at the start of a word) are found with a cheap scan, and the regex runs only on a
//!   window of the text at each of them.
//!
//! Each function returns the `(start, end)` spans `find_iter` of the corresponding ASCII
//! regex returns, in the same order; the property tests in the parent module check that.

use memchr::{memchr_iter, memmem};
use regex::Regex;

/// A match: byte offsets of its start and end.
pub(super) type Span = (usize, usize);

/// The longest phone match after its `+` (`\+[0-9][0-9 \t().\-]{4,24}[0-9]`).
pub(super) const PHONE_MAX: usize = 1 + 1 + 24 + 1;
/// The longest IBAN match (`[A-Za-z]{2}[0-9]{2}(?: ?[A-Za-z0-9]{4}){2,7}(?: ?[A-Za-z0-9]{1,4})?`).
pub(super) const IBAN_MAX: usize = 4 + 7 * 5 + 5;

/// `\w` in ASCII.
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `[A-Za-z0-9\-]`: a character of a domain label.
fn is_label(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// `\s` in ASCII.
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ')
}

/// A character of a URL after its `://`: ASCII, not `\s` and not one of `<>"'` `` ` `` `{}|\^[]`.
fn is_url_char(b: u8) -> bool {
    b.is_ascii()
        && !is_space(b)
        && !matches!(
            b,
            b'<' | b'>' | b'"' | b'\'' | b'`' | b'{' | b'}' | b'|' | b'\\' | b'^' | b'[' | b']'
        )
}

/// The URL schemes, `(?i:https?|wss?|ftp)`.
const SCHEMES: [&[u8]; 5] = [b"https", b"http", b"wss", b"ws", b"ftp"];

/// `\b(?i:https?|wss?|ftp)://[^\s<>"'`{}|\\^\[\]]+` on ASCII text.
pub(super) fn urls(text: &str) -> Vec<Span> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut pos = 0;
    for colon in memmem::find_iter(b, b"://") {
        // At most one scheme ends right before a given `://` (their last letters differ
        // where their lengths would overlap).
        let Some(start) = SCHEMES.iter().find_map(|scheme| {
            let start = colon.checked_sub(scheme.len())?;
            b.get(start..colon)?
                .eq_ignore_ascii_case(scheme)
                .then_some(start)
        }) else {
            continue;
        };
        let word_before = start
            .checked_sub(1)
            .and_then(|i| b.get(i))
            .is_some_and(|&c| is_word(c));
        if start < pos || word_before {
            continue;
        }
        let rest = b.get(colon + 3..).unwrap_or_default();
        let len = rest.iter().take_while(|&&c| is_url_char(c)).count();
        if len > 0 {
            pos = colon + 3 + len;
            out.push((start, pos));
        }
    }
    out
}

/// `[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+` on ASCII text.
///
/// A match is a run of label characters followed by one or more `.label` groups, all
/// greedy. The leftmost match at or after the end of the previous one starts where the run
/// before the first qualifying `.` (one with a label character on each side) starts.
pub(super) fn domains(text: &str) -> Vec<Span> {
    let b = text.as_bytes();
    let label_at = |i: usize| b.get(i).is_some_and(|&c| is_label(c));
    let mut out = Vec::new();
    let mut pos = 0;
    for dot in memchr_iter(b'.', b) {
        // The run before the dot must start at or after `pos`.
        if dot <= pos || !label_at(dot - 1) || !label_at(dot + 1) {
            continue;
        }
        let mut start = dot - 1;
        while start > pos && label_at(start - 1) {
            start -= 1;
        }
        let mut end = dot;
        while b.get(end) == Some(&b'.') && label_at(end + 1) {
            end += 1;
            while label_at(end) {
                end += 1;
            }
        }
        out.push((start, end));
        pos = end;
    }
    out
}

/// The phone regex's matches on ASCII text: it is run at every `+` and every `tel:` (any
/// case), on a window just long enough for the longest match starting there.
pub(super) fn phones(text: &str, re: &Regex) -> Vec<Span> {
    let b = text.as_bytes();
    let mut starts: Vec<(usize, usize)> = memchr_iter(b'+', b).map(|p| (p, PHONE_MAX)).collect();
    for colon in memchr_iter(b':', b) {
        let Some(start) = colon.checked_sub(3) else {
            continue;
        };
        if b.get(start..colon)
            .is_some_and(|w| w.eq_ignore_ascii_case(b"tel"))
        {
            let rest = b.get(colon + 1..).unwrap_or_default();
            let spaces = rest.iter().take_while(|&&c| is_space(c)).count();
            starts.push((start, "tel:".len() + spaces + PHONE_MAX));
        }
    }
    starts.sort_unstable();
    windowed(re, text, starts)
}

/// The IBAN regex's matches on ASCII text: it is run only where a word starts with two
/// letters and two digits, on a window of [`IBAN_MAX`] bytes (plus one for its final `\b`).
pub(super) fn ibans(text: &str, re: &Regex) -> Vec<Span> {
    let b = text.as_bytes();
    let starts = digit_pairs(b).into_iter().filter_map(|digits| {
        let start = digits.checked_sub(2)?;
        let letters = b.get(start..digits)?.iter().all(u8::is_ascii_alphabetic);
        let word_before = start
            .checked_sub(1)
            .and_then(|i| b.get(i))
            .is_some_and(|&c| is_word(c));
        (letters && !word_before).then_some((start, IBAN_MAX))
    });
    windowed(re, text, starts)
}

/// Runs `re` at each `(start, longest)` in ascending order, skipping starts inside the
/// previous match, and keeps a match only if it starts there. The window ends one byte after
/// the longest possible match, so every assertion of a match at `start` sees what it would
/// see in the whole text: within the window the matches starting at `start` are exactly
/// those of the whole text, and leftmost-first picks the same one. Given every place a match
/// can start, this is `find_iter`.
fn windowed(re: &Regex, text: &str, starts: impl IntoIterator<Item = (usize, usize)>) -> Vec<Span> {
    let mut out = Vec::new();
    let mut pos = 0;
    for (start, longest) in starts {
        if start < pos {
            continue;
        }
        let end = start
            .saturating_add(longest)
            .saturating_add(1)
            .min(text.len());
        let Some(window) = text.get(..end) else {
            continue;
        };
        if let Some(m) = re.find_at(window, start)
            && m.start() == start
        {
            out.push((start, m.end()));
            pos = m.end();
        }
    }
    out
}

/// Positions `i` with ASCII digits at `i` and `i + 1`, ascending. Eight bytes at a time:
/// [`digit_mask`] marks the digits of a word, a shift pairs each with its neighbour; blocks
/// of four words without a digit are passed over after one combined test.
fn digit_pairs(b: &[u8]) -> Vec<usize> {
    const BLOCK: usize = 32;
    let mut out = Vec::new();
    // Whether the byte before the current word is a digit.
    let mut digit_before = false;
    let mut word_pairs = |base: usize, word: &[u8], digit_before: &mut bool| {
        let Ok(word) = <[u8; 8]>::try_from(word) else {
            return;
        };
        let digits = digit_mask(u64::from_le_bytes(word));
        if *digit_before && digits & 0x80 != 0 {
            out.push(base - 1);
        }
        // Byte j's mark is bit 8j + 7; byte j + 1's, shifted down by 8, lands on it.
        let mut pairs = digits & (digits >> 8);
        while pairs != 0 {
            out.push(base + pairs.trailing_zeros() as usize / 8);
            pairs &= pairs - 1;
        }
        *digit_before = digits >> 63 != 0;
    };
    let blocks = b.chunks_exact(BLOCK);
    let tail = blocks.remainder();
    for (k, block) in blocks.enumerate() {
        let words = block.chunks_exact(8);
        let any = words.clone().fold(0, |any, word| {
            any | <[u8; 8]>::try_from(word).map_or(0, |w| digit_mask(u64::from_le_bytes(w)))
        });
        if any == 0 {
            digit_before = false;
            continue;
        }
        for (j, word) in words.enumerate() {
            word_pairs(k * BLOCK + j * 8, word, &mut digit_before);
        }
    }
    let base = b.len() - tail.len();
    for (j, c) in tail.iter().enumerate() {
        let digit = c.is_ascii_digit();
        if digit && digit_before {
            out.push(base + j - 1);
        }
        digit_before = digit;
    }
    out
}

/// The high bit of each byte of `x` that is an ASCII digit (exact: with the high bits
/// cleared first, the additions cannot carry from one byte into the next).
fn digit_mask(x: u64) -> u64 {
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    const LOW7: u64 = u64::from_ne_bytes([0x7F; 8]);
    let seven = x & LOW7;
    let at_least_0 = seven.wrapping_add(u64::from_ne_bytes([0x80 - b'0'; 8]));
    let above_9 = seven.wrapping_add(u64::from_ne_bytes([0x80 - b'9' - 1; 8]));
    at_least_0 & !above_9 & !x & HIGH
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digit_pairs_across_words() {
        assert_eq!(digit_pairs(b"ab1234cd"), vec![2, 3, 4]);
        assert_eq!(digit_pairs(b"abcdefg12hijklmn"), vec![7]);
        assert_eq!(digit_pairs(b"abcdefg1"), Vec::<usize>::new());
        assert_eq!(digit_pairs(b"9"), Vec::<usize>::new());
        assert_eq!(digit_pairs(b"99"), vec![0]);
        assert_eq!(digit_pairs(b"/:0a9:"), Vec::<usize>::new());
        let mut long = vec![b'x'; 130];
        for at in [0, 15, 31, 63, 98, 126] {
            long[at] = b'4';
            long[at + 1] = b'2';
        }
        assert_eq!(digit_pairs(&long), vec![0, 15, 31, 63, 98, 126]);
        for byte in 0..=255_u8 {
            for at in 0..8 {
                let mut word = [b'5'; 8];
                word[at] = byte;
                let expected: u64 = (0..8)
                    .filter(|&j| word[j].is_ascii_digit())
                    .map(|j| 0x80 << (8 * j))
                    .sum();
                assert_eq!(digit_mask(u64::from_le_bytes(word)), expected, "{word:?}");
            }
        }
        let mixed = b"1a22b333c4444d5\xff66\x8077 9";
        let expected: Vec<usize> = (0..mixed.len() - 1)
            .filter(|&i| mixed[i].is_ascii_digit() && mixed[i + 1].is_ascii_digit())
            .collect();
        assert_eq!(digit_pairs(mixed), expected);
    }

    #[test]
    fn spans_of_literal_runs() {
        assert_eq!(
            urls("see https://a.b/c, or ftp://x"),
            vec![(4, 18), (22, 29)]
        );
        assert_eq!(urls("xhttp://a http:// "), Vec::<Span>::new());
        assert_eq!(domains("a.b.c..d.e /x.y"), vec![(0, 5), (7, 10), (12, 15)]);
    }
}
