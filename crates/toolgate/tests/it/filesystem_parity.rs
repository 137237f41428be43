//! Parity with the real `@modelcontextprotocol/server-filesystem` over a temp dir, driven by
//! rmcp: list / read / write / edit / move / search through `toolgate wrap` must equal the
//! same operations against the server directly — in what the client observed and in the
//! files left on disk.
//!
//! The two runs use two identical temp dirs; the dir path is replaced by `<root>` before
//! comparing. The client declares no roots, so the server uses its command-line directory.
//!
//! Needs `npm ci --prefix tests` (run by `scripts/test`).

use crate::common;

use std::path::{Path, PathBuf};

use common::{
    ClientAnswers, Route, ServerCmd, Session, assert_same_transcript, call, result_of, text_of,
};
use serde_json::{Value, json};

fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("a.txt"), "alpha\nbeta\ngamma\n").unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(
        root.join("sub").join("b.md"),
        "# Title\n\nsome *markdown* text\n",
    )
    .unwrap();
    std::fs::write(root.join("sub").join("ünï côdé 日本.txt"), "unicode name\n").unwrap();
    std::fs::write(root.join("lines.txt"), "one\ntwo\nthree\nfour\nfive\n").unwrap();
    dir
}

/// Every file under `root` (relative path → contents), sorted.
fn snapshot(root: &Path) -> Vec<(String, String)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if path.is_dir() {
                out.push((format!("{rel}/"), String::new()));
                walk(root, &path, out);
            } else {
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

fn no_roots() -> ClientAnswers {
    ClientAnswers {
        capabilities: json!({}),
        ..ClientAnswers::default()
    }
}

async fn scenario(route: Route, server: ServerCmd, root: PathBuf) -> anyhow::Result<Vec<Value>> {
    let mut s = Session::start(route, &server, no_roots()).await?;
    let peer = s.client.peer().clone();
    let p = |rel: &str| root.join(rel).to_string_lossy().into_owned();
    s.step("tools/list", peer.list_tools(None)).await?;
    s.step(
        "list_allowed_directories",
        peer.call_tool(call("list_allowed_directories", json!({}))),
    )
    .await?;
    s.step(
        "list_directory",
        peer.call_tool(call("list_directory", json!({ "path": p("") }))),
    )
    .await?;
    s.step(
        "read_text_file",
        peer.call_tool(call("read_text_file", json!({ "path": p("a.txt") }))),
    )
    .await?;
    s.step(
        "read_text_file head",
        peer.call_tool(call(
            "read_text_file",
            json!({ "path": p("lines.txt"), "head": 2 }),
        )),
    )
    .await?;
    s.step(
        "read_multiple_files",
        peer.call_tool(call(
            "read_multiple_files",
            json!({ "paths": [p("a.txt"), p("sub/b.md"), p("sub/ünï côdé 日本.txt")] }),
        )),
    )
    .await?;
    s.step(
        "write_file",
        peer.call_tool(call(
            "write_file",
            json!({ "path": p("new.txt"), "content": "written through MCP\n✓ ünïcode\n" }),
        )),
    )
    .await?;
    s.step(
        "edit_file dry run",
        peer.call_tool(call(
            "edit_file",
            json!({ "path": p("a.txt"), "edits": [{ "oldText": "beta", "newText": "BETA" }], "dryRun": true }),
        )),
    )
    .await?;
    s.step(
        "edit_file",
        peer.call_tool(call(
            "edit_file",
            json!({ "path": p("a.txt"), "edits": [{ "oldText": "beta", "newText": "BETA" }] }),
        )),
    )
    .await?;
    s.step(
        "read after edit",
        peer.call_tool(call("read_text_file", json!({ "path": p("a.txt") }))),
    )
    .await?;
    s.step(
        "create_directory",
        peer.call_tool(call("create_directory", json!({ "path": p("made/deep") }))),
    )
    .await?;
    s.step(
        "move_file",
        peer.call_tool(call(
            "move_file",
            json!({ "source": p("new.txt"), "destination": p("made/deep/moved.txt") }),
        )),
    )
    .await?;
    s.step(
        "search_files",
        peer.call_tool(call(
            "search_files",
            json!({ "path": p(""), "pattern": "**/*.txt" }),
        )),
    )
    .await?;
    s.step(
        "read outside the allowed dir",
        peer.call_tool(call("read_text_file", json!({ "path": "/etc/hostname" }))),
    )
    .await?;
    s.step(
        "path traversal",
        peer.call_tool(call(
            "read_text_file",
            json!({ "path": p("sub/../../outside.txt") }),
        )),
    )
    .await?;
    let transcript = s.finish().await?;
    // The two runs use different temp dirs: make the transcript independent of the path.
    let text = serde_json::to_string(&transcript)?;
    let root_text = serde_json::to_string(&root.to_string_lossy())?;
    let root_text = root_text.trim_matches('"');
    Ok(serde_json::from_str(&text.replace(root_text, "<root>"))?)
}

#[tokio::test]
async fn filesystem_operations_through_toolgate_equal_direct() {
    let direct_dir = fixture();
    let wrapped_dir = fixture();
    let Some(direct_server) = common::filesystem_server(direct_dir.path()) else {
        return;
    };
    let wrapped_server = common::filesystem_server(wrapped_dir.path()).unwrap();

    let (direct, wrapped) = tokio::join!(
        scenario(
            Route::Direct,
            direct_server,
            direct_dir.path().to_path_buf()
        ),
        scenario(
            Route::Toolgate,
            wrapped_server,
            wrapped_dir.path().to_path_buf()
        ),
    );
    let direct = direct
        .unwrap_or_else(|err| panic!("the scenario failed against the server directly: {err:#}"));

    // What the direct run must show, so that equality below means something.
    let t = &direct;
    let names: Vec<&str> = result_of(t, "tools/list")["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(
        names.contains(&"edit_file") && names.contains(&"search_files"),
        "{names:?}"
    );
    assert!(text_of(result_of(t, "list_directory")).contains("[DIR] sub"));
    assert_eq!(
        text_of(result_of(t, "read_text_file")),
        "alpha\nbeta\ngamma\n"
    );
    assert_eq!(text_of(result_of(t, "read_text_file head")), "one\ntwo");
    assert!(text_of(result_of(t, "read_multiple_files")).contains("unicode name"));
    assert!(text_of(result_of(t, "edit_file dry run")).contains("+BETA"));
    assert_eq!(
        text_of(result_of(t, "read after edit")),
        "alpha\nBETA\ngamma\n"
    );
    // outputSchema tools carry structuredContent: a proxy relaying only text would break it.
    assert!(result_of(t, "read_text_file")["structuredContent"].is_object());
    assert!(text_of(result_of(t, "search_files")).contains("moved.txt"));
    assert_eq!(
        result_of(t, "read outside the allowed dir")["isError"],
        true
    );
    assert_eq!(result_of(t, "path traversal")["isError"], true);
    let disk = snapshot(direct_dir.path());
    assert!(disk.contains(&(
        "made/deep/moved.txt".to_owned(),
        "written through MCP\n✓ ünïcode\n".to_owned()
    )));

    let wrapped = wrapped.unwrap_or_else(|err| {
        panic!("the scenario failed through `toolgate wrap` (it passed directly): {err:#}")
    });
    assert_same_transcript(&direct, &wrapped);
    assert_eq!(
        disk,
        snapshot(wrapped_dir.path()),
        "the files left on disk differ"
    );
}
