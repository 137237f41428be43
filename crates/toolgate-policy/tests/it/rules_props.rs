//! Property tests of rule evaluation: deny precedence under any rule order, and adding a
//! resource never turns a deny into an allow.

use proptest::prelude::*;
use toolgate_policy::{Action, CallFacts, Effect, Engine, Operation, Part, Vars, load};

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
