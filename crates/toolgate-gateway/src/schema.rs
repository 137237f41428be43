//! The JSON Schema (draft 2020-12) of `gateway.yaml`, for editors
//! (`# yaml-language-server: $schema=…`) and `toolgate gateway schema`.
//!
//! Derived from the serde model (`config`) with `schemars`, as the policy's schema is: a
//! field's doc comment is its description, and what the Rust types do not say (the patterns
//! below, non-empty lists, which keys go together) is in `#[schemars]` attributes beside the
//! field. Tests keep it in sync with the model (every field serde accepts appears in the
//! schema and nothing else does) and with the loader (good and bad files are judged alike).
//! The schema cannot check everything the loader does (files that exist, policies that
//! load, unique token hashes).

use serde_json::Value;

use super::config::GatewayConfig;

/// Where the schema is published.
pub const SCHEMA_URL: &str =
    "https://raw.githubusercontent.com/toolgate/toolgate/main/docs/gateway.schema.json";

/// The schema as a JSON value.
pub fn gateway_schema() -> Value {
    toolgate_policy::root_schema::<GatewayConfig>(SCHEMA_URL)
}

/// The schema as pretty JSON text.
pub fn gateway_schema_text() -> String {
    serde_json::to_string_pretty(&gateway_schema()).unwrap_or_default()
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests {
    use std::collections::BTreeSet;

    use super::super::config;
    use super::*;

    /// The fields serde accepts for `T`, read from its unknown-field error.
    fn serde_fields<T: serde::de::DeserializeOwned + std::fmt::Debug>() -> BTreeSet<String> {
        let err = serde_saphyr::from_str::<T>("__probe__: 1\n").unwrap_err();
        match err.without_snippet() {
            serde_saphyr::Error::SerdeUnknownField { expected, .. } => {
                expected.iter().map(|s| (*s).to_owned()).collect()
            }
            other => panic!("unexpected error {other:?}"),
        }
    }

    fn schema_fields(v: &Value) -> BTreeSet<String> {
        v["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    #[test]
    fn schema_lists_exactly_the_model_fields() {
        let s = gateway_schema();
        let p = &s["properties"];
        assert_eq!(serde_fields::<config::GatewayConfig>(), schema_fields(&s));
        assert_eq!(
            serde_fields::<config::TlsConfig>(),
            schema_fields(&p["tls"])
        );
        assert_eq!(
            serde_fields::<config::SecretSource>(),
            schema_fields(&p["secret"])
        );
        assert_eq!(
            serde_fields::<config::StoreConfig>(),
            schema_fields(&p["store"])
        );
        assert_eq!(
            serde_fields::<config::AuthConfig>(),
            schema_fields(&p["auth"])
        );
        assert_eq!(
            serde_fields::<config::SessionsConfig>(),
            schema_fields(&p["sessions"])
        );
        assert_eq!(
            serde_fields::<config::Principals>(),
            schema_fields(&p["auth"]["properties"]["approvers"])
        );
        let d = &s["$defs"];
        assert_eq!(
            serde_fields::<config::JwtConfig>(),
            schema_fields(&d["jwt"])
        );
        assert_eq!(
            serde_fields::<config::StaticToken>(),
            schema_fields(&d["token"])
        );
        assert_eq!(
            serde_fields::<config::ServerConfig>(),
            schema_fields(&d["server"])
        );
    }

    /// A validator for the keywords this schema uses (enough to test it; not general).
    fn valid(root: &Value, schema: &Value, v: &Value) -> bool {
        let Some(s) = schema.as_object() else {
            return true;
        };
        for (k, want) in s {
            let ok = match k.as_str() {
                "$ref" => {
                    let name = want.as_str().unwrap().trim_start_matches("#/$defs/");
                    valid(root, &root["$defs"][name], v)
                }
                "type" => match want.as_str().unwrap() {
                    "object" => v.is_object(),
                    "array" => v.is_array(),
                    "string" => v.is_string(),
                    "integer" => v.is_u64() || v.is_i64(),
                    "boolean" => v.is_boolean(),
                    other => panic!("type {other}"),
                },
                "const" => v == want,
                "enum" => want.as_array().unwrap().contains(v),
                "pattern" => v.as_str().is_none_or(|t| {
                    regex::Regex::new(want.as_str().unwrap())
                        .unwrap()
                        .is_match(t)
                }),
                "minLength" => v
                    .as_str()
                    .is_none_or(|t| t.chars().count() as u64 >= want.as_u64().unwrap()),
                "minimum" => v.as_i64().is_none_or(|n| n >= want.as_i64().unwrap()),
                "minItems" => v
                    .as_array()
                    .is_none_or(|a| a.len() as u64 >= want.as_u64().unwrap()),
                "minProperties" => v
                    .as_object()
                    .is_none_or(|o| o.len() as u64 >= want.as_u64().unwrap()),
                "maxProperties" => v
                    .as_object()
                    .is_none_or(|o| o.len() as u64 <= want.as_u64().unwrap()),
                "items" => v
                    .as_array()
                    .is_none_or(|a| a.iter().all(|i| valid(root, want, i))),
                "prefixItems" => v.as_array().is_none_or(|a| {
                    a.iter()
                        .zip(want.as_array().unwrap())
                        .all(|(i, s)| valid(root, s, i))
                }),
                "required" => v.as_object().is_none_or(|o| {
                    want.as_array()
                        .unwrap()
                        .iter()
                        .all(|r| o.contains_key(r.as_str().unwrap()))
                }),
                "properties" => v.as_object().is_none_or(|o| {
                    o.iter()
                        .all(|(name, val)| want.get(name).is_none_or(|s| valid(root, s, val)))
                }),
                "additionalProperties" => v.as_object().is_none_or(|o| {
                    o.iter().all(|(name, val)| {
                        let declared = s.get("properties").is_some_and(|p| p.get(name).is_some());
                        declared
                            || match want {
                                Value::Bool(b) => *b,
                                schema => valid(root, schema, val),
                            }
                    })
                }),
                "propertyNames" => v.as_object().is_none_or(|o| {
                    o.keys()
                        .all(|name| valid(root, want, &Value::String(name.clone())))
                }),
                "allOf" => want.as_array().unwrap().iter().all(|s| valid(root, s, v)),
                "anyOf" => want.as_array().unwrap().iter().any(|s| valid(root, s, v)),
                "oneOf" => {
                    want.as_array()
                        .unwrap()
                        .iter()
                        .filter(|s| valid(root, s, v))
                        .count()
                        == 1
                }
                "not" => !valid(root, want, v),
                "$schema" | "$id" | "title" | "description" | "$defs" | "default" => true,
                other => panic!("keyword {other} not handled by the test validator"),
            };
            if !ok {
                return false;
            }
        }
        true
    }

    fn schema_accepts(yaml: &str) -> bool {
        let v: Value = serde_saphyr::from_str(yaml).unwrap();
        let s = gateway_schema();
        valid(&s, &s, &v)
    }

    fn loader_accepts(yaml: &str, dir: &std::path::Path) -> bool {
        super::super::load::load_config_str(yaml, "g.yaml", dir).is_ok()
    }

    const GOOD: &str = "version: 1
listen: 127.0.0.1:8443
public_url: https://mcp.example.com
secret: {env: KEY}
store: {url: redis://localhost:6379, timeout: 500ms}
sessions: {idle_timeout: 30m, max: 100}
auth:
  jwt: {issuer: https://login.example.com, jwks_url: https://login.example.com/jwks, algorithms: [ES256], scopes: [mcp]}
  tokens:
    - {user: ci, sha256: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae}
  approvers: {groups: [admins]}
servers:
  files: {command: [srv, /data], env: {A: b}, allow: {groups: [eng]}}
  remote: {url: https://mcp.example.net/mcp, headers: {Authorization: Bearer x}}
";

    #[test]
    fn schema_and_loader_agree() {
        let dir = tempfile::tempdir().unwrap();
        assert!(schema_accepts(GOOD));
        assert!(loader_accepts(GOOD, dir.path()));
        let good_variants: &[(&str, &str)] = &[
            ("secret: {env: KEY}", "secret: {file: key.hex}"),
            ("  approvers: {groups: [admins]}\n", ""),
            ("listen: 127.0.0.1:8443", "listen: \"[::1]:0\""),
            ("https://mcp.example.com\n", "http://localhost:8080\n"),
        ];
        let bad_variants: &[(&str, &str)] = &[
            ("version: 1", "version: 2"),
            ("version: 1", "version: \"1\""),
            ("listen: 127.0.0.1:8443", "listen: localhost"),
            ("https://mcp.example.com\n", "ftp://mcp.example.com\n"),
            ("secret: {env: KEY}", "secret: {}"),
            ("secret: {env: KEY}", "secret: {env: KEY, file: k}"),
            ("secret: {env: KEY}", "secret: {env: KEY, value: k}"),
            ("redis://localhost:6379", "memcached://localhost:1"),
            ("timeout: 500ms", "timeout: soon"),
            ("max: 100", "max: 0"),
            ("max: 100", "max: \"100\""),
            ("algorithms: [ES256]", "algorithms: [HS256]"),
            ("algorithms: [ES256]", "algorithms: []"),
            ("scopes: [mcp]", "scopes: [\"a b\"]"),
            ("sha256: 2c26", "sha256: zz26"),
            ("  files:", "  \"bad name\":"),
            (
                "{command: [srv, /data], env: {A: b}, allow: {groups: [eng]}}",
                "{command: [], env: {A: b}}",
            ),
            (
                "{command: [srv, /data], env: {A: b}, allow: {groups: [eng]}}",
                "{url: https://x.example.com, env: {A: b}}",
            ),
            (
                "{url: https://mcp.example.net/mcp, headers: {Authorization: Bearer x}}",
                "{command: [a], headers: {A: b}}",
            ),
            (
                "{url: https://mcp.example.net/mcp, headers: {Authorization: Bearer x}}",
                "{}",
            ),
            (
                "{url: https://mcp.example.net/mcp, headers: {Authorization: Bearer x}}",
                "{url: https://x.example.com, command: [a]}",
            ),
            ("  files:", "  files:\n    polcy: x\n  other:"),
            ("  approvers:", "  aprovers:"),
        ];
        for (from, to) in good_variants {
            let y = GOOD.replacen(from, to, 1);
            assert_ne!(y, GOOD, "{from}");
            assert!(schema_accepts(&y), "schema refuses: {to}");
            assert!(loader_accepts(&y, dir.path()), "loader refuses: {to}");
        }
        for (from, to) in bad_variants {
            let y = GOOD.replacen(from, to, 1);
            assert_ne!(y, GOOD, "{from}");
            assert!(!loader_accepts(&y, dir.path()), "loader accepts: {to}");
            // A quoted number is a string to the loader and to the schema alike.
            assert!(!schema_accepts(&y), "schema accepts: {to}");
        }
        // No authentication method at all.
        let y = GOOD.replace(
            "  jwt: {issuer: https://login.example.com, jwks_url: https://login.example.com/jwks, algorithms: [ES256], scopes: [mcp]}\n  tokens:\n    - {user: ci, sha256: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae}\n",
            "",
        );
        assert!(!schema_accepts(&y) && !loader_accepts(&y, dir.path()));
    }

    #[test]
    fn the_documented_example_validates() {
        let example = include_str!("../../../docs/gateway.example.yaml");
        assert!(schema_accepts(example));
        assert!(example.starts_with(&format!("# yaml-language-server: $schema={SCHEMA_URL}")));
    }
}
