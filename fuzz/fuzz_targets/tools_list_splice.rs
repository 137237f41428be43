//! The `tools/list` splice is total and preserves the JSON value: on any bytes it returns
//! nothing to change, a spliced frame or a reason (never a panic); a spliced frame only
//! lost bytes, reads as the original value with exactly the removed tools filtered out,
//! classifies like the original, and splicing it again removes nothing (idempotence).
//!
//! Input: one selector byte (which names the predicate removes), then the frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolgate_mcp::splice::splice_tools_list;
use toolgate_mcp::{Frame, classify};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, frame)) = data.split_first() else {
        return;
    };
    // A deterministic predicate over the name: removes about half of the names.
    let gone = |name: &str| {
        name.bytes()
            .fold(selector, |acc, b| acc.wrapping_mul(31).wrapping_add(b))
            & 1
            == 1
    };
    let outcome = splice_tools_list(frame, |name, _| gone(name));

    // Keep-all never produces a new frame, and fails exactly when the real predicate does
    // (the frame is read before any tool is offered).
    let keep_all = splice_tools_list(frame, |_, _| false);
    assert_eq!(keep_all.is_err(), outcome.is_err());
    assert!(matches!(keep_all, Ok(None) | Err(_)));

    let original: Option<Value> = serde_json::from_slice(frame).ok();
    match outcome {
        Err(e) => assert!(!e.reason().is_empty()),
        Ok(None) => {
            // Nothing removed: no listed tool matched the predicate.
            if let Some(v) = &original {
                assert_eq!(&filtered(v.clone(), &gone), v);
            }
        }
        Ok(Some(spliced)) => {
            assert!(!spliced.removed.is_empty());
            assert!(spliced.removed.iter().all(|n| gone(n)));
            assert!(spliced.frame.len() < frame.len());
            // Only bytes were cut: the output is a subsequence of the input.
            let mut rest = frame.iter();
            assert!(spliced.frame.iter().all(|b| rest.any(|c| c == b)));
            // The JSON value is preserved, minus the removed tools.
            if let Some(v) = original {
                let got: Value =
                    serde_json::from_slice(&spliced.frame).expect("spliced frame is not json");
                assert_eq!(got, filtered(v, &gone));
            }
            // The envelope reads the same.
            match (classify(frame), classify(&spliced.frame)) {
                (Frame::Single(a), Frame::Single(b)) => {
                    assert_eq!(a.kind, b.kind);
                    assert_eq!(a.id.map(|i| i.get()), b.id.map(|i| i.get()));
                    assert_eq!(a.method, b.method);
                }
                (Frame::ParseError(_), Frame::ParseError(_)) => {}
                (a, b) => panic!("classification changed: {a:?} -> {b:?}"),
            }
            // Idempotent: nothing is left to remove.
            let again = splice_tools_list(&spliced.frame, |name, _| gone(name));
            assert!(matches!(again, Ok(None)), "{again:?}");
        }
    }
});

/// The value with every `result.tools` element that is an object with a string `name` the
/// predicate removes filtered out.
fn filtered(mut v: Value, gone: &dyn Fn(&str) -> bool) -> Value {
    if let Some(tools) = v
        .get_mut("result")
        .and_then(|r| r.get_mut("tools"))
        .and_then(Value::as_array_mut)
    {
        tools.retain(|t| !t.get("name").and_then(Value::as_str).is_some_and(gone));
    }
    v
}
