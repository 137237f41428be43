//! The frame classifier: one line of bytes in, a borrowed, classified envelope out.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::id::{IdKind, decode_str, id_kind};

/// Why a line could not be read as JSON at all (JSON-RPC `-32700`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The line is not valid UTF-8.
    #[error("frame is not valid utf-8")]
    NotUtf8,
    /// The line is not one JSON value.
    #[error("frame is not valid json: {0}")]
    NotJson(String),
}

/// Why a JSON value is not a valid JSON-RPC 2.0 message (JSON-RPC `-32600`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// The value is not a JSON object.
    #[error("message is not a json object")]
    NotAnObject,
    /// A batch with no elements.
    #[error("batch is empty")]
    EmptyBatch,
    /// A member the classifier relies on appears more than once.
    #[error("member `{0}` appears more than once")]
    DuplicateMember(&'static str),
    /// A member whose name differs from one the classifier relies on only in letter case
    /// (`Method`, `PARAMS`, `paramſ`): some parsers (Go's `encoding/json`) read it as that
    /// member, so the message would mean one thing to toolgate and another to the server.
    #[error("a member differs from `{0}` only in letter case")]
    LookalikeMember(&'static str),
    /// `jsonrpc` is missing or not `"2.0"`.
    #[error("`jsonrpc` is missing or not \"2.0\"")]
    BadVersion,
    /// `method` is not a string.
    #[error("`method` is not a string")]
    MethodNotString,
    /// `id` is not a string or a number (or is null on something other than an error response).
    #[error("`id` must be a string or a number")]
    BadId,
    /// `params` is neither an object nor an array.
    #[error("`params` must be an object or an array")]
    BadParams,
    /// `error` is not an object.
    #[error("`error` must be an object")]
    BadError,
    /// A message with both `result` and `error`.
    #[error("message has both `result` and `error`")]
    ResultAndError,
    /// A message with `method` and also `result` or `error`.
    #[error("message has `method` and also `result` or `error`")]
    MethodWithResult,
    /// A response without an id.
    #[error("response has no `id`")]
    ResponseWithoutId,
    /// Neither `method`, `result` nor `error`.
    #[error("message has neither `method`, `result` nor `error`")]
    Empty,
}

/// What kind of JSON-RPC message an [`Envelope`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `method` and a non-null `id`.
    Request,
    /// `method` and no `id`.
    Notification,
    /// `result` and an `id`.
    Response,
    /// `error` and an `id` (possibly `null`).
    ErrorResponse,
    /// Valid JSON that is not a valid JSON-RPC 2.0 message.
    Invalid(Invalid),
}

/// One JSON-RPC message, borrowed from the bytes of its frame.
///
/// Unknown members are ignored; nothing is re-serialised. `id`, `params`, `result`
/// and `error` are the raw JSON text of those members, exactly as received.
#[derive(Debug, Clone)]
pub struct Envelope<'a> {
    /// The raw `id`, if present (may be the text `null`).
    pub id: Option<&'a RawValue>,
    /// The decoded `method`, if present and a string.
    pub method: Option<Cow<'a, str>>,
    /// The raw `params`, if present.
    pub params: Option<&'a RawValue>,
    /// The raw `result`, if present.
    pub result: Option<&'a RawValue>,
    /// The raw `error`, if present.
    pub error: Option<&'a RawValue>,
    /// The classification.
    pub kind: Kind,
}

impl<'a> Envelope<'a> {
    fn invalid(why: Invalid) -> Self {
        Envelope {
            id: None,
            method: None,
            params: None,
            result: None,
            error: None,
            kind: Kind::Invalid(why),
        }
    }

    /// The method name, or `""` when there is none.
    pub fn method_str(&self) -> &str {
        self.method.as_deref().unwrap_or("")
    }

    /// True for requests and notifications (messages with a `method`).
    pub fn is_call(&self) -> bool {
        matches!(self.kind, Kind::Request | Kind::Notification)
    }

    /// True for responses and error responses.
    pub fn is_response(&self) -> bool {
        matches!(self.kind, Kind::Response | Kind::ErrorResponse)
    }

    /// The id if it is usable to address a reply (a number, or a string that decodes; not
    /// `null`).
    pub fn reply_id(&self) -> Option<&'a RawValue> {
        self.id.filter(|raw| match id_kind(raw) {
            IdKind::Number => true,
            IdKind::String => decode_str(raw).is_some(),
            IdKind::Null | IdKind::Other => false,
        })
    }
}

/// One classified line.
#[derive(Debug, Clone)]
pub enum Frame<'a> {
    /// Not UTF-8 or not JSON.
    ParseError(ParseError),
    /// A JSON array: its elements, raw and unclassified (see [`classify_value`]).
    Batch(Vec<&'a RawValue>),
    /// Any other JSON value, classified (non-objects are [`Invalid::NotAnObject`]).
    Single(Envelope<'a>),
}

/// Classifies one line (without its trailing newline). Total: never panics.
pub fn classify(line: &[u8]) -> Frame<'_> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Frame::ParseError(ParseError::NotUtf8);
    };
    match parse(text) {
        Ok(Top::Batch(items)) => Frame::Batch(items),
        Ok(Top::Single(env)) => Frame::Single(env),
        Err(err) => Frame::ParseError(ParseError::NotJson(err.to_string())),
    }
}

/// Classifies one raw JSON value, e.g. an element of a batch. Total: never panics.
///
/// A nested array is [`Invalid::NotAnObject`] (batches do not nest).
pub fn classify_value(value: &RawValue) -> Envelope<'_> {
    match parse(value.get()) {
        Ok(Top::Single(env)) => env,
        Ok(Top::Batch(_)) | Err(_) => Envelope::invalid(Invalid::NotAnObject),
    }
}

/// Dispatches on the first byte so that scalars are only checked for syntax (a number
/// such as `1e400` is valid JSON even if no `f64` holds it).
fn parse(text: &str) -> Result<Top<'_>, serde_json::Error> {
    let first = text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .as_bytes()
        .first()
        .copied();
    match first {
        Some(b'{') => serde_json::from_str::<Top<'_>>(text),
        Some(b'[') => serde_json::from_str::<Vec<&RawValue>>(text).map(Top::Batch),
        _ => serde_json::from_str::<&RawValue>(text)
            .map(|_| Top::Single(Envelope::invalid(Invalid::NotAnObject))),
    }
}

enum Top<'a> {
    Batch(Vec<&'a RawValue>),
    Single(Envelope<'a>),
}

impl<'de> de::Deserialize<'de> for Top<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a json-rpc message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut jsonrpc: Option<&'de RawValue> = None;
        let mut id: Option<&'de RawValue> = None;
        let mut method: Option<&'de RawValue> = None;
        let mut params: Option<&'de RawValue> = None;
        let mut result: Option<&'de RawValue> = None;
        let mut error: Option<&'de RawValue> = None;
        let mut duplicate: Option<&'static str> = None;
        let mut lookalike: Option<&'static str> = None;

        while let Some(key) = map.next_key::<Member>()? {
            let (slot, name) = match key {
                Member::Jsonrpc => (&mut jsonrpc, "jsonrpc"),
                Member::Id => (&mut id, "id"),
                Member::Method => (&mut method, "method"),
                Member::Params => (&mut params, "params"),
                Member::Result => (&mut result, "result"),
                Member::Error => (&mut error, "error"),
                Member::Other => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                Member::Lookalike(name) => {
                    map.next_value::<IgnoredAny>()?;
                    lookalike.get_or_insert(name);
                    continue;
                }
            };
            let value = map.next_value::<&'de RawValue>()?;
            if slot.is_some() {
                duplicate.get_or_insert(name);
            }
            *slot = Some(value);
        }

        let mut env = Envelope {
            id,
            method: None,
            params,
            result,
            error,
            kind: Kind::Request,
        };
        env.kind = match classify_members(jsonrpc, method, &mut env, duplicate, lookalike) {
            Ok(kind) => kind,
            Err(why) => Kind::Invalid(why),
        };
        Ok(Top::Single(env))
    }
}

fn classify_members<'a>(
    jsonrpc: Option<&'a RawValue>,
    method: Option<&'a RawValue>,
    env: &mut Envelope<'a>,
    duplicate: Option<&'static str>,
    lookalike: Option<&'static str>,
) -> Result<Kind, Invalid> {
    if let Some(name) = duplicate {
        return Err(Invalid::DuplicateMember(name));
    }
    if let Some(name) = lookalike {
        return Err(Invalid::LookalikeMember(name));
    }
    if let Some(raw) = method {
        env.method = Some(decode_str(raw).ok_or(Invalid::MethodNotString)?);
    }
    match jsonrpc.and_then(decode_str) {
        Some(v) if v == "2.0" => {}
        _ => return Err(Invalid::BadVersion),
    }
    let id = env.id.map(id_kind);
    if matches!(id, Some(IdKind::Other)) {
        return Err(Invalid::BadId);
    }
    // A string id that does not decode (a lone surrogate such as `"\ud800"`) could be
    // matched to no response: it is refused, not silently dropped.
    if matches!(id, Some(IdKind::String)) && env.id.and_then(decode_str).is_none() {
        return Err(Invalid::BadId);
    }
    if env.method.is_some() {
        if env.result.is_some() || env.error.is_some() {
            return Err(Invalid::MethodWithResult);
        }
        if let Some(p) = env.params
            && !matches!(p.get().as_bytes().first(), Some(b'{' | b'['))
        {
            return Err(Invalid::BadParams);
        }
        return match id {
            None => Ok(Kind::Notification),
            Some(IdKind::Null) => Err(Invalid::BadId),
            Some(_) => Ok(Kind::Request),
        };
    }
    match (env.result.is_some(), env.error) {
        (true, Some(_)) => Err(Invalid::ResultAndError),
        (true, None) => match id {
            None => Err(Invalid::ResponseWithoutId),
            Some(IdKind::Null) => Err(Invalid::BadId),
            Some(_) => Ok(Kind::Response),
        },
        (false, Some(err)) => {
            if !err.get().starts_with('{') {
                return Err(Invalid::BadError);
            }
            match id {
                None => Err(Invalid::ResponseWithoutId),
                Some(_) => Ok(Kind::ErrorResponse),
            }
        }
        (false, None) => Err(Invalid::Empty),
    }
}

/// The members the classifier reads.
const MEMBERS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];

enum Member {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    /// A name that differs from one of the above only in letter case.
    Lookalike(&'static str),
    Other,
}

impl<'de> de::Deserialize<'de> for Member {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_identifier(MemberVisitor)
    }
}

struct MemberVisitor;

impl Visitor<'_> for MemberVisitor {
    type Value = Member;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Member, E> {
        Ok(match v {
            "jsonrpc" => Member::Jsonrpc,
            "id" => Member::Id,
            "method" => Member::Method,
            "params" => Member::Params,
            "result" => Member::Result,
            "error" => Member::Error,
            // Member names are short: a long one cannot fold to any of them.
            other if other.len() <= 16 => MEMBERS
                .iter()
                .find(|name| crate::spelling::folds_to(other, name))
                .map_or(Member::Other, |name| Member::Lookalike(name)),
            _ => Member::Other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(line: &str) -> Envelope<'_> {
        match classify(line.as_bytes()) {
            Frame::Single(env) => env,
            other => panic!("not a single message: {other:?}"),
        }
    }

    #[test]
    fn request_notification_response_error() {
        let r = single(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#);
        assert_eq!(r.kind, Kind::Request);
        assert_eq!(r.method_str(), "tools/call");
        assert_eq!(r.params.unwrap().get(), r#"{"name":"x"}"#);

        let n = single(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(n.kind, Kind::Notification);

        let s = single(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#);
        assert_eq!(s.kind, Kind::Response);
        assert_eq!(s.id.unwrap().get(), r#""a""#);

        let e = single(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#);
        assert_eq!(e.kind, Kind::ErrorResponse);
        assert!(e.reply_id().is_none());
    }

    #[test]
    fn raw_members_are_untouched() {
        let line = r#"{ "id" : 18446744073709551615 , "jsonrpc":"2.0", "x":[1e400], "method":"a\u002fb", "params" : {"b":1,"a":1e400} }"#;
        let env = single(line);
        assert_eq!(env.kind, Kind::Request);
        assert_eq!(env.id.unwrap().get(), "18446744073709551615");
        assert_eq!(env.method.as_deref(), Some("a/b"));
        assert_eq!(env.params.unwrap().get(), r#"{"b":1,"a":1e400}"#);
    }

    #[test]
    fn escaped_member_names_are_decoded() {
        let env = single(r#"{"jsonrpc":"2.0","\u0069d":7,"method":"ping"}"#);
        assert_eq!(env.kind, Kind::Request);
        assert_eq!(env.id.unwrap().get(), "7");
    }

    #[test]
    fn invalid_messages() {
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#,
                Invalid::ResultAndError,
            ),
            (
                r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#,
                Invalid::BadId,
            ),
            (r#"{"jsonrpc":"2.0","id":{},"result":1}"#, Invalid::BadId),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
                Invalid::BadId,
            ),
            (r#"{"jsonrpc":"2.0","id":null,"result":1}"#, Invalid::BadId),
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
                Invalid::BadVersion,
            ),
            (r#"{"id":1,"method":"x"}"#, Invalid::BadVersion),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
                Invalid::MethodNotString,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#,
                Invalid::BadParams,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"x","result":3}"#,
                Invalid::MethodWithResult,
            ),
            (
                r#"{"jsonrpc":"2.0","result":3}"#,
                Invalid::ResponseWithoutId,
            ),
            (r#"{"jsonrpc":"2.0","id":1,"error":"x"}"#, Invalid::BadError),
            (r#"{"jsonrpc":"2.0","id":1}"#, Invalid::Empty),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
                Invalid::DuplicateMember("method"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"a"}"#,
                Invalid::DuplicateMember("id"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}"#,
                Invalid::LookalikeMember("method"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","PARAMS":{}}"#,
                Invalid::LookalikeMember("params"),
            ),
            (
                r#"{"jsonrpc":"2.0","ID":1,"method":"tools/call"}"#,
                Invalid::LookalikeMember("id"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping","meth\u006fD":"x"}"#,
                Invalid::LookalikeMember("method"),
            ),
            (
                r#"{"jſonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"ping"}"#,
                Invalid::LookalikeMember("jsonrpc"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"\ud800","method":"tools/call"}"#,
                Invalid::BadId,
            ),
            ("5", Invalid::NotAnObject),
            ("1e400", Invalid::NotAnObject),
            (" -0 ", Invalid::NotAnObject),
            ("null", Invalid::NotAnObject),
            (r#""s""#, Invalid::NotAnObject),
        ];
        for (line, why) in cases {
            assert_eq!(single(line).kind, Kind::Invalid(why), "{line}");
        }
    }

    #[test]
    fn an_id_that_does_not_decode_is_never_echoed() {
        let env = single(r#"{"jsonrpc":"2.0","id":"\ud800","method":"tools/call"}"#);
        assert_eq!(env.kind, Kind::Invalid(Invalid::BadId));
        assert!(env.reply_id().is_none());
        let env = single(r#"{"jsonrpc":"2.0","id":"\u0041","method":"tools/call"}"#);
        assert_eq!(env.kind, Kind::Request);
        assert_eq!(env.reply_id().map(RawValue::get), Some(r#""\u0041""#));
    }

    #[test]
    fn parse_errors() {
        assert!(matches!(
            classify(b"\xff\xfe"),
            Frame::ParseError(ParseError::NotUtf8)
        ));
        assert!(matches!(
            classify(b"{"),
            Frame::ParseError(ParseError::NotJson(_))
        ));
        assert!(matches!(
            classify(b"{} {}"),
            Frame::ParseError(ParseError::NotJson(_))
        ));
        assert!(matches!(
            classify(b""),
            Frame::ParseError(ParseError::NotJson(_))
        ));
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","method":"\ud800"}"#),
            Frame::ParseError(_) | Frame::Single(_)
        ));
    }

    #[test]
    fn batches_keep_raw_elements() {
        let line = br#"[{"jsonrpc":"2.0","id":1,"method":"a"}, 5 ,[1]]"#;
        let Frame::Batch(items) = classify(line) else {
            panic!("not a batch")
        };
        assert_eq!(items.len(), 3);
        assert_eq!(classify_value(items[0]).kind, Kind::Request);
        assert_eq!(
            classify_value(items[1]).kind,
            Kind::Invalid(Invalid::NotAnObject)
        );
        assert_eq!(
            classify_value(items[2]).kind,
            Kind::Invalid(Invalid::NotAnObject)
        );
        assert!(matches!(classify(b"[]"), Frame::Batch(v) if v.is_empty()));
    }
}
