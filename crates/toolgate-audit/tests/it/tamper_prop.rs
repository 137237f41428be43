//! Property: any single tampering that is not confined to the last record is detected, and
//! the reported line is where the tampering is (or the line right after it).

use proptest::prelude::*;
use toolgate_audit::{AuditWriter, Event, Kind, ProblemKind, verify_path};

const RECORDS: usize = 30;

fn sample() -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let w = AuditWriter::open(&path).unwrap();
    for i in 0..RECORDS {
        let mut e = Event::new(Kind::Decision);
        e.tool = Some(format!("tool{i}"));
        e.effect = Some("allow".into());
        w.append(&e).unwrap();
    }
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[derive(Debug, Clone)]
enum Tamper {
    /// Change one character of the tool name on line `i`.
    Edit(usize),
    Delete(usize),
    /// Insert a copy of line `from` before line `at`.
    Insert {
        from: usize,
        at: usize,
    },
    Swap(usize, usize),
}

fn tamper() -> impl Strategy<Value = Tamper> {
    let n = RECORDS + 1; // lines, header included
    prop_oneof![
        (0..n - 1).prop_map(Tamper::Edit),
        (0..n - 1).prop_map(Tamper::Delete),
        (0..n, 0..n).prop_map(|(from, at)| Tamper::Insert { from, at }),
        (0..n, 0..n)
            .prop_filter("distinct", |(a, b)| a != b)
            .prop_map(|(a, b)| Tamper::Swap(a, b)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn single_tampering_is_found_near_where_it_happened(t in tamper()) {
        let mut lines = sample();
        // 0-based index of the first changed line.
        let first = match t.clone() {
            Tamper::Edit(i) => {
                lines[i] = lines[i].replacen("\"tool", "\"toox", 1).replacen("\"format", "\"formax", 1);
                i
            }
            Tamper::Delete(i) => { lines.remove(i); i }
            Tamper::Insert { from, at } => {
                let copy = lines[from].clone();
                lines.insert(at, copy);
                at
            }
            Tamper::Swap(a, b) => { lines.swap(a, b); a.min(b) }
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let v = verify_path(&path).unwrap();
        let problem = v.problem.unwrap_or_else(|| panic!("{t:?} not detected"));
        let at = problem.line as usize - 1;
        prop_assert!(
            at == first || at == first + 1,
            "{:?}: reported at line {} ({}), changed line {}",
            t, problem.line, problem, first + 1
        );
        let kind_ok = match (&t, &problem.kind) {
            (Tamper::Edit(i), ProblemKind::Edited { edited_line, .. }) => *edited_line as usize == i + 1,
            (Tamper::Delete(0), ProblemKind::MissingHeader) => true,
            (Tamper::Delete(_), ProblemKind::Deleted { .. }) => true,
            (Tamper::Insert { at: 0, .. }, ProblemKind::MissingHeader) => true,
            (Tamper::Insert { .. }, ProblemKind::Inserted { .. } | ProblemKind::Duplicate { .. } | ProblemKind::UnexpectedHeader) => true,
            (Tamper::Swap(a, b), ProblemKind::MissingHeader) => *a.min(b) == 0,
            (Tamper::Swap(..), ProblemKind::Reordered { .. } | ProblemKind::UnexpectedHeader) => true,
            _ => false,
        };
        prop_assert!(kind_ok, "{:?} reported as {:?}", t, problem.kind);
    }
}
