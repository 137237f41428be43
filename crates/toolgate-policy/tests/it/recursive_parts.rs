//! Recursive reads meet what lies beneath (else a search prints what `Read` may not): `Grep`
//! and `Glob` of the coding
//! agents, and the filesystem server's `search_files`, `directory_tree` and
//! `list_directory_with_sizes`, reach beneath their directory. A deny rule matches when its
//! pattern can match a path beneath it that the call's filters (`glob`, `type`, `pattern`)
//! do not provably exclude; an allow rule only when it covers all of it.

use serde_json::{Value, json};
use toolgate_policy::explain::{to_json, to_text};
use toolgate_policy::{
    Beneath, Decision, Effect, Engine, FsFacts, LexicalFs, MapFs, NormalizeContext, Operation,
    STARTER_POLICY, ToolCall,
};

use crate::support::engine as support;

fn starter() -> Engine {
    support::engine(STARTER_POLICY)
}

/// A call of the coding agent's own tool (no server), as `toolgate hook` presents it.
fn agent(e: &Engine, fs: &dyn FsFacts, tool: &str, args: Value) -> Decision {
    let ctx = NormalizeContext {
        workspace: "/w",
        home: "/home/u",
        fs,
    };
    let call = ToolCall {
        server: None,
        tool,
        arguments: &args,
        definition: None,
    };
    e.decide(&call, &mut support::session(false), &ctx, 0)
}

/// `Grep` judged by pattern alone (nothing is known of the filesystem).
fn grep(e: &Engine, args: Value) -> Decision {
    agent(e, &LexicalFs, "Grep", args)
}

fn effect_rule(d: &Decision) -> (Effect, Option<&str>) {
    (d.effect, d.rule.as_deref())
}

/// A project as the filesystem shows it: sources, and a private key in `deploy/`.
fn project() -> MapFs {
    MapFs::new().exists(&[
        "/w/Cargo.toml",
        "/w/README.md",
        "/w/src/main.rs",
        "/w/src/lib.rs",
        "/w/deploy/server.key",
        "/home/u/.ssh/id_rsa",
        "/home/u/notes.txt",
    ])
}

#[test]
fn grep_for_keys_is_denied_by_the_starter() {
    let e = starter();
    for fs in [&project() as &dyn FsFacts, &LexicalFs] {
        for args in [
            json!({"pattern": "PRIVATE KEY", "path": "/w", "glob": "*.key", "output_mode": "content"}),
            // Without a path: the working directory, the workspace.
            json!({"pattern": "PRIVATE KEY", "glob": "*.key", "output_mode": "content"}),
            json!({"pattern": "PRIVATE KEY", "path": ".", "glob": "**/*.key"}),
            json!({"pattern": "PRIVATE KEY", "path": "deploy", "glob": "*.{pem,key}"}),
            json!({"pattern": "PRIVATE KEY", "path": "/w", "glob": "*.rs *.key"}),
            // An exclusion narrows nothing.
            json!({"pattern": "PRIVATE KEY", "path": "/w", "glob": "!*.rs"}),
            // An unknown type narrows nothing.
            json!({"pattern": "PRIVATE KEY", "path": "/w", "type": "keys"}),
            // Neither does no filter at all.
            json!({"pattern": "PRIVATE KEY", "path": "/w"}),
        ] {
            let d = agent(&e, fs, "Grep", args.clone());
            assert_eq!(d.effect, Effect::Deny, "{args}: {}", d.reason);
        }
    }
    // With the project listed, the reason names the file.
    let d = agent(
        &e,
        &project(),
        "Grep",
        json!({"pattern": "PRIVATE KEY", "path": "/w", "glob": "*.key"}),
    );
    assert_eq!(effect_rule(&d), (Effect::Deny, Some("protect-keys")));
    assert_eq!(
        d.reason,
        "a recursive `fs.read` of `/w` reaches `/w/deploy/server.key`, which deny rule `protect-keys` protects"
    );
    // Without a listing, by pattern: `*.key` names `.env.key` too, which the first deny
    // rule protects.
    let d = grep(
        &e,
        json!({"pattern": "PRIVATE KEY", "path": "/w", "glob": "*.key"}),
    );
    assert_eq!(
        d.reason,
        "a recursive `fs.read` of `/w` (file names `*.key`) can reach files matching `**/.env.*`, which deny rule `protect-dotenv` protects (what lies beneath could not be listed: over 50000 paths, or a directory toolgate cannot read). help: search a narrower directory"
    );
}

#[test]
fn searches_that_reach_no_protected_file_are_allowed() {
    let e = starter();
    let fs = project();
    for args in [
        json!({"pattern": "TODO", "path": "/w", "glob": "*.rs"}),
        json!({"pattern": "TODO", "glob": "*.rs"}),
        json!({"pattern": "TODO", "path": "src", "glob": "*.{rs,toml}"}),
        json!({"pattern": "TODO", "path": ".", "type": "rust"}),
        json!({"pattern": "TODO", "path": ".", "type": "ts", "glob": "*.md"}),
        json!({"pattern": "TODO", "path": ".", "glob": "src/**/*.rs"}),
        json!({"pattern": "TODO", "path": "src"}),
    ] {
        let d = agent(&e, &fs, "Grep", args.clone());
        assert_eq!(
            effect_rule(&d),
            (Effect::Allow, Some("allow-workspace-read")),
            "{args}: {}",
            d.reason
        );
    }
    let d = agent(
        &e,
        &fs,
        "Grep",
        json!({"pattern": "TODO", "path": "/w", "glob": "*.rs"}),
    );
    assert_eq!(
        d.reason,
        "`fs.read` of `/w` and what lies beneath (file names `*.rs`) matches allow rule `allow-workspace-read`"
    );
}

#[test]
fn by_pattern_alone_a_name_glob_meets_what_its_filter_allows() {
    // No listing: the starter's `**/id_rsa*` and `**/.env.*` name `id_rsa.rs` and `.env.rs`,
    // which a search narrowed to `*.rs` files would read (ripgrep's `--glob` whitelist wins
    // over its hidden-file filter): denied.
    let d = grep(
        &starter(),
        json!({"pattern": "TODO", "path": "/w", "glob": "*.rs"}),
    );
    assert_eq!(effect_rule(&d), (Effect::Deny, Some("protect-dotenv")));
    // A pattern a filter does exclude is not met: `**/*.key` and `*.rs`.
    let only_keys = "version: 1\ndefault: ask\nrules:\n  - {id: keys, effect: deny, operations: [fs.read], resources: ['**/*.key']}\n  - {id: ws, effect: allow, operations: [fs.read], resources: ['${workspace}/**']}\n";
    let e = support::engine(only_keys);
    let d = grep(&e, json!({"pattern": "TODO", "path": "/w", "glob": "*.rs"}));
    assert_eq!(effect_rule(&d), (Effect::Allow, Some("ws")));
    let d = grep(
        &e,
        json!({"pattern": "TODO", "path": "/w", "glob": "*.key"}),
    );
    assert_eq!(effect_rule(&d), (Effect::Deny, Some("keys")));
}

#[test]
fn symlinks_beneath_reach_their_targets() {
    let e = starter();
    let fs = project().symlink("/w/s", "/home/u/.ssh");
    let d = agent(
        &e,
        &fs,
        "Grep",
        json!({"pattern": "x", "path": "/w", "glob": "*.rs"}),
    );
    assert_eq!(d.effect, Effect::Deny, "{}", d.reason);
    assert!(d.reason.contains("/home/u/.ssh"), "{}", d.reason);
    // A link to a harmless place outside the workspace: not covered by the workspace rule.
    let fs = project().symlink("/w/n", "/home/u/notes.txt");
    let d = agent(&e, &fs, "Grep", json!({"pattern": "x", "path": "/w/src"}));
    assert_eq!(
        effect_rule(&d),
        (Effect::Allow, Some("allow-workspace-read"))
    );
    let d = agent(
        &e,
        &fs,
        "Grep",
        json!({"pattern": "x", "path": "/w", "glob": "*.rs"}),
    );
    assert_eq!(effect_rule(&d), (Effect::Ask, None), "{}", d.reason);
}

#[test]
fn searches_beyond_the_workspace_meet_the_credential_stores() {
    let e = starter();
    // The home directory holds `~/.ssh`: a `*.txt` filter does not exclude `~/.ssh/**`.
    let d = grep(&e, json!({"pattern": "x", "path": "~", "glob": "*.txt"}));
    assert_eq!(d.effect, Effect::Deny);
    let d = agent(&e, &project(), "Grep", json!({"pattern": "x", "path": "~"}));
    assert_eq!(
        d.reason,
        "a recursive `fs.read` of `/home/u` reaches `/home/u/.ssh/id_rsa`, which deny rule `protect-keys` protects"
    );
    let d = grep(&e, json!({"pattern": "x", "path": "/", "glob": "*.txt"}));
    assert_eq!(d.effect, Effect::Deny);
    // Outside the workspace with nothing protected there: it asks.
    let d = agent(
        &e,
        &project(),
        "Grep",
        json!({"pattern": "x", "path": "/tmp"}),
    );
    assert_eq!(effect_rule(&d), (Effect::Ask, None), "{}", d.reason);
}

#[test]
fn a_file_is_a_plain_read() {
    let e = starter();
    let fs = MapFs::new()
        .file("/w/src/main.rs")
        .file("/w/deploy/server.key");
    let d = agent(
        &e,
        &fs,
        "Grep",
        json!({"pattern": "x", "path": "src/main.rs"}),
    );
    assert_eq!(
        effect_rule(&d),
        (Effect::Allow, Some("allow-workspace-read"))
    );
    assert!(d.action.parts.iter().all(|p| p.beneath.is_none()));
    let d = agent(
        &e,
        &fs,
        "Grep",
        json!({"pattern": "x", "path": "deploy/server.key"}),
    );
    assert_eq!(effect_rule(&d), (Effect::Deny, Some("protect-keys")));
    // Nothing known about the path: searched beneath (the safe reading).
    let d = grep(&e, json!({"pattern": "x", "path": "src/main.rs"}));
    assert_eq!(d.effect, Effect::Deny);
}

#[test]
fn glob_patterns_narrow_the_directory_and_the_names() {
    let e = starter();
    let glob = |fs: &dyn FsFacts, args: Value| agent(&e, fs, "Glob", args);
    let fs = project();
    // No `*.pem` exists: nothing protected is listed. Once one does, it is denied.
    let d = glob(&fs, json!({"pattern": "**/*.pem"}));
    assert_eq!(d.effect, Effect::Allow, "{}", d.reason);
    let with_pem = project().exists(&["/w/certs/ca.pem"]);
    let d = glob(&with_pem, json!({"pattern": "**/*.pem"}));
    assert_eq!(effect_rule(&d), (Effect::Deny, Some("protect-keys")));
    let d = glob(&LexicalFs, json!({"pattern": "**/*.pem"}));
    assert_eq!(d.effect, Effect::Deny);
    let d = glob(&fs, json!({"pattern": "**/*.key"}));
    assert_eq!(effect_rule(&d), (Effect::Deny, Some("protect-keys")));
    let d = glob(&fs, json!({"pattern": "**/*.rs"}));
    assert_eq!(
        effect_rule(&d),
        (Effect::Allow, Some("allow-workspace-read"))
    );
    let d = glob(&fs, json!({"pattern": "src/**/*.rs", "path": "/w"}));
    assert_eq!(d.action.parts[0].resources, vec!["/w/src".to_owned()]);
    assert_eq!(d.effect, Effect::Allow);
    // Absolute, climbing and grouped patterns reach where they say.
    for pattern in [
        "/home/u/.ssh/*",
        "../../*",
        "*/../../home/u/.ssh/*",
        "{/home/u/.ssh,src}/*",
    ] {
        let d = glob(&LexicalFs, json!({"pattern": pattern, "path": "/w/src"}));
        assert_eq!(d.effect, Effect::Deny, "{pattern}: {}", d.reason);
        let d = glob(&fs, json!({"pattern": pattern, "path": "/w/src"}));
        assert_eq!(d.effect, Effect::Deny, "{pattern}: {}", d.reason);
    }
}

#[test]
fn recursive_filesystem_tools_reach_beneath() {
    // Reads allowed, `~/.ssh` denied.
    let policy = "version: 1\ndefault: allow\nrules:\n  - {id: ssh, effect: deny, operations: [fs.read], resources: ['${home}/.ssh/**']}\n";
    let e = support::engine(policy);
    for tool in [
        "search_files",
        "directory_tree",
        "list_directory_with_sizes",
    ] {
        let d = support::decide(
            &e,
            &mut support::session(false),
            &LexicalFs,
            tool,
            &json!({"path": "/home/u", "pattern": "id"}),
        );
        assert_eq!(effect_rule(&d), (Effect::Deny, Some("ssh")), "{tool}");
        let d = support::decide(
            &e,
            &mut support::session(false),
            &LexicalFs,
            tool,
            &json!({"path": "/w", "pattern": "id"}),
        );
        assert_eq!(d.effect, Effect::Allow, "{tool}: {}", d.reason);
        assert_eq!(
            d.action.parts[0].beneath,
            Some(Beneath::default()),
            "{tool}"
        );
    }
    // A plain listing reads the directory only.
    let d = support::decide(
        &e,
        &mut support::session(false),
        &LexicalFs,
        "list_directory",
        &json!({"path": "/home/u"}),
    );
    assert_eq!(d.effect, Effect::Allow);
}

#[test]
fn allow_rules_must_cover_everything_beneath() {
    let policy = "version: 1\ndefault: ask\nrules:\n  - {id: src, effect: allow, operations: [fs.read], resources: ['${workspace}/src/**']}\n  - {id: rs, effect: allow, operations: [fs.read], resources: ['**/*.rs']}\n";
    let e = support::engine(policy);
    // The workspace holds more than `src`: not covered.
    let d = grep(&e, json!({"pattern": "x", "path": "/w"}));
    assert_eq!(effect_rule(&d), (Effect::Ask, None));
    let d = grep(&e, json!({"pattern": "x", "path": "/w/src/a"}));
    assert_eq!(effect_rule(&d), (Effect::Allow, Some("src")));
    // `**/*.rs` covers a search narrowed to `*.rs` files, but not the directory itself.
    let d = grep(&e, json!({"pattern": "x", "path": "/w", "glob": "*.rs"}));
    assert_eq!(effect_rule(&d), (Effect::Ask, None));
    let d = grep(
        &e,
        json!({"pattern": "x", "path": "/w/src", "glob": "*.rs"}),
    );
    assert_eq!(effect_rule(&d), (Effect::Allow, Some("src")));
}

#[test]
fn explain_shows_what_lies_beneath() {
    let e = starter();
    // By pattern (no listing).
    let d = grep(&e, json!({"pattern": "x", "path": "/w", "glob": "*.key"}));
    let text = to_text(&d);
    assert!(
        text.contains("      beneath:    files named `*.key` (recursive"),
        "{text}"
    );
    let v = to_json(&d);
    assert_eq!(
        v["action"]["parts"][0]["beneath"],
        json!({"filters": ["*.key"]})
    );
    assert_eq!(v["action"]["parts"][0]["operation"], "fs.read");
    assert_eq!(d.action.parts[0].operation, Operation::FsRead);
}

#[test]
fn a_tools_entry_declares_a_recursive_tool() {
    let policy = r#"version: 1
default: ask
rules:
  - {id: keys, effect: deny, operations: [fs.read], resources: ["**/*.key"]}
  - {id: ws, effect: allow, operations: [fs.read], resources: ["${workspace}/**"]}
tools:
  code_search:
    operation: fs.read
    recursive:
      params: [root]
      name_globs: [include]
      types: [lang]
"#;
    let e = support::engine(policy);
    let call = |args: Value| {
        support::decide(
            &e,
            &mut support::session(false),
            &LexicalFs,
            "code_search",
            &args,
        )
    };
    let d = call(json!({"root": "/w", "include": "*.rs", "query": "x"}));
    assert_eq!(effect_rule(&d), (Effect::Allow, Some("ws")), "{}", d.reason);
    assert_eq!(
        d.action.parts[0].beneath,
        Some(Beneath {
            filters: vec!["*.rs".to_owned()]
        })
    );
    let d = call(json!({"root": "/w", "lang": "rust"}));
    assert_eq!(effect_rule(&d), (Effect::Allow, Some("ws")), "{}", d.reason);
    let d = call(json!({"root": "/w", "include": "*.key"}));
    assert_eq!(effect_rule(&d), (Effect::Deny, Some("keys")));
    let d = call(json!({"root": "/w"}));
    assert_eq!(effect_rule(&d), (Effect::Deny, Some("keys")));
    // No directory and no `workspace_default`: not understood, it asks.
    let d = call(json!({"include": "*.rs"}));
    assert_eq!(d.effect, Effect::Ask, "{}", d.reason);
}

#[test]
fn recursive_entries_are_loaded_strictly() {
    let with = |entry: &str| {
        format!(
            "version: 1\ndefault: ask\ntools:\n  code_search:\n    operation: fs.read\n    recursive: {entry}\n"
        )
    };
    for (entry, message) in [
        ("{params: [root], bogus: [x]}", "bogus"),
        ("{params: []}", "`recursive.params` is an empty list"),
        (
            "{params: [root], types: []}",
            "`recursive.types` is an empty list",
        ),
        (
            "{params: [root], workspace_default: 'yes'}",
            "workspace_default",
        ),
        ("{name_globs: [glob]}", "params"),
    ] {
        let err = toolgate_policy::load(&with(entry), "p.yaml")
            .err()
            .map(|d| d.to_string())
            .unwrap_or_default();
        assert!(err.contains(message), "{entry}: {err}");
    }
    let shell = "version: 1\ndefault: ask\ntools:\n  code_search:\n    operation: shell.exec\n    recursive: {params: [root]}\n";
    let err = toolgate_policy::load(shell, "p.yaml")
        .err()
        .map(|d| d.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("`recursive` applies to file operations, not `shell.exec`"),
        "{err}"
    );
}

#[test]
fn a_recursive_write_is_judged_by_pattern_even_with_a_listing() {
    // Nothing protected exists beneath `/w/out`, but what a recursive write creates there
    // is named elsewhere (an archive, a copied tree): by pattern, `**/*.key` can be written.
    let e = starter();
    let fs = project();
    let facts = toolgate_policy::CallFacts {
        server: None,
        tool: "t",
        annotations: None,
        builtin: false,
    };
    let part = |op: Operation| {
        let mut p = toolgate_policy::Part::new(op);
        p.resources = vec!["/w/src".to_owned()];
        p.beneath = Some(Beneath::default());
        p
    };
    let action = |op| toolgate_policy::Action {
        server: None,
        tool: "t".into(),
        parts: vec![part(op)],
    };
    // A read or delete of `/w/src` reaches only what is there: no key.
    for op in [Operation::FsRead, Operation::FsDelete] {
        let o = e.decide_rules_in(&action(op), &facts, Some(&fs));
        assert_ne!(o.effect, Effect::Deny, "{op}: {}", o.reason);
        // By pattern alone it is denied (`**/id_rsa*` could be there).
        let o = e.decide_rules(&action(op), &facts);
        assert_eq!(o.effect, Effect::Deny, "{op}");
    }
    let o = e.decide_rules_in(&action(Operation::FsWrite), &facts, Some(&fs));
    assert_eq!(o.effect, Effect::Deny, "{}", o.reason);
}
