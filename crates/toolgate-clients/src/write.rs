//! Replacing a client configuration file safely.
//!
//! The new content goes to a temporary file in the same directory (same
//! permissions), is flushed to disk, and is renamed over the original only if the
//! original still has the content hash it had when it was read: a client (or the
//! user) that wrote the file in the meantime wins, and toolgate refuses. The
//! previous content is kept next to it as `<file>.toolgate.bak` (mode 0600), which a
//! restore removes once the file reads back as written.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use sha2::{Digest as _, Sha256};

/// The file a configuration is read from, with what was read.
#[derive(Debug, Clone)]
pub struct ReadFile {
    /// The path as named to the user.
    pub shown: PathBuf,
    /// The real file (symbolic links resolved), which is what gets replaced.
    pub real: PathBuf,
    /// The content read.
    pub text: String,
    /// SHA-256 of the content read.
    pub hash: [u8; 32],
}

/// SHA-256 of `bytes`.
pub fn hash(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Reads `path` as UTF-8 text.
pub fn read(path: &Path) -> anyhow::Result<ReadFile> {
    let real = path
        .canonicalize()
        .with_context(|| format!("cannot open `{}`", path.display()))?;
    let bytes = fs::read(&real).with_context(|| format!("cannot read `{}`", path.display()))?;
    let hash = hash(&bytes);
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("`{}` is not UTF-8 text", path.display()))?;
    Ok(ReadFile {
        shown: path.to_owned(),
        real,
        text,
        hash,
    })
}

/// The backup path of `path`.
pub fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".toolgate.bak");
    PathBuf::from(name)
}

/// Writes `contents` to a new temporary file next to `target`, with `mode`.
fn temp_with(target: &Path, contents: &[u8], mode: u32) -> anyhow::Result<tempfile::NamedTempFile> {
    let dir = target
        .parent()
        .ok_or_else(|| anyhow::anyhow!("`{}` has no parent directory", target.display()))?;
    let mut temp = tempfile::Builder::new()
        .prefix(".toolgate-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in `{}`", dir.display()))?;
    temp.as_file()
        .set_permissions(fs::Permissions::from_mode(mode))?;
    temp.write_all(contents)?;
    temp.as_file().sync_all()?;
    Ok(temp)
}

/// Replaces `file` with `new_text`, keeping a backup, unless it changed since it was read.
pub fn replace(file: &ReadFile, new_text: &str) -> anyhow::Result<()> {
    let mode = fs::metadata(&file.real)
        .with_context(|| format!("cannot stat `{}`", file.shown.display()))?
        .permissions()
        .mode()
        & 0o7777;
    let backup = backup_path(&file.real);
    // The backup is the user's alone, whatever the file's mode: it may hold a credential
    // that the new content no longer does.
    let backup_temp = temp_with(&backup, file.text.as_bytes(), 0o600)?;
    let temp = temp_with(&file.real, new_text.as_bytes(), mode)?;

    // Last moment check: somebody else may have written the file meanwhile.
    let now = fs::read(&file.real)
        .with_context(|| format!("cannot read `{}` again", file.shown.display()))?;
    if hash(&now) != file.hash {
        bail!(
            "`{}` changed since it was read; nothing was written\nhelp: run the command again (close the client first if it keeps rewriting the file)",
            file.shown.display()
        );
    }
    backup_temp
        .persist(&backup)
        .with_context(|| format!("cannot write the backup `{}`", backup.display()))?;
    temp.persist(&file.real)
        .with_context(|| format!("cannot replace `{}`", file.shown.display()))?;
    if let Some(dir) = file.real.parent()
        && let Ok(dir) = fs::File::open(dir)
    {
        // Make the rename durable; failing to is not worth failing the command.
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Removes the backup of `file` once the file reads back as `written` (what [`replace`]
/// wrote); returns whether it did. A file that reads otherwise keeps its backup.
pub fn remove_backup_if_written(file: &ReadFile, written: &str) -> anyhow::Result<bool> {
    let now = fs::read(&file.real)
        .with_context(|| format!("cannot read `{}` again", file.shown.display()))?;
    if hash(&now) != hash(written.as_bytes()) {
        return Ok(false);
    }
    let backup = backup_path(&file.real);
    match fs::remove_file(&backup) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(e).with_context(|| format!("cannot remove `{}`", backup.display())),
    }
}

/// Creates `path` (and its missing parent directories) holding `text`, atomically: the file
/// appears whole or not at all, and never replaces one that appeared meanwhile.
pub fn create(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the directory `{}`", dir.display()))?;
    }
    let temp = temp_with(path, text.as_bytes(), 0o644)?;
    temp.persist_noclobber(path).map_err(|e| {
        anyhow::anyhow!(
            "cannot create `{}`: {}\nhelp: run the command again (another program may have created it)",
            path.display(),
            e.error
        )
    })?;
    if let Some(dir) = path.parent()
        && let Ok(dir) = fs::File::open(dir)
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_keeps_mode_and_backup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        fs::write(&path, "old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let read = read(&path).unwrap();
        replace(&read, "new").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(fs::read_to_string(backup_path(&path)).unwrap(), "old");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn replace_refuses_after_concurrent_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        fs::write(&path, "old").unwrap();
        let read = read(&path).unwrap();
        fs::write(&path, "theirs").unwrap();
        let err = replace(&read, "new").unwrap_err();
        assert!(err.to_string().contains("changed since it was read"));
        assert_eq!(fs::read_to_string(&path).unwrap(), "theirs");
        assert!(!backup_path(&path).exists());
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1);
    }

    #[test]
    fn replace_writes_through_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        let link = dir.path().join("link.json");
        fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let read = read(&link).unwrap();
        replace(&read, "new").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
    }
}
