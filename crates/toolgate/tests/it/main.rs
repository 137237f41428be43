//! The integration tests of `toolgate`, as one test binary: each module was its own
//! test file (and binary) before; a binary per crate links once and lets nextest
//! select tests by module path, e.g. `-E 'test(/^<module>::/)'`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions (every module of this binary)"
)]

mod common;
mod support;

mod approvals_tty;
mod attacks;
mod audit_cli;
mod broker_e2e;
mod broker_restart;
mod broker_session;
mod cli_help;
mod client_claude_code;
mod client_codex;
mod client_copilot_cli;
mod client_gemini_cli;
mod client_opencode;
mod client_qwen_code;
mod conformance_suite;
mod demo_run;
mod doctor_in_use;
mod doctor_remote;
mod enforce_filesystem;
mod enforce_followups;
mod enforce_hidden_paths;
mod enforce_hidden_tools;
mod enforce_pins;
mod enforce_redact;
mod enforce_rmcp;
mod enforce_self_protection;
mod enforce_trusted_fields;
mod enforce_unjudged;
mod enforce_unlisted;
mod enforce_wrap;
mod everything_parity;
mod everything_ts_client;
mod faults_matrix;
mod filesystem_parity;
mod first_hour;
mod gateway_clients;
mod gateway_config;
mod gateway_embedded;
mod gateway_five_minutes;
mod gateway_ops;
mod gateway_replicas;
mod hook_coding_session;
mod hook_fail_closed;
mod hook_fixtures;
mod hook_held_asks;
mod hook_self_protection;
mod hook_sessions;
mod init_clients;
mod init_hooks;
mod init_launch;
mod init_tty;
mod load_inflight;
mod pins_cli;
mod policy_cli;
mod policy_trust;
mod readme_commands;
mod relay_bytes;
mod relay_faults;
mod remote_faults;
mod remote_oauth;
mod remote_servers;
mod report_cli;
mod serve_completions;
mod serve_mcp;
mod soak_rss;
mod tasks;
mod wrap_workspace;
