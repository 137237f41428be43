//! Hashing: the chain link between lines, and digests of arguments and results.

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The value whose SHA-256 is the `prev` of the header (seq 0) of every log.
pub const GENESIS: &[u8] = b"toolgate-audit/1 genesis";

/// Hex SHA-256 of arbitrary bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The `prev` value of the header: hex SHA-256 of [`GENESIS`].
pub fn genesis_hash() -> String {
    sha256_hex(GENESIS)
}

/// The link value of a line: hex SHA-256 of its exact bytes, without the trailing newline.
pub fn line_hash(line: &[u8]) -> String {
    sha256_hex(line.strip_suffix(b"\n").unwrap_or(line))
}

/// Hex SHA-256 of the RFC 8785 (JCS) canonical form of a JSON value: equal for
/// `{"a":1,"b":2}` and `{ "b": 2, "a": 1.0 }`. Used for `args_sha256` and `result_sha256`
/// (see [`toolgate_jcs::canonical_sha256`]).
pub fn canonical_sha256(value: &Value) -> Result<String, serde_json::Error> {
    toolgate_jcs::canonical_sha256(value)
}

/// [`canonical_sha256`] of raw JSON text (e.g. the `arguments` bytes of a request, or the
/// `result` of a response as the server wrote it), hashed from its bytes: the same digest,
/// and an error exactly when `serde_json` cannot parse `json` into a value (see
/// [`toolgate_jcs::canonical_sha256_of_json`]).
pub fn canonical_sha256_of_json(json: &[u8]) -> Result<String, serde_json::Error> {
    toolgate_jcs::canonical_sha256_of_json(json)
}

/// The chain-relevant fields of a line; everything else is covered by the hash.
#[derive(Debug, Deserialize)]
pub(crate) struct ChainFields {
    pub seq: u64,
    pub prev: String,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub time: Option<String>,
    #[serde(default)]
    pub chain: Option<String>,
}

pub(crate) fn parse_chain_fields(line: &[u8]) -> Result<ChainFields, serde_json::Error> {
    serde_json::from_slice(line.strip_suffix(b"\n").unwrap_or(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_hash_ignores_key_order_and_whitespace() {
        let a = serde_json::json!({"a": 1, "b": [true, null, "x"]});
        let b: Value = serde_json::from_str(r#"{ "b": [true,null,"x"], "a": 1 }"#).unwrap();
        assert_eq!(canonical_sha256(&a).unwrap(), canonical_sha256(&b).unwrap());
        let c = serde_json::json!({"a": 2, "b": [true, null, "x"]});
        assert_ne!(canonical_sha256(&a).unwrap(), canonical_sha256(&c).unwrap());
    }

    #[test]
    fn line_hash_ignores_only_the_newline() {
        assert_eq!(line_hash(b"abc\n"), line_hash(b"abc"));
        assert_eq!(line_hash(b"abc"), sha256_hex(b"abc"));
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
