//! Every command README.md shows (its `sh` blocks) is run here, in order, as a new user would
//! run it: by `bash` in a project directory, with a fresh home, `toolgate` (and the reference
//! filesystem server behind `npx`, and Claude Code's CLI) on `PATH`, offline. A command that
//! cannot run here (it needs the network, a terminal, or runs until stopped) names the test
//! that runs it against a local stand-in, and that test must exist. A README command this file
//! does not know fails the test: a new snippet comes with a way to run it.
//!
//! What a command says it did is checked where README says it: `init` writes what README's
//! "before/after" shows, `unwrap` restores byte for byte, the wrapped server answers.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common;

/// The commands of README's `sh` blocks, in order: continuation lines joined, comments and
/// blank lines dropped.
fn readme_commands(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in readme.lines() {
        let fence = line.trim_start();
        if fence.starts_with("```") {
            in_sh = !in_sh && fence.trim_start_matches('`').trim() == "sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let code = strip_comment(line.trim());
        if code.is_empty() {
            continue;
        }
        if let Some(head) = code.strip_suffix('\\') {
            pending.push_str(head.trim_end());
            pending.push(' ');
            continue;
        }
        pending.push_str(code);
        out.push(std::mem::take(&mut pending));
    }
    out
}

/// `line` without a trailing `# comment` (a `#` after a blank, outside quotes).
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double, mut prev_blank) = (false, false, true);
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev_blank => return line[..i].trim_end(),
            _ => {}
        }
        prev_blank = c.is_whitespace();
    }
    line.trim_end()
}

/// How a README command is run.
enum How {
    /// By bash in the project; it must exit 0.
    Run,
    /// In the background until a later command stops it (`toolgate broker`).
    Background,
    /// By another test, against a local stand-in: `(file, test)`, and why not here.
    Elsewhere(&'static str, &'static str, &'static str),
}

/// What to do with each README command, by its beginning; the first match decides.
const HOW: &[(&str, How)] = &[
    (
        "cargo run --release --locked -p toolgate -- demo",
        How::Elsewhere(
            "demo_run.rs",
            "the_readme_shows_the_demo_as_it_runs",
            "the demo of the binary under test; a release build would take minutes",
        ),
    ),
    (
        "scripts/test",
        How::Elsewhere(
            "readme_commands.rs",
            "ci_runs_the_readmes_test_command_and_packages_what_it_installs",
            "it is the command that runs this test",
        ),
    ),
    (
        "curl --proto '=https' --tlsv1.2 -LsSf https://github.com/toolgate/toolgate/releases/latest/download/toolgate-installer.sh",
        How::Elsewhere(
            "readme_commands.rs",
            "ci_runs_the_readmes_test_command_and_packages_what_it_installs",
            "the network; the release configuration that makes the installer is checked",
        ),
    ),
    (
        "cargo install --locked --path crates/toolgate",
        How::Elsewhere(
            "readme_commands.rs",
            "ci_runs_the_readmes_test_command_and_packages_what_it_installs",
            "a release build; CI builds every published crate from its package",
        ),
    ),
    (
        "toolgate wrap --server github --url https://api.githubcopilot.com/mcp/",
        How::Elsewhere(
            "remote_faults.rs",
            "an_expired_token_is_an_error_that_says_how_to_authorize",
            "the network: the same `--header 'Authorization: Bearer ${VAR}'` against a loopback server",
        ),
    ),
    (
        "toolgate auth login https://mcp.linear.app/mcp",
        How::Elsewhere(
            "remote_oauth.rs",
            "login_refresh_status_and_logout_end_to_end",
            "the network and a browser: a loopback authorization server and a scripted browser",
        ),
    ),
    (
        "toolgate wrap --server linear --url https://mcp.linear.app/mcp",
        How::Elsewhere(
            "remote_oauth.rs",
            "wrap_logs_in_at_the_first_initialize_and_answers_it_once_authorized",
            "the network: a loopback server behind a loopback authorization server",
        ),
    ),
    (
        "toolgate gateway --config gateway.yaml",
        How::Elsewhere(
            "gateway_five_minutes.rs",
            "the_five_minute_gateway_runs_as_the_page_shows",
            "it serves until stopped: docs/gateway.md's start, run with curl",
        ),
    ),
    (
        "toolgate approvals",
        How::Elsewhere(
            "approvals_tty.rs",
            "the_terminal_ui_shows_a_request_and_allows_it_with_o",
            "a terminal user interface: driven in a pseudo-terminal",
        ),
    ),
    ("toolgate broker stop", How::Run),
    ("toolgate broker", How::Background),
    ("toolgate ", How::Run),
    ("claude mcp add ", How::Run),
];

fn how(command: &str) -> &'static How {
    HOW.iter()
        .find(|(prefix, _)| command.starts_with(prefix))
        .map(|(_, how)| how)
        .unwrap_or_else(|| {
            panic!(
                "README.md shows `{command}`, which no test runs\nhelp: run it in readme_commands.rs, or name the test that does in its `HOW`"
            )
        })
}

/// The sandbox: a project, a fresh home, and the programs README's commands call on `PATH`.
struct Sandbox {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    home: PathBuf,
    path: std::ffi::OsString,
}

impl Sandbox {
    fn new(node: &Path) -> Sandbox {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let (project, home, bin) = (base.join("project"), base.join("home"), base.join("bin"));
        for dir in [&project, &home, &bin] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let toolgate = common::toolgate_bin();
        std::os::unix::fs::symlink(&toolgate, bin.join("toolgate")).unwrap();
        std::os::unix::fs::symlink(
            toolgate.with_file_name("toolgate-hook"),
            bin.join("toolgate-hook"),
        )
        .unwrap();
        std::os::unix::fs::symlink(
            common::node_modules().join(".bin/claude"),
            bin.join("claude"),
        )
        .unwrap();
        // `npx -y @modelcontextprotocol/server-filesystem …` from the pinned install, offline.
        let filesystem =
            common::node_modules().join("@modelcontextprotocol/server-filesystem/dist/index.js");
        let npx = bin.join("npx");
        std::fs::write(
            &npx,
            format!(
                "#!/bin/sh\n[ \"$1\" = -y ] && shift\ncase \"$1\" in\n  @modelcontextprotocol/server-filesystem) shift; exec '{}' '{}' \"$@\" ;;\nesac\necho \"npx (test stand-in): not offline: $*\" >&2\nexit 1\n",
                node.display(),
                filesystem.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&npx, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths(
            [bin.clone(), node.parent().unwrap().to_path_buf()]
                .into_iter()
                .chain(std::env::split_paths(
                    &std::env::var_os("PATH").unwrap_or_default(),
                )),
        )
        .unwrap();
        Sandbox {
            _tmp: tmp,
            project,
            home,
            path,
        }
    }

    fn bash(&self, command: &str) -> Command {
        let mut cmd = Command::new("bash");
        cmd.args(["-c", command])
            .current_dir(&self.project)
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("TOOLGATE_BROKER_DIR", self.home.join("broker"))
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("TOOLGATE_LOG")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
        cmd
    }

    /// Runs `command`, feeding it `stdin`; it must exit 0.
    fn run(&self, command: &str, stdin: &[u8]) -> String {
        use std::io::Write as _;
        let mut child = self
            .bash(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = common::wait_with_output(child, Duration::from_secs(60), command);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(
            out.status.success(),
            "README's `{command}` failed ({}):\n{stdout}\n{stderr}",
            out.status
        );
        stdout
    }
}

impl Sandbox {
    /// Runs `command` (a stdio MCP server) as a client would: initialize, list the tools,
    /// read `notes.md`, end. Returns the call's reply; the command must exit 0.
    fn client_session(&self, command: &str) -> String {
        let mut peer = toolgate_testkit::Peer::spawn(self.bash(command), true);
        let mut request = |id: i64, method: &str, params: Value| {
            peer.send(
                serde_json::to_vec(
                    &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
                )
                .unwrap(),
            );
            loop {
                let m = peer.recv_json();
                if m["id"] == id && m.get("method").is_none() {
                    return m;
                }
            }
        };
        request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "readme", "version": "0"}}),
        );
        let tools = request(2, "tools/list", json!({}));
        assert!(tools.to_string().contains("read_text_file"), "{tools}");
        let notes = self.project.join("notes.md");
        let reply = request(
            3,
            "tools/call",
            json!({"name": "read_text_file", "arguments": {"path": notes}}),
        );
        peer.close_stdin();
        let status = peer.wait_within(Duration::from_secs(30));
        assert!(status.success(), "README's `{command}`: {}", peer.stderr());
        reply.to_string()
    }
}

/// README's JSON block that follows `marker` (a line of README's text).
fn json_after(readme: &str, marker: &str) -> Value {
    let at = readme
        .find(marker)
        .unwrap_or_else(|| panic!("README.md no longer says `{marker}`"));
    let rest = &readme[at..];
    let start = rest.find("```json\n").unwrap() + "```json\n".len();
    let end = rest[start..].find("\n```").unwrap();
    serde_json::from_str(&rest[start..start + end]).unwrap()
}

/// README's example paths made this sandbox's.
fn localise(value: &Value, sandbox: &Sandbox) -> Value {
    let text = value
        .to_string()
        .replace(
            "/Users/you/.cargo/bin/toolgate",
            common::toolgate_bin().to_str().unwrap(),
        )
        .replace("/Users/you/project", sandbox.project.to_str().unwrap())
        .replace(
            "/Users/you/toolgate.yaml",
            sandbox.project.join("toolgate.yaml").to_str().unwrap(),
        );
    serde_json::from_str(&text).unwrap()
}

#[test]
fn every_readme_command_runs() {
    let Some((node, _)) = common::node_and("@modelcontextprotocol/server-filesystem/dist/index.js")
    else {
        return;
    };
    let readme = std::fs::read_to_string(common::repo_root().join("README.md")).unwrap();
    let commands = readme_commands(&readme);
    assert!(commands.len() > 40, "{commands:#?}");
    let sandbox = Sandbox::new(&node);
    let project = &sandbox.project;

    // What README's commands find on a machine in use: Claude Desktop's configuration as
    // README shows it before `init`, a project `.mcp.json`, files to read, a cases file.
    let before = localise(&json_after(&readme, "this entry"), &sandbox);
    let desktop = sandbox
        .home
        .join(".config/Claude/claude_desktop_config.json");
    std::fs::create_dir_all(desktop.parent().unwrap()).unwrap();
    let desktop_text = serde_json::to_string_pretty(&before).unwrap() + "\n";
    std::fs::write(&desktop, &desktop_text).unwrap();
    std::fs::write(project.join(".mcp.json"), &desktop_text).unwrap();
    // Every other client's MCP configuration, with the same server, where README's `init
    // --client …` looks for it.
    let servers =
        serde_json::to_string_pretty(&json!({"mcpServers": before["mcpServers"]})).unwrap();
    let configs = [
        (project.join(".qwen/settings.json"), servers.clone()),
        (project.join(".gemini/settings.json"), servers.clone()),
        (
            sandbox.home.join(".copilot/mcp-config.json"),
            servers.clone(),
        ),
        (
            sandbox.home.join(".codeium/windsurf/mcp_config.json"),
            servers.clone(),
        ),
        (
            sandbox.home.join(".codex/config.toml"),
            format!(
                "[mcp_servers.filesystem]\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"{}\"]\n",
                project.display()
            ),
        ),
        (
            project.join("opencode.json"),
            serde_json::to_string_pretty(&json!({"mcp": {"filesystem": {
                "type": "local",
                "command": ["npx", "-y", "@modelcontextprotocol/server-filesystem", project],
            }}}))
            .unwrap(),
        ),
    ];
    for (file, text) in &configs {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    std::fs::write(project.join("notes.md"), "# notes\n").unwrap();
    std::fs::write(
        project.join("cases.yaml"),
        "cases:\n  - name: ssh keys stay private\n    tool: read_file\n    arguments: {path: ~/.ssh/id_rsa}\n    expect: {effect: deny}\n",
    )
    .unwrap();

    let mut broker: Option<std::process::Child> = None;
    let mut ran = Vec::new();
    for command in &commands {
        match how(command) {
            How::Elsewhere(file, test, _why) => {
                let source = std::fs::read_to_string(
                    common::repo_root()
                        .join("crates/toolgate/tests/it")
                        .join(file),
                )
                .unwrap();
                assert!(
                    source.contains(&format!("fn {test}()")),
                    "README's `{command}` is said to run in {file}'s `{test}`, which is not there"
                );
                continue;
            }
            How::Background => {
                let child = sandbox
                    .bash(command)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                broker = Some(child);
                let socket = sandbox.home.join("broker/broker.sock");
                assert!(
                    toolgate_testkit::wait_until(Duration::from_secs(30), || socket.exists()),
                    "`{command}` did not start"
                );
                continue;
            }
            How::Run => {}
        }
        if command.starts_with("toolgate gateway check") {
            // README points to docs/gateway.md's five-minute start for a configuration.
            let page =
                std::fs::read_to_string(common::repo_root().join("docs/gateway.md")).unwrap();
            let marker = "<!-- five-minute: setup -->\n```sh\n";
            let at = page.find(marker).expect("docs/gateway.md's set-up block") + marker.len();
            let setup = &page[at..at + page[at..].find("\n```\n").unwrap()];
            sandbox.run(setup, b"");
        }
        // In a terminal `init` and `unwrap` show the change and ask; here `--yes` answers
        // (init_tty.rs drives the question itself).
        let command_here =
            if command.starts_with("toolgate init ") || command.starts_with("toolgate unwrap ") {
                format!("{command} --yes")
            } else {
                command.clone()
            };
        let out = if command.starts_with("toolgate wrap ") {
            sandbox.client_session(command)
        } else {
            sandbox.run(&command_here, b"")
        };
        ran.push(command.clone());
        // What README says each did.
        if command.starts_with("toolgate init --client claude-desktop") {
            let after: Value =
                serde_json::from_str(&std::fs::read_to_string(&desktop).unwrap()).unwrap();
            let mut want = localise(
                &json_after(&readme, "becomes (the original is kept"),
                &sandbox,
            );
            // README's example is a Mac; the entry's upstream is kept as it was.
            want["mcpServers"]["filesystem"]["x-toolgate-upstream"] =
                before["mcpServers"]["filesystem"].clone();
            assert_eq!(after, want, "README's before/after of `init`");
        }
        if command.starts_with("toolgate unwrap --client claude-code") {
            assert_eq!(
                std::fs::read_to_string(project.join(".mcp.json")).unwrap(),
                desktop_text,
                "unwrap restores .mcp.json byte for byte"
            );
        }
        if command.starts_with("toolgate wrap ") {
            assert!(
                out.contains("# notes"),
                "the wrapped server read the file: {out}"
            );
        }
        if command.starts_with("toolgate broker stop") {
            let child = broker.take().expect("README starts the broker first");
            let out = common::wait_with_output(child, Duration::from_secs(30), "toolgate broker");
            assert!(out.status.success(), "the broker stopped: {out:?}");
        }
        if command.starts_with("claude mcp add linear") {
            let config: Value = serde_json::from_str(
                &std::fs::read_to_string(sandbox.home.join(".claude.json")).unwrap(),
            )
            .unwrap();
            let entry = &config["projects"][project.to_str().unwrap()]["mcpServers"]["linear"];
            assert_eq!(entry["command"], "toolgate", "{config:#}");
        }
    }
    assert!(broker.is_none(), "README stops the broker it starts");
    // Every client's server was wrapped by its `init`.
    for (file, _) in &configs {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(
            text.contains(common::toolgate_bin().to_str().unwrap()) && text.contains("wrap"),
            "{}: {text}",
            file.display()
        );
    }
    // The commands that ran here: most of them.
    assert!(ran.len() >= 30, "{ran:#?}");
}

#[test]
fn readme_commands_are_read_as_a_shell_reads_them() {
    let commands = readme_commands(
        "text\n```sh\n# a comment\ntoolgate a --x '#not' \"# not\"   # comment\ntoolgate b \\\n  --c d\n```\n```json\n{}\n```\n   ```sh\n   toolgate e\n   ```\n",
    );
    assert_eq!(
        commands,
        [
            "toolgate a --x '#not' \"# not\"",
            "toolgate b --c d",
            "toolgate e"
        ]
    );
}

/// `scripts/test` is what CI runs; the installer and `cargo install` are what CI packages.
#[test]
fn ci_runs_the_readmes_test_command_and_packages_what_it_installs() {
    let root = common::repo_root();
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(ci.contains("scripts/test"), "{ci}");
    assert!(
        ci.contains("cargo publish --workspace --dry-run"),
        "CI builds every published crate as `cargo install` would"
    );
    // The installer README downloads is the one the release configuration makes.
    let dist = std::fs::read_to_string(root.join("dist-workspace.toml")).unwrap();
    assert!(dist.contains("installers = [\"shell\"]"), "{dist}");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let repository = manifest
        .lines()
        .find_map(|l| l.strip_prefix("repository = \""))
        .and_then(|r| r.strip_suffix('"'))
        .expect("the workspace names its repository");
    assert!(
        readme.contains(&format!(
            "{repository}/releases/latest/download/toolgate-installer.sh"
        )),
        "README's installer URL is the release's"
    );
}
