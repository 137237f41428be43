//! The look-through of wrappers: every execution an argv leads to (`sudo`, `env`, `xargs`,
//! `sh -c`, `find -exec` …).

use super::{
    RESERVED, Redirect, Scan, best_effort_segments, is_assignment, parse_line, scan_hiding,
};

/// The basename of an executable word (`/bin/rm` is `rm`).
pub fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// One execution found inside a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exec {
    /// The argv actually executed, wrappers and env prefixes removed.
    pub argv: Vec<String>,
    /// True when wrappers, env prefixes or an inner shell were looked through, or when this
    /// execution is nested in another command (`find -exec`, `xargs`).
    pub wrapped: bool,
    /// True when a string was re-scanned (`sh -c`, `eval`) and was not simple.
    pub inexact: bool,
    /// True for a command whose job is to run another one (`sh -c`, `xargs`).
    pub container: bool,
    /// True when what runs is hidden: `eval`, a substitution or a variable in the command
    /// position of an inner string (see [`scan_hiding`]), or a variable as the command name.
    pub hidden: bool,
    /// Redirections of an inner string's command (`sh -c 'cat x > y'`).
    pub redirects: Vec<Redirect>,
}

const MAX_DEPTH: usize = 8;

/// Strips env prefixes and wrappers (`sudo`, `env`, `nohup`, `xargs`, `time`, `nice`,
/// `sh -c`, `bash -c`, `eval`, `busybox`, …) and returns the argv that actually runs. For an
/// inner shell string that is not one simple command, the first segment's argv.
pub fn look_through(argv: &[String]) -> Vec<String> {
    let execs = expand(argv);
    execs
        .iter()
        .find(|e| !e.container)
        .or_else(|| execs.first())
        .map(|e| e.argv.clone())
        .unwrap_or_default()
}

/// Every execution an argv leads to: the looked-through command first, then nested ones
/// (`sh -c 'a; b'` gives `a` and `b`; `find -exec rm` gives `find` and `rm`).
pub(crate) fn expand(argv: &[String]) -> Vec<Exec> {
    let mut out = Vec::new();
    expand_into(argv.to_vec(), false, false, false, 0, &mut out);
    out
}

fn expand_into(
    mut argv: Vec<String>,
    mut wrapped: bool,
    inexact: bool,
    hidden: bool,
    depth: usize,
    out: &mut Vec<Exec>,
) {
    if depth > MAX_DEPTH {
        out.push(Exec {
            argv,
            wrapped: true,
            inexact: true,
            container: false,
            hidden,
            redirects: Vec::new(),
        });
        return;
    }
    loop {
        // Env prefixes and reserved words.
        let mut skip = 0;
        while let Some(w) = argv.get(skip) {
            if is_assignment(w) || RESERVED.contains(&w.as_str()) {
                skip += 1;
            } else {
                break;
            }
        }
        if skip > 0 {
            argv.drain(..skip);
            wrapped = true;
        }
        let Some(first) = argv.first() else {
            return;
        };
        // A variable or substitution as the command name (also behind a wrapper: `sudo
        // $CMD`): what runs is not known. A quoted, literal `$` in a command name counts
        // too; no real command is named like that.
        let hidden = hidden || first.contains(['$', '`']);
        let name = basename(first);
        let rest: &[String] = argv.get(1..).unwrap_or_default();
        let next: Option<Vec<String>> = match name {
            "sudo" | "doas" | "run0" | "pkexec" => {
                if let Some(cmd) = option_value(rest, &["-c"], &[]) {
                    // Not sudo syntax, but harmless: treat as a shell string.
                    push_container(&argv, wrapped, inexact, hidden, out);
                    return rescan(&cmd, hidden, depth, out);
                }
                Some(skip_options(
                    rest,
                    &[
                        "-u",
                        "-g",
                        "-C",
                        "-D",
                        "-h",
                        "-p",
                        "-r",
                        "-t",
                        "-T",
                        "-U",
                        "-R",
                        "--user",
                        "--group",
                        "--chdir",
                        "--prompt",
                        "--role",
                        "--type",
                        "--other-user",
                        "--close-from",
                        "--host",
                        "--chroot",
                    ],
                ))
            }
            "su" | "runuser" | "sg" => {
                if let Some(cmd) = option_value(rest, &["-c", "--command"], &["--command="]) {
                    push_container(&argv, wrapped, inexact, hidden, out);
                    return rescan(&cmd, hidden, depth, out);
                }
                None
            }
            "env" => {
                if let Some(s) =
                    option_value(rest, &["-S", "--split-string"], &["--split-string=", "-S"])
                {
                    push_container(&argv, wrapped, inexact, hidden, out);
                    return rescan(&s, hidden, depth, out);
                }
                let mut r = skip_options(
                    rest,
                    &["-u", "--unset", "-C", "--chdir", "-P", "--argv0", "-a"],
                );
                while r.first().is_some_and(|w| is_assignment(w)) {
                    r.remove(0);
                }
                Some(r)
            }
            "nohup" | "setsid" | "unbuffer" | "catchsegv" | "caffeinate" | "command"
            | "builtin" | "exec" | "time" | "nice" | "ionice" | "stdbuf" | "chrt" | "firejail"
            | "proxychains" | "proxychains4" | "torsocks" | "tsocks" | "strace" | "ltrace"
            | "valgrind" | "systemd-run" | "unshare" | "nsenter" | "script" | "faketime"
            | "fakeroot" | "eatmydata" | "trickle" => {
                if name == "script"
                    && let Some(cmd) = option_value(rest, &["-c", "--command"], &["--command="])
                {
                    push_container(&argv, wrapped, inexact, hidden, out);
                    return rescan(&cmd, hidden, depth, out);
                }
                let with_arg: &[&str] = match name {
                    "nice" => &["-n", "--adjustment"],
                    "ionice" => &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
                    "stdbuf" => &["-i", "-o", "-e", "--input", "--output", "--error"],
                    "time" => &["-f", "-o", "--format", "--output"],
                    "exec" => &["-a"],
                    "strace" | "ltrace" => &[
                        "-o", "-e", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-O", "-P", "-S",
                        "-X",
                    ],
                    "systemd-run" => &[
                        "-p",
                        "-u",
                        "-E",
                        "--unit",
                        "--property",
                        "--setenv",
                        "--uid",
                        "--gid",
                        "--working-directory",
                        "-M",
                        "--machine",
                    ],
                    "nsenter" => &["-t", "--target"],
                    "faketime" => &["-f"],
                    _ => &[],
                };
                let mut r = skip_options(rest, with_arg);
                if name == "chrt" || name == "faketime" {
                    // chrt [options] PRIORITY cmd; faketime TIMESTAMP cmd
                    if !r.is_empty() {
                        r.remove(0);
                    }
                }
                Some(r)
            }
            "timeout" => {
                let mut r = skip_options(rest, &["-s", "-k", "--signal", "--kill-after"]);
                if !r.is_empty() {
                    r.remove(0); // duration
                }
                Some(r)
            }
            "taskset" => {
                let has_c = rest.iter().any(|w| w == "-c" || w == "--cpu-list");
                let mut r = skip_options(rest, &["-c", "--cpu-list"]);
                if !has_c && !r.is_empty() {
                    r.remove(0); // mask
                }
                Some(r)
            }
            "flock" => {
                if let Some(cmd) = option_value(rest, &["-c", "--command"], &["--command="]) {
                    push_container(&argv, wrapped, inexact, hidden, out);
                    return rescan(&cmd, hidden, depth, out);
                }
                let mut r = skip_options(rest, &["-w", "--timeout", "-E", "--conflict-exit-code"]);
                if !r.is_empty() {
                    r.remove(0); // lock file
                }
                Some(r)
            }
            "chroot" => {
                let mut r = skip_options(rest, &["--userspec", "--groups"]);
                if !r.is_empty() {
                    r.remove(0); // new root
                }
                if r.is_empty() {
                    // chroot DIR alone runs the user's shell.
                    r.push("sh".to_owned());
                }
                Some(r)
            }
            "xargs" | "parallel" => {
                out.push(Exec {
                    argv: argv.clone(),
                    wrapped,
                    inexact,
                    container: true,
                    hidden,
                    redirects: Vec::new(),
                });
                let r = skip_options(
                    rest,
                    &[
                        "-a",
                        "-d",
                        "-E",
                        "-I",
                        "-L",
                        "-n",
                        "-P",
                        "-s",
                        "--arg-file",
                        "--delimiter",
                        "--eof",
                        "--replace",
                        "--max-lines",
                        "--max-args",
                        "--max-procs",
                        "--max-chars",
                        "--process-slot-var",
                        "-j",
                        "--jobs",
                    ],
                );
                if r.is_empty() {
                    // xargs with no command runs echo.
                    return;
                }
                argv = r;
                wrapped = true;
                continue;
            }
            "watch" => {
                let r = skip_options(rest, &["-n", "--interval", "-d", "-q", "--equexit"]);
                push_container(&argv, wrapped, inexact, hidden, out);
                return rescan(&r.join(" "), hidden, depth, out);
            }
            "busybox" | "toybox" => Some(rest.to_vec()),
            "eval" => {
                push_container(&argv, wrapped, inexact, hidden, out);
                // What eval runs is built at run time.
                return rescan(&rest.join(" "), true, depth, out);
            }
            "cmd" | "cmd.exe" => {
                // `cmd /c STRING`: read the string with shell rules (close enough for deny rules).
                let pos = rest
                    .iter()
                    .position(|w| w.eq_ignore_ascii_case("/c") || w.eq_ignore_ascii_case("/k"));
                if let Some(pos) = pos {
                    out.push(Exec {
                        argv: argv.clone(),
                        wrapped,
                        inexact,
                        container: true,
                        hidden,
                        redirects: Vec::new(),
                    });
                    let cmd = rest.get(pos + 1..).unwrap_or_default().join(" ");
                    return rescan(&cmd, hidden, depth, out);
                }
                None
            }
            "powershell" | "powershell.exe" | "pwsh" | "pwsh.exe" => {
                let pos = rest.iter().position(|w| {
                    let l = w.to_ascii_lowercase();
                    l == "-c" || l == "-command" || l == "/c" || l == "/command"
                });
                if let Some(pos) = pos {
                    out.push(Exec {
                        argv: argv.clone(),
                        wrapped,
                        inexact,
                        container: true,
                        hidden,
                        redirects: Vec::new(),
                    });
                    let cmd = rest.get(pos + 1..).unwrap_or_default().join(" ");
                    return rescan(&cmd, hidden, depth, out);
                }
                None
            }
            "sh" | "bash" | "zsh" | "dash" | "ksh" | "mksh" | "ash" | "fish" | "csh" | "tcsh"
            | "yash" | "posh" | "rbash" => {
                if let Some(cmd) = shell_c_string(rest) {
                    out.push(Exec {
                        argv: argv.clone(),
                        wrapped,
                        inexact,
                        container: true,
                        hidden,
                        redirects: Vec::new(),
                    });
                    return rescan(&cmd, hidden, depth, out);
                }
                None
            }
            "find" => {
                let nested = find_exec_commands(rest);
                out.push(Exec {
                    argv: argv.clone(),
                    wrapped: wrapped || !nested.is_empty(),
                    inexact,
                    container: false,
                    hidden,
                    redirects: Vec::new(),
                });
                for cmd in nested {
                    expand_into(cmd, true, inexact, hidden, depth + 1, out);
                }
                return;
            }
            "fd" | "fdfind" => {
                let nested = after_option(rest, &["-x", "--exec", "-X", "--exec-batch"]);
                out.push(Exec {
                    argv: argv.clone(),
                    wrapped: wrapped || nested.is_some(),
                    inexact,
                    container: false,
                    hidden,
                    redirects: Vec::new(),
                });
                if let Some(cmd) = nested {
                    expand_into(cmd, true, inexact, hidden, depth + 1, out);
                }
                return;
            }
            _ => None,
        };
        match next {
            Some(r) if !r.is_empty() => {
                // The wrapper itself is an execution too: a deny rule on `sudo` must see
                // `sudo rm -rf /`, not only `rm`.
                push_container(&argv, wrapped, inexact, hidden, out);
                argv = r;
                wrapped = true;
            }
            _ => {
                out.push(Exec {
                    argv,
                    wrapped,
                    inexact,
                    container: false,
                    hidden,
                    redirects: Vec::new(),
                });
                return;
            }
        }
    }
}

/// Records a wrapper (`sudo`, `env`, `sh -c`, …) as an execution of its own, so that deny
/// rules on the wrapper's name see it; `look_through` skips it.
fn push_container(
    argv: &[String],
    wrapped: bool,
    inexact: bool,
    hidden: bool,
    out: &mut Vec<Exec>,
) {
    out.push(Exec {
        argv: argv.to_vec(),
        wrapped,
        inexact,
        container: true,
        hidden,
        redirects: Vec::new(),
    });
}

fn rescan(command: &str, hidden: bool, depth: usize, out: &mut Vec<Exec>) {
    let line = parse_line(command);
    let (scanned, hides) = scan_hiding(command);
    let hidden = hidden || hides;
    if !line.invalid && !matches!(scanned, Scan::Simple(_)) {
        // The inner string's commands, each with its redirections.
        if line.segments.is_empty() && (hidden || !line.loose.is_empty()) {
            out.push(Exec {
                argv: Vec::new(),
                wrapped: true,
                inexact: true,
                container: false,
                hidden,
                redirects: line.loose.clone(),
            });
        }
        for seg in line.segments {
            let first = out.len();
            expand_into(seg.words, true, true, hidden, depth + 1, out);
            if let Some(e) = out
                .get_mut(first..)
                .and_then(|es| es.iter_mut().find(|e| !e.container))
            {
                e.redirects = seg.redirects;
            } else if !seg.redirects.is_empty() {
                out.push(Exec {
                    argv: Vec::new(),
                    wrapped: true,
                    inexact: true,
                    container: false,
                    hidden,
                    redirects: seg.redirects,
                });
            }
        }
        return;
    }
    match scanned {
        Scan::Simple(argv) => expand_into(argv, true, false, hidden, depth + 1, out),
        Scan::Compound { segments } => {
            if segments.is_empty() && hidden {
                out.push(Exec {
                    argv: Vec::new(),
                    wrapped: true,
                    inexact: true,
                    container: false,
                    hidden,
                    redirects: Vec::new(),
                });
            }
            for seg in segments {
                expand_into(seg, true, true, hidden, depth + 1, out);
            }
        }
        Scan::Invalid => {
            for seg in best_effort_segments(command) {
                expand_into(seg, true, true, hidden, depth + 1, out);
            }
        }
    }
}

/// Skips leading options (a `--` ends them); options in `with_arg` consume the next word
/// unless written `--opt=value`. Returns the remaining words.
fn skip_options(words: &[String], with_arg: &[&str]) -> Vec<String> {
    let mut i = 0;
    while let Some(w) = words.get(i) {
        if w == "--" {
            i += 1;
            break;
        }
        if !w.starts_with('-') || w == "-" {
            break;
        }
        // Options only, since nice's `-5` style and `-n5` forms carry their value.
        if with_arg.contains(&w.as_str()) {
            i += 2;
        } else {
            i += 1;
        }
    }
    words.get(i..).unwrap_or_default().to_vec()
}

/// The value of `-c CMD` style options among leading options (also `--command=CMD`).
fn option_value(words: &[String], names: &[&str], prefixes: &[&str]) -> Option<String> {
    let mut i = 0;
    while let Some(w) = words.get(i) {
        if names.contains(&w.as_str()) {
            return words.get(i + 1).cloned();
        }
        for p in prefixes {
            if let Some(v) = w.strip_prefix(p)
                && !v.is_empty()
            {
                return Some(v.to_owned());
            }
        }
        i += 1;
    }
    None
}

/// For `sh -c STRING` (also clusters like `-lc`, `-ec`, `-o pipefail -c`): the string.
fn shell_c_string(words: &[String]) -> Option<String> {
    let mut i = 0;
    let mut want_c = false;
    while let Some(w) = words.get(i) {
        if w == "--" {
            i += 1;
            break;
        }
        if w == "-o" || w == "+o" || w == "-O" || w == "+O" || w == "--rcfile" || w == "--init-file"
        {
            i += 2;
            continue;
        }
        if let Some(flags) = w.strip_prefix('-').or_else(|| w.strip_prefix('+')) {
            if !w.starts_with("--") && flags.contains('c') {
                want_c = true;
            }
            i += 1;
            continue;
        }
        break;
    }
    if want_c { words.get(i).cloned() } else { None }
}

/// `find … -exec CMD … ;` (also `-execdir`, `-ok`, `-okdir`, ended by `;` or `+`).
fn find_exec_commands(words: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(w) = words.get(i) {
        if matches!(w.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let mut cmd = Vec::new();
            i += 1;
            while let Some(a) = words.get(i) {
                if a == ";" || a == "+" {
                    break;
                }
                cmd.push(a.clone());
                i += 1;
            }
            if !cmd.is_empty() {
                out.push(cmd);
            }
        }
        i += 1;
    }
    out
}

/// The words after the first of `names` (`fd -x rm`).
fn after_option(words: &[String], names: &[&str]) -> Option<Vec<String>> {
    let pos = words.iter().position(|w| names.contains(&w.as_str()))?;
    let rest = words.get(pos + 1..)?.to_vec();
    if rest.is_empty() { None } else { Some(rest) }
}

/// True when an exec-form argument holds characters a shell would interpret if the server
/// joined the array into a command string.
pub(crate) fn has_shell_meta(word: &str) -> bool {
    word.chars().any(|c| {
        matches!(
            c,
            ';' | '&' | '|' | '<' | '>' | '(' | ')' | '`' | '$' | '\n' | '\r' | '\'' | '"' | '\\'
        )
    })
}
