#![doc = include_str!("../README.md")]

mod canonical;
mod raw;

use serde_json::Value;

/// Hex SHA-256 of the RFC 8785 (JCS) canonical form of a JSON value: equal for
/// `{"a":1,"b":2}` and `{ "b": 2, "a": 1.0 }`.
///
/// An error only for a value RFC 8785 cannot represent (which a parsed value never holds).
pub fn canonical_sha256(value: &Value) -> Result<String, serde_json::Error> {
    canonical::sha256_hex(value)
}

/// [`canonical_sha256`] of the object with these members, without building it: for an
/// object made of some members of another (a tool definition's fingerprinted fields). The
/// order of `members` does not matter; a name given twice keeps its last value, as a parsed
/// object does.
pub fn canonical_sha256_of_members(
    members: &[(&str, &Value)],
) -> Result<String, serde_json::Error> {
    canonical::sha256_hex_of_members(members)
}

/// [`canonical_sha256`] of raw JSON text (e.g. the `arguments` bytes of a request, or the
/// `result` of a response as the server wrote it): the same digest, and an error exactly
/// when `serde_json` cannot parse `json` into a value.
///
/// The text is hashed from its bytes, without a value tree: strings that are already
/// canonical go to SHA-256 as they are, and only object members are reordered. What that
/// cannot reproduce exactly (duplicate member names, numbers other than integers up to
/// 2^53 - 1, very deep nesting, anything invalid) is parsed into a value and hashed as
/// [`canonical_sha256`] hashes it.
pub fn canonical_sha256_of_json(json: &[u8]) -> Result<String, serde_json::Error> {
    if let Some(hash) = raw::sha256_hex(json) {
        return Ok(hash);
    }
    let value: Value = serde_json::from_slice(json)?;
    canonical_sha256(&value)
}
