//! URL normaliser: total and idempotent; hosts are lower case with no trailing dot.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_policy::normalize_url;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let (method, url) = raw.split_once(' ').unwrap_or(("", raw));
    if let Ok(net) = normalize_url(url, method) {
        assert!(!net.host.is_empty());
        assert!(!net.host.ends_with('.'), "{raw:?} -> {net:?}");
        assert_eq!(net.host, net.host.to_ascii_lowercase());
        let again = normalize_url(&net.url, &net.method).expect("a normalised url parses again");
        assert_eq!(again, net, "{raw:?}");
    }
});
