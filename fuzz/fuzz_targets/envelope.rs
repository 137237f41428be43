//! The frame classifier is total: any bytes classify without panicking, and every
//! classified part is consistent with the bytes it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_mcp::{
    Frame, IdKey, Kind, build, classify, classify_value, recover_id, spelling, views,
};

fuzz_target!(|data: &[u8]| {
    let _ = recover_id(data);
    match classify(data) {
        Frame::ParseError(_) => {}
        Frame::Batch(items) => {
            for item in items {
                check(&classify_value(item));
            }
        }
        Frame::Single(env) => check(&env),
    }
});

fn check(env: &toolgate_mcp::Envelope<'_>) {
    if let Some(id) = env.id {
        let _ = IdKey::from_raw(id);
    }
    if let Some(method) = env.method.as_deref() {
        // A method never both is and resembles a name.
        for name in ["tools/call", "resources/read", "prompts/get", "tools/list"] {
            assert!(!(method == name && spelling::resembles(method, name)));
        }
    }
    if let Some(params) = env.params {
        let _ = spelling::ambiguous_member(params, &["name", "arguments", "uri"]);
        let _ = views::ToolsCallParams::parse(params);
        let _ = views::InitializeParams::parse(params);
        let _ = views::RequestMeta::from_params(params);
        let _ = views::CancelledParams::parse(params);
    }
    if let Some(result) = env.result {
        let _ = views::ToolsListResult::parse(result);
        let _ = views::result_type(result);
    }
    if matches!(env.kind, Kind::Request) {
        // A request always has an id a reply can echo, and the reply classifies back.
        let id = env.reply_id().expect("request without a usable id");
        let reply = build::error_response(Some(id), -32600, "x");
        match classify(&reply) {
            Frame::Single(r) => {
                assert_eq!(r.kind, Kind::ErrorResponse);
                assert_eq!(r.id.map(|i| i.get()), Some(id.get()));
            }
            _ => panic!("reply does not classify"),
        }
    }
}
