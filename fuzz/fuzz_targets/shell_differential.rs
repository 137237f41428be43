//! The shell scanner against bash itself: the fuzzer's bytes drive the same command grammar as
//! the `shell_differential` test (`crates/toolgate-policy/tests/it/support/shell_diff.rs`); each
//! line runs in restricted bash with recording stubs (nothing real runs: see that file), and
//! every exact part toolgate reports must be the argv bash ran.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/toolgate-policy/tests/it/support/shell_diff.rs"]
#[allow(
    dead_code,
    reason = "helpers shared by several tests, not every one uses every helper"
)]
mod shell_diff;

thread_local! {
    static HARNESS: Option<shell_diff::Harness> = shell_diff::Harness::new();
}

fuzz_target!(|data: &[u8]| {
    let line = shell_diff::command_line(data);
    HARNESS.with(|h| {
        if let Some(h) = h
            && let Err(why) = h.check(&line)
        {
            panic!("{why}");
        }
    });
});
