//! The hook's side of the broker: a blocking connection (no async runtime), starting the
//! per-user broker when none runs, and the agent session the hook belongs to.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::proto::{self, ErrorCode, FromBroker, HookEvent, Role, ToBroker, VERSION};
use toolgate_runtime::fsutil::{self, LockError};
use toolgate_runtime::paths::{self, Layout};

use super::Ruling;

/// Shells a client runs hook commands through: the client is the first other ancestor.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "busybox",
];
/// Ancestors looked at, at most.
const MAX_WALK: usize = 8;
/// The lock file serialising broker starts.
const START_LOCK: &str = "start.lock";
/// Where a broker started by a hook writes its diagnostics.
const LOG: &str = "broker.log";

/// The agent session of this hook: `--session`, else `ppid-<client pid>`, the key `wrap`
/// uses for the proxies the same client started (`broker::client::default_session`). The
/// client is the nearest ancestor that is not a shell.
pub fn session_key(given: Option<&str>) -> String {
    if let Some(name) = given {
        return name.to_owned();
    }
    let mut pid = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
    for _ in 0..MAX_WALK {
        match stat(pid) {
            Some((comm, parent)) if SHELLS.contains(&comm.as_str()) && parent > 1 => pid = parent,
            _ => break,
        }
    }
    format!("ppid-{pid}")
}

/// `(comm, ppid)` of a process, from `/proc/<pid>/stat`.
fn stat(pid: i32) -> Option<(String, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`; comm may hold spaces and parentheses: the last `)` ends it.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_owned();
    let mut rest = text.get(close + 1..)?.split_whitespace();
    let _state = rest.next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((comm, ppid))
}

enum ConnectError {
    /// No broker listens (no directory, no socket, nobody behind it).
    NotRunning(String),
    /// Something else: an untrusted directory, a bad token, a broker that refused.
    Other(String),
}

/// What a hook keeps of its deadline after waiting for an answer in `toolgate approvals`:
/// the time to get the verdict out.
const HOLD_MARGIN: Duration = Duration::from_millis(1500);

fn remaining(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
}

fn read_line(reader: &mut BufReader<UnixStream>, max: usize) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .by_ref()
        .take(limit)
        .read_until(b'\n', &mut buf)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                "the broker did not answer in time (timed out). help: check `toolgate status`; stop a broker that hangs, the next hook starts a new one".to_owned()
            }
            _ => format!("the broker could not be read ({e})"),
        })?;
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else {
        return Err("the broker closed the connection without an answer".to_owned());
    }
    Ok(buf)
}

/// Connects and says hello as a hook of `session`.
fn connect(
    layout: &Layout,
    session: &str,
    deadline: Instant,
) -> Result<BufReader<UnixStream>, ConnectError> {
    use ConnectError::{NotRunning, Other};
    if let Err(e) = std::fs::symlink_metadata(&layout.dir) {
        // Missing (or impossible, e.g. under a regular file): starting one says why not.
        return Err(NotRunning(format!("`{}`: {e}", layout.dir.display())));
    }
    paths::check_dir(&layout.dir).map_err(|e| {
        Other(format!(
            "the broker's directory cannot be trusted: {e}. help: remove it (toolgate creates it again), or set {}",
            paths::DIR_ENV
        ))
    })?;
    let stream = match UnixStream::connect(&layout.socket) {
        Ok(s) => s,
        Err(e) => {
            return Err(NotRunning(format!(
                "cannot connect to `{}` ({e})",
                layout.socket.display()
            )));
        }
    };
    let token = paths::read_token(&layout.token).map_err(|e| {
        Other(format!(
            "the broker's token cannot be used: {e}. help: stop the broker (`toolgate status` shows its pid); the next hook starts a new one"
        ))
    })?;
    let timeout = Some(remaining(deadline));
    let _ = stream.set_read_timeout(timeout);
    let _ = stream.set_write_timeout(timeout);
    let hello = ToBroker::Hello {
        version: VERSION,
        token: hex::encode(token),
        role: Role::Hook,
        pid: std::process::id(),
        server: None,
        session: Some(session.to_owned()),
        known: false,
    };
    let mut writer = stream
        .try_clone()
        .map_err(|e| Other(format!("cannot use the broker's socket ({e})")))?;
    writer
        .write_all(&proto::line(&hello))
        .map_err(|e| NotRunning(format!("the broker closed the connection ({e})")))?;
    let mut reader = BufReader::new(stream);
    let line = read_line(&mut reader, proto::MAX_LINE).map_err(Other)?;
    match serde_json::from_slice::<FromBroker>(&line) {
        Ok(FromBroker::Welcome { version, .. }) if version == VERSION => Ok(reader),
        Ok(FromBroker::Error {
            code: ErrorCode::Incompatible,
            version,
            ..
        }) => Err(Other(format!(
            "the running broker speaks protocol {version}, this toolgate {VERSION}. help: stop the old broker (`toolgate status` shows its pid); the next hook starts one of this version"
        ))),
        Ok(FromBroker::Error { message, .. }) => Err(Other(format!(
            "the broker refused the hook: {message}"
        ))),
        _ => Err(Other(
            "the broker answered out of protocol. help: stop it (`toolgate status` shows its pid); the next hook starts a new one".to_owned(),
        )),
    }
}

/// Connects to the broker, starting it first when none runs (one start at a time: an
/// exclusive lock on `start.lock` in the broker directory, and a second look after it).
fn connect_or_start(
    layout: &Layout,
    session: &str,
    deadline: Instant,
) -> Result<BufReader<UnixStream>, String> {
    let why = match connect(layout, session, deadline) {
        Ok(conn) => return Ok(conn),
        Err(ConnectError::Other(why)) => return Err(why),
        Err(ConnectError::NotRunning(why)) => why,
    };
    paths::prepare_dir(&layout.dir).map_err(|e| {
        format!(
            "no broker runs ({why}) and none can be started: {e}. help: fix the directory's owner and mode (0700), set {} to a directory of your own, or run `toolgate broker`",
            paths::DIR_ENV
        )
    })?;
    let lock_path = layout.dir.join(START_LOCK);
    let _lock = fsutil::lock(&lock_path).map_err(|e| match e {
        LockError::Open(e) => format!(
            "cannot open `{}` ({e}) to start the broker",
            lock_path.display()
        ),
        LockError::Lock(e) => format!(
            "cannot lock `{}` ({e}) to start the broker",
            lock_path.display()
        ),
    })?;
    // Another hook may have started it while this one waited for the lock.
    match connect(layout, session, deadline) {
        Ok(conn) => return Ok(conn),
        Err(ConnectError::Other(why)) => return Err(why),
        Err(ConnectError::NotRunning(_)) => {}
    }
    let exe = broker_executable()?;
    let log_path = layout.dir.join(LOG);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&log_path)
        .map_err(|e| format!("cannot open `{}` ({e}) for the broker", log_path.display()))?;
    let mut child = std::process::Command::new(exe)
        .args(["broker", "--daemon"])
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start the broker ({e}). help: run `toolgate broker`"))?;
    loop {
        match connect(layout, session, deadline) {
            Ok(conn) => return Ok(conn),
            Err(ConnectError::Other(why)) => return Err(why),
            Err(ConnectError::NotRunning(why)) => {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!(
                        "the broker started by this hook exited ({status}); see `{}`. help: run `toolgate broker` to see why",
                        log_path.display()
                    ));
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "the broker started by this hook is not answering ({why}). help: run `toolgate status`"
                    ));
                }
                // Bounded by the deadline: the broker binds its socket within milliseconds.
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
}

/// Sends one event to the broker of `layout` and returns its verdict; any failure is a
/// reason (the hook denies with it).
#[allow(
    clippy::too_many_arguments,
    reason = "one call site; a struct would only rename them"
)]
pub fn ask(
    layout: &Layout,
    session: &str,
    policy: Option<&Path>,
    policy_sha256: Option<&str>,
    workspace: &Path,
    audit: Option<&Path>,
    event: HookEvent,
    cannot_ask: bool,
    deadline: Instant,
) -> Result<Ruling, String> {
    let mut reader = connect_or_start(layout, session, deadline)?;
    // A client that cannot ask: the broker holds an ask for `toolgate approvals`, and may
    // wait for a person's answer as long as the deadline leaves room to send the verdict.
    let hold_ms = cannot_ask.then(|| {
        let left = deadline.saturating_duration_since(Instant::now());
        u64::try_from(left.saturating_sub(HOLD_MARGIN).as_millis()).unwrap_or(u64::MAX)
    });
    let message = ToBroker::Hook {
        policy: policy.map(|p| p.display().to_string()),
        policy_sha256: policy_sha256.map(str::to_owned),
        workspace: workspace.display().to_string(),
        audit: audit.map(|p| p.display().to_string()),
        event,
        hold_ms,
    };
    let line = proto::line(&message);
    if line.len() > proto::MAX_HOOK_LINE {
        return Err(format!(
            "the hook event is larger than the broker accepts ({} MiB)",
            proto::MAX_HOOK_LINE / (1024 * 1024)
        ));
    }
    reader
        .get_mut()
        .write_all(&line)
        .map_err(|e| format!("the broker closed the connection ({e})"))?;
    let answer = read_line(&mut reader, proto::MAX_LINE)?;
    match serde_json::from_slice::<FromBroker>(&answer) {
        Ok(FromBroker::Verdict { decision, reason }) => Ok(Ruling { decision, reason }),
        Ok(FromBroker::Error { message, .. }) => {
            Err(format!("the broker refused the event: {message}"))
        }
        _ => Err("the broker answered out of protocol".to_owned()),
    }
}

/// The `toolgate` executable that runs the broker: this one, or for `toolgate-hook` the
/// `toolgate` installed beside it.
fn broker_executable() -> Result<std::path::PathBuf, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find the toolgate executable to start the broker ({e})"))?;
    if exe.file_name().is_some_and(|n| n == "toolgate-hook") {
        let sibling = exe.with_file_name("toolgate");
        if !sibling.is_file() {
            return Err(format!(
                "cannot start the broker: `{}` is missing. help: install toolgate and toolgate-hook together (`cargo install toolgate`), or start it with `toolgate broker`",
                sibling.display()
            ));
        }
        return Ok(sibling);
    }
    Ok(exe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_stat_reads_name_and_parent() {
        let me = i32::try_from(std::process::id()).unwrap();
        let (_, parent) = stat(me).unwrap();
        assert_eq!(
            parent,
            rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get())
        );
        assert_eq!(session_key(Some("s1")), "s1");
    }
}
