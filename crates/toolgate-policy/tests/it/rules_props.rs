//! Property tests of rule evaluation: deny precedence under any rule order, and adding a
//! resource never turns a deny into an allow.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions"
)]

use proptest::prelude::*;
use toolgate_policy::eval::Engine;
use toolgate_policy::load::load;
use toolgate_policy::rules::{CallFacts, Vars};
use toolgate_policy::{Action, Effect, Operation, Part};

const PATTERNS: &[&str] = &[
    "${workspace}/**",
    "${workspace}/src/**",
    "**/.env",
    "**/*.key",
    "${home}/.ssh/**",
    "/etc/**",
    "**",
];

const PATHS: &[&str] = &[
    "/w",
    "/w/src/main.rs",
    "/w/.env",
    "/w/src/.env",
    "/w/certs/a.key",
    "/home/u/.ssh/id_rsa",
    "/etc/passwd",
    "/tmp/x",
];

const OPS: &[Operation] = &[Operation::FsRead, Operation::FsWrite, Operation::FsDelete];

#[derive(Debug, Clone)]
struct RuleSpec {
    effect: Effect,
    ops: Vec<usize>,
    patterns: Vec<usize>,
}

fn rule_spec() -> impl Strategy<Value = RuleSpec> {
    (
        prop_oneof![Just(Effect::Allow), Just(Effect::Ask), Just(Effect::Deny)],
        prop::collection::btree_set(0..OPS.len(), 1..=OPS.len()),
        prop::collection::btree_set(0..PATTERNS.len(), 1..=3),
    )
        .prop_map(|(effect, ops, patterns)| RuleSpec {
            effect,
            ops: ops.into_iter().collect(),
            patterns: patterns.into_iter().collect(),
        })
}

fn policy_yaml(default: Effect, rules: &[RuleSpec]) -> String {
    let mut s = format!("version: 1\ndefault: {default}\nrules:\n");
    for (i, r) in rules.iter().enumerate() {
        let ops: Vec<&str> = r.ops.iter().map(|o| OPS[*o].as_str()).collect();
        let pats: Vec<String> = r
            .patterns
            .iter()
            .map(|p| format!("'{}'", PATTERNS[*p]))
            .collect();
        s.push_str(&format!(
            "  - {{id: r{i}, effect: {}, operations: [{}], resources: [{}]}}\n",
            r.effect,
            ops.join(", "),
            pats.join(", ")
        ));
    }
    s
}

fn engine(default: Effect, rules: &[RuleSpec]) -> Engine {
    let loaded = load(&policy_yaml(default, rules), "p.yaml").unwrap();
    Engine::new(
        loaded.policy,
        Vars {
            workspace: "/w".into(),
            home: "/home/u".into(),
        },
    )
    .unwrap()
}

fn action(op: Operation, paths: &[usize]) -> Action {
    let mut part = Part::new(op);
    part.resources = paths.iter().map(|p| PATHS[*p].to_owned()).collect();
    Action {
        server: None,
        tool: "t".into(),
        parts: vec![part],
    }
}

const FACTS: CallFacts<'static> = CallFacts {
    server: None,
    tool: "t",
    annotations: None,
    builtin: false,
};

fn effect_strategy() -> impl Strategy<Value = Effect> {
    prop_oneof![Just(Effect::Allow), Just(Effect::Ask), Just(Effect::Deny)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whether any deny rule matches does not depend on the order of the rules, and when
    /// one does the verdict is deny, decided by a deny rule.
    #[test]
    fn deny_precedence_under_any_rule_order(
        default in effect_strategy(),
        rules in prop::collection::vec(rule_spec(), 1..8),
        op in 0..OPS.len(),
        paths in prop::collection::vec(0..PATHS.len(), 1..4),
        seed in any::<u64>(),
    ) {
        let a = action(OPS[op], &paths);
        let base = engine(default, &rules).decide_rules(&a, &FACTS);
        // A deterministic shuffle from the seed.
        let mut shuffled = rules.clone();
        let mut s = seed;
        for i in (1..shuffled.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let j = usize::try_from(s >> 33).unwrap() % (i + 1);
            shuffled.swap(i, j);
        }
        let other = engine(default, &shuffled).decide_rules(&a, &FACTS);
        prop_assert_eq!(base.effect == Effect::Deny, other.effect == Effect::Deny);
        if base.effect == Effect::Deny && base.rule.is_some() {
            // Decided by a deny rule in both orders.
            let id = other.rule.clone().unwrap();
            let idx: usize = id.trim_start_matches('r').parse().unwrap();
            prop_assert_eq!(shuffled[idx].effect, Effect::Deny);
        }
        // A matching deny rule always gives deny.
        // (a deny rule matches when one resource matches, so the whole call can be checked
        // against each deny rule alone)
        let deny_matches = rules.iter().any(|r| {
            r.effect == Effect::Deny
                && r.ops.contains(&op)
                && engine(Effect::Allow, std::slice::from_ref(r)).decide_rules(&a, &FACTS).effect == Effect::Deny
        });
        if deny_matches {
            prop_assert_eq!(base.effect, Effect::Deny);
        }
    }

    /// Adding a resource to a call never turns a deny into anything else.
    #[test]
    fn adding_a_resource_never_lifts_a_deny(
        default in effect_strategy(),
        rules in prop::collection::vec(rule_spec(), 1..8),
        op in 0..OPS.len(),
        paths in prop::collection::vec(0..PATHS.len(), 1..4),
        extra in 0..PATHS.len(),
    ) {
        let e = engine(default, &rules);
        let before = e.decide_rules(&action(OPS[op], &paths), &FACTS);
        let mut more = paths.clone();
        more.push(extra);
        let after = e.decide_rules(&action(OPS[op], &more), &FACTS);
        if before.effect == Effect::Deny {
            prop_assert_eq!(after.effect, Effect::Deny);
        }
        // And an allow of the larger call implies every resource alone is allowed or asked,
        // never denied.
        if after.effect == Effect::Allow {
            for p in &more {
                prop_assert_ne!(e.decide_rules(&action(OPS[op], &[*p]), &FACTS).effect, Effect::Deny);
            }
        }
    }

    /// Evaluation is deterministic.
    #[test]
    fn deterministic(
        default in effect_strategy(),
        rules in prop::collection::vec(rule_spec(), 1..8),
        op in 0..OPS.len(),
        paths in prop::collection::vec(0..PATHS.len(), 1..4),
    ) {
        let e = engine(default, &rules);
        let a = action(OPS[op], &paths);
        prop_assert_eq!(e.decide_rules(&a, &FACTS), e.decide_rules(&a, &FACTS));
    }
}

#[test]
fn opaque_part_never_allowed_by_any_allow_rule() {
    let e = engine(
        Effect::Ask,
        &[RuleSpec {
            effect: Effect::Allow,
            ops: vec![0, 1, 2],
            patterns: vec![6],
        }],
    );
    let mut a = action(Operation::FsRead, &[1]);
    a.parts[0].opaque = true;
    assert_eq!(e.decide_rules(&a, &FACTS).effect, Effect::Ask);
}

/// Path components and component names for the `**/NAME/**` equivalence: separators,
/// dots, spaces, a newline, a non-ASCII letter and glob-looking text all occur.
fn component() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("a"),
            Just("b"),
            Just("."),
            Just("-"),
            Just(" "),
            Just("\n"),
            Just("é"),
            Just("*"),
        ],
        0..4,
    )
    .prop_map(|parts| parts.concat())
}

fn path_from(parts: Vec<String>, lead: bool, trail: bool) -> String {
    let mut p = parts.join("/");
    if lead {
        p.insert(0, '/');
    }
    if trail {
        p.push('/');
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// The engine matches `**/NAME/**` without a regex (`component_literal` +
    /// `dir_components`): the same verdict as globset's compiled glob on any path.
    #[test]
    fn component_globs_match_like_globset(
        name in component(),
        parts in prop::collection::vec(component(), 0..5),
        lead in any::<bool>(),
        trail in any::<bool>(),
    ) {
        let pattern = format!("**/{name}/**");
        let path = path_from(parts, lead, trail);
        if let Ok(g) = globset::GlobBuilder::new(&pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
        {
            let want = g.compile_matcher().is_match(&path);
            if let Some(lit) = toolgate_policy::rules::component_literal(&pattern) {
                let got = toolgate_policy::rules::dir_components(&path).any(|c| c == lit);
                prop_assert_eq!(got, want, "pattern {:?} path {:?}", pattern, path);
            } else {
                // Only names with glob syntax (or none at all) keep the regex path.
                prop_assert!(name.is_empty() || name.contains('*'), "{:?}", name);
            }
        }
    }
}

const COMPONENT_PATTERNS: &[&str] = &[
    "**/src/**",
    "**/.ssh/**",
    "**/a b/**",
    "**/.env",
    "${workspace}/**",
    "**/src/*.rs",
];

const COMPONENT_PATHS: &[&str] = &[
    "/w",
    "/w/src",
    "/w/src/",
    "/w/src/main.rs",
    "/w/x/src/y/z.rs",
    "/home/u/.ssh/id_rsa",
    "/home/u/.ssh",
    "/w/a b/c",
    "/w/.env",
    "src/x",
    "/tmp/srcx/y",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The engine's combined index (regex set + component lookup, rules listed per
    /// operation) decides like each rule matched on its own with a per-rule globset
    /// (`compile_rule`).
    #[test]
    fn engine_index_matches_standalone_rules(
        specs in prop::collection::vec(
            (
                effect_strategy(),
                prop::collection::btree_set(0..OPS.len(), 1..=OPS.len()),
                prop::collection::btree_set(0..COMPONENT_PATTERNS.len(), 1..=3),
            ),
            1..6,
        ),
        op in 0..OPS.len(),
        paths in prop::collection::vec(0..COMPONENT_PATHS.len(), 1..4),
    ) {
        let mut yaml = String::from("version: 1\ndefault: ask\nrules:\n");
        for (i, (effect, ops, pats)) in specs.iter().enumerate() {
            let ops: Vec<&str> = ops.iter().map(|o| OPS[*o].as_str()).collect();
            let pats: Vec<String> =
                pats.iter().map(|p| format!("'{}'", COMPONENT_PATTERNS[*p])).collect();
            yaml.push_str(&format!(
                "  - {{id: r{i}, effect: {effect}, operations: [{}], resources: [{}]}}\n",
                ops.join(", "),
                pats.join(", ")
            ));
        }
        let vars = Vars { workspace: "/w".into(), home: "/home/u".into() };
        let policy = load(&yaml, "p.yaml").unwrap().policy;
        let engine = Engine::new(policy.clone(), vars.clone()).unwrap();
        let mut part = Part::new(OPS[op]);
        part.resources = paths.iter().map(|p| COMPONENT_PATHS[*p].to_owned()).collect();
        let a = Action { server: None, tool: "t".into(), parts: vec![part.clone()] };
        let got = engine.decide_rules(&a, &FACTS).matched_rules;
        let want: Vec<String> = policy
            .rules
            .iter()
            .enumerate()
            .filter(|(i, r)| {
                let (c, _) = toolgate_policy::rules::compile_rule(r, *i, &vars);
                c.unwrap().matches(&FACTS, &part)
            })
            .map(|(_, r)| r.id.clone())
            .collect();
        prop_assert_eq!(got, want);
    }
}
