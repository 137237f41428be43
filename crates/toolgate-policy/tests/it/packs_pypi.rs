//! The git and fetch packs against the real tools/list of the PyPI servers they describe,
//! recorded as fixtures (see `tests/packs_fixtures/capture_tools.py` for the exact command and
//! versions). These run without Python; `packs_live.rs` runs the same servers, pinned in
//! `tests/requirements.txt` and installed into `tests/.venv` by `scripts/test`, and asserts
//! that their live tools/list still equals these fixtures.

use crate::support::packs_check as check;

use check::{check_pack_against, fixture};
use serde_json::{Value, json};

#[test]
fn git_pack_matches_mcp_server_git() {
    let f = fixture("mcp-server-git-2026.10.19.tools.json");
    assert_eq!(f["server"]["version"], "2026.10.19");
    check_pack_against("git", "2026.10.19", f["tools"].as_array().unwrap(), &[]);
}

#[test]
fn fetch_pack_matches_mcp_server_fetch() {
    let f = fixture("mcp-server-fetch-2026.10.24.tools.json");
    assert_eq!(f["server"]["version"], "2026.10.24");
    check_pack_against("fetch", "2026.10.24", f["tools"].as_array().unwrap(), &[]);
}

#[test]
fn checker_catches_drift() {
    // A pack naming an argument the server does not have must fail the check.
    let tools: Vec<Value> =
        vec![json!({"name": "fetch", "inputSchema": {"properties": {"uri": {}}}})];
    let r = std::panic::catch_unwind(|| check_pack_against("fetch", "2026.10.24", &tools, &[]));
    assert!(r.is_err());
    // A new server tool without an entry must fail.
    let tools: Vec<Value> = vec![
        json!({"name": "fetch", "inputSchema": {"properties": {"url": {}}}}),
        json!({"name": "fetch_many", "inputSchema": {"properties": {}}}),
    ];
    let r = std::panic::catch_unwind(|| check_pack_against("fetch", "2026.10.24", &tools, &[]));
    assert!(r.is_err());
    // A pack tool the server lacks must fail.
    let r = std::panic::catch_unwind(|| check_pack_against("fetch", "2026.10.24", &[], &[]));
    assert!(r.is_err());
}
