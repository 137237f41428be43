//! Filesystem facts come from the caller, so the policy crate stays pure.
//!
//! The binary implements [`FsFacts`] over the real filesystem; tests use [`MapFs`] (a map
//! of symlinks) or [`LexicalFs`] (no symlinks at all).

use std::collections::BTreeMap;

/// How many symlinks [`MapFs`] follows before it calls the path a loop (like `ELOOP`).
const MAX_SYMLINK_HOPS: usize = 40;

/// The filesystem knowledge normalisation needs.
pub trait FsFacts {
    /// Canonicalise an absolute, lexically normalised path: resolve symlinks of the existing
    /// prefix, append the missing tail. `None` when it cannot be resolved (loop, permission,
    /// NUL, …).
    fn canonicalize(&self, abs_path: &str) -> Option<String>;

    /// The server process (the wrapped MCP server, not toolgate) as far as path resolution
    /// needs it: `/proc/self`, `/proc/thread-self`, `/dev/fd/N`, `/dev/stdin` and
    /// `/proc/<pid>/root|cwd` are resolved the way the kernel resolves them for *that*
    /// process. Nothing known (the default) makes such paths unresolvable (opaque).
    fn server_process(&self) -> ServerProcess {
        ServerProcess::default()
    }

    /// True only when the canonical path is known to be a regular file now. A recursive
    /// search of a file is a plain read of it; anything else (a directory, a path that does
    /// not exist, nothing known: the default) is searched beneath.
    fn is_regular_file(&self, canonical: &str) -> bool {
        let _ = canonical;
        false
    }

    /// What exists strictly beneath a canonical directory now, for a recursive part: every
    /// entry (not following symlinks) and, for each symlink met, its canonical target and
    /// everything beneath that target. `None` (the default) when it is not known
    /// completely: a directory that cannot be read, more than `limit` paths, no
    /// filesystem at all. Rules then judge by pattern alone.
    fn list_beneath(&self, dir: &str, limit: usize) -> Option<Listing> {
        let _ = (dir, limit);
        None
    }

    /// Whether something exists at this absolute path now (a file, a directory, a link).
    /// Only used to show deny rules the arguments of a command toolgate does not know
    /// (`mytool notes` with a file `notes`); `false` when unknown.
    fn exists(&self, _abs_path: &str) -> bool {
        false
    }
}

/// What exists beneath a directory ([`FsFacts::list_beneath`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Every path strictly beneath the directory (files, directories, links themselves).
    pub entries: Vec<String>,
    /// Canonical targets of the symlinks among them, and every path beneath the targets
    /// that are directories (followed once each).
    pub links: Vec<String>,
}

/// What is known of the server process (see [`FsFacts::server_process`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerProcess {
    /// Its process id.
    pub pid: Option<u32>,
    /// Its root directory (`/proc/<pid>/root`), canonical.
    pub root: Option<String>,
    /// Its working directory (`/proc/<pid>/cwd`), canonical.
    pub cwd: Option<String>,
}

/// No symlinks: canonicalisation is lexical normalisation only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LexicalFs;

impl FsFacts for LexicalFs {
    fn canonicalize(&self, abs_path: &str) -> Option<String> {
        lexical_normalize(abs_path)
    }
}

/// A test fixture: a map of symlinks (`"/w/link" -> "/home/u/.ssh"`; a relative target is
/// resolved against the link's directory) and of paths that cannot be resolved at all
/// (as if permission were denied).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MapFs {
    links: BTreeMap<String, String>,
    unresolvable: Vec<String>,
    server: ServerProcess,
    /// Set for a case-insensitive filesystem: the paths that exist, in their on-disk
    /// spelling. A component that names one of them in other letter case is read as it.
    case_insensitive: Option<Vec<String>>,
    /// Paths that are regular files ([`FsFacts::is_regular_file`]).
    files: Vec<String>,
    /// When set, every path that exists (its directories implied): what
    /// [`FsFacts::list_beneath`] lists.
    tree: Option<Vec<String>>,
    /// Paths that exist ([`FsFacts::exists`]).
    existing: Vec<String>,
}

impl MapFs {
    /// An empty filesystem: no symlinks.
    pub fn new() -> Self {
        MapFs::default()
    }

    /// Adds a symlink at `link` (absolute) pointing to `target` (absolute, or relative to the
    /// link's directory).
    pub fn symlink(mut self, link: &str, target: &str) -> Self {
        let key = lexical_normalize(link).unwrap_or_else(|| link.to_owned());
        self.links.insert(key, target.to_owned());
        self
    }

    /// Marks `path` as existing (see [`FsFacts::exists`]).
    pub fn present(mut self, path: &str) -> Self {
        let key = lexical_normalize(path).unwrap_or_else(|| path.to_owned());
        self.existing.push(key);
        self
    }

    /// Marks a (canonical) path as a regular file.
    pub fn file(mut self, path: &str) -> Self {
        self.files.push(path.to_owned());
        self
    }

    /// Declares the paths that exist (their parent directories too), which makes
    /// [`FsFacts::list_beneath`] answer; symlinks beneath a listed directory are followed.
    pub fn exists(mut self, paths: &[&str]) -> Self {
        let tree = self.tree.get_or_insert_with(Vec::new);
        for p in paths {
            let mut current = String::new();
            for c in p.split('/').filter(|c| !c.is_empty()) {
                current.push('/');
                current.push_str(c);
                if !tree.contains(&current) {
                    tree.push(current.clone());
                }
            }
        }
        self
    }

    /// Marks `path` and everything below it as impossible to canonicalise.
    pub fn unresolvable(mut self, path: &str) -> Self {
        let key = lexical_normalize(path).unwrap_or_else(|| path.to_owned());
        self.unresolvable.push(key);
        self
    }

    /// The server process's pid, root and working directory (for `/proc/self`, …).
    pub fn server(mut self, pid: u32, root: &str, cwd: &str) -> Self {
        self.server = ServerProcess {
            pid: Some(pid),
            root: Some(root.to_owned()),
            cwd: Some(cwd.to_owned()),
        };
        self
    }

    /// Makes the filesystem case-insensitive (like macOS's default): `existing` are the
    /// paths on disk in their real spelling (their parents exist too). Canonicalisation
    /// returns the on-disk spelling of every existing component.
    pub fn case_insensitive(mut self, existing: &[&str]) -> Self {
        let mut all: Vec<String> = Vec::new();
        for path in existing {
            let Some(norm) = lexical_normalize(path) else {
                continue;
            };
            let mut prefix = String::new();
            for component in norm.split('/').filter(|c| !c.is_empty()) {
                prefix.push('/');
                prefix.push_str(component);
                if !all.contains(&prefix) {
                    all.push(prefix.clone());
                }
            }
        }
        self.case_insensitive = Some(all);
        self
    }

    /// The on-disk spelling of a normalised path on a case-insensitive filesystem.
    fn on_disk_spelling(&self, path: &str) -> String {
        let Some(existing) = &self.case_insensitive else {
            return path.to_owned();
        };
        let mut out = String::new();
        let mut exists = true;
        for component in path.split('/').filter(|c| !c.is_empty()) {
            let candidate = format!("{out}/{component}");
            if exists
                && let Some(real) = existing.iter().find(|e| {
                    e.len() == candidate.len()
                        && e.starts_with(&out)
                        && e.eq_ignore_ascii_case(&candidate)
                })
            {
                out = real.clone();
                continue;
            }
            exists = false;
            out = candidate;
        }
        if out.is_empty() {
            out.push('/');
        }
        out
    }

    fn is_unresolvable(&self, path: &str) -> bool {
        self.unresolvable
            .iter()
            .any(|p| path == p || is_strictly_under(path, p))
    }
}

impl FsFacts for MapFs {
    fn canonicalize(&self, abs_path: &str) -> Option<String> {
        let mut current = lexical_normalize(abs_path)?;
        let mut hops = 0usize;
        'restart: loop {
            current = self.on_disk_spelling(&current);
            if self.is_unresolvable(&current) {
                return None;
            }
            // Walk the prefixes from the root; the first one that is a link is replaced by its
            // target and the walk starts again.
            let components: Vec<&str> = current.split('/').filter(|c| !c.is_empty()).collect();
            let mut prefix = String::new();
            for (i, component) in components.iter().enumerate() {
                prefix.push('/');
                prefix.push_str(component);
                if let Some(target) = self.links.get(&prefix) {
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return None;
                    }
                    let parent = parent_of(&prefix);
                    let base = if target.starts_with('/') {
                        target.clone()
                    } else {
                        format!("{parent}/{target}")
                    };
                    let rest = components.get(i + 1..).unwrap_or_default().join("/");
                    let joined = if rest.is_empty() {
                        base
                    } else {
                        format!("{base}/{rest}")
                    };
                    current = lexical_normalize(&joined)?;
                    continue 'restart;
                }
            }
            return Some(current);
        }
    }

    fn server_process(&self) -> ServerProcess {
        self.server.clone()
    }

    fn is_regular_file(&self, canonical: &str) -> bool {
        self.files.iter().any(|f| f == canonical)
    }

    fn list_beneath(&self, dir: &str, limit: usize) -> Option<Listing> {
        let tree = self.tree.as_ref()?;
        let beneath = |d: &str| -> Vec<String> {
            tree.iter()
                .filter(|p| is_strictly_under(p, d))
                .cloned()
                .chain(
                    self.links
                        .keys()
                        .filter(|l| is_strictly_under(l, d))
                        .cloned(),
                )
                .collect()
        };
        let mut listing = Listing {
            entries: beneath(dir),
            links: Vec::new(),
        };
        let mut pending: Vec<String> = listing.entries.clone();
        let mut followed: Vec<String> = Vec::new();
        while let Some(p) = pending.pop() {
            if !self.links.contains_key(&p) {
                continue;
            }
            let target = self.canonicalize(&p)?;
            if followed.contains(&target) {
                continue;
            }
            followed.push(target.clone());
            listing.links.push(target.clone());
            for q in beneath(&target) {
                listing.links.push(q.clone());
                pending.push(q);
            }
            if listing.entries.len() + listing.links.len() > limit {
                return None;
            }
        }
        (listing.entries.len() + listing.links.len() <= limit).then_some(listing)
    }

    fn exists(&self, abs_path: &str) -> bool {
        self.existing.iter().any(|e| e == abs_path)
            || self.files.iter().any(|e| e == abs_path)
            || self
                .tree
                .as_ref()
                .is_some_and(|t| t.iter().any(|e| e == abs_path))
            || self.links.contains_key(abs_path)
            || self
                .case_insensitive
                .as_ref()
                .is_some_and(|all| all.iter().any(|e| e == abs_path))
    }
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "",
        Some(i) => path.get(..i).unwrap_or(""),
    }
}

/// True when `path` is strictly below `dir` (component-wise, both normalised).
fn is_strictly_under(path: &str, dir: &str) -> bool {
    if dir == "/" {
        return path != "/" && path.starts_with('/');
    }
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// Collapses `.`, `..` and repeated `/` of an absolute path, lexically (no symlinks).
/// `..` at the root stays at the root, as in POSIX. Returns `None` for a relative path, an
/// empty one, or one containing a NUL byte. The result has no trailing `/` (except `/`).
pub fn lexical_normalize(path: &str) -> Option<String> {
    if !path.starts_with('/') || path.contains('\0') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    let mut out = String::with_capacity(path.len());
    for part in &parts {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_cases() {
        let cases = [
            ("/", Some("/")),
            ("//", Some("/")),
            ("/a/./b//c/", Some("/a/b/c")),
            ("/a/b/../../..", Some("/")),
            ("/../etc/passwd", Some("/etc/passwd")),
            ("/w/../home/u/.ssh", Some("/home/u/.ssh")),
            ("/a/...", Some("/a/...")),
            ("relative", None),
            ("", None),
            ("/a\0b", None),
        ];
        for (input, want) in cases {
            assert_eq!(lexical_normalize(input).as_deref(), want, "{input:?}");
        }
    }

    #[test]
    fn mapfs_resolves_links_and_loops() {
        let fs = MapFs::new()
            .symlink("/w/link", "/home/u/.ssh")
            .symlink("/w/rel", "../etc")
            .symlink("/loop/a", "/loop/b")
            .symlink("/loop/b", "/loop/a")
            .unresolvable("/secret");
        assert_eq!(
            fs.canonicalize("/w/link/id_rsa").as_deref(),
            Some("/home/u/.ssh/id_rsa")
        );
        assert_eq!(
            fs.canonicalize("/w/rel/passwd").as_deref(),
            Some("/etc/passwd")
        );
        assert_eq!(fs.canonicalize("/w/linkx").as_deref(), Some("/w/linkx"));
        assert_eq!(fs.canonicalize("/loop/a/x"), None);
        assert_eq!(fs.canonicalize("/secret/x"), None);
        assert_eq!(fs.canonicalize("/secretx").as_deref(), Some("/secretx"));
        assert_eq!(LexicalFs.canonicalize("/a/../b").as_deref(), Some("/b"));
    }
}
