//! The chain: a long log verifies; every kind of tampering is found and located.

use std::path::{Path, PathBuf};

use toolgate_audit::{AuditWriter, Event, Kind, ProblemKind, verify_path};

fn event(i: usize) -> Event {
    let mut e = Event::new(if i.is_multiple_of(2) {
        Kind::Decision
    } else {
        Kind::Result
    });
    e.session = Some("s1".into());
    e.request_id = Some(i.to_string());
    e.server = Some("fs".into());
    e.tool = Some("read_file".into());
    e.effect = Some(if i.is_multiple_of(3) { "deny" } else { "allow" }.into());
    e.resources = vec![format!("/work/file{i}.txt")];
    e
}

/// A log with a header and `n` records; returns its path.
fn log_with(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("audit.jsonl");
    let w = AuditWriter::open(&path).unwrap();
    for i in 0..n {
        w.append(&event(i)).unwrap();
    }
    path
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    let mut s = lines.join("\n");
    s.push('\n');
    std::fs::write(path, s).unwrap();
}

#[test]
fn long_log_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 5000);
    let v = verify_path(&path).unwrap();
    assert!(v.is_intact(), "{:?}", v.problem);
    assert_eq!(v.records, 5000);
    assert_eq!(v.lines, 5001);
    assert_eq!(v.last_seq, Some(5000));
    assert!(v.chain.as_deref().is_some_and(|c| c.len() == 32));
    let all = lines(&path);
    assert_eq!(
        v.last_hash.as_deref(),
        Some(toolgate_audit::line_hash(all[5000].as_bytes()).as_str())
    );
}

#[test]
fn header_only_log_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 0);
    let v = verify_path(&path).unwrap();
    assert!(v.is_intact());
    assert_eq!(v.records, 0);
    let first = &lines(&path)[0];
    assert!(first.contains(r#""kind":"header""#), "{first}");
    assert!(first.contains(r#""format":"toolgate-audit/1""#), "{first}");
}

#[test]
fn edited_field_is_found_at_the_edited_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 20);
    let mut l = lines(&path);
    // Line 8 holds seq 7.
    assert!(l[7].contains(r#""seq":7,"#));
    l[7] = l[7].replace("/work/file6.txt", "/work/other.txt");
    write_lines(&path, &l);
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert_eq!(
        p.kind,
        ProblemKind::Edited {
            edited_line: 8,
            edited_seq: 7
        }
    );
    assert_eq!((p.line, p.seq), (9, Some(8)));
    let msg = p.to_string();
    assert!(msg.contains("line 8 (seq 7) was edited"), "{msg}");
}

#[test]
fn edited_prev_field_is_found_on_its_own_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 20);
    let mut l = lines(&path);
    let v: serde_json::Value = serde_json::from_str(&l[10]).unwrap();
    let prev = v["prev"].as_str().unwrap();
    l[10] = l[10].replace(prev, &"0".repeat(64));
    write_lines(&path, &l);
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert_eq!(
        p.kind,
        ProblemKind::Edited {
            edited_line: 11,
            edited_seq: 10
        }
    );
}

#[test]
fn edited_header_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 3);
    let mut l = lines(&path);
    l[0] = l[0].replace(r#""chain":""#, r#""chain":"f"#);
    write_lines(&path, &l);
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert_eq!(
        p.kind,
        ProblemKind::Edited {
            edited_line: 1,
            edited_seq: 0
        }
    );
}

#[test]
fn deleted_line_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 20);
    let mut l = lines(&path);
    l.remove(5); // seq 5
    write_lines(&path, &l);
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert_eq!(
        p.kind,
        ProblemKind::Deleted {
            from_seq: 5,
            to_seq: 5
        }
    );
    assert_eq!((p.line, p.seq), (6, Some(6)));
    assert!(p.to_string().contains("record seq 5 was deleted"), "{p}");
}

#[test]
fn several_deleted_lines_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 20);
    let mut l = lines(&path);
    l.drain(5..9); // seq 5..=8
    write_lines(&path, &l);
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert_eq!(
        p.kind,
        ProblemKind::Deleted {
            from_seq: 5,
            to_seq: 8
        }
    );
}

#[test]
fn deleted_header_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 5);
    let mut l = lines(&path);
    l.remove(0);
    write_lines(&path, &l);
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert_eq!(p.kind, ProblemKind::MissingHeader);
    assert_eq!((p.line, p.seq), (1, Some(1)));
}

#[test]
fn inserted_foreign_line_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 20);
    let mut l = lines(&path);
    let forged = l[6].replace("/work/file5.txt", "/innocent");
    l.insert(9, forged);
    write_lines(&path, &l);
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert_eq!(p.kind, ProblemKind::Inserted { inserted_line: 10 });
    assert_eq!(p.line, 10);
}

#[test]
fn inserted_line_with_forged_seq_and_prev_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 20);
    let mut l = lines(&path);
    // A forger who knows the format computes the right seq and prev for line 10...
    let prev = toolgate_audit::line_hash(l[8].as_bytes());
    let forged = format!(
        r#"{{"seq":9,"prev":"{prev}","time":"2026-01-01T00:00:00.000Z","kind":"decision","effect":"allow"}}"#
    );
    l.insert(9, forged);
    write_lines(&path, &l);
    // ...but the next genuine line still points at line 9.
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert_eq!(p.kind, ProblemKind::Inserted { inserted_line: 10 });
    assert_eq!((p.line, p.seq), (11, Some(9)));
    assert!(p.to_string().contains("line 10 was inserted"), "{p}");
}

#[test]
fn copied_line_is_found_as_inserted() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 20);
    let mut l = lines(&path);
    let copy = l[3].clone();
    l.insert(12, copy);
    write_lines(&path, &l);
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert_eq!(p.kind, ProblemKind::Inserted { inserted_line: 13 });
}

#[test]
fn duplicated_line_at_the_end_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 5);
    let mut l = lines(&path);
    let copy = l[2].clone();
    l.push(copy);
    write_lines(&path, &l);
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert_eq!(p.kind, ProblemKind::Duplicate { first_line: 3 });
    assert_eq!(p.line, 7);
}

#[test]
fn swapped_lines_are_found_as_reordered() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 20);
    let mut l = lines(&path);
    l.swap(7, 8); // seq 7 and 8
    write_lines(&path, &l);
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert_eq!(
        p.kind,
        ProblemKind::Reordered {
            expected_seq: 7,
            found_at_line: 9
        }
    );
    assert_eq!((p.line, p.seq), (8, Some(8)));
}

#[test]
fn distant_reorder_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 20);
    let mut l = lines(&path);
    l.swap(4, 15);
    write_lines(&path, &l);
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert_eq!(
        p.kind,
        ProblemKind::Reordered {
            expected_seq: 4,
            found_at_line: 16
        }
    );
}

#[test]
fn truncated_last_line_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 10);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 30]).unwrap();
    let v = verify_path(&path).unwrap();
    let p = v.problem.unwrap();
    assert_eq!(p.kind, ProblemKind::Truncated);
    assert_eq!(p.line, 11);
    assert_eq!(v.records, 9);
}

#[test]
fn invalid_json_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 10);
    let mut l = lines(&path);
    l[4] = l[4].replacen('{', "{{", 1);
    write_lines(&path, &l);
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert!(matches!(p.kind, ProblemKind::InvalidJson { .. }), "{p:?}");
    assert_eq!(p.line, 5);
    assert!(
        p.to_string()
            .starts_with("line 5 is not a valid audit record"),
        "{p}"
    );
}

#[test]
fn empty_line_and_empty_file_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_with(dir.path(), 3);
    let mut l = lines(&path);
    l.insert(2, String::new());
    write_lines(&path, &l);
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert_eq!(
        p.kind,
        ProblemKind::InvalidJson {
            detail: "the line is empty".into()
        }
    );
    std::fs::write(&path, "").unwrap();
    let p = verify_path(&path).unwrap().problem.unwrap();
    assert_eq!(p.kind, ProblemKind::Empty);
}

#[test]
fn concatenated_logs_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let a = log_with(dir.path(), 3);
    let b_dir = dir.path().join("b");
    let b = log_with(&b_dir, 3);
    let mut l = lines(&a);
    l.extend(lines(&b));
    write_lines(&a, &l);
    let p = verify_path(&a).unwrap().problem.unwrap();
    assert_eq!(p.kind, ProblemKind::UnexpectedHeader);
    assert_eq!(p.line, 5);
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let err = verify_path(&dir.path().join("nope.jsonl")).unwrap_err();
    assert!(err.to_string().contains("nope.jsonl"), "{err}");
}
