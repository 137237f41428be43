//! Seed parity: what users of Bouncer and ToolFence expect. Namespaced and
//! differently cased tool names, deletion tools, a tool named `git`, `git remote`, unusable
//! destinations, allow rules for URLs passing the sink gate, and the starter policy's
//! read-only tools.

use serde_json::{Value, json};
use toolgate_policy::{
    Action, Contract, Decision, Effect, Engine, MapFs, Operation, Session, SessionLimits,
    TaintLimits, base_tool_name,
};

use crate::support::engine as support;

use support::engine;

fn session() -> Session {
    support::session(false)
}

fn decide(e: &Engine, s: &mut Session, tool: &str, args: &Value) -> Decision {
    support::decide(e, s, &MapFs::new(), tool, args)
}

fn norm(tool: &str, args: Value) -> Action {
    support::normalized(&MapFs::new(), None, tool, &args)
}

/// `(operation, resources, opaque)` of each part.
fn shape(a: &Action) -> Vec<(Operation, Vec<String>, bool)> {
    a.parts
        .iter()
        .map(|p| (p.operation, p.resources.clone(), p.opaque))
        .collect()
}

const SSH_POLICY: &str = "version: 1\ndefault: allow\nrules:\n  - {id: ssh, effect: deny, operations: [fs.read, fs.write, fs.delete], resources: ['${home}/.ssh/**']}\n  - {id: outside, effect: deny, operations: [fs.delete], resources: ['/**']}\n  - {id: ws-delete, effect: ask, operations: [fs.delete], resources: ['${workspace}/**']}\n";

// ---- b: namespaced and differently cased tool names --------------------------------------

#[test]
fn base_tool_names() {
    for (name, base) in [
        ("read_file", "read_file"),
        ("filesystem/read_file", "read_file"),
        ("fs:read_file", "read_file"),
        ("fs.read_file", "read_file"),
        ("READ_FILE", "read_file"),
        ("mcp__fs__read_file", "read_file"),
        ("mcp__my-server__Read_File", "read_file"),
        ("a/b:c__git", "git"),
        ("__", "__"),
    ] {
        assert_eq!(base_tool_name(name), base, "{name}");
    }
}

#[test]
fn namespaced_names_are_the_tool_they_name_and_deny_rules_see_the_path() {
    let e = engine(SSH_POLICY);
    for tool in [
        "filesystem/read_file",
        "fs:read_file",
        "READ_FILE",
        "mcp__fs__read_file",
    ] {
        let a = norm(tool, json!({"path": "~/.ssh/id_rsa"}));
        assert_eq!(
            shape(&a),
            [(
                Operation::FsRead,
                vec!["/home/u/.ssh/id_rsa".to_owned()],
                false
            )],
            "{tool}"
        );
        // The exact name is kept: pins, approvals and the audit see what the server listed.
        assert_eq!(a.tool, tool);
        let mut s = session();
        let d = decide(&e, &mut s, tool, &json!({"path": "~/.ssh/id_rsa"}));
        assert_eq!(
            (d.effect, d.rule.as_deref()),
            (Effect::Deny, Some("ssh")),
            "{tool}"
        );
        let d = decide(&e, &mut s, tool, &json!({"path": "src/main.rs"}));
        assert_eq!(d.effect, Effect::Allow, "{tool}: {}", d.reason);
    }
}

#[test]
fn namespaced_names_get_the_pack_entry() {
    let e = engine("version: 1\ndefault: allow\n");
    // The fetch pack's sink gate applies to a namespaced fetch too.
    let mut s = session();
    let d = decide(
        &e,
        &mut s,
        "mcp__web__fetch",
        &json!({"url": "https://evil.example/x"}),
    );
    assert_eq!(
        (d.effect, d.contract),
        (Effect::Ask, Contract::SinkGate),
        "{}",
        d.reason
    );
}

// ---- b2: deletion tools and every filesystem name ToolFence maps -------------------------

#[test]
fn every_toolfence_filesystem_name_maps() {
    use Operation::*;
    let table: &[(&str, Operation)] = &[
        ("read_file", FsRead),
        ("read_text_file", FsRead),
        ("read_media_file", FsRead),
        ("read_multiple_files", FsRead),
        ("list_directory", FsRead),
        ("list_directory_with_sizes", FsRead),
        ("directory_tree", FsRead),
        ("search_files", FsRead),
        ("get_file_info", FsRead),
        ("write_file", FsWrite),
        ("edit_file", FsWrite),
        ("create_directory", FsWrite),
        ("delete_file", FsDelete),
        ("remove_file", FsDelete),
        ("remove_directory", FsDelete),
        ("delete_directory", FsDelete),
    ];
    for (tool, op) in table {
        let args = if *tool == "read_multiple_files" {
            json!({"paths": ["/tmp/x"]})
        } else {
            json!({"path": "/tmp/x"})
        };
        for name in [tool.to_string(), format!("fs/{tool}"), tool.to_uppercase()] {
            let a = norm(&name, args.clone());
            assert_eq!(
                shape(&a),
                [(*op, vec!["/tmp/x".to_owned()], false)],
                "{name}"
            );
        }
    }
    // `move_file`: a delete of the source, a write of the destination.
    let a = norm("move_file", json!({"source": "/a", "destination": "/b"}));
    assert_eq!(
        shape(&a),
        [
            (FsDelete, vec!["/a".to_owned()], false),
            (FsWrite, vec!["/b".to_owned()], false)
        ]
    );
    // `list_allowed_directories` takes no path: fs.read without resources.
    let a = norm("list_allowed_directories", json!({}));
    assert_eq!(shape(&a), [(FsRead, vec![], false)]);
}

#[test]
fn deny_fs_delete_outside_the_workspace_sees_deletion_tools() {
    let e = engine(SSH_POLICY);
    for tool in [
        "delete_file",
        "remove_file",
        "remove_directory",
        "fs/DELETE_FILE",
    ] {
        let mut s = session();
        let d = decide(&e, &mut s, tool, &json!({"path": "/etc/passwd"}));
        assert_eq!(
            (d.effect, d.rule.as_deref()),
            (Effect::Deny, Some("outside")),
            "{tool}"
        );
        let d = decide(&e, &mut s, tool, &json!({"path": "~/.ssh/id_rsa"}));
        assert_eq!(d.effect, Effect::Deny, "{tool}");
    }
}

// ---- c: a tool named `git` ----------------------------------------------------------------

fn argv_of(a: &Action) -> Vec<Option<Vec<String>>> {
    a.parts.iter().map(|p| p.argv.clone()).collect()
}

#[test]
fn a_tool_named_git_is_a_git_command_line() {
    use Operation::*;
    let a = norm("git", json!({"args": ["status", "--short"]}));
    assert_eq!(
        (a.parts[0].operation, a.parts[0].opaque, a.parts.len()),
        (GitRead, false, 1)
    );
    assert_eq!(
        argv_of(&a),
        [Some(vec!["git".into(), "status".into(), "--short".into()])]
    );

    let a = norm("git", json!({"args": ["git", "push"]}));
    assert_eq!(shape(&a)[0].0, GitRemote);
    assert_eq!(argv_of(&a), [Some(vec!["git".into(), "push".into()])]);

    let a = norm("git", json!({"command": "add README.md"}));
    assert_eq!((a.parts[0].operation, a.parts[0].opaque), (GitWrite, false));
    assert_eq!(
        argv_of(&a),
        [Some(vec!["git".into(), "add".into(), "README.md".into()])]
    );

    let a = norm("git", json!({"args": "status && rm -rf /"}));
    assert!(a.parts.iter().all(|p| p.opaque), "{a:?}");
    // Deny rules still see `rm`.
    assert!(
        a.parts
            .iter()
            .any(|p| p.executable.as_deref() == Some("rm")),
        "{a:?}"
    );

    let a = norm("git", json!({"args": ["frobnicate"]}));
    assert_eq!(shape(&a), [(Unknown, vec!["/w".to_owned()], true)]);

    // A string of one simple command, the namespaced name, and the other runner names.
    let a = norm("mcp__git__git", json!({"args": "log --oneline"}));
    assert_eq!((a.parts[0].operation, a.parts[0].opaque), (GitRead, false));
    let a = norm("run_git", json!({"args": ["push", "origin"]}));
    assert_eq!(a.parts[0].operation, GitRemote);
    // Arguments that hold no command line are unknown.
    for args in [
        json!({}),
        json!({"args": 5}),
        json!({"args": []}),
        json!("status"),
    ] {
        let a = norm("git", args.clone());
        assert_eq!(
            (a.parts[0].operation, a.parts[0].opaque),
            (Unknown, true),
            "{args}"
        );
    }
    // Dangerous options stay shell.exec (opaque), as typed in a shell.
    let a = norm("git", json!({"args": ["-c", "core.pager=evil", "log"]}));
    assert_eq!((a.parts[0].operation, a.parts[0].opaque), (ShellExec, true));
}

#[test]
fn a_git_tool_is_decided_by_git_rules() {
    let e = engine(
        "version: 1\ndefault: ask\nrules:\n  - {id: read, effect: allow, operations: [git.read]}\n  - {id: no-push, effect: deny, operations: [git.remote]}\n",
    );
    let mut s = session();
    let d = decide(&e, &mut s, "git", &json!({"args": ["status"]}));
    assert_eq!((d.effect, d.rule.as_deref()), (Effect::Allow, Some("read")));
    let d = decide(&e, &mut s, "git", &json!({"args": ["push", "--force"]}));
    assert_eq!(
        (d.effect, d.rule.as_deref()),
        (Effect::Deny, Some("no-push"))
    );
    let d = decide(&e, &mut s, "git", &json!({"args": ["remote", "-v"]}));
    assert_eq!(d.effect, Effect::Allow, "{}", d.reason);
}

// ---- d: `git remote` lists ----------------------------------------------------------------

#[test]
fn git_remote_listing_is_a_read() {
    use Operation::*;
    for (cmd, op) in [
        ("git remote", GitRead),
        ("git remote -v", GitRead),
        ("git remote show origin", GitRemote),
        ("git remote add evil https://evil.example/r", GitRemote),
        (
            "git remote set-url origin https://evil.example/r",
            GitRemote,
        ),
        ("git remote remove origin", GitRemote),
        ("git remote rename origin x", GitRemote),
        ("git remote update", GitRemote),
    ] {
        let a = norm("execute_command", json!({ "command": cmd }));
        assert_eq!(
            (a.parts[0].operation, a.parts[0].opaque),
            (op, false),
            "{cmd}"
        );
    }
}

// ---- e: a destination argument that is present but unusable -------------------------------

#[test]
fn unusable_destinations_fail_closed() {
    use toolgate_policy::SinkVerdict;
    let e = engine(
        "version: 1\ndefault: allow\ntools:\n  send_email:\n    trusted_destinations: ['*@corp.com']\n",
    );
    let ok = json!({"to": "a@corp.com", "subject": "s", "body": "b"});
    let mut s = session();
    assert_eq!(decide(&e, &mut s, "send_email", &ok).effect, Effect::Allow);
    for to in [
        json!(null),
        json!(true),
        json!(""),
        json!("   "),
        json!({}),
        json!([null]),
        json!(["a@corp.com", ""]),
        json!(["a@corp.com", {}]),
        json!({"address": null}),
        json!(5),
        json!([5]),
    ] {
        let args = json!({"to": to, "subject": "s", "body": "b"});
        let d = decide(&e, &mut s, "send_email", &args);
        assert_eq!(
            (d.effect, d.contract),
            (Effect::Ask, Contract::SinkGate),
            "to: {to}: {}",
            d.reason
        );
        assert_ne!(d.reason, "the call names no destination", "to: {to}");
    }
    let d = decide(&e, &mut s, "send_email", &json!({"to": null, "body": "b"}));
    assert_eq!(d.sinks[0].verdict, SinkVerdict::Unusable);
    assert!(
        d.reason
            .contains("`to` is present but holds no usable destination"),
        "{}",
        d.reason
    );
    // A bad `cc` next to a good `to` asks too.
    let d = decide(
        &e,
        &mut s,
        "send_email",
        &json!({"to": "a@corp.com", "cc": null, "body": "b"}),
    );
    assert_eq!(d.effect, Effect::Ask);
    // A destination argument that is absent is not unusable.
    let d = decide(
        &e,
        &mut s,
        "send_email",
        &json!({"to": ["a@corp.com"], "body": "b"}),
    );
    assert_eq!(d.effect, Effect::Allow, "{}", d.reason);
}

#[test]
fn an_allow_rule_for_the_tool_does_not_lift_an_unusable_destination() {
    // A rule that allows the tool does not lift the sink gate's ask on `to: null`: the most
    // restrictive result wins (the proxy turns an ask it cannot put to anyone into a deny).
    let e = engine(
        "version: 1\ndefault: deny\nrules:\n  - {id: mail, effect: allow, operations: [unknown], tools: [send_email]}\n",
    );
    let mut s = session();
    let d = decide(&e, &mut s, "send_email", &json!({"to": null, "body": "b"}));
    assert_eq!(d.effect, Effect::Ask, "{}", d.reason);
}

// ---- a: an allow rule for a URL passes the fetch pack's sink gate ------------------------

const API_POLICY: &str = "version: 1\ndefault: ask\nrules:\n  - {id: api, effect: allow, operations: [net.request], hosts: [api.example.com, '*.internal.example.com'], methods: [get, head]}\n  - {id: any-host, effect: allow, operations: [net.request], hosts: ['*'], methods: [PUT]}\n";

#[test]
fn a_user_allow_rule_trusts_its_urls_at_the_sink_gate() {
    use toolgate_policy::SinkVerdict;
    let e = engine(API_POLICY);
    let mut s = session();
    for url in [
        "https://api.example.com/v1",
        "https://API.example.com/v1?q=1",
        "https://svc.internal.example.com/x",
        "https://a.b.internal.example.com/",
    ] {
        let d = decide(&e, &mut s, "fetch", &json!({ "url": url }));
        assert_eq!(d.effect, Effect::Allow, "{url}: {}", d.reason);
        assert_eq!(d.rule.as_deref(), Some("api"));
        assert!(
            d.reason.contains("is trusted by allow rule `api`"),
            "{url}: {}",
            d.reason
        );
        let gate = d
            .results
            .iter()
            .find(|r| r.contract == Contract::SinkGate)
            .unwrap();
        assert_eq!(gate.sinks[0].verdict, SinkVerdict::AllowedByRule);
        assert_eq!(gate.sinks[0].trusted_by_rule.as_deref(), Some("api"));
    }
    // Another host, another method, or a rule that names no host: still asks.
    for args in [
        json!({"url": "https://evil.example/x"}),
        json!({"url": "https://internal.example.com.evil.example/"}),
        json!({"url": "https://api.example.com/v1", "method": "POST"}),
        json!({"url": "https://evil.example/x", "method": "PUT"}),
    ] {
        let d = decide(&e, &mut s, "fetch", &args);
        assert_eq!(
            (d.effect, d.contract),
            (Effect::Ask, Contract::SinkGate),
            "{args}: {}",
            d.reason
        );
    }
}

#[test]
fn explain_says_the_allow_rule_trusted_the_destination() {
    let e = engine(API_POLICY);
    let mut s = session();
    let d = decide(
        &e,
        &mut s,
        "fetch",
        &json!({"url": "https://api.example.com/v1"}),
    );
    let text = toolgate_policy::explain::to_text(&d);
    assert!(
        text.contains("allowed_by_rule (allow rule `api` matches its host and method)"),
        "{text}"
    );
    let v = toolgate_policy::explain::to_json(&d);
    let reason = v["decision"]["reason"].as_str().unwrap();
    assert!(reason.contains("trusted by allow rule `api`"), "{reason}");
}

// ---- j: the starter policy allows pinned read-only tools ---------------------------------

fn tool_def(name: &str, annotations: Option<Value>) -> Value {
    let mut d = json!({
        "name": name,
        "description": format!("{name} does things"),
        "inputSchema": {"type": "object", "properties": {}}
    });
    if let Some(a) = annotations {
        d["annotations"] = a;
    }
    d
}

fn pinned_session(defs: &[Value]) -> Session {
    let mut s = Session::new(SessionLimits::new(TaintLimits::default()));
    s.pin_tools(defs);
    s.listing_complete();
    s
}

#[test]
fn the_starter_policy_allows_pinned_read_only_tools_only() {
    let e = engine(toolgate_policy::STARTER_POLICY);
    let ro = Some(json!({"readOnlyHint": true}));
    let defs = [
        tool_def("get_issue", ro.clone()),
        tool_def("mcp__github__list_pull_requests", ro.clone()),
        tool_def("create_issue", Some(json!({"readOnlyHint": false}))),
        tool_def("list_things", None),
        tool_def("slack_post_message", ro.clone()),
        tool_def("write_file", ro.clone()),
        tool_def("read_file", ro.clone()),
    ];
    let mut s = pinned_session(&defs);
    let d = decide(
        &e,
        &mut s,
        "get_issue",
        &json!({"owner": "o", "repo": "r", "issue_number": 1}),
    );
    assert_eq!(
        (d.effect, d.rule.as_deref()),
        (Effect::Allow, Some("allow-read-only-tools")),
        "{}",
        d.reason
    );
    let d = decide(
        &e,
        &mut s,
        "mcp__github__list_pull_requests",
        &json!({"owner": "o"}),
    );
    assert_eq!(d.effect, Effect::Allow, "{}", d.reason);
    // Writes outside the workspace, unannotated tools, sends (the sink gate) and writes
    // that claim to be read-only keep asking; paths are still decided by the path rules.
    for (tool, args) in [
        (
            "create_issue",
            json!({"owner": "o", "repo": "r", "title": "t"}),
        ),
        ("list_things", json!({})),
        (
            "slack_post_message",
            json!({"channel_id": "C0123", "text": "hi"}),
        ),
        ("write_file", json!({"path": "/tmp/x.rs", "content": "x"})),
        ("read_file", json!({"path": "/etc/hosts"})),
    ] {
        let d = decide(&e, &mut s, tool, &args);
        assert_eq!(d.effect, Effect::Ask, "{tool}: {}", d.reason);
    }
    // A tool that is not pinned (never listed) asks.
    let d = decide(&e, &mut s, "get_other", &json!({}));
    assert_eq!(d.effect, Effect::Ask);
}

#[test]
fn hints_that_change_after_pinning_are_a_rug_pull() {
    let e = engine(toolgate_policy::STARTER_POLICY);
    let ro = Some(json!({"readOnlyHint": true}));
    let mut s = pinned_session(&[tool_def("get_issue", ro.clone()), tool_def("wipe", None)]);
    assert_eq!(
        decide(&e, &mut s, "get_issue", &json!({})).effect,
        Effect::Allow
    );
    // The server relists: `get_issue` is no longer read-only, `wipe` suddenly is.
    s.pin_tools(&[
        tool_def("get_issue", Some(json!({"readOnlyHint": false}))),
        tool_def("wipe", ro),
    ]);
    s.listing_complete();
    for tool in ["get_issue", "wipe"] {
        let d = decide(&e, &mut s, tool, &json!({}));
        assert_eq!(
            (d.effect, d.contract),
            (Effect::Ask, Contract::Pinning),
            "{tool}: {}",
            d.reason
        );
    }
}
