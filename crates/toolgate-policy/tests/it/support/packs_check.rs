//! Shared by the pack tests: a pack against a server's real tools/list.
#![allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "test code: a fixture that cannot be read or has the wrong shape fails the test"
)]

use serde_json::Value;
use toolgate_policy::contracts::ToolContract;
use toolgate_policy::contracts::packs::{Pack, load_pack};

/// The slack pack's entries for servers other than server-slack (bare tool names).
pub const SLACK_GENERIC: &[&str] = &[
    "post_message",
    "reply_to_thread",
    "send_direct_message",
    "list_channels",
    "get_users",
    "get_channel_history",
];

/// The github pack's entries for github/github-mcp-server only (the signed-in user).
pub const GITHUB_GENERIC: &[&str] = &["get_me"];

/// The gdrive pack's entries for newer Drive servers (server-gdrive has only `search`).
pub const GDRIVE_GENERIC: &[&str] = &[
    "gdrive_search",
    "gdrive_read_file",
    "share_file",
    "gdrive_share_file",
    "list_permissions",
    "gdrive_list_permissions",
    "delete_file",
];

/// Every argument name an entry refers to.
pub fn declared_params(c: &ToolContract) -> Vec<String> {
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

/// Checks a pack against a server's tools/list `tools` array: the pack records this server
/// version; every server tool has an entry or is listed as `uncovered`; every pack entry
/// except `generic` ones (tool names of other servers) exists in the server; every argument
/// an entry names exists in the tool's inputSchema.
pub fn check_pack_against(
    pack_name: &str,
    server_version: &str,
    tools: &[Value],
    generic: &[&str],
) {
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
        let Some(def) = tools.iter().find(|t| t["name"] == tool.as_str()) else {
            assert!(
                generic.contains(&tool.as_str()),
                "pack `{pack_name}` has `{tool}`, the server does not"
            );
            continue;
        };
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

/// A recorded tools/list fixture.
pub fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/packs_fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}
