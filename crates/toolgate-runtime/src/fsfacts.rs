//! Filesystem facts from the real filesystem, for normalisation (`toolgate_policy::fsfacts`).
//!
//! Canonicalisation uses `soft-canonicalize`: symlinks of the existing prefix are resolved
//! and a missing tail is appended, so a path that does not exist yet (a file about to be
//! written) still gets its real location. Anything that cannot be resolved (a symlink loop,
//! a permission error, a NUL byte, a non-UTF-8 result) is `None`, which normalisation turns
//! into an opaque `unknown` part (fail closed).

use std::sync::OnceLock;

use toolgate_policy::{FsFacts, Listing, ServerProcess, lexical_normalize};

/// The wrapped server's process id, set once by `toolgate wrap` right after it starts the
/// server (one wrap, one server).
static SERVER_PID: OnceLock<u32> = OnceLock::new();

/// Records the server's pid, so that `/proc/self`, `/dev/fd/N` and `/proc/<pid>/cwd` in tool
/// arguments resolve the way the kernel resolves them for the server, not for toolgate.
pub fn set_server_pid(pid: u32) {
    let _ = SERVER_PID.set(pid);
}

/// The real filesystem.
#[derive(Debug, Clone, Copy, Default)]
pub struct SoftFs;

impl SoftFs {
    /// A magic link of the server's `/proc` directory (`root`, `cwd`), read now: the server
    /// may have changed its working directory since it started.
    fn server_link(pid: u32, name: &str) -> Option<String> {
        let target = std::fs::read_link(format!("/proc/{pid}/{name}")).ok()?;
        let text = target.to_str()?;
        // A deleted directory reads as `/path (deleted)`: not a place to resolve against.
        if !text.starts_with('/') || text.ends_with(" (deleted)") {
            return None;
        }
        lexical_normalize(text)
    }
}

impl FsFacts for SoftFs {
    fn server_process(&self) -> ServerProcess {
        let Some(&pid) = SERVER_PID.get() else {
            return ServerProcess::default();
        };
        ServerProcess {
            pid: Some(pid),
            root: Self::server_link(pid, "root"),
            cwd: Self::server_link(pid, "cwd"),
        }
    }

    fn is_regular_file(&self, canonical: &str) -> bool {
        std::fs::metadata(canonical).is_ok_and(|m| m.is_file())
    }

    fn list_beneath(&self, dir: &str, limit: usize) -> Option<Listing> {
        list_beneath(dir, limit)
    }

    fn canonicalize(&self, abs_path: &str) -> Option<String> {
        if abs_path.contains('\0') || !abs_path.starts_with('/') {
            return None;
        }
        let lexical = lexical_normalize(abs_path)?;
        let real = soft_canonicalize::soft_canonicalize(&lexical).ok()?;
        let text = real.to_str()?;
        let canonical = lexical_normalize(text)?;
        // The same path, and it exists: no symlink on the way. Otherwise (a symlink, or a
        // missing or dangling part, which may be a link that is dangling only for toolgate)
        // walk it once more.
        let plain = canonical == lexical && std::fs::symlink_metadata(&canonical).is_ok();
        if !plain && let Some(through) = through_magic_link(&lexical) {
            // A symlink leads into `/proc` or `/dev/fd`: resolved here, that would be
            // toolgate's process. The caller reads the rest for the server.
            return Some(through);
        }
        Some(canonical)
    }

    fn exists(&self, abs_path: &str) -> bool {
        abs_path.starts_with('/') && std::fs::symlink_metadata(abs_path).is_ok()
    }
}

/// Everything beneath `dir` (see [`FsFacts::list_beneath`]): a walk that never follows a
/// symlink in place but records its canonical target and walks a target directory once
/// (into `links`; a dangling target is recorded where it points). `None` on any directory
/// it cannot read, a name that is not UTF-8, a link whose target cannot be resolved, or more
/// than `limit` paths: then rules judge by pattern.
fn list_beneath(dir: &str, limit: usize) -> Option<Listing> {
    let mut listing = Listing::default();
    if std::fs::symlink_metadata(dir).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        // Nothing is there: nothing beneath it either.
        return Some(listing);
    }
    let mut followed: std::collections::HashSet<String> = std::collections::HashSet::new();
    // (directory, reached through a link)
    let mut pending: Vec<(String, bool)> = vec![(dir.to_owned(), false)];
    followed.insert(dir.to_owned());
    while let Some((current, via_link)) = pending.pop() {
        for entry in std::fs::read_dir(&current).ok()? {
            let entry = entry.ok()?;
            let name = entry.file_name().into_string().ok()?;
            let path = if current == "/" {
                format!("/{name}")
            } else {
                format!("{current}/{name}")
            };
            let kind = entry.file_type().ok()?;
            if via_link {
                listing.links.push(path.clone());
            } else {
                listing.entries.push(path.clone());
            }
            if listing.entries.len() + listing.links.len() > limit {
                return None;
            }
            if kind.is_symlink() {
                // Where it points, a dangling target included (it may appear later).
                let target = SoftFs.canonicalize(&path)?;
                if followed.insert(target.clone()) {
                    listing.links.push(target.clone());
                    if std::fs::metadata(&target).is_ok_and(|m| m.is_dir()) {
                        pending.push((target, true));
                    }
                }
            } else if kind.is_dir() {
                pending.push((path, via_link));
            }
        }
    }
    Some(listing)
}

/// How many symlinks [`through_magic_link`] follows.
const MAX_LINKS: usize = 40;

/// True for a path at which the kernel's reading depends on the process that opens it.
fn is_magic(path: &str) -> bool {
    let mut parts = path.split('/').filter(|c| !c.is_empty());
    match (parts.next(), parts.next(), parts.next()) {
        (Some("dev"), Some("fd" | "stdin" | "stdout" | "stderr"), _) => true,
        (Some("proc"), Some("self" | "thread-self"), _) => true,
        (Some("proc"), Some(pid), Some(_)) => pid.bytes().all(|b| b.is_ascii_digit()),
        _ => false,
    }
}

/// Walks `path` (absolute, normalised) the way the kernel does, following symlinks; when a
/// symlink's target reaches a magic link (`/proc/self/…`, `/proc/<pid>/…`, `/dev/fd/…`),
/// returns that target followed by the rest of the path, unresolved (`..` kept). `None`: no
/// symlink leads there (or the walk cannot tell: a missing component, a loop).
fn through_magic_link(path: &str) -> Option<String> {
    let mut pending: std::collections::VecDeque<String> = path
        .split('/')
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect();
    let mut current = "/".to_owned();
    let mut links = 0usize;
    while let Some(component) = pending.pop_front() {
        match component.as_str() {
            "." => continue,
            ".." => {
                current = match current.rfind('/') {
                    Some(0) | None => "/".to_owned(),
                    Some(i) => current.get(..i).unwrap_or("/").to_owned(),
                };
                continue;
            }
            _ => {}
        }
        let next = if current == "/" {
            format!("/{component}")
        } else {
            format!("{current}/{component}")
        };
        if links > 0 && is_magic(&next) {
            let mut out = next;
            for rest in pending {
                out.push('/');
                out.push_str(&rest);
            }
            return Some(out);
        }
        let meta = std::fs::symlink_metadata(&next).ok()?;
        if !meta.file_type().is_symlink() {
            current = next;
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return None;
        }
        let target = std::fs::read_link(&next).ok()?;
        let target = target.to_str()?;
        if target.starts_with('/') {
            current = "/".to_owned();
        }
        for part in target.split('/').filter(|c| !c.is_empty()).rev() {
            pending.push_front(part.to_owned());
        }
    }
    None
}

/// Canonicalises a directory given on the command line (`--workspace`, `--home`): made
/// absolute against the current directory, then resolved like any other path.
pub fn canonical_dir(path: &std::path::Path) -> anyhow::Result<String> {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    let text = abs
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("path `{}` is not valid UTF-8", abs.display()))?;
    SoftFs
        .canonicalize(text)
        .ok_or_else(|| anyhow::anyhow!("cannot resolve `{}`", abs.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_symlinks_and_appends_missing_tail() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let target = root.join("secret");
        std::fs::create_dir(&target).unwrap();
        let link = root.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let got = SoftFs
            .canonicalize(&format!("{}/new/file.txt", link.display()))
            .unwrap();
        assert_eq!(got, format!("{}/new/file.txt", target.display()));
        // Dot-dot is collapsed lexically before resolution.
        let got = SoftFs
            .canonicalize(&format!("{}/x/../secret", root.display()))
            .unwrap();
        assert_eq!(got, target.display().to_string());
    }

    #[test]
    fn lists_beneath_and_follows_links_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let w = root.join("w");
        let secrets = root.join("secrets");
        std::fs::create_dir_all(w.join("src")).unwrap();
        std::fs::create_dir_all(&secrets).unwrap();
        std::fs::write(w.join("src/main.rs"), "").unwrap();
        std::fs::write(secrets.join("id_rsa"), "").unwrap();
        std::os::unix::fs::symlink(&secrets, w.join("s")).unwrap();
        std::os::unix::fs::symlink(&w, secrets.join("back")).unwrap();
        std::os::unix::fs::symlink(root.join("nowhere"), w.join("dangling")).unwrap();
        let at = |p: &std::path::Path| p.display().to_string();
        let l = SoftFs.list_beneath(&at(&w), 100).unwrap();
        let mut entries = l.entries.clone();
        entries.sort();
        assert_eq!(
            entries,
            vec![
                at(&w.join("dangling")),
                at(&w.join("s")),
                at(&w.join("src")),
                at(&w.join("src/main.rs"))
            ]
        );
        assert!(l.links.contains(&at(&secrets)), "{l:?}");
        assert!(l.links.contains(&at(&secrets.join("id_rsa"))), "{l:?}");
        assert!(l.links.contains(&at(&root.join("nowhere"))), "{l:?}");
        // The link back into `w` is not walked again (the listing ends).
        assert!(!l.links.contains(&at(&w.join("src/main.rs"))), "{l:?}");
        // Past the limit: not known.
        assert_eq!(SoftFs.list_beneath(&at(&w), 3), None);
        // A directory that does not exist holds nothing.
        assert_eq!(
            SoftFs.list_beneath(&at(&w.join("missing")), 3),
            Some(Listing::default())
        );
        assert!(SoftFs.is_regular_file(&at(&w.join("src/main.rs"))));
        assert!(!SoftFs.is_regular_file(&at(&w.join("src"))));
    }

    #[test]
    fn symlinks_into_proc_are_left_for_the_server_reading() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::os::unix::fs::symlink("/proc/self/cwd/../x", root.join("l")).unwrap();
        std::os::unix::fs::symlink("/dev/fd/3", root.join("fd")).unwrap();
        let got = SoftFs.canonicalize(&format!("{}/l/y", root.display()));
        assert_eq!(got.as_deref(), Some("/proc/self/cwd/../x/y"));
        let got = SoftFs.canonicalize(&format!("{}/fd", root.display()));
        assert_eq!(got.as_deref(), Some("/dev/fd/3"));
        // No symlink: unchanged.
        let plain = format!("{}/plain/file", root.display());
        assert_eq!(SoftFs.canonicalize(&plain), Some(plain));
    }

    #[test]
    fn loops_and_nul_are_unresolvable() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let a = root.join("a");
        let b = root.join("b");
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        assert_eq!(SoftFs.canonicalize(&format!("{}/x", a.display())), None);
        assert_eq!(SoftFs.canonicalize("/tmp/a\0b"), None);
        assert_eq!(SoftFs.canonicalize("relative/path"), None);
    }
}
