//! The git and fetch packs against the real tools/list of the PyPI servers they describe,
//! recorded as fixtures (running Python servers in CI is impractical; see
//! `tests/packs_fixtures/capture_tools.py` for the exact command and versions).
//!
//! Every server tool has a pack entry or is listed as `uncovered`; every pack tool exists;
//! every argument a pack entry names exists in that tool's inputSchema.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use serde_json::Value;
use toolgate_policy::contracts::ToolContract;
use toolgate_policy::contracts::packs::{Pack, load_pack};

/// Every argument name an entry refers to.
fn declared_params(c: &ToolContract) -> Vec<String> {
    let mut out = Vec::new();
    for l in [&c.sink_params, &c.path_params, &c.url_params]
        .into_iter()
        .flatten()
    {
        out.extend(l.iter().cloned());
    }
    for p in [
        &c.command_param,
        &c.args_param,
        &c.cwd_param,
        &c.method_param,
    ]
    .into_iter()
    .flatten()
    {
        out.push(p.clone());
    }
    out.extend(c.arg_patterns.iter().flat_map(|m| m.keys().cloned()));
    out.extend(c.arg_values.iter().flat_map(|m| m.keys().cloned()));
    out.extend(c.param_operations.iter().flat_map(|m| m.keys().cloned()));
    out
}

/// Checks a pack against a server's tools/list `tools` array.
pub fn check_pack_against(pack_name: &str, server_version: &str, tools: &[Value]) {
    let pack: Pack = load_pack(pack_name).unwrap();
    assert!(
        pack.servers
            .iter()
            .any(|s| s.ends_with(&format!("@{server_version}"))),
        "pack `{pack_name}` records {:?}, the server is {server_version}",
        pack.servers
    );
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for name in &names {
        assert!(
            pack.tools.contains_key(*name) || pack.uncovered.iter().any(|u| u == name),
            "server tool `{name}` has no entry in pack `{pack_name}` and is not listed as uncovered"
        );
    }
    for (tool, entry) in &pack.tools {
        let def = tools
            .iter()
            .find(|t| t["name"] == tool.as_str())
            .unwrap_or_else(|| panic!("pack `{pack_name}` has `{tool}`, the server does not"));
        let props = def["inputSchema"]["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for p in declared_params(entry) {
            assert!(
                props.contains_key(&p),
                "`{tool}` has no argument `{p}` (pack `{pack_name}`); it has {:?}",
                props.keys().collect::<Vec<_>>()
            );
        }
    }
}

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/packs_fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn git_pack_matches_mcp_server_git() {
    let f = fixture("mcp-server-git-2026.10.19.tools.json");
    check_pack_against("git", "2026.10.19", f["tools"].as_array().unwrap());
}

#[test]
fn fetch_pack_matches_mcp_server_fetch() {
    let f = fixture("mcp-server-fetch-2026.10.24.tools.json");
    check_pack_against("fetch", "2026.10.24", f["tools"].as_array().unwrap());
}

#[test]
fn checker_catches_drift() {
    // A pack naming an argument the server does not have must fail the check.
    let tools: Vec<Value> =
        vec![serde_json::json!({"name": "fetch", "inputSchema": {"properties": {"uri": {}}}})];
    let r = std::panic::catch_unwind(|| check_pack_against("fetch", "2026.10.24", &tools));
    assert!(r.is_err());
    let tools: Vec<Value> = vec![
        serde_json::json!({"name": "fetch", "inputSchema": {"properties": {"url": {}}}}),
        serde_json::json!({"name": "fetch_many", "inputSchema": {"properties": {}}}),
    ];
    let r = std::panic::catch_unwind(|| check_pack_against("fetch", "2026.10.24", &tools));
    assert!(r.is_err(), "a new server tool without entry must fail");
}
