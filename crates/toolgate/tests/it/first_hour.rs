//! The first hour of a new user, as README.md's quick start walks it, from a fresh home and
//! a project with a Claude Code `.mcp.json`: the demo, `policy init`, `check`, `explain`,
//! `init`, `doctor`, `unwrap` and `report`. Each step's printed promise is checked against
//! what it did (the file it says it wrote is there, the call it says is denied is, the
//! restore it reports is byte for byte, nothing of toolgate is left behind).

use std::path::Path;
use std::process::{Command, Stdio};

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `toolgate ARGS` in `project`, with `home` as the whole of its home.
fn toolgate(project: &Path, home: &Path, args: &[&str]) -> Ran {
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .current_dir(project)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("TOOLGATE_BROKER_DIR", home.join("broker"))
        .env_remove("TOOLGATE_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

const MCP_JSON: &str = r#"{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]
    }
  }
}
"#;

#[test]
fn the_quick_start_does_what_it_says() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (home, project) = (base.join("home"), base.join("project"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join(".mcp.json"), MCP_JSON).unwrap();
    let run = |args: &[&str]| {
        let r = toolgate(&project, &home, args);
        assert_eq!(
            r.code,
            Some(0),
            "toolgate {args:?}:\n{}{}",
            r.stdout,
            r.stderr
        );
        r
    };

    // The demo: offline, and the attacker gets nothing.
    let demo = run(&["demo"]);
    assert!(
        demo.stdout.contains("The attacker got nothing."),
        "{}",
        demo.stdout
    );

    // `policy init` writes ./toolgate.yaml and says to check it with `policy check`.
    let init = run(&["policy", "init"]);
    assert!(
        init.stdout
            .contains("wrote a starter policy to toolgate.yaml"),
        "{}",
        init.stdout
    );
    assert!(project.join("toolgate.yaml").is_file());
    assert!(
        init.stdout.contains("toolgate policy check"),
        "{}",
        init.stdout
    );
    // …which works as printed (no `--policy`), and as the README writes it.
    for args in [
        &["policy", "check"][..],
        &["policy", "check", "--policy", "toolgate.yaml"],
    ] {
        let check = run(args);
        assert!(
            check.stdout.starts_with("policy is valid: "),
            "{}",
            check.stdout
        );
    }

    // `explain`: a key in the home is denied, by the rule it names.
    let explain = run(&[
        "policy",
        "explain",
        "--tool",
        "read_file",
        "--args",
        r#"{"path":"~/.ssh/id_rsa"}"#,
    ]);
    assert!(
        explain
            .stdout
            .contains("decision:  DENY (by rule `protect-keys`)"),
        "{}",
        explain.stdout
    );

    // `init` wraps the project's server and says to restart the client.
    let policy = project.join("toolgate.yaml");
    let workspace = project.to_str().unwrap();
    let wrapped = run(&[
        "init",
        "--client",
        "claude-code",
        "--policy",
        policy.to_str().unwrap(),
        "--workspace",
        workspace,
        "--yes",
    ]);
    assert!(
        wrapped.stdout.contains("restart the client"),
        "{}",
        wrapped.stdout
    );
    let mcp = std::fs::read_to_string(project.join(".mcp.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&mcp).unwrap();
    let entry = &v["mcpServers"]["filesystem"];
    assert_eq!(entry["command"], env!("CARGO_BIN_EXE_toolgate"), "{mcp}");
    assert_eq!(entry["args"][0], "wrap", "{mcp}");

    // `doctor` finds it wrapped and the policy loading.
    let doctor = run(&["doctor"]);
    assert!(
        doctor.stdout.contains("wrapped [filesystem]"),
        "{}",
        doctor.stdout
    );
    assert!(
        doctor.stdout.contains("loads (used by claude-code"),
        "{}",
        doctor.stdout
    );

    // `unwrap` restores the file byte for byte and leaves no backup.
    let unwrapped = run(&["unwrap", "--client", "claude-code", "--yes"]);
    assert!(
        unwrapped.stdout.contains("(its backup removed)"),
        "{}",
        unwrapped.stdout
    );
    assert_eq!(
        std::fs::read_to_string(project.join(".mcp.json")).unwrap(),
        MCP_JSON
    );
    let left: Vec<String> = std::fs::read_dir(&project)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("toolgate.bak"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // `report` reads the policy of the directory, and says so.
    let report = run(&["report"]);
    assert!(
        report
            .stderr
            .contains("using the policy `toolgate.yaml` of this directory"),
        "{}",
        report.stderr
    );
    assert!(
        report.stdout.starts_with("# toolgate report"),
        "{}",
        report.stdout
    );
    assert!(
        report.stdout.contains("## Suggestions"),
        "{}",
        report.stdout
    );
}
