//! The integration tests of `toolgate-policy`, as one test binary: each module was its own
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

mod support;

mod ask_fields;
mod beneath_props;
mod contracts_constraints;
mod contracts_model;
mod contracts_session;
mod contracts_sink;
mod docs_policy;
mod eval_decide;
mod hidden_parts;
mod normalize_fs;
mod normalize_git;
mod normalize_http;
mod normalize_props;
mod normalize_shell;
mod null_keys;
mod packs_filesystem;
mod packs_live;
mod packs_pypi;
mod packs_recorded;
mod recursive_parts;
mod rules_props;
mod secret_shapes;
mod seed_parity;
mod shell_differential;
mod shell_files;
mod shell_files_strace;
mod sink_payload;
mod taint_index;
mod trusted_fields_text;
mod user_vouched;
