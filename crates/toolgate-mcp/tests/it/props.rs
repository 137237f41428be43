//! Property tests: classification is total, and builders round-trip ids.

use proptest::prelude::*;
use toolgate_mcp::{Frame, IdKey, Kind, RawValue, build, classify, classify_value, recover_id};

/// Arbitrary JSON text (valid), with numbers and strings that stress parsers.
fn json_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("1e400".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("-0".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| f.to_string()),
        any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
        Just(r#""\ud83d\ude00\u0000""#.to_owned()),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("jsonrpc".to_owned()),
                        Just("id".to_owned()),
                        Just("method".to_owned()),
                        Just("params".to_owned()),
                        Just("result".to_owned()),
                        Just("error".to_owned()),
                        "[a-z_]{0,6}",
                    ],
                    inner
                ),
                0..6
            )
            .prop_map(|kv| {
                let members: Vec<String> = kv
                    .into_iter()
                    .map(|(k, v)| format!("{}:{v}", serde_json::to_string(&k).unwrap()))
                    .collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

fn id_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
        Just(r#""\u0041\n""#.to_owned()),
        Just("1e400".to_owned()),
        Just("340282366920938463463374607431768211457".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn classification_is_total_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = classify(&bytes);
        let _ = recover_id(&bytes);
    }

    #[test]
    fn classification_is_total_on_json(text in json_text()) {
        match classify(text.as_bytes()) {
            Frame::ParseError(e) => prop_assert!(false, "valid json rejected: {e}: {text}"),
            Frame::Batch(items) => {
                for item in items {
                    let _ = classify_value(item);
                }
            }
            Frame::Single(env) => {
                if env.kind == Kind::Request {
                    prop_assert!(env.reply_id().is_some());
                    prop_assert!(env.method.is_some());
                }
            }
        }
    }

    #[test]
    fn requests_classify_and_replies_round_trip_the_id(id in id_text(), method in any::<String>(), msg in any::<String>()) {
        let frame = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":{},"params":{{}}}}"#,
            serde_json::to_string(&method).unwrap()
        );
        let Frame::Single(env) = classify(frame.as_bytes()) else { panic!("not single") };
        prop_assert_eq!(env.kind, Kind::Request);
        prop_assert_eq!(env.method.as_deref(), Some(method.as_str()));
        let raw = env.id.unwrap();
        prop_assert_eq!(raw.get(), id.as_str());
        let key = IdKey::from_raw(raw).unwrap();

        for reply in [
            build::error_response(Some(raw), -32600, &msg),
            build::tool_error_result(raw, &msg),
        ] {
            let Frame::Single(r) = classify(&reply) else { panic!("reply not single") };
            prop_assert!(matches!(r.kind, Kind::Response | Kind::ErrorResponse));
            prop_assert_eq!(r.id.unwrap().get(), id.as_str());
            prop_assert_eq!(IdKey::from_raw(r.id.unwrap()), Some(key.clone()));
            let needle = serde_json::to_string(&msg).unwrap();
            let reply_text = String::from_utf8(reply.clone()).unwrap();
            prop_assert!(reply_text.contains(&needle));
        }

        // The id is recoverable from any prefix that contains it whole.
        let cut = frame.find(r#","method""#).unwrap() + 1;
        let recovered = recover_id(&frame.as_bytes()[..cut]).unwrap();
        prop_assert_eq!(recovered.get(), id.as_str());
    }

    #[test]
    fn proxy_requests_round_trip(n in any::<u64>(), method in "[a-z/]{1,20}") {
        let id = format!("toolgate-{n:016x}-1");
        let params = RawValue::from_string(r#"{"a":[1e400]}"#.to_owned()).unwrap();
        let req = build::request(&id, &method, Some(&params));
        let Frame::Single(env) = classify(&req) else { panic!() };
        prop_assert_eq!(env.kind, Kind::Request);
        let key = IdKey::from_raw(env.id.unwrap()).unwrap();
        prop_assert_eq!(key.as_str(), Some(id.as_str()));
        prop_assert_eq!(env.params.unwrap().get(), params.get());
    }
}

/// A method string near `tools/call`: its letters in any case, with whitespace, control
/// and invisible characters scattered in, or other characters.
fn near_method() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => prop::sample::select(vec!['t', 'o', 'l', 's', '/', 'c', 'a', 'T', 'O', 'L', 'S', 'C', 'A', 'ſ']),
        1 => prop::sample::select(vec![' ', '\t', '\n', '\r', '\u{0}', '\u{7f}', '\u{a0}', '\u{200b}', '\u{feff}', '\u{2028}', 'x', 'é']),
    ];
    prop_oneof![
        Just("tools/call".to_owned()),
        prop::collection::vec(piece, 0..16).prop_map(|v| v.into_iter().collect()),
        "\\PC{0,12}",
    ]
}

/// How a lenient dispatcher may read a method: Python's `strip().lower()`, Go's
/// `strings.ToLower(strings.TrimSpace(m))`, whitespace removed everywhere, or upper-cased.
fn lenient_readings(m: &str) -> Vec<String> {
    let trimmed = m.trim_matches(|c: char| c.is_whitespace() || c.is_control());
    let squeezed: String = m
        .chars()
        .filter(|c| !c.is_whitespace() && !c.is_control())
        .collect();
    vec![
        trimmed.to_lowercase(),
        squeezed.to_lowercase(),
        trimmed.to_uppercase().to_lowercase(),
        squeezed.to_uppercase().to_lowercase(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Whatever a lenient server reads as `tools/call` is `tools/call` exactly, or a method
    /// toolgate recognises as resembling it (and refuses).
    #[test]
    fn a_lenient_reading_of_tools_call_is_caught(m in near_method()) {
        let lenient = lenient_readings(&m).iter().any(|r| r == "tools/call");
        if lenient {
            prop_assert!(
                m == "tools/call" || toolgate_mcp::spelling::resembles(&m, "tools/call"),
                "{m:?} reads as tools/call but is not caught"
            );
        }
        // And nothing is both exact and resembling.
        prop_assert!(!(m == "tools/call" && toolgate_mcp::spelling::resembles(&m, "tools/call")));
    }
}
