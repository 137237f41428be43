//! The writer: modes, restart, concurrency (threads and processes), failures.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use toolgate_audit::{
    Approval, ApprovalHow, ApprovalScope, AuditError, AuditWriter, Durability, Event, Kind, Net,
    Raw, Record, WriterOptions, canonical_sha256, verify_path,
};

fn decision(tool: &str) -> Event {
    let mut e = Event::new(Kind::Decision);
    e.tool = Some(tool.into());
    e.effect = Some("allow".into());
    e
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn creates_directory_0700_and_file_0600() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ws/.toolgate/audit.jsonl");
    let w = AuditWriter::open(&path).unwrap();
    w.append(&decision("t")).unwrap();
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    assert!(w.warnings().is_empty(), "{:?}", w.warnings());
}

#[test]
fn loose_file_mode_is_tightened_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    drop(AuditWriter::open(&path).unwrap());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let w = AuditWriter::open(&path).unwrap();
    assert_eq!(mode(&path), 0o600);
    assert!(
        w.warnings().iter().any(|m| m.contains("644")),
        "{:?}",
        w.warnings()
    );
}

#[test]
fn record_fields_round_trip_and_writer_stamps_chain_fields() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let w = AuditWriter::open(&path).unwrap();
    let args = serde_json::json!({"path": "/tmp/x", "n": 1});
    let mut e = Event::new(Kind::Decision);
    e.session = Some("sess".into());
    e.request_id = Some(r#""abc""#.into());
    e.server = Some("web".into());
    e.tool = Some("fetch".into());
    e.operations = vec!["net.request".into()];
    e.net = Some(Net {
        host: "https://u:p@api.example.com/v1?token=SECRET".into(),
        method: Some("GET".into()),
    });
    e.effect = Some("allow".into());
    e.approval = Some(Approval {
        how: ApprovalHow::InputRequired,
        scope: ApprovalScope::Session,
    });
    e.args_sha256 = Some(canonical_sha256(&args).unwrap());
    e.is_error = Some(false);
    e.latency_us = Some(42);
    let appended = w.append(&e).unwrap();
    assert_eq!(appended.seq, 1);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("SECRET"), "{text}");
    assert!(!text.contains("/v1"), "{text}");
    let line = text.lines().nth(1).unwrap();
    let r: Record = serde_json::from_str(line).unwrap();
    assert_eq!(r.seq, 1);
    assert_eq!(r.time, appended.time);
    // RFC 3339 UTC with milliseconds.
    assert_eq!(r.time.len(), "2026-11-29T19:56:48.123Z".len(), "{}", r.time);
    assert!(r.time.ends_with('Z'));
    assert_eq!(r.event.net.as_ref().unwrap().host, "api.example.com");
    e.net = Some(Net {
        host: "api.example.com".into(),
        method: Some("GET".into()),
    });
    assert_eq!(r.event, e);
    assert!(
        line.contains(r#""approval":{"how":"input_required","scope":"session"}"#),
        "{line}"
    );
    assert!(line.contains(r#""isError":false"#), "{line}");
}

#[test]
fn raw_is_written_only_when_given() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let w = AuditWriter::open(&path).unwrap();
    w.append(&decision("plain")).unwrap();
    let mut e = decision("raw");
    e.raw = Some(Raw {
        arguments: Some(serde_json::json!({"q": "hello"})),
        result: None,
    });
    w.append(&e).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let l: Vec<&str> = text.lines().collect();
    assert!(!l[1].contains("raw"), "{}", l[1]);
    assert!(
        l[2].contains(r#""raw":{"arguments":{"q":"hello"}}"#),
        "{}",
        l[2]
    );
}

#[test]
fn header_kind_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = AuditWriter::open(dir.path().join("a.jsonl")).unwrap();
    let err = w.append(&Event::new(Kind::Header)).unwrap_err();
    assert!(matches!(err, AuditError::ReservedKind { .. }), "{err}");
}

#[test]
fn reopening_continues_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    for round in 0..3 {
        let w = AuditWriter::open_with(
            &path,
            WriterOptions {
                durability: Durability::Sync,
            },
        )
        .unwrap();
        for i in 0..4 {
            let a = w.append(&decision(&format!("t{round}-{i}"))).unwrap();
            assert_eq!(a.seq, round * 4 + i + 1);
        }
    }
    let v = verify_path(&path).unwrap();
    assert!(v.is_intact(), "{:?}", v.problem);
    assert_eq!(v.records, 12);
    // Exactly one header.
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.matches(r#""kind":"header""#).count(), 1);
}

#[test]
fn damaged_tail_refuses_to_continue() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    {
        let w = AuditWriter::open(&path).unwrap();
        for i in 0..3 {
            w.append(&decision(&i.to_string())).unwrap();
        }
    }
    let good = std::fs::read(&path).unwrap();
    // Cut mid-line.
    std::fs::write(&path, &good[..good.len() - 5]).unwrap();
    let err = AuditWriter::open(&path).unwrap_err();
    assert!(matches!(err, AuditError::DamagedTail { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("no newline"), "{msg}");
    assert!(msg.contains("help: run `toolgate audit verify"), "{msg}");
    // Last record edited: the last two lines no longer link.
    let text = String::from_utf8(good.clone()).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let n = lines.len();
    lines[n - 2] = lines[n - 2].replace(r#""tool":"1""#, r#""tool":"x""#);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let err = AuditWriter::open(&path).unwrap_err();
    assert!(err.to_string().contains("are not linked"), "{err}");
    // Not an audit log at all.
    std::fs::write(&path, "hello\n").unwrap();
    let err = AuditWriter::open(&path).unwrap_err();
    assert!(matches!(err, AuditError::DamagedTail { .. }), "{err}");
}

#[test]
fn another_writer_appending_between_our_writes_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let a = AuditWriter::open(&path).unwrap();
    let b = AuditWriter::open(&path).unwrap();
    for i in 0..10 {
        a.append(&decision(&format!("a{i}"))).unwrap();
        b.append(&decision(&format!("b{i}"))).unwrap();
        b.append(&decision(&format!("b{i}'"))).unwrap();
    }
    let v = verify_path(&path).unwrap();
    assert!(v.is_intact(), "{:?}", v.problem);
    assert_eq!(v.records, 30);
}

#[test]
fn threads_sharing_and_not_sharing_a_writer_produce_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let shared = Arc::new(AuditWriter::open(&path).unwrap());
    let mut handles = Vec::new();
    for t in 0..4 {
        let shared = Arc::clone(&shared);
        handles.push(std::thread::spawn(move || {
            for i in 0..200 {
                shared.append(&decision(&format!("shared{t}-{i}"))).unwrap();
            }
        }));
    }
    for t in 0..2 {
        let path = path.clone();
        handles.push(std::thread::spawn(move || {
            // Its own descriptor: only the file lock keeps it in line.
            let own = AuditWriter::open(&path).unwrap();
            for i in 0..200 {
                own.append(&decision(&format!("own{t}-{i}"))).unwrap();
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let v = verify_path(&path).unwrap();
    assert!(v.is_intact(), "{:?}", v.problem);
    assert_eq!(v.records, 1200);
}

const CHILD_ENV: &str = "TOOLGATE_AUDIT_TEST_CHILD_LOG";

/// Not a test: the body of a child process started by the tests below.
#[test]
#[ignore = "helper run as a child process by other tests"]
fn child_appends() {
    let path = std::env::var(CHILD_ENV).expect("child started without its log path");
    let count: usize = std::env::var("TOOLGATE_AUDIT_TEST_CHILD_COUNT")
        .unwrap()
        .parse()
        .unwrap();
    let w = AuditWriter::open(&path).unwrap();
    for i in 0..count {
        if let Err(err) = w.append(&decision(&format!("p{}-{i}", std::process::id()))) {
            eprintln!("CHILD-ERROR: {err}");
            std::process::exit(3);
        }
    }
}

fn child(path: &Path, count: usize) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        "writer::child_appends",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, path)
    .env("TOOLGATE_AUDIT_TEST_CHILD_COUNT", count.to_string())
    .stdout(std::process::Stdio::null());
    cmd
}

#[test]
fn two_processes_appending_concurrently_produce_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let mut children: Vec<_> = (0..3).map(|_| child(&path, 300).spawn().unwrap()).collect();
    for c in &mut children {
        assert!(c.wait().unwrap().success());
    }
    let v = verify_path(&path).unwrap();
    assert!(v.is_intact(), "{:?}", v.problem);
    assert_eq!(v.records, 900);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.matches(r#""kind":"header""#).count(), 1);
}

#[test]
fn disk_full_mid_write_is_an_error_and_leaves_the_chain_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    // Under a 4 KiB file-size limit (SIGXFSZ ignored), writes past the limit fail with
    // EFBIG, like ENOSPC on a full disk: part of a line may land, then the write fails.
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' XFSZ; ulimit -f 4; exec "$0" --ignored --exact writer::child_appends --nocapture --test-threads=1"#)
        .arg(&exe)
        .env(CHILD_ENV, &path)
        .env("TOOLGATE_AUDIT_TEST_CHILD_COUNT", "1000")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("CHILD-ERROR: cannot write audit record to"),
        "{stderr}"
    );
    let v = verify_path(&path).unwrap();
    assert!(v.is_intact(), "partial line left behind: {:?}", v.problem);
    assert!(v.records > 0);
    // And the log can be continued once there is room again.
    let w = AuditWriter::open(&path).unwrap();
    w.append(&decision("after")).unwrap();
    assert!(verify_path(&path).unwrap().is_intact());
}

#[test]
fn dev_full_is_refused_as_not_a_file() {
    let err = AuditWriter::open("/dev/full").unwrap_err();
    assert!(matches!(err, AuditError::NotAFile { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("`/dev/full` is not a regular file"),
        "{err}"
    );
}

#[test]
fn symlinked_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("bashrc");
    std::fs::write(&target, "original\n").unwrap();
    let link = dir.path().join("audit.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let err = AuditWriter::open(&link).unwrap_err();
    assert!(matches!(err, AuditError::NotAFile { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "original\n");
}

#[test]
fn directory_that_cannot_be_created_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "").unwrap();
    let err = AuditWriter::open(file.join(".toolgate/audit.jsonl")).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("cannot create audit directory `"), "{msg}");
    assert!(msg.contains("plain-file/.toolgate"), "{msg}");
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[test]
fn read_only_log_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    drop(AuditWriter::open(&path).unwrap());
    // Root ignores file modes; the immutable attribute stops root too.
    let made_read_only = if is_root() {
        Command::new("chattr")
            .arg("+i")
            .arg(&path)
            .status()
            .unwrap()
            .success()
    } else {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        true
    };
    assert!(made_read_only, "could not make the log read-only");
    let result = AuditWriter::open(&path);
    if is_root() {
        Command::new("chattr")
            .arg("-i")
            .arg(&path)
            .status()
            .unwrap();
    }
    let err = result.unwrap_err();
    assert!(
        err.to_string().starts_with("cannot open audit log `"),
        "{err}"
    );
}

#[test]
fn deleted_log_is_an_error_not_a_silent_loss() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let w = AuditWriter::open(&path).unwrap();
    w.append(&decision("a")).unwrap();
    std::fs::remove_file(&path).unwrap();
    let err = w.append(&decision("b")).unwrap_err();
    assert!(matches!(err, AuditError::Unlinked { .. }), "{err}");
}

#[test]
fn log_truncated_while_in_use_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let w = AuditWriter::open(&path).unwrap();
    w.append(&decision("a")).unwrap();
    let before = std::fs::metadata(&path).unwrap().len();
    w.append(&decision("b")).unwrap();
    // Remove the last record at a line boundary: the chain alone cannot tell.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(before)
        .unwrap();
    let err = w.append(&decision("c")).unwrap_err();
    assert!(matches!(err, AuditError::DamagedTail { .. }), "{err}");
    assert!(err.to_string().contains("shrank"), "{err}");
}

#[test]
fn append_all_writes_chained_records_in_one_go_and_interleaves_with_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let w = AuditWriter::open(&path).unwrap();
    w.append(&decision("first")).unwrap();
    let batch: Vec<Event> = (0..50).map(|i| decision(&format!("t{i}"))).collect();
    let appended = w.append_all(&batch).unwrap();
    assert_eq!(appended.len(), 50);
    // seq 0 is the header, 1 the first record: the batch follows without a gap.
    let seqs: Vec<u64> = appended.iter().map(|a| a.seq).collect();
    assert_eq!(seqs, (2..52).collect::<Vec<_>>());
    w.append(&decision("last")).unwrap();
    assert!(w.append_all(&[]).unwrap().is_empty());
    let text = std::fs::read_to_string(&path).unwrap();
    let tools: Vec<String> = text
        .lines()
        .skip(1)
        .map(|l| {
            serde_json::from_str::<Record>(l)
                .unwrap()
                .event
                .tool
                .unwrap()
        })
        .collect();
    assert_eq!(tools.len(), 52);
    assert_eq!(tools[0], "first");
    assert_eq!(tools[1], "t0");
    assert_eq!(tools[50], "t49");
    assert_eq!(tools[51], "last");
    let v = verify_path(&path).unwrap();
    assert!(v.is_intact(), "{:?}", v.problem);
    // A reserved kind anywhere in the batch writes nothing.
    let mut bad = batch.clone();
    bad.push(Event::new(Kind::Header));
    assert!(matches!(
        w.append_all(&bad),
        Err(AuditError::ReservedKind { .. })
    ));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}
