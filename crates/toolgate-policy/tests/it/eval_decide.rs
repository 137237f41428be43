//! `Engine::decide` end to end (normalisation, contracts, rules): session approvals turn an
//! ask (never a deny) into allow, every contributing result is recorded, determinism, and
//! the bypasses (symlinks, `..`, wrappers, compounds, disguised URLs) that rules must see
//! through.

use serde_json::{Value, json};
use toolgate_policy::{Contract, Effect, MapFs, STARTER_POLICY};

use crate::support::engine as support;

use support::{decide, engine, session};

#[test]
fn session_approval_turns_ask_into_allow_but_never_deny() {
    let e = engine(STARTER_POLICY);
    let fs = MapFs::new();
    let mut s = session(false);
    let write = json!({"path": "/tmp/new.rs", "content": "x"});
    let d = decide(&e, &mut s, &fs, "write_file", &write);
    assert_eq!(d.effect, Effect::Ask);
    assert!(s.approve(&d.action, Some(&write)));
    let d2 = decide(&e, &mut s, &fs, "write_file", &write);
    assert_eq!(d2.effect, Effect::Allow);
    assert!(d2.approved_by_session.is_some());
    assert!(
        d2.reason.starts_with("approved for this session"),
        "{}",
        d2.reason
    );
    // A different action is not covered.
    let other = json!({"path": "/tmp/other.rs", "content": "x"});
    assert_eq!(
        decide(&e, &mut s, &fs, "write_file", &other).effect,
        Effect::Ask
    );
    // An approval never lifts a deny.
    let secret = json!({"path": ".env", "content": "x"});
    let d = decide(&e, &mut s, &fs, "write_file", &secret);
    assert_eq!(d.effect, Effect::Deny);
    s.approve(&d.action, Some(&secret));
    let d = decide(&e, &mut s, &fs, "write_file", &secret);
    assert_eq!(d.effect, Effect::Deny);
    assert!(d.approved_by_session.is_none());
}

#[test]
fn every_contributing_result_is_recorded() {
    let e = engine("version: 1\ndefault: allow\ntools:\n  send_email:\n    max_calls: 5\n");
    let fs = MapFs::new();
    let mut s = session(true);
    s.pin_tools(&[json!({"name": "send_email", "inputSchema": {"type": "object"}})]);
    let d = decide(
        &e,
        &mut s,
        &fs,
        "send_email",
        &json!({"to": "x@y.example", "body": "hi"}),
    );
    let contracts: Vec<Contract> = d.results.iter().map(|r| r.contract).collect();
    assert!(contracts.contains(&Contract::Pinning), "{contracts:?}");
    assert!(contracts.contains(&Contract::Budget), "{contracts:?}");
    assert!(contracts.contains(&Contract::SinkGate), "{contracts:?}");
    assert!(contracts.contains(&Contract::Default), "{contracts:?}");
    // Unproven recipient: the sink gate asks, and the decision carries its findings.
    assert_eq!((d.effect, d.contract), (Effect::Ask, Contract::SinkGate));
    assert!(!d.sinks.is_empty());
    assert_eq!(d.sinks[0].value, "x@y.example");
}

#[test]
fn deterministic_for_the_same_inputs() {
    let e = engine(STARTER_POLICY);
    let fs = MapFs::new();
    let args = json!({"paths": ["a", "b/../.env", "~/.ssh/id_rsa"]});
    let a = decide(&e, &mut session(false), &fs, "read_multiple_files", &args);
    let b = decide(&e, &mut session(false), &fs, "read_multiple_files", &args);
    assert_eq!(a, b);
}

/// Rules see through symlinks, `..`, wrappers, compounds, multi-file calls and disguised
/// URLs: other spellings of the same path, command or host.
#[test]
fn bypasses_do_not_escape_deny_rules() {
    let e = engine(
        "version: 1\ndefault: allow\nrules:\n  - {id: ssh, effect: deny, operations: [fs.read, fs.write, fs.delete], resources: ['${home}/.ssh/**']}\n  - {id: rm, effect: deny, operations: [shell.exec], executables: [rm]}\n  - {id: evil, effect: deny, operations: [net.request], hosts: ['evil.example']}\n",
    );
    let fs = MapFs::new().symlink("/w/innocent", "/home/u/.ssh");
    let mut s = session(false);
    let cases: &[(&str, Value)] = &[
        ("read_file", json!({"path": "innocent/id_rsa"})),
        ("read_file", json!({"path": "~/.ssh/id_rsa"})),
        ("read_file", json!({"path": "/w/../home/u/.ssh/id_rsa"})),
        (
            "read_multiple_files",
            json!({"paths": ["ok.txt", "innocent/config"]}),
        ),
        (
            "move_file",
            json!({"source": "innocent/id_rsa", "destination": "/w/stolen"}),
        ),
        ("execute_command", json!({"command": "/bin/rm -rf /"})),
        ("execute_command", json!({"command": "FOO=1 rm x"})),
        ("execute_command", json!({"command": "sudo rm x"})),
        ("execute_command", json!({"command": "env rm x"})),
        ("execute_command", json!({"command": "sh -c 'rm x'"})),
        ("execute_command", json!({"command": "ls; rm x"})),
        ("execute_command", json!({"command": "ls && rm x"})),
        ("execute_command", json!({"command": ["rm", "x"]})),
        (
            "fetch",
            json!({"url": "https://good.example@evil.example/"}),
        ),
        ("fetch", json!({"url": "https://EVIL.example./"})),
        (
            "fetch",
            json!({"url": "https://good.example/", "redirect_url": "https://evil.example/"}),
        ),
    ];
    for (tool, args) in cases {
        let d = decide(&e, &mut s, &fs, tool, args);
        assert_eq!(d.effect, Effect::Deny, "{tool} {args}: {}", d.reason);
    }
}
