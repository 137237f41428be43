//! Exact scanners for the token patterns that have no cheap literal to look for, on ASCII
//! text.
//!
//! Run over a whole text, the URL, domain, phone and IBAN regexes cost a pass each (a bare
//! domain's `.` and a phone's `+` are everywhere in prose; an IBAN has no literal at all):
//! about 6 ms for 1 MiB of prose. These scanners find the same matches in a fraction of that:
//! - URLs and domains are runs of a character class after a literal (`://`, `.`): their spans
//!   are computed directly from the literal's positions, found with `memmem` for the rare
//!   `://` and, in long text, a word-at-a-time loop ([`each_byte`]) for the dense `.`;
//! - phone numbers and IBANs are short (at most [`PHONE_MAX`] and [`IBAN_MAX`] bytes after
//!   their start): the places a match could start (a `+`, a `tel:`, two letters and two
//!   digits at the start of a word) are found with a cheap scan (one `memchr2` pass for `+`
//!   and `:`, a block-at-a-time test for digit pairs), and the regex runs only on a window of
//!   the text at each of them;
//! - a Slack id is a whole word of capitals and digits: it is measured at each start of a
//!   word with one of its five first letters, found with `memchr`.
//!
//! Each function returns the `(start, end)` spans `find_iter` of the corresponding ASCII
//! regex returns, in the same order; the property tests in the parent module check that.

use memchr::{memchr_iter, memchr2_iter, memchr3_iter, memmem};
use regex::Regex;

/// A match: byte offsets of its start and end.
pub(super) type Span = (usize, usize);

/// The longest phone match after its `+` (`\+[0-9][0-9 \t().\-]{4,24}[0-9]`).
pub(super) const PHONE_MAX: usize = 1 + 1 + 24 + 1;
/// The longest IBAN match (`[A-Za-z]{2}[0-9]{2}(?: ?[A-Za-z0-9]{4}){2,7}(?: ?[A-Za-z0-9]{1,4})?`).
pub(super) const IBAN_MAX: usize = 4 + 7 * 5 + 5;

/// The `#name` channels or `@name` handles of ASCII text, as `(sigil, name start, name
/// end)`: what `captures_iter` of `[sigil]([A-Za-z0-9][A-Za-z0-9._\-]*)` finds (a name never
/// holds its sigil, so matches cannot overlap and each sigil followed by a letter or digit
/// starts one).
pub(super) fn sigil_names(b: &[u8], sigil: u8) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    for at in memchr_iter(sigil, b) {
        let start = at + 1;
        let Some(rest) = b.get(start..) else { continue };
        if !rest.first().is_some_and(u8::is_ascii_alphanumeric) {
            continue;
        }
        let len = rest
            .iter()
            .position(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-')))
            .unwrap_or(rest.len());
        out.push((at, start, start + len));
    }
    out
}

/// `\w` in ASCII.
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether the byte before `at` is a word byte (then `\b` fails at `at` before a word byte).
fn word_before(b: &[u8], at: usize) -> bool {
    at.checked_sub(1)
        .and_then(|i| b.get(i))
        .is_some_and(|&c| is_word(c))
}

/// `[A-Za-z0-9\-]`: a character of a domain label. A table (one load instead of three range
/// tests) because the domain scanner asks about every byte of a label around each dot.
fn is_label(b: u8) -> bool {
    LABEL.get(usize::from(b)).copied().unwrap_or(false)
}

/// [`is_label`] of each byte.
const LABEL: [bool; 256] = {
    let mut table = [false; 256];
    let mut rest: &mut [bool] = &mut table;
    let mut c: u8 = 0;
    while let Some((label, tail)) = rest.split_first_mut() {
        *label = c.is_ascii_alphanumeric() || c == b'-';
        c = c.wrapping_add(1);
        rest = tail;
    }
    table
};

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
        if start < pos || word_before(b, start) {
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
/// Dots are dense in prose (one every few dozen bytes), too dense for a `memchr` search
/// restarted at each: the dots of each [`DOT_SEGMENT`] bytes are listed by [`each_byte`]
/// first, then examined (two loops in turn, each with branches of its own, measured faster
/// than one loop doing both). Text shorter than [`DOT_SEGMENT`] is examined at each dot as
/// `memchr` finds it, without allocating a list.
pub(super) fn domains(text: &str) -> Vec<Span> {
    let b = text.as_bytes();
    let mut found = Domains {
        b,
        pos: 0,
        out: Vec::new(),
    };
    if b.len() < DOT_SEGMENT {
        memchr_iter(b'.', b).for_each(|dot| found.at(dot));
        return found.out;
    }
    let mut dots = Vec::new();
    for (k, segment) in b.chunks(DOT_SEGMENT).enumerate() {
        dots.clear();
        each_byte(segment, b'.', |i| dots.push(k * DOT_SEGMENT + i));
        dots.iter().for_each(|&dot| found.at(dot));
    }
    found.out
}

/// The bytes whose dots [`domains`] lists at a time (a list that stays in the L1 cache).
const DOT_SEGMENT: usize = 8192;

/// The domains found so far, and where the next may start.
struct Domains<'a> {
    b: &'a [u8],
    pos: usize,
    out: Vec<Span>,
}

impl Domains<'_> {
    /// The match the dot at `dot` belongs to, if it is the first one's first qualifying dot.
    ///
    /// A match is a run of label characters followed by one or more `.label` groups, all
    /// greedy. The leftmost match at or after the end of the previous one starts where the
    /// run before the first qualifying `.` (one with a label character on each side) starts.
    fn at(&mut self, dot: usize) {
        let (b, pos) = (self.b, self.pos);
        let label_at = |i: usize| b.get(i).is_some_and(|&c| is_label(c));
        // The run before the dot must start at or after `pos`.
        if dot <= pos || !label_at(dot - 1) || !label_at(dot + 1) {
            return;
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
        self.out.push((start, end));
        self.pos = end;
    }
}

/// Calls `f` with the position of each `needle` in `b`, ascending: for a byte too frequent
/// for `memchr`. A block of 32 bytes without it is passed over after one test (a loop the
/// compiler vectorises); in the others each word is compared at once.
fn each_byte(b: &[u8], needle: u8, mut f: impl FnMut(usize)) {
    const BLOCK: usize = 32;
    const LOW7: u64 = u64::from_ne_bytes([0x7F; 8]);
    let pattern = u64::from_ne_bytes([needle; 8]);
    let blocks = b.chunks_exact(BLOCK);
    let tail = blocks.remainder();
    for (k, block) in blocks.enumerate() {
        if !block.iter().fold(false, |any, &c| any | (c == needle)) {
            continue;
        }
        for (j, word) in block.chunks_exact(8).enumerate() {
            let Ok(word) = <[u8; 8]>::try_from(word) else {
                continue;
            };
            // The high bit of each zero byte of `x`, exactly (as in `digit_mask`, no
            // carry crosses a byte).
            let x = u64::from_le_bytes(word) ^ pattern;
            let mut zeros = !(((x & LOW7) + LOW7) | x | LOW7);
            while zeros != 0 {
                f(k * BLOCK + j * 8 + zeros.trailing_zeros() as usize / 8);
                zeros &= zeros - 1;
            }
        }
    }
    let base = b.len() - tail.len();
    for (j, &c) in tail.iter().enumerate() {
        if c == needle {
            f(base + j);
        }
    }
}

/// The phone regex's matches on ASCII text: it is run at every `+` and every `tel:` (any
/// case), on a window just long enough for the longest match starting there.
pub(super) fn phones(text: &str, re: &Regex) -> Vec<Span> {
    let b = text.as_bytes();
    // One pass for both; the starts come out ascending, as `windowed` needs: a `tel:` starts
    // 3 bytes before its colon, and none of those 3 bytes is a `+`.
    let starts = memchr2_iter(b'+', b':', b).filter_map(|at| {
        if b.get(at) == Some(&b'+') {
            // Most `+` in text start no number (`a+b`, a log's `+0000`): the regex runs only
            // where a digit and at least five more of the number's bytes follow, which every
            // match needs.
            let rest = b.get(at + 1..).unwrap_or_default();
            let long_enough = rest.first().is_some_and(u8::is_ascii_digit)
                && rest
                    .get(..6)
                    .is_some_and(|six| six.iter().all(|&c| is_phone_byte(c)));
            return long_enough.then_some((at, PHONE_MAX));
        }
        let start = at.checked_sub(3)?;
        b.get(start..at)?.eq_ignore_ascii_case(b"tel").then(|| {
            let rest = b.get(at + 1..).unwrap_or_default();
            let spaces = rest.iter().take_while(|&&c| is_space(c)).count();
            (start, "tel:".len() + spaces + PHONE_MAX)
        })
    });
    windowed(re, text, starts)
}

/// `[0-9 \t().\-]`: a byte of a phone number after its first digit.
fn is_phone_byte(c: u8) -> bool {
    c.is_ascii_digit() || matches!(c, b' ' | b'\t' | b'(' | b')' | b'.' | b'-')
}

/// The IBAN regex's matches on ASCII text: it is run only where a word starts with two
/// letters and two digits, on a window of [`IBAN_MAX`] bytes (plus one for its final `\b`).
pub(super) fn ibans(text: &str, re: &Regex) -> Vec<Span> {
    let b = text.as_bytes();
    let starts = iban_heads(b).into_iter().filter_map(|digits| {
        let start = digits.checked_sub(2)?;
        (!word_before(b, start)).then_some((start, IBAN_MAX))
    });
    windowed(re, text, starts)
}

/// The Slack-id regex's matches (`\b[CDGUW][A-Z0-9]{8,11}\b`) on ASCII text. An id is a
/// whole run of capitals and digits: the regex matches at a word's start exactly when the
/// word's first byte is one of the five letters, its run of capitals and digits is 9 to 12
/// bytes long, and no word byte follows the run (a shorter greedy match would end before a
/// capital or digit, where `\b` fails). The five letters are found with `memchr` (two
/// passes, merged), and each is measured where it starts a word.
pub(super) fn slack_ids(text: &str) -> Vec<Span> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut cdg = memchr3_iter(b'C', b'D', b'G', b).peekable();
    let mut uw = memchr2_iter(b'U', b'W', b).peekable();
    loop {
        let start = match (cdg.peek(), uw.peek()) {
            (Some(&x), Some(&y)) if x < y => cdg.next(),
            (Some(_), Some(_)) | (None, Some(_)) => uw.next(),
            (Some(_), None) => cdg.next(),
            (None, None) => None,
        };
        let Some(start) = start else { break };
        if word_before(b, start) {
            continue;
        }
        let rest = b.get(start..).unwrap_or_default();
        let run = rest
            .iter()
            .take(13)
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            .count();
        let after = rest.get(run).copied().is_some_and(is_word);
        if (9..=12).contains(&run) && !after {
            out.push((start, start + run));
        }
    }
    out
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

/// Positions `i` with ASCII digits at `i` and `i + 1` and ASCII letters at `i - 2` and
/// `i - 1` (where an IBAN's country code and check digits could be), ascending.
///
/// Most text has few digit pairs, so each block of [`PAIR_BLOCK`] bytes is first tested as a
/// whole ([`has_digit_pair`], a loop the compiler vectorises); only a block that has one is
/// searched, eight bytes at a time: [`digit_mask`] and [`letter_mask`] mark the digits and
/// letters of a word, and shifts line each digit up with its neighbour after it and the two
/// letters before it (from the next and the previous word at a word's ends). A log has digit
/// pairs everywhere but few after two letters: they are dropped here, a word at a time.
fn iban_heads(b: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut base = 0;
    // The letters of the two bytes before a block, as the last two of a previous word.
    let letters_before = |base: usize| {
        let at = |i: Option<usize>| {
            i.and_then(|i| b.get(i))
                .map_or(0, |&c| letter_mask(u64::from(c)) & 0x80)
        };
        at(base.checked_sub(2)) << 48 | at(base.checked_sub(1)) << 56
    };
    // Each window is a block and the byte after it, for the pair across its end.
    while let Some(window) = b.get(base..base + PAIR_BLOCK + 1) {
        if let Ok(window) = <&[u8; PAIR_BLOCK + 1]>::try_from(window)
            && has_digit_pair(window)
        {
            block_pairs(base, letters_before(base), window, &mut out);
        }
        base += PAIR_BLOCK;
    }
    // The rest, padded with bytes that are not digits (short text is all rest: one block
    // test is cheaper than a loop over its bytes).
    if let Some(rest) = b.get(base..).filter(|rest| rest.len() > 1) {
        let mut window = [0; PAIR_BLOCK + 1];
        window.iter_mut().zip(rest).for_each(|(w, &c)| *w = c);
        if has_digit_pair(&window) {
            block_pairs(base, letters_before(base), &window, &mut out);
        }
    }
    out
}

/// The [`iban_heads`] of a block at `base` that has a digit pair, given with the byte after
/// it and the [`letter_mask`] of the two bytes before it (as the last two bytes of a word).
fn block_pairs(
    base: usize,
    letters_before: u64,
    window: &[u8; PAIR_BLOCK + 1],
    out: &mut Vec<usize>,
) {
    let (block, after) = window.split_at(PAIR_BLOCK);
    let mut marks = [0; PAIR_BLOCK / 8];
    let mut letters = [0; PAIR_BLOCK / 8];
    for ((mark, letter), word) in marks
        .iter_mut()
        .zip(&mut letters)
        .zip(block.chunks_exact(8))
    {
        let word = <[u8; 8]>::try_from(word).map_or(0, u64::from_le_bytes);
        *mark = digit_mask(word);
        *letter = letter_mask(word);
    }
    let after = after.first().is_some_and(u8::is_ascii_digit);
    for (j, &digits) in marks.iter().enumerate() {
        // The mark of the byte after this word, moved to the mark of its last byte.
        let next = marks
            .get(j + 1)
            .map_or(u64::from(after) << 7, |&m| m & 0x80)
            << 56;
        let here = letters.get(j).copied().unwrap_or(0);
        let previous = j
            .checked_sub(1)
            .and_then(|i| letters.get(i))
            .copied()
            .unwrap_or(letters_before);
        // Letters one and two bytes before each byte.
        let one_before = here << 8 | previous >> 56;
        let two_before = here << 16 | previous >> 48;
        let mut pairs = digits & ((digits >> 8) | next) & one_before & two_before;
        while pairs != 0 {
            out.push(base + j * 8 + pairs.trailing_zeros() as usize / 8);
            pairs &= pairs - 1;
        }
    }
}

/// The bytes [`iban_heads`] tests at once: large enough that the test's fixed cost is small
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

/// The high bit of each byte of `x` that is an ASCII letter (exact, as [`digit_mask`]:
/// setting bit 5 maps each capital to its small letter and no other byte into `a..=z`).
fn letter_mask(x: u64) -> u64 {
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    const LOW7: u64 = u64::from_ne_bytes([0x7F; 8]);
    let small = (x | u64::from_ne_bytes([0x20; 8])) & LOW7;
    let at_least_a = small.wrapping_add(u64::from_ne_bytes([0x80 - b'a'; 8]));
    let above_z = small.wrapping_add(u64::from_ne_bytes([0x80 - b'z' - 1; 8]));
    at_least_a & !above_z & !x & HIGH
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iban_heads_across_words_and_blocks() {
        let none = Vec::<usize>::new();
        assert_eq!(iban_heads(b"ab1234cd"), vec![2]);
        assert_eq!(iban_heads(b"abcdefG12hijklmn"), vec![7]);
        assert_eq!(iban_heads(b"abcdefg1"), none);
        assert_eq!(iban_heads(b"99"), none);
        assert_eq!(iban_heads(b"a99"), none);
        assert_eq!(iban_heads(b"/:0a9:"), none);
        assert_eq!(iban_heads(b"a_12 @b12 [Z12"), none);
        // Heads inside a word, across words, across blocks (letters in the block before)
        // and in the tail.
        let mut long = vec![b'x'; 400];
        let at = [0, 15, 31, 63, 98, 126, 128, 129, 255, 383, 386, 398];
        for &i in &at {
            long[i] = b'4';
            long[i + 1] = b'2';
        }
        assert_eq!(iban_heads(&long), naive_iban_heads(&long));
        assert_eq!(iban_heads(&long), [15, 31, 63, 98, 126, 255, 383, 398]);
        mask_like_a_byte_test(digit_mask, b'5', u8::is_ascii_digit);
        mask_like_a_byte_test(letter_mask, b'q', u8::is_ascii_alphabetic);
        let mixed = b"1a22b333c4444d5\xff66\x8077 9ab12Cd34\xe9f56";
        assert_eq!(iban_heads(mixed), naive_iban_heads(mixed));
    }

    /// `mask` against `is` for every byte at every place of a word of `fill`.
    fn mask_like_a_byte_test(mask: fn(u64) -> u64, fill: u8, is: fn(&u8) -> bool) {
        for byte in 0..=255_u8 {
            for at in 0..8 {
                let mut word = [fill; 8];
                word[at] = byte;
                let expected: u64 = (0..8)
                    .filter(|&j| is(&word[j]))
                    .map(|j| 0x80 << (8 * j))
                    .sum();
                assert_eq!(mask(u64::from_le_bytes(word)), expected, "{word:?}");
            }
        }
    }

    fn naive_iban_heads(b: &[u8]) -> Vec<usize> {
        (2..b.len().saturating_sub(1))
            .filter(|&i| {
                b[i - 2].is_ascii_alphabetic()
                    && b[i - 1].is_ascii_alphabetic()
                    && b[i].is_ascii_digit()
                    && b[i + 1].is_ascii_digit()
            })
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Digits and letters among other bytes, sparse or dense, in texts of several
        /// blocks.
        #[test]
        fn iban_heads_like_a_byte_loop(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    4 => proptest::prelude::any::<u8>(),
                    2 => b'0'..=b'9',
                    2 => b'a'..=b'z',
                    1 => b'A'..=b'Z',
                    1 => proptest::strategy::Just(b'/'),
                    1 => proptest::strategy::Just(b'@'),
                    1 => proptest::strategy::Just(b'`'),
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
            proptest::prop_assert_eq!(iban_heads(&bytes), naive_iban_heads(&bytes));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Every position of the byte, in order, in texts of several blocks, with the
        /// byte sparse or dense and next to bytes one bit away from it.
        #[test]
        fn each_byte_like_a_byte_loop(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    3 => proptest::prelude::any::<u8>(),
                    2 => proptest::strategy::Just(b'.'),
                    1 => proptest::strategy::Just(b'.' ^ 0x80),
                    1 => proptest::strategy::Just(b'.' ^ 0x01),
                    1 => proptest::strategy::Just(b'+'),
                ],
                0..300,
            ),
            needle in proptest::prop_oneof![
                proptest::strategy::Just(b'.'),
                proptest::strategy::Just(b'+'),
                proptest::prelude::any::<u8>(),
            ],
        ) {
            let mut found = Vec::new();
            each_byte(&bytes, needle, |i| found.push(i));
            let expected: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] == needle).collect();
            proptest::prop_assert_eq!(found, expected);
        }
    }

    #[test]
    fn slack_ids_are_whole_words_of_capitals_and_digits() {
        let none: Vec<Span> = Vec::new();
        assert_eq!(slack_ids("C0123ABCD"), vec![(0, 9)]);
        assert_eq!(slack_ids("to U0123ABCDEFG."), vec![(3, 15)]);
        assert_eq!(slack_ids("(C0123ABCD) D0123ABCD"), vec![(1, 10), (12, 21)]);
        assert_eq!(slack_ids("U0123ABCDEFGH"), none, "13 long");
        assert_eq!(slack_ids("C0123ABC"), none, "8 long");
        assert_eq!(slack_ids("xC0123ABCD"), none);
        assert_eq!(slack_ids("_C0123ABCD"), none);
        assert_eq!(slack_ids("C0123ABCDx"), none);
        assert_eq!(slack_ids("E0123ABCD GET"), none);
        // Every place around a block's end, after a space and after a word byte.
        for at in 110..140 {
            let text = format!("{}G0123ABCD9 ", " ".repeat(at));
            assert_eq!(slack_ids(&text), vec![(at, at + 10)], "at {at}");
            let text = format!("{}G0123ABCD9", "x".repeat(at));
            assert_eq!(slack_ids(&text), none, "after a word, at {at}");
        }
    }

    #[test]
    fn label_table() {
        for c in 0..=255_u8 {
            assert_eq!(is_label(c), c.is_ascii_alphanumeric() || c == b'-', "{c}");
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
