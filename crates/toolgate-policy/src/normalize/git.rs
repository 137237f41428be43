//! Git adapter: git.read / git.write / git.remote by subcommand **and** flags.
//!
//! Fail closed: a read subcommand with a flag that writes a file or executes a program is not
//! `git.read`; configuration that can run programs (`-c`, `--config-env`, `--exec-path`,
//! `--git-dir`, `--work-tree`) and unknown subcommands (aliases can run `!cmd`) are an opaque
//! `shell.exec`.

use crate::action::Operation;

/// The verdict for one git invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GitClass {
    pub operation: Operation,
    /// True when the classification is not exact (allow rules must not match).
    pub opaque: bool,
    /// `-C <dir>` arguments, in order (relative to the previous directory).
    pub chdirs: Vec<String>,
}

impl GitClass {
    fn new(operation: Operation, opaque: bool, chdirs: Vec<String>) -> Self {
        GitClass {
            operation,
            opaque,
            chdirs,
        }
    }
}

/// Read subcommands (with no dangerous flag).
const READ: &[&str] = &[
    "status",
    "diff",
    "log",
    "show",
    "rev-parse",
    "ls-files",
    "ls-tree",
    "blame",
    "annotate",
    "grep",
    "cat-file",
    "describe",
    "shortlog",
    "whatchanged",
    "show-ref",
    "for-each-ref",
    "rev-list",
    "name-rev",
    "merge-base",
    "count-objects",
    "version",
    "help",
    "var",
    "check-ignore",
    "check-attr",
    "diff-tree",
    "diff-files",
    "diff-index",
    "verify-commit",
    "verify-tag",
    "range-diff",
    "cherry",
    "show-branch",
    "check-ref-format",
    "fsck",
];
/// Subcommands that change the repository or the working tree.
const WRITE: &[&str] = &[
    "commit",
    "add",
    "rm",
    "mv",
    "reset",
    "checkout",
    "switch",
    "restore",
    "merge",
    "rebase",
    "cherry-pick",
    "revert",
    "init",
    "apply",
    "am",
    "clean",
    "notes",
    "gc",
    "prune",
    "repack",
    "update-ref",
    "update-index",
    "replace",
    "sparse-checkout",
    "commit-tree",
    "write-tree",
    "read-tree",
    "symbolic-ref",
    "pack-refs",
    "maintenance",
    "format-patch",
    "mktag",
    "mktree",
    "hash-object",
    "merge-file",
    "checkout-index",
    "rerere",
];
/// Subcommands that talk to other repositories.
const REMOTE: &[&str] = &[
    "push",
    "fetch",
    "pull",
    "clone",
    "remote",
    "ls-remote",
    "submodule",
    "send-email",
    "request-pull",
    "archive",
];
/// Subcommands that run arbitrary programs by design.
const EXEC: &[&str] = &[
    "filter-branch",
    "bisect",
    "mergetool",
    "difftool",
    "daemon",
    "instaweb",
    "web--browse",
    "svn",
    "p4",
    "cvsimport",
    "cvsserver",
    "shell",
    "upload-pack",
    "receive-pack",
    "credential",
    "fast-import",
    "fast-export",
    "filter-repo",
    "worktree",
    "config",
    "hook",
    "submodule--helper",
    "bundle",
];

/// Long options that write files or execute programs. Any unambiguous abbreviation of
/// them counts too (git accepts abbreviated long options).
const DANGEROUS_LONG: &[&str] = &[
    "--output",
    "--ext-diff",
    "--textconv",
    "--exec",
    "--upload-pack",
    "--receive-pack",
    "--open-files-in-pager",
    "--no-index",
    "--exec-path",
    "--config-env",
    "--git-dir",
    "--work-tree",
    "--run",
    "--pager",
    "--contents",
    "--remote",
    "--template",
    "--separate-git-dir",
];
/// Exact long options that are harmless even though they prefix a dangerous one.
const BENIGN_LONG: &[&str] = &[
    "--text",
    "--no-ext-diff",
    "--no-textconv",
    "--output-indicator-new",
    "--output-indicator-old",
    "--output-indicator-context",
    "--oneline",
    "--stat",
];

/// Global options (before the subcommand) that take a separate value.
const GLOBAL_WITH_VALUE: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--super-prefix",
    "--exec-path",
    "--attr-source",
    "--list-cmds",
];

/// Classifies `git …` (`argv[0]` is the git executable).
pub(crate) fn classify_argv(argv: &[String]) -> GitClass {
    let mut chdirs = Vec::new();
    let mut i = 1;
    let mut dangerous_global = false;
    // Global options.
    while let Some(w) = argv.get(i) {
        if !w.starts_with('-') {
            break;
        }
        let (name, inline) = match w.split_once('=') {
            Some((n, _)) if n.starts_with("--") => (n, true),
            _ => (w.as_str(), false),
        };
        match name {
            "-C" => {
                if let Some(dir) = argv.get(i + 1) {
                    chdirs.push(dir.clone());
                }
                i += 2;
                continue;
            }
            "-p"
            | "--paginate"
            | "-P"
            | "--no-pager"
            | "--bare"
            | "--no-replace-objects"
            | "--literal-pathspecs"
            | "--glob-pathspecs"
            | "--noglob-pathspecs"
            | "--icase-pathspecs"
            | "--no-optional-locks"
            | "--no-lazy-fetch"
            | "--no-advice"
            | "--version"
            | "--help" => {}
            _ => {
                // -c, --config-env, --exec-path, --git-dir, --work-tree, --namespace and anything
                // unknown can change what git executes or where it writes.
                dangerous_global = true;
                if !inline && GLOBAL_WITH_VALUE.contains(&name) {
                    i += 1;
                } else if name.starts_with("-C") && name.len() > 2 {
                    // `-Cdir` is not accepted by git, but be safe.
                }
            }
        }
        i += 1;
    }
    if dangerous_global {
        return GitClass::new(Operation::ShellExec, true, chdirs);
    }
    let Some(sub) = argv.get(i) else {
        // Bare `git` prints help.
        return GitClass::new(Operation::GitRead, false, chdirs);
    };
    let args = argv.get(i + 1..).unwrap_or_default();
    classify_sub(sub, args, chdirs)
}

fn classify_sub(sub: &str, args: &[String], chdirs: Vec<String>) -> GitClass {
    let options = options_before_dashdash(args);
    if EXEC.contains(&sub) {
        // `config --get`/`--list` reads, everything else can make git run programs later.
        if sub == "config" && is_config_read(&options) {
            return GitClass::new(Operation::GitRead, false, chdirs);
        }
        if sub == "worktree" && args.first().is_some_and(|a| a == "list") {
            return GitClass::new(Operation::GitRead, false, chdirs);
        }
        return GitClass::new(Operation::ShellExec, true, chdirs);
    }
    if options.iter().any(|o| is_dangerous_option(sub, o)) {
        return GitClass::new(Operation::ShellExec, true, chdirs);
    }
    if REMOTE.contains(&sub) {
        // `ext::` and `fd::` transports run commands.
        let transport_exec = args.iter().any(|a| {
            let lower = a.to_ascii_lowercase();
            lower.starts_with("ext::") || lower.starts_with("fd::")
        });
        // `clone -u` is `--upload-pack`; other `-u` flags are flagged too (fail closed).
        let has_u = matches!(sub, "clone" | "fetch" | "pull" | "ls-remote")
            && options.iter().any(|o| short_cluster_has(o, 'u'));
        if transport_exec || has_u {
            return GitClass::new(Operation::ShellExec, true, chdirs);
        }
        // `git remote` and `git remote -v` only list the configured remotes; `show` (which
        // contacts the remote), `add`, `set-url`, … stay git.remote.
        if sub == "remote" && args.iter().all(|a| a == "-v" || a == "--verbose") {
            return GitClass::new(Operation::GitRead, false, chdirs);
        }
        return GitClass::new(Operation::GitRemote, false, chdirs);
    }
    if WRITE.contains(&sub) {
        // `rebase -x/--exec` runs commands; caught above by `--exec`, here `-x`.
        if sub == "rebase" && options.iter().any(|o| short_cluster_has(o, 'x')) {
            return GitClass::new(Operation::ShellExec, true, chdirs);
        }
        return GitClass::new(Operation::GitWrite, false, chdirs);
    }
    match sub {
        "branch" => {
            let writes = options.iter().any(|o| {
                matches!(
                    o.as_str(),
                    "-d" | "-D"
                        | "-m"
                        | "-M"
                        | "-c"
                        | "-C"
                        | "-f"
                        | "-u"
                        | "--delete"
                        | "--move"
                        | "--copy"
                        | "--force"
                        | "--set-upstream-to"
                        | "--unset-upstream"
                        | "--edit-description"
                        | "--track"
                        | "--no-track"
                        | "-t"
                        | "--create-reflog"
                        | "--recurse-submodules"
                ) || o.starts_with("--set-upstream-to=")
                    || o.starts_with("--track=")
                    || (o.starts_with('-')
                        && !o.starts_with("--")
                        && o.chars().skip(1).any(|c| "dDmMcCfut".contains(c)))
            });
            let listing = options.iter().any(|o| {
                o == "--list"
                    || o == "-l"
                    || o == "-a"
                    || o == "-r"
                    || o == "--all"
                    || o == "--remotes"
            });
            let positional = args.iter().any(|a| !a.starts_with('-'));
            if writes || (positional && !listing && !has_valued_filter(args)) {
                GitClass::new(Operation::GitWrite, false, chdirs)
            } else {
                GitClass::new(Operation::GitRead, false, chdirs)
            }
        }
        "tag" => {
            let writes = options.iter().any(|o| {
                matches!(
                    o.as_str(),
                    "-d" | "-a"
                        | "-s"
                        | "-f"
                        | "-m"
                        | "-F"
                        | "-u"
                        | "-e"
                        | "--delete"
                        | "--annotate"
                        | "--sign"
                        | "--force"
                        | "--message"
                        | "--file"
                        | "--local-user"
                        | "--edit"
                ) || o.starts_with("--message=")
                    || o.starts_with("--file=")
                    || o.starts_with("--local-user=")
            });
            let listing = options.iter().any(|o| o == "-l" || o == "--list");
            let positional = args.iter().any(|a| !a.starts_with('-'));
            if writes || (positional && !listing && !has_valued_filter(args)) {
                GitClass::new(Operation::GitWrite, false, chdirs)
            } else {
                GitClass::new(Operation::GitRead, false, chdirs)
            }
        }
        "stash" => match args.first().map(String::as_str) {
            Some("list") | Some("show") => GitClass::new(Operation::GitRead, false, chdirs),
            _ => GitClass::new(Operation::GitWrite, false, chdirs),
        },
        "reflog" => match args.first().map(String::as_str) {
            Some("expire") | Some("delete") | Some("drop") => {
                GitClass::new(Operation::GitWrite, false, chdirs)
            }
            _ => GitClass::new(Operation::GitRead, false, chdirs),
        },
        _ if READ.contains(&sub) => GitClass::new(Operation::GitRead, false, chdirs),
        // Unknown subcommand: an alias can run anything.
        _ => GitClass::new(Operation::ShellExec, true, chdirs),
    }
}

/// `--contains X`, `--merged X`, `--points-at X` … make a positional argument a filter value.
fn has_valued_filter(args: &[String]) -> bool {
    let mut positional_values = 0usize;
    let mut positional = 0usize;
    let mut iter = args.iter().peekable();
    while let Some(a) = iter.next() {
        if matches!(
            a.as_str(),
            "--contains"
                | "--no-contains"
                | "--merged"
                | "--no-merged"
                | "--points-at"
                | "--sort"
                | "--format"
        ) {
            if iter.next().is_some() {
                positional_values += 1;
            }
        } else if !a.starts_with('-') {
            positional += 1;
        }
    }
    positional_values > 0 && positional == 0
}

fn options_before_dashdash(args: &[String]) -> Vec<String> {
    args.iter()
        .take_while(|a| a.as_str() != "--")
        .filter(|a| a.starts_with('-') && a.len() > 1)
        .cloned()
        .collect()
}

fn short_cluster_has(option: &str, flag: char) -> bool {
    option.starts_with('-')
        && !option.starts_with("--")
        && option.chars().skip(1).any(|c| c == flag)
}

fn is_dangerous_option(sub: &str, option: &str) -> bool {
    if let Some(long) = option.strip_prefix("--") {
        let name = long.split('=').next().unwrap_or(long);
        let full = format!("--{name}");
        if BENIGN_LONG.contains(&full.as_str()) {
            return false;
        }
        if name.len() < 2 {
            return false;
        }
        return DANGEROUS_LONG.iter().any(|d| {
            d.split('=')
                .next()
                .is_some_and(|d| d.starts_with(full.as_str()))
        });
    }
    // Short options: `-o` (output) anywhere, `-O` (open in pager) for grep.
    if sub == "grep" && short_cluster_has(option, 'O') {
        return true;
    }
    if matches!(sub, "diff" | "log" | "show" | "format-patch" | "archive")
        && option.starts_with("-o")
    {
        return true;
    }
    false
}

fn is_config_read(options: &[String]) -> bool {
    let reads = options.iter().any(|o| {
        matches!(
            o.as_str(),
            "--get"
                | "--get-all"
                | "--get-regexp"
                | "--get-urlmatch"
                | "-l"
                | "--list"
                | "--get-color"
                | "--get-colorbool"
        )
    });
    let writes = options.iter().any(|o| {
        matches!(
            o.as_str(),
            "--add"
                | "--replace-all"
                | "--unset"
                | "--unset-all"
                | "--rename-section"
                | "--remove-section"
                | "-e"
                | "--edit"
        )
    });
    reads && !writes
}

/// True when `argv` (`git …`) names a subcommand git does not know (after the global
/// options toolgate reads): an alias or a typo.
pub(crate) fn unknown_subcommand(argv: &[String]) -> bool {
    let mut i = 1;
    while let Some(w) = argv.get(i) {
        if !w.starts_with('-') {
            break;
        }
        let takes_value =
            w == "-C" || (!w.contains('=') && GLOBAL_WITH_VALUE.contains(&w.as_str()));
        i += if takes_value { 2 } else { 1 };
    }
    argv.get(i).is_some_and(|sub| {
        let s = sub.as_str();
        !(READ.contains(&s)
            || WRITE.contains(&s)
            || REMOTE.contains(&s)
            || EXEC.contains(&s)
            || matches!(
                s,
                "branch" | "tag" | "stash" | "reflog" | "config" | "worktree"
            ))
    })
}

/// Classifies an mcp-server-git style tool by its subcommand name (`diff`, `diff_unstaged`,
/// `create_branch`, …; a `git_` prefix is ignored). `None` when unknown.
pub(crate) fn classify_tool(subcommand: &str) -> Option<Operation> {
    let sub = subcommand
        .strip_prefix("git_")
        .unwrap_or(subcommand)
        .replace('-', "_");
    let op = match sub.as_str() {
        "status" | "diff" | "diff_unstaged" | "diff_staged" | "log" | "show" | "branch"
        | "list_branches" | "blame" | "ls_files" | "rev_parse" | "describe" | "shortlog" => {
            Operation::GitRead
        }
        "commit" | "add" | "reset" | "checkout" | "create_branch" | "init" | "switch"
        | "restore" | "merge" | "rebase" | "tag" | "create_tag" | "stash" | "rm" | "mv"
        | "clean" | "cherry_pick" | "revert" | "delete_branch" => Operation::GitWrite,
        "push" | "pull" | "fetch" | "clone" | "remote" | "add_remote" => Operation::GitRemote,
        _ => return None,
    };
    Some(op)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(cmd: &str) -> (Operation, bool) {
        let argv: Vec<String> = cmd.split(' ').map(str::to_owned).collect();
        let c = classify_argv(&argv);
        (c.operation, c.opaque)
    }

    #[test]
    fn table() {
        use Operation::*;
        let cases: &[(&str, Operation)] = &[
            ("git status", GitRead),
            ("git diff HEAD~1", GitRead),
            ("git diff --output=/tmp/x", ShellExec),
            ("git diff --out=/tmp/x", ShellExec),
            ("git diff --ext-diff", ShellExec),
            ("git log --textconv", ShellExec),
            ("git diff --text", GitRead),
            ("git diff --no-ext-diff", GitRead),
            ("git -c core.pager=evil log", ShellExec),
            ("git --config-env=core.pager=X log", ShellExec),
            ("git --exec-path=/tmp status", ShellExec),
            ("git --git-dir=/x status", ShellExec),
            ("git grep -O foo", ShellExec),
            ("git grep -o foo", GitRead),
            ("git grep --open-files-in-pager=vim foo", ShellExec),
            ("git branch", GitRead),
            ("git branch -a", GitRead),
            ("git branch newb", GitWrite),
            ("git branch -D old", GitWrite),
            ("git branch --contains HEAD", GitRead),
            ("git tag", GitRead),
            ("git tag v1", GitWrite),
            ("git stash list", GitRead),
            ("git stash", GitWrite),
            ("git commit -m x", GitWrite),
            ("git push origin main", GitRemote),
            ("git remote", GitRead),
            ("git remote -v", GitRead),
            ("git remote --verbose", GitRead),
            ("git remote show origin", GitRemote),
            ("git remote -v show origin", GitRemote),
            ("git remote add evil https://evil.example/x", GitRemote),
            (
                "git remote set-url origin https://evil.example/x",
                GitRemote,
            ),
            ("git remote remove origin", GitRemote),
            ("git remote update", GitRemote),
            ("git remote prune origin", GitRemote),
            ("git fetch --upload-pack=evil", ShellExec),
            ("git clone ext::sh", ShellExec),
            ("git clone -u evil repo", ShellExec),
            ("git rebase -x make", ShellExec),
            ("git rebase --exec make", ShellExec),
            ("git frobnicate", ShellExec),
            ("git config --get user.name", GitRead),
            ("git config core.pager evil", ShellExec),
            ("git log -- --output=x", GitRead),
        ];
        for (cmd, want) in cases {
            assert_eq!(classify(cmd).0, *want, "{cmd}");
        }
    }
}
