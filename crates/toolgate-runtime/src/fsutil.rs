//! toolgate's own private files: the one atomic write (a 0600 temporary file, fsynced, renamed
//! over the target) that its state is kept with (the broker token, pins, OAuth credentials).
//!
//! It lives here, not lower, because every user (runtime, broker, the executables) depends on
//! this crate. `toolgate-clients`' write (below this crate) stays its own on purpose: it
//! replaces a user's configuration file keeping its mode, with a backup and a
//! compare-before-rename, a different operation.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// Which step of [`write_private`] failed.
#[derive(Debug)]
pub enum WriteError {
    /// Creating the temporary file (it existed, or the directory refused).
    Create(std::io::Error),
    /// Writing or fsyncing the temporary file.
    Write(std::io::Error),
    /// Renaming it over the target.
    Rename(std::io::Error),
}

impl From<WriteError> for std::io::Error {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Create(e) | WriteError::Write(e) | WriteError::Rename(e) => e,
        }
    }
}

/// Writes `bytes` to `path` so that a reader sees the old content or the new one, never half,
/// and nobody else can read it: `tmp` is created new (mode 0600; never a file someone else
/// prepared), written, fsynced, then renamed over `path`. On failure `tmp` is removed.
///
/// `tmp` must be in `path`'s directory (a rename is atomic only within one file system) and
/// unique to this process; a caller whose temporary name can be left over by a crashed
/// process of the same id removes it first. The directory is not fsynced: a caller that needs
/// the rename itself durable calls [`sync_dir`].
pub fn write_private(tmp: &Path, path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let written =
        write_new(tmp, bytes).and_then(|()| std::fs::rename(tmp, path).map_err(WriteError::Rename));
    if written.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    written
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(WriteError::Create)?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(WriteError::Write)
}

/// Fsyncs the directory `dir`, so that a rename in it survives a crash.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all())
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn write_private_replaces_whole_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"old").unwrap();
        let tmp = dir.path().join(".f.tmp");
        write_private(&tmp, &path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!tmp.exists());
        sync_dir(dir.path()).unwrap();
    }

    #[test]
    fn write_private_refuses_an_existing_temporary_and_removes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let tmp = dir.path().join(".f.tmp");
        std::fs::write(&tmp, b"planted").unwrap();
        let err = write_private(&tmp, &path, b"new").unwrap_err();
        assert!(matches!(err, WriteError::Create(_)), "{err:?}");
        assert!(!path.exists());
        assert!(!tmp.exists());
    }
}
