//! Git adapter: by subcommand and flags, through the shell adapter and for mcp-server-git tools.

use serde_json::{Value, json};
use toolgate_policy::{
    Action, MapFs, NormalizeContext, Operation, ToolCall, ToolMapping, builtin_mapping, normalize,
};

fn run(tool: &str, args: Value) -> Action {
    let fs = MapFs::new().symlink("/w/link", "/home/u/.ssh");
    let ctx = NormalizeContext {
        workspace: "/w",
        home: "/home/u",
        fs: &fs,
    };
    let call = ToolCall {
        server: Some("git"),
        tool,
        arguments: &args,
        definition: None,
    };
    normalize(&call, None, &ctx)
}

fn sh(command: &str) -> Action {
    run("execute_command", json!({ "command": command }))
}

#[test]
fn shell_git_commands() {
    use Operation::*;
    // (command, operation of the git part, exact?)
    let cases: &[(&str, Operation, bool)] = &[
        ("git status", GitRead, true),
        ("git diff HEAD~1 -- src", GitRead, true),
        ("git log --oneline -n 5", GitRead, true),
        ("git show HEAD:Cargo.toml", GitRead, true),
        ("git branch", GitRead, true),
        ("git branch -a", GitRead, true),
        ("git rev-parse HEAD", GitRead, true),
        ("git ls-files", GitRead, true),
        ("git blame src/lib.rs", GitRead, true),
        ("git grep -n foo", GitRead, true),
        ("git -C . status", GitRead, true),
        ("git --no-pager log", GitRead, true),
        ("git commit -m 'x y'", GitWrite, true),
        ("git add .", GitWrite, true),
        ("git reset --hard", GitWrite, true),
        ("git checkout main", GitWrite, true),
        ("git switch -c b", GitWrite, true),
        ("git merge b", GitWrite, true),
        ("git rebase main", GitWrite, true),
        ("git tag v1", GitWrite, true),
        ("git stash", GitWrite, true),
        ("git branch -d old", GitWrite, true),
        ("git branch new", GitWrite, true),
        ("git push origin main", GitRemote, true),
        ("git fetch", GitRemote, true),
        ("git pull", GitRemote, true),
        ("git clone https://example.com/r.git", GitRemote, true),
        ("git remote -v", GitRead, true),
        ("git remote show origin", GitRemote, true),
        ("git ls-remote origin", GitRemote, true),
        ("git submodule update", GitRemote, true),
        // Read subcommands with flags that write or execute.
        ("git diff --output=/tmp/x", ShellExec, false),
        ("git diff --output /tmp/x", ShellExec, false),
        ("git diff --outp=/tmp/x", ShellExec, false),
        ("git log -p --ext-diff", ShellExec, false),
        ("git show --textconv HEAD", ShellExec, false),
        ("git -c core.pager=sh log", ShellExec, false),
        ("git -c alias.x=!sh x", ShellExec, false),
        ("git --config-env=core.pager=EVIL log", ShellExec, false),
        ("git --exec-path=/tmp/evil status", ShellExec, false),
        ("git --git-dir=/elsewhere/.git log", ShellExec, false),
        ("git --work-tree=/ status", ShellExec, false),
        ("git -C /etc status", ShellExec, false),
        ("git -C link log", ShellExec, false),
        ("git grep -O foo", ShellExec, false),
        ("git grep --open-files-in-pager foo", ShellExec, false),
        (
            "git diff --no-index /etc/passwd /dev/null",
            ShellExec,
            false,
        ),
        (
            "git fetch --upload-pack='sh -c evil' origin",
            ShellExec,
            false,
        ),
        (
            "git clone -u evil https://example.com/r.git",
            ShellExec,
            false,
        ),
        ("git clone ext::sh", ShellExec, false),
        ("git rebase --exec 'make' main", ShellExec, false),
        ("git rebase -x make main", ShellExec, false),
        ("git bisect run make", ShellExec, false),
        ("git config core.fsmonitor evil", ShellExec, false),
        ("git frobnicate", ShellExec, false),
    ];
    for (cmd, op, exact) in cases {
        let a = sh(cmd);
        let git = a
            .parts
            .iter()
            .find(|p| p.executable.as_deref() == Some("git"))
            .unwrap_or_else(|| panic!("{cmd}: {a:#?}"));
        assert_eq!(git.operation, *op, "{cmd}");
        assert_eq!(!git.opaque, *exact, "{cmd}: {git:?}");
        if *exact {
            assert_eq!(git.resources, ["/w"], "{cmd}");
        }
    }
    // `git -C link` resolves to the symlink target.
    let a = sh("git -C link log");
    assert_eq!(a.parts[0].resources, ["/home/u/.ssh"]);
    // Through wrappers or compounds: still classified, never exact.
    // `sudo` is a part of its own (deny rules on `sudo` see it); the git part is still there.
    let a = sh("sudo git push");
    assert_eq!(a.parts[0].executable.as_deref(), Some("sudo"));
    let git = a
        .parts
        .iter()
        .find(|p| p.executable.as_deref() == Some("git"))
        .unwrap();
    assert_eq!(git.operation, Operation::GitRemote);
    assert!(git.opaque);
    let a = sh("git status & git push");
    let ops: Vec<Operation> = a.parts.iter().map(|p| p.operation).collect();
    assert_eq!(ops, [Operation::GitRead, Operation::GitRemote]);
    assert!(a.parts.iter().all(|p| p.opaque));
    // An exact compound: each command is exact, and each is judged.
    let a = sh("git status; git push");
    let ops: Vec<Operation> = a.parts.iter().map(|p| p.operation).collect();
    assert_eq!(ops, [Operation::GitRead, Operation::GitRemote]);
    assert!(a.parts.iter().all(|p| !p.opaque));
    // Separate args form.
    let a = run(
        "run_command",
        json!({"command": "git", "args": ["status"], "cwd": "sub"}),
    );
    assert_eq!(a.parts[0].operation, Operation::GitRead);
    assert!(!a.parts[0].opaque);
    assert_eq!(a.parts[0].resources, ["/w/sub"]);
}

#[test]
fn mcp_server_git_tools() {
    use Operation::*;
    let cases: Vec<(&str, Value, Operation, bool, Vec<&str>)> = vec![
        (
            "git_status",
            json!({"repo_path": "/w"}),
            GitRead,
            true,
            vec!["/w"],
        ),
        (
            "git_diff_unstaged",
            json!({"repo_path": "/w", "context_lines": 3}),
            GitRead,
            true,
            vec!["/w"],
        ),
        (
            "git_diff_staged",
            json!({"repo_path": "/w"}),
            GitRead,
            true,
            vec!["/w"],
        ),
        (
            "git_diff",
            json!({"repo_path": "/w", "target": "main"}),
            GitRead,
            true,
            vec!["/w"],
        ),
        (
            "git_log",
            json!({"repo_path": "link", "max_count": 5}),
            GitRead,
            true,
            vec!["/home/u/.ssh"],
        ),
        (
            "git_show",
            json!({"repo_path": "/w", "revision": "HEAD~1"}),
            GitRead,
            true,
            vec!["/w"],
        ),
        (
            "git_branch",
            json!({"repo_path": "/w", "branch_type": "local"}),
            GitRead,
            true,
            vec!["/w"],
        ),
        (
            "git_commit",
            json!({"repo_path": "/w", "message": "--amend is just text here"}),
            GitWrite,
            true,
            vec!["/w"],
        ),
        (
            "git_add",
            json!({"repo_path": "/w", "files": ["a.txt", "../x"]}),
            GitWrite,
            true,
            vec!["/w", "/w/a.txt", "/x"],
        ),
        (
            "git_reset",
            json!({"repo_path": "/w"}),
            GitWrite,
            true,
            vec!["/w"],
        ),
        (
            "git_checkout",
            json!({"repo_path": "/w", "branch_name": "main"}),
            GitWrite,
            true,
            vec!["/w"],
        ),
        (
            "git_create_branch",
            json!({"repo_path": "/w", "branch_name": "b", "base_branch": "main"}),
            GitWrite,
            true,
            vec!["/w"],
        ),
        (
            "git_init",
            json!({"repo_path": "/tmp/new"}),
            GitWrite,
            true,
            vec!["/tmp/new"],
        ),
        // Flag injection where a ref or path is expected: fail closed.
        (
            "git_diff",
            json!({"repo_path": "/w", "target": "--output=/home/u/.bashrc"}),
            Unknown,
            false,
            vec!["/w"],
        ),
        (
            "git_show",
            json!({"repo_path": "/w", "revision": "-p"}),
            Unknown,
            false,
            vec!["/w"],
        ),
        (
            "git_checkout",
            json!({"repo_path": "/w", "branch_name": "--orphan=x"}),
            Unknown,
            false,
            vec!["/w"],
        ),
        (
            "git_add",
            json!({"repo_path": "/w", "files": ["--chmod=+x", "a"]}),
            Unknown,
            false,
            vec!["/w", "/w/--chmod=+x", "/w/a"],
        ),
        (
            "git_branch",
            json!({"repo_path": "/w", "contains": "  --exec=x"}),
            Unknown,
            false,
            vec!["/w"],
        ),
        (
            "git_status",
            json!({"repo_path": "a\u{0}"}),
            Unknown,
            false,
            vec![],
        ),
    ];
    for (tool, args, op, exact, res) in cases {
        let a = run(tool, args.clone());
        assert_eq!(a.parts.len(), 1, "{tool} {args}");
        let p = &a.parts[0];
        assert_eq!(p.operation, op, "{tool} {args}");
        assert_eq!(!p.opaque, exact, "{tool} {args}");
        assert_eq!(p.resources, res, "{tool} {args}");
    }
    // A git tool nobody knows is not guessed.
    assert_eq!(builtin_mapping("git_frobnicate", None), None);
    assert_eq!(
        run("git_frobnicate", json!({"repo_path": "/w"})).parts[0].operation,
        Operation::Unknown
    );
}

#[test]
fn git_mapping_from_a_contract() {
    let fs = MapFs::new();
    let ctx = NormalizeContext {
        workspace: "/w",
        home: "/home/u",
        fs: &fs,
    };
    let args = json!({"repo": "/w/r", "ref": "main"});
    let call = ToolCall {
        server: None,
        tool: "gitlog",
        arguments: &args,
        definition: None,
    };
    let m = ToolMapping {
        git_subcommand: Some("log".to_owned()),
        path_params: vec!["repo".to_owned()],
        ..ToolMapping::default()
    };
    let a = normalize(&call, Some(&m), &ctx);
    assert_eq!(a.parts[0].operation, Operation::GitRead);
    assert_eq!(a.parts[0].resources, ["/w/r"]);
}
