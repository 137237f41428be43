//! Path normaliser: lexical normalisation is idempotent; normalising a filesystem call with any
//! path is total and yields only absolute, normalised resources (or an unknown part).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use toolgate_policy::{MapFs, NormalizeContext, ToolCall, lexical_normalize, normalize};

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(once) = lexical_normalize(path) {
        assert_eq!(lexical_normalize(&once).as_deref(), Some(once.as_str()));
    }
    let fs = MapFs::new()
        .symlink("/w/link", "/home/u/.ssh")
        .symlink("/w/rel", "../x")
        .symlink("/w/loop", "/w/loop");
    let ctx = NormalizeContext {
        workspace: "/w",
        home: "/home/u",
        fs: &fs,
    };
    let args = json!({ "path": path, "paths": [path, "a"] });
    for tool in ["read_file", "read_multiple_files"] {
        let call = ToolCall {
            server: None,
            tool,
            arguments: &args,
            definition: None,
        };
        let action = normalize(&call, None, &ctx);
        assert!(!action.parts.is_empty());
        for part in &action.parts {
            for r in &part.resources {
                assert_eq!(
                    lexical_normalize(r).as_deref(),
                    Some(r.as_str()),
                    "{path:?}"
                );
            }
        }
    }
});
