//! Filesystem facts from the real filesystem, for normalisation (`toolgate_policy::fsfacts`).
//!
//! Canonicalisation uses `soft-canonicalize`: symlinks of the existing prefix are resolved
//! and a missing tail is appended, so a path that does not exist yet (a file about to be
//! written) still gets its real location. Anything that cannot be resolved (a symlink loop,
//! a permission error, a NUL byte, a non-UTF-8 result) is `None`, which normalisation turns
//! into an opaque `unknown` part (fail closed).

use toolgate_policy::fsfacts::{FsFacts, lexical_normalize};

/// The real filesystem.
#[derive(Debug, Clone, Copy, Default)]
pub struct SoftFs;

impl FsFacts for SoftFs {
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
