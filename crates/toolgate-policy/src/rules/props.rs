//! A property test of a crate-private shortcut of the rule index: `**/NAME/**` matched as a
//! path component.

use proptest::prelude::*;

use super::{component_literal, dir_components};

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
