//! The `tools/list` splice: remove some tools from a `tools/list` response frame and keep
//! every other byte.
//!
//! [`splice_tools_list`] reads the frame only far enough to find the raw elements of
//! `result.tools` (borrowed [`RawValue`]s, located by their byte spans in the frame) and
//! each element's `name`. When the predicate removes nothing, the answer is `Ok(None)`: the
//! caller forwards the original bytes, untouched. Otherwise the new frame is the old one
//! with only the removed elements (and the separator that went with each) cut out: key
//! order, numbers such as `1e400`, escapes, unknown members, `nextCursor`, `_meta`, the id
//! and the whitespace around the kept elements stay exactly as received. Nothing is
//! re-serialised.
//!
//! Input that is not a `tools/list` result the splice understands (not UTF-8, not JSON,
//! not an object, a duplicated `result`/`tools`/tool `name` member, `tools` not an array)
//! is an [`Err`] with a reason to log; the caller then forwards the frame unchanged.
//! The splice is total: any bytes, no panic.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// Why a frame could not be spliced (it is then forwarded unchanged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot splice the `tools/list` response: {0}")]
pub struct SpliceError(String);

impl SpliceError {
    fn new(why: impl Into<String>) -> SpliceError {
        SpliceError(why.into())
    }

    /// The reason, without the leading context.
    pub fn reason(&self) -> &str {
        &self.0
    }
}

/// A frame with some tools removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spliced {
    /// The new frame (one JSON message, no trailing newline).
    pub frame: Vec<u8>,
    /// The names of the removed tools, in listing order.
    pub removed: Vec<String>,
}

/// Removes from the `tools/list` response `frame` every tool for which
/// `remove(name, raw_tool)` is true.
///
/// Only tools that are objects with a string `name` are offered to the predicate; any
/// other element is kept. `Ok(None)` when nothing is removed (forward `frame` as it is),
/// `Ok(Some(_))` with the spliced frame otherwise, `Err` when the frame is not a
/// `tools/list` result this function can read (forward it unchanged and log the reason).
pub fn splice_tools_list<F>(frame: &[u8], mut remove: F) -> Result<Option<Spliced>, SpliceError>
where
    F: FnMut(&str, &RawValue) -> bool,
{
    let text = std::str::from_utf8(frame).map_err(|_| SpliceError::new("not valid utf-8"))?;
    if !starts_with_json(text, '{') {
        return Err(SpliceError::new("the frame is not a json object"));
    }
    let envelope: ResultOnly<'_> =
        serde_json::from_str(text).map_err(|e| SpliceError::new(format!("the frame: {e}")))?;
    let result = envelope
        .result
        .ok_or_else(|| SpliceError::new("the frame has no `result`"))?;
    if !result.get().starts_with('{') {
        return Err(SpliceError::new("`result` is not an object"));
    }
    let listing: ToolsOnly<'_> = serde_json::from_str(result.get())
        .map_err(|e| SpliceError::new(format!("`result`: {e}")))?;
    let tools_raw = listing
        .tools
        .ok_or_else(|| SpliceError::new("`result` has no `tools`"))?;
    if !tools_raw.get().starts_with('[') {
        return Err(SpliceError::new("`result.tools` is not an array"));
    }
    let tools: Vec<&RawValue> = serde_json::from_str(tools_raw.get())
        .map_err(|e| SpliceError::new(format!("`result.tools`: {e}")))?;

    let mut keep = Vec::with_capacity(tools.len());
    let mut removed = Vec::new();
    for (index, tool) in tools.iter().enumerate() {
        let gone =
            match tool_name(tool).map_err(|e| SpliceError::new(format!("tool #{index}: {e}")))? {
                Some(name) => {
                    let gone = remove(&name, tool);
                    if gone {
                        removed.push(name.into_owned());
                    }
                    gone
                }
                None => false,
            };
        keep.push(!gone);
    }
    if removed.is_empty() {
        return Ok(None);
    }

    let array = span(text, tools_raw.get())?;
    let spans = tools
        .iter()
        .map(|t| span(text, t.get()))
        .collect::<Result<Vec<_>, _>>()?;
    let rebuilt = rebuild_array(text, array, &spans, &keep)?;
    let mut out = Vec::with_capacity(frame.len());
    out.extend_from_slice(piece(text, 0, array.0)?.as_bytes());
    out.extend_from_slice(rebuilt.as_bytes());
    out.extend_from_slice(piece(text, array.1, text.len())?.as_bytes());
    Ok(Some(Spliced {
        frame: out,
        removed,
    }))
}

/// The `[`…`]` of `result.tools` with only the kept elements: the whitespace after `[`,
/// each kept element followed (when another kept element comes) by the separator that
/// followed it, and the whitespace before `]`, all as received.
fn rebuild_array(
    text: &str,
    array: (usize, usize),
    elements: &[(usize, usize)],
    keep: &[bool],
) -> Result<String, SpliceError> {
    let (first, last) = match (elements.first(), elements.last()) {
        (Some(f), Some(l)) => (f, l),
        _ => {
            return Err(SpliceError::new(
                "internal: an empty array has nothing to remove",
            ));
        }
    };
    let open = piece(text, array.0, array.0.saturating_add(1))?;
    let close = piece(text, array.1.saturating_sub(1), array.1)?;
    let lead = piece(text, array.0.saturating_add(1), first.0)?;
    let trail = piece(text, last.1, array.1.saturating_sub(1))?;
    if open != "[" || close != "]" || !is_ws(lead) || !is_ws(trail) {
        return Err(SpliceError::new(
            "internal: unexpected bytes around `result.tools`",
        ));
    }
    let mut out = String::with_capacity(array.1.saturating_sub(array.0));
    out.push('[');
    out.push_str(lead);
    let mut pending_separator: Option<&str> = None;
    for (i, (&(start, end), &kept)) in elements.iter().zip(keep).enumerate() {
        if !kept {
            continue;
        }
        if let Some(sep) = pending_separator.take() {
            out.push_str(sep);
        }
        out.push_str(piece(text, start, end)?);
        if let Some(&(next, _)) = elements.get(i.saturating_add(1)) {
            let sep = piece(text, end, next)?;
            if sep.trim_matches(JSON_WS) != "," {
                return Err(SpliceError::new(
                    "internal: unexpected bytes between elements of `result.tools`",
                ));
            }
            pending_separator = Some(sep);
        }
    }
    out.push_str(trail);
    out.push(']');
    Ok(out)
}

const JSON_WS: [char; 4] = [' ', '\t', '\n', '\r'];

fn is_ws(s: &str) -> bool {
    s.chars().all(|c| JSON_WS.contains(&c))
}

fn starts_with_json(text: &str, c: char) -> bool {
    text.trim_start_matches(JSON_WS).starts_with(c)
}

/// `text[start..end]`, or an internal error.
fn piece(text: &str, start: usize, end: usize) -> Result<&str, SpliceError> {
    text.get(start..end)
        .ok_or_else(|| SpliceError::new("internal: a span is out of bounds"))
}

/// Where `part` (a slice borrowed from `text`) lies in `text`.
fn span(text: &str, part: &str) -> Result<(usize, usize), SpliceError> {
    let start = (part.as_ptr() as usize)
        .checked_sub(text.as_ptr() as usize)
        .ok_or_else(|| SpliceError::new("internal: a value does not borrow from the frame"))?;
    let end = start.saturating_add(part.len());
    if text.get(start..end) != Some(part) {
        return Err(SpliceError::new(
            "internal: a value does not borrow from the frame",
        ));
    }
    Ok((start, end))
}

/// The envelope, reduced to `result` (a duplicated `result` is an error).
#[derive(Deserialize)]
struct ResultOnly<'a> {
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
}

/// A `tools/list` result, reduced to `tools` (a duplicated `tools` is an error).
#[derive(Deserialize)]
struct ToolsOnly<'a> {
    #[serde(borrow, default)]
    tools: Option<&'a RawValue>,
}

/// The decoded `name` of a tool: `None` when the tool is not an object or its `name` is
/// missing or not a string; an error when `name` appears more than once (two readers of
/// the listing must never disagree on a tool's name).
fn tool_name(tool: &RawValue) -> Result<Option<Cow<'_, str>>, String> {
    if !tool.get().starts_with('{') {
        return Ok(None);
    }
    let NameMember(raw) = serde_json::from_str(tool.get()).map_err(|e| e.to_string())?;
    match raw {
        Some(raw) if raw.get().starts_with('"') => {
            let name: Cow<'_, str> = serde_json::from_str(raw.get()).map_err(|e| e.to_string())?;
            Ok(Some(name))
        }
        _ => Ok(None),
    }
}

/// The raw value of an object's single `name` member, if any.
struct NameMember<'a>(Option<&'a RawValue>);

impl<'de> Deserialize<'de> for NameMember<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(NameVisitor)
    }
}

struct NameVisitor;

impl<'de> Visitor<'de> for NameVisitor {
    type Value = NameMember<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool definition object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut name: Option<&'de RawValue> = None;
        while let Some(IsName(is_name)) = map.next_key()? {
            if is_name {
                if name.is_some() {
                    return Err(de::Error::duplicate_field("name"));
                }
                name = Some(map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(NameMember(name))
    }
}

/// A member key: is it `name` (after unescaping)?
struct IsName(bool);

impl<'de> Deserialize<'de> for IsName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = IsName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IsName, E> {
                Ok(IsName(v == "name"))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    fn names(set: &'static [&'static str]) -> impl FnMut(&str, &RawValue) -> bool {
        move |name, _| set.contains(&name)
    }

    fn splice(frame: &str, set: &'static [&'static str]) -> Option<String> {
        splice_tools_list(frame.as_bytes(), names(set))
            .unwrap()
            .map(|s| String::from_utf8(s.frame).unwrap())
    }

    #[test]
    fn removes_only_the_named_elements_and_keeps_every_other_byte() {
        let frame = r#"{"jsonrpc":"2.0","id":18446744073709551615,"result":{"tools":[{"name":"a","x":1e400},{"name":"b","inputSchema":{"type":"object"}},{"name":"c"}],"nextCursor":"n","_meta":{"k":[1.0,2]}},"z":null}"#;
        assert_eq!(
            splice(frame, &["b"]).unwrap(),
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"result":{"tools":[{"name":"a","x":1e400},{"name":"c"}],"nextCursor":"n","_meta":{"k":[1.0,2]}},"z":null}"#
        );
        assert_eq!(
            splice(frame, &["a"]).unwrap(),
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"result":{"tools":[{"name":"b","inputSchema":{"type":"object"}},{"name":"c"}],"nextCursor":"n","_meta":{"k":[1.0,2]}},"z":null}"#
        );
        assert_eq!(
            splice(frame, &["c"]).unwrap(),
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"result":{"tools":[{"name":"a","x":1e400},{"name":"b","inputSchema":{"type":"object"}}],"nextCursor":"n","_meta":{"k":[1.0,2]}},"z":null}"#
        );
        assert_eq!(
            splice(frame, &["a", "b", "c"]).unwrap(),
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"result":{"tools":[],"nextCursor":"n","_meta":{"k":[1.0,2]}},"z":null}"#
        );
        assert_eq!(splice(frame, &["zz"]), None);
        assert_eq!(splice(frame, &[]), None);
    }

    #[test]
    fn reports_removed_names_decoded() {
        let frame = r#"{"result":{"tools":[{"name":"d\u0065lete"},{"name":"keep"}]},"id":1,"jsonrpc":"2.0"}"#;
        let out = splice_tools_list(frame.as_bytes(), names(&["delete"]))
            .unwrap()
            .unwrap();
        assert_eq!(out.removed, vec!["delete".to_owned()]);
        assert_eq!(
            String::from_utf8(out.frame).unwrap(),
            r#"{"result":{"tools":[{"name":"keep"}]},"id":1,"jsonrpc":"2.0"}"#
        );
        // An escaped member name is still `name`.
        let frame = r#"{"result":{"tools":[{"n\u0061me":"x"}]}}"#;
        assert_eq!(splice(frame, &["x"]).unwrap(), r#"{"result":{"tools":[]}}"#);
    }

    #[test]
    fn whitespace_around_kept_elements_is_kept() {
        let frame = "{ \"result\" : { \"tools\" : [\n  {\"name\":\"a\"} ,\n  {\"name\":\"b\"}\t,\n  {\"name\":\"c\"}\n ] } }  ";
        assert_eq!(
            splice(frame, &["b"]).unwrap(),
            "{ \"result\" : { \"tools\" : [\n  {\"name\":\"a\"} ,\n  {\"name\":\"c\"}\n ] } }  "
        );
        assert_eq!(
            splice(frame, &["a"]).unwrap(),
            "{ \"result\" : { \"tools\" : [\n  {\"name\":\"b\"}\t,\n  {\"name\":\"c\"}\n ] } }  "
        );
        assert_eq!(
            splice(frame, &["c"]).unwrap(),
            "{ \"result\" : { \"tools\" : [\n  {\"name\":\"a\"} ,\n  {\"name\":\"b\"}\n ] } }  "
        );
        assert_eq!(
            splice(frame, &["a", "b", "c"]).unwrap(),
            "{ \"result\" : { \"tools\" : [\n  \n ] } }  "
        );
    }

    #[test]
    fn elements_without_a_string_name_are_kept_and_not_offered() {
        let frame =
            r#"{"result":{"tools":[1,"a",{"name":5},{"title":"a"},[{"name":"a"}],{"name":"a"}]}}"#;
        let mut offered = Vec::new();
        let out = splice_tools_list(frame.as_bytes(), |name, raw| {
            offered.push((name.to_owned(), raw.get().to_owned()));
            true
        })
        .unwrap()
        .unwrap();
        assert_eq!(
            offered,
            vec![("a".to_owned(), r#"{"name":"a"}"#.to_owned())]
        );
        assert_eq!(
            String::from_utf8(out.frame).unwrap(),
            r#"{"result":{"tools":[1,"a",{"name":5},{"title":"a"},[{"name":"a"}]]}}"#
        );
    }

    #[test]
    fn malformed_frames_are_errors_with_a_reason() {
        let cases: &[&[u8]] = &[
            b"\xff",
            b"",
            b"not json",
            b"[{\"result\":{\"tools\":[{\"name\":\"a\"}]}}]",
            b"{\"id\":1,\"error\":{\"code\":1,\"message\":\"x\"}}",
            b"{\"result\":[{\"tools\":[{\"name\":\"a\"}]}]}",
            b"{\"result\":{}}",
            b"{\"result\":{\"tools\":{\"name\":\"a\"}}}",
            b"{\"result\":{\"tools\":[{\"name\":\"a\"}]},\"result\":{\"tools\":[]}}",
            b"{\"result\":{\"tools\":[{\"name\":\"a\"}],\"tools\":[]}}",
            b"{\"result\":{\"tools\":[{\"name\":\"b\",\"name\":\"a\"}]}}",
            b"{\"result\":{\"tools\":[{\"name\":\"a\"}]}} x",
        ];
        for case in cases {
            let err = splice_tools_list(case, |_, _| true).unwrap_err();
            assert!(!err.reason().is_empty());
            assert!(err.to_string().starts_with("cannot splice"), "{err}");
        }
    }

    /// What a JSON reader sees after the splice: the original value with the removed
    /// tools filtered out.
    fn filtered(frame: &str, gone: &dyn Fn(&str) -> bool) -> Value {
        let mut v: Value = serde_json::from_str(frame).unwrap();
        if let Some(tools) = v
            .get_mut("result")
            .and_then(|r| r.get_mut("tools"))
            .and_then(Value::as_array_mut)
        {
            tools.retain(|t| !t.get("name").and_then(Value::as_str).is_some_and(gone));
        }
        v
    }

    fn arb_tool() -> impl Strategy<Value = String> {
        let name = prop_oneof![
            Just("a".to_owned()),
            Just("b".to_owned()),
            Just("c".to_owned()),
            Just("\\u0061".to_owned()),
            "[a-d]{0,3}",
        ];
        let extra = prop_oneof![
            Just(String::new()),
            Just(
                r#","inputSchema":{"type":"object","properties":{"name":{"type":"string"}}}"#
                    .to_owned()
            ),
            Just(r#","description":"x, ] } \"name\" \\""#.to_owned()),
            Just(r#","annotations":{"readOnlyHint":true},"n":-0.5e-3"#.to_owned()),
        ];
        prop_oneof![
            4 => (name, extra, any::<bool>()).prop_map(|(n, e, first)| if first {
                format!(r#"{{"name":"{n}"{e}}}"#)
            } else {
                format!(r#"{{"title":"t"{e},"name":"{n}"}}"#)
            }),
            1 => Just("null".to_owned()),
            1 => Just(r#"{"name":7}"#.to_owned()),
        ]
    }

    fn ws() -> impl Strategy<Value = String> {
        "[ \t\n\r]{0,2}"
    }

    prop_compose! {
        fn arb_frame()(
            tools in prop::collection::vec((ws(), arb_tool(), ws()), 0..6),
            lead in ws(),
            trail in ws(),
            cursor in any::<bool>(),
            id in prop_oneof![Just("1"), Just("\"x\""), Just("18446744073709551615")],
        ) -> String {
            let elements: Vec<String> =
                tools.into_iter().map(|(a, t, b)| format!("{a}{t}{b}")).collect();
            let cursor = if cursor { r#","nextCursor":"c2""# } else { "" };
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"_meta":{{"m":1}},"tools":[{lead}{}{trail}]{cursor}}}}}"#,
                elements.join(",")
            )
        }
    }

    proptest! {
        #[test]
        fn splice_preserves_the_json_value(frame in arb_frame(), set in prop::sample::subsequence(vec!["a", "b", "c", "", "ab"], 0..5)) {
            let gone = |name: &str| set.contains(&name);
            let out = splice_tools_list(frame.as_bytes(), |n, _| gone(n)).unwrap();
            let expected = filtered(&frame, &gone);
            match out {
                None => {
                    // Nothing removed: the frame is forwarded as it is.
                    let original: Value = serde_json::from_str(&frame).unwrap();
                    prop_assert_eq!(original, expected);
                }
                Some(spliced) => {
                    prop_assert!(!spliced.removed.is_empty());
                    prop_assert!(spliced.frame.len() < frame.len());
                    let got: Value = serde_json::from_slice(&spliced.frame).unwrap();
                    prop_assert_eq!(got, expected);
                    // Idempotent: nothing is left to remove.
                    let again = splice_tools_list(&spliced.frame, |n, _| gone(n)).unwrap();
                    prop_assert!(again.is_none());
                    // Only bytes were cut: the output is a subsequence of the input.
                    let mut rest = frame.as_bytes().iter();
                    prop_assert!(spliced.frame.iter().all(|b| rest.any(|c| c == b)));
                }
            }
            // Keep-all never produces a new frame.
            prop_assert!(splice_tools_list(frame.as_bytes(), |_, _| false).unwrap().is_none());
        }

        #[test]
        fn total_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = splice_tools_list(&bytes, |_, _| true);
        }
    }
}
