//! Fuzz the strict policy loader: any input either loads or yields located diagnostics,
//! never a panic; a policy that loads also compiles and renders its warnings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_policy::{Engine, Vars, load};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match load(text, "fuzz.yaml") {
        Ok(loaded) => {
            let _ = loaded.warnings.render_plain();
            let _ = Engine::new(loaded.policy, Vars::placeholder());
        }
        Err(diags) => {
            assert!(diags.has_errors());
            let _ = diags.render_plain();
        }
    }
});
