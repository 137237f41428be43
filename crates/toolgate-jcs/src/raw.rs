//! The canonical SHA-256 of JSON text, computed from its bytes without a value tree.
//!
//! Large tool results arrive as JSON text; parsing one into a `serde_json::Value` only to
//! write it out again costs about as much as hashing it. Instead, one pass over the bytes
//! records a flat list of tokens (spans of the input), and a second walk over that list
//! (members of each object in canonical order) feeds SHA-256:
//!
//! - `null`, `true`, `false` and integers of at most 2^53 - 1 in magnitude (written without
//!   a sign on zero, a fraction or an exponent) are hashed as they are written;
//! - a string that already uses only the escapes RFC 8785 writes (`\"`, `\\`, `\b \f \n
//!   \r \t`, `\u00xx` in lower case for the other control characters; every other
//!   character literal) is hashed from its raw bytes, quotes included, in one piece
//!   (through no buffer when it is long): the scanner finds its end with `memchr`, then
//!   checks it for control characters and anything but ASCII in one vectorised pass (and
//!   for UTF-8 if it is not ASCII), and SHA-256 reads it once;
//! - any other string (`\/`, `\u0041`, upper-case hex, surrogate pairs, ...) is decoded by
//!   `serde_json` and written by the same escaper as the value path;
//! - object members are sorted by the UTF-16 code units of their decoded names (compared
//!   as UTF-8, see [`utf16_cmp`]); a name written canonically is hashed as written.
//!
//! Whatever this does not reproduce exactly is left to the value path (`None`): invalid
//! JSON or UTF-8, trailing data, duplicate member names (a `Value` keeps the last),
//! other numbers (they need ECMAScript's number formatting), nesting deeper than
//! [`MAX_DEPTH`] and strings `serde_json` would not decode. The value path then gives the
//! result (or the error) it always gave. Property tests check both paths agree.

use std::borrow::Cow;
use std::io::{BufWriter, Write};

use sha2::{Digest, Sha256};

use crate::canonical::{HashWriter, SAFE_INTEGER, write_string};

/// Deeper nesting goes to the value path (`serde_json` itself stops at 127 levels).
const MAX_DEPTH: usize = 100;

/// Hex SHA-256 of the canonical form of the JSON text `json`, or `None` when the value
/// path must decide; see the module docs.
pub(crate) fn sha256_hex(json: &[u8]) -> Option<String> {
    let mut scanner = Scanner {
        json,
        pos: 0,
        tape: Vec::with_capacity((json.len() / 8).clamp(4, 1024)),
    };
    scanner.skip_whitespace();
    scanner.value(0)?;
    scanner.skip_whitespace();
    if scanner.pos != json.len() {
        return None;
    }
    // The canonical form is never longer than the text; a small value needs no 8 KiB.
    let capacity = json.len().clamp(64, 8 * 1024);
    let mut out = BufWriter::with_capacity(capacity, HashWriter(Sha256::new()));
    let emitter = Emitter {
        json,
        tape: &scanner.tape,
    };
    emitter.emit(&mut out, 0)?;
    let hasher = out.into_inner().ok()?;
    Some(hex::encode(hasher.0.finalize()))
}

/// One value of the input, in input order; containers are followed by their contents.
#[derive(Debug, Clone, Copy)]
enum Token {
    /// `json[start..end]` is already canonical: a literal, a safe integer or a string
    /// (quotes included) with canonical escapes only.
    Raw { start: usize, end: usize },
    /// A string (quotes included) that has to be decoded and escaped again.
    Decode { start: usize, end: usize },
    /// The index of the token after the array's last element.
    Array { end: usize },
    /// The index of the token after the object's last member (names and values alternate).
    Object { end: usize },
}

struct Scanner<'a> {
    json: &'a [u8],
    pos: usize,
    tape: Vec<Token>,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.json.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.string(),
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.integer(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let (start, end) = (self.pos, self.pos + word.len());
        if self.json.get(start..end)? != word {
            return None;
        }
        self.pos = end;
        self.tape.push(Token::Raw { start, end });
        Some(())
    }

    /// An integer of at most 2^53 - 1 in magnitude as RFC 8785 writes it; anything else
    /// that may be a number is `None`.
    fn integer(&mut self) -> Option<()> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let first = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        let digits = self.json.get(first..self.pos)?;
        let plain = match digits {
            [] | [b'0', _, ..] => false,
            [b'0'] => !negative,
            _ => digits.len() <= 16,
        };
        if !plain || matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let n = digits
            .iter()
            .fold(0_u64, |n, d| n * 10 + u64::from(d - b'0'));
        if n > SAFE_INTEGER {
            return None;
        }
        self.tape.push(Token::Raw {
            start,
            end: self.pos,
        });
        Some(())
    }

    fn string(&mut self) -> Option<()> {
        let json = self.json;
        let start = self.pos;
        let mut i = start + 1;
        let mut canonical = true;
        loop {
            i += memchr::memchr2(b'"', b'\\', json.get(i..)?)?;
            match json.get(i).copied()? {
                b'"' => break,
                b'\\' => match json.get(i + 1).copied()? {
                    b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                    b'u' if json.get(i + 2..i + 6).is_some_and(canonical_u_escape) => i += 6,
                    // Decoded later; whatever follows `\u` is looked at as plain text here,
                    // and an invalid escape makes the decoding fail.
                    b'u' | b'/' => {
                        canonical = false;
                        i += 2;
                    }
                    _ => return None,
                },
                _ => return None,
            }
        }
        // Escapes are printable ASCII: any control character is a literal one (invalid),
        // and only literal text can be anything but ASCII.
        let contents = json.get(start + 1..i)?;
        let (low, high) = min_max(contents);
        if low < 0x20 || (high >= 0x80 && std::str::from_utf8(contents).is_err()) {
            return None;
        }
        let end = i + 1;
        self.pos = end;
        self.tape.push(if canonical {
            Token::Raw { start, end }
        } else {
            Token::Decode { start, end }
        });
        Some(())
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        self.container(depth, Token::Array { end: 0 }, b']', |scanner| {
            scanner.value(depth)
        })
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        self.container(depth, Token::Object { end: 0 }, b'}', |scanner| {
            if scanner.peek() != Some(b'"') {
                return None;
            }
            scanner.string()?;
            scanner.skip_whitespace();
            if scanner.peek() != Some(b':') {
                return None;
            }
            scanner.pos += 1;
            scanner.skip_whitespace();
            scanner.value(depth)
        })
    }

    /// An array or object: `open` on the tape, then each `element` (a value, or a name
    /// and a value) separated by commas up to `close`; the token is then given its end.
    fn container(
        &mut self,
        depth: usize,
        open: Token,
        close: u8,
        mut element: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let at = self.tape.len();
        self.tape.push(open);
        self.pos += 1;
        self.skip_whitespace();
        if self.peek() == Some(close) {
            self.pos += 1;
        } else {
            loop {
                element(self)?;
                self.skip_whitespace();
                match self.peek()? {
                    b',' => {
                        self.pos += 1;
                        self.skip_whitespace();
                    }
                    c if c == close => {
                        self.pos += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        let end = self.tape.len();
        *self.tape.get_mut(at)? = match open {
            Token::Array { .. } => Token::Array { end },
            _ => Token::Object { end },
        };
        Some(())
    }
}

/// `\u` followed by these four bytes is how RFC 8785 writes the character: a control
/// character without a short escape, in lower-case hex.
fn canonical_u_escape(hex: &[u8]) -> bool {
    match hex {
        [b'0', b'0', b'0', low] => matches!(low, b'0'..=b'7' | b'b' | b'e' | b'f'),
        [b'0', b'0', b'1', low] => matches!(low, b'0'..=b'9' | b'a'..=b'f'),
        _ => false,
    }
}

/// The smallest and the largest byte of `bytes` (a loop the compiler vectorises).
fn min_max(bytes: &[u8]) -> (u8, u8) {
    bytes
        .iter()
        .fold((u8::MAX, 0), |(low, high), &b| (low.min(b), high.max(b)))
}

struct Emitter<'a> {
    json: &'a [u8],
    tape: &'a [Token],
}

impl Emitter<'_> {
    /// Writes the canonical form of the value at `at`; returns the index after it.
    fn emit<W: Write>(&self, out: &mut W, at: usize) -> Option<usize> {
        match *self.tape.get(at)? {
            Token::Raw { start, end } => {
                out.write_all(self.json.get(start..end)?).ok()?;
                Some(at + 1)
            }
            Token::Decode { start, end } => {
                let text: String = serde_json::from_slice(self.json.get(start..end)?).ok()?;
                write_string(out, &text).ok()?;
                Some(at + 1)
            }
            Token::Array { end } => {
                out.write_all(b"[").ok()?;
                let mut i = at + 1;
                while i < end {
                    if i > at + 1 {
                        out.write_all(b",").ok()?;
                    }
                    i = self.emit(out, i)?;
                }
                out.write_all(b"]").ok()?;
                Some(end)
            }
            Token::Object { end } => {
                let mut members = Vec::new();
                let mut i = at + 1;
                while i < end {
                    members.push(self.member(i)?);
                    i = self.skip(i + 1);
                }
                members.sort_unstable_by(|a, b| utf16_cmp(&a.name, &b.name));
                if members.windows(2).any(|pair| match pair {
                    [a, b] => a.name == b.name,
                    _ => false,
                }) {
                    return None;
                }
                out.write_all(b"{").ok()?;
                for (k, member) in members.iter().enumerate() {
                    if k > 0 {
                        out.write_all(b",").ok()?;
                    }
                    match member.raw {
                        Some(quoted) => out.write_all(quoted).ok()?,
                        None => write_string(out, std::str::from_utf8(&member.name).ok()?).ok()?,
                    }
                    out.write_all(b":").ok()?;
                    self.emit(out, member.value)?;
                }
                out.write_all(b"}").ok()?;
                Some(end)
            }
        }
    }

    /// The member whose name is the token at `at`.
    fn member(&self, at: usize) -> Option<Member<'_>> {
        let (Token::Raw { start, end } | Token::Decode { start, end }) = *self.tape.get(at)? else {
            return None;
        };
        let quoted = self.json.get(start..end)?;
        let inner = quoted.get(1..quoted.len().checked_sub(1)?)?;
        let name = if inner.contains(&b'\\') {
            let decoded: String = serde_json::from_slice(quoted).ok()?;
            Cow::Owned(decoded.into_bytes())
        } else {
            // Checked to be UTF-8 by the scanner.
            Cow::Borrowed(inner)
        };
        let raw = matches!(self.tape.get(at), Some(Token::Raw { .. })).then_some(quoted);
        Some(Member {
            name,
            raw,
            value: at + 1,
        })
    }

    /// The index of the token after the value at `at`.
    fn skip(&self, at: usize) -> usize {
        match self.tape.get(at) {
            Some(Token::Array { end } | Token::Object { end }) => *end,
            _ => at + 1,
        }
    }
}

/// A member of an object: its decoded name (UTF-8), the name as written when that is
/// canonical, and the index of its value.
struct Member<'a> {
    name: Cow<'a, [u8]>,
    raw: Option<&'a [u8]>,
    value: usize,
}

/// The order of two UTF-8 strings by their UTF-16 code units (RFC 8785 §3.2.3), without
/// converting them. UTF-8 bytes sort as code points do, and so does UTF-16 except that
/// U+E000..U+FFFF (lead byte 0xEE or 0xEF) come after the surrogate pairs of U+10000 and
/// above (lead bytes from 0xF0). Where two strings first differ in such a pair of lead
/// bytes, the order turns; anywhere else (continuation bytes of characters with the same
/// lead byte, or any other pair of lead bytes) it is the byte order.
fn utf16_cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let differ = a.iter().zip(b).find(|(x, y)| x != y);
    match differ {
        None => a.len().cmp(&b.len()),
        Some((&x, &y)) if x >= 0xF0 && matches!(y, 0xEE | 0xEF) => std::cmp::Ordering::Less,
        Some((&x, &y)) if y >= 0xF0 && matches!(x, 0xEE | 0xEF) => std::cmp::Ordering::Greater,
        Some((x, y)) => x.cmp(y),
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        reason = "tests: a failed expectation should stop the test with its message"
    )]
    use super::*;
    use crate::{canonical_sha256, canonical_sha256_of_json};
    use proptest::prelude::*;
    use serde_json::Value;

    /// Today's path: parse into a value and hash that.
    fn value_path(json: &[u8]) -> Option<String> {
        canonical_sha256(&serde_json::from_slice(json).ok()?).ok()
    }

    /// Both paths agree (in Ok-ness too); returns what the raw path alone gave.
    fn same(json: &[u8]) -> Option<String> {
        let expected = value_path(json);
        let raw = sha256_hex(json);
        if raw.is_some() {
            assert_eq!(raw, expected, "{:?}", String::from_utf8_lossy(json));
        }
        assert_eq!(
            canonical_sha256_of_json(json).ok(),
            expected,
            "{:?}",
            String::from_utf8_lossy(json)
        );
        raw
    }

    /// Taken by the raw path, with the value path's hash.
    fn fast(json: &str) {
        assert!(same(json.as_bytes()).is_some(), "fell back: {json:?}");
    }

    /// Left to the value path, which succeeds.
    fn falls_back(json: &str) {
        assert!(same(json.as_bytes()).is_none(), "not a fallback: {json:?}");
        assert!(value_path(json.as_bytes()).is_some(), "invalid: {json:?}");
    }

    /// Left to the value path, which fails.
    fn invalid(json: &[u8]) {
        assert!(same(json).is_none(), "{:?}", String::from_utf8_lossy(json));
        assert!(canonical_sha256_of_json(json).is_err());
    }

    #[test]
    fn canonical_text_is_hashed_as_the_value() {
        fast(r#"{"b":[true,false,null],"a":{"y":-1,"x":0},"":"","c":9007199254740991}"#);
        fast(" \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" : { } , \"c\" : [ ] } \n");
        fast(r#""\"\\\b\f\n\r\t\u0000\u001f\u000b\u007f/é😀 ""#);
        fast("\"\u{7f}\u{2028}\u{ffff}\u{10ffff}\"");
        fast(r#"[-9007199254740991,9007199254740991,0,-1,10]"#);
        // Names sorted by UTF-16 code units: U+E000 after U+1F600 (a surrogate pair).
        fast(r#"{"":1,"😀":2,"a":3,"é":4,"\n":5,"A":6}"#);
        fast(r#"{"a":{"b":{"c":[{"e":1,"d":2}]}},"\u0000":0}"#);
        fast("{}");
        fast("[]");
        fast("\"\"");
        fast("0");
        fast("true");
        fast(&format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH),
            "]".repeat(MAX_DEPTH)
        ));
    }

    #[test]
    fn other_escapes_are_decoded() {
        for json in [
            r#""\/""#,
            r#""\u0041""#,
            r#""\u001F""#,
            r#""\u0008\u0009\u000a\u000C\u000d""#,
            // Characters RFC 8785 writes in another way, each alone.
            r#""\u0008""#,
            r#""\u0009""#,
            r#""\u000a""#,
            r#""\u000c""#,
            r#""\u000d""#,
            r#""\u0022""#,
            r#""\u005c""#,
            r#""\u0020""#,
            r#""\u007f""#,
            r#""\u0080""#,
            r#""x\u001F""#,
            r#""\u00e9\u00E9\u2028""#,
            r#""\ud83d\ude00\uD83D\uDE00""#,
            r#"{"\u0062":1,"a\/":2}"#,
            r#"["a\/b",{"x":"\u005c\u0022"}]"#,
        ] {
            fast(json);
        }
    }

    #[test]
    fn a_large_text_result_takes_the_raw_path() {
        let line = format!("{}\n", "x".repeat(136));
        let text = line.repeat(8000);
        let json = serde_json::to_vec(&serde_json::json!({
            "content": [{"type": "text", "text": text}],
            "isError": false,
        }))
        .unwrap();
        assert!(same(&json).is_some());
    }

    #[test]
    fn duplicate_names_fall_back() {
        falls_back(r#"{"a":1,"a":2}"#);
        falls_back(r#"{"a":1,"b":0,"a":2}"#);
        falls_back(r#"{"a":1,"\u0061":2}"#);
        falls_back(r#"{"\n":1,"\u000a":2}"#);
        falls_back(r#"[{"x":{"a":1,"a":1}}]"#);
        // The value keeps the last.
        assert_eq!(
            canonical_sha256_of_json(br#"{"a":1,"a":2}"#).unwrap(),
            canonical_sha256_of_json(br#"{"a":2}"#).unwrap()
        );
    }

    #[test]
    fn other_numbers_fall_back() {
        for json in [
            "-0",
            "1.0",
            "0.5",
            "1e2",
            "1E2",
            "-1e-7",
            "9007199254740992",
            "-9007199254740992",
            "12345678901234567",
            "18446744073709551616",
            "123456789012345678901234567890",
            "[1,2.5]",
            r#"{"a":{"b":1e300}}"#,
        ] {
            falls_back(json);
        }
        // Out of range for serde_json: the same error either way.
        invalid(b"1e400");
    }

    #[test]
    fn deep_nesting_falls_back() {
        for depth in [MAX_DEPTH + 1, 127] {
            falls_back(&format!("{}{}", "[".repeat(depth), "]".repeat(depth)));
            falls_back(&format!(
                "{}1{}",
                r#"{"a":"#.repeat(depth),
                "}".repeat(depth)
            ));
        }
        invalid(format!("{}{}", "[".repeat(128), "]".repeat(128)).as_bytes());
        invalid(format!("{}1{}", r#"{"a":"#.repeat(128), "}".repeat(128)).as_bytes());
    }

    #[test]
    fn invalid_text_falls_back_to_the_same_error() {
        for json in [
            &b""[..],
            b" ",
            b"{",
            b"}",
            b"[1,]",
            b"[1 2]",
            b"{\"a\" 1}",
            b"{\"a\":1,}",
            b"{a:1}",
            b"{1:1}",
            b"01",
            b"-",
            b"-a",
            b"+1",
            b"1.",
            b".5",
            b"tru",
            b"nul",
            b"truex",
            b"True",
            b"\"abc",
            b"\"\\x\"",
            b"\"\\u12\"",
            b"\"\\u12g4\"",
            b"\"\\ud800\"",
            b"\"\\udc00\\ud800\"",
            b"\"a\nb\"",
            b"\"\x00\"",
            b"\"\x1f\"",
            b"\"\xff\"",
            b"\"\xc3\"",
            b"\"\xc0\xaf\"",
            b"\"\xed\xa0\x80\"",
            b"\xef\xbb\xbf{}",
            b"1 2",
            b"{} x",
            b"[]]",
            b"\"a\"\"b\"",
            b"null\x00",
            b"[\"\\",
            b"\"\\",
        ] {
            invalid(json);
        }
    }

    /// A small deterministic generator (xorshift64*) for the ways of writing a value.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
        }

        fn one_in(&mut self, n: usize) -> bool {
            self.below(n) == 0
        }

        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    const NUMBERS: &[&str] = &[
        "0",
        "-0",
        "-0.0",
        "0e0",
        "1",
        "-1",
        "1.0",
        "1.5",
        "-0.000001",
        "1e21",
        "1E-7",
        "1e+2",
        "123456789",
        "9007199254740991",
        "-9007199254740991",
        "9007199254740992",
        "-9007199254740992",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "1234567890123456789012345678901234567890",
        "2.2250738585072014e-308",
        "5e-324",
        "1.7976931348623157e308",
    ];

    /// `value` as JSON text, written in one of many equivalent ways: whitespace, member
    /// order, escapes, number forms and (sometimes) duplicate members vary with `rng`.
    fn render(value: &Value, rng: &mut Rng, out: &mut String) {
        match value {
            Value::Null | Value::Bool(_) => out.push_str(&value.to_string()),
            Value::Number(n) => {
                if rng.one_in(4) {
                    out.push_str(rng.pick(NUMBERS));
                } else if n.is_f64() || !rng.one_in(3) {
                    out.push_str(&n.to_string());
                } else {
                    let forms = [".0", "e0", "E+00", ".000e-0"];
                    out.push_str(&format!("{n}{}", rng.pick(&forms)));
                }
            }
            Value::String(text) => render_string(text, rng, out),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    space(rng, out);
                    if i > 0 {
                        out.push(',');
                        space(rng, out);
                    }
                    render(item, rng, out);
                }
                space(rng, out);
                out.push(']');
            }
            Value::Object(map) => {
                let mut members: Vec<(&String, &Value)> = map.iter().collect();
                if rng.one_in(2) {
                    for i in (1..members.len()).rev() {
                        members.swap(i, rng.below(i + 1));
                    }
                }
                let duplicate = Value::Null;
                if !members.is_empty() && rng.one_in(8) {
                    let (name, value) = members[rng.below(members.len())];
                    let value = if rng.one_in(2) { value } else { &duplicate };
                    members.insert(rng.below(members.len() + 1), (name, value));
                }
                out.push('{');
                for (i, (name, member)) in members.into_iter().enumerate() {
                    space(rng, out);
                    if i > 0 {
                        out.push(',');
                        space(rng, out);
                    }
                    render_string(name, rng, out);
                    space(rng, out);
                    out.push(':');
                    space(rng, out);
                    render(member, rng, out);
                }
                space(rng, out);
                out.push('}');
            }
        }
    }

    fn space(rng: &mut Rng, out: &mut String) {
        if rng.one_in(4) {
            out.push_str(rng.pick(&[" ", "\n", "\t", "\r\n", "  "]));
        }
    }

    /// Half the strings are written with only the escapes RFC 8785 writes, a quarter with
    /// one character written in another way, and the rest mix in every other way of
    /// writing a character.
    fn render_string(text: &str, rng: &mut Rng, out: &mut String) {
        let mode = rng.below(4);
        let odd = (mode == 1).then(|| rng.below(text.chars().count().max(1)));
        out.push('"');
        for (i, c) in text.chars().enumerate() {
            let canonical = mode > 1 || (mode == 1 && odd != Some(i));
            let short = match c {
                '"' => Some("\\\""),
                '\\' => Some("\\\\"),
                '\u{8}' => Some("\\b"),
                '\u{c}' => Some("\\f"),
                '\n' => Some("\\n"),
                '\r' => Some("\\r"),
                '\t' => Some("\\t"),
                _ => None,
            };
            let control = u32::from(c) < 0x20;
            let choice = match (canonical, mode) {
                (true, _) => 0,
                (false, 1) => 2,
                (false, _) => rng.below(4),
            };
            match (choice, short) {
                (0 | 1, Some(short)) => out.push_str(short),
                (0, None) if control => out.push_str(&format!("\\u{:04x}", u32::from(c))),
                (0, None) => out.push(c),
                (1, None) if c == '/' => out.push_str("\\/"),
                (1, None) if !control => out.push(c),
                _ => {
                    let mut units = [0_u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        if rng.one_in(2) {
                            out.push_str(&format!("\\u{unit:04x}"));
                        } else {
                            out.push_str(&format!("\\u{unit:04X}"));
                        }
                    }
                }
            }
        }
        out.push('"');
    }

    fn rendered(value: &Value, seed: u64) -> String {
        let mut rng = Rng(seed | 1);
        let mut out = String::new();
        space(&mut rng, &mut out);
        render(value, &mut rng, &mut out);
        space(&mut rng, &mut out);
        out
    }

    /// Strings of characters whose escapes are all worth a look.
    fn tricky_string() -> impl Strategy<Value = Value> {
        proptest::collection::vec(
            prop_oneof![
                (0_u32..0x80).prop_map(|c| char::from_u32(c).unwrap()),
                Just('é'),
                Just('\u{2028}'),
                Just('\u{e000}'),
                Just('\u{ffff}'),
                Just('😀'),
                Just('\u{10ffff}'),
            ],
            0..24,
        )
        .prop_map(|c| Value::String(c.into_iter().collect()))
    }

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            crate::canonical::tests::json_value(),
            tricky_string(),
            proptest::collection::vec((tricky_string(), tricky_string()), 0..6).prop_map(|m| {
                Value::Object(
                    m.into_iter()
                        .map(|(k, v)| (k.as_str().unwrap_or_default().to_owned(), v))
                        .collect(),
                )
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn serde_json_output_takes_the_raw_path(v in crate::canonical::tests::json_value()) {
            for text in [serde_json::to_string(&v).unwrap(), serde_json::to_string_pretty(&v).unwrap()] {
                let raw = same(text.as_bytes());
                // Only other numbers (and very deep nesting) need the value path.
                if crate::canonical::tests::only_safe_integers(&v) {
                    prop_assert!(raw.is_some(), "{}", text);
                }
            }
        }

        #[test]
        fn names_sort_by_utf16_code_units(
            a in "[a\u{7f}\u{80}\u{7ff}\u{800}\u{d7ff}\u{e000}\u{fffd}\u{ffff}\u{10000}\u{1f600}\u{10ffff}]{0,4}",
            b in "[a\u{7f}\u{80}\u{7ff}\u{800}\u{d7ff}\u{e000}\u{fffd}\u{ffff}\u{10000}\u{1f600}\u{10ffff}]{0,4}",
        ) {
            prop_assert_eq!(
                utf16_cmp(a.as_bytes(), b.as_bytes()),
                a.encode_utf16().cmp(b.encode_utf16())
            );
        }

        #[test]
        fn any_way_of_writing_a_value_gives_its_hash(v in value(), seed in any::<u64>()) {
            same(rendered(&v, seed).as_bytes());
        }

        #[test]
        fn damaged_text_gives_the_same_outcome(
            v in value(),
            seed in any::<u64>(),
            at in any::<prop::sample::Index>(),
            edit in 0_usize..4,
            byte in prop_oneof![
                Just(b'"'), Just(b'\\'), Just(b','), Just(b':'), Just(b'{'), Just(b'}'),
                Just(b'['), Just(b']'), Just(b'0'), Just(b'-'), Just(b'.'), Just(b'e'),
                Just(b'u'), Just(b' '), Just(0_u8), Just(0x1f_u8), Just(0x7f_u8),
                Just(0xc3_u8), Just(0xff_u8), any::<u8>(),
            ],
        ) {
            let mut text = rendered(&v, seed).into_bytes();
            let i = at.index(text.len() + 1);
            match edit {
                0 => text.truncate(i),
                1 if i < text.len() => { text.remove(i); }
                2 if i < text.len() => text[i] = byte,
                _ => text.insert(i, byte),
            }
            same(&text);
        }
    }
}
