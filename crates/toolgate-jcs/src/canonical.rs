//! SHA-256 of the RFC 8785 (JCS) canonical form of a JSON value, streamed into the hasher.
//!
//! Every tool call hashes its arguments and its result, so this is on the hot path of the
//! proxy. `serde_json_canonicalizer` builds the canonical text in memory, with a sort key
//! per object member; this writes the same bytes straight into SHA-256. It covers the
//! values a call carries: strings, booleans, null, integers up to 2^53 in magnitude,
//! arrays and objects. A value holding any other number (a float, or an integer that
//! ECMAScript would print in exponent form) is handed whole to `serde_json_canonicalizer`,
//! which formats numbers as RFC 8785 requires. A property test checks that both agree
//! byte for byte.
//!
//! An object can also be given as borrowed members (`canonical_sha256_of_members`, for a
//! tool definition's fingerprinted fields), hashed without being built.
//!
//! JSON text (`canonical_sha256_of_json`) is hashed from its bytes by `raw`, which uses
//! [`write_string`] for the strings it decodes and leaves what it cannot reproduce exactly
//! to this path.

use std::io::{self, Write};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Integers up to this magnitude print the same in ECMAScript and in Rust.
pub(crate) const SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Hex SHA-256 of the canonical form of `value`; see the module docs.
pub(crate) fn sha256_hex(value: &Value) -> Result<String, serde_json::Error> {
    if !simple_numbers(value, 0) {
        return reference_sha256_hex(value);
    }
    streamed_sha256_hex(|out| write(out, value))
}

/// Hex SHA-256 of the canonical text `serde_json_canonicalizer` writes for `value` (the
/// numbers the streamed path does not format).
fn reference_sha256_hex<T: serde::Serialize>(value: &T) -> Result<String, serde_json::Error> {
    let bytes = serde_json_canonicalizer::to_vec(value)?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

/// Hex SHA-256 of what `emit` writes. Escapes and punctuation are written a few bytes at a
/// time: they are buffered, so SHA-256 sees large updates (runs of plain text longer than the
/// buffer go straight through).
fn streamed_sha256_hex(
    emit: impl FnOnce(&mut io::BufWriter<HashWriter>) -> io::Result<()>,
) -> Result<String, serde_json::Error> {
    let mut out = io::BufWriter::with_capacity(8 * 1024, HashWriter(Sha256::new()));
    emit(&mut out).map_err(serde_json::Error::io)?;
    let hasher = out
        .into_inner()
        .map_err(|e| serde_json::Error::io(e.into_error()))?;
    Ok(hex::encode(hasher.0.finalize()))
}

/// The canonical bytes, for tests.
#[cfg(test)]
fn to_vec(value: &Value) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    (simple_numbers(value, 0) && write(&mut out, value).is_ok()).then_some(out)
}

/// A `Write` that feeds SHA-256 (and never fails).
pub(crate) struct HashWriter(pub(crate) Sha256);

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// True when every number in `value` is an integer of at most 2^53 - 1 in magnitude (and
/// the nesting is not absurdly deep; the fallback handles the rest).
fn simple_numbers(value: &Value, depth: usize) -> bool {
    if depth > 128 {
        return false;
    }
    match value {
        Value::Null | Value::Bool(_) | Value::String(_) => true,
        Value::Number(n) => n
            .as_u64()
            .map(|u| u <= SAFE_INTEGER)
            .or_else(|| n.as_i64().map(|i| i.unsigned_abs() <= SAFE_INTEGER))
            .unwrap_or(false),
        Value::Array(items) => items.iter().all(|v| simple_numbers(v, depth + 1)),
        Value::Object(map) => map.values().all(|v| simple_numbers(v, depth + 1)),
    }
}

/// Hex SHA-256 of the canonical form of the object with these members (distinct names,
/// any order).
fn sha256_hex_of_distinct(members: Vec<(&str, &Value)>) -> Result<String, serde_json::Error> {
    if !members.iter().all(|(_, v)| simple_numbers(v, 1)) {
        return reference_sha256_hex(&Members(&members));
    }
    streamed_sha256_hex(|out| write_object(out, members))
}

/// Hex SHA-256 of the canonical form of the object with these members; a name given twice
/// keeps its last value, as in a parsed object.
pub(crate) fn sha256_hex_of_members(
    members: &[(&str, &Value)],
) -> Result<String, serde_json::Error> {
    let mut distinct: Vec<(&str, &Value)> = Vec::with_capacity(members.len());
    for &(name, value) in members {
        match distinct.iter_mut().find(|(seen, _)| *seen == name) {
            Some(slot) => slot.1 = value,
            None => distinct.push((name, value)),
        }
    }
    sha256_hex_of_distinct(distinct)
}

/// Borrowed members serialised as a JSON object (for the reference implementation).
struct Members<'a>(&'a [(&'a str, &'a Value)]);

impl serde::Serialize for Members<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// An object: members sorted by the UTF-16 code units of their names (RFC 8785 §3.2.3).
fn write_object<W: Write>(out: &mut W, mut members: Vec<(&str, &Value)>) -> io::Result<()> {
    members.sort_unstable_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
    out.write_all(b"{")?;
    for (i, (name, member)) in members.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_string(out, name)?;
        out.write_all(b":")?;
        write(out, member)?;
    }
    out.write_all(b"}")
}

fn write<W: Write>(out: &mut W, value: &Value) -> io::Result<()> {
    match value {
        Value::Object(map) => write_object(out, map.iter().map(|(k, v)| (k.as_str(), v)).collect()),
        Value::Array(items) => {
            out.write_all(b"[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write(out, item)?;
            }
            out.write_all(b"]")
        }
        Value::String(text) => write_string(out, text),
        // Booleans, null and safe integers print as RFC 8785 prints them.
        other => serde_json::to_writer(&mut *out, other).map_err(io::Error::other),
    }
}

/// A string as RFC 8785 (ECMAScript's `JSON.stringify`) writes it: `"` and `\\` escaped,
/// control characters as `\b \f \n \r \t` where those exist and `\u00xx` (lower case)
/// otherwise, everything else as it is. Text is skipped eight bytes at a time up to the next
/// byte that needs escaping, and written in runs.
pub(crate) fn write_string<W: Write>(out: &mut W, text: &str) -> io::Result<()> {
    let bytes = text.as_bytes();
    out.write_all(b"\"")?;
    let mut run = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(eight) = bytes.get(i..i + 8)
            && !any_needs_escape(eight)
        {
            i += 8;
            continue;
        }
        let byte = bytes.get(i).copied().unwrap_or_default();
        i += 1;
        let short: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0C => b"\\f",
            0x00..=0x1F => b"",
            _ => continue,
        };
        out.write_all(bytes.get(run..i - 1).unwrap_or_default())?;
        run = i;
        if short.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let hex = |n: u8| HEX.get(usize::from(n & 0xF)).copied().unwrap_or(b'0');
            out.write_all(&[b'\\', b'u', b'0', b'0', hex(byte >> 4), hex(byte)])?;
        } else {
            out.write_all(short)?;
        }
    }
    out.write_all(bytes.get(run..).unwrap_or_default())?;
    out.write_all(b"\"")
}

/// Whether any of eight bytes is `"`, `\\` or below 0x20 (the zero-byte and less-than word
/// tricks; they never miss such a byte, and a false alarm only costs a byte-wise look).
fn any_needs_escape(eight: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let Ok(word) = <[u8; 8]>::try_from(eight) else {
        return true;
    };
    let x = u64::from_ne_bytes(word);
    let below = |v: u64, n: u64| v.wrapping_sub(ONES * n) & !v & HIGH;
    let quote = x ^ (ONES * u64::from(b'"'));
    let backslash = x ^ (ONES * u64::from(b'\\'));
    below(x, 0x20) | below(quote, 1) | below(backslash, 1) != 0
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::expect_used,
        reason = "tests: a failed expectation should stop the test with its message"
    )]
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn reference(value: &Value) -> Vec<u8> {
        serde_json_canonicalizer::to_vec(value).unwrap()
    }

    #[test]
    fn rfc8785_examples() {
        let v: Value = serde_json::from_str(
            r#"{"peach":"This sorting order","péché":"is wrong according to French","pêche":"but canonicalization MUST","sin":"ignore locale","\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}"#,
        )
        .unwrap();
        assert_eq!(to_vec(&v).unwrap(), reference(&v));
        let v = json!({"literals": [null, true, false], "s": "\u{7f}\u{1f}\t\"\\/\u{2028}", "n": [0, -1, 9007199254740991_i64, -9007199254740991_i64]});
        assert_eq!(to_vec(&v).unwrap(), reference(&v));
    }

    #[test]
    fn every_byte_is_escaped_like_the_reference() {
        for c in (0..=0x7F_u8).map(char::from).chain(['é', '\u{2028}', '😀']) {
            for text in [
                c.to_string(),
                format!("abcdefgh{c}"),
                format!("{c}abcdefghijklmnop{c}"),
            ] {
                let v = json!(text);
                assert_eq!(to_vec(&v).unwrap(), reference(&v), "{text:?}");
            }
        }
    }

    #[test]
    fn other_numbers_use_the_reference_implementation() {
        for v in [
            json!({"a": 1.5}),
            json!([9007199254740992_u64]),
            json!(-9007199254740992_i64),
            json!({"deep": [[[1e21]]]}),
        ] {
            assert_eq!(to_vec(&v), None, "{v}");
            assert_eq!(
                sha256_hex(&v).unwrap(),
                hex::encode(Sha256::digest(reference(&v)))
            );
        }
    }

    /// Whether `value` holds no number but integers of at most 2^53 - 1 in magnitude.
    pub(crate) fn only_safe_integers(value: &Value) -> bool {
        simple_numbers(value, 0)
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z]{0,4}",
            any::<String>(),
            proptest::collection::vec(
                prop_oneof![
                    Just('\u{10000}'),
                    Just('\u{1f600}'),
                    Just('\u{e000}'),
                    Just('\u{ffff}'),
                    Just('a'),
                    Just('\u{80}')
                ],
                0..4
            )
            .prop_map(|c| c.into_iter().collect()),
        ]
    }

    /// JSON values with every kind of string, number and name (also used by `raw`).
    pub(crate) fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            (-(1_i64 << 53) + 1..(1_i64 << 53)).prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            any::<String>().prop_map(Value::String),
            // Escapes next to runs of plain text of every length.
            "[\\x00-\\x7f\"\\\\é😀]{0,40}".prop_map(Value::String),
            "(a{0,17}[\"\\\\\\x00-\\x1f\\x7f])*a{0,9}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((key(), inner), 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn members_hash_like_the_object_they_make() {
        let (a, b, f) = (json!("x"), json!([1, {"z": null, "y": 2}]), json!(0.5));
        let object = json!({"b": [1, {"y": 2, "z": null}], "a": "x"});
        let expected = sha256_hex(&object).unwrap();
        assert_eq!(
            sha256_hex_of_members(&[("a", &a), ("b", &b)]).unwrap(),
            expected
        );
        assert_eq!(
            sha256_hex_of_members(&[("b", &b), ("a", &a)]).unwrap(),
            expected
        );
        // The last of two equal names wins, as when the object is parsed.
        assert_eq!(
            sha256_hex_of_members(&[("a", &b), ("b", &b), ("a", &a)]).unwrap(),
            expected
        );
        assert_eq!(
            sha256_hex_of_members(&[]).unwrap(),
            sha256_hex(&json!({})).unwrap()
        );
        // A float goes to the reference implementation.
        assert_eq!(
            sha256_hex_of_members(&[("f", &f), ("a", &a)]).unwrap(),
            sha256_hex(&json!({"a": "x", "f": 0.5})).unwrap()
        );
    }

    proptest! {
        #[test]
        fn members_hash_like_their_object(
            members in proptest::collection::vec((key(), json_value()), 0..6)
        ) {
            let borrowed: Vec<(&str, &Value)> =
                members.iter().map(|(k, v)| (k.as_str(), v)).collect();
            let object = Value::Object(members.iter().cloned().collect());
            let expected = hex::encode(Sha256::digest(reference(&object)));
            prop_assert_eq!(sha256_hex_of_members(&borrowed).unwrap(), expected);
        }

        #[test]
        fn same_hash_as_the_reference_implementation(v in json_value()) {
            let expected = hex::encode(Sha256::digest(reference(&v)));
            prop_assert_eq!(sha256_hex(&v).unwrap(), expected);
            if let Some(bytes) = to_vec(&v) {
                prop_assert_eq!(bytes, reference(&v));
            }
        }
    }
}
