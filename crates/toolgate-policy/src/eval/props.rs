//! A property test of the engine's combined rule index (crate-private) against each rule
//! compiled on its own.

use proptest::prelude::*;

use super::Engine;
use crate::action::{Action, Operation, Part};
use crate::decision::Effect;
use crate::load::load;
use crate::rules::{CallFacts, Vars, compile_rule};

const OPS: &[Operation] = &[Operation::FsRead, Operation::FsWrite, Operation::FsDelete];

const FACTS: CallFacts<'static> = CallFacts {
    server: None,
    tool: "t",
    annotations: None,
    builtin: false,
};

fn effect_strategy() -> impl Strategy<Value = Effect> {
    prop_oneof![Just(Effect::Allow), Just(Effect::Ask), Just(Effect::Deny)]
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
                let (c, _) = compile_rule(r, *i, &vars);
                c.unwrap().matches(&FACTS, &part)
            })
            .map(|(_, r)| r.id.clone())
            .collect();
        prop_assert_eq!(got, want);
    }
}
