//! What a recursive part reaches beneath its directories, compared with resource globs.
//!
//! A recursive search, listing, copy or delete of a directory `D` (a part with
//! [`Beneath`](crate::action::Beneath)) touches the paths strictly beneath `D` whose file
//! name matches one of its filters (any name when there is none). Two questions decide how
//! rules see such a part:
//!
//! - [`PathSet::meets`]: can one of those paths match a resource glob? A deny rule then
//!   matches the part. *Sound*: never "no" when such a path exists.
//! - [`PathSet::covers`]: does the glob match *every* one of those paths? Only then does an
//!   allow (or ask) rule match. *Sound* the other way: never "yes" when a path beneath is
//!   not matched.
//!
//! Both are exact questions about regular languages. A resource glob is the regex globset
//! compiles it to (`Glob::regex`, `literal_separator(true)`: the very regex the engine
//! matches paths with); what lies beneath `D` is the regex
//! `^D/(?:.*/)?(?:F1|F2|…)$` with each `Fi` the regex of a filter, or `^D/.+$` without
//! filters. Both become lazy DFAs over bytes (`regex-automata`'s hybrid engine), and a
//! breadth-first walk of their product finds a path both accept (meets) or one that the
//! tree accepts and the glob does not (covers). The tree's language is a superset of the
//! canonical paths beneath `D` (it also holds `D//x` or `D/./x`), which keeps both answers
//! sound. When the walk cannot finish (a state budget, a DFA that cannot be built, a cache
//! that had to be cleared) the answer is the safe one: meets, not covered.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use regex_automata::Anchored;
use regex_automata::hybrid::LazyStateID;
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::util::{start, syntax};

/// Pairs of states a product walk may visit before it gives up (and answers safely).
const MAX_PAIRS: usize = 100_000;

/// A set of paths as a lazy DFA over their bytes.
#[derive(Debug, Clone)]
pub struct PathSet {
    dfa: Arc<DFA>,
}

/// The regex of a glob as globset builds it for resources (`literal_separator`, `\`
/// escapes), or `None` when it does not parse.
fn glob_regex(glob: &str) -> Option<String> {
    globset::GlobBuilder::new(glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .ok()
        .map(|g| g.regex().to_owned())
}

/// `(?-u)^BODY$` → `BODY` (globset's shape for a case-sensitive glob).
fn regex_body(regex: &str) -> Option<&str> {
    regex.strip_prefix("(?-u)^")?.strip_suffix('$')
}

/// A path as a regex literal over bytes: every byte but ASCII letters and digits escaped.
fn byte_literal(path: &str) -> String {
    let mut out = String::with_capacity(path.len() * 2);
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

fn build(pattern: &str) -> Option<PathSet> {
    let dfa = DFA::builder()
        .syntax(
            syntax::Config::new()
                .utf8(false)
                .dot_matches_new_line(true)
                .unicode(false),
        )
        .configure(DFA::config().cache_capacity(4 * (1 << 20)))
        .build(pattern)
        .ok()?;
    Some(PathSet { dfa: Arc::new(dfa) })
}

impl PathSet {
    /// The union of globs (globset's [`globset::Glob`] values, as the rules compile them).
    /// `None` when the DFA cannot be built.
    pub fn from_globs<'a>(globs: impl IntoIterator<Item = &'a globset::Glob>) -> Option<PathSet> {
        let alternatives: Vec<String> = globs
            .into_iter()
            .map(|g| format!("(?:{})", g.regex()))
            .collect();
        if alternatives.is_empty() {
            // The empty set.
            return build(r"(?-u)[^\x00-\xFF]");
        }
        build(&alternatives.join("|"))
    }

    /// One glob pattern (already expanded and absolute), compiled as the rules compile it.
    /// `None` when it does not parse.
    pub fn from_glob(glob: &str) -> Option<PathSet> {
        build(&format!("(?:{})", glob_regex(glob)?))
    }

    /// The paths strictly beneath `dir` (a canonical absolute path) whose file name matches
    /// one of `filters` (any name when there is none). A filter that does not parse, or an
    /// empty one, narrows nothing: any name. `None` when the DFA cannot be built.
    pub fn beneath(dir: &str, filters: &[String]) -> Option<PathSet> {
        let prefix = if dir.ends_with('/') {
            dir.to_owned()
        } else {
            format!("{dir}/")
        };
        let mut bodies = Vec::new();
        for f in filters {
            let body = (!f.is_empty())
                .then(|| glob_regex(f))
                .flatten()
                .and_then(|re| regex_body(&re).map(str::to_owned));
            match body {
                Some(b) => bodies.push(format!("(?:{b})")),
                None => {
                    bodies.clear();
                    break;
                }
            }
        }
        let tail = if bodies.is_empty() {
            ".+".to_owned()
        } else {
            format!("(?:.*/)?(?:{})", bodies.join("|"))
        };
        build(&format!("(?-u)^{}{tail}$", byte_literal(&prefix)))
    }

    /// Whether one path is in the set (tests: the engine asks [`PathSet::meets`] and
    /// [`PathSet::covers`]).
    #[cfg(test)]
    pub fn contains(&self, path: &str) -> bool {
        self.find([path]).is_some()
    }

    /// The first of `paths` in the set (one DFA cache for all of them).
    pub fn find<'p>(&self, paths: impl IntoIterator<Item = &'p str>) -> Option<&'p str> {
        let mut cache = Cache::new(&self.dfa);
        paths.into_iter().find(|p| self.contains_in(&mut cache, p))
    }

    /// The first of `paths` not in the set (one DFA cache for all of them).
    pub fn find_missing<'p>(&self, paths: impl IntoIterator<Item = &'p str>) -> Option<&'p str> {
        let mut cache = Cache::new(&self.dfa);
        paths.into_iter().find(|p| !self.contains_in(&mut cache, p))
    }

    fn contains_in(&self, cache: &mut Cache, path: &str) -> bool {
        let Ok(mut sid) = start_of(&self.dfa, cache) else {
            return false;
        };
        for &b in path.as_bytes() {
            match self.dfa.next_state(cache, sid, b) {
                Ok(next) => sid = next,
                Err(_) => return false,
            }
            if sid.is_dead() {
                return false;
            }
        }
        accepts(&self.dfa, cache, sid).unwrap_or(false)
    }

    /// True unless provably no path is in both sets. Sound: never `false` when a common
    /// path exists (a walk that cannot finish says `true`).
    pub fn meets(&self, other: &PathSet) -> bool {
        walk(self, other, true, |a, b| a && b).unwrap_or(true)
    }

    /// True only when provably every path of `other` is in `self`. Sound: never `true` when
    /// some path of `other` is not in `self` (a walk that cannot finish says `false`).
    pub fn covers(&self, other: &PathSet) -> bool {
        walk(self, other, false, |a, b| b && !a)
            .map(|found| !found)
            .unwrap_or(false)
    }
}

fn start_of(dfa: &DFA, cache: &mut Cache) -> Result<LazyStateID, ()> {
    dfa.start_state(cache, &start::Config::new().anchored(Anchored::Yes))
        .map_err(|_| ())
}

/// Whether the DFA accepts the input read so far (matches are reported one byte late: the
/// end-of-input transition says).
fn accepts(dfa: &DFA, cache: &mut Cache, sid: LazyStateID) -> Result<bool, ()> {
    dfa.next_eoi_state(cache, sid)
        .map(|s| s.is_match())
        .map_err(|_| ())
}

/// Breadth-first over the product of the two DFAs: `Some(true)` when a reachable pair of
/// states satisfies `want(a accepts, b accepts)`, `Some(false)` when none does, `None` when
/// the walk could not finish.
/// With `prune_dead_a`, a pair whose first state is dead is not followed (nothing that
/// `want`s `a` to accept can come of it).
fn walk(
    a: &PathSet,
    b: &PathSet,
    prune_dead_a: bool,
    want: impl Fn(bool, bool) -> bool,
) -> Option<bool> {
    let (da, db) = (&*a.dfa, &*b.dfa);
    let mut ca = Cache::new(da);
    let mut cb = Cache::new(db);
    // One byte per pair of byte classes: every byte of a pair behaves the same in both.
    let mut reps: Vec<u8> = Vec::new();
    let mut seen_classes = HashSet::new();
    for byte in 0..=255u8 {
        let key = (da.byte_classes().get(byte), db.byte_classes().get(byte));
        if seen_classes.insert(key) {
            reps.push(byte);
        }
    }
    let sa = start_of(da, &mut ca).ok()?;
    let sb = start_of(db, &mut cb).ok()?;
    let mut seen: HashSet<(LazyStateID, LazyStateID)> = HashSet::new();
    let mut queue = VecDeque::new();
    seen.insert((sa, sb));
    queue.push_back((sa, sb));
    let mut found = false;
    while let Some((x, y)) = queue.pop_front() {
        let acc_a = accepts(da, &mut ca, x).ok()?;
        let acc_b = accepts(db, &mut cb, y).ok()?;
        if want(acc_a, acc_b) {
            found = true;
            break;
        }
        for &byte in &reps {
            let nx = da.next_state(&mut ca, x, byte).ok()?;
            let ny = db.next_state(&mut cb, y, byte).ok()?;
            // Nothing is ever accepted past a dead state; for `covers` a dead state of the
            // first set still matters (the second set may accept what it cannot).
            if ny.is_dead() || (prune_dead_a && nx.is_dead()) {
                continue;
            }
            if seen.insert((nx, ny)) {
                if seen.len() > MAX_PAIRS {
                    return None;
                }
                queue.push_back((nx, ny));
            }
        }
    }
    // A cleared cache invalidates the state ids the walk compared: not an answer.
    if ca.clear_count() > 0 || cb.clear_count() > 0 {
        return None;
    }
    Some(found)
}

/// Does any path strictly beneath `dir` whose file name matches one of `filters` (any name
/// when there are none) match `glob` (an expanded, absolute resource glob)? Sound: never
/// `false` when such a path exists; `true` when unsure (a glob that does not parse included).
pub fn meets_beneath(glob: &str, dir: &str, filters: &[String]) -> bool {
    match (PathSet::from_glob(glob), PathSet::beneath(dir, filters)) {
        (Some(g), Some(t)) => g.meets(&t),
        _ => true,
    }
}

/// Does `glob` match every path strictly beneath `dir` whose file name matches one of
/// `filters` (every path beneath when there are none)? Sound: never `true` when some such
/// path is not matched; `false` when unsure.
pub fn covers_beneath(glob: &str, dir: &str, filters: &[String]) -> bool {
    match (PathSet::from_glob(glob), PathSet::beneath(dir, filters)) {
        (Some(g), Some(t)) => g.covers(&t),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn filters_narrow_only_where_they_exclude_the_pattern() {
        let ws = "/w";
        assert!(!meets_beneath("**/*.key", ws, &f(&["*.rs"])));
        assert!(meets_beneath("**/*.key", ws, &f(&["*.key"])));
        assert!(meets_beneath("**/*.key", ws, &f(&["*"])));
        assert!(meets_beneath("**/*.key", ws, &f(&["*.{rs,key}"])));
        assert!(meets_beneath("**/*.key", ws, &f(&["*.rs", "server.*"])));
        assert!(meets_beneath("**/*.key", ws, &[]));
        assert!(!meets_beneath("**/*.key", ws, &f(&["*.[rR][sS]"])));
        assert!(meets_beneath("**/id_rsa*", ws, &f(&["id_*"])));
        assert!(!meets_beneath("**/.env", ws, &f(&["*.md"])));
        assert!(meets_beneath("**/.env", ws, &f(&["?env", "x"])));
        // A filter that does not parse narrows nothing.
        assert!(meets_beneath("**/*.key", ws, &f(&["*.{rs"])));
        assert!(meets_beneath("**/*.key", ws, &f(&[""])));
    }

    #[test]
    fn directories_meet_what_lies_beneath_them() {
        let ssh = "/home/u/.ssh/**";
        assert!(!meets_beneath(ssh, "/w/src", &[]));
        assert!(meets_beneath(ssh, "/home/u", &[]));
        assert!(meets_beneath(ssh, "/home", &[]));
        assert!(meets_beneath(ssh, "/", &[]));
        assert!(meets_beneath(ssh, "/home/u/.ssh", &[]));
        assert!(meets_beneath(ssh, "/home/u/.ssh/keys", &f(&["*.pub"])));
        assert!(!meets_beneath(ssh, "/home/u2", &[]));
        assert!(!meets_beneath(ssh, "/home/u/.sshx", &[]));
        // `/` meets everything that is absolute.
        for g in ["**/*.pem", "/etc/shadow", "/a/*/b?", "/x/{a,b}/**"] {
            assert!(meets_beneath(g, "/", &[]), "{g}");
        }
        // Strictly beneath: the directory itself is the rules' ordinary match.
        assert!(!meets_beneath("/w/src", "/w/src", &[]));
        assert!(meets_beneath("/w/src/*", "/w/src", &[]));
        assert!(!meets_beneath("/w/*.key", "/w/src", &[]));
        assert!(meets_beneath("/w/*/*.key", "/w/src", &[]));
        // Special characters of the directory are literal.
        assert!(!meets_beneath("/w.x/**", "/w/x", &[]));
        assert!(meets_beneath("/w[1]/**", "/w1", &[]));
        assert!(!meets_beneath("/w\\[1\\]/**", "/w1", &[]));
        assert!(meets_beneath("/w\\[1\\]/**", "/w[1]", &[]));
    }

    #[test]
    fn coverage_needs_every_path_beneath() {
        assert!(covers_beneath("/w/**", "/w/src", &[]));
        assert!(covers_beneath("/w/**", "/w", &[]));
        assert!(covers_beneath("**", "/", &[]));
        assert!(!covers_beneath("/w/**", "/", &[]));
        assert!(!covers_beneath("**/*.rs", "/w", &[]));
        assert!(covers_beneath("**/*.rs", "/w", &f(&["*.rs"])));
        assert!(!covers_beneath("**/*.rs", "/w", &f(&["*.r?"])));
        assert!(covers_beneath("/w/**/*.rs", "/w/src", &f(&["*.rs"])));
        assert!(!covers_beneath("/w/*", "/w", &[]));
        assert!(!covers_beneath("/w/src/**", "/w", &[]));
        assert!(!covers_beneath("/w/**", "/wx", &[]));
        assert!(covers_beneath("/w/{src,lib}/**", "/w/lib", &[]));
    }

    #[test]
    fn union_of_globs() {
        let globs: Vec<globset::Glob> = ["/w/a/**", "/w/b/**"]
            .iter()
            .map(|p| {
                globset::GlobBuilder::new(p)
                    .literal_separator(true)
                    .build()
                    .unwrap()
            })
            .collect();
        let set = PathSet::from_globs(&globs).unwrap();
        assert!(set.contains("/w/a/x"));
        assert!(!set.contains("/w/c/x"));
        assert!(set.meets(&PathSet::beneath("/w", &[]).unwrap()));
        assert!(!set.covers(&PathSet::beneath("/w", &[]).unwrap()));
        assert!(set.covers(&PathSet::beneath("/w/b", &[]).unwrap()));
        let none = PathSet::from_globs(std::iter::empty()).unwrap();
        assert!(!none.meets(&PathSet::beneath("/", &[]).unwrap()));
    }

    #[test]
    fn non_ascii_directories() {
        assert!(meets_beneath("/wé/**", "/wé", &[]));
        assert!(!meets_beneath("/wé/**", "/wè", &[]));
        assert!(covers_beneath("/wé/**", "/wé/ü", &[]));
        assert!(meets_beneath("/w/ü*/**", "/w", &f(&["*.ß"])));
    }
}
