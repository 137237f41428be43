//! toolgate's own private files: the one atomic write (a 0600 temporary file, fsynced, renamed
//! over the target) and the one lock (`flock` on a 0600 lock file) that its state is kept
//! with (the broker token, pins, OAuth credentials, the broker directory).
//!
//! It lives here, not lower, because every user (runtime, broker, the executables) depends on
//! this crate. Two similar pieces stay where they are on purpose, both in crates below this
//! one: `toolgate-clients`' write replaces a user's configuration file keeping its mode, with
//! a backup and a compare-before-rename, a different operation; and the audit writer
//! (`toolgate-audit`) locks the open log file itself, not a lock file, and unlocks it without
//! closing it.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::time::Duration;

use rustix::fs::FlockOperation;

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

/// Which step of taking a lock failed.
#[derive(Debug)]
pub enum LockError {
    /// Opening (creating) the lock file.
    Open(std::io::Error),
    /// The `flock` itself (or, for [`lock_within`], the thread waiting for it).
    Lock(std::io::Error),
}

/// Opens the lock file `path`, creating it (0600) if needed and never truncating it.
fn open_lock(path: &Path) -> Result<File, LockError> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(LockError::Open)
}

/// Takes an exclusive advisory lock on the lock file `path`, waiting as long as another
/// holds it. The lock is held until the returned file is dropped.
pub fn lock(path: &Path) -> Result<File, LockError> {
    let file = open_lock(path)?;
    rustix::fs::flock(&file, FlockOperation::LockExclusive)
        .map_err(|e| LockError::Lock(e.into()))?;
    Ok(file)
}

/// Takes the lock of [`lock`] only if it is free: `Ok(None)` when another holds it.
pub fn try_lock(path: &Path) -> Result<Option<File>, LockError> {
    let file = open_lock(path)?;
    match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(file)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(e) => Err(LockError::Lock(e.into())),
    }
}

/// Takes the lock of [`lock`], waiting at most `limit`: `Ok(None)` when it is still held
/// then. The wait is a blocking `flock` on a worker thread: if it times out, that thread
/// still gets the lock later and drops it at once (the file is dropped with the result).
pub async fn lock_within(path: &Path, limit: Duration) -> Result<Option<File>, LockError> {
    let file = open_lock(path)?;
    let wait = tokio::task::spawn_blocking(move || {
        rustix::fs::flock(&file, FlockOperation::LockExclusive).map(|()| file)
    });
    match tokio::time::timeout(limit, wait).await {
        Ok(Ok(Ok(file))) => Ok(Some(file)),
        Ok(Ok(Err(e))) => Err(LockError::Lock(e.into())),
        Ok(Err(e)) => Err(LockError::Lock(std::io::Error::other(e))),
        Err(_) => Ok(None),
    }
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

    #[test]
    fn try_lock_sees_a_held_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let held = lock(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(try_lock(&path).unwrap().is_none());
        drop(held);
        assert!(try_lock(&path).unwrap().is_some());
    }

    #[tokio::test]
    async fn lock_within_times_out_on_a_held_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let held = lock(&path).unwrap();
        let waited = lock_within(&path, Duration::from_millis(20)).await.unwrap();
        assert!(waited.is_none());
        drop(held);
        let got = lock_within(&path, Duration::from_secs(5)).await.unwrap();
        assert!(got.is_some());
    }
}
