//! Tool definition fingerprints for pinning.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The fields of a `tools/list` entry that a fingerprint covers. Anything else (e.g. `title`,
/// `_meta`, `icons`) does not change what the model is told or what the tool accepts.
pub const FINGERPRINT_FIELDS: [&str; 5] = [
    "name",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// SHA-256 (lower-case hex) of the RFC 8785 canonical JSON of exactly
/// `{name, description, inputSchema, outputSchema, annotations}` of a tool definition (absent
/// fields omitted). Key order and number formatting do not change it; any change in these
/// fields does.
pub fn fingerprint(definition: &Value) -> String {
    // The covered fields, borrowed: a schema is neither copied nor written out to be hashed.
    let subset: Vec<(&str, &Value)> = FINGERPRINT_FIELDS
        .iter()
        .filter_map(|&field| definition.get(field).map(|v| (field, v)))
        .collect();
    // Canonicalisation only fails for numbers JSON cannot represent, which a parsed Value
    // never holds; fall back to serde_json's own (deterministic, insertion-ordered) text
    // rather than panic.
    toolgate_jcs::canonical_sha256_of_members(&subset).unwrap_or_else(|_| {
        let text: serde_json::Map<String, Value> = subset
            .iter()
            .map(|&(field, v)| (field.to_owned(), v.clone()))
            .collect();
        let text = format!(
            "non-canonical:{}",
            serde_json::to_string(&text).unwrap_or_default()
        );
        hex::encode(Sha256::digest(text.as_bytes()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stable_under_key_order_and_extra_fields() {
        let a = json!({"name": "t", "description": "d", "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}}});
        let b: Value = serde_json::from_str(
            r#"{"inputSchema": {"properties": {"b": {"type": "number"}, "a": {"type": "string"}}, "type": "object"}, "title": "x", "description": "d", "name": "t"}"#,
        )
        .unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_eq!(fingerprint(&a).len(), 64);
        let c = json!({"name": "t", "description": "d!", "inputSchema": a["inputSchema"]});
        assert_ne!(fingerprint(&a), fingerprint(&c));
        let d = json!({"name": "t", "description": "d", "inputSchema": a["inputSchema"], "annotations": {"readOnlyHint": true}});
        assert_ne!(fingerprint(&a), fingerprint(&d));
    }

    #[test]
    fn known_vectors() {
        // `printf '{"name":"t"}' | sha256sum`
        assert_eq!(
            fingerprint(&json!({"name": "t"})),
            "3647a67649228b62fe3d139c47f7a3c673c31ce57da824082b6654fc0b15751f"
        );
        assert_eq!(
            fingerprint(
                &json!({"name": "t", "description": "d", "annotations": {"readOnlyHint": true}, "title": "ignored"})
            ),
            "db56620597b4632e1b65c1d241ae86f84134081467417d346286b5b3d76609f7"
        );
    }
}
