//! `toolgate policy …` end to end: the cases corpus under tests/policy/, snapshots of the
//! diagnostics for tests/policy/broken/, init, explain (text, JSON, symlinks) and schema.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn toolgate() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("toolgate"));
    cmd.current_dir(repo_root());
    cmd.timeout(std::time::Duration::from_secs(60));
    cmd
}

const STARTER: &str = "crates/toolgate-policy/src/starter.yaml";

/// The policy a cases file runs against: `x.cases.yaml` → `x.policy.yaml`, except the
/// starter's cases, which run against the starter policy itself.
fn policy_for(cases: &Path) -> PathBuf {
    let name = cases.file_name().unwrap().to_str().unwrap();
    let stem = name.strip_suffix(".cases.yaml").unwrap();
    if stem == "starter" {
        PathBuf::from(STARTER)
    } else {
        cases.with_file_name(format!("{stem}.policy.yaml"))
    }
}

fn corpus() -> Vec<PathBuf> {
    let dir = repo_root().join("tests/policy");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().unwrap().ends_with(".cases.yaml"))
        .map(|p| p.strip_prefix(repo_root()).unwrap().to_path_buf())
        .collect();
    files.sort();
    files
}

#[test]
fn corpus_passes() {
    let files = corpus();
    assert!(files.len() >= 2, "corpus missing: {files:?}");
    for cases in files {
        let policy = policy_for(&cases);
        let out = toolgate()
            .args(["policy", "test", "--policy"])
            .arg(&policy)
            .arg("--cases")
            .arg(&cases)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{} against {}:\n{stdout}\n{stderr}",
            cases.display(),
            policy.display()
        );
        let last = stdout.lines().last().unwrap_or_default();
        assert!(last.ends_with(" passed, 0 failed"), "{stdout}");
        assert!(!stdout.contains("FAIL "), "{stdout}");
        // Every case ran.
        let n: usize = last.split(' ').next().unwrap().parse().unwrap();
        assert_eq!(n, stdout.lines().filter(|l| l.starts_with("PASS ")).count());
        assert!(n > 0);
    }
}

#[test]
fn corpus_policies_are_valid_without_warnings() {
    for cases in corpus() {
        let policy = policy_for(&cases);
        let out = toolgate()
            .args(["policy", "check", "--policy"])
            .arg(&policy)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", policy.display());
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with("policy is valid: "),
            "{}",
            policy.display()
        );
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn failing_case_is_reported_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("c.yaml");
    std::fs::write(
        &cases,
        "workspace: .\nhome: home\ncases:\n  - {name: wrong on purpose, tool: read_file, arguments: {path: .env}, expect: {effect: allow}}\n  - {name: right, tool: read_file, arguments: {path: a.txt}, expect: {effect: allow, rule: allow-workspace-read}}\n  - {name: lost, tool: read_file, arguments: {path: .env}, expect: {effect: allow, rule: allow-workspace-read}}\n  - {name: missed, tool: read_file, arguments: {path: a.txt}, expect: {effect: allow, rule: allow-tests}}\n",
    )
    .unwrap();
    let out = toolgate()
        .args(["policy", "test", "--policy", STARTER, "--cases"])
        .arg(&cases)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("FAIL wrong on purpose: expected allow, got deny by rule `protect-dotenv`"),
        "{stdout}"
    );
    assert!(stdout.contains("PASS right"), "{stdout}");
    // The expected rule matched too, but another decided: which one, and why.
    assert!(
        stdout.contains("rule `allow-workspace-read` matched too, but `protect-dotenv` decided"),
        "{stdout}"
    );
    assert!(
        stdout.contains("rule `allow-tests` did not match this call"),
        "{stdout}"
    );
    assert!(
        stdout.trim_end().ends_with("1 passed, 3 failed"),
        "{stdout}"
    );
}

#[test]
fn invalid_cases_file_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("c.yaml");
    std::fs::write(
        &cases,
        "cases:\n  - {name: x, tool: t, expectt: {effect: allow}}\n",
    )
    .unwrap();
    let out = toolgate()
        .args(["policy", "test", "--policy", STARTER, "--cases"])
        .arg(&cases)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expectt"));
}

#[test]
fn broken_policies_snapshots() {
    let dir = repo_root().join("tests/policy/broken");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 15);
    for file in files {
        let rel = file.strip_prefix(repo_root()).unwrap();
        let out = toolgate()
            .args(["policy", "check", "--policy"])
            .arg(rel)
            .output()
            .unwrap();
        let code = out.status.code().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        // Every diagnostic is located: `--> file:line:column`.
        for line in stderr
            .lines()
            .filter(|l| l.trim_start().starts_with("--> "))
        {
            let loc = line.trim_start().trim_start_matches("--> ");
            if file.file_name().unwrap() != "empty.yaml" {
                assert_eq!(loc.matches(':').count(), 2, "unlocated: {line}");
            }
        }
        let warnings_only = stderr.contains("warning: ") && !stderr.contains("error: ");
        assert_eq!(code, if warnings_only { 0 } else { 1 }, "{}", rel.display());
        let name = file.file_stem().unwrap().to_str().unwrap().to_owned();
        insta::with_settings!({snapshot_path => repo_root().join("tests/policy/broken/snapshots"), prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!(name, format!("exit: {code}\n--- stdout\n{stdout}--- stderr\n{stderr}"));
        });
    }
}

#[test]
fn init_writes_a_valid_policy_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.yaml");
    toolgate()
        .args(["policy", "init", "--policy"])
        .arg(&path)
        .assert()
        .success();
    let first = std::fs::read_to_string(&path).unwrap();
    assert!(first.starts_with("# yaml-language-server: $schema="));
    toolgate()
        .args(["policy", "check", "--policy"])
        .arg(&path)
        .assert()
        .success();
    std::fs::write(&path, "version: 1\n# mine\n").unwrap();
    let out = toolgate()
        .args(["policy", "init", "--policy"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("never overwrites"));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "version: 1\n# mine\n"
    );
}

#[test]
fn check_usage_error_exits_2() {
    let out = toolgate().args(["policy", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = toolgate()
        .args(["policy", "check", "--policy", "/nonexistent/toolgate.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn explain_json_shape_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let ws = root.join("ws");
    std::fs::create_dir(&ws).unwrap();
    let home = root.join("home");
    let out = toolgate()
        .args(["policy", "explain", "--policy", STARTER, "--workspace"])
        .arg(&ws)
        .arg("--home")
        .arg(&home)
        .args([
            "--server",
            "fs",
            "--tool",
            "read_multiple_files",
            "--json",
            "--args",
        ])
        .arg(r#"{"paths":["a.txt","~/.ssh/id_rsa"]}"#)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let expected = serde_json::json!({
        "action": {"server": "fs", "tool": "read_multiple_files", "parts": [
            {"operation": "fs.read", "resources": [
                format!("{}/a.txt", ws.display()),
                format!("{}/.ssh/id_rsa", home.display())
            ]}
        ]},
        "decision": {
            "effect": "deny",
            "rule": "protect-keys",
            "contract": "rule",
            "reason": format!("`fs.read` of `{}/a.txt`, `{}/.ssh/id_rsa` matches deny rule `protect-keys`", ws.display(), home.display()),
            "matched_rules": ["protect-keys", "protect-credential-dirs"]
        }
    });
    assert_eq!(v, expected);
}

/// `--json` marks exactly the parts the text form shows as `opaque: yes` with
/// `"opaque": true` (a script reading the JSON must see what a person reading the text sees).
#[test]
fn explain_json_marks_opaque_parts_like_the_text() {
    let run = |json: bool| {
        let mut cmd = toolgate();
        cmd.args([
            "policy",
            "explain",
            "--policy",
            STARTER,
            "--workspace",
            ".",
            "--home",
            "/nonexistent-home",
            "--tool",
            "fetch",
            "--args",
            r#"{"url":["https://a.example/","::not a url"]}"#,
        ]);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run(false);
    let v: serde_json::Value = serde_json::from_str(&run(true)).unwrap();
    let json_marks: Vec<bool> = v["action"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let o = p.get("opaque");
            assert!(
                o.is_none() || o == Some(&serde_json::Value::Bool(true)),
                "{p}"
            );
            o.is_some()
        })
        .collect();
    let text_marks: Vec<bool> = text
        .split("\n  [")
        .skip(1)
        .map(|block| block.contains("opaque:     yes"))
        .collect();
    assert_eq!(json_marks, text_marks, "{text}\n{v}");
    assert_eq!(json_marks, [false, true], "{text}");
}

/// An allow rule for a host and method makes `policy explain` say that it trusted the
/// fetch pack's URL (a URL that passes the sink gate says which rule vouched for it).
#[test]
fn explain_says_an_allow_rule_trusted_a_url() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("p.yaml");
    std::fs::write(
        &policy,
        "version: 1\ndefault: ask\nrules:\n  - {id: api, effect: allow, operations: [net.request], hosts: ['*.internal.example.com', api.example.com], methods: [get]}\n",
    )
    .unwrap();
    let run = |json: bool| {
        let mut cmd = toolgate();
        cmd.args(["policy", "explain", "--policy"])
            .arg(&policy)
            .args(["--workspace", ".", "--home", "/nonexistent-home"])
            .args(["--tool", "fetch", "--args"])
            .arg(r#"{"url":"https://svc.internal.example.com/v1"}"#);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run(false);
    assert!(text.contains("decision:  ALLOW (by rule `api`)"), "{text}");
    assert!(
        text.contains("allowed_by_rule (allow rule `api` matches its host and method)"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&run(true)).unwrap();
    assert_eq!(v["decision"]["effect"], "allow");
    assert!(
        v["decision"]["reason"]
            .as_str()
            .unwrap()
            .contains("is trusted by allow rule `api`"),
        "{v}"
    );
}

#[test]
fn explain_resolves_symlinks_out_of_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let ws = root.join("ws");
    let ssh = root.join("home/.ssh");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("config"), "Host *\n").unwrap();
    std::os::unix::fs::symlink(&ssh, ws.join("innocent")).unwrap();
    let out = toolgate()
        .args(["policy", "explain", "--policy", STARTER, "--workspace"])
        .arg(&ws)
        .arg("--home")
        .arg(root.join("home"))
        .args([
            "--tool",
            "read_file",
            "--args",
            r#"{"path":"innocent/config"}"#,
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("resource:   {}/config", ssh.display())),
        "{text}"
    );
    assert!(
        text.contains("decision:  DENY (by rule `protect-credential-dirs`)"),
        "{text}"
    );
}

#[test]
fn explain_text_lists_results_and_decision() {
    let out = toolgate()
        .args([
            "policy",
            "explain",
            "--policy",
            STARTER,
            "--workspace",
            ".",
            "--home",
            "/nonexistent-home",
            "--tool",
            "execute_command",
            "--args",
            r#"{"command":"ls && dd if=/dev/zero of=x"}"#,
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("executable: dd"), "{text}");
    assert!(text.contains("matched:   deny-disk-wipers"), "{text}");
    assert!(
        text.contains("decision:  DENY (by rule `deny-disk-wipers`)"),
        "{text}"
    );
}

#[test]
fn explain_rejects_non_object_args() {
    let out = toolgate()
        .args([
            "policy", "explain", "--policy", STARTER, "--tool", "x", "--args", "[1]",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("must be a JSON object"));
}

#[test]
fn schema_is_json_and_matches_the_published_file() {
    let out = toolgate().args(["policy", "schema"]).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["title"], "toolgate policy");
    assert!(v["$defs"]["rule"]["properties"]["resources"].is_object());
    let published = std::fs::read_to_string(repo_root().join("docs/policy.schema.json")).unwrap();
    let published: serde_json::Value = serde_json::from_str(&published).unwrap();
    assert_eq!(
        v, published,
        "docs/policy.schema.json is stale: regenerate it with `toolgate policy schema > docs/policy.schema.json`"
    );
}

/// What `policy init` writes is what `policy check`, `explain` and `test` read without
/// `--policy`, and they say so; with no such file they say how to get one.
#[test]
fn the_policy_of_the_current_directory_is_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut cmd = toolgate();
        cmd.current_dir(dir.path()).args(args);
        cmd.output().unwrap()
    };
    let none = run(&["policy", "check"]);
    assert_eq!(none.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&none.stderr);
    assert!(stderr.contains("toolgate policy init"), "{stderr}");
    let init = run(&["policy", "init"]);
    let stdout = String::from_utf8_lossy(&init.stdout);
    assert!(
        stdout.contains("check it with: toolgate policy check\n"),
        "{stdout}"
    );
    for args in [
        &["policy", "check"][..],
        &[
            "policy",
            "explain",
            "--tool",
            "read_file",
            "--args",
            "{\"path\":\"~/.ssh/id_rsa\"}",
        ],
    ] {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("using the policy `toolgate.yaml` of this directory"),
            "{args:?}: {stderr}"
        );
    }
}
