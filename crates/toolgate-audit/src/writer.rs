//! The append-only writer.
//!
//! - The directory is created with mode 0700 and the file with 0600 (unix). An existing
//!   file with wider permissions is tightened to 0600 and reported in
//!   [`AuditWriter::warnings`]; a wider existing directory is only reported.
//! - Symlinks are refused (`O_NOFOLLOW`): a workspace an agent can write to must not be
//!   able to redirect the log into another file.
//! - Each record is one `write_all` of the full line on an `O_APPEND` descriptor, made
//!   while holding an in-process mutex and an exclusive `flock` on the file. After taking
//!   the lock the writer checks the file's size; if another process appended meanwhile it
//!   re-reads the tail, so two proxies sharing one log produce one valid chain.
//! - On a failed write the file is cut back to its previous length, so a partial line
//!   (disk full) does not damage the chain.
//! - fsync: [`Durability::Flush`] (default) hands every line to the kernel before
//!   `append` returns, which survives a crash of toolgate but not of the machine;
//!   [`Durability::Sync`] also calls `fdatasync` per record. Dropping the writer syncs.
//! - Appending after a restart: the writer reads the last two lines, checks that they are
//!   complete and linked, and continues the chain from them. A damaged tail is an error, and
//!   so is a log that shrinks while the writer has it open (records were cut off the end).

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use rustix::fs::FlockOperation;
use serde::Serialize;

use crate::chain::{genesis_hash, line_hash, parse_chain_fields, sha256_hex};
use crate::error::AuditError;
use crate::record::{Event, FORMAT, Kind, sanitize_host};

/// When records reach the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// Every record is written to the kernel before `append` returns (one `write`);
    /// survives a crash of the process. The default.
    #[default]
    Flush,
    /// Additionally `fdatasync` after every record; survives power loss, costs a disk
    /// round trip per call.
    Sync,
}

/// Options for [`AuditWriter::open_with`].
#[derive(Debug, Clone, Copy, Default)]
pub struct WriterOptions {
    /// fsync policy.
    pub durability: Durability,
}

/// What `append` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The record's seq.
    pub seq: u64,
    /// The record's line hash (the next record's `prev`).
    pub hash: String,
    /// The time stamped on it.
    pub time: String,
}

#[derive(Debug)]
struct OpenLog {
    file: File,
    chain: Chain,
    clock: Clock,
}

/// The time of the last append, formatted: appends within the same millisecond (a busy
/// session makes dozens) reuse the text.
#[derive(Debug, Default)]
struct Clock {
    millis: Option<u128>,
    text: String,
}

impl Clock {
    /// [`now_rfc3339`], formatted once per millisecond.
    fn now(&mut self) -> String {
        self.at(SystemTime::now())
    }

    fn at(&mut self, now: SystemTime) -> String {
        let millis = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_millis());
        if millis.is_none() || millis != self.millis {
            self.text = rfc3339_millis(now);
            self.millis = millis;
        }
        self.text.clone()
    }
}

#[derive(Debug)]
struct Chain {
    /// File length after our last write or tail read.
    len: u64,
    /// Seq of the next record.
    next_seq: u64,
    /// Hash of the last line.
    prev: String,
}

/// An open audit log. Share it across threads (`Arc<AuditWriter>`): `append` takes `&self`.
#[derive(Debug)]
pub struct AuditWriter {
    path: PathBuf,
    options: WriterOptions,
    state: Mutex<OpenLog>,
    warnings: Vec<String>,
}

/// Holds the advisory lock; unlocks on drop.
struct FileLock<'a> {
    file: &'a File,
}

impl<'a> FileLock<'a> {
    fn exclusive(file: &'a File, path: &Path) -> Result<Self, AuditError> {
        rustix::fs::flock(file, FlockOperation::LockExclusive).map_err(|e| AuditError::Io {
            action: "cannot lock audit log",
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        Ok(FileLock { file })
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        // Closing the descriptor would release it too; an error here changes nothing.
        let _ = rustix::fs::flock(self.file, FlockOperation::Unlock);
    }
}

#[derive(Serialize)]
struct Line<'a> {
    seq: u64,
    prev: &'a str,
    time: &'a str,
    #[serde(flatten)]
    event: &'a Event,
}

/// RFC 3339 UTC, millisecond precision: `2026-11-29T19:56:48.123Z`.
pub fn now_rfc3339() -> String {
    rfc3339_millis(SystemTime::now())
}

/// The latest time RFC 3339 can write (four-digit years): 9999-12-31T23:59:59.999Z.
const LAST_WRITABLE: std::time::Duration = std::time::Duration::from_millis(253_402_300_799_999);

/// `t` in RFC 3339 UTC with milliseconds. A clock set outside the years 1970 to 9999 (a
/// machine without a battery-backed clock, a bad `date -s`) is written as the nearest end
/// of that range: the record is still written, and its time says the clock is wrong
/// (`humantime` alone would panic there, and a panic would stop the proxy).
fn rfc3339_millis(t: SystemTime) -> String {
    let since_epoch = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .min(LAST_WRITABLE);
    humantime::format_rfc3339_millis(SystemTime::UNIX_EPOCH + since_epoch).to_string()
}

impl AuditWriter {
    /// Opens (creating if needed) the log at `path` with default options.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, AuditError> {
        Self::open_with(path, WriterOptions::default())
    }

    /// Opens (creating if needed) the log at `path`.
    pub fn open_with(path: impl Into<PathBuf>, options: WriterOptions) -> Result<Self, AuditError> {
        let path = path.into();
        let mut warnings = Vec::new();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            prepare_dir(dir, &mut warnings)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|source| {
                if source.raw_os_error() == Some(libc::ELOOP) {
                    AuditError::NotAFile { path: path.clone() }
                } else {
                    AuditError::Io {
                        action: "cannot open audit log",
                        path: path.clone(),
                        source,
                    }
                }
            })?;
        let meta = file.metadata().map_err(|source| AuditError::Io {
            action: "cannot inspect audit log",
            path: path.clone(),
            source,
        })?;
        if !meta.is_file() {
            return Err(AuditError::NotAFile { path });
        }
        if meta.mode() & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(|source| AuditError::Io {
                    action: "cannot restrict permissions of audit log",
                    path: path.clone(),
                    source,
                })?;
            warnings.push(format!(
                "audit log `{}` was readable by others (mode {:o}); changed it to 600",
                path.display(),
                meta.mode() & 0o777
            ));
        }
        let state = OpenLog {
            file,
            chain: Chain {
                len: u64::MAX,
                next_seq: 0,
                prev: String::new(),
            },
            clock: Clock::default(),
        };
        let writer = AuditWriter {
            path,
            options,
            state: Mutex::new(state),
            warnings,
        };
        {
            let mut state = writer.state.lock().map_err(|_| AuditError::Poisoned)?;
            let state = &mut *state;
            let _lock = FileLock::exclusive(&state.file, &writer.path)?;
            writer.sync_with_file(&state.file, &mut state.chain)?;
        }
        Ok(writer)
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Things worth telling the user (loose permissions found at open).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Appends one record: stamps `seq`, `prev` and `time`, writes the line, returns what
    /// was written. An error means nothing usable was written: deny the call.
    pub fn append(&self, event: &Event) -> Result<Appended, AuditError> {
        let mut appended = self.append_all(std::slice::from_ref(event))?;
        appended.pop().ok_or(AuditError::Poisoned)
    }

    /// Appends several records in one `write` under one lock (e.g. the pins of a long
    /// `tools/list`), chained in order. All or nothing: on an error none of them is in the
    /// log.
    pub fn append_all(&self, events: &[Event]) -> Result<Vec<Appended>, AuditError> {
        for event in events {
            if matches!(event.kind, Kind::Header | Kind::Other) {
                return Err(AuditError::ReservedKind {
                    kind: event.kind.as_str(),
                });
            }
        }
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let mut state = self.state.lock().map_err(|_| AuditError::Poisoned)?;
        let state = &mut *state;
        let _lock = FileLock::exclusive(&state.file, &self.path)?;
        self.sync_with_file(&state.file, &mut state.chain)?;
        let time = state.clock.now();
        self.write_lines(&state.file, &mut state.chain, events, &time)
    }

    /// Brings `state` up to date with the file (which another process may have appended
    /// to). Must hold the file lock. Writes the header into an empty file.
    fn sync_with_file(&self, file: &File, state: &mut Chain) -> Result<(), AuditError> {
        let (len, links) = size_and_links(file).map_err(|source| AuditError::Io {
            action: "cannot inspect audit log",
            path: self.path.clone(),
            source,
        })?;
        if links == 0 {
            return Err(AuditError::Unlinked {
                path: self.path.clone(),
            });
        }
        if len == state.len {
            return Ok(());
        }
        if state.len != u64::MAX && len < state.len {
            // Only truncation shrinks an append-only file: records were removed.
            return Err(AuditError::DamagedTail {
                path: self.path.clone(),
                detail: format!(
                    "the log shrank from {} to {len} bytes while in use: records were removed",
                    state.len
                ),
            });
        }
        if len == 0 {
            state.len = 0;
            state.next_seq = 0;
            state.prev = genesis_hash();
            let mut header = Event::new(Kind::Header);
            header.format = Some(FORMAT.to_owned());
            header.chain = Some(new_chain_id());
            self.write_line(file, state, &header)?;
            return Ok(());
        }
        let (last, before) = read_tail(file, len).map_err(|source| AuditError::Io {
            action: "cannot read audit log",
            path: self.path.clone(),
            source,
        })?;
        let damaged = |detail: String| AuditError::DamagedTail {
            path: self.path.clone(),
            detail,
        };
        let Some(last) = last else {
            return Err(damaged(
                "the last line is incomplete (no newline): a write was cut off".to_owned(),
            ));
        };
        let fields = parse_chain_fields(&last)
            .map_err(|e| damaged(format!("the last line is not an audit record: {e}")))?;
        match before {
            Some(before) => {
                let before_fields = parse_chain_fields(&before).map_err(|e| {
                    damaged(format!(
                        "the second-to-last line is not an audit record: {e}"
                    ))
                })?;
                if fields.prev != line_hash(&before)
                    || Some(fields.seq) != before_fields.seq.checked_add(1)
                {
                    return Err(damaged(format!(
                        "the last two records (seq {} and {}) are not linked",
                        before_fields.seq, fields.seq
                    )));
                }
            }
            None => {
                if fields.kind.as_deref() != Some("header")
                    || fields.seq != 0
                    || fields.prev != genesis_hash()
                {
                    return Err(damaged(
                        "the file does not start with a toolgate audit header".to_owned(),
                    ));
                }
            }
        }
        state.len = len;
        state.next_seq = fields
            .seq
            .checked_add(1)
            .ok_or_else(|| damaged("seq overflow".to_owned()))?;
        state.prev = line_hash(&last);
        Ok(())
    }

    fn write_line(
        &self,
        file: &File,
        state: &mut Chain,
        event: &Event,
    ) -> Result<Appended, AuditError> {
        let time = now_rfc3339();
        let mut appended = self.write_lines(file, state, std::slice::from_ref(event), &time)?;
        appended.pop().ok_or(AuditError::Poisoned)
    }

    /// Writes `events` as consecutive lines with one `write`; `state` advances only when
    /// all of them were written.
    fn write_lines(
        &self,
        mut file: &File,
        state: &mut Chain,
        events: &[Event],
        time: &str,
    ) -> Result<Vec<Appended>, AuditError> {
        let mut bytes = Vec::with_capacity(512 * events.len());
        let mut appended = Vec::with_capacity(events.len());
        let mut seq = state.next_seq;
        let mut prev = state.prev.clone();
        for event in events {
            // Never let a path or query string in through the host field.
            let sanitized;
            let event = match &event.net {
                Some(net) if sanitize_host(&net.host) != net.host => {
                    let mut copy = event.clone();
                    if let Some(n) = copy.net.as_mut() {
                        n.host = sanitize_host(&n.host);
                    }
                    sanitized = copy;
                    &sanitized
                }
                _ => event,
            };
            let start = bytes.len();
            serde_json::to_writer(
                &mut bytes,
                &Line {
                    seq,
                    prev: &prev,
                    time,
                    event,
                },
            )?;
            let hash = sha256_hex(bytes.get(start..).unwrap_or_default());
            bytes.push(b'\n');
            appended.push(Appended {
                seq,
                hash: hash.clone(),
                time: time.to_owned(),
            });
            seq = seq.saturating_add(1);
            prev = hash;
        }
        if let Err(source) = file.write_all(&bytes) {
            // Cut off whatever part of the lines made it, so the chain stays intact.
            let _ = file.set_len(state.len);
            return Err(AuditError::Io {
                action: "cannot write audit record to",
                path: self.path.clone(),
                source,
            });
        }
        if self.options.durability == Durability::Sync {
            file.sync_data().map_err(|source| AuditError::Io {
                action: "cannot sync audit log",
                path: self.path.clone(),
                source,
            })?;
        }
        state.len = state.len.saturating_add(bytes.len() as u64);
        state.next_seq = seq;
        state.prev = prev;
        Ok(appended)
    }

    /// Flushes the log to disk (`fdatasync`).
    pub fn sync(&self) -> Result<(), AuditError> {
        let state = self.state.lock().map_err(|_| AuditError::Poisoned)?;
        state.file.sync_data().map_err(|source| AuditError::Io {
            action: "cannot sync audit log",
            path: self.path.clone(),
            source,
        })
    }
}

impl Drop for AuditWriter {
    fn drop(&mut self) {
        if let Ok(state) = self.state.get_mut() {
            let _ = state.file.sync_data();
        }
    }
}

fn prepare_dir(dir: &Path, warnings: &mut Vec<String>) -> Result<(), AuditError> {
    match std::fs::metadata(dir) {
        Ok(meta) => {
            if !meta.is_dir() {
                return Err(AuditError::Io {
                    action: "cannot use audit directory",
                    path: dir.to_path_buf(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotADirectory,
                        "not a directory",
                    ),
                });
            }
            if meta.mode() & 0o077 != 0 {
                warnings.push(format!(
                    "audit directory `{}` is accessible by others (mode {:o}); consider `chmod 700`",
                    dir.display(),
                    meta.mode() & 0o777
                ));
            }
            Ok(())
        }
        Err(_) => DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| AuditError::Io {
                action: "cannot create audit directory",
                path: dir.to_path_buf(),
                source,
            }),
    }
}

/// Reads the last line and the one before it (without newlines). The last line is
/// `None` when the file does not end with a newline.
/// The last line and the one before it, without newlines.
type Tail = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The size and link count of the open log, asked for without its timestamps.
///
/// On Linux the kernel records whether a file's change time was read since its last
/// change (multigrain timestamps, Linux 6.13 and later): if it was, the next write must
/// stamp the inode with a fine-grained time, which dirties it and costs a journal update
/// on every append. A full `fstat` before each append would read the change time every
/// time; `statx` asked for the size and link count only does not.
#[cfg(target_os = "linux")]
fn size_and_links(file: &File) -> std::io::Result<(u64, u64)> {
    use rustix::fs::{AtFlags, StatxFlags};
    let wanted = StatxFlags::SIZE | StatxFlags::NLINK;
    match rustix::fs::statx(file, "", AtFlags::EMPTY_PATH, wanted) {
        Ok(st) if StatxFlags::from_bits_retain(st.stx_mask).contains(wanted) => {
            Ok((st.stx_size, u64::from(st.stx_nlink)))
        }
        // No `statx` (a kernel before 4.11, or a sandbox that filters it), or a file system
        // that did not fill in both fields.
        _ => size_and_links_of_metadata(file),
    }
}

/// The size and link count of the open log.
#[cfg(not(target_os = "linux"))]
fn size_and_links(file: &File) -> std::io::Result<(u64, u64)> {
    size_and_links_of_metadata(file)
}

fn size_and_links_of_metadata(file: &File) -> std::io::Result<(u64, u64)> {
    let meta = file.metadata()?;
    Ok((meta.len(), meta.nlink()))
}

fn read_tail(file: &File, len: u64) -> std::io::Result<Tail> {
    let mut chunk_len: u64 = 8 * 1024;
    let mut buf: Vec<u8> = Vec::new();
    let mut start = len;
    // Stop once the buffer holds three newlines (end of the line before the last two)
    // or the start of the file.
    while start > 0 && buf.iter().filter(|&&b| b == b'\n').count() < 3 {
        let n = chunk_len.min(start);
        chunk_len = chunk_len.saturating_mul(2);
        start -= n;
        let mut chunk = vec![0u8; usize::try_from(n).unwrap_or(0)];
        file.read_exact_at(&mut chunk, start)?;
        chunk.extend_from_slice(&buf);
        buf = chunk;
    }
    if buf.last() != Some(&b'\n') {
        return Ok((None, None));
    }
    buf.pop();
    let mut lines = buf.rsplit(|&b| b == b'\n');
    let last = lines.next().map(<[u8]>::to_vec);
    let before = lines.next().map(<[u8]>::to_vec);
    // `before` is complete only if it was preceded by a newline or the file start; three
    // newlines (or reaching offset 0) guarantee that.
    Ok((last, before))
}

fn new_chain_id() -> String {
    let mut bytes = [0u8; 16];
    let random = File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_err() {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let seed = format!("{nanos}:{}", std::process::id());
        return sha256_hex(seed.as_bytes()).chars().take(32).collect();
    }
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        reason = "tests: a failed expectation should stop the test with its message"
    )]

    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    use super::{Clock, rfc3339_millis, size_and_links};

    #[test]
    fn the_clock_reuses_the_text_only_within_its_millisecond() {
        use std::time::{Duration, SystemTime};
        let fmt = |t: SystemTime| humantime::format_rfc3339_millis(t).to_string();
        let mut clock = Clock::default();
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_764_000_000_123);
        assert_eq!(clock.at(t), "2025-11-24T16:00:00.123Z");
        let within = t + Duration::from_micros(999);
        assert_eq!(clock.at(within), fmt(within), "the same millisecond");
        for later in [t + Duration::from_millis(1), t + Duration::from_secs(3600)] {
            assert_eq!(clock.at(later), fmt(later));
        }
        // A clock set back gets its own text.
        assert_eq!(clock.at(t), fmt(t));
    }

    #[test]
    fn a_clock_outside_the_writable_years_is_written_as_the_nearest_end() {
        use std::time::{Duration, SystemTime};
        let epoch = SystemTime::UNIX_EPOCH;
        for (t, text) in [
            (
                epoch - Duration::from_secs(86_400),
                "1970-01-01T00:00:00.000Z",
            ),
            (epoch, "1970-01-01T00:00:00.000Z"),
            (
                epoch + Duration::from_millis(253_402_300_799_999),
                "9999-12-31T23:59:59.999Z",
            ),
            (
                epoch + Duration::from_secs(300_000_000_000),
                "9999-12-31T23:59:59.999Z",
            ),
        ] {
            assert_eq!(rfc3339_millis(t), text);
            assert_eq!(Clock::default().at(t), text);
        }
    }

    #[test]
    fn size_and_links_follow_appends_links_and_unlinks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut file = std::fs::File::create(&path).unwrap();
        assert_eq!(size_and_links(&file).unwrap(), (0, 1));
        file.write_all(b"{}\n").unwrap();
        let other = dir.path().join("other.jsonl");
        std::fs::hard_link(&path, &other).unwrap();
        assert_eq!(size_and_links(&file).unwrap(), (3, 2));
        let meta = file.metadata().unwrap();
        assert_eq!(size_and_links(&file).unwrap(), (meta.len(), meta.nlink()));
        std::fs::remove_file(&path).unwrap();
        std::fs::remove_file(&other).unwrap();
        assert_eq!(size_and_links(&file).unwrap(), (3, 0));
    }
}
