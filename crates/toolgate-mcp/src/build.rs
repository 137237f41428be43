//! Builders for the few frames the proxy writes itself.
//!
//! Each builder returns the JSON text of one message, without a trailing newline.
//! Ids are echoed byte for byte from the raw request; strings are JSON-escaped.

use serde_json::value::RawValue;

/// `{"jsonrpc":"2.0","id":<id or null>,"error":{"code":<code>,"message":<message>}}`.
pub fn error_response(id: Option<&RawValue>, code: i64, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + message.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    push_id(&mut out, id);
    out.extend_from_slice(br#","error":{"code":"#);
    out.extend_from_slice(code.to_string().as_bytes());
    out.extend_from_slice(br#","message":"#);
    push_str(&mut out, message);
    out.extend_from_slice(b"}}");
    out
}

/// A `tools/call` result that reports a failure to the model:
/// `{"jsonrpc":"2.0","id":<id>,"result":{"content":[{"type":"text","text":<text>}],"isError":true}}`.
pub fn tool_error_result(id: &RawValue, text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + text.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.get().as_bytes());
    out.extend_from_slice(br#","result":{"content":[{"type":"text","text":"#);
    push_str(&mut out, text);
    out.extend_from_slice(br#"}],"isError":true}}"#);
    out
}

/// A successful response with a raw result: `{"jsonrpc":"2.0","id":<id>,"result":<result>}`.
pub fn result_response(id: &RawValue, result: &RawValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + id.get().len() + result.get().len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.get().as_bytes());
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result.get().as_bytes());
    out.push(b'}');
    out
}

/// A request with a string id: `{"jsonrpc":"2.0","id":"<id>","method":<method>,"params":<params>}`.
pub fn request(id: &str, method: &str, params: Option<&RawValue>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + params.map_or(0, |p| p.get().len()));
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    push_str(&mut out, id);
    out.extend_from_slice(br#","method":"#);
    push_str(&mut out, method);
    if let Some(params) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(params.get().as_bytes());
    }
    out.push(b'}');
    out
}

/// A request echoing a raw id byte for byte:
/// `{"jsonrpc":"2.0","id":<id>,"method":<method>,"params":<params>}`.
pub fn request_raw_id(id: &RawValue, method: &str, params: Option<&RawValue>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + id.get().len() + params.map_or(0, |p| p.get().len()));
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.get().as_bytes());
    out.extend_from_slice(br#","method":"#);
    push_str(&mut out, method);
    if let Some(params) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(params.get().as_bytes());
    }
    out.push(b'}');
    out
}

/// A notification: `{"jsonrpc":"2.0","method":<method>,"params":<params>}`.
pub fn notification(method: &str, params: Option<&RawValue>) -> Vec<u8> {
    let mut out = Vec::with_capacity(48 + params.map_or(0, |p| p.get().len()));
    out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"#);
    push_str(&mut out, method);
    if let Some(params) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(params.get().as_bytes());
    }
    out.push(b'}');
    out
}

/// A batch reply: `[<a>,<b>,...]` from complete messages (trailing newlines are dropped).
pub fn batch<'a>(messages: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = vec![b'['];
    for (i, msg) in messages.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(msg.strip_suffix(b"\n").unwrap_or(msg));
    }
    out.push(b']');
    out
}

fn push_id(out: &mut Vec<u8>, id: Option<&RawValue>) {
    match id {
        Some(id) => out.extend_from_slice(id.get().as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    // Serialising a `&str` into a `Vec` cannot fail.
    if serde_json::to_writer(&mut *out, s).is_err() {
        out.extend_from_slice(b"\"\"");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Frame, Kind, classify};

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn request_with_raw_id_echoes_it_and_classifies() {
        let id = raw("18446744073709551615");
        let params = raw(r#"{"name":"x","arguments":{"n":1e400}}"#);
        let out = request_raw_id(&id, "tools/call", Some(&params));
        assert_eq!(
            out,
            br#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"tools/call","params":{"name":"x","arguments":{"n":1e400}}}"#
        );
        let Frame::Single(env) = classify(&out) else {
            panic!("not a single message");
        };
        assert_eq!(env.kind, Kind::Request);
    }

    #[test]
    fn error_echoes_raw_id() {
        let id = raw("18446744073709551615");
        let out = error_response(Some(&id), -32700, "parse error: `x` \"q\"\n");
        let Frame::Single(env) = classify(&out) else {
            panic!()
        };
        assert_eq!(env.kind, Kind::ErrorResponse);
        assert_eq!(env.id.unwrap().get(), "18446744073709551615");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["error"]["message"], "parse error: `x` \"q\"\n");
        assert_eq!(v["error"]["code"], -32700);

        let null = error_response(None, -32600, "m");
        assert_eq!(
            null,
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m"}}"#
        );
    }

    #[test]
    fn tool_error_and_request() {
        let out = tool_error_result(&raw(r#""x""#), "denied: `rm`");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["id"], "x");
        assert_eq!(v["result"]["isError"], true);
        assert_eq!(v["result"]["content"][0]["text"], "denied: `rm`");

        let params = raw(r#"{"message":"ok?"}"#);
        let out = request("toolgate-1", "elicitation/create", Some(&params));
        let Frame::Single(env) = classify(&out) else {
            panic!()
        };
        assert_eq!(env.kind, Kind::Request);
        assert_eq!(env.params.unwrap().get(), params.get());

        let out = result_response(&raw("3"), &raw("{}"));
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":3,"result":{}}"#);
        let out = notification("notifications/cancelled", None);
        assert_eq!(
            out,
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#
        );
        assert_eq!(batch([&b"{}\n"[..], b"[]"]), b"[{},[]]");
    }
}
