//! `--help` for toolgate and every command and subcommand: exits 0, has an `Examples:`
//! section of 2–4 invocations of that very command; the top-level help lists every command;
//! `--version` prints the crate version.

use std::time::Duration;

use assert_cmd::Command;

/// Every command, with its subcommands (empty when it has none).
const COMMANDS: &[(&str, &[&str])] = &[
    ("approvals", &[]),
    ("audit", &["verify", "summary", "tail"]),
    ("auth", &["login", "status", "logout"]),
    ("broker", &["stop"]),
    ("completions", &[]),
    ("demo", &[]),
    ("doctor", &[]),
    ("gateway", &["check", "hash-token", "schema"]),
    ("hook", &[]),
    ("init", &[]),
    ("pins", &["list", "forget"]),
    (
        "policy",
        &["init", "check", "explain", "test", "trust", "schema"],
    ),
    ("report", &[]),
    ("serve", &[]),
    ("status", &[]),
    ("unwrap", &[]),
    ("wrap", &[]),
];

/// Every command path: `[]` (toolgate itself), `["audit"]`, `["audit", "verify"]`, …
fn paths() -> Vec<Vec<&'static str>> {
    let mut out = vec![vec![]];
    for (command, subs) in COMMANDS {
        out.push(vec![*command]);
        for sub in *subs {
            out.push(vec![*command, *sub]);
        }
    }
    out
}

/// Runs toolgate with `args` and returns (success, stdout, stderr).
fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::cargo_bin("toolgate")
        .unwrap()
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// `path` followed by `--help`: must exit 0; returns stdout.
fn help(path: &[&str], flag: &str) -> String {
    let mut args = path.to_vec();
    args.push(flag);
    let (ok, stdout, stderr) = run(&args);
    assert!(ok, "`toolgate {}` failed: {stderr}", args.join(" "));
    assert!(
        stdout.starts_with(|c: char| c.is_alphabetic()),
        "`toolgate {}` does not start with an about line:\n{stdout}",
        args.join(" ")
    );
    stdout
}

/// The names listed under `Commands:` (without clap's own `help`).
fn listed_commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// The example invocations: the lines after `Examples:` up to the first blank line,
/// continuation lines (indented further, after a trailing `\`) joined to their first line.
fn examples(help: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut continued = false;
    for line in help
        .lines()
        .skip_while(|l| *l != "Examples:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
    {
        let text = line.trim().trim_end_matches('\\').trim_end();
        if continued {
            let last = out.last_mut().unwrap();
            last.push(' ');
            last.push_str(text);
        } else {
            assert!(
                line.starts_with("  ") && !line.starts_with("   "),
                "an example line is not indented by two spaces: {line:?}"
            );
            out.push(text.to_owned());
        }
        continued = line.trim_end().ends_with('\\');
    }
    out
}

/// Asserts the help of `path` has 2–4 examples, each an invocation of `toolgate PATH`.
fn assert_examples(path: &[&str], help: &str) {
    let shown = format!("toolgate {}", path.join(" "));
    assert!(
        help.lines().any(|l| l == "Examples:"),
        "`{shown} --help` has no `Examples:` section:\n{help}"
    );
    let examples = examples(help);
    assert!(
        (2..=4).contains(&examples.len()),
        "`{shown} --help` has {} examples, expected 2 to 4:\n{help}",
        examples.len()
    );
    let invocation = shown.trim_end().to_owned() + " ";
    for example in &examples {
        assert!(
            format!("{example} ").contains(&invocation),
            "`{shown} --help`: the example `{example}` does not run `{invocation}`"
        );
    }
}

#[test]
fn top_level_help_lists_every_command() {
    let help = help(&[], "--help");
    let listed = listed_commands(&help);
    let expected: Vec<String> = COMMANDS.iter().map(|(c, _)| (*c).to_owned()).collect();
    assert_eq!(
        listed, expected,
        "the commands in `toolgate --help` differ from this test's list:\n{help}"
    );
}

#[test]
fn command_groups_list_every_subcommand() {
    for (command, subs) in COMMANDS {
        let help = help(&[command], "--help");
        let listed = listed_commands(&help);
        let expected: Vec<String> = subs.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(
            listed, expected,
            "the subcommands in `toolgate {command} --help` differ from this test's list"
        );
    }
}

#[test]
fn every_help_exits_zero_and_has_examples() {
    for path in paths() {
        let long = help(&path, "--help");
        let short = help(&path, "-h");
        assert_examples(&path, &long);
        assert_examples(&path, &short);
    }
}

/// One flag grammar: an option that names a file takes `<PATH>`, a directory `<DIR>`, a
/// server or tool `<NAME>`, a time `<DURATION>` (parsed the same way everywhere), and a
/// default is written `[default: …]`, in every subcommand's help.
#[test]
fn every_help_writes_options_one_way() {
    let placeholder = |option: &str| -> Option<&str> {
        match option {
            "policy" | "audit" | "config" | "cases" | "tools" | "html" | "outbox" => Some("PATH"),
            "workspace" | "home" | "broker-dir" => Some("DIR"),
            "server" | "tool" => Some("NAME"),
            o if o.ends_with("-timeout") || o == "idle-exit" => Some("DURATION"),
            _ => None,
        }
    };
    let mut wrong = Vec::new();
    for path in paths() {
        let text = help(&path, "--help");
        let shown = format!("toolgate {} --help", path.join(" "));
        for line in text.lines() {
            let Some(at) = line.find("--") else { continue };
            let mut words = line[at + 2..].split_whitespace();
            let (Some(option), Some(value)) = (words.next(), words.next()) else {
                continue;
            };
            let Some(value) = value
                .strip_prefix('<')
                .map(|v| v.trim_end_matches("...").trim_end_matches('>'))
            else {
                continue;
            };
            if let Some(want) = placeholder(option)
                && value != want
            {
                wrong.push(format!("`{shown}`: `--{option} <{value}>`, not `<{want}>`"));
            }
        }
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for other in ["; default:", "(default:", ", default:"] {
            if flat.contains(other) {
                wrong.push(format!(
                    "`{shown}` writes a default as `{other} …`, not `[default: …]`"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn help_subcommand_shows_the_same_examples() {
    for path in paths().into_iter().filter(|p| !p.is_empty()) {
        let mut args = vec!["help"];
        args.extend(&path);
        let (ok, stdout, stderr) = run(&args);
        assert!(ok, "`toolgate {}` failed: {stderr}", args.join(" "));
        assert_eq!(
            examples(&stdout),
            examples(&help(&path, "--help")),
            "`toolgate {}` shows other examples than --help",
            args.join(" ")
        );
    }
}

#[test]
fn version_prints_the_crate_version() {
    let version = env!("CARGO_PKG_VERSION");
    for args in [&["--version"][..], &["-V"]] {
        let (ok, stdout, stderr) = run(args);
        assert!(ok, "`toolgate {}` failed: {stderr}", args.join(" "));
        assert_eq!(stdout, format!("toolgate {version}\n"));
    }
    // Subcommands know it too (`propagate_version`).
    let (ok, stdout, stderr) = run(&["wrap", "--version"]);
    assert!(ok, "`toolgate wrap --version` failed: {stderr}");
    assert!(
        stdout.ends_with(&format!(" {version}\n")),
        "`toolgate wrap --version` printed {stdout:?}"
    );
}
