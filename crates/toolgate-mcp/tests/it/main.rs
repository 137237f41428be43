//! The integration tests of `toolgate-mcp`, as one test binary: each module was its own
//! test file (and binary) before; a binary per crate links once and lets nextest
//! select tests by module path, e.g. `-E 'test(/^<module>::/)'`.
//!
//! proptest keeps the seeds of past failures in `tests/proptest-regressions/<module>.txt`:
//! with `main.rs` in `it/`, it treats `it/` as a source root, as it treats `src/`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions (every module of this binary)"
)]

mod props;
