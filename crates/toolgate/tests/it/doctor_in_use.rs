//! `toolgate doctor` checks the policies and workspaces actually in use: each `--policy` and
//! `--workspace` of every wrapped entry and every hook command of the configurations it
//! inspects, through the real binary in a fake `HOME` and project directory.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

struct Fake {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
}

impl Fake {
    fn new() -> Fake {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let home = root.join("home");
        let project = root.join("project");
        fs::create_dir_all(&home).unwrap();
        fs::create_dir_all(&project).unwrap();
        fs::write(
            project.join(".mcp.json"),
            r#"{"mcpServers": {"files": {"command": "npx", "args": ["-y", "server-files"]}}}"#,
        )
        .unwrap();
        Fake {
            _tmp: tmp,
            home,
            project,
        }
    }

    fn policy(&self) -> PathBuf {
        self.project.join("toolgate.yaml")
    }

    fn toolgate(&self, args: &[&str]) -> (i32, String) {
        let out = assert_cmd::Command::cargo_bin("toolgate")
            .unwrap()
            .env_clear()
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_RUNTIME_DIR", &self.home)
            .env("TOOLGATE_BROKER_DIR", self.home.join("broker"))
            .current_dir(&self.project)
            .args(args)
            .write_stdin("")
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap()
        );
        (out.status.code().unwrap_or(-1), text)
    }

    /// Wraps the project's server and installs the project's hooks, both with the project's
    /// policy.
    fn set_up(&self) {
        fs::write(self.policy(), "version: 1\ndefault: ask\n").unwrap();
        let policy = self.policy();
        let policy = policy.to_str().unwrap();
        for args in [
            &[
                "init",
                "--client",
                "claude-code",
                "--yes",
                "--policy",
                policy,
            ][..],
            &[
                "init",
                "--client",
                "claude-code",
                "--hooks",
                "--scope",
                "project",
                "--yes",
                "--policy",
                policy,
            ],
        ] {
            let (code, out) = self.toolgate(args);
            assert_eq!(code, 0, "{out}");
        }
    }
}

fn lines_with<'a>(out: &'a str, tag: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.starts_with(tag)).collect()
}

#[test]
fn a_broken_policy_in_use_fails_naming_its_users_and_its_first_error() {
    let fake = Fake::new();
    fake.set_up();
    let (code, out) = fake.toolgate(&["doctor", "--no-remote"]);
    assert_eq!(code, 0, "{out}");
    let policy = fake.policy();
    let mcp = fake.project.join(".mcp.json");
    let hooks = fake.project.join(".claude/settings.json");
    assert!(
        out.contains(&format!(
            "PASS  policy `{}` loads (used by claude-code `{}` server `files` (mcpServers), claude-code project hooks `{}`)",
            policy.display(),
            mcp.display(),
            hooks.display()
        )),
        "{out}"
    );
    // Nothing uses the starter policy: doctor does not vouch for it.
    assert!(!out.contains("starter policy"), "{out}");

    // The project's policy breaks: every entry and hook that uses it would deny everything.
    fs::write(
        fake.policy(),
        "version: 1\nrules:\n  - id: r\n    effect: alow\n",
    )
    .unwrap();
    let (code, out) = fake.toolgate(&["doctor", "--no-remote"]);
    assert_eq!(code, 1, "{out}");
    let fails = lines_with(&out, "FAIL");
    assert_eq!(fails.len(), 1, "{out}");
    let want = format!(
        "FAIL  claude-code `{}` server `files` (mcpServers), claude-code project hooks `{}` would deny every call: the policy `{p}` does not load: {p}:4:13: unknown value `alow`",
        mcp.display(),
        hooks.display(),
        p = policy.display()
    );
    assert!(fails[0].starts_with(&want), "{out}");
    assert!(
        fails[0].contains(". help: fix it and check it with `toolgate policy check --policy"),
        "{out}"
    );
}

#[test]
fn workspaces_in_use_are_checked() {
    let fake = Fake::new();
    fake.set_up();
    // As init wrote them: no finding about workspaces.
    let (code, out) = fake.toolgate(&["doctor", "--no-remote"]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("workspace"), "{out}");
    // Edited by hand (or by an agent): the home directory as the server's workspace, the
    // hooks without one.
    let mcp = fake.project.join(".mcp.json");
    let text = fs::read_to_string(&mcp).unwrap();
    let project = fake.project.to_str().unwrap();
    let edited = text.replacen(
        &format!("\"--workspace\", \"{project}\""),
        &format!("\"--workspace\", \"{}\"", fake.home.display()),
        1,
    );
    assert_ne!(edited, text);
    fs::write(&mcp, edited).unwrap();
    let hooks = fake.project.join(".claude/settings.json");
    let text = fs::read_to_string(&hooks).unwrap();
    let edited = text.replace(&format!(" --workspace {project}"), "");
    assert_ne!(edited, text);
    fs::write(&hooks, edited).unwrap();
    let (code, out) = fake.toolgate(&["doctor", "--no-remote"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        lines_with(&out, "FAIL"),
        [format!(
            "FAIL  claude-code `{}` server `files` (mcpServers): its workspace `{}` is your home directory: the policy's `${{workspace}}` covers your dotfiles and credentials. help: run `toolgate unwrap`, then `toolgate init --workspace DIR` with the project's directory",
            mcp.display(),
            fake.home.display()
        )],
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "WARN  claude-code project hooks `{}` has no `--workspace`: its `${{workspace}}` is the directory the client reports, which follows the agent's `cd`",
            hooks.display()
        )),
        "{out}"
    );
    // A workspace that is gone.
    let text = fs::read_to_string(&mcp).unwrap();
    fs::write(
        &mcp,
        text.replace(
            &format!("\"{}\"", fake.home.display()),
            "\"/nonexistent-toolgate-dir\"",
        ),
    )
    .unwrap();
    let (code, out) = fake.toolgate(&["doctor", "--no-remote"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("its workspace `/nonexistent-toolgate-dir` does not exist"),
        "{out}"
    );
}
