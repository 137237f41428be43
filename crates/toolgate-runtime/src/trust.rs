//! The policy in the working directory, and when an enforcing command may use it.
//!
//! Without `--policy`, every command takes `./toolgate.yaml` when it exists. The commands
//! that only read or explain (`policy check|explain|test`, `report`, `doctor`, `serve`) take
//! it as it is. The commands that enforce (`wrap`, `hook`) take it only when the person
//! has trusted exactly that content (`toolgate policy trust`, or `policy init` that wrote
//! it): a file in the working directory may come from a cloned repository, or from the
//! agent, and must not choose the policy that governs the agent. An untrusted one is not
//! skipped either (the starter could allow what the file meant to deny): every call is
//! denied with the reason and the fix, as for a policy that does not load.
//!
//! The trusted policies are a list of (canonical path, SHA-256 of the content) in the user's
//! data directory, beside the pins, protected from the agent as toolgate's own files.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The policy file commands look for in the working directory.
pub const DEFAULT_POLICY: &str = "toolgate.yaml";

/// The most policies kept trusted; the oldest go first.
const MAX_TRUSTED: usize = 256;

/// The largest policy read (a policy is a few KiB; a FIFO or a device never ends).
pub const MAX_POLICY_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustList {
    version: u32,
    policies: Vec<Trusted>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Trusted {
    path: String,
    sha256: String,
}

/// A policy file chosen without `--policy`: where it is and the digest of the content read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HerePolicy {
    /// The canonical path of `./toolgate.yaml` (symlinks resolved).
    pub path: PathBuf,
    /// The hex SHA-256 of its content as read.
    pub sha256: String,
    /// Its content as read.
    pub source: String,
}

/// The list of trusted policies: `$XDG_DATA_HOME/toolgate/trusted-policies.json`, else
/// `~/.local/share/toolgate/trusted-policies.json`.
pub fn trust_file() -> Option<PathBuf> {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(data) = non_empty("XDG_DATA_HOME").map(PathBuf::from)
        && data.is_absolute()
    {
        return Some(data.join("toolgate/trusted-policies.json"));
    }
    non_empty("HOME").map(|h| PathBuf::from(h).join(".local/share/toolgate/trusted-policies.json"))
}

/// The hex SHA-256 of a policy's content.
pub fn digest(source: &str) -> String {
    hex::encode(Sha256::digest(source.as_bytes()))
}

/// Reads a policy file: a regular file (symlinks followed) of at most [`MAX_POLICY_BYTES`].
/// `Err` is a reason.
pub fn read_file(path: &Path) -> Result<String, String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    // Non-blocking: opening a FIFO to read would wait for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("the policy `{}` cannot be read ({e})", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("the policy `{}` cannot be read ({e})", path.display()))?;
    if !meta.is_file() {
        return Err(format!(
            "the policy `{}` is not a regular file",
            path.display()
        ));
    }
    let mut source = String::new();
    file.take(MAX_POLICY_BYTES + 1)
        .read_to_string(&mut source)
        .map_err(|e| format!("the policy `{}` cannot be read ({e})", path.display()))?;
    if source.len() as u64 > MAX_POLICY_BYTES {
        return Err(format!(
            "the policy `{}` is larger than {} MiB",
            path.display(),
            MAX_POLICY_BYTES / (1024 * 1024)
        ));
    }
    Ok(source)
}

/// `./toolgate.yaml` of `cwd` when it exists, read. `Ok(None)`: there is none.
pub fn here(cwd: &Path) -> Result<Option<HerePolicy>, String> {
    let path = cwd.join(DEFAULT_POLICY);
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "the policy `{}` cannot be read ({e})",
                path.display()
            ));
        }
        Ok(_) => {}
    }
    let canonical = std::fs::canonicalize(&path)
        .map_err(|e| format!("the policy `{}` cannot be resolved ({e})", path.display()))?;
    let source = read_file(&canonical)?;
    Ok(Some(HerePolicy {
        path: canonical,
        sha256: digest(&source),
        source,
    }))
}

fn read_list(file: &Path) -> Result<TrustList, String> {
    match std::fs::read(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TrustList {
            version: 1,
            policies: Vec::new(),
        }),
        Err(e) => Err(format!(
            "the list of trusted policies `{}` cannot be read ({e})",
            file.display()
        )),
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "the list of trusted policies `{}` is damaged ({e}). help: remove it and trust your policies again",
                file.display()
            )
        }),
    }
}

fn list_file() -> Result<PathBuf, String> {
    trust_file().ok_or_else(|| "no home directory (`$HOME`) to keep trusted policies in".to_owned())
}

/// Whether the content with digest `sha256` at the canonical `path` is trusted.
pub fn is_trusted(path: &Path, sha256: &str) -> Result<bool, String> {
    is_trusted_in(&list_file()?, path, sha256)
}

fn is_trusted_in(file: &Path, path: &Path, sha256: &str) -> Result<bool, String> {
    let list = read_list(file)?;
    let path = path.to_string_lossy();
    Ok(list
        .policies
        .iter()
        .any(|t| t.path == path && t.sha256 == sha256))
}

/// Trusts the content `source` of the policy at the canonical `path` (it replaces what was
/// trusted for that path before). Returns the list's file.
pub fn trust(path: &Path, source: &str) -> Result<PathBuf, String> {
    let file = list_file()?;
    trust_in(&file, path, source)?;
    Ok(file)
}

fn trust_in(file: &Path, path: &Path, source: &str) -> Result<(), String> {
    let dir = file
        .parent()
        .ok_or("the list of trusted policies has no directory")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create `{}` ({e})", dir.display()))?;
    let _lock = lock_list(file)?;
    let mut list = read_list(file)?;
    let shown = path.to_string_lossy().into_owned();
    list.version = 1;
    list.policies.retain(|t| t.path != shown);
    list.policies.push(Trusted {
        path: shown,
        sha256: digest(source),
    });
    let excess = list.policies.len().saturating_sub(MAX_TRUSTED);
    list.policies.drain(..excess);
    write_list(file, &list)
}

/// The lock every change of the list is made under (held until dropped).
fn lock_list(file: &Path) -> Result<std::fs::File, String> {
    crate::fsutil::lock(&file.with_extension("json.lock")).map_err(|e| {
        let (crate::fsutil::LockError::Open(e) | crate::fsutil::LockError::Lock(e)) = e;
        format!("cannot lock the list of trusted policies ({e})")
    })
}

fn write_list(file: &Path, list: &TrustList) -> Result<(), String> {
    let mut bytes = serde_json::to_vec_pretty(list).map_err(|e| e.to_string())?;
    bytes.push(b'\n');
    let tmp = file.with_extension(format!("json.{}.tmp", std::process::id()));
    crate::fsutil::write_private(&tmp, file, &bytes).map_err(|e| {
        format!(
            "cannot write `{}` ({})",
            file.display(),
            std::io::Error::from(e)
        )
    })
}

/// The policy an enforcing command started in `cwd` without `--policy` uses: `Ok(None)` is
/// the built-in starter (there is no `./toolgate.yaml`, and none was trusted there),
/// `Ok(Some)` a trusted `./toolgate.yaml`, and `Err` the reason every call is denied (it is
/// there but not trusted as it is, it cannot be read, or one trusted there is gone: falling
/// back to the starter would let a deleted policy stop governing).
pub fn enforcing_default(cwd: &Path) -> Result<Option<HerePolicy>, String> {
    match list_file() {
        Ok(list) => default_with(&list, cwd),
        Err(e) => match here(cwd) {
            Ok(None) => Ok(None),
            Ok(Some(_)) => Err(format!("{e}. help: pass --policy PATH")),
            Err(e) => Err(format!("{e}. help: fix it, or pass --policy PATH")),
        },
    }
}

fn default_with(list: &Path, cwd: &Path) -> Result<Option<HerePolicy>, String> {
    let here = here(cwd).map_err(|e| format!("{e}. help: fix it, or pass --policy PATH"))?;
    let Some(here) = here else {
        let expected = canonical_even_if_gone(&cwd.join(DEFAULT_POLICY));
        let shown = expected.to_string_lossy();
        let listed = read_list(list)
            .map_err(|e| format!("{e}. help: pass --policy PATH"))?
            .policies
            .iter()
            .any(|t| t.path == shown);
        if listed {
            return Err(format!(
                "the policy `{shown}` you trusted is gone, so toolgate denies every call rather than fall back to the built-in starter. help: restore it, or run `toolgate policy trust --forget` in `{}` to use the starter there again, or pass --policy PATH",
                cwd.display()
            ));
        }
        return Ok(None);
    };
    let trusted = is_trusted_in(list, &here.path, &here.sha256);
    judge(here, trusted, cwd)
}

/// Forgets what was trusted for the policy at `path` (it may be gone). Returns whether
/// there was anything to forget.
pub fn forget(path: &Path) -> Result<bool, String> {
    let file = list_file()?;
    let _lock = lock_list(&file)?;
    let mut list = read_list(&file)?;
    let shown = canonical_even_if_gone(path).to_string_lossy().into_owned();
    let before = list.policies.len();
    list.policies.retain(|t| t.path != shown);
    if list.policies.len() == before {
        return Ok(false);
    }
    write_list(&file, &list)?;
    Ok(true)
}

/// `path` with its directory resolved (the file itself may be gone).
pub fn canonical_even_if_gone(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match (std::fs::canonicalize(dir), path.file_name()) {
        (Ok(dir), Some(name)) => dir.join(name),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
    }
}

/// The policy files trusted (each is one of toolgate's own files: the agent may not change
/// what a `wrap` or `hook` would take without --policy). Empty when there is no list.
pub fn trusted_paths() -> Vec<PathBuf> {
    list_file()
        .and_then(|file| read_list(&file))
        .map(|list| {
            list.policies
                .into_iter()
                .map(|t| PathBuf::from(t.path))
                .collect()
        })
        .unwrap_or_default()
}

fn judge(
    here: HerePolicy,
    trusted: Result<bool, String>,
    cwd: &Path,
) -> Result<Option<HerePolicy>, String> {
    match trusted {
        Ok(true) => Ok(Some(here)),
        Ok(false) => Err(format!(
            "the policy `{}` in the working directory is not trusted as it is, so toolgate denies every call rather than guess (a policy file found there is used without --policy only once you trust its content: a cloned repository or the agent could have put it there or changed it). help: review it and run `toolgate policy trust` in `{}`, or pass --policy PATH",
            here.path.display(),
            cwd.display()
        )),
        Err(e) => Err(format!("{e}. help: pass --policy PATH")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_here_is_used_only_as_trusted() {
        let data = tempfile::tempdir().unwrap();
        let list = data.path().join("toolgate/trusted-policies.json");
        let default_in = |cwd: &Path| default_with(&list, cwd);
        let cwd = tempfile::tempdir().unwrap();
        // None here: the starter.
        assert_eq!(default_in(cwd.path()), Ok(None));
        let file = cwd.path().join(DEFAULT_POLICY);
        std::fs::write(&file, "version: 1\n").unwrap();
        let err = default_in(cwd.path()).unwrap_err();
        assert!(
            err.contains("is not trusted as it is") && err.contains("toolgate policy trust"),
            "{err}"
        );
        let canonical = std::fs::canonicalize(&file).unwrap();
        trust_in(&list, &canonical, "version: 1\n").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&list).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let here = default_in(cwd.path()).unwrap().unwrap();
        assert_eq!(
            (here.path.as_path(), here.source.as_str()),
            (canonical.as_path(), "version: 1\n")
        );
        // Changed: no longer trusted.
        std::fs::write(&file, "version: 1\ndefault: allow\n").unwrap();
        assert!(default_in(cwd.path()).is_err());
        // Trusted again, the old content is not: one entry per path.
        trust_in(&list, &canonical, "version: 1\ndefault: allow\n").unwrap();
        assert!(default_in(cwd.path()).is_ok());
        std::fs::write(&file, "version: 1\n").unwrap();
        assert!(default_in(cwd.path()).is_err());
        // The same content elsewhere is not trusted.
        let other = tempfile::tempdir().unwrap();
        std::fs::write(
            other.path().join(DEFAULT_POLICY),
            "version: 1\ndefault: allow\n",
        )
        .unwrap();
        assert!(default_in(other.path()).is_err());
        // A symlink is judged as the file it names.
        let linked = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(&file, linked.path().join(DEFAULT_POLICY)).unwrap();
        trust_in(&list, &canonical, "version: 1\n").unwrap();
        assert!(default_in(linked.path()).unwrap().is_some());
        // Gone after it was trusted: denied, not the starter.
        std::fs::remove_file(&file).unwrap();
        let err = default_in(cwd.path()).unwrap_err();
        assert!(err.contains("you trusted is gone"), "{err}");
        std::fs::write(&file, "version: 1\n").unwrap();
        // A FIFO is refused, not waited on.
        std::fs::remove_file(&file).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&file)
            .status()
            .unwrap();
        assert!(made.success());
        let err = default_in(cwd.path()).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        // A damaged list denies, with the fix.
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, "version: 1\n").unwrap();
        std::fs::write(&list, "{").unwrap();
        let err = default_in(cwd.path()).unwrap_err();
        assert!(err.contains("is damaged"), "{err}");
    }
}
