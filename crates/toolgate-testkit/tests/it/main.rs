//! The integration tests of `toolgate-testkit`, as one test binary: each module was its own
//! test file (and binary) before; a binary per crate links once and lets nextest
//! select tests by module path, e.g. `-E 'test(/^<module>::/)'`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions (every module of this binary)"
)]

mod http_upstream;
