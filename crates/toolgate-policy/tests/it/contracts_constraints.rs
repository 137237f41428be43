//! Argument constraints: canonical, component-wise path prefixes (symlinks resolved),
//! full-match patterns, allowed values, fail-closed on missing or mistyped arguments.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};
use toolgate_policy::contracts::{Contracts, ToolContract};
use toolgate_policy::{
    Action, Contract, Effect, MapFs, NormalizeContext, Operation, Part, Session, SessionLimits,
    TaintLimits, ToolCall, normalize,
};

const WS: &str = "/w";
const HOME: &str = "/home/u";

fn contracts(yaml: &str) -> Contracts {
    let user: BTreeMap<String, ToolContract> = serde_saphyr::from_str(yaml).unwrap();
    Contracts::compile(&user, &toolgate_policy::contracts::packs::pack_names()).unwrap()
}

fn session() -> Session {
    let mut l = SessionLimits::new(TaintLimits::default());
    l.pinning = false;
    Session::new(l)
}

fn fs() -> MapFs {
    MapFs::new()
        .symlink("/w/out/link", "/home/u/.ssh")
        .symlink("/w/alias", "/w/out")
}

/// Normalise with the resolved mapping, then check; the constraint result's effect and reason.
fn constraint(c: &Contracts, tool: &str, args: Value) -> (Effect, String) {
    let fs = fs();
    let ctx = NormalizeContext {
        workspace: WS,
        home: HOME,
        fs: &fs,
    };
    let call = ToolCall {
        server: None,
        tool,
        arguments: &args,
        definition: None,
    };
    let resolved = c.lookup(tool);
    let action = normalize(&call, resolved.mapping(), &ctx);
    let mut s = session();
    let rs = c.check_in(&call, &action, &mut s, Some(&ctx), 0);
    let r = rs
        .into_iter()
        .find(|r| r.contract == Contract::Constraint)
        .expect("constraint result");
    (r.effect, r.reason)
}

#[test]
fn path_prefix_table() {
    let c =
        contracts("write_file:\n  allowed_path_prefixes: [\"${workspace}/out\", \"~/notes\"]\n");
    use Effect::{Allow, Deny};
    let cases: &[(&str, Effect)] = &[
        ("/w/out", Allow),
        ("/w/out/a.txt", Allow),
        ("/w/out/sub/dir/b", Allow),
        ("out/rel.txt", Allow),
        ("~/notes/today.md", Allow),
        ("/w/alias/x", Allow),
        ("/w/outside/a.txt", Deny),
        ("/w/out/../secret", Deny),
        ("/w/out/link/id_rsa", Deny),
        ("/etc/passwd", Deny),
        ("~/.ssh/id_rsa", Deny),
        ("../w2/out", Deny),
        ("/w/out\u{0}/x", Deny),
    ];
    for (path, want) in cases {
        let (got, reason) = constraint(&c, "write_file", json!({"path": path, "content": "x"}));
        assert_eq!(got, *want, "{path:?}: {reason}");
    }
}

#[test]
fn every_path_of_a_multi_path_call_is_confined() {
    let c = contracts(
        "move_file:\n  allowed_path_prefixes: [/w/out]\nread_multiple_files:\n  allowed_path_prefixes: [/w/out]\n",
    );
    let (e, r) = constraint(
        &c,
        "move_file",
        json!({"source": "/w/out/a", "destination": "/w/outside/a"}),
    );
    assert_eq!(e, Effect::Deny, "{r}");
    assert!(r.contains("/w/outside/a"), "{r}");
    let (e, r) = constraint(
        &c,
        "read_multiple_files",
        json!({"paths": ["/w/out/a", "/w/out/link/id_rsa"]}),
    );
    assert_eq!(e, Effect::Deny, "{r}");
    let (e, r) = constraint(
        &c,
        "read_multiple_files",
        json!({"paths": ["/w/out/a", "/w/out/b"]}),
    );
    assert_eq!(e, Effect::Allow, "{r}");
}

#[test]
fn missing_or_mistyped_constrained_arguments_deny() {
    let c = contracts(
        r#"
write_file: {allowed_path_prefixes: [/w/out]}
checkout: {arg_patterns: {branch: "feature/[a-z0-9-]+"}}
deploy: {arg_values: {env: [staging, dev], replicas: [1, 2]}}
"#,
    );
    let cases: &[(&str, Value, Effect)] = &[
        ("write_file", json!({"content": "x"}), Effect::Deny),
        ("write_file", json!({"path": 42}), Effect::Deny),
        (
            "write_file",
            json!({"path": ["/w/out/a", {"x": 1}]}),
            Effect::Deny,
        ),
        ("checkout", json!({}), Effect::Deny),
        (
            "checkout",
            json!({"branch": {"name": "feature/x"}}),
            Effect::Deny,
        ),
        ("checkout", json!({"branch": "feature/ok-1"}), Effect::Allow),
        (
            "checkout",
            json!({"branch": "feature/ok; rm -rf /"}),
            Effect::Deny,
        ),
        ("checkout", json!({"branch": "xfeature/ok"}), Effect::Deny),
        ("checkout", json!({"branch": "feature/ok\n"}), Effect::Deny),
        (
            "checkout",
            json!({"branch": ["feature/a", "main"]}),
            Effect::Deny,
        ),
        (
            "deploy",
            json!({"env": "staging", "replicas": 2}),
            Effect::Allow,
        ),
        (
            "deploy",
            json!({"env": "prod", "replicas": 2}),
            Effect::Deny,
        ),
        (
            "deploy",
            json!({"env": "staging", "replicas": "2"}),
            Effect::Deny,
        ),
        ("deploy", json!({"env": "staging"}), Effect::Deny),
        (
            "deploy",
            json!({"env": ["staging", "dev"], "replicas": 1}),
            Effect::Allow,
        ),
    ];
    for (tool, args, want) in cases {
        let (got, reason) = constraint(&c, tool, args.clone());
        assert_eq!(got, *want, "{tool} {args}: {reason}");
        if *want == Effect::Deny {
            assert!(reason.contains('`'), "reason names the argument: {reason}");
        }
    }
}

#[test]
fn without_context_variables_cannot_resolve() {
    let c = contracts("write_file: {allowed_path_prefixes: [\"${workspace}/out\"]}");
    let args = json!({"path": "/w/out/a"});
    let call = ToolCall {
        server: None,
        tool: "write_file",
        arguments: &args,
        definition: None,
    };
    let mut p = Part::new(Operation::FsWrite);
    p.resources = vec!["/w/out/a".into()];
    let action = Action {
        server: None,
        tool: "write_file".into(),
        parts: vec![p],
    };
    let rs = c.check(&call, &action, &mut session(), 0);
    let r = rs
        .iter()
        .find(|r| r.contract == Contract::Constraint)
        .unwrap();
    assert_eq!(r.effect, Effect::Deny, "{}", r.reason);
}

fn check_resources(c: &Contracts, resources: &[String]) -> Effect {
    let args = json!({});
    let call = ToolCall {
        server: None,
        tool: "touch",
        arguments: &args,
        definition: None,
    };
    let mut p = Part::new(Operation::FsWrite);
    p.resources = resources.to_vec();
    let action = Action {
        server: None,
        tool: "touch".into(),
        parts: vec![p],
    };
    let rs = c.check(&call, &action, &mut session(), 0);
    rs.iter()
        .find(|r| r.contract == Contract::Constraint)
        .unwrap()
        .effect
}

fn path() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![Just("w"), Just("out"), Just("outside"), Just("x")],
        1..4,
    )
    .prop_map(|parts| format!("/{}", parts.join("/")))
}

proptest! {
    #[test]
    fn adding_a_resource_never_turns_deny_into_allow(
        resources in proptest::collection::vec(path(), 1..4),
        extra in path(),
        at in 0usize..4,
    ) {
        let c = contracts("touch: {allowed_path_prefixes: [/w/out]}");
        let before = check_resources(&c, &resources);
        let mut more = resources.clone();
        more.insert(at.min(more.len()), extra);
        let after = check_resources(&c, &more);
        if before == Effect::Deny {
            prop_assert_eq!(after, Effect::Deny);
        }
        // Allow means every resource is the prefix or under it, component-wise.
        if after == Effect::Allow {
            for r in &more {
                prop_assert!(r == "/w/out" || r.starts_with("/w/out/"), "{}", r);
            }
        }
    }
}
