//! Base64 blobs in payload text: an attachment as a mail client encodes it (lines of 76
//! characters), or one long unbroken line. What reads payload text for destinations skips
//! them (every letter-and-digit shape found inside one is noise: an address, a URL or a
//! domain needs `@`, `:` or `.`, which base64 has not), and the secret check decodes a blob
//! as one stream, so a secret split across its line breaks is found as well.

use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::ops::Range;

/// The shortest line that counts as a line of a blob.
const MIN_LINE: usize = 40;
/// The shortest blob of a single line.
const MIN_SINGLE: usize = 256;

/// Base64 characters, both alphabets, and `=` padding.
const B64: [bool; 256] = {
    let mut table = [false; 256];
    let mut rest: &mut [bool] = &mut table;
    let mut c: u8 = 0;
    while let Some((is, tail)) = rest.split_first_mut() {
        *is = c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'-' | b'_' | b'=');
        c = c.wrapping_add(1);
        rest = tail;
    }
    table
};

fn b64(b: u8) -> bool {
    B64.get(usize::from(b)).copied().unwrap_or(false)
}

/// Whether every byte of `line` is a base64 character: eight at a time without a branch
/// per byte (the lookups of a chunk are combined, then tested once).
fn all_b64(line: &[u8]) -> bool {
    let mut chunks = line.chunks_exact(8);
    for chunk in &mut chunks {
        if !chunk.iter().fold(true, |all, &b| all & b64(b)) {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| b64(b))
}

/// The byte ranges of the base64 blobs of `text`: two or more consecutive lines (`\n` or
/// `\r\n`) that are each a run of at least 40 base64 characters, or one such line of at least
/// 256. A range starts at its first line and ends after its last (line breaks inside
/// included, the last one not).
pub(crate) fn base64_blobs(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    // The blob being read: its start, the end of its last line, how many lines.
    let mut open: Option<(usize, usize, usize)> = None;
    let mut close = |open: &mut Option<(usize, usize, usize)>| {
        if let Some((start, end, lines)) = open.take()
            && (lines >= 2 || end - start >= MIN_SINGLE)
        {
            out.push(start..end);
        }
    };
    let mut start = 0;
    let ends = memchr::memchr_iter(b'\n', bytes).chain(std::iter::once(bytes.len()));
    for newline in ends {
        let mut end = newline;
        if end > start && bytes.get(end - 1) == Some(&b'\r') {
            end -= 1;
        }
        // A line of prose turns away at its first space: only blob lines are read whole.
        if end - start >= MIN_LINE && bytes.get(start..end).is_some_and(all_b64) {
            open = Some(match open {
                Some((s, _, n)) => (s, end, n + 1),
                None => (start, end, 1),
            });
        } else {
            close(&mut open);
        }
        start = newline + 1;
    }
    close(&mut open);
    out
}

/// The blobs of the strings of one call's arguments, each found once for every check that
/// reads them (the destinations in payload text, the secret-value check). A string is known
/// by where it is: the memo borrows the strings (`'v`) for as long as it lives, so two
/// strings at one place are one string.
#[derive(Debug, Default)]
pub(crate) struct Memo<'v> {
    found: RefCell<HashMap<Place, Vec<Range<usize>>>>,
    strings: PhantomData<&'v str>,
}

/// Where a string is: its address and length.
type Place = (usize, usize);

impl<'v> Memo<'v> {
    /// [`base64_blobs`] of `text`, found at its first call.
    pub(crate) fn blobs(&self, text: &'v str) -> Vec<Range<usize>> {
        // Too short for a blob: not worth a place in the memo.
        if text.len() < MIN_LINE * 2 {
            return Vec::new();
        }
        let key = (text.as_ptr().addr(), text.len());
        if let Some(found) = self.found.borrow().get(&key) {
            return found.clone();
        }
        let found = base64_blobs(text);
        self.found.borrow_mut().insert(key, found.clone());
        found
    }
}

/// The pieces of `text` outside its blobs (`blobs` from [`base64_blobs`]), in order.
pub(crate) fn outside<'t>(text: &'t str, blobs: &[Range<usize>]) -> Vec<&'t str> {
    let mut pieces = Vec::with_capacity(blobs.len() + 1);
    let mut at = 0;
    for b in blobs {
        if let Some(piece) = text.get(at..b.start).filter(|p| !p.is_empty()) {
            pieces.push(piece);
        }
        at = b.end;
    }
    if let Some(piece) = text.get(at..).filter(|p| !p.is_empty()) {
        pieces.push(piece);
    }
    pieces
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests {
    use super::*;

    #[test]
    fn mime_lines_and_long_lines_are_blobs_prose_is_not() {
        let line = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAx";
        let text = format!("Hello Bob,\n\nsee the file.\n{line}\r\n{line}\nQUJD==\n-- \nAlice\n");
        let blobs = base64_blobs(&text);
        assert_eq!(blobs.len(), 1);
        assert_eq!(&text[blobs[0].clone()], format!("{line}\r\n{line}"));
        let outside = outside(&text, &blobs);
        assert_eq!(
            outside.concat(),
            text.replace(&format!("{line}\r\n{line}"), "")
        );
        // One line is a blob only when long; prose of long words is not one.
        assert!(base64_blobs(line).is_empty());
        assert_eq!(base64_blobs(&line.repeat(4)), vec![0..line.len() * 4]);
        let prose = "a sentence of words that goes on and on, long enough to be a line\n".repeat(3);
        assert!(base64_blobs(&prose).is_empty());
        assert!(base64_blobs("").is_empty());
        // A URL or an address breaks a blob: `:`, `@` and `.` are no base64.
        let mixed = format!("{line}\nhttps://evil.example/{line}\n{line}\n");
        assert!(base64_blobs(&mixed).is_empty());
    }

    #[test]
    fn destinations_are_read_around_an_attachment_not_inside_it() {
        // Shapes of letters and digits inside the blob (a Slack id, an IBAN) are noise.
        let line = "UA1B2C3D4E5+DE89370400440532013000+QUJDREVGR0hJSktMTU5PUFFSU1RVVldY";
        let text = format!(
            "Wire it to DE89370400440532013000 and mail bob@corp.example\n{line}\n{line}\n"
        );
        let found = crate::taint::shaped_destinations(&text);
        assert_eq!(
            found,
            ["bob@corp.example", "de89370400440532013000"],
            "{found:?}"
        );
        let only_blob = format!("{line}\n{line}\n");
        assert!(crate::taint::shaped_destinations(&only_blob).is_empty());
        assert!(
            !crate::taint::shaped_destinations(line).is_empty(),
            "one short line is text"
        );
    }
}
