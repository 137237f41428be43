//! Shell scanner: total, and a simple verdict is exact: quoting its argv back and scanning
//! again gives the same argv; a string with an operator and no quoting at all is never simple.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_policy::shell::{Scan, look_through, scan};

fn single_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    match scan(line) {
        Scan::Simple(argv) => {
            assert!(!argv.is_empty(), "simple with no words: {line:?}");
            let requoted = argv
                .iter()
                .map(|w| single_quote(w))
                .collect::<Vec<_>>()
                .join(" ");
            assert_eq!(scan(&requoted), Scan::Simple(argv.clone()), "{line:?}");
            let unquoted = !line.contains(['\'', '"', '\\']);
            let operator = line.contains([
                ';', '&', '|', '<', '>', '(', ')', '`', '\n', '$', '*', '?', '[',
            ]);
            assert!(
                !(unquoted && operator),
                "unquoted operator called simple: {line:?}"
            );
            let _ = look_through(&argv);
        }
        Scan::Compound { segments } => {
            for seg in segments {
                let _ = look_through(&seg);
            }
        }
        Scan::Invalid => {}
    }
});
