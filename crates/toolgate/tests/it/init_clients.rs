//! `toolgate init` / `toolgate unwrap` against real files in a fake `HOME` and
//! project directory, with golden files under `tests/clients/` (repo root).
//!
//! Golden files use placeholders: `@TOOLGATE@` (the binary's canonical path),
//! `@PROJECT@` (the fake project directory) and `@POLICY@` (the policy file), all
//! JSON-escaped. Run with `TOOLGATE_BLESS=1` to rewrite the expected files.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stdout,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; prints what it ran for the person reading the test output"
)]

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;

const TIMEOUT: Duration = Duration::from_secs(60);

fn golden(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/clients")
        .join(rel)
}

/// A JSON string's content (without the quotes).
fn json_escaped(s: &str) -> String {
    let quoted = serde_json::Value::String(s.to_owned()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

struct Fake {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    xdg: PathBuf,
    project: PathBuf,
    policy: PathBuf,
}

impl Fake {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let home = root.join("home");
        let xdg = root.join("xdg");
        let project = root.join("project");
        for dir in [&home, &xdg, &project] {
            fs::create_dir_all(dir).unwrap();
        }
        let policy = root.join("policy.yaml");
        fs::write(&policy, "version: 1\n").unwrap();
        Fake {
            _tmp: tmp,
            home,
            xdg,
            project,
            policy,
        }
    }

    fn exe() -> String {
        let path = assert_cmd::cargo::cargo_bin("toolgate");
        path.canonicalize().unwrap().to_str().unwrap().to_owned()
    }

    /// Replaces the placeholders of a golden file.
    fn fill(&self, text: &str) -> String {
        text.replace("@TOOLGATE@", &json_escaped(&Self::exe()))
            .replace("@PROJECT@", &json_escaped(self.project.to_str().unwrap()))
            .replace("@POLICY@", &json_escaped(self.policy.to_str().unwrap()))
    }

    /// The inverse of `fill`, for blessing.
    fn unfill(&self, text: &str) -> String {
        text.replace(&json_escaped(&Self::exe()), "@TOOLGATE@")
            .replace(&json_escaped(self.policy.to_str().unwrap()), "@POLICY@")
            .replace(&json_escaped(self.project.to_str().unwrap()), "@PROJECT@")
    }

    /// Copies a golden input to `dest` (placeholders filled) and returns the text.
    fn place(&self, golden_input: &str, dest: &Path) -> String {
        let text = self.fill(&fs::read_to_string(golden(golden_input)).unwrap());
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::write(dest, &text).unwrap();
        text
    }

    /// Compares `file` with a golden expected file (or rewrites it when blessing).
    fn assert_golden(&self, file: &Path, expected: &str) {
        let actual = fs::read_to_string(file).unwrap();
        if std::env::var_os("TOOLGATE_BLESS").is_some() {
            fs::write(golden(expected), self.unfill(&actual)).unwrap();
            return;
        }
        let want = self.fill(&fs::read_to_string(golden(expected)).unwrap());
        assert_eq!(actual, want, "{} differs from {expected}", file.display());
    }

    /// `toolgate ARGS`; `init` also gets `--workspace <project>` (user configurations need
    /// one) unless the arguments name one.
    fn toolgate(&self, args: &[&str]) -> Command {
        let mut cmd = self.toolgate_as_given(args);
        if args.first() == Some(&"init") && !args.contains(&"--workspace") {
            cmd.arg("--workspace").arg(&self.project);
        }
        cmd
    }

    /// `toolgate ARGS`, exactly.
    fn toolgate_as_given(&self, args: &[&str]) -> Command {
        let mut cmd = Command::cargo_bin("toolgate").unwrap();
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.xdg)
            .current_dir(&self.project)
            .args(args)
            .write_stdin("")
            .timeout(TIMEOUT);
        cmd
    }

    fn desktop_config(&self) -> PathBuf {
        if cfg!(target_os = "macos") {
            self.home
                .join("Library/Application Support/Claude/claude_desktop_config.json")
        } else {
            self.xdg.join("Claude/claude_desktop_config.json")
        }
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(mut cmd: Command) -> Run {
    let out = cmd.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn backup(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.toolgate.bak", path.display()))
}

/// init → expected golden file → unwrap → the original bytes.
fn round_trip(fake: &Fake, client: &str, files: &[(&str, &Path, &str)], extra: &[&str]) {
    round_trip_to(fake, client, files, extra, None);
}

/// init → expected golden file → unwrap → the original bytes (or, when the input
/// had entries wrapped before, the `after_unwrap` golden file).
fn round_trip_to(
    fake: &Fake,
    client: &str,
    files: &[(&str, &Path, &str)],
    extra: &[&str],
    after_unwrap: Option<&str>,
) {
    let originals: Vec<String> = files
        .iter()
        .map(|(input, dest, _)| fake.place(input, dest))
        .collect();
    let mut args = vec!["init", "--client", client, "--yes"];
    args.extend_from_slice(extra);
    fake.toolgate(&args).assert().success();
    for ((_, dest, expected), original) in files.iter().zip(&originals) {
        fake.assert_golden(dest, expected);
        assert_eq!(&fs::read_to_string(backup(dest)).unwrap(), original);
        // The user's alone: it may hold a credential `init` moved out of the file.
        let mode = fs::metadata(backup(dest)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", dest.display());
    }
    fake.toolgate(&["unwrap", "--client", client, "--yes"])
        .assert()
        .success();
    for ((_, dest, _), original) in files.iter().zip(&originals) {
        // The restore read back as written: nothing of toolgate is left beside the file.
        assert!(!backup(dest).exists(), "{}", dest.display());
        match after_unwrap {
            Some(expected) => fake.assert_golden(dest, expected),
            None => assert_eq!(
                &fs::read_to_string(dest).unwrap(),
                original,
                "{}",
                dest.display()
            ),
        }
    }
}

#[test]
fn claude_desktop_round_trip() {
    let fake = Fake::new();
    let config = fake.desktop_config();
    // The input has an entry wrapped before (`already`): init leaves it alone,
    // unwrap restores it too.
    round_trip_to(
        &fake,
        "claude-desktop",
        &[(
            "claude-desktop/input.json",
            &config,
            "claude-desktop/expected_init.json",
        )],
        &[],
        Some("claude-desktop/expected_unwrap.json"),
    );
}

#[test]
fn claude_code_project_user_and_local_scopes() {
    let fake = Fake::new();
    let mcp = fake.project.join(".mcp.json");
    let user = fake.home.join(".claude.json");
    round_trip(
        &fake,
        "claude-code",
        &[
            (
                "claude-code/mcp.json",
                &mcp,
                "claude-code/expected_init_mcp.json",
            ),
            (
                "claude-code/claude.json",
                &user,
                "claude-code/expected_init_claude.json",
            ),
        ],
        &[],
    );
}

#[test]
fn cursor_jsonc_with_policy() {
    let fake = Fake::new();
    let config = fake.project.join(".cursor/mcp.json");
    let policy = fake.policy.to_str().unwrap().to_owned();
    round_trip(
        &fake,
        "cursor",
        &[("cursor/input.json", &config, "cursor/expected_init.json")],
        &["--policy", &policy],
    );
}

#[test]
fn cursor_user_scope_is_found_too() {
    let fake = Fake::new();
    let config = fake.home.join(".cursor/mcp.json");
    fake.place("cursor/input.json", &config);
    fake.toolgate(&["init", "--client", "cursor", "--yes"])
        .assert()
        .success();
    assert!(
        fs::read_to_string(&config)
            .unwrap()
            .contains("x-toolgate-upstream")
    );
}

#[test]
fn vscode_round_trip() {
    let fake = Fake::new();
    let config = fake.project.join(".vscode/mcp.json");
    round_trip(
        &fake,
        "vscode",
        &[("vscode/input.json", &config, "vscode/expected_init.json")],
        &[],
    );
}

#[test]
fn vscode_server_selection() {
    let fake = Fake::new();
    let config = fake.project.join(".vscode/mcp.json");
    let original = fake.place("vscode/input.json", &config);
    fake.toolgate(&["init", "--client", "vscode", "--server", "fetch", "--yes"])
        .assert()
        .success();
    fake.assert_golden(&config, "vscode/expected_init_fetch.json");
    // Unwrapping another (unwrapped) server changes nothing.
    let out = run(fake.toolgate(&[
        "unwrap",
        "--client",
        "vscode",
        "--server",
        "Perplexity",
        "--yes",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("nothing to change"), "{}", out.stdout);
    fake.toolgate(&["unwrap", "--client", "vscode", "--server", "fetch", "--yes"])
        .assert()
        .success();
    assert_eq!(fs::read_to_string(&config).unwrap(), original);
}

#[test]
fn vscode_user_profile_is_found() {
    let fake = Fake::new();
    let config = if cfg!(target_os = "macos") {
        fake.home
            .join("Library/Application Support/Code/User/mcp.json")
    } else {
        fake.xdg.join("Code/User/mcp.json")
    };
    fake.place("vscode/input.json", &config);
    fake.toolgate(&["init", "--client", "vscode", "--yes"])
        .assert()
        .success();
    fake.assert_golden(&config, "vscode/expected_init.json");
}

#[test]
fn windsurf_round_trip() {
    let fake = Fake::new();
    let config = fake.home.join(".codeium/windsurf/mcp_config.json");
    round_trip(
        &fake,
        "windsurf",
        &[(
            "windsurf/input.json",
            &config,
            "windsurf/expected_init.json",
        )],
        &[],
    );
}

/// Copilot CLI's `~/.copilot/mcp-config.json`: a stdio server is `type: local` (wrapped,
/// its `tools` list kept), a remote one `type: http` (becomes `wrap --url`).
#[test]
fn copilot_cli_round_trip() {
    let fake = Fake::new();
    let config = fake.home.join(".copilot/mcp-config.json");
    round_trip(
        &fake,
        "copilot-cli",
        &[(
            "copilot-cli/mcp-config.json",
            &config,
            "copilot-cli/expected_init.json",
        )],
        &[],
    );
}

/// Cline's `cline_mcp_settings.json` (the Cline CLI's, in `~/.cline/data/settings/`): the
/// server is wrapped, its own keys (`disabled`, `autoApprove`) kept.
#[test]
fn cline_round_trip() {
    let fake = Fake::new();
    let config = fake
        .home
        .join(".cline/data/settings/cline_mcp_settings.json");
    round_trip(
        &fake,
        "cline",
        &[(
            "cline/cline_mcp_settings.json",
            &config,
            "cline/expected_init.json",
        )],
        &[],
    );
}

/// OpenCode's `opencode.json` (JSON with comments): a local server's `command` is a list, so
/// the wrapped one is a list too (toolgate, `wrap` and its options, `--`, the original), its
/// other keys kept; a `type: remote` server becomes a local one running `wrap --url`, its
/// credential header moved to `environment`.
#[test]
fn opencode_round_trip() {
    let fake = Fake::new();
    let config = fake.project.join("opencode.json");
    round_trip(
        &fake,
        "opencode",
        &[(
            "opencode/opencode.json",
            &config,
            "opencode/expected_init.json",
        )],
        &[],
    );
}

/// Qwen Code's settings file (JSON with comments, other settings beside `mcpServers`): the
/// stdio server is wrapped, its own keys (`timeout`, `trust`) kept, and the remote one
/// (`httpUrl`, Gemini CLI's and Qwen Code's key for Streamable HTTP) becomes `wrap --url`;
/// the workspace is the project that holds `.qwen/`.
#[test]
fn qwen_code_round_trip() {
    let fake = Fake::new();
    let config = fake.project.join(".qwen/settings.json");
    round_trip(
        &fake,
        "qwen-code",
        &[(
            "qwen-code/settings.json",
            &config,
            "qwen-code/expected_init.json",
        )],
        &[],
    );
}

/// Gemini CLI's settings file, in the same format as Qwen Code's (which forked it): the
/// workspace is the project that holds `.gemini/`.
#[test]
fn gemini_cli_round_trip() {
    let fake = Fake::new();
    let config = fake.project.join(".gemini/settings.json");
    round_trip(
        &fake,
        "gemini-cli",
        &[(
            "gemini-cli/settings.json",
            &config,
            "gemini-cli/expected_init.json",
        )],
        &[],
    );
}

#[test]
fn unknown_server_is_an_error() {
    let fake = Fake::new();
    let config = fake.project.join(".vscode/mcp.json");
    let original = fake.place("vscode/input.json", &config);
    let out = run(fake.toolgate(&["init", "--client", "vscode", "--server", "nope", "--yes"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("no server named `nope`"),
        "{}",
        out.stderr
    );
    assert_eq!(fs::read_to_string(&config).unwrap(), original);
}

#[test]
fn remote_entries_are_wrapped_too() {
    let fake = Fake::new();
    let config = fake.project.join(".mcp.json");
    fake.place("claude-code/mcp.json", &config);
    let out = run(fake.toolgate(&["init", "--client", "claude-code", "--dry-run"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    for line in [
        "wrap     notion in mcpServers\n",
        "wrap     asana in mcpServers\n",
        "wrap     memory in mcpServers\n",
        "wrap     playwright in mcpServers\n",
    ] {
        assert!(
            out.stdout.contains(line),
            "{line:?} not in:\n{}",
            out.stdout
        );
    }
}

#[test]
fn second_init_changes_nothing() {
    let fake = Fake::new();
    let config = fake.desktop_config();
    fake.place("claude-desktop/input.json", &config);
    fake.toolgate(&["init", "--client", "claude-desktop", "--yes"])
        .assert()
        .success();
    let once = fs::read_to_string(&config).unwrap();
    let backup_once = fs::read_to_string(backup(&config)).unwrap();
    let out = run(fake.toolgate(&["init", "--client", "claude-desktop", "--yes"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("nothing to change"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("keep     filesystem in mcpServers: already wrapped"),
        "{}",
        out.stdout
    );
    assert_eq!(fs::read_to_string(&config).unwrap(), once);
    assert_eq!(fs::read_to_string(backup(&config)).unwrap(), backup_once);
}

#[test]
fn without_a_terminal_nothing_is_written() {
    let fake = Fake::new();
    let config = fake.desktop_config();
    let original = fake.place("claude-desktop/input.json", &config);
    let out = run(fake.toolgate(&["init", "--client", "claude-desktop"]));
    assert_eq!(out.code, 1, "{}", out.stderr);
    let wrapped_command = format!("+      \"command\": \"{}\",", json_escaped(&Fake::exe()));
    assert!(out.stdout.contains(&wrapped_command), "{}", out.stdout);
    assert!(
        out.stdout.contains("-      \"command\": \"npx\","),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("stdin is not a terminal"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--yes"), "{}", out.stderr);
    assert_eq!(fs::read_to_string(&config).unwrap(), original);
    assert!(!backup(&config).exists());
}

#[test]
fn dry_run_shows_the_diff_and_exits_zero() {
    let fake = Fake::new();
    let config = fake.desktop_config();
    let original = fake.place("claude-desktop/input.json", &config);
    let out = run(fake.toolgate(&["init", "--client", "claude-desktop", "--dry-run", "--yes"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("-      \"command\": \"npx\","),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("dry run: nothing was written"),
        "{}",
        out.stdout
    );
    assert_eq!(fs::read_to_string(&config).unwrap(), original);
    assert!(!backup(&config).exists());
}

#[test]
fn explicit_config_wraps_every_project() {
    let fake = Fake::new();
    let config = fake.home.join("elsewhere.json");
    let original = fake.place("claude-code/claude.json", &config);
    let out = run(fake.toolgate(&["init", "--config", config.to_str().unwrap(), "--yes"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("wrap     other in projects[\"/somewhere/else\"].mcpServers"),
        "{}",
        out.stdout
    );
    let out = run(fake.toolgate(&["unwrap", "--config", config.to_str().unwrap(), "--yes"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("(its backup removed)"),
        "{}",
        out.stdout
    );
    assert_eq!(fs::read_to_string(&config).unwrap(), original);
    assert!(!backup(&config).exists());
    // `--keep-backup` keeps it: what the file held before the restore.
    fake.toolgate(&["init", "--config", config.to_str().unwrap(), "--yes"])
        .assert()
        .success();
    let wrapped = fs::read_to_string(&config).unwrap();
    let out = run(fake.toolgate(&[
        "unwrap",
        "--config",
        config.to_str().unwrap(),
        "--yes",
        "--keep-backup",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(fs::read_to_string(&config).unwrap(), original);
    assert_eq!(fs::read_to_string(backup(&config)).unwrap(), wrapped);
}

#[test]
fn no_config_found_is_an_error() {
    let fake = Fake::new();
    let out = run(fake.toolgate(&["init", "--client", "windsurf", "--yes"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("no MCP client configuration found"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(".codeium/windsurf/mcp_config.json"),
        "{}",
        out.stderr
    );
}

#[test]
fn discovery_without_client_finds_every_file() {
    let fake = Fake::new();
    let desktop = fake.desktop_config();
    let windsurf = fake.home.join(".codeium/windsurf/mcp_config.json");
    let a = fake.place("claude-desktop/expected_unwrap.json", &desktop);
    let b = fake.place("windsurf/input.json", &windsurf);
    fake.toolgate(&["init", "--yes"]).assert().success();
    assert_ne!(fs::read_to_string(&desktop).unwrap(), a);
    assert_ne!(fs::read_to_string(&windsurf).unwrap(), b);
    fake.toolgate(&["unwrap", "--yes"]).assert().success();
    assert_eq!(fs::read_to_string(&desktop).unwrap(), a);
    assert_eq!(fs::read_to_string(&windsurf).unwrap(), b);
}

/// The parsed (JSONC) content of `path`.
fn parsed(path: &Path) -> serde_json::Value {
    let text = fs::read_to_string(path).unwrap();
    let ast = jsonc_parser::parse_to_ast(&text, &Default::default(), &Default::default()).unwrap();
    ast.value.unwrap().into()
}

/// init → golden file; no secret anywhere in a wrapped entry's `args`, each named header
/// a `${VAR}` reference whose value is in `env`; unwrap → the original bytes.
struct RemoteCase<'a> {
    client: &'a str,
    input: &'a str,
    expected: &'a str,
    dest: PathBuf,
    map: &'a str,
    secrets: &'a [&'a str],
    /// (server, header, value the client reads from `env`, the reference in `args`)
    references: &'a [(&'a str, &'a str, &'a str, &'a str)],
    /// (server, argument): headers that are no secret, in `args` as written
    clear: &'a [(&'a str, &'a str)],
}

fn remote_round_trip(fake: &Fake, case: &RemoteCase<'_>) -> Run {
    let original = fake.place(case.input, &case.dest);
    let out = run(fake.toolgate(&["init", "--client", case.client, "--yes"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    fake.assert_golden(&case.dest, case.expected);
    let doc = parsed(&case.dest);
    for (name, entry) in doc[case.map].as_object().unwrap() {
        let Some(args) = entry.get("args").and_then(|a| a.as_array()) else {
            continue;
        };
        if args.first().and_then(|a| a.as_str()) != Some("wrap") {
            continue;
        }
        for arg in args {
            let arg = arg.as_str().unwrap();
            for secret in case.secrets {
                assert!(
                    !arg.contains(secret),
                    "`{secret}` in the args of `{name}`: {arg}"
                );
            }
        }
    }
    for (server, header, value, reference) in case.references {
        let entry = &doc[case.map][server];
        let args: Vec<&str> = entry["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let wanted = format!("{header}: {reference}");
        let at = args
            .iter()
            .position(|a| *a == wanted)
            .unwrap_or_else(|| panic!("`{wanted}` not in {args:?}"));
        assert_eq!(args[at - 1], "--header");
        let var = reference.rsplit('{').next().unwrap().trim_end_matches('}');
        assert_eq!(
            entry["env"][var].as_str(),
            Some(*value),
            "{server}: env `{var}`"
        );
    }
    for (server, arg) in case.clear {
        let args = &doc[case.map][server]["args"];
        assert!(
            args.as_array().unwrap().iter().any(|a| a == arg),
            "{arg} not in {args}"
        );
    }
    fake.toolgate(&["unwrap", "--client", case.client, "--yes"])
        .assert()
        .success();
    assert_eq!(fs::read_to_string(&case.dest).unwrap(), original);
    out
}

#[test]
fn remote_claude_code() {
    let fake = Fake::new();
    let out = remote_round_trip(
        &fake,
        &RemoteCase {
            client: "claude-code",
            input: "remote/claude-code.json",
            expected: "remote/claude-code.expected.json",
            dest: fake.project.join(".mcp.json"),
            map: "mcpServers",
            secrets: &["ak_live_9f8e7d6c5b4a39281706", "GITHUB_PAT"],
            references: &[
                (
                    "github",
                    "Authorization",
                    "Bearer ${GITHUB_PAT}",
                    "${TOOLGATE_DOLLAR:-$}{TOOLGATE_HDR_GITHUB_AUTHORIZATION}",
                ),
                (
                    "asana",
                    "X-API-Key",
                    "ak_live_9f8e7d6c5b4a39281706",
                    "${TOOLGATE_DOLLAR:-$}{TOOLGATE_HDR_ASANA_X_API_KEY}",
                ),
            ],
            clear: &[("asana", "X-Client: toolgate-test")],
        },
    );
    for line in [
        "wrap     github in mcpServers\n",
        "wrap     sentry in mcpServers\n",
        "skip     internal in mcpServers: the URL uses a variable",
        "skip     oauthed in mcpServers: remote server with its `oauth` settings",
    ] {
        assert!(
            out.stdout.contains(line),
            "{line:?} not in:\n{}",
            out.stdout
        );
    }
}

#[test]
fn remote_vscode() {
    let fake = Fake::new();
    remote_round_trip(
        &fake,
        &RemoteCase {
            client: "vscode",
            input: "remote/vscode.json",
            expected: "remote/vscode.expected.json",
            dest: fake.project.join(".vscode/mcp.json"),
            map: "servers",
            secrets: &["input:api-key"],
            references: &[(
                "acme",
                "Authorization",
                "Bearer ${input:api-key}",
                "${TOOLGATE_HDR_ACME_AUTHORIZATION}",
            )],
            clear: &[],
        },
    );
}

#[test]
fn remote_cursor() {
    let fake = Fake::new();
    remote_round_trip(
        &fake,
        &RemoteCase {
            client: "cursor",
            input: "remote/cursor.json",
            expected: "remote/cursor.expected.json",
            dest: fake.project.join(".cursor/mcp.json"),
            map: "mcpServers",
            secrets: &["env:DOCS_API_KEY"],
            references: &[(
                "remote-docs",
                "API_KEY",
                "${env:DOCS_API_KEY}",
                "${TOOLGATE_HDR_REMOTE_DOCS_API_KEY}",
            )],
            clear: &[("remote-docs", "X-Team: platform")],
        },
    );
}

#[test]
fn remote_windsurf() {
    let fake = Fake::new();
    remote_round_trip(
        &fake,
        &RemoteCase {
            client: "windsurf",
            input: "remote/windsurf.json",
            expected: "remote/windsurf.expected.json",
            dest: fake.home.join(".codeium/windsurf/mcp_config.json"),
            map: "mcpServers",
            secrets: &["figd_0123456789abcdefghij"],
            references: &[(
                "figma",
                "Authorization",
                "Bearer figd_0123456789abcdefghij",
                "${TOOLGATE_HDR_FIGMA_AUTHORIZATION}",
            )],
            clear: &[],
        },
    );
}

#[test]
fn remote_claude_desktop_mcp_remote() {
    let fake = Fake::new();
    let out = remote_round_trip(
        &fake,
        &RemoteCase {
            client: "claude-desktop",
            input: "remote/claude-desktop.json",
            expected: "remote/claude-desktop.expected.json",
            dest: fake.desktop_config(),
            map: "mcpServers",
            secrets: &["sk-live-abcdef0123456789", "0123456789abcdefghijklmnop"],
            references: &[
                // mcp-remote's own `${VAR}` stays: `toolgate wrap` reads it from `env` too.
                (
                    "remote-example",
                    "Authorization",
                    "Bearer 0123456789abcdefghijklmnop",
                    "${AUTH_HEADER}",
                ),
                (
                    "sse-only",
                    "X-Api-Key",
                    "sk-live-abcdef0123456789",
                    "${TOOLGATE_HDR_SSE_ONLY_X_API_KEY}",
                ),
            ],
            clear: &[],
        },
    );
    for line in [
        "skip     debugging in mcpServers: runs `mcp-remote` with `--debug`",
        "skip     with-port in mcpServers: runs `mcp-remote` with the argument `9696`",
    ] {
        assert!(
            out.stdout.contains(line),
            "{line:?} not in:\n{}",
            out.stdout
        );
    }
}

/// A user configuration belongs to no project: without `--workspace`, `init` refuses it
/// (naming the file, the map and the server) and writes nothing; a project configuration
/// gets the project directory.
#[test]
fn a_user_configuration_needs_a_workspace() {
    let fake = Fake::new();
    let config = fake.desktop_config();
    let original = fake.place("claude-desktop/input.json", &config);
    let out = run(fake.toolgate_as_given(&["init", "--client", "claude-desktop", "--yes"]));
    assert_eq!(out.code, 2, "{}", out.stdout);
    let want = format!(
        "in `{}`: server `filesystem` in `mcpServers` belongs to no project, so toolgate cannot tell its workspace\nhelp: name the directory it may work in with `--workspace DIR`",
        config.display()
    );
    assert!(out.stderr.contains(&want), "{}", out.stderr);
    assert_eq!(fs::read_to_string(&config).unwrap(), original);
    assert!(!backup(&config).exists());
    // The project's own configuration needs none: it is the project's.
    let mcp = fake.project.join(".mcp.json");
    fake.place("claude-code/mcp.json", &mcp);
    let out = run(fake.toolgate_as_given(&["init", "--config", mcp.to_str().unwrap(), "--yes"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    fake.assert_golden(&mcp, "claude-code/expected_init_mcp.json");
}

/// `init` never writes a workspace that is the home directory or `/`: not from
/// `--workspace`, not for a project configuration found in `$HOME`.
#[test]
fn the_home_directory_and_the_root_are_never_a_workspace() {
    let fake = Fake::new();
    let config = fake.desktop_config();
    let original = fake.place("claude-desktop/input.json", &config);
    let above_home = fake.home.parent().unwrap().to_str().unwrap().to_owned();
    for dir in [
        fake.home.to_str().unwrap(),
        above_home.as_str(),
        "/",
        "/nonexistent-toolgate-dir",
    ] {
        let out = run(fake.toolgate(&[
            "init",
            "--client",
            "claude-desktop",
            "--yes",
            "--workspace",
            dir,
        ]));
        assert_eq!(out.code, 2, "{dir}: {}", out.stdout);
        assert!(
            out.stderr
                .contains(&format!("the workspace `{dir}` (`--workspace`)"))
                && out.stderr.contains("help: "),
            "{dir}: {}",
            out.stderr
        );
        assert_eq!(fs::read_to_string(&config).unwrap(), original);
    }
    // A `.mcp.json` in the home directory, `init` run there.
    let mcp = fake.home.join(".mcp.json");
    let original = fake.place("claude-code/mcp.json", &mcp);
    let mut cmd = fake.toolgate(&["init", "--client", "claude-code", "--yes"]);
    cmd.current_dir(&fake.home);
    let out = run(cmd);
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(
        out.stderr.contains(&format!(
            "the workspace `{}` (the project of `{}`) is your home directory",
            fake.home.display(),
            mcp.display()
        )),
        "{}",
        out.stderr
    );
    assert_eq!(fs::read_to_string(&mcp).unwrap(), original);
}

/// A policy that does not load is refused before anything is written, with its own first
/// error, located.
#[test]
fn a_policy_that_does_not_load_is_refused() {
    let fake = Fake::new();
    let config = fake.project.join(".mcp.json");
    let original = fake.place("claude-code/mcp.json", &config);
    let broken = fake.project.join("toolgate.yaml");
    fs::write(&broken, "version: 1\nrules:\n  - id: r\n    effect: alow\n").unwrap();
    let out = run(fake.toolgate(&[
        "init",
        "--client",
        "claude-code",
        "--yes",
        "--policy",
        broken.to_str().unwrap(),
    ]));
    assert_eq!(out.code, 2, "{}", out.stdout);
    let first = format!(
        "the policy `{}` does not load: {}:4:13: ",
        broken.display(),
        broken.display()
    );
    assert!(out.stderr.contains(&first), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("help: fix it (`toolgate policy check --policy"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert_eq!(fs::read_to_string(&config).unwrap(), original);
    assert!(!backup(&config).exists());
}
