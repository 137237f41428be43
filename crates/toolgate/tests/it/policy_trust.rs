//! Without `--policy`, the enforcing commands (`toolgate hook`, `toolgate wrap`) take the
//! `toolgate.yaml` of their working directory only as the person trusted it (`toolgate policy
//! trust`, or `policy init` that wrote it): an untrusted or changed one denies every call, and
//! the agent can neither change the file in force nor the list of trusted policies. Through
//! the real `toolgate hook`, `toolgate wrap`, broker and `toolgate policy`.

use crate::support::hooks as support;

use serde_json::{Value, json};
use support::{World, claude};
use toolgate_testkit::Peer;

/// Denies reading `notes.txt` of the workspace (which the starter allows) and allows the
/// rest: a deny naming `no-notes` shows that this policy decided.
const PROJECT_POLICY: &str = "version: 1\ndefault: allow\nrules:\n  - id: no-notes\n    effect: deny\n    operations: [fs.read]\n    resources: [\"${workspace}/notes.txt\"]\n";

fn in_project(w: &World, args: &[&str]) -> std::process::Command {
    let mut cmd = w.cmd(args);
    cmd.current_dir(w.project()).env_remove("XDG_DATA_HOME");
    cmd
}

fn hook(w: &World, input: &Value) -> support::Run {
    let cmd = in_project(w, &["hook", "claude-code", "--session", "trust-1"]);
    w.run(cmd, input.to_string().as_bytes())
}

fn read(w: &World, path: &str) -> Value {
    claude(
        &w.project(),
        "PreToolUse",
        json!({"tool_name": "Read", "tool_input": {"file_path": path}, "tool_use_id": "t"}),
    )
}

fn denied(r: &support::Run) -> bool {
    r.code == Some(2)
}

fn trust(w: &World) -> support::Run {
    w.run(in_project(w, &["policy", "trust"]), b"")
}

#[test]
fn a_hook_takes_the_policy_of_its_directory_only_as_trusted() {
    let w = World::new();
    let project = w.project();
    std::fs::write(project.join("notes.txt"), "notes\n").unwrap();
    std::fs::write(project.join("README.md"), "readme\n").unwrap();
    // No `toolgate.yaml`: the starter decides (it allows reading the workspace).
    let r = hook(&w, &read(&w, "notes.txt"));
    assert!(!denied(&r), "{r:?}");
    // One appears (a cloned repository, the agent): every call is denied, with the fix.
    let file = project.join("toolgate.yaml");
    std::fs::write(&file, PROJECT_POLICY).unwrap();
    for path in ["notes.txt", "README.md"] {
        let r = hook(&w, &read(&w, path));
        assert!(denied(&r), "{path}: {r:?}");
        assert!(
            r.stderr.contains("is not trusted as it is")
                && r.stderr.contains("toolgate policy trust"),
            "{}",
            r.stderr
        );
    }
    // The person trusts it: it decides.
    let t = trust(&w);
    assert_eq!(t.code, Some(0), "{t:?}");
    assert!(t.stdout.contains("trusted `"), "{}", t.stdout);
    let r = hook(&w, &read(&w, "notes.txt"));
    assert!(denied(&r) && r.stderr.contains("no-notes"), "{r:?}");
    let r = hook(&w, &read(&w, "README.md"));
    assert!(!denied(&r), "{r:?}");
    // The agent can change neither the policy in force nor the list of trusted ones.
    let list = w
        .base()
        .join("home/.local/share/toolgate/trusted-policies.json");
    assert!(list.is_file());
    for (tool, input) in [
        (
            "Edit",
            json!({"file_path": "toolgate.yaml", "old_string": "deny", "new_string": "allow"}),
        ),
        ("Write", json!({"file_path": list, "content": "{}"})),
        (
            "Bash",
            json!({"command": format!("echo '{{}}' > {}", list.display())}),
        ),
    ] {
        let event = claude(
            &project,
            "PreToolUse",
            json!({"tool_name": tool, "tool_input": input, "tool_use_id": "t"}),
        );
        let r = hook(&w, &event);
        assert!(
            denied(&r) && r.stderr.contains("toolgate's self-protection"),
            "{tool}: {r:?}"
        );
    }
    // Under another policy (hooks set up with --policy), a trusted policy file is still
    // toolgate's own: what a `wrap` started here without --policy would take.
    let mut cmd = in_project(&w, &["hook", "claude-code", "--session", "trust-1"]);
    cmd.arg("--policy").arg(w.policy());
    let edit = claude(
        &project,
        "PreToolUse",
        json!({"tool_name": "Write", "tool_input": {"file_path": "toolgate.yaml", "content": "version: 1\ndefault: allow\n"}, "tool_use_id": "t"}),
    );
    let r = w.run(cmd, edit.to_string().as_bytes());
    assert!(
        denied(&r) && r.stderr.contains("toolgate's self-protection"),
        "{r:?}"
    );
    // Changed behind toolgate's back: not trusted as it is any more.
    std::fs::write(
        &file,
        PROJECT_POLICY.replace("effect: deny", "effect: allow"),
    )
    .unwrap();
    let r = hook(&w, &read(&w, "notes.txt"));
    assert!(
        denied(&r) && r.stderr.contains("is not trusted as it is"),
        "{r:?}"
    );
    // `policy check` says so; `doctor` too.
    let c = w.run(in_project(&w, &["policy", "check"]), b"");
    assert_eq!(c.code, Some(0), "{c:?}");
    assert!(c.stderr.contains("is not trusted as it is"), "{}", c.stderr);
    let d = w.run(in_project(&w, &["doctor", "--no-remote"]), b"");
    assert!(
        d.stdout
            .contains("`./toolgate.yaml` is not trusted as it is"),
        "{}",
        d.stdout
    );
    // Deleted behind toolgate's back after it was trusted: denied, not the starter, until
    // the person forgets it.
    std::fs::write(&file, PROJECT_POLICY).unwrap();
    assert_eq!(trust(&w).code, Some(0));
    std::fs::remove_file(&file).unwrap();
    let r = hook(&w, &read(&w, "README.md"));
    assert!(
        denied(&r) && r.stderr.contains("you trusted is gone"),
        "{r:?}"
    );
    let f = w.run(in_project(&w, &["policy", "trust", "--forget"]), b"");
    assert!(f.stdout.contains("forgot `"), "{f:?}");
    let r = hook(&w, &read(&w, "notes.txt"));
    assert!(!denied(&r), "the starter again: {r:?}");
    // A policy that does not load is not trusted.
    std::fs::write(&file, "version: 1\nrules: [\n").unwrap();
    let t = trust(&w);
    assert_eq!(t.code, Some(1), "{t:?}");
    assert!(
        t.stderr.contains("is not trusted: it does not load"),
        "{}",
        t.stderr
    );
}

#[test]
fn policy_init_trusts_the_starter_it_wrote() {
    let w = World::new();
    let i = w.run(in_project(&w, &["policy", "init"]), b"");
    assert_eq!(i.code, Some(0), "{i:?}");
    assert!(
        i.stdout.contains("run `toolgate policy trust`"),
        "{}",
        i.stdout
    );
    let r = hook(&w, &read(&w, "README.md"));
    assert!(!denied(&r), "{r:?}");
    let c = w.run(in_project(&w, &["policy", "check"]), b"");
    assert!(!c.stderr.contains("not trusted"), "{}", c.stderr);
}

/// `toolgate wrap` without --policy, started in the project.
fn wrap(w: &World) -> Peer {
    let mut cmd = in_project(
        w,
        &[
            "wrap",
            "--server",
            "files",
            "--approval",
            "none",
            "--workspace",
        ],
    );
    cmd.arg(w.project())
        .env("TOOLGATE_PINS_DIR", w.base().join("pins"))
        .arg("--")
        .arg(toolgate_testkit::bin_path("attack_server"))
        .args(["--kind", "files"]);
    let mut peer = Peer::spawn(cmd, true);
    peer.send(
        serde_json::to_vec(
            &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"trust-test","version":"0"}}}),
        )
        .unwrap(),
    );
    response(&mut peer, &json!("init"));
    peer.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    peer
}

fn response(peer: &mut Peer, id: &Value) -> Value {
    loop {
        let m = peer.recv_json();
        if m.get("id") == Some(id) && m.get("method").is_none() {
            return m;
        }
    }
}

fn read_notes(peer: &mut Peer, w: &World) -> Value {
    let path = w.project().join("notes.txt");
    peer.send(
        serde_json::to_vec(&json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"read_file","arguments":{"path": path}}}))
        .unwrap(),
    );
    response(peer, &json!(1))
}

#[test]
fn wrap_takes_the_policy_of_its_directory_only_as_trusted() {
    let w = World::new();
    std::fs::write(w.project().join("notes.txt"), "notes\n").unwrap();
    std::fs::write(w.project().join("toolgate.yaml"), PROJECT_POLICY).unwrap();
    // Untrusted: every call denied, saying why.
    let mut peer = wrap(&w);
    let r = read_notes(&mut peer, &w);
    assert!(r.to_string().contains("is not trusted as it is"), "{r}");
    drop(peer);
    // Trusted: the project's policy decides, and wrap names it on stderr.
    let t = trust(&w);
    assert_eq!(t.code, Some(0), "{t:?}");
    let mut peer = wrap(&w);
    let r = read_notes(&mut peer, &w);
    assert!(r.to_string().contains("no-notes"), "{r}");
    peer.close_stdin();
    peer.wait();
    let stderr = peer.stderr();
    assert!(
        stderr.contains("`./toolgate.yaml` of the working directory, trusted"),
        "{stderr}"
    );
}

#[test]
fn init_wires_the_policy_of_its_directory_only_as_trusted() {
    let w = World::new();
    let project = w.project();
    let mcp = project.join(".mcp.json");
    let config = r#"{"mcpServers": {"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]}}}"#;
    std::fs::write(&mcp, config).unwrap();
    std::fs::write(project.join("toolgate.yaml"), PROJECT_POLICY).unwrap();
    let init = |w: &World| {
        w.run(
            in_project(w, &["init", "--client", "claude-code", "--yes"]),
            b"",
        )
    };
    let r = init(&w);
    assert_ne!(r.code, Some(0), "{r:?}");
    assert!(
        r.stderr.contains("is here but not trusted as it is"),
        "{}",
        r.stderr
    );
    assert_eq!(
        std::fs::read_to_string(&mcp).unwrap(),
        config,
        "nothing written"
    );
    assert_eq!(trust(&w).code, Some(0));
    let r = init(&w);
    assert_eq!(r.code, Some(0), "{r:?}");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&mcp).unwrap()).unwrap();
    let args: Vec<&str> = written["mcpServers"]["files"]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let policy = project.join("toolgate.yaml");
    let at = args.iter().position(|a| *a == "--policy").unwrap();
    assert_eq!(args[at + 1], policy.to_str().unwrap(), "{args:?}");
    // Trusted, then gone: that reason, and nothing written.
    std::fs::write(&mcp, config).unwrap();
    std::fs::remove_file(&policy).unwrap();
    let r = init(&w);
    assert_ne!(r.code, Some(0), "{r:?}");
    assert!(
        r.stderr.contains("you trusted is gone") && r.stderr.contains("nothing was written"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read_to_string(&mcp).unwrap(), config);
}
