//! toolgate's self-protection through `toolgate wrap` (the same enforcement path as hooks):
//! a wrapped file server cannot change the policy in use or the audit log, and a wrapped
//! shell server cannot run toolgate or signal its processes, under a policy that allows every
//! file operation and every command. A denied call never reaches the server.

use serde_json::json;

use crate::support::gate;
use gate::{Gate, is_denied, text};

const LENIENT: &str = r#"
version: 1
default: ask
packs: []
rules:
  - id: allow-files
    effect: allow
    operations: [fs.read, fs.write, fs.delete]
    resources: ["/**"]
  - id: allow-shell
    effect: allow
    operations: [shell.exec]
tools:
  write_file:
    operation: fs.write
    path_params: [path]
  run_command:
    command_param: command
"#;

#[test]
fn a_wrapped_server_cannot_switch_toolgate_off() {
    let mut g = Gate::start(LENIENT, &["--approval", "none"]);
    g.init(json!({}));
    let policy = g.base().join("policy.yaml");
    let mut id = 0;
    let mut call = |g: &mut Gate, tool: &str, args: serde_json::Value| {
        id += 1;
        g.call(id, tool, args);
        g.recv_response(&json!(id))
    };
    for path in [
        policy.to_str().unwrap().to_owned(),
        "../policy.yaml".to_owned(),
        format!("/proc/self/root{}", policy.display()),
        g.base().join("audit.jsonl").to_str().unwrap().to_owned(),
        ".mcp.json".to_owned(),
        ".claude/settings.json".to_owned(),
    ] {
        let r = call(&mut g, "write_file", json!({"path": path, "content": "x"}));
        assert!(is_denied(&r), "{path}: {r}");
        assert!(
            text(&r).contains("toolgate's self-protection"),
            "{path}: {r}"
        );
    }
    let toolgate = env!("CARGO_BIN_EXE_toolgate");
    let me = g.peer.pid();
    for command in [
        format!("{toolgate} approvals --decision allow-session --id 1"),
        "echo '{}' | toolgate-hook claude-code".to_owned(),
        format!("kill -9 {me}"),
        "pkill -f 'toolgate wrap'".to_owned(),
    ] {
        let r = call(&mut g, "run_command", json!({"command": command}));
        assert!(is_denied(&r), "{command}: {r}");
        assert!(
            text(&r).contains("toolgate's self-protection"),
            "{command}: {r}"
        );
    }
    // The benign twins reach the server.
    let r = call(
        &mut g,
        "write_file",
        json!({"path": "notes2.txt", "content": "x"}),
    );
    assert!(!is_denied(&r), "{r}");
    let r = call(&mut g, "run_command", json!({"command": "npm test"}));
    assert!(!is_denied(&r), "{r}");
    let saw = g.upstream_saw();
    assert!(saw.contains("notes2.txt"), "{saw}");
    assert!(!saw.contains("policy.yaml"), "{saw}");
    assert!(!saw.contains("kill"), "{saw}");
    assert_eq!(std::fs::read_to_string(&policy).unwrap(), LENIENT);
}
