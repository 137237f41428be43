//! Paths that hide what they touch, end to end through `toolgate wrap` with the real `/proc`:
//! `/proc/self` is the wrapped server, not toolgate; a path that cannot be resolved fails
//! closed. The upstream records every line it receives: a denied call never reaches it.

use serde_json::json;

use crate::support::gate;
use gate::{Gate, is_denied, text};

/// Reads are allowed by default; `~/.ssh` is denied.
const POLICY: &str = r#"
version: 1
default: allow
packs: []
rules:
  - id: protect-secrets
    effect: deny
    operations: [fs.read, fs.write, fs.delete]
    resources: ["${home}/.ssh/**"]
tools:
  read_file:
    operation: fs.read
    path_params: [path]
"#;

#[test]
fn proc_self_links_resolve_for_the_server_process() {
    if !std::path::Path::new("/proc/self/root").exists() {
        eprintln!("skipped: no /proc on this system");
        return;
    }
    let mut g = Gate::start(POLICY, &["--approval", "none"]);
    g.init(json!({}));
    let base = g.base();
    let home = base.join("home");
    // The server runs in `<base>/work`; toolgate runs in the test's directory. Resolved for
    // toolgate, `/proc/self/cwd/..` would be the parent of the crate directory.
    let cases = [
        format!("/proc/self/root{}/.ssh/id_rsa", home.display()),
        format!("/proc/thread-self/root{}/.ssh/id_rsa", home.display()),
        "/proc/self/cwd/../home/.ssh/id_rsa".to_owned(),
        // Another process's root: unresolvable, so every deny rule treats it as matching.
        format!("/proc/1/root{}/.ssh/id_rsa", home.display()),
        "/dev/fd/0".to_owned(),
    ];
    for (n, path) in cases.iter().enumerate() {
        let id = i64::try_from(n).unwrap() + 1;
        g.call(id, "read_file", json!({ "path": path }));
        let r = g.recv_response(&json!(id));
        assert!(is_denied(&r), "{path}: {r}");
        assert!(text(&r).contains("protect-secrets"), "{path}: {r}");
    }
    // A symlink in the workspace that leads through the magic links: read for the server too.
    std::os::unix::fs::symlink("/proc/self/cwd/../home/.ssh", base.join("work/keys")).unwrap();
    std::os::unix::fs::symlink(
        format!("/proc/self/root{}/.ssh", home.display()),
        base.join("work/rootkeys"),
    )
    .unwrap();
    for (id, path) in [(20, "keys/id_rsa"), (21, "rootkeys/id_rsa")] {
        g.call(id, "read_file", json!({ "path": path }));
        let r = g.recv_response(&json!(id));
        assert!(is_denied(&r), "{path}: {r}");
    }
    // Allowed: the server's working directory itself, under `default: allow`.
    g.call(50, "read_file", json!({"path": "/proc/self/cwd/notes.txt"}));
    let r = g.recv_response(&json!(50));
    assert!(!is_denied(&r), "{r}");
    let saw = g.upstream_saw();
    assert!(saw.contains("notes.txt"), "{saw}");
    assert!(
        !saw.contains("id_rsa"),
        "the upstream saw a denied call: {saw}"
    );
    assert!(
        !saw.contains("/dev/fd"),
        "the upstream saw a denied call: {saw}"
    );
}

#[test]
fn paths_that_cannot_be_resolved_never_take_default_allow() {
    // No deny rule at all: only `default: allow` could let these through.
    let policy = "version: 1\ndefault: allow\npacks: []\ntools:\n  read_file:\n    operation: fs.read\n    path_params: [path]\n";
    let mut g = Gate::start(policy, &["--approval", "none"]);
    g.init(json!({}));
    let long = format!("/{}", "x/".repeat(2100));
    for (id, path) in [
        (1, "notes\u{0}.txt"),
        (2, long.as_str()),
        (3, "/proc/1/cwd/x"),
    ] {
        g.call(id, "read_file", json!({ "path": path }));
        let r = g.recv_response(&json!(id));
        // Asked, and with no way to ask: denied.
        assert!(is_denied(&r), "{path:?}: {r}");
        assert!(text(&r).contains("hides what it touches"), "{r}");
    }
    // A lone surrogate cannot be a path (nor a Rust string): never forwarded.
    g.peer.send(
        br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/a/\ud800"}}}"#,
    );
    let r = g.recv_response(&json!(4));
    assert!(
        is_denied(&r) || r.get("error").is_some(),
        "a lone surrogate was allowed: {r}"
    );
    let saw = g.upstream_saw();
    assert!(!saw.contains("tools/call"), "the upstream saw: {saw}");
}
