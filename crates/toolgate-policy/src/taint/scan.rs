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

/// Positions `i` with ASCII digits at `i` and `i + 1`, ascending.
///
/// Most text has few digit pairs, so each block of [`PAIR_BLOCK`] bytes is first tested as a
/// whole ([`has_digit_pair`], a loop the compiler vectorises); only a block that has one is
/// searched, eight bytes at a time: [`digit_mask`] marks the digits of a word, a shift pairs
/// each with its neighbour (the next word's first byte for its last).
fn digit_pairs(b: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut base = 0;
    // Each window is a block and the byte after it, for the pair across its end.
    while let Some(window) = b.get(base..base + PAIR_BLOCK + 1) {
        let Ok(window) = <&[u8; PAIR_BLOCK + 1]>::try_from(window) else {
            break;
        };
        if has_digit_pair(window) {
            let (block, after) = window.split_at(PAIR_BLOCK);
            let mut marks = [0; PAIR_BLOCK / 8];
            for (mark, word) in marks.iter_mut().zip(block.chunks_exact(8)) {
                *mark = <[u8; 8]>::try_from(word).map_or(0, |w| digit_mask(u64::from_le_bytes(w)));
            }
            let after = after.first().is_some_and(u8::is_ascii_digit);
            for (j, &digits) in marks.iter().enumerate() {
                // The mark of the byte after this word, moved to the mark of its last byte.
                let next = marks
                    .get(j + 1)
                    .map_or(u64::from(after) << 7, |&m| m & 0x80)
                    << 56;
                let mut pairs = digits & ((digits >> 8) | next);
                while pairs != 0 {
                    out.push(base + j * 8 + pairs.trailing_zeros() as usize / 8);
                    pairs &= pairs - 1;
                }
            }
        }
        base += PAIR_BLOCK;
    }
    let tail = b.get(base..).unwrap_or_default();
    for (j, pair) in tail.windows(2).enumerate() {
        if pair.iter().all(u8::is_ascii_digit) {
            out.push(base + j);
        }
    }
    out
}

/// The bytes [`digit_pairs`] tests at once: large enough that the test's fixed cost is small
/// against it, small enough that a block with one pair is not much work to search.
const PAIR_BLOCK: usize = 128;

/// Whether some byte among the first [`PAIR_BLOCK`] and the byte after it are both ASCII
/// digits. Without a branch per byte, so that it compiles to vector instructions: two bytes
/// are digits when the larger of their distances above `0` (wrapping) is below 10.
fn has_digit_pair(window: &[u8; PAIR_BLOCK + 1]) -> bool {
    let (bytes, _) = window.split_at(PAIR_BLOCK);
    let (_, next) = window.split_at(1);
    bytes.iter().zip(next).fold(u8::MAX, |least, (&c, &n)| {
        least.min(c.wrapping_sub(b'0').max(n.wrapping_sub(b'0')))
    }) < 10
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
        // Pairs inside a block, across words, across blocks and in the tail.
        let mut long = vec![b'x'; 400];
        let at = [0, 15, 31, 63, 98, 126, 255, 383, 386, 398];
        for &i in &at {
            long[i] = b'4';
            long[i + 1] = b'2';
        }
        assert_eq!(digit_pairs(&long), at);
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

    fn naive_digit_pairs(b: &[u8]) -> Vec<usize> {
        (0..b.len().saturating_sub(1))
            .filter(|&i| b[i].is_ascii_digit() && b[i + 1].is_ascii_digit())
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Digits among other bytes, sparse or dense, in texts of several blocks.
        #[test]
        fn digit_pairs_like_a_byte_loop(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    4 => proptest::prelude::any::<u8>(),
                    1 => b'0'..=b'9',
                    1 => proptest::strategy::Just(b'/'),
                    1 => proptest::strategy::Just(b':'),
                ],
                0..600,
            ),
            dense in 0..4_usize,
        ) {
            // With `dense` > 0, every byte whose index is a multiple of it is a digit.
            let bytes: Vec<u8> = bytes
                .iter()
                .enumerate()
                .map(|(i, &c)| if dense > 0 && i % dense == 0 { b'0' + (c % 10) } else { c })
                .collect();
            proptest::prop_assert_eq!(digit_pairs(&bytes), naive_digit_pairs(&bytes));
        }
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
