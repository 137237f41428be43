//! Property tests of the rule index's shortcuts, which are crate-private: `**/NAME/**`
//! matched as a path component, and the engine's combined index against each rule
//! compiled on its own.

use proptest::prelude::*;

use super::{CallFacts, Vars, compile_rule, component_literal, dir_components};
use crate::action::{Action, Operation, Part};
use crate::decision::Effect;
use crate::eval::Engine;
use crate::load::load;

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
            if let Some(lit) = component_literal(&pattern) {
                let got = dir_components(&path).any(|c| c == lit);
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
                let (c, _) = compile_rule(r, *i, &vars);
                c.unwrap().matches(&FACTS, &part)
            })
            .map(|(_, r)| r.id.clone())
            .collect();
        prop_assert_eq!(got, want);
    }
}
