//! Strict reading of the policy file (and the gateway's configuration): the YAML parser's
//! options, and strict whole numbers and booleans.
//!
//! serde-saphyr parses a quoted scalar into an integer field when its text is a number, so
//! `max_calls: "3"` would load. A quoted value is a string: these deserializers read the
//! scalar through `deserialize_any` (which keeps the quoting) and accept only a plain
//! non-negative integer. Anything else is the same "wrong type: expected a whole number"
//! diagnostic that `max_calls: true` gets (see `load::yaml_error`).

use std::fmt;

use serde::Deserializer;
use serde::de::{self, Unexpected, Visitor};

/// The YAML options of every policy and pack parse (and of the gateway's configuration):
/// serde-saphyr's defaults (duplicate keys are errors, budgets on, errors located) without
/// capturing comment text, which nothing here reads (the model has no `Commented` fields).
/// Comments are still scanned and validated; only their bookkeeping (about a fifth of a
/// parse) is skipped.
pub fn yaml_options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.emit_comments = false;
    options
}

/// What the diagnostics say a field of this kind expects.
pub const EXPECTED_WHOLE_NUMBER: &str = "a whole number";

struct WholeNumber;

impl Visitor<'_> for WholeNumber {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(EXPECTED_WHOLE_NUMBER)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::invalid_type(Unexpected::Signed(v), &self))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::invalid_type(Unexpected::Other("a larger number"), &self))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::invalid_type(Unexpected::Other("a negative number"), &self))
    }
}

/// A plain (unquoted) non-negative integer.
pub fn whole<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(WholeNumber)
}

/// A plain (unquoted) non-negative integer, for a `u32` field (`version`).
pub fn whole_u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let v = whole(d)?;
    u32::try_from(v)
        .map_err(|_| de::Error::invalid_type(Unexpected::Unsigned(v), &EXPECTED_WHOLE_NUMBER))
}

/// [`whole`] for a `usize` field (the `taint:` bounds).
pub fn whole_usize<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let v = whole(d)?;
    usize::try_from(v)
        .map_err(|_| de::Error::invalid_type(Unexpected::Unsigned(v), &EXPECTED_WHOLE_NUMBER))
}

/// A plain (unquoted) non-negative integer, for an optional `usize` field (`#[serde(default)]`
/// keeps a missing field `None`).
pub fn whole_usize_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    whole_usize(d).map(Some)
}

/// [`whole`] for an optional field (`#[serde(default)]` keeps a missing field `None`).
pub fn whole_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    whole(d).map(Some)
}

/// What the diagnostics say a strict boolean field expects.
pub const EXPECTED_BOOLEAN: &str = "`true` or `false`";

struct Boolean;

impl Visitor<'_> for Boolean {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(EXPECTED_BOOLEAN)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        Ok(v)
    }
}

/// A plain `true` or `false`: serde-saphyr would read a quoted `"true"`, and YAML 1.1's
/// `"yes"`, into a boolean field; a quoted value is a string.
pub fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    d.deserialize_any(Boolean)
}

/// [`boolean`] for an optional field (`#[serde(default)]` keeps a missing field `None`).
pub fn boolean_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    boolean(d).map(Some)
}

/// A [`boolean`] as a map value.
struct StrictBool(bool);

impl<'de> serde::Deserialize<'de> for StrictBool {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        boolean(d).map(StrictBool)
    }
}

/// An optional map of [`boolean`]s (`annotations: {readOnlyHint: true}`).
pub fn boolean_map_opt<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<std::collections::BTreeMap<String, bool>>, D::Error> {
    let map: std::collections::BTreeMap<String, StrictBool> = serde::Deserialize::deserialize(d)?;
    Ok(Some(map.into_iter().map(|(k, v)| (k, v.0)).collect()))
}

/// An optional key that, when written, holds a value. `resources:` with nothing after it is
/// YAML null: read as an absent key, it would drop the constraint (an allow rule whose
/// `resources:` lost its list would match every path), so it is an error instead.
pub fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    match <Option<T> as serde::Deserialize>::deserialize(d)? {
        Some(v) => Ok(Some(v)),
        None => Err(de::Error::custom(
            "the key has no value (YAML null): give it one, or remove the key",
        )),
    }
}
