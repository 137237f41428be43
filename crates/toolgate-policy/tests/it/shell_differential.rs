//! The shell scanner against bash itself (see `support/shell_diff.rs`): when toolgate
//! reports exact parts, every argv bash ran is one of them; every executable bash reached is
//! one toolgate reports, unless the line hides what it runs. Fixed seed, bounded case count;
//! the `shell_differential` fuzz target runs the same property without bounds.

use crate::support::shell_diff;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use shell_diff::{Harness, command_line, read};

#[test]
fn scanner_agrees_with_bash() {
    let Some(h) = Harness::new() else {
        eprintln!("skipped: bash or timeout not found");
        return;
    };
    // `SHELL_DIFF_CASES` runs more lines by hand; the suite runs 300 (a few seconds).
    let cases = std::env::var("SHELL_DIFF_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let mut runner = TestRunner::new(Config {
        cases,
        rng_seed: RngSeed::Fixed(0x7001_6a7e),
        failure_persistence: None,
        ..Config::default()
    });
    let lines = proptest::collection::vec(any::<u8>(), 0..96).prop_map(|b| command_line(&b));
    let result = runner.run(&lines, |line| h.check(&line).map_err(TestCaseError::fail));
    if let Err(e) = result {
        panic!("{e}");
    }
    // The grammar must keep producing lines that are compared, not only skipped ones.
    assert!(
        h.compared() * 10 >= u64::from(cases),
        "only {} of {cases} lines were compared",
        h.compared()
    );
}

#[test]
fn known_lines_agree_with_bash() {
    let Some(h) = Harness::new() else {
        eprintln!("skipped: bash or timeout not found");
        return;
    };
    // Lines the issue names, and forms the grammar covers, checked by hand once.
    for (line, exact) in [
        (r"$'\x72\x6d' -rf /", true),
        (r"$'\162\155' -rf /", true),
        (r"r$'m' 'a b' c\ d", true),
        (r"ls $'\u0041\U00000042\cA'", true),
        (r#"cat "a\$b" 'c"d' e\'f"#, true),
        ("git log HEAD~1 -- x=~", false),
        ("sudo rm -rf /", false),
        ("bash -c 'rm -rf /'", false),
        (r#"bash -c "$(echo cm0gLXJmIC8= | base64 -d)""#, false),
        ("A=1 ls # rm -rf /", false),
        ("ls && rm x || cat y; wc | grep z", true),
        ("ls 2>&1 | grep z > out", true),
        ("ls & rm x", false),
        ("( ls ); { rm x; }", false),
    ] {
        h.check(line).unwrap();
        let reading = read(line);
        assert_eq!(!reading.exact.is_empty(), exact, "{line}");
        if exact {
            // bash reached a stub, so the comparison above was made.
            assert!(!h.run(line).is_empty(), "{line}");
        }
    }
    // Nothing real ran: the stubs directory holds only stubs.
    assert!(h.stubs().join("rm").exists());
}
