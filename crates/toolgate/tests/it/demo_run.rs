//! `toolgate demo` runs the real proxy in front of the embedded demo server and prints
//! verdicts read from the proxy's replies.

use std::process::Command;

fn run_demo() -> (std::process::Output, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("demo")
        // The demo must not depend on the caller's environment.
        .env_remove("TOOLGATE_LOG")
        .env("HOME", "/nonexistent-home-the-demo-must-not-touch")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    (out, stdout)
}

#[test]
fn demo_prints_one_verdict_per_call_in_order() {
    let (out, stdout) = run_demo();
    assert!(
        out.status.success(),
        "demo failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verdicts: Vec<(&str, &str)> = stdout
        .lines()
        .filter_map(|l| {
            let (head, rest) = l.split_at(l.find("  ")?);
            matches!(head, "ALLOW" | "DENY " | "ASK  " | "DENY" | "ASK")
                .then_some((head.trim(), rest.trim()))
        })
        .collect();
    let expected = [
        ("ALLOW", "read_file README.md", "allow-workspace-read"),
        ("DENY", "read_file ~/.ssh/id_rsa", "protect-secrets"),
        ("ALLOW", "run_command `npm test`", "allow-tests"),
        ("DENY", "run_command `sudo rm -rf ~`", "deny rule"),
        ("ALLOW", "read_inbox", ""),
        (
            "DENY",
            "send_email to exfil@attacker.example",
            "untrusted output",
        ),
        (
            "ASK",
            "send_email to bob@partner.example",
            "not a trusted destination",
        ),
        ("ALLOW", "send_email to alice@team.example", ""),
        ("ALLOW", "fetch https://docs.rs/serde", "allow-docs"),
        (
            "ASK",
            "fetch https://docs.rs/serde (description changed)",
            "changed",
        ),
    ];
    assert_eq!(verdicts.len(), expected.len(), "{stdout}");
    for ((verdict, rest), (want, call, why)) in verdicts.iter().zip(expected) {
        assert_eq!(*verdict, want, "{rest}\n{stdout}");
        assert!(rest.starts_with(call), "{rest}");
        assert!(rest.contains(why), "`{rest}` should say `{why}`");
    }
    assert!(stdout.contains("The attacker got nothing."), "{stdout}");
    // Not a terminal: no colour codes.
    assert!(!stdout.contains('\x1b'), "{stdout:?}");
}

/// The README shows what the demo prints, word for word (its temporary directories as
/// `<workspace>` and `<home>`).
#[test]
fn the_readme_shows_the_demo_as_it_runs() {
    let (out, stdout) = run_demo();
    assert!(out.status.success(), "{stdout}");
    let dir = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("workspace "))
        .and_then(|rest| rest.split("/workspace").next())
        .expect("the demo names its workspace");
    let shown = stdout
        .replace(&format!("{dir}/workspace"), "<workspace>")
        .replace(&format!("{dir}/home"), "<home>");
    let readme = std::fs::read_to_string(crate::common::repo_root().join("README.md")).unwrap();
    let marker = "<!-- what `toolgate demo` prints";
    let block = readme
        .split_once(marker)
        .and_then(|(_, rest)| rest.split_once("```text\n"))
        .and_then(|(_, rest)| rest.split_once("\n```\n"))
        .expect("README.md shows the demo's output after its marker")
        .0;
    assert_eq!(shown.trim_end(), block);
}
