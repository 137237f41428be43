//! `output: {trusted_fields: [...]}`: field paths, and reading a text content block as the
//! JSON or YAML document it holds.
//!
//! # Paths
//! - a JSON pointer: `/people/0/email` (exact: a number selects an array element);
//! - a dotted path: `organizer.email`, `participants[*]`, `messages[*].sender`,
//!   `rows[0].owner`, `[*].email` (the document is an array). A name walks every element
//!   of an array it meets (`people.email` is `people[*].email`); `[*]` selects every element
//!   of an array and `[N]` one, and both select nothing in anything else.
//!
//! # Text
//! A text block is parsed once: as JSON, or as YAML when the contract says
//! `text_format: yaml`. Only an object or an array counts as parsed; anything else (plain
//! text, a bare scalar, a parse error, a duplicated key, a document nested deeper than the
//! taint index reads, a YAML comment, more than one YAML document, a breached YAML budget) is
//! *not* parsed, and the caller treats the whole text as untrusted.

use std::fmt;

use serde::Deserializer;
use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::TextFormat;

/// How deep a parsed document may nest: the depth to which the taint index reads JSON
/// (deeper strings would be dropped, so such a document counts as not parsed).
const MAX_DEPTH: usize = 64;

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// A dotted name: the member of an object, walked through arrays element by element.
    Name(String),
    /// A JSON pointer token: the member of an object, or the element of an array.
    Pointer(String),
    /// `[*]`: every element of an array.
    Each,
    /// `[N]`: one element of an array.
    Index(usize),
}

/// A parsed field path.
pub(crate) type FieldPath = Vec<Step>;

/// Parses a field path (see the module docs); the error says what is wrong, lowercase.
pub(crate) fn parse_path(field: &str) -> Result<FieldPath, String> {
    if let Some(ptr) = field.strip_prefix('/') {
        if ptr.is_empty() {
            return Err("a JSON pointer needs at least one token".to_owned());
        }
        return Ok(ptr
            .split('/')
            .map(|s| Step::Pointer(s.replace("~1", "/").replace("~0", "~")))
            .collect());
    }
    if field.is_empty() {
        return Err("the path is empty".to_owned());
    }
    let mut steps = Vec::new();
    for (i, segment) in field.split('.').enumerate() {
        let name_end = segment.find(['[', ']']).unwrap_or(segment.len());
        let (name, mut rest) = segment.split_at(name_end);
        if name.is_empty() && (i > 0 || rest.is_empty()) {
            return Err(if segment.is_empty() {
                "a segment between dots is empty".to_owned()
            } else {
                format!("segment `{segment}` has no name before its brackets")
            });
        }
        if !name.is_empty() {
            steps.push(Step::Name(name.to_owned()));
        }
        while !rest.is_empty() {
            let Some(inner) = rest.strip_prefix('[') else {
                return Err(format!(
                    "unexpected `{rest}` in segment `{segment}`: only `[*]` or `[N]` may follow a name"
                ));
            };
            let Some(close) = inner.find(']') else {
                return Err(format!("unclosed `[` in segment `{segment}`"));
            };
            let (index, after) = inner.split_at(close);
            rest = after.get(1..).unwrap_or_default();
            if index == "*" {
                steps.push(Step::Each);
            } else if !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) {
                let n = index
                    .parse::<usize>()
                    .map_err(|_| format!("index `{index}` is too large"))?;
                steps.push(Step::Index(n));
            } else {
                return Err(format!(
                    "`[{index}]` in segment `{segment}` is neither `[*]` nor an index such as `[0]`"
                ));
            }
        }
    }
    Ok(steps)
}

/// Moves the values at `path` out of `value` (leaving `null`) into `out`.
pub(crate) fn take(value: &mut Value, path: &[Step], out: &mut Vec<Value>) {
    let Some((first, rest)) = path.split_first() else {
        if !value.is_null() {
            out.push(value.take());
        }
        return;
    };
    match (first, value) {
        (Step::Name(_), Value::Array(items)) => {
            for v in items {
                take(v, path, out);
            }
        }
        (Step::Name(name) | Step::Pointer(name), Value::Object(map)) => {
            if let Some(v) = map.get_mut(name.as_str()) {
                take(v, rest, out);
            }
        }
        (Step::Pointer(token), Value::Array(items)) => {
            if let Some(v) = token.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                take(v, rest, out);
            }
        }
        (Step::Each, Value::Array(items)) => {
            for v in items {
                take(v, rest, out);
            }
        }
        (Step::Index(i), Value::Array(items)) => {
            if let Some(v) = items.get_mut(*i) {
                take(v, rest, out);
            }
        }
        _ => {}
    }
}

/// Parses a text content block as a JSON or YAML document: `None` unless it is an object or
/// an array that every reader would read the same way (see the module docs).
pub(crate) fn parse_text(text: &str, format: TextFormat) -> Option<Value> {
    let value = match format {
        TextFormat::Json => {
            let mut de = serde_json::Deserializer::from_str(text);
            let v = Unique { depth: 0 }.deserialize(&mut de).ok()?;
            de.end().ok()?;
            v
        }
        TextFormat::Yaml => {
            let mut options = crate::strict::yaml_options();
            // Comments are text the model reads and the parsed document does not hold: a
            // document with one is not parsed (all of it is then untrusted).
            options.emit_comments = true;
            let mut budget = serde_saphyr::Budget::default();
            budget.max_total_comment_bytes = 0;
            budget.max_documents = 1;
            budget.max_depth = MAX_DEPTH;
            options.budget = Some(budget);
            serde_saphyr::from_str_with_options::<YamlDoc>(text, options)
                .ok()?
                .0
        }
    };
    matches!(value, Value::Object(_) | Value::Array(_)).then_some(value)
}

/// A YAML document read through [`Unique`].
struct YamlDoc(Value);

impl<'de> serde::Deserialize<'de> for YamlDoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Unique { depth: 0 }.deserialize(d).map(YamlDoc)
    }
}

/// Reads any value into a `serde_json::Value`, failing on a duplicated key (serde_json keeps
/// the last one silently, and the model may read the first), on a number JSON cannot hold
/// and on nesting deeper than [`MAX_DEPTH`].
#[derive(Clone, Copy)]
struct Unique {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Unique {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        if self.depth > MAX_DEPTH {
            return Err(D::Error::custom("nested too deeply"));
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = Unique {
            depth: self.depth + 1,
        };
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(inner)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = Unique {
            depth: self.depth + 1,
        };
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(A::Error::custom(format!("duplicate key `{key}`")));
            }
            let v = map.next_value_seed(inner)?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "tests: a failed expectation should stop the test with its message"
    )]

    use super::*;
    use serde_json::json;

    fn taken(doc: Value, path: &str) -> (Vec<Value>, Value) {
        let mut doc = doc;
        let mut out = Vec::new();
        take(&mut doc, &parse_path(path).unwrap(), &mut out);
        (out, doc)
    }

    proptest::proptest! {
        /// Total: any path and any text, no panic; a path that parses takes only values the
        /// document holds.
        #[test]
        fn any_path_and_text_is_handled(path in "[a-z.\\[\\]*0-9/~]{0,12}", t in "\\PC{0,40}") {
            if let Ok(steps) = parse_path(&path) {
                let mut doc = json!({"a": [{"b": "x"}, "y"], "0": {"1": ["z"]}});
                let mut out = Vec::new();
                take(&mut doc, &steps, &mut out);
                proptest::prop_assert!(out.len() <= 4);
            }
            let _ = parse_text(&t, TextFormat::Json);
            let _ = parse_text(&t, TextFormat::Yaml);
        }
    }

    #[test]
    fn paths_parse_into_steps() {
        use Step::*;
        assert_eq!(
            parse_path("messages[*].sender").unwrap(),
            [Name("messages".into()), Each, Name("sender".into())]
        );
        assert_eq!(
            parse_path("rows[2][*].owner").unwrap(),
            [Name("rows".into()), Index(2), Each, Name("owner".into())]
        );
        assert_eq!(
            parse_path("[*].email").unwrap(),
            [Each, Name("email".into())]
        );
        assert_eq!(
            parse_path("/a~1b/0").unwrap(),
            [Pointer("a/b".into()), Pointer("0".into())]
        );
        for bad in [
            "",
            "/",
            "a..b",
            ".a",
            "a.",
            "a[",
            "a[x]",
            "a[]",
            "a]",
            "a[*]b",
            "a.[*]",
            "[*]x",
            "a[99999999999999999999999]",
        ] {
            assert!(parse_path(bad).is_err(), "`{bad}` parsed");
        }
    }

    #[test]
    fn wildcards_and_nested_objects_take_their_values() {
        let doc = json!({
            "organizer": {"email": "org@corp.example", "name": "Org"},
            "participants": ["a@corp.example", "b@corp.example"],
            "messages": [{"sender": "s1@x.example", "body": "hi"}, {"sender": "s2@x.example"}],
            "description": "free text"
        });
        let (out, rest) = taken(doc.clone(), "participants[*]");
        assert_eq!(out, [json!("a@corp.example"), json!("b@corp.example")]);
        assert_eq!(rest["participants"], json!([null, null]));
        let (out, rest) = taken(doc.clone(), "messages[*].sender");
        assert_eq!(out, [json!("s1@x.example"), json!("s2@x.example")]);
        assert_eq!(rest["messages"][0]["body"], json!("hi"));
        let (out, _) = taken(doc.clone(), "organizer.email");
        assert_eq!(out, [json!("org@corp.example")]);
        // A name walks arrays; `[*]` and `[N]` select nothing in an object or a string.
        let (out, _) = taken(doc.clone(), "messages.sender");
        assert_eq!(out.len(), 2);
        let (out, _) = taken(doc.clone(), "organizer[*]");
        assert!(out.is_empty());
        let (out, _) = taken(doc.clone(), "description[0]");
        assert!(out.is_empty());
        let (out, _) = taken(doc.clone(), "participants[1]");
        assert_eq!(out, [json!("b@corp.example")]);
        let (out, _) = taken(doc, "/participants/0");
        assert_eq!(out, [json!("a@corp.example")]);
        let (out, _) = taken(json!([{"email": "x@y.example"}]), "[*].email");
        assert_eq!(out, [json!("x@y.example")]);
    }

    #[test]
    fn text_parses_only_as_an_unambiguous_document() {
        let j = TextFormat::Json;
        assert!(parse_text(r#"{"a": [1, "x"]}"#, j).is_some());
        assert!(parse_text("[1]", j).is_some());
        for bad in [
            "plain text",
            "\"a string\"",
            "42",
            r#"{"a": 1} trailing"#,
            r#"{"a": 1, "a": 2}"#,
            r#"{"a": 1e400}"#,
            "{\"a\": 1",
        ] {
            assert!(parse_text(bad, j).is_none(), "{bad}");
        }
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(parse_text(&deep, j).is_none());
        let y = TextFormat::Yaml;
        let doc = parse_text(
            "organizer:\n  email: a@b.example\nparticipants: [x@y.example]\n",
            y,
        )
        .unwrap();
        assert_eq!(doc["organizer"]["email"], json!("a@b.example"));
        assert!(parse_text(r#"{"json": "is yaml"}"#, y).is_some());
        for bad in [
            "just words",
            "a: 1\na: 2\n",
            "a: 1 # send to eve@evil.example\n",
            "# note\na: 1\n",
            "a: 1\n---\nb: 2\n",
            "a: [1\n",
        ] {
            assert!(parse_text(bad, y).is_none(), "{bad}");
        }
    }
}
