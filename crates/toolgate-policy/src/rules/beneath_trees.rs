//! What lies beneath the directories of a recursive part: by pattern, and as listed.

use super::glob;
use crate::action::{Operation, Part};
use crate::beneath::PathSet;

/// What exists beneath a directory, as far as a complete listing shows
/// ([`crate::fsfacts::FsFacts::list_beneath`]), narrowed to what a recursive part reaches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Existing {
    /// Paths strictly beneath the directory whose file name one of the part's filters
    /// allows (every one without filters).
    pub entries: Vec<String>,
    /// Canonical targets of the symlinks beneath it, and what lies beneath those targets:
    /// a tool that follows links reaches them whatever their names.
    pub links: Vec<String>,
}

impl Existing {
    /// Every path the part can reach: the entries and the link targets.
    pub fn reached(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .chain(self.links.iter())
            .map(String::as_str)
    }
}

/// What lies beneath one directory of a recursive part: the paths its pattern allows
/// (`set`; `None` when it could not be built) and, when the filesystem could be listed
/// completely, what exists there.
#[derive(Debug, Clone)]
pub struct BeneathTree {
    pub set: Option<PathSet>,
    pub existing: Option<Existing>,
}

/// What lies beneath each resource (directory) of a part that reaches beneath them, in
/// order, by pattern only (no listing); empty for any other part.
pub fn beneath_trees(part: &Part) -> Vec<BeneathTree> {
    match &part.beneath {
        Some(b) => part
            .resources
            .iter()
            .map(|dir| BeneathTree {
                set: PathSet::beneath(dir, &b.filters),
                existing: None,
            })
            .collect(),
        None => Vec::new(),
    }
}

/// At most this many existing paths are listed beneath one directory of a recursive
/// part; past it, rules judge the part by pattern alone.
pub const LISTING_LIMIT: usize = 50_000;

/// Like [`beneath_trees`], with what exists beneath each directory listed through `fs`
/// ([`FsFacts::list_beneath`](crate::fsfacts::FsFacts::list_beneath)): a deny rule whose
/// pattern could name a file there meets the part only when such a file exists.
///
/// Only reads and deletes are listed: they touch what exists. A recursive write (an archive
/// extracted, a tree copied into the directory) creates files whose names come from
/// elsewhere, so it is judged by pattern alone.
pub fn beneath_trees_listed(part: &Part, fs: &dyn crate::fsfacts::FsFacts) -> Vec<BeneathTree> {
    let Some(b) = &part.beneath else {
        return Vec::new();
    };
    if !matches!(part.operation, Operation::FsRead | Operation::FsDelete) {
        return beneath_trees(part);
    }
    // The filters as the pattern reading takes them: one that is empty or does not parse
    // narrows nothing.
    let matchers: Option<Vec<globset::GlobMatcher>> = b
        .filters
        .iter()
        .map(|f| {
            (!f.is_empty())
                .then(|| glob(f).ok())
                .flatten()
                .map(|g| g.compile_matcher())
        })
        .collect();
    let matchers = matchers.filter(|m| !m.is_empty());
    let mut trees = beneath_trees(part);
    for (tree, dir) in trees.iter_mut().zip(&part.resources) {
        tree.existing = fs.list_beneath(dir, LISTING_LIMIT).map(|l| Existing {
            entries: l
                .entries
                .into_iter()
                .filter(|p| {
                    let name = p.rsplit('/').next().unwrap_or(p);
                    matchers
                        .as_ref()
                        .is_none_or(|m| m.iter().any(|m| m.is_match(name)))
                })
                .collect(),
            links: l.links,
        });
    }
    trees
}
