//! Property tests of the pattern intersection (`toolgate_policy::beneath`): whatever globset
//! says about concrete paths, `meets_beneath` never says "no" when a path beneath the
//! directory (with a name a filter allows) matches the glob, and `covers_beneath` never says
//! "yes" when one does not.

use globset::{GlobBuilder, GlobMatcher};
use proptest::prelude::*;
use toolgate_policy::{covers_beneath, meets_beneath};

fn matcher(glob: &str) -> Option<GlobMatcher> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .ok()
        .map(|g| g.compile_matcher())
}

/// Pieces of a glob component: literals, wildcards, classes and alternations.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a"),
        Just("b"),
        Just("k"),
        Just("."),
        Just("key"),
        Just("rs"),
        Just("*"),
        Just("?"),
        Just("[ak]"),
        Just("[!a]"),
        Just("[a-k]"),
        Just("{a,b}"),
        Just("{key,rs}"),
        Just("{.e,k*}"),
        Just("\\*"),
    ]
    .prop_map(str::to_owned)
}

/// One component of a glob: `**`, or one to three pieces.
fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("**".to_owned()),
        5 => prop::collection::vec(piece(), 1..=3).prop_map(|p| p.concat()),
    ]
}

/// An absolute glob (`/…`) or one that starts with `**/`.
fn glob() -> impl Strategy<Value = String> {
    (any::<bool>(), prop::collection::vec(component(), 1..=4)).prop_map(|(rooted, comps)| {
        if rooted {
            format!("/{}", comps.join("/"))
        } else {
            format!("**/{}", comps.join("/"))
        }
    })
}

/// Names of concrete path components.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a"),
        Just("b"),
        Just("k"),
        Just("ab"),
        Just("k.key"),
        Just("a.rs"),
        Just(".e"),
        Just("key"),
        Just("*"),
        Just("a.b.key"),
    ]
    .prop_map(str::to_owned)
}

/// A canonical absolute directory (`/` included).
fn dir() -> impl Strategy<Value = String> {
    prop::collection::vec(name(), 0..=2).prop_map(|c| format!("/{}", c.join("/")))
}

fn filters() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop::collection::vec(piece(), 1..=2).prop_map(|p| p.concat()),
        0..=2,
    )
}

/// Paths strictly beneath the directory: one to three components below it.
fn rests() -> impl Strategy<Value = Vec<Vec<String>>> {
    prop::collection::vec(prop::collection::vec(name(), 1..=3), 1..=12)
}

fn join(dir: &str, rest: &[String]) -> String {
    if dir == "/" {
        format!("/{}", rest.join("/"))
    } else {
        format!("{dir}/{}", rest.join("/"))
    }
}

/// The concrete paths beneath `dir` whose name a filter allows (any name without filters;
/// a filter that does not parse allows any name, as the function under test reads it).
fn reached(dir: &str, filters: &[String], rests: &[Vec<String>]) -> Vec<String> {
    let fs: Option<Vec<GlobMatcher>> = filters.iter().map(|f| matcher(f)).collect();
    let fs = fs.filter(|v| !v.is_empty());
    rests
        .iter()
        .filter(|rest| {
            let name = rest.last().map(String::as_str).unwrap_or("");
            fs.as_ref()
                .is_none_or(|fs| fs.iter().any(|m| m.is_match(name)))
        })
        .map(|rest| join(dir, rest))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn meets_is_sound(glob in glob(), dir in dir(), filters in filters(), rests in rests()) {
        let Some(g) = matcher(&glob) else { return Ok(()) };
        let hit = reached(&dir, &filters, &rests).into_iter().find(|p| g.is_match(p));
        if let Some(p) = hit {
            prop_assert!(
                meets_beneath(&glob, &dir, &filters),
                "`{glob}` matches `{p}` beneath `{dir}` with filters {filters:?}"
            );
        }
    }

    #[test]
    fn covers_is_sound(glob in glob(), dir in dir(), filters in filters(), rests in rests()) {
        let Some(g) = matcher(&glob) else { return Ok(()) };
        if covers_beneath(&glob, &dir, &filters) {
            for p in reached(&dir, &filters, &rests) {
                prop_assert!(
                    g.is_match(&p),
                    "`{glob}` said to cover `{dir}` ({filters:?}) but misses `{p}`"
                );
            }
        }
    }

    /// Covering implies meeting whenever something is reached at all.
    #[test]
    fn covers_implies_meets(glob in glob(), dir in dir(), filters in filters(), rests in rests()) {
        if covers_beneath(&glob, &dir, &filters) && !reached(&dir, &filters, &rests).is_empty() {
            prop_assert!(meets_beneath(&glob, &dir, &filters));
        }
    }
}

/// Precision where it matters (the examples).
#[test]
fn precise_where_it_matters() {
    let f = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let ws = "/w";
    assert!(!meets_beneath("**/*.key", ws, &f(&["*.rs"])));
    assert!(meets_beneath("**/*.key", ws, &f(&["*.key"])));
    assert!(!meets_beneath("/home/u/.ssh/**", "/w/src", &[]));
    assert!(meets_beneath("/home/u/.ssh/**", "/home/u", &[]));
    assert!(meets_beneath("/home/u/.ssh/**", "/", &[]));
    assert!(meets_beneath("**/*.key", ws, &f(&["*"])));
    assert!(meets_beneath("**/*.key", ws, &f(&["*.{rs,key}"])));
    assert!(covers_beneath("/w/**", "/w/src", &[]));
    assert!(!covers_beneath("**/*.rs", "/w", &[]));
}
