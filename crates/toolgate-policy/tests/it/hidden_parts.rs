//! Paths and commands that hide what they touch (they must fail closed): `/proc` and
//! `/dev/fd` links
//! resolved for the server process, paths that cannot be canonicalised, ANSI-C quoting,
//! substitutions, `eval`, variables as the command name, case-insensitive filesystems. A part
//! that hides what it touches never takes `default: allow`, and every deny rule whose
//! resources could match treats it as matching.

use serde_json::{Value, json};
use toolgate_policy::shell::{Scan, scan};
use toolgate_policy::{Action, Decision, Effect, FsFacts, LexicalFs, MapFs, Operation};

/// The issue's policy: reads are allowed, `${home}/.ssh/**` is denied.
const SSH_POLICY: &str = "version: 1\ndefault: allow\nrules:\n  - {id: ssh, effect: deny, operations: [fs.read, fs.write, fs.delete], resources: ['${home}/.ssh/**']}\n";
/// The issue's shell policy: `default: allow` with `deny executables: [rm]`.
const RM_POLICY: &str = "version: 1\ndefault: allow\nrules:\n  - {id: no-rm, effect: deny, operations: [shell.exec], executables: [rm]}\n";
/// Nothing denied at all.
const ALLOW_ALL: &str = "version: 1\ndefault: allow\n";

const PID: u32 = 4242;

/// The server runs as pid 4242 with root `/` in `/srv/app`; toolgate's own pid and working
/// directory play no part.
fn server_fs() -> MapFs {
    MapFs::new().server(PID, "/", "/srv/app")
}

use crate::support::engine as support;

use support::engine;

fn decide(policy: &str, fs: &dyn FsFacts, tool: &str, args: &Value) -> Decision {
    // No pinning: these calls are about their arguments, not about listing.
    support::decide(
        &engine(policy),
        &mut support::session(false),
        fs,
        tool,
        args,
    )
}

fn action(fs: &dyn FsFacts, tool: &str, args: &Value) -> Action {
    support::normalized(fs, Some("srv"), tool, args)
}

fn read(path: &str) -> Value {
    json!({ "path": path })
}

fn resources(a: &Action) -> Vec<String> {
    a.parts.iter().flat_map(|p| p.resources.clone()).collect()
}

fn hidden(a: &Action) -> bool {
    a.parts.iter().any(|p| p.hidden && p.opaque)
}

#[test]
fn proc_self_root_is_the_servers_root() {
    let fs = server_fs();
    for path in [
        "/proc/self/root/home/u/.ssh/id_rsa",
        "/proc/thread-self/root/home/u/.ssh/id_rsa",
        "/proc/4242/root/home/u/.ssh/id_rsa",
        "/proc/4242/task/4243/root/home/u/.ssh/id_rsa",
        "/proc/self/root/proc/self/root/home/u/.ssh/id_rsa",
        "/proc/self/cwd/../../home/u/.ssh/id_rsa",
    ] {
        let a = action(&fs, "read_file", &read(path));
        assert!(
            resources(&a).contains(&"/home/u/.ssh/id_rsa".to_owned()),
            "{path}: {a:?}"
        );
        let d = decide(SSH_POLICY, &fs, "read_file", &read(path));
        assert_eq!(d.effect, Effect::Deny, "{path}: {}", d.reason);
    }
}

#[test]
fn proc_self_cwd_is_the_servers_working_directory() {
    let fs = server_fs();
    // The kernel: the server's cwd, then `..`, then `x`. The reference server collapses
    // `..` first and opens `/proc/self/x` (its own pid): both readings are resources.
    let a = action(&fs, "read_file", &read("/proc/self/cwd/../x"));
    let got = resources(&a);
    assert!(got.contains(&"/srv/x".to_owned()), "{got:?}");
    assert!(got.contains(&format!("/proc/{PID}/x")), "{got:?}");
    assert!(!got.iter().any(|r| r.contains("self")), "{got:?}");
    // Without `..`: the working directory itself.
    let a = action(&fs, "read_file", &read("/proc/self/cwd/notes.txt"));
    assert_eq!(resources(&a), vec!["/srv/app/notes.txt".to_owned()]);
    assert!(!hidden(&a));
    // A plain file of the server's own /proc directory.
    let a = action(&fs, "read_file", &read("/proc/self/environ"));
    assert_eq!(resources(&a), vec![format!("/proc/{PID}/environ")]);
}

#[test]
fn links_that_cannot_be_resolved_with_certainty_are_hidden() {
    let fs = server_fs();
    for path in [
        "/proc/1/root/home/u/.ssh/id_rsa",
        "/proc/1/cwd/x",
        "/proc/self/fd/3",
        "/proc/4242/fd/0",
        "/proc/self/exe",
        "/proc/self/map_files/400000-401000",
        "/dev/fd/3",
        "/dev/stdin",
        "/dev/stderr",
        "/proc/self/task/4242/fd/1",
    ] {
        let a = action(&fs, "read_file", &read(path));
        assert!(hidden(&a), "{path}: {a:?}");
        assert!(
            a.parts.iter().any(|p| p.operation == Operation::FsRead),
            "{path}: {a:?}"
        );
        // Every fs deny rule treats it as matching …
        let d = decide(SSH_POLICY, &fs, "read_file", &read(path));
        assert_eq!(d.effect, Effect::Deny, "{path}: {}", d.reason);
        // … and without one it asks, never `default: allow`.
        let d = decide(ALLOW_ALL, &fs, "read_file", &read(path));
        assert_eq!(d.effect, Effect::Ask, "{path}: {}", d.reason);
        assert!(d.reason.contains("hides what it touches"), "{}", d.reason);
        // `policy explain` says so, and the action's JSON carries it.
        let text = toolgate_policy::explain::to_text(&d);
        assert!(text.contains("hidden:     yes"), "{text}");
        let json = serde_json::to_value(&d.action).unwrap();
        assert!(
            json["parts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["hidden"] == true && p["opaque"] == true),
            "{json}"
        );
    }
    // Directories of /proc that are not links stay plain paths.
    let a = action(&fs, "list_directory", &read("/proc/self/fd"));
    assert_eq!(resources(&a), vec![format!("/proc/{PID}/fd")]);
    let a = action(&fs, "read_file", &read("/proc/1/status"));
    assert_eq!(resources(&a), vec!["/proc/1/status".to_owned()]);
    assert!(!hidden(&a));
}

#[test]
fn without_a_known_server_proc_self_is_hidden() {
    // `policy explain` and `serve` have no server process: `/proc/self` is not toolgate.
    for path in ["/proc/self/root/etc/passwd", "/proc/self/cwd/x"] {
        let a = action(&LexicalFs, "read_file", &read(path));
        assert!(hidden(&a), "{path}: {a:?}");
        let d = decide(ALLOW_ALL, &LexicalFs, "read_file", &read(path));
        assert_eq!(d.effect, Effect::Ask, "{path}");
    }
}

#[test]
fn paths_that_cannot_be_canonicalised_fail_closed() {
    let fs = server_fs();
    let long = format!("/w/{}", "a/".repeat(2100));
    let long_name = format!("/w/{}", "n".repeat(300));
    for path in ["a\u{0}b", "/home/u/.ssh/id_rsa\u{0}", &long, &long_name] {
        let a = action(&fs, "read_file", &read(path));
        assert!(hidden(&a), "{path:?}: {a:?}");
        let d = decide(ALLOW_ALL, &fs, "read_file", &read(path));
        assert_eq!(d.effect, Effect::Ask, "{path:?}: {}", d.reason);
        let d = decide(SSH_POLICY, &fs, "read_file", &read(path));
        assert_eq!(d.effect, Effect::Deny, "{path:?}: {}", d.reason);
    }
    // The same in a list of paths, in a write, and for an unmapped tool's path argument.
    let d = decide(
        ALLOW_ALL,
        &fs,
        "read_multiple_files",
        &json!({"paths": ["/w/a", "x\u{0}"]}),
    );
    assert_eq!(d.effect, Effect::Ask, "{}", d.reason);
    let d = decide(
        SSH_POLICY,
        &fs,
        "write_file",
        &json!({"path": "/dev/fd/9", "content": "x"}),
    );
    assert_eq!(d.effect, Effect::Deny, "{}", d.reason);
    let d = decide(
        ALLOW_ALL,
        &fs,
        "frobnicate",
        &json!({"file_path": "a\u{0}"}),
    );
    assert_eq!(d.effect, Effect::Ask, "{}", d.reason);
    // An unmapped tool with a plain value under a path-like name is not hidden.
    let d = decide(ALLOW_ALL, &fs, "frobnicate", &json!({"file_path": "a.txt"}));
    assert_eq!(d.effect, Effect::Allow, "{}", d.reason);
}

#[test]
fn case_insensitive_filesystem_matches_the_on_disk_spelling() {
    // A macOS-like volume: `.ssh` exists as written, and `~/.SSH` names it.
    let fs = MapFs::new().case_insensitive(&["/home/u/.ssh/id_rsa", "/w/src/main.rs"]);
    for path in [
        "~/.SSH/id_rsa",
        "/HOME/U/.Ssh/ID_RSA",
        "/home/u/.sSh/new_key",
    ] {
        let a = action(&fs, "read_file", &read(path));
        assert!(
            resources(&a).iter().all(|r| r.starts_with("/home/u/.ssh/")),
            "{path}: {a:?}"
        );
        let d = decide(SSH_POLICY, &fs, "read_file", &read(path));
        assert_eq!(d.effect, Effect::Deny, "{path}: {}", d.reason);
    }
    // A path that does not exist keeps its spelling past the existing prefix.
    let a = action(&fs, "read_file", &read("/W/SRC/New.rs"));
    assert_eq!(resources(&a), vec!["/w/src/New.rs".to_owned()]);
    // A case-sensitive filesystem (the default) keeps every spelling: `.SSH` is another
    // directory there.
    let a = action(&MapFs::new(), "read_file", &read("~/.SSH/id_rsa"));
    assert_eq!(resources(&a), vec!["/home/u/.SSH/id_rsa".to_owned()]);
}

fn shell(cmd: &str) -> Value {
    json!({ "command": cmd })
}

#[test]
fn ansi_c_quoting_is_decoded() {
    let cases: &[(&str, &[&str])] = &[
        (r"$'\x72\x6d' -rf /", &["rm", "-rf", "/"]),
        (r"$'\162\155' -rf /", &["rm", "-rf", "/"]),
        (r"$'\u0072\U0000006d' x", &["rm", "x"]),
        (r"r$'m' x", &["rm", "x"]),
        (r"echo $'a\tb\nc'", &["echo", "a\tb\nc"]),
        (
            r"echo $'\a\b\e\E\f\r\v'",
            &["echo", "\x07\x08\x1b\x1b\x0c\r\x0b"],
        ),
        (r#"echo $'\\ \' \" \?'"#, &["echo", "\\ ' \" ?"]),
        (
            r"echo $'\x4' $'\x41B' $'\1011'",
            &["echo", "\x04", "AB", "A1"],
        ),
        (r"echo $'\cA\ca\c?'", &["echo", "\x01\x01\x7f"]),
        (r"echo $'\q\x\u'", &["echo", "\\q\\x\\u"]),
        (r"echo $'it''s'", &["echo", "its"]),
        (r#"echo "$'x'""#, &["echo", "$'x'"]),
    ];
    for (cmd, want) in cases {
        let want: Vec<String> = want.iter().map(|w| (*w).to_owned()).collect();
        if cmd.contains('"') && cmd.starts_with("echo \"") {
            // Inside double quotes `$'` is not special; the `$` makes it inexact.
            assert!(matches!(scan(cmd), Scan::Compound { .. }), "{cmd}");
            continue;
        }
        assert_eq!(scan(cmd), Scan::Simple(want), "{cmd}");
    }
    // The issue's example: an exact `rm`, denied.
    let d = decide(
        RM_POLICY,
        &LexicalFs,
        "run_command",
        &shell(r"$'\x72\x6d' -rf /"),
    );
    assert_eq!(d.effect, Effect::Deny, "{}", d.reason);
    assert_eq!(d.rule.as_deref(), Some("no-rm"));
    // Unterminated: invalid.
    assert_eq!(scan(r"echo $'abc"), Scan::Invalid);
    assert_eq!(scan(r"echo $'abc\'"), Scan::Invalid);
}

#[test]
fn undecodable_quoting_is_hidden() {
    // A byte that is not UTF-8, a NUL (bash cuts the word), a character whose encoding
    // depends on the locale, `$"…"`.
    for cmd in [
        r"$'\xff' x",
        r"$'\377' x",
        r"echo $'a\x00b'",
        r"echo $'\c@'",
        r"echo $'\u00e9'",
        r#"$"rm" x"#,
    ] {
        let a = action(&LexicalFs, "run_command", &shell(cmd));
        assert!(hidden(&a), "{cmd}: {a:?}");
        assert!(!matches!(scan(cmd), Scan::Simple(_)), "{cmd}");
        // Asks (or denies, where a deny rule sees what is visible: `$"rm"` reads as `rm`).
        let d = decide(RM_POLICY, &LexicalFs, "run_command", &shell(cmd));
        assert_ne!(d.effect, Effect::Allow, "{cmd}: {}", d.reason);
        let d = decide(ALLOW_ALL, &LexicalFs, "run_command", &shell(cmd));
        assert_eq!(d.effect, Effect::Ask, "{cmd}: {}", d.reason);
    }
}

#[test]
fn substitutions_eval_and_variable_commands_ask() {
    for cmd in [
        r#"bash -c "$(echo cm0gLXJmIC8= | base64 -d)""#,
        "bash -c \"`echo cm0gLXJmIC8= | base64 -d`\"",
        "ls $(cat list)",
        "echo \"$(id)\"",
        "cat <(ls)",
        "diff >(ls) x",
        "eval ls",
        "eval \"$X\"",
        "$CMD -rf /",
        "${CMD} x",
        "A=1 $CMD x",
        "sudo $CMD x",
        "sh -c '$CMD x'",
        "env X=1 sh -c '$(id)'",
        "if $CMD; then ls; fi",
    ] {
        let a = action(&LexicalFs, "run_command", &shell(cmd));
        assert!(hidden(&a), "{cmd}: {a:?}");
        let d = decide(RM_POLICY, &LexicalFs, "run_command", &shell(cmd));
        assert_eq!(d.effect, Effect::Ask, "{cmd}: {}", d.reason);
    }
    // A deny rule that sees a visible executable still denies.
    let d = decide(
        RM_POLICY,
        &LexicalFs,
        "run_command",
        &shell("rm -rf $(cat list)"),
    );
    assert_eq!(d.effect, Effect::Deny, "{}", d.reason);
    let d = decide(
        RM_POLICY,
        &LexicalFs,
        "run_command",
        &shell(r#"bash -c "$(echo x | base64 -d)"; rm y"#),
    );
    assert_eq!(d.effect, Effect::Deny, "{}", d.reason);
    // Opaque but not hiding: a variable as an argument, a glob. These keep
    // `default: allow` (allow rules still never match them).
    for cmd in ["echo $HOME", "ls *.rs", "A=$X ls"] {
        let a = action(&LexicalFs, "run_command", &shell(cmd));
        assert!(!hidden(&a), "{cmd}: {a:?}");
        assert!(a.parts.iter().all(|p| p.opaque), "{cmd}");
        let d = decide(RM_POLICY, &LexicalFs, "run_command", &shell(cmd));
        assert_eq!(d.effect, Effect::Allow, "{cmd}: {}", d.reason);
    }
    // An exact compound (`|`, `;` between exact commands) is exact, segment by segment.
    for cmd in ["ls | wc -l", "ls; pwd"] {
        let a = action(&LexicalFs, "run_command", &shell(cmd));
        assert!(!hidden(&a), "{cmd}: {a:?}");
        assert!(a.parts.iter().all(|p| !p.opaque), "{cmd}: {a:?}");
        let d = decide(RM_POLICY, &LexicalFs, "run_command", &shell(cmd));
        assert_eq!(d.effect, Effect::Allow, "{cmd}: {}", d.reason);
    }
}

#[test]
fn hidden_parts_under_default_deny_and_ask_keep_the_default() {
    let fs = server_fs();
    let deny = "version: 1\ndefault: deny\n";
    let d = decide(deny, &fs, "read_file", &read("/dev/fd/3"));
    assert_eq!(d.effect, Effect::Deny);
    let d = decide(deny, &fs, "run_command", &shell("eval ls"));
    assert_eq!(d.effect, Effect::Deny);
    // An allow rule never matches a hidden part, even one naming the tool exactly.
    let exact = "version: 1\ndefault: deny\nrules:\n  - {id: t, effect: allow, operations: [unknown], tools: [frobnicate]}\n";
    let d = decide(exact, &fs, "frobnicate", &json!({"path": "/proc/1/root/x"}));
    assert_eq!(d.effect, Effect::Deny, "{}", d.reason);
    let d = decide(exact, &fs, "frobnicate", &json!({"path": "/w/x"}));
    assert_eq!(d.effect, Effect::Allow, "{}", d.reason);
}
