//! The files shell commands touch, against what they really open: each command of a corpus
//! (every entry of the command table, redirections, pipelines, recursion, `cd`) runs in
//! `bash -c` under `strace -f -y -e trace=%file,fchdir,%process` in a fresh copy of a scratch directory of
//! real files. Every file inside the scratch directory that the command opened (or created,
//! removed, renamed, changed) must be covered by a part toolgate reported for the command:
//! the same canonical path, or a path beneath a part's `beneath` directory; what it wrote
//! must be covered by an `fs.write` or `fs.delete` part. A command toolgate judged hidden
//! passes (it never takes an allow). A file the command created and then renamed (`sed -i`'s
//! temporary) counts as the file it became. One exception: the ignore rules a search tool
//! (`rg`, `ag`) reads above the directory it searches (`.gitignore`, `.git/info/exclude`,
//! `.git/config`, …), which it parses and never prints.
//!
//! strace is the Debian package `strace` (installed by `scripts/test` in CI); without it the
//! test skips with a message, except in CI where it fails. Commands whose program is not
//! installed are skipped by name. Each run is bounded by `timeout -s KILL 10`; nothing
//! leaves the scratch directory except a connection to a closed loopback port.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::json;
use toolgate_policy::{
    Action, FsFacts, NormalizeContext, Operation, ToolCall, lexical_normalize, normalize,
};

/// The real filesystem, for a scratch directory without symlinks on the way.
struct RealFs;

impl FsFacts for RealFs {
    fn canonicalize(&self, abs_path: &str) -> Option<String> {
        lexical_normalize(abs_path)
    }

    fn exists(&self, abs_path: &str) -> bool {
        Path::new(abs_path).symlink_metadata().is_ok()
    }
}

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn find_program(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// The corpus: a command line and the programs it needs.
const CORPUS: &[&str] = &[
    "cat a.txt",
    "cat a.txt b.txt | wc -l",
    "head -n 2 a.txt",
    "tail -n1 b.txt",
    "more a.txt",
    "less -F a.txt",
    "base64 a.txt",
    "xxd a.txt",
    "xxd a.txt out.hex",
    "od -c a.txt",
    "strings -n 2 a.txt",
    "wc -c a.txt b.txt",
    "sort names.txt",
    "sort -r -o sorted.txt names.txt",
    "diff a.txt b.txt",
    "diff -r src docs",
    "grep -n x a.txt",
    "grep -rn main src",
    "grep -r --include='*.rs' fn .",
    "grep -l x a.txt b.txt notes",
    "jq . data.json",
    "jq -r .name data.json",
    "yq . data.json",
    "awk '{print $1}' a.txt",
    "sed -n 1p a.txt",
    "sed -i 's/a/b/' b.txt",
    "source ./script.sh",
    ". ./script.sh",
    "sh ./script.sh",
    "curl -s -m 2 -d @a.txt http://127.0.0.1:9/",
    "curl -s -m 2 -F up=@b.txt http://127.0.0.1:9/",
    "curl -s -o got.txt file://WORK/a.txt",
    "wget -q -t 1 -T 2 -O fetched.txt http://127.0.0.1:9/",
    "scp a.txt scp_copy.txt",
    "tar cf out.tar src",
    "mkdir -p extract && tar xf arch.tar -C extract",
    "tar tf arch.tar",
    "zip -qr out.zip src",
    "unzip -q -o arch.zip -d unz",
    "openssl base64 -in a.txt -out a.b64",
    "tee t1.txt t2.txt < a.txt",
    "cp a.txt c.txt",
    "cp -r src src2",
    "cp a.txt c.txt && mv c.txt d.txt",
    "install -m 644 a.txt inst.txt",
    "ln -s a.txt link.txt",
    "touch new.txt",
    "mkdir -p made/deeper",
    "dd if=a.txt of=dd.txt status=none",
    "truncate -s 0 b.txt",
    "rm -f a.txt",
    "rm -r src",
    "mkdir gone && rmdir gone",
    "unlink b.txt",
    "shred -n 1 notes",
    "chmod 600 a.txt",
    "chmod -R u+w src",
    "find . -name '*.rs'",
    "find src -type f",
    "find docs -delete",
    "find src -name '*.rs' -exec cat {} ';'",
    "ls",
    "ls -la src",
    "ls -R docs",
    "ls 2>/dev/null",
    "cd src && cat main.rs",
    "cd src; ls sub && cat sub/deep.rs",
    "cat < a.txt > out3.txt 2>&1",
    "echo hi >> log.txt",
    "echo hi > log2.txt 2> err.txt",
    "stat a.txt",
    "du -s src",
    "file a.txt",
    "find src -type f | xargs wc -l",
    "cat a.txt | sort | uniq > uniq.txt",
    "ls src | grep rs",
    "sudo -n true 2>/dev/null || cat b.txt",
    "env LC_ALL=C sort names.txt",
    "bash -c 'cd docs && cat x.md'",
    "rsync -a src/ rdst/",
    "rg -n main src",
    "rg --files",
    "ag main src",
    "git clean -fdxq",
    "grep -d recurse main src",
    "tar czf out.tgz docs",
    "cat notes 1<> rw.txt",
];

/// Programs a line needs besides coreutils and bash.
fn needs(line: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    for p in [
        "xxd", "jq", "yq", "curl", "wget", "scp", "zip", "unzip", "openssl", "less", "more",
        "strings", "file", "shred", "sudo", "rsync", "rg", "ag", "git", "gzip",
    ] {
        if line.split(|c: char| !c.is_alphanumeric()).any(|w| w == p) {
            out.push(p);
        }
    }
    out
}

fn run(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Writes the scratch template: files, directories, a tar and a zip archive.
fn template(root: &Path) {
    let w = root.join("template");
    for d in ["src/sub", "docs"] {
        std::fs::create_dir_all(w.join(d)).unwrap();
    }
    for (f, text) in [
        ("a.txt", "alpha x\nbeta\n"),
        ("b.txt", "a b c\nx\n"),
        ("names.txt", "zed\namy\nbob\n"),
        ("data.json", "{\"name\": \"toolgate\"}\n"),
        ("notes", "x notes\n"),
        (".env", "SECRET=1\n"),
        ("script.sh", "true\n"),
        ("src/main.rs", "fn main() {}\n"),
        ("src/lib.rs", "pub fn x() {}\n"),
        ("src/sub/deep.rs", "fn deep() {}\n"),
        ("docs/x.md", "# x\n"),
    ] {
        std::fs::write(w.join(f), text).unwrap();
    }
    assert!(run(Command::new("tar")
        .args(["cf", "arch.tar", "docs"])
        .current_dir(&w)));
    if find_program("git").is_some() {
        // A repository whose files are all untracked (for `git clean`).
        run(Command::new("git").args(["init", "-q"]).current_dir(&w));
    }
    if find_program("zip").is_some() {
        run(Command::new("zip")
            .args(["-qr", "arch.zip", "docs"])
            .current_dir(&w));
    }
}

/// What a strace log says the command touched inside `root`: path → written.
fn touched(log: &str, root: &str, work: &str) -> BTreeMap<String, bool> {
    // Where paths without a directory descriptor are relative to (`rename("a", "b")`): the
    // last directory changed to, per process, else the working directory.
    let mut cwd: BTreeMap<String, String> = BTreeMap::new();
    let mut out: BTreeMap<String, bool> = BTreeMap::new();
    // Renamed from → to, so a temporary counts as the file it became.
    let mut renamed: BTreeMap<String, String> = BTreeMap::new();
    for line in &stitched(log) {
        let Some((call, args_result)) = line
            .split_once(char::is_whitespace)
            .map(|(_, rest)| rest.trim_start())
            .and_then(|rest| rest.split_once('('))
        else {
            continue;
        };
        // strace pads the ` = result` column.
        let Some((args, result)) = args_result
            .rsplit_once(" = ")
            .and_then(|(a, r)| Some((a.trim_end().strip_suffix(')')?, r)))
        else {
            continue;
        };
        if result.starts_with('-') {
            continue;
        }
        let pid = line.split_whitespace().next().unwrap_or_default();
        let here = cwd.get(pid).cloned().unwrap_or_else(|| work.to_owned());
        let pid = pid.to_owned();
        let paths = decorated_paths(args, &here);
        match call {
            "open" | "openat" | "openat2" | "creat" => {
                // `= 3</resolved/path>`.
                let Some(path) = result
                    .split_once('<')
                    .and_then(|(_, p)| p.rsplit_once('>'))
                    .map(|(p, _)| p.to_owned())
                else {
                    continue;
                };
                let write = call == "creat"
                    || args.contains("O_WRONLY")
                    || args.contains("O_RDWR")
                    || args.contains("O_CREAT")
                    || args.contains("O_TRUNC");
                let e = out.entry(path).or_insert(false);
                *e |= write;
            }
            "chdir" => {
                if let Some(p) = paths.first() {
                    cwd.insert(pid, p.clone());
                }
            }
            "clone" | "clone3" | "fork" | "vfork" => {
                // A child starts where its parent is. Under `-f` the child's first calls can
                // be logged before its parent's `clone` returns: a directory the child already
                // changed to (rsync's receiver enters the destination) is kept.
                if let Ok(child) = result
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .parse::<u32>()
                {
                    cwd.entry(child.to_string()).or_insert_with(|| here.clone());
                }
            }
            "fchdir" => {
                if let Some(dir) = args
                    .split_once('<')
                    .and_then(|(_, d)| d.rsplit_once('>'))
                    .map(|(d, _)| d.to_owned())
                {
                    cwd.insert(pid, dir);
                }
            }
            "rename" | "renameat" | "renameat2" => {
                if let [from, to] = paths.as_slice() {
                    renamed.insert(from.clone(), to.clone());
                    out.insert(from.clone(), true);
                    out.insert(to.clone(), true);
                }
            }
            "unlink" | "unlinkat" | "rmdir" | "mkdir" | "mkdirat" | "truncate" | "link"
            | "linkat" | "symlink" | "symlinkat" | "chmod" | "fchmodat" | "fchmodat2" | "chown"
            | "fchownat" | "lchown" => {
                // The last path names what changes (`symlinkat(target, dirfd, linkpath)`).
                if let Some(p) = paths.last() {
                    out.insert(p.clone(), true);
                }
            }
            _ => {}
        }
    }
    let mut result = BTreeMap::new();
    for (path, write) in out {
        let mut p = path;
        let mut hops = 0;
        while let Some(to) = renamed.get(&p) {
            p = to.clone();
            hops += 1;
            if hops > 8 {
                break;
            }
        }
        if p == root || p.starts_with(&format!("{root}/")) {
            let e = result.entry(p).or_insert(false);
            *e |= write;
        }
    }
    result
}

/// strace's lines with each call that another process interrupted put back together: under
/// `-f`, `PID clone(…<unfinished ...>` is followed, after other processes' lines, by `PID
/// <... clone resumed>…) = CHILD`.
fn stitched(log: &str) -> Vec<String> {
    let mut unfinished: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Vec::new();
    for line in log.lines() {
        let pid = line
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned();
        if let Some(head) = line.strip_suffix("<unfinished ...>") {
            unfinished.insert(pid, head.to_owned());
            continue;
        }
        if let Some((_, tail)) = line.split_once(" resumed>")
            && line.contains("<... ")
        {
            if let Some(head) = unfinished.remove(&pid) {
                out.push(format!("{}{tail}", head.trim_end()));
            }
            continue;
        }
        out.push(line.to_owned());
    }
    out
}

/// The paths a syscall names: `DIRFD</dir>, "name"` and `AT_FDCWD</dir>, "name"` joined, and
/// absolute quoted strings alone.
fn decorated_paths(args: &str, here: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut dir: Option<String> = None;
    let mut rest = args;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('"') {
            let Some(end) = r.find('"') else { break };
            let name = &r[..end];
            let path = if name.starts_with('/') {
                Some(name.to_owned())
            } else {
                Some(format!(
                    "{}/{name}",
                    dir.take().unwrap_or_else(|| here.to_owned())
                ))
            };
            if let Some(p) = path.and_then(|p| lexical_normalize(&p)) {
                out.push(p);
            }
            rest = &r[end + 1..];
        } else if let Some(at) = rest.find(['<', '"']) {
            if rest.as_bytes()[at] == b'<' {
                let r = &rest[at + 1..];
                let Some(end) = r.find('>') else { break };
                dir = Some(r[..end].to_owned());
                rest = &r[end + 1..];
            } else {
                rest = &rest[at..];
            }
        } else {
            break;
        }
    }
    out
}

/// The files a search tool reads for its ignore rules, in the directories above where it
/// searches (`.gitignore`, `.ignore`, `.rgignore`, and the repository's `.git/info/exclude`,
/// `.git/HEAD`, `.git/config`). It parses them and never prints them; they are the one kind
/// of read the table does not report.
fn is_ignore_rule(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or_default();
    matches!(name, ".gitignore" | ".ignore" | ".rgignore")
        || path.ends_with("/.git/info/exclude")
        || path.ends_with("/.git/HEAD")
        || path.ends_with("/.git/config")
}

/// Whether `action` reports `path` (written: by a write or delete part).
fn covered(action: &Action, path: &str, write: bool) -> bool {
    action.parts.iter().any(|p| {
        let op_ok = if write {
            matches!(p.operation, Operation::FsWrite | Operation::FsDelete)
        } else {
            p.operation.is_fs()
        };
        op_ok
            && p.resources.iter().any(|r| {
                r == path
                    || (p.beneath.is_some() && (path.starts_with(&format!("{r}/")) || r == "/"))
            })
    })
}

#[test]
fn every_file_a_command_opens_is_a_part_toolgate_reported() {
    let Some(strace) = find_program("strace") else {
        assert!(
            !ci(),
            "strace is required in CI (the Debian package `strace`; scripts/test installs it)"
        );
        eprintln!("skipped: no strace (install the Debian package `strace`)");
        return;
    };
    let (Some(bash), Some(timeout)) = (find_program("bash"), find_program("timeout")) else {
        eprintln!("skipped: bash or timeout not found");
        return;
    };
    assert!(CORPUS.len() >= 40);
    let base = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(base.path()).unwrap();
    template(&root);
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut checked = 0;
    let mut failures = Vec::new();
    for (n, line) in CORPUS.iter().enumerate() {
        if let Some(missing) = needs(line).into_iter().find(|p| find_program(p).is_none()) {
            eprintln!("skipped `{line}`: `{missing}` is not installed");
            continue;
        }
        let work = root.join(format!("w{n}"));
        assert!(run(Command::new("cp")
            .arg("-a")
            .arg(root.join("template"))
            .arg(&work)));
        let work_s = work.to_str().unwrap().to_owned();
        let line = line.replace("WORK", &work_s);
        let log = root.join(format!("w{n}.log"));
        let _ = Command::new(&timeout)
            .args(["-s", "KILL", "10"])
            .arg(&strace)
            .args(["-f", "-y", "-qq", "-e", "trace=%file,fchdir,%process", "-o"])
            .arg(&log)
            .arg("--")
            .arg(&bash)
            .args(["-c", &line])
            .env("HOME", &home)
            .current_dir(&work)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(!text.is_empty(), "`{line}`: strace wrote no log");
        let args = json!({ "command": line });
        let ctx = NormalizeContext {
            workspace: &work_s,
            home: home.to_str().unwrap(),
            fs: &RealFs,
        };
        let call = ToolCall {
            server: None,
            tool: "Bash",
            arguments: &args,
            definition: None,
        };
        let action = normalize(&call, None, &ctx);
        let search_tool = ["rg ", "ag "].iter().any(|t| line.starts_with(t));
        checked += 1;
        if action.parts.iter().any(|p| p.hidden) {
            continue;
        }
        for (path, write) in touched(&text, root.to_str().unwrap(), &work_s) {
            if !write && search_tool && is_ignore_rule(&path) {
                continue;
            }
            if !covered(&action, &path, write) {
                failures.push(format!(
                    "`{line}` {} `{path}`, not in toolgate's parts: {:?}",
                    if write { "wrote" } else { "read" },
                    action
                        .parts
                        .iter()
                        .filter(|p| p.operation.is_fs())
                        .map(|p| (p.operation, &p.resources, p.beneath.is_some()))
                        .collect::<Vec<_>>()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 40, "only {checked} commands ran");
}

#[test]
fn strace_lines_are_read_with_their_directories_and_renames() {
    let log = "10190 openat(AT_FDCWD</r/w>, \"src/sedX\", O_RDWR|O_CREAT|O_EXCL, 0600) = 4</r/w/src/sedX>\n\
               10190 rename(\"src/sedX\", \"src/a.rs\")    = 0\n\
               10191 openat(3</r/w/src>, \"b.rs\", O_RDONLY) = 5</r/w/src/b.rs>\n\
               10191 unlinkat(4</r/w/d>, \"c\", 0) = 0\n\
               10191 openat(AT_FDCWD</r/w>, \"nope\", O_RDONLY) = -1 ENOENT (No such file or directory)\n\
               10191 openat(AT_FDCWD</r/w>, \"/etc/passwd\", O_RDONLY) = 3</etc/passwd>\n";
    let t = touched(log, "/r", "/r/w");
    let want: BTreeMap<String, bool> = [
        ("/r/w/src/a.rs".to_owned(), true),
        ("/r/w/src/b.rs".to_owned(), false),
        ("/r/w/d/c".to_owned(), true),
    ]
    .into_iter()
    .collect();
    assert_eq!(t, want);

    // A child's own `chdir`, logged before its parent's `clone` returns, is where its
    // relative paths are.
    let log = "20002 chdir(\"dst\")  = 0\n\
               20001 clone(child_stack=NULL, flags=SIGCHLD) = 20002\n\
               20002 rename(\".x.tmp\", \"x\")  = 0\n";
    let t = touched(log, "/r", "/r/w");
    let want: BTreeMap<String, bool> = [("/r/w/dst/x".to_owned(), true)].into_iter().collect();
    assert_eq!(t, want);
}

#[test]
fn interrupted_calls_are_read_whole() {
    let log = "10 clone(child_stack=NULL, flags=CLONE_CHILD <unfinished ...>\n11 chdir(\"/w/dst\") = 0\n10 <... clone resumed>, child_tidptr=0x1) = 11\n10 openat(AT_FDCWD</w>, \"a\", O_RDONLY) = 3</w/a>\n";
    assert_eq!(
        stitched(log),
        [
            "11 chdir(\"/w/dst\") = 0",
            "10 clone(child_stack=NULL, flags=CLONE_CHILD, child_tidptr=0x1) = 11",
            "10 openat(AT_FDCWD</w>, \"a\", O_RDONLY) = 3</w/a>",
        ]
    );
}
