//! JSON-RPC ids: what type they are, and a hashable key to match responses to requests.

use std::borrow::Cow;

use serde_json::value::RawValue;

/// The JSON type of a raw id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    /// A JSON string.
    String,
    /// A JSON number (any number: MCP asks for integers, but the proxy does not judge).
    Number,
    /// `null`.
    Null,
    /// Anything else (bool, object, array): not a valid id.
    Other,
}

/// The JSON type of a raw id, judged from its first byte (a `RawValue` is valid JSON).
pub fn id_kind(raw: &RawValue) -> IdKind {
    match raw.get().as_bytes().first() {
        Some(b'"') => IdKind::String,
        Some(b'-' | b'0'..=b'9') => IdKind::Number,
        Some(b'n') => IdKind::Null,
        _ => IdKind::Other,
    }
}

/// Decodes a raw JSON string (a string id; the classifier's `method` and `jsonrpc` too),
/// borrowing when it holds no escapes.
pub(crate) fn decode_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    if !text.starts_with('"') {
        return None;
    }
    if !text.contains('\\') {
        return text.get(1..text.len().saturating_sub(1)).map(Cow::Borrowed);
    }
    serde_json::from_str::<String>(text).ok().map(Cow::Owned)
}

/// A hashable key for a JSON-RPC id.
///
/// Strings are keyed by their decoded value (so `"a"` and `"\u0061"` match, as they do
/// for any JSON parser on the other side); integers that fit in an `i128` by value;
/// any other number (`1e400`, `1.5`) by its raw text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IdKey {
    /// An integer id.
    Int(i128),
    /// A string id, decoded.
    Str(Box<str>),
    /// A number that is not a plain integer, by its raw text.
    OtherNumber(Box<str>),
}

impl IdKey {
    /// The key of a raw id; `None` for `null` and for values that are not valid ids.
    pub fn from_raw(raw: &RawValue) -> Option<IdKey> {
        match id_kind(raw) {
            IdKind::String => decode_str(raw).map(|s| IdKey::Str(s.into())),
            IdKind::Number => {
                let text = raw.get();
                match text.parse::<i128>() {
                    Ok(n) => Some(IdKey::Int(n)),
                    Err(_) => Some(IdKey::OtherNumber(text.into())),
                }
            }
            IdKind::Null | IdKind::Other => None,
        }
    }

    /// The decoded string, for string ids.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            IdKey::Str(s) => Some(s),
            IdKey::Int(_) | IdKey::OtherNumber(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn keys() {
        assert_eq!(
            IdKey::from_raw(&raw("18446744073709551615")),
            Some(IdKey::Int(18_446_744_073_709_551_615))
        );
        assert_eq!(IdKey::from_raw(&raw("-1")), Some(IdKey::Int(-1)));
        assert_eq!(
            IdKey::from_raw(&raw(r#""x""#)),
            Some(IdKey::Str("x".into()))
        );
        assert_eq!(
            IdKey::from_raw(&raw(r#""\u0078""#)),
            IdKey::from_raw(&raw(r#""x""#))
        );
        assert_eq!(
            IdKey::from_raw(&raw("1e400")),
            Some(IdKey::OtherNumber("1e400".into()))
        );
        assert_ne!(IdKey::from_raw(&raw("1")), IdKey::from_raw(&raw(r#""1""#)));
        assert_eq!(
            IdKey::from_raw(&raw("340282366920938463463374607431768211456")),
            Some(IdKey::OtherNumber(
                "340282366920938463463374607431768211456".into()
            ))
        );
        assert_eq!(IdKey::from_raw(&raw("null")), None);
        assert_eq!(IdKey::from_raw(&raw("true")), None);
        assert_eq!(IdKey::from_raw(&raw("{}")), None);
    }
}
