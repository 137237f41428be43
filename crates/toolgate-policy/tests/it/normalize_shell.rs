//! Shell adapter: simple commands are exact; everything else is opaque, with the executable of
//! every segment visible to deny rules (wrappers, env prefixes and inner shells looked through).

use serde_json::{Value, json};
use toolgate_policy::shell::{Scan, look_through, scan};
use toolgate_policy::{
    Action, MapFs, NormalizeContext, Operation, ToolCall, ToolMapping, normalize,
};

fn run_with(tool: &str, args: Value, mapping: Option<ToolMapping>) -> Action {
    let fs = MapFs::new().symlink("/w/link", "/home/u/.ssh");
    let ctx = NormalizeContext {
        workspace: "/w",
        home: "/home/u",
        fs: &fs,
    };
    let call = ToolCall {
        server: None,
        tool,
        arguments: &args,
        definition: None,
    };
    normalize(&call, mapping.as_ref(), &ctx)
}

fn run(command: &str) -> Action {
    run_with("execute_command", json!({ "command": command }), None)
}

/// The executables of the command parts (a file part carries its command's executable too).
fn exes(a: &Action) -> Vec<String> {
    a.parts
        .iter()
        .filter(|p| p.operation == Operation::ShellExec)
        .filter_map(|p| p.executable.clone())
        .collect()
}

fn words(ws: &[&str]) -> Vec<String> {
    ws.iter().map(|w| (*w).to_owned()).collect()
}

#[test]
fn simple_commands_are_exact() {
    let cases: &[(&str, &[&str], &str)] = &[
        ("ls -la", &["ls", "-la"], "ls"),
        ("/bin/ls -la", &["/bin/ls", "-la"], "ls"),
        (
            "grep -r 'a b' \"c d\" e\\ f",
            &["grep", "-r", "a b", "c d", "e f"],
            "grep",
        ),
        (
            "echo 'semi;colon' \"pipe|d\" 'dollar$x'",
            &["echo", "semi;colon", "pipe|d", "dollar$x"],
            "echo",
        ),
        (
            "cargo test -p toolgate-policy",
            &["cargo", "test", "-p", "toolgate-policy"],
            "cargo",
        ),
        ("  npm   install  ", &["npm", "install"], "npm"),
        // Quoting tricks still name `rm` (`\rm` skips aliases, not the executable).
        ("\\rm -rf /", &["rm", "-rf", "/"], "rm"),
        ("'r'm x", &["rm", "x"], "rm"),
        ("\"/bin/rm\" x", &["/bin/rm", "x"], "rm"),
    ];
    for (cmd, argv, exe) in cases {
        let a = run(cmd);
        // The command, then the files it touches (`ls` lists `/w`, `rm` deletes `/`).
        assert!(
            a.parts[1..].iter().all(|p| p.operation.is_fs()),
            "{cmd}: {a:?}"
        );
        let p = &a.parts[0];
        assert_eq!(p.operation, Operation::ShellExec, "{cmd}");
        assert!(!p.opaque, "{cmd}");
        assert_eq!(p.argv.as_deref(), Some(&words(argv)[..]), "{cmd}");
        assert_eq!(p.executable.as_deref(), Some(*exe), "{cmd}");
    }
    // A command of the table run from elsewhere than `/bin` or `/usr/bin` may be any
    // program: deny rules see its name, allow rules do not vouch for it.
    for (cmd, argv) in [
        ("./rm x", &["./rm", "x"][..]),
        ("../../bin/rm x", &["../../bin/rm", "x"]),
        ("/tmp/x/ls", &["/tmp/x/ls"]),
        ("/bin/../tmp/ls", &["/bin/../tmp/ls"]),
    ] {
        let a = run(cmd);
        let p = &a.parts[0];
        assert!(p.opaque, "{cmd}");
        assert_eq!(p.argv.as_deref(), Some(&words(argv)[..]), "{cmd}");
    }
}

/// Every bypass from the pitfalls list and the issue: the deny rule for `rm` must still see `rm`,
/// and the call is never exact.
#[test]
fn deny_rules_see_through_wrappers_and_compounds() {
    let cases = [
        "ls; rm -rf /",
        "ls && rm -rf /",
        "ls || rm -rf /",
        "ls | xargs rm",
        "ls & rm -rf /",
        "ls\nrm -rf /",
        "sudo rm -rf /",
        "sudo -u root -- rm -rf /",
        "doas rm -rf /",
        "env FOO=1 /bin/rm -rf /",
        "env -i PATH=/bin rm -rf /",
        "env -S 'rm -rf /'",
        "FOO=1 rm -rf /",
        "A=1 B=2 /usr/bin/rm x",
        "sh -c 'rm -rf /'",
        "bash -c \"rm -rf /\"",
        "bash -lc 'ls; rm -rf /'",
        "/bin/zsh -c 'rm x'",
        "sh -c 'sudo sh -c \"rm -rf /\"'",
        "xargs rm",
        "xargs -0 -n 1 rm",
        "find . -name x -exec rm {} \\;",
        "find . -delete -execdir /bin/rm {} +",
        "nice -n 5 rm x",
        "nice rm x",
        "time rm x",
        "nohup rm x",
        "command rm x",
        "exec rm x",
        "busybox rm x",
        "timeout 10 rm x",
        "timeout -s KILL 10 rm x",
        "stdbuf -oL rm x",
        "ionice -c 3 rm x",
        "setsid rm x",
        "eval 'rm -rf /'",
        "echo $(rm -rf /)",
        "echo `rm -rf /`",
        "echo \"$(rm -rf /)\"",
        "cat <(rm -rf /)",
        "(rm -rf /)",
        "{ rm -rf /; }",
        "if true; then rm -rf /; fi",
        "for f in a; do rm $f; done",
        "ls # ; rm -rf /",
        "rm -rf / 'unterminated",
        "rm -rf / \\",
        "watch -n 1 rm x",
        "su -c 'rm -rf /'",
        "flock /tmp/l rm x",
        "chroot /mnt rm x",
        "taskset -c 0 rm x",
        "fd -x rm",
        "cmd /c rm x",
        "pwsh -Command 'rm x'",
        "busybox sh -c 'rm x'",
        "command -p rm x",
        "exec -a foo rm x",
    ];
    // Exact compounds: every command in them is exact, and each is judged on its own.
    let exact_compounds = [
        "ls; rm -rf /",
        "ls && rm -rf /",
        "ls || rm -rf /",
        "ls\nrm -rf /",
    ];
    for cmd in cases {
        let a = run(cmd);
        assert!(exes(&a).iter().any(|e| e == "rm"), "{cmd}: {a:#?}");
        let rm: Vec<_> = a
            .parts
            .iter()
            .filter(|p| p.executable.as_deref() == Some("rm"))
            .collect();
        if exact_compounds.contains(&cmd) {
            assert!(a.parts.iter().all(|p| !p.opaque), "{cmd}: {a:#?}");
        } else if cmd.starts_with("ls | ") {
            // `ls` is exact; what `xargs` runs is not.
            assert!(rm.iter().all(|p| p.opaque), "{cmd}: {a:#?}");
        } else {
            assert!(
                a.parts.iter().all(|p| p.opaque),
                "{cmd} must not be exact: {a:#?}"
            );
        }
    }
}

#[test]
fn run_time_expansions_are_not_exact() {
    for cmd in [
        "cat ~/.ssh/id_rsa",
        "cat *.pem",
        "cat ?d_rsa",
        "cat [a]",
        "echo $HOME",
        "echo ${HOME}",
        "cat \"$HOME/.ssh/id_rsa\"",
        "echo {a,b}",
        "PATH=~/bin ls",
        "ls > $OUT",
        "! ls",
    ] {
        let a = run(cmd);
        assert!(a.parts.iter().all(|p| p.opaque), "{cmd}: {a:#?}");
        assert!(!matches!(scan(cmd), Scan::Simple(_)), "{cmd}");
    }
    // File redirections of exact commands are exact: the target is a file part.
    for (cmd, write) in [
        ("ls > out.txt", Some("/w/out.txt")),
        ("ls 2>&1", None),
        ("ls 2>/dev/null", None),
    ] {
        let a = run(cmd);
        assert!(!matches!(scan(cmd), Scan::Simple(_)), "{cmd}");
        assert!(a.parts.iter().all(|p| !p.opaque), "{cmd}: {a:#?}");
        let written: Vec<&str> = a
            .parts
            .iter()
            .filter(|p| p.operation == Operation::FsWrite)
            .flat_map(|p| p.resources.iter().map(String::as_str))
            .collect();
        assert_eq!(written, write.into_iter().collect::<Vec<_>>(), "{cmd}");
    }
    // A `~` that is not at a word start and the literal `{}` are not expansions.
    assert!(matches!(scan("git show HEAD~1:src/a~b"), Scan::Simple(_)));
    assert!(matches!(scan("echo {}"), Scan::Simple(_)));
}

#[test]
fn look_through_returns_the_real_command() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["sudo", "env", "A=1", "nice", "-n", "5", "rm", "-rf", "/"],
            &["rm", "-rf", "/"],
        ),
        (&["sh", "-c", "rm -rf /"], &["rm", "-rf", "/"]),
        (&["xargs", "-n1", "rm"], &["rm"]),
        (&["ls", "-la"], &["ls", "-la"]),
        (&["FOO=1"], &[]),
    ];
    for (argv, want) in cases {
        assert_eq!(look_through(&words(argv)), words(want), "{argv:?}");
    }
}

#[test]
fn argument_forms() {
    // Array (exec) form.
    let a = run_with("run_command", json!({"command": ["ls", "-la"]}), None);
    assert_eq!(a.parts.len(), 2);
    assert!(a.parts.iter().all(|p| !p.opaque));
    assert_eq!(a.parts[1].resources, ["/w"]);
    assert_eq!(a.parts[0].argv.as_deref(), Some(&words(&["ls", "-la"])[..]));

    // Array whose elements a joining server would read as operators.
    let a = run_with(
        "run_command",
        json!({"command": ["ls", "; rm -rf /"]}),
        None,
    );
    assert!(a.parts.iter().all(|p| p.opaque), "{a:#?}");
    assert!(exes(&a).contains(&"rm".to_owned()));

    // Separate args.
    let a = run_with(
        "shell",
        json!({"command": "ls", "args": ["-la", "src"]}),
        None,
    );
    assert_eq!(a.parts.len(), 2);
    assert_eq!(a.parts[1].resources, ["/w/src"]);
    assert!(!a.parts[0].opaque);
    assert_eq!(
        a.parts[0].argv.as_deref(),
        Some(&words(&["ls", "-la", "src"])[..])
    );
    let a = run_with(
        "shell",
        json!({"command": "ls", "args": ["$(rm -rf /)"]}),
        None,
    );
    assert!(a.parts.iter().all(|p| p.opaque));
    assert!(exes(&a).contains(&"rm".to_owned()));
    let a = run_with("shell", json!({"command": "ls", "args": [1, 2]}), None);
    assert!(a.parts.iter().all(|p| p.opaque));

    // Alternate names and declared names.
    let a = run_with("bash", json!({"cmd": "rm x"}), None);
    assert_eq!(exes(&a), ["rm"]);
    let m = ToolMapping {
        operation: Some(Operation::ShellExec),
        command_param: Some("line".to_owned()),
        ..ToolMapping::default()
    };
    let a = run_with(
        "my_tool",
        json!({"line": "sudo rm x", "command": "ls"}),
        Some(m),
    );
    assert_eq!(exes(&a), ["sudo", "rm"]);

    // Nothing usable: opaque shell.exec with no executable.
    for args in [
        json!({"command": 42}),
        json!({}),
        json!({"command": ""}),
        json!("ls"),
    ] {
        let a = run_with("execute_command", args.clone(), None);
        assert!(!a.parts.is_empty());
        assert!(a.parts.iter().all(|p| p.opaque), "{args}: {a:#?}");
    }

    // Working directory: canonical, symlinks resolved.
    let a = run_with(
        "execute_command",
        json!({"command": "ls", "cwd": "link"}),
        None,
    );
    assert_eq!(a.parts[0].resources, ["/home/u/.ssh"]);
    assert!(!a.parts[0].opaque);
    // A working directory whose lexical and kernel readings differ is not exact.
    let a = run_with(
        "execute_command",
        json!({"command": "ls", "cwd": "link/.."}),
        None,
    );
    assert!(a.parts.iter().all(|p| p.opaque));
    let a = run_with(
        "execute_command",
        json!({"command": "ls", "cwd": "a\u{0}b"}),
        None,
    );
    assert!(a.parts.iter().all(|p| p.opaque));
}

#[test]
fn shell_tool_names_are_word_based() {
    for tool in [
        "execute_command",
        "run_command",
        "shell",
        "bash",
        "exec",
        "terminal",
        "run",
        "run_shell_command",
        "execute",
        "command",
        "runTerminalCommand",
    ] {
        let a = run_with(tool, json!({"command": "ls"}), None);
        assert_eq!(a.parts[0].operation, Operation::ShellExec, "{tool}");
    }
    for tool in [
        "confirm_order",
        "rmdir_report",
        "get_runbook",
        "list_commands_doc",
    ] {
        let a = run_with(tool, json!({"command": "rm -rf /"}), None);
        assert_eq!(a.parts[0].operation, Operation::Unknown, "{tool}");
    }
}
