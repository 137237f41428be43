//! Where the broker lives and who may talk to it: the per-user directory, the socket, the
//! token file, and the ownership / mode / peer checks that guard them; and where a
//! workspace's audit log is by default.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use crate::fsutil::{self, WriteError};

/// A workspace's audit log, relative to the workspace: the default of `wrap`, `serve`, the
/// broker's hooks, `report` and `audit`.
pub const DEFAULT_AUDIT: &str = ".toolgate/audit.jsonl";

/// The default audit log of `workspace` ([`DEFAULT_AUDIT`] in it).
pub fn default_audit(workspace: &Path) -> PathBuf {
    workspace.join(DEFAULT_AUDIT)
}

/// The socket's file name inside the broker directory.
pub const SOCKET_NAME: &str = "broker.sock";
/// The token's file name inside the broker directory.
pub const TOKEN_NAME: &str = "token";
/// The file name of the agent sessions' durable state inside the broker directory.
pub const STORE_NAME: &str = "sessions.redb";
/// The file name of the key of the digests of what the user typed (kept across restarts,
/// like the sessions whose digests it made).
pub const VOUCH_KEY_NAME: &str = "vouch.key";
/// Overrides the broker directory (tests, unusual setups).
pub const DIR_ENV: &str = "TOOLGATE_BROKER_DIR";
/// `sun_path` holds 108 bytes on Linux (104 on the BSDs), including the NUL.
const SUN_PATH_MAX: usize = 104;
/// The token length in bytes.
pub const TOKEN_BYTES: usize = 32;

/// The broker's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub token: PathBuf,
    /// The agent sessions' state (`toolgate_store::EmbeddedStore`, 0600).
    pub store: PathBuf,
    /// The key of the digests of what the user typed (0600, made once).
    pub vouch_key: PathBuf,
}

impl Layout {
    /// The files inside `dir`.
    pub fn in_dir(dir: PathBuf) -> Layout {
        Layout {
            socket: dir.join(SOCKET_NAME),
            token: dir.join(TOKEN_NAME),
            store: dir.join(STORE_NAME),
            vouch_key: dir.join(VOUCH_KEY_NAME),
            dir,
        }
    }

    /// The layout for this user: `$TOOLGATE_BROKER_DIR`, else `$XDG_RUNTIME_DIR/toolgate`,
    /// else `<tmp>/toolgate-<uid>`; when the socket path would not fit in `sun_path`,
    /// `/tmp/toolgate-<uid>`.
    pub fn for_user() -> Layout {
        let uid = rustix::process::geteuid().as_raw();
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let dir = var(DIR_ENV)
            .or_else(|| var("XDG_RUNTIME_DIR").map(|d| d.join("toolgate")))
            .unwrap_or_else(|| std::env::temp_dir().join(format!("toolgate-{uid}")));
        let layout = Layout::in_dir(dir);
        if layout.socket.as_os_str().len() < SUN_PATH_MAX {
            layout
        } else {
            Layout::in_dir(PathBuf::from(format!("/tmp/toolgate-{uid}")))
        }
    }
}

/// Why the broker's files cannot be trusted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Unsafe {
    #[error("`{path}` is owned by uid {owner}, not by you (uid {me})")]
    Owner { path: String, owner: u32, me: u32 },
    #[error("`{path}` is group- or world-writable (mode {mode:04o})")]
    Writable { path: String, mode: u32 },
    #[error("`{path}` is readable by others (mode {mode:04o}, expected 0600)")]
    Readable { path: String, mode: u32 },
    #[error("`{path}` is not a {expected} (a symlink or something else is in its place)")]
    Kind {
        path: String,
        expected: &'static str,
    },
    #[error("`{path}`: {message}")]
    Io { path: String, message: String },
}

fn io_err(path: &Path, e: &std::io::Error) -> Unsafe {
    Unsafe::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Checks a directory's owner and mode: owned by `me`, a real directory, no group/world
/// write bit. (Read/search bits for others are reported by `toolgate status`.)
pub fn check_dir_meta(path: &Path, meta: &std::fs::Metadata, me: u32) -> Result<(), Unsafe> {
    check_owned(path, meta, me, true)
}

/// Checks a secret file (the token): a regular file owned by `me`, mode 0600 or stricter.
pub fn check_secret_meta(path: &Path, meta: &std::fs::Metadata, me: u32) -> Result<(), Unsafe> {
    check_owned(path, meta, me, false)
}

/// A directory (`dir`) or a secret file owned by `me` that others cannot write (a
/// directory) or read or write (a secret file).
fn check_owned(path: &Path, meta: &std::fs::Metadata, me: u32, dir: bool) -> Result<(), Unsafe> {
    let shown = path.display().to_string();
    let (is_kind, expected) = if dir {
        (meta.file_type().is_dir(), "directory")
    } else {
        (meta.file_type().is_file(), "regular file")
    };
    if !is_kind {
        return Err(Unsafe::Kind {
            path: shown,
            expected,
        });
    }
    if meta.uid() != me {
        return Err(Unsafe::Owner {
            path: shown,
            owner: meta.uid(),
            me,
        });
    }
    let mode = meta.mode() & 0o7777;
    match (dir, mode) {
        (true, m) if m & 0o022 != 0 => Err(Unsafe::Writable { path: shown, mode }),
        (false, m) if m & 0o077 != 0 => Err(Unsafe::Readable { path: shown, mode }),
        _ => Ok(()),
    }
}

/// The peer check: a connection is served only when its uid is the broker's own.
pub fn peer_allowed(peer_uid: u32, me: u32) -> bool {
    peer_uid == me
}

/// The effective uid of this process.
pub fn my_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Creates the directory (0700) if missing, then checks it. Refuses a directory owned by
/// someone else or writable by group/world; tightens group/world read bits on our own.
pub fn prepare_dir(dir: &Path) -> Result<(), Unsafe> {
    let me = my_uid();
    match std::fs::symlink_metadata(dir) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut builder = std::fs::DirBuilder::new();
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            if let Err(e) = builder.recursive(true).create(dir) {
                return Err(io_err(dir, &e));
            }
        }
        Err(e) => return Err(io_err(dir, &e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| io_err(dir, &e))?;
    check_dir_meta(dir, &meta, me)?;
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| io_err(dir, &e))?;
    }
    Ok(())
}

/// Checks an existing directory without changing it (clients).
pub fn check_dir(dir: &Path) -> Result<(), Unsafe> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| io_err(dir, &e))?;
    check_dir_meta(dir, &meta, my_uid())
}

/// Writes a fresh random token (hex) to `path` with mode 0600, atomically (temp + rename).
pub fn write_token(path: &Path) -> anyhow::Result<[u8; TOKEN_BYTES]> {
    let mut token = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut token)
        .map_err(|e| anyhow::anyhow!("no randomness from the operating system: {e}"))?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    // The temporary name is per process id: one left by a crashed process is stale.
    let _ = std::fs::remove_file(&tmp);
    fsutil::write_private(&tmp, path, hex::encode(token).as_bytes()).map_err(|e| match e {
        WriteError::Create(e) => anyhow::anyhow!("cannot create `{}`: {e}", tmp.display()),
        WriteError::Write(e) => anyhow::anyhow!("cannot write `{}`: {e}", tmp.display()),
        WriteError::Rename(e) => anyhow::anyhow!("cannot install `{}`: {e}", path.display()),
    })?;
    Ok(token)
}

/// Reads the token, refusing a file that is not ours or is readable by others.
pub fn read_token(path: &Path) -> Result<[u8; TOKEN_BYTES], Unsafe> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| io_err(path, &e))?;
    check_secret_meta(path, &meta, my_uid())?;
    let text = std::fs::read_to_string(path).map_err(|e| io_err(path, &e))?;
    let bytes = hex::decode(text.trim()).map_err(|_| Unsafe::Io {
        path: path.display().to_string(),
        message: "the token is not hex".to_owned(),
    })?;
    <[u8; TOKEN_BYTES]>::try_from(bytes.as_slice()).map_err(|_| Unsafe::Io {
        path: path.display().to_string(),
        message: format!("the token is not {TOKEN_BYTES} bytes"),
    })
}

/// The key of the digests of what the user typed: read from `path`, or made (32 random bytes,
/// 0600) when there is none yet. Kept across broker restarts, like the digests it made.
pub fn vouch_key(path: &Path) -> anyhow::Result<[u8; TOKEN_BYTES]> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => write_token(path),
        _ => read_token(path).map_err(|e| anyhow::anyhow!("{e}")),
    }
}

/// Compares two tokens in constant time.
pub fn token_matches(given: &[u8], expected: &[u8; TOKEN_BYTES]) -> bool {
    use subtle::ConstantTimeEq as _;
    given.len() == TOKEN_BYTES && bool::from(given.ct_eq(expected.as_slice()))
}

/// `mode owner` of a path, for `toolgate status`.
pub fn describe(path: &Path) -> String {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => format!(
            "mode {:04o}, owner uid {}",
            meta.mode() & 0o7777,
            meta.uid()
        ),
        Err(e) => format!("missing ({e})"),
    }
}

/// The workspace a `wrap` or `serve` runs for: `dir` (its `--workspace`), else the current
/// directory; it must be a directory.
pub fn workspace_or_cwd(dir: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    use anyhow::Context as _;
    let workspace = match dir {
        Some(dir) => dir,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    anyhow::ensure!(
        workspace.is_dir(),
        "workspace `{}` is not a directory",
        workspace.display()
    );
    Ok(workspace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_checks_refuse_foreign_and_writable() {
        let dir = tempfile::tempdir().unwrap();
        let me = my_uid();
        let d = dir.path().join("b");
        prepare_dir(&d).unwrap();
        let meta = std::fs::metadata(&d).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
        assert!(check_dir_meta(&d, &meta, me).is_ok());
        // Owned by someone else.
        let err = check_dir_meta(&d, &meta, me.wrapping_add(1)).unwrap_err();
        assert!(matches!(err, Unsafe::Owner { .. }), "{err}");
        // Group/world writable.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = prepare_dir(&d).unwrap_err();
        assert!(err.to_string().contains("world-writable"), "{err}");
        // Readable by others only: tightened back to 0700.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        prepare_dir(&d).unwrap();
        assert_eq!(std::fs::metadata(&d).unwrap().mode() & 0o777, 0o700);
        // A symlink in its place.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&d, &link).unwrap();
        assert!(matches!(check_dir(&link), Err(Unsafe::Kind { .. })));
    }

    #[test]
    fn token_round_trip_and_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let token = write_token(&path).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().mode() & 0o777,
            0o600,
            "token mode"
        );
        assert_eq!(read_token(&path).unwrap(), token);
        assert!(token_matches(&token, &token));
        let mut other = token;
        other[31] ^= 1;
        assert!(!token_matches(&other, &token));
        assert!(!token_matches(&token[..31], &token));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(read_token(&path), Err(Unsafe::Readable { .. })));
    }

    #[test]
    fn peer_check_and_long_paths() {
        assert!(peer_allowed(1000, 1000));
        assert!(!peer_allowed(0, 1000));
        assert!(!peer_allowed(1001, 1000));
        let short = Layout::in_dir(PathBuf::from("/run/user/1000/toolgate"));
        assert!(short.socket.ends_with("broker.sock"));
    }
}
