//! `toolgate audit verify|summary|tail` through the real binary.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use toolgate_audit::{Approval, ApprovalHow, ApprovalScope, AuditWriter, Event, Kind, Net};

fn toolgate() -> Command {
    Command::cargo_bin("toolgate").unwrap()
}

/// A log with 7 records: 3 allowed reads, 2 denied, an approved command, a failed fetch.
fn sample_log(dir: &Path) -> PathBuf {
    let path = dir.join(".toolgate/audit.jsonl");
    let w = AuditWriter::open(&path).unwrap();
    for i in 0..5 {
        let mut e = Event::new(Kind::Decision);
        e.session = Some("s".into());
        e.request_id = Some(i.to_string());
        e.server = Some("fs".into());
        e.tool = Some("read_file".into());
        e.operations = vec!["fs.read".into()];
        if i < 3 {
            e.effect = Some("allow".into());
            e.resources = vec![format!("/ws/src/file{i}.rs")];
            e.rule = Some("workspace-read".into());
        } else {
            e.effect = Some("deny".into());
            e.resources = vec!["/home/u/.ssh/id_rsa".into()];
            e.rule = Some("protect-secrets".into());
            e.reason = Some("matches deny rule protect-secrets".into());
        }
        w.append(&e).unwrap();
    }
    let mut a = Event::new(Kind::Decision);
    a.server = Some("sh".into());
    a.tool = Some("run".into());
    a.operations = vec!["exec".into()];
    a.executable = Some("/usr/bin/npm".into());
    a.effect = Some("allow".into());
    a.approval = Some(Approval {
        how: ApprovalHow::Client,
        scope: ApprovalScope::Session,
    });
    w.append(&a).unwrap();
    let mut r = Event::new(Kind::Result);
    r.server = Some("web".into());
    r.tool = Some("fetch".into());
    r.net = Some(Net {
        host: "api.example.com".into(),
        method: Some("GET".into()),
    });
    r.is_error = Some(true);
    w.append(&r).unwrap();
    path
}

fn edit_line(path: &Path, index: usize, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert!(lines[index].contains(from), "{}", lines[index]);
    lines[index] = lines[index].replace(from, to);
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn verify_intact_log_from_the_default_path() {
    let dir = tempfile::tempdir().unwrap();
    sample_log(dir.path());
    let out = toolgate()
        .current_dir(dir.path())
        .args(["audit", "verify"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with("audit log is intact: 7 records (seq 1–7), "),
        "{stdout}"
    );
    assert!(stdout.contains("last hash: "), "{stdout}");
}

#[test]
fn verify_locates_an_edited_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample_log(dir.path());
    edit_line(&path, 4, r#""effect":"deny""#, r#""effect":"allow""#);
    let out = toolgate()
        .args(["audit", "verify", "--audit"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("is broken: line 5 (seq 4) was edited: its hash does not match the `prev` of line 6 (seq 5)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("4 records verified before the problem"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn verify_locates_a_deleted_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample_log(dir.path());
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.remove(2);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let out = toolgate()
        .args(["audit", "verify", "--audit"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("record seq 2 was deleted: line 3 (seq 3) follows seq 1"),
        "{stderr}"
    );
}

#[test]
fn verify_of_a_missing_log_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = toolgate()
        .current_dir(dir.path())
        .args(["audit", "verify"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.starts_with("toolgate: cannot open audit log `.toolgate/audit.jsonl`"),
        "{stderr}"
    );
    // The OS error once, not once per layer that carries it.
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr}"
    );
}

#[test]
fn summary_counts_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample_log(dir.path());
    let out = toolgate()
        .args(["audit", "summary", "--audit"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains(": 7 records, "), "{stdout}");
    assert!(stdout.contains("chain:     intact ("), "{stdout}");
    assert!(
        stdout.contains("kinds:     decision 6, result 1"),
        "{stdout}"
    );
    assert!(stdout.contains("effects:   allow 4, deny 2"), "{stdout}");
    assert!(
        stdout.contains("rules:     workspace-read 3, protect-secrets 2"),
        "{stdout}"
    );

    let out = toolgate()
        .args(["audit", "summary", "--json", "--audit"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["records"], 7);
    assert_eq!(v["by_effect"]["deny"], 2);
    assert_eq!(v["by_tool"]["read_file"], 5);
    assert_eq!(v["chain"]["intact"], true);
    assert_eq!(v["chain"]["last_seq"], 7);
}

#[test]
fn summary_of_a_broken_log_says_so_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample_log(dir.path());
    edit_line(&path, 2, "file1.rs", "fileX.rs");
    let out = toolgate()
        .args(["audit", "summary", "--json", "--audit"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["chain"]["intact"], false);
    assert_eq!(v["chain"]["line"], 4);
    assert!(
        v["chain"]["problem"]
            .as_str()
            .unwrap()
            .contains("line 3 (seq 2) was edited")
    );
}

#[test]
fn tail_human_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample_log(dir.path());
    let out = toolgate()
        .args(["audit", "tail", "-n", "3", "--audit"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    // time  EFFECT  server/tool  operation  resource  reason
    let (time, rest) = lines[0].split_once("  ").unwrap();
    assert!(time.ends_with('Z') && time.len() == 24, "{time}");
    assert_eq!(
        rest,
        "DENY       fs/read_file  fs.read  /home/u/.ssh/id_rsa  matches deny rule protect-secrets"
    );
    assert!(
        lines[1].ends_with("ALLOW      sh/run  exec  /usr/bin/npm  [approved via client, session]"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].ends_with("ERROR      web/fetch  -  GET api.example.com"),
        "{}",
        lines[2]
    );

    let out = toolgate()
        .args(["audit", "tail", "--json", "--audit"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let seqs: Vec<u64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5, 6, 7]);
}

#[test]
fn tail_escapes_terminal_control_characters_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let w = AuditWriter::open(&path).unwrap();
    let mut e = Event::new(Kind::Decision);
    e.tool = Some("evil\u{1b}[2J\rtool".into());
    e.effect = Some("deny".into());
    w.append(&e).unwrap();
    let out = toolgate()
        .args(["audit", "tail", "--audit"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        !out.stdout.contains(&0x1b) && !out.stdout.contains(&b'\r'),
        "{out:?}"
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains(r"DENY       evil\u{1b}[2J\rtool"),
        "{stdout}"
    );
}

#[test]
fn verify_header_only_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    drop(AuditWriter::open(&path).unwrap());
    let out = toolgate()
        .args(["audit", "verify", "--audit"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with("audit log is intact: 0 records (header only), "),
        "{stdout}"
    );
}
