//! The attack corpus: every scenario of `tests/attacks/*.yaml` (repository root), each an
//! attack session and its benign twin, replayed through the real `toolgate wrap` binary in
//! front of the test kit's `attack_server`, with a scripted client that answers approval
//! prompts, and (hook steps) through the real `toolgate hook claude-code` and a real broker
//! in the same agent session. Prints one line per session and a summary table
//! (`docs/security-tests.md`).
//!
//! Run: `cargo test -p toolgate --test it attacks:: -- --nocapture`
//! One file or case: `ATTACKS_FILTER=mail` (substring of `file/case`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stdout,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; prints what it ran for the person reading the test output"
)]

use std::collections::BTreeMap;
use std::path::Path;

use toolgate_testkit::attack::{Env, load_corpus, run_session};

#[derive(Default)]
struct Row {
    attacks: usize,
    attacks_blocked: usize,
    benign: usize,
    benign_completed: usize,
    benign_approvals: usize,
    benign_max_approvals: usize,
    attack_denied_calls: usize,
    attack_refused_asks: usize,
}

#[test]
fn attack_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/attacks");
    let toolgate = Path::new(env!("CARGO_BIN_EXE_toolgate"));
    let server = toolgate_testkit::bin_path("attack_server");
    let filter = std::env::var("ATTACKS_FILTER").unwrap_or_default();
    let corpus = load_corpus(&root);
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut known = Vec::new();
    let mut fixed = Vec::new();
    for (path, file) in &corpus {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let env = Env {
            toolgate,
            server: &server,
            dir: &root,
        };
        for case in &file.cases {
            let id = format!("{stem}/{}", case.name);
            if !id.contains(&filter) {
                continue;
            }
            let row = rows.entry(case.bullet.clone()).or_default();
            let attack = run_session(&env, file, case, &case.attack);
            let benign = run_session(&env, file, case, &case.benign);
            row.attacks += 1;
            row.benign += 1;
            row.attack_denied_calls += attack.denied;
            row.attack_refused_asks += attack.refused;
            let attack_ok = attack.passed();
            if attack_ok {
                row.attacks_blocked += 1;
            }
            let benign_ok = benign.passed() && benign.approvals <= 1;
            if benign_ok {
                row.benign_completed += 1;
            }
            row.benign_approvals += benign.approvals;
            row.benign_max_approvals = row.benign_max_approvals.max(benign.approvals);
            let mark = |ok: bool| if ok { "ok  " } else { "FAIL" };
            println!(
                "{} attack  {id}  (denied {}, asked {})",
                mark(attack_ok),
                attack.denied,
                attack.approvals
            );
            println!(
                "{} benign  {id}  (approvals {})",
                mark(benign_ok),
                benign.approvals
            );
            match (&case.known_failure, attack_ok) {
                (Some(reason), false) => {
                    known.push(format!("{id}: {reason}: {}", attack.failures.join("; ")));
                }
                (Some(_), true) => fixed.push(id.clone()),
                (None, false) => {
                    failures.push(format!("{id} (attack): {}", attack.failures.join("; ")));
                }
                (None, true) => {}
            }
            if !benign.passed() {
                failures.push(format!("{id} (benign): {}", benign.failures.join("; ")));
            } else if benign.approvals > 1 {
                failures.push(format!(
                    "{id} (benign): {} approvals (at most one allowed)",
                    benign.approvals
                ));
            }
        }
    }
    let total = rows.values().fold(Row::default(), |mut t, r| {
        t.attacks += r.attacks;
        t.attacks_blocked += r.attacks_blocked;
        t.benign += r.benign;
        t.benign_completed += r.benign_completed;
        t.benign_approvals += r.benign_approvals;
        t.benign_max_approvals = t.benign_max_approvals.max(r.benign_max_approvals);
        t.attack_denied_calls += r.attack_denied_calls;
        t.attack_refused_asks += r.attack_refused_asks;
        t
    });
    println!();
    println!(
        "| bullet | attacks | blocked | denied calls | refused asks | benign | completed | approvals (total / max per session) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (bullet, r) in rows
        .iter()
        .chain(std::iter::once((&"**total**".to_owned(), &total)))
    {
        println!(
            "| {bullet} | {} | {} | {} | {} | {} | {} | {} / {} |",
            r.attacks,
            r.attacks_blocked,
            r.attack_denied_calls,
            r.attack_refused_asks,
            r.benign,
            r.benign_completed,
            r.benign_approvals,
            r.benign_max_approvals
        );
    }
    for k in &known {
        println!("KNOWN FAILURE {k}");
    }
    for f in &fixed {
        println!("FIXED (remove known_failure): {f}");
    }
    if filter.is_empty() {
        // The corpus itself is part of the claim: at least 60 pairs, every bullet covered.
        assert!(total.attacks >= 60, "only {} attack cases", total.attacks);
        for bullet in [
            "exfiltration",
            "secrets",
            "commands",
            "urls",
            "rug-pull",
            "budget",
        ] {
            assert!(rows.contains_key(bullet), "no case covers `{bullet}`");
        }
    }
    assert!(
        failures.is_empty(),
        "{} session(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
