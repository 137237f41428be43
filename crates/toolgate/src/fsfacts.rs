//! Filesystem facts from the real filesystem, for normalisation (`toolgate_policy::fsfacts`).
//!
//! Canonicalisation uses `soft-canonicalize`: symlinks of the existing prefix are resolved
//! and a missing tail is appended, so a path that does not exist yet (a file about to be
//! written) still gets its real location. Anything that cannot be resolved (a symlink loop,
//! a permission error, a NUL byte, a non-UTF-8 result) is `None`, which normalisation turns
//! into an opaque `unknown` part (fail closed).

use std::sync::OnceLock;

use toolgate_policy::fsfacts::{FsFacts, ServerProcess, lexical_normalize};

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

    fn canonicalize(&self, abs_path: &str) -> Option<String> {
        if abs_path.contains('\0') || !abs_path.starts_with('/') {
            return None;
        }
        let lexical = lexical_normalize(abs_path)?;
        let real = soft_canonicalize::soft_canonicalize(&lexical).ok()?;
        let text = real.to_str()?;
        lexical_normalize(text)
    }
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
