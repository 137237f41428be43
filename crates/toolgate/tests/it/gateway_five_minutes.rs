//! The five-minute start of docs/gateway.md, as a new user runs it: its set-up block and its
//! curl session, taken from the page, run by `bash` in a new directory against a gateway
//! started from the configuration they wrote, with the real filesystem server; what they
//! print is what the page shows.

use std::path::Path;
use std::process::{Command, Stdio};

use toolgate_testkit::gateway::GatewayProcess;

use crate::common;

/// The fenced block after `<!-- five-minute: NAME -->` in docs/gateway.md.
fn block(page: &str, name: &str) -> String {
    let marker = format!("<!-- five-minute: {name} -->\n");
    let at = page
        .find(&marker)
        .unwrap_or_else(|| panic!("docs/gateway.md has no `{marker}`"));
    let rest = &page[at + marker.len()..];
    let body = rest.split_once('\n').expect("a fence line").1;
    body.split_once("\n```\n")
        .expect("a closing fence")
        .0
        .to_owned()
}

/// Runs `script` with bash in `dir` (fails on the first error), with `path` as `PATH`.
fn bash(script: &str, dir: &Path, path: &str) -> String {
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}\nfailed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_five_minute_gateway_runs_as_the_page_shows() {
    if common::node_and("@modelcontextprotocol/server-filesystem/dist/index.js").is_none() {
        return;
    }
    let page = std::fs::read_to_string(common::repo_root().join("docs/gateway.md")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    // `toolgate` and `mcp-server-filesystem` on PATH, as the page asks.
    let path = std::env::join_paths(
        [
            common::toolgate_bin().parent().unwrap().to_path_buf(),
            common::node_modules().join(".bin"),
        ]
        .into_iter()
        .chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )
    .unwrap();
    let path = path.to_str().unwrap();
    // Any free port instead of 8080, so that tests run side by side.
    let setup = block(&page, "setup").replace("listen: 127.0.0.1:8080", "listen: 127.0.0.1:0");
    let printed = bash(&setup, &dir, path);
    assert_eq!(printed.trim_end(), block(&page, "setup output"));
    let gw = GatewayProcess::start(
        &common::toolgate_bin(),
        &dir.join("gateway.yaml"),
        &[("PATH", path)],
    );
    let port = gw.addr.rsplit(':').next().unwrap();
    let session = block(&page, "session").replace("127.0.0.1:8080", &format!("127.0.0.1:{port}"));
    let printed = bash(&session, &dir, path).replace(dir.to_str().unwrap(), "/home/you/gw");
    assert_eq!(printed.trim_end(), block(&page, "session output"));
}
