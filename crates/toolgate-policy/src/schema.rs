//! The JSON Schema (draft 2020-12) of the policy format, for editors
//! (`# yaml-language-server: $schema=…`) and `toolgate policy schema`.
//!
//! Derived from the serde model (`crate::model` and the types it uses) with `schemars`: a
//! field's doc comment is its description, and what the Rust types do not say (non-empty
//! lists, the known packs and annotation hints, the format version) is in `#[schemars]`
//! attributes beside the field. A test keeps the schema in sync with serde, which reads
//! some fields through its own deserializers: every field serde accepts appears in the
//! schema and nothing else does.
//!
//! [`root_schema`] is shared with `gateway.yaml`'s schema, so that both read alike.

use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value};

use crate::model::{KNOWN_ANNOTATIONS, POLICY_VERSION, Policy};

/// Where the schema is published; the starter policy points editors here.
pub const SCHEMA_URL: &str =
    "https://raw.githubusercontent.com/toolgate/toolgate/main/docs/policy.schema.json";

/// The schema as a JSON value.
pub fn policy_schema() -> Value {
    root_schema::<Policy>(SCHEMA_URL)
}

/// The schema as pretty JSON text.
pub fn policy_schema_text() -> String {
    serde_json::to_string_pretty(&policy_schema()).unwrap_or_default()
}

/// The draft 2020-12 schema of `T` as a document of its own, published at `id`: `$schema`,
/// `$id`, `title` and `description` first, then what schemars derived, put right by
/// `tidy` in every subschema.
pub fn root_schema<T: JsonSchema>(id: &str) -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.transforms.push(Box::new(RecursiveTransform(tidy)));
    let derived = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    let Value::Object(mut body) = derived else {
        return derived;
    };
    let mut root = Map::new();
    if let Some(meta) = body.shift_remove("$schema") {
        root.insert("$schema".to_owned(), meta);
    }
    root.insert("$id".to_owned(), Value::String(id.to_owned()));
    for key in ["title", "description"] {
        if let Some(v) = body.shift_remove(key) {
            root.insert(key.to_owned(), v);
        }
    }
    root.extend(body);
    Value::Object(root)
}

/// Where what schemars derives says something the formats do not mean, in one subschema:
///
/// - An `Option` field may be absent; schemars also lets it be `null`. Neither format gives
///   null a meaning, and a key left without a value (`resources:`) is a slip an editor
///   should point at, so the schema refuses null (the loader reads it as absent).
/// - schemars states integer widths as formats (`uint64`). They are no standard format, and
///   validators such as Ajv refuse a schema with a format they do not know.
/// - A description is a doc comment, wrapped for the source: its lines are joined into
///   paragraphs, as rustdoc renders them.
fn tidy(schema: &mut Schema) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    // `Option<T>` of a schema with subschemas: `anyOf: [T, {type: null}]`.
    let only = match obj.get_mut("anyOf") {
        Some(Value::Array(any_of)) if any_of.iter().any(is_null_type) => {
            any_of.retain(|s| !is_null_type(s));
            match any_of.as_slice() {
                [Value::Object(_)] => any_of.pop(),
                _ => None,
            }
        }
        _ => None,
    };
    if let Some(Value::Object(only)) = only {
        obj.shift_remove("anyOf");
        for (k, v) in only {
            // The field's own description wins over its type's.
            obj.entry(k).or_insert(v);
        }
    }
    // `Option<T>` of a plain schema: `type: [T, null]`, and null among the `enum` values.
    if let Some(Value::Array(types)) = obj.get_mut("type") {
        types.retain(|t| t.as_str() != Some("null"));
        if let [only] = types.as_slice() {
            let only = only.clone();
            obj.insert("type".to_owned(), only);
        }
    }
    if let Some(Value::Array(values)) = obj.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if obj.get("default").is_some_and(Value::is_null) {
        obj.shift_remove("default");
    }
    if obj.get("type").and_then(Value::as_str) == Some("integer") {
        obj.shift_remove("format");
    }
    if let Some(Value::String(text)) = obj.get_mut("description") {
        *text = join_lines(text);
    }
}

fn is_null_type(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

/// A doc comment's lines joined into paragraphs (a blank line ends one); a line starting a
/// list item (`- `) keeps its line break.
fn join_lines(doc: &str) -> String {
    let mut out = String::with_capacity(doc.len());
    let mut blank = false;
    for line in doc.lines().map(str::trim) {
        if line.is_empty() {
            blank = true;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank {
                "\n\n"
            } else if line.starts_with("- ") {
                "\n"
            } else {
                " "
            });
        }
        blank = false;
        out.push_str(line);
    }
    out
}

/// `version`: the one format version there is.
pub(crate) fn version_one(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"const": POLICY_VERSION})
}

/// `annotations` of a rule or a tool entry: at least one of the hints MCP defines, each
/// `true` or `false`.
pub(crate) fn annotation_hints(_: &mut SchemaGenerator) -> Schema {
    let hints: Map<String, Value> = KNOWN_ANNOTATIONS
        .iter()
        .map(|k| ((*k).to_owned(), serde_json::json!({"type": "boolean"})))
        .collect();
    json_schema!({
        "type": "object",
        "properties": hints,
        "additionalProperties": false,
        "minProperties": 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

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
        let s = policy_schema();
        assert_eq!(serde_fields::<crate::model::Policy>(), schema_fields(&s));
        assert_eq!(
            serde_fields::<crate::model::Rule>(),
            schema_fields(&s["$defs"]["rule"])
        );
        let contract = &s["$defs"]["contract"];
        assert_eq!(
            serde_fields::<crate::contracts::ToolContract>(),
            schema_fields(contract)
        );
        assert_eq!(
            serde_fields::<crate::taint::TaintLimits>(),
            schema_fields(&s["$defs"]["taint"])
        );
        let c = &contract["properties"];
        assert_eq!(
            serde_fields::<crate::contracts::BudgetSpec>(),
            schema_fields(&c["budget"])
        );
        assert_eq!(
            serde_fields::<crate::contracts::RecursiveSpec>(),
            schema_fields(&c["recursive"])
        );
        let objects: Vec<&Value> = c["output"]["anyOf"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["type"] == "object")
            .collect();
        assert_eq!(objects.len(), 2);
        assert_eq!(
            serde_fields::<crate::contracts::TrustedFields>(),
            schema_fields(objects[0])
        );
        assert_eq!(
            serde_fields::<crate::contracts::RedactOutput>(),
            schema_fields(objects[1])
        );
    }

    /// What [`tidy`] puts right is nowhere left: no null, no integer format, no description
    /// broken mid-sentence.
    #[test]
    fn schema_is_tidy() {
        fn walk(v: &Value) {
            match v {
                Value::Object(o) => {
                    assert_ne!(o.get("type"), Some(&Value::from("null")), "{o:?}");
                    if let Some(Value::Array(types)) = o.get("type") {
                        assert!(!types.contains(&Value::from("null")), "{o:?}");
                    }
                    if let Some(Value::Array(values)) = o.get("enum") {
                        assert!(!values.contains(&Value::Null), "{o:?}");
                    }
                    assert!(!o.contains_key("format"), "{o:?}");
                    if let Some(Value::String(d)) = o.get("description") {
                        assert!(!d.replace("\n\n", "").contains('\n'), "{d:?}");
                    }
                    o.values().for_each(walk);
                }
                Value::Array(a) => a.iter().for_each(walk),
                _ => {}
            }
        }
        walk(&policy_schema());
    }

    #[test]
    fn doc_comments_become_paragraphs() {
        assert_eq!(
            join_lines("one\ntwo\n\nthree\n- a\n- b"),
            "one two\n\nthree\n- a\n- b"
        );
    }

    #[test]
    fn starter_points_at_the_schema() {
        let starter = include_str!("starter.yaml");
        assert!(starter.starts_with(&format!("# yaml-language-server: $schema={SCHEMA_URL}")));
    }
}
