//! Taint tokeniser: total; canonical destinations are idempotent (a token stands for itself); untrusted output never
//! vouches; the index stays within its bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_policy::{
    OutputTrust, Provenance, TaintIndex, TaintLimits, TaintSource, canonical_destination,
    tokenize_destinations,
};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for token in canonical_destination(text) {
        let again = canonical_destination(&token);
        assert!(again.contains(&token), "{text:?}: {token:?} -> {again:?}");
    }
    let mut idx = TaintIndex::new(TaintLimits {
        max_tokens: 16,
        ..TaintLimits::default()
    });
    let source = TaintSource {
        server: None,
        tool: "fuzz".to_owned(),
        seq: 1,
    };
    idx.record_text(text, OutputTrust::Untrusted, source);
    assert!(idx.len() <= 16);
    for token in tokenize_destinations(text) {
        assert!(
            !matches!(idx.classify(&token), Provenance::Vouched(_)),
            "{text:?}"
        );
    }
    let _ = idx.classify(text);
});
