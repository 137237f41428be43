//! What the commands agents run do to files: a table of their options and operands.
//!
//! [`classify`] reads one argv (wrappers already looked through) and says which words are
//! files and whether each is read, written or deleted, whether the command reaches into a
//! directory recursively, and whether every option was understood. Options are parsed as
//! GNU getopt does (combined short flags `-rn`, a value attached or in the next word,
//! `--long=value`, options after operands, `--` ending them); an option's value is never a
//! path unless the table says so. An option the table does not know makes the reading
//! not understood (the command's own part is then opaque), and the words after it are still
//! looked at, so that a file is never missed because of an option we do not know.
//!
//! A command that is not in the table is *unknown*: its words are returned as `loose`, and
//! the caller shows those that look like paths to deny rules.

use crate::action::Operation;

use Operation::FsRead as Read;

/// Long option lists are written once per command; `help` and `version` everywhere.
/// (Defined before the modules below, which use it.)
macro_rules! long {
    ($($x:expr),* $(,)?) => { &[$($x,)* "help", "version"] };
}

mod archive;
mod files;
mod find;
mod search;
mod table;
mod text;
mod transfer;

pub(crate) use find::git_clean_paths;
pub(crate) use table::classify;

/// One file a command touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileRef {
    pub op: Operation,
    /// The word as bash passes it (relative paths resolve against the working directory).
    pub word: String,
    /// The command reaches into the directory (`grep -r`, `rm -r`, `find`).
    pub recursive: bool,
    /// File-name globs that narrow a recursive reach (`--include`, `-g`, `-name`).
    pub filters: Vec<String>,
}

/// A change of working directory (`cd`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Chdir {
    To(String),
    Home,
    /// `cd -`, `pushd`, `popd`, a directory from elsewhere.
    Unknown,
}

/// What [`classify`] makes of one argv.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Reading {
    /// The command is in the table.
    pub known: bool,
    /// Every option was understood and the command does nothing the table does not show
    /// (no `find -exec`, no `-delete`, no program run for it).
    pub understood: bool,
    pub files: Vec<FileRef>,
    /// Words whose role is not known (every word of an unknown command, values of unknown
    /// options): the caller shows those that look like paths to deny rules.
    pub loose: Vec<String>,
    pub chdir: Option<Chdir>,
    /// What the command does to operands it is given on standard input by `xargs`.
    pub operand_op: Option<Operation>,
    /// Operations on files whose names come from a file or input (`wc --files0-from`,
    /// `tar -T`): which files is not known here.
    pub hidden_ops: Vec<Operation>,
}

impl Reading {
    fn known() -> Reading {
        Reading {
            known: true,
            understood: true,
            ..Reading::default()
        }
    }

    fn file(&mut self, op: Operation, word: &str) {
        self.files.push(FileRef {
            op,
            word: word.to_owned(),
            recursive: false,
            filters: Vec::new(),
        });
    }

    fn tree(&mut self, op: Operation, word: &str, filters: &[String]) {
        self.files.push(FileRef {
            op,
            word: word.to_owned(),
            recursive: true,
            filters: filters.to_vec(),
        });
    }

    fn files_or_trees(&mut self, op: Operation, words: &[String], recursive: bool, f: &[String]) {
        for w in words {
            if w == "-" {
                continue;
            }
            if recursive {
                self.tree(op, w, f);
            } else {
                self.file(op, w);
            }
        }
    }
}

/// How a command's options look.
#[derive(Debug, Clone, Copy, Default)]
struct Spec {
    /// Short flags without a value.
    short: &'static str,
    /// Short options with a value (not a path).
    short_val: &'static str,
    /// Long options without a value (`--name=value` is accepted: some take an optional one).
    long: &'static [&'static str],
    /// Long options with a value (not a path).
    long_val: &'static [&'static str],
    /// Options (`-o`, `--output`) whose value is a file, and what is done to it.
    paths: &'static [(&'static str, Operation)],
    /// `-20` is a count (`head -20`).
    numeric: bool,
}

impl Spec {
    fn path_op(&self, name: &str) -> Option<Operation> {
        self.paths
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, op)| *op)
    }
}

/// The options and operands of one argv, per [`Spec`].
#[derive(Debug, Default)]
struct Parsed {
    /// Options seen, by the name they were given (`-r`, `--recursive`), with their value.
    opts: Vec<(String, Option<String>)>,
    operands: Vec<String>,
    /// Files named by path-valued options.
    files: Vec<(Operation, String)>,
    understood: bool,
    loose: Vec<String>,
}

impl Parsed {
    fn has(&self, names: &[&str]) -> bool {
        self.opts.iter().any(|(n, _)| names.contains(&n.as_str()))
    }

    fn values(&self, names: &[&str]) -> Vec<String> {
        self.opts
            .iter()
            .filter(|(n, _)| names.contains(&n.as_str()))
            .filter_map(|(_, v)| v.clone())
            .collect()
    }
}

/// Parses `args` (without the command name) the way GNU getopt does.
fn parse(args: &[String], spec: &Spec) -> Parsed {
    let mut p = Parsed {
        understood: true,
        ..Parsed::default()
    };
    let mut i = 0;
    while let Some(w) = args.get(i) {
        i += 1;
        if w == "--" {
            p.operands
                .extend(args.get(i..).unwrap_or_default().iter().cloned());
            break;
        }
        if let Some(long) = w.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            let flag = format!("--{name}");
            if spec.long.contains(&name) {
                p.opts.push((flag, inline));
            } else if spec.long_val.contains(&name) || spec.path_op(&flag).is_some() {
                let value = match inline {
                    Some(v) => Some(v),
                    None => {
                        i += 1;
                        args.get(i - 1).cloned()
                    }
                };
                match (&value, spec.path_op(&flag)) {
                    (Some(v), Some(op)) => p.files.push((op, v.clone())),
                    (None, _) => p.understood = false,
                    _ => {}
                }
                p.opts.push((flag, value));
            } else {
                p.understood = false;
                p.loose.extend(inline);
            }
            continue;
        }
        let Some(cluster) = w.strip_prefix('-').filter(|c| !c.is_empty()) else {
            p.operands.push(w.clone());
            continue;
        };
        if spec.numeric && cluster.bytes().all(|b| b.is_ascii_digit()) {
            p.opts.push(("-N".to_owned(), Some(cluster.to_owned())));
            continue;
        }
        for (at, c) in cluster.char_indices() {
            let flag = format!("-{c}");
            if spec.short.contains(c) {
                p.opts.push((flag, None));
            } else if spec.short_val.contains(c) || spec.path_op(&flag).is_some() {
                let rest = cluster.get(at + c.len_utf8()..).unwrap_or_default();
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i - 1).cloned()
                } else {
                    Some(rest.to_owned())
                };
                match (&value, spec.path_op(&flag)) {
                    (Some(v), Some(op)) => p.files.push((op, v.clone())),
                    (None, _) => p.understood = false,
                    _ => {}
                }
                p.opts.push((flag, value));
                break;
            } else {
                p.understood = false;
                let rest = cluster.get(at..).unwrap_or_default();
                p.loose.push(rest.to_owned());
                break;
            }
        }
    }
    p
}

/// Options that read the names of the files to work on from a file.
const NAMES_FROM: &[&str] = &["--files0-from", "--files-from", "--input-file", "-T"];

/// Starts a reading from a parse: path-valued options become files.
fn reading_of(p: &Parsed) -> Reading {
    let mut r = Reading::known();
    r.understood = p.understood;
    r.loose = p.loose.clone();
    for (op, w) in &p.files {
        if w != "-" {
            r.file(*op, w);
        }
    }
    r
}

/// A command not in the table: every word may be anything.
fn unknown(argv: &[String]) -> Reading {
    Reading {
        known: false,
        understood: false,
        loose: argv.to_vec(),
        ..Reading::default()
    }
}

/// Commands whose operands are no files (`echo`, `pwd`, `which`).
fn nothing(name: &str, args: &[String]) -> Reading {
    let mut r = Reading::known();
    match name {
        // Everything is text; `echo -n`, `echo -e` are no options to understand.
        "echo" | "printf" | "true" | "false" | "sleep" | "seq" | "yes" | "basename" | "dirname" => {
        }
        "pwd" => r.understood = args.iter().all(|w| matches!(w.as_str(), "-L" | "-P")),
        "which" | "type" => {
            r.understood = args
                .iter()
                .all(|w| !w.starts_with('-') || matches!(w.as_str(), "-a" | "-s" | "--all"));
        }
        "date" => {
            // `date -s` sets the clock; `-f`/`-r` read a file.
            r.understood = args.iter().all(|w| {
                !w.starts_with('-')
                    || matches!(
                        w.as_str(),
                        "-u" | "-I" | "-R" | "--utc" | "--iso-8601" | "-Iseconds"
                    )
            });
        }
        _ => r.understood = args.iter().all(|w| !w.starts_with('-')),
    }
    r
}

/// Every operand is a file with the same operation.
fn simple(args: &[String], op: Operation, spec: &Spec) -> Reading {
    let p = parse(args, spec);
    let mut r = reading_of(&p);
    if p.has(NAMES_FROM) {
        r.hidden_ops.push(op);
    }
    r.files_or_trees(op, &p.operands, false, &[]);
    r.operand_op = Some(op);
    r
}

/// `ls`, `du`, `tree`: operands (the working directory without one) are listed; `du`,
/// `tree` and `ls -R` open every directory beneath them.
fn listing(args: &[String], spec: &Spec, recursive_always: bool) -> Reading {
    let p = parse(args, spec);
    let mut r = reading_of(&p);
    if p.has(NAMES_FROM) {
        r.hidden_ops.push(Read);
    }
    let recursive = recursive_always || p.has(&["-R", "--recursive"]);
    let default = [".".to_owned()];
    let operands = if p.operands.is_empty() {
        &default[..]
    } else {
        &p.operands[..]
    };
    r.files_or_trees(Read, operands, recursive, &[]);
    r.operand_op = Some(Read);
    r
}

/// The first operand is a pattern or program unless an option gave one.
fn split_pattern(p: &Parsed, given: &[&str]) -> Vec<String> {
    if p.has(given) {
        p.operands.clone()
    } else {
        p.operands.get(1..).unwrap_or_default().to_vec()
    }
}

/// Globs on file names only: a glob with a `/` matches paths, not names, and a negated one
/// excludes rather than narrows.
fn name_filters(globs: Vec<String>) -> Vec<String> {
    if globs.iter().any(|g| g.contains('/') || g.is_empty()) {
        return Vec::new();
    }
    globs
}

#[cfg(test)]
mod tests {
    use super::*;
    use Operation::{FsDelete as Delete, FsWrite as Write};

    fn argv(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    /// (operation, word, recursive) of every file, sorted.
    fn files(line: &str) -> (Vec<(Operation, String, bool)>, bool) {
        let r = classify(&argv(line));
        let mut out: Vec<(Operation, String, bool)> = r
            .files
            .iter()
            .map(|f| (f.op, f.word.clone(), f.recursive))
            .collect();
        out.sort_by(|a, b| (a.0.as_str(), &a.1, a.2).cmp(&(b.0.as_str(), &b.1, b.2)));
        (out, r.understood)
    }

    fn f(op: Operation, w: &str) -> (Operation, String, bool) {
        (op, w.to_owned(), false)
    }

    fn t(op: Operation, w: &str) -> (Operation, String, bool) {
        (op, w.to_owned(), true)
    }

    #[test]
    fn readers() {
        type Case<'a> = (&'a str, &'a [(Operation, &'a str, bool)], bool);
        let cases: &[Case] = &[
            ("cat a b", &[(Read, "a", false), (Read, "b", false)], true),
            ("cat -n -- -x", &[(Read, "-x", false)], true),
            ("cat -nA a", &[(Read, "a", false)], true),
            ("cat --weird a", &[(Read, "a", false)], false),
            ("head -n 5 a", &[(Read, "a", false)], true),
            ("head -n5 a", &[(Read, "a", false)], true),
            ("head -20 a", &[(Read, "a", false)], true),
            ("tail -f -n 100 log", &[(Read, "log", false)], true),
            (
                "wc -l a --files0-from=list",
                &[(Read, "a", false), (Read, "list", false)],
                true,
            ),
            (
                "sort -o out in",
                &[(Read, "in", false), (Write, "out", false)],
                true,
            ),
            ("sort -k 2 -t , in", &[(Read, "in", false)], true),
            ("base64 -w 0 key", &[(Read, "key", false)], true),
            ("strings -n 8 bin", &[(Read, "bin", false)], true),
            ("od -An -tx1 bin", &[(Read, "bin", false)], true),
            ("less +G log", &[(Read, "log", false)], true),
            ("source ./env.sh arg", &[(Read, "./env.sh", false)], true),
            (". ./env.sh", &[(Read, "./env.sh", false)], true),
            ("stat -c %s a", &[(Read, "a", false)], true),
            ("file -b a", &[(Read, "a", false)], true),
        ];
        for (line, want, understood) in cases {
            let mut want: Vec<_> = want
                .iter()
                .map(|(o, w, r)| (*o, (*w).to_owned(), *r))
                .collect();
            want.sort_by(|a, b| (a.0.as_str(), &a.1, a.2).cmp(&(b.0.as_str(), &b.1, b.2)));
            assert_eq!(files(line), (want, *understood), "{line}");
        }
    }

    #[test]
    fn searchers() {
        assert_eq!(files("grep -rn TODO src"), (vec![t(Read, "src")], true));
        assert_eq!(files("grep -rn TODO"), (vec![t(Read, ".")], true));
        assert_eq!(
            files("grep TODO a b"),
            (vec![f(Read, "a"), f(Read, "b")], true)
        );
        assert_eq!(files("grep -e TODO a"), (vec![f(Read, "a")], true));
        assert_eq!(
            files("grep -f pats a"),
            (vec![f(Read, "a"), f(Read, "pats")], true)
        );
        assert_eq!(files("grep -A 3 x a"), (vec![f(Read, "a")], true));
        assert_eq!(files("grep -C3 x a"), (vec![f(Read, "a")], true));
        assert_eq!(files("grep -d recurse x d"), (vec![t(Read, "d")], true));
        let r = classify(&argv("grep -r --include=*.rs x src"));
        assert_eq!(
            r.files.first().map(|f| f.filters.clone()),
            Some(vec!["*.rs".to_owned()])
        );
        assert_eq!(files("rg foo"), (vec![t(Read, ".")], true));
        assert_eq!(
            files("rg -n foo src lib"),
            (vec![t(Read, "lib"), t(Read, "src")], true)
        );
        assert_eq!(files("rg --files src"), (vec![t(Read, "src")], true));
        // `-r` is ripgrep's replacement, not recursion; its value is no file.
        assert_eq!(files("rg -r x foo a"), (vec![t(Read, "a")], true));
        assert!(!files("rg --pre cat foo a").1);
        let r = classify(&argv("rg -g *.rs -t rust foo"));
        assert_eq!(
            r.files.first().map(|f| f.filters.clone()),
            Some(vec!["*.rs".to_owned()])
        );
        let r = classify(&argv("rg -t rust foo"));
        assert_eq!(
            r.files.first().map(|f| f.filters.clone()),
            Some(vec!["*.rs".to_owned()])
        );
        let r = classify(&argv("rg -g src/*.rs foo"));
        assert_eq!(r.files.first().map(|f| f.filters.clone()), Some(vec![]));
        assert_eq!(files("ag foo src"), (vec![t(Read, "src")], true));
        assert_eq!(files("jq .a f.json"), (vec![f(Read, "f.json")], true));
        assert_eq!(
            files("jq -r --arg k v .a f.json"),
            (vec![f(Read, "f.json")], true)
        );
        assert_eq!(
            files("jq -f prog.jq f.json"),
            (vec![f(Read, "f.json"), f(Read, "prog.jq")], true)
        );
        assert_eq!(
            files("jq -n --rawfile k secret ."),
            (vec![f(Read, "secret")], true)
        );
        assert_eq!(files("jq -n . --args a b").0, vec![]);
        assert_eq!(
            files("yq -i .a=1 f.yaml").0,
            vec![f(Read, "f.yaml"), f(Write, "f.yaml")]
        );
        assert_eq!(
            files("awk -F : {print} /etc/passwd").0,
            vec![f(Read, "/etc/passwd")]
        );
        assert_eq!(
            files("awk -f p.awk x=1 a").0,
            vec![f(Read, "a"), f(Read, "p.awk")]
        );
        assert_eq!(files("sed -n 1p a").0, vec![f(Read, "a")]);
        assert_eq!(
            files("sed -i s/a/b/ f").0,
            vec![f(Read, "f"), f(Write, "f")]
        );
        assert_eq!(
            files("sed -i.bak -e s/a/b/ f").0,
            vec![f(Read, "f"), f(Write, "f")]
        );
        assert_eq!(
            files("sed -ni s/a/b/p f").0,
            vec![f(Read, "f"), f(Write, "f")]
        );
        assert_eq!(
            files("diff -u a b"),
            (vec![f(Read, "a"), f(Read, "b")], true)
        );
        assert_eq!(
            files("diff -r a b"),
            (vec![t(Read, "a"), t(Read, "b")], true)
        );
    }

    #[test]
    fn find_reads_beneath_and_its_actions_are_not_read_only() {
        // find also opens its working directory (to return to it).
        let cwd = f(Read, ".");
        assert_eq!(
            files("find src -name *.rs"),
            (vec![cwd.clone(), t(Read, "src")], true)
        );
        assert_eq!(files("find"), (vec![cwd.clone(), t(Read, ".")], true));
        assert_eq!(
            files("find -L . -type f -maxdepth 2"),
            (vec![cwd.clone(), t(Read, ".")], true)
        );
        let filters = |line: &str| -> Vec<Vec<String>> {
            classify(&argv(line))
                .files
                .iter()
                .filter(|f| f.recursive)
                .map(|f| f.filters.clone())
                .collect()
        };
        assert_eq!(
            filters("find src -name *.rs"),
            vec![vec!["*.rs".to_owned()]]
        );
        assert_eq!(
            filters("find src -name *.rs -o -name *.key"),
            vec![Vec::<String>::new()]
        );
        assert_eq!(
            files("find . -delete"),
            (vec![t(Delete, "."), cwd.clone(), t(Read, ".")], false)
        );
        let (fs, understood) = files("find . -exec rm {} ;");
        assert!(!understood);
        assert!(fs.contains(&t(Delete, ".")) && fs.contains(&t(Write, ".")));
        assert_eq!(
            files("find . -fprint out").0,
            vec![cwd, t(Read, "."), f(Write, "out")]
        );
        assert!(!files("find . -ok rm {} ;").1);
    }

    #[test]
    fn writers_and_deleters() {
        assert_eq!(
            files("tee -a a b"),
            (vec![f(Write, "a"), f(Write, "b")], true)
        );
        assert_eq!(files("cp a b"), (vec![f(Read, "a"), f(Write, "b")], true));
        assert_eq!(
            files("cp -r a b"),
            (vec![t(Read, "a"), t(Write, "b")], true)
        );
        assert_eq!(
            files("cp -t dir a"),
            (vec![f(Read, "a"), t(Write, "dir")], true)
        );
        assert_eq!(
            files("mv a b"),
            (vec![f(Delete, "a"), f(Read, "a"), t(Write, "b")], true)
        );
        assert_eq!(
            files("install -m 644 a /usr/b"),
            (vec![f(Read, "a"), f(Write, "/usr/b")], true)
        );
        assert_eq!(
            files("ln -s target link"),
            (vec![f(Read, "target"), f(Write, "link")], true)
        );
        assert_eq!(
            files("touch -r ref a"),
            (vec![f(Read, "ref"), f(Write, "a")], true)
        );
        assert_eq!(
            files("mkdir -p -m 700 a/b"),
            (vec![f(Write, "a"), f(Write, "a/b")], true)
        );
        assert_eq!(files("mkdir x/y"), (vec![f(Write, "x/y")], true));
        assert_eq!(files("truncate -s 0 a"), (vec![f(Write, "a")], true));
        assert_eq!(
            files("dd if=a of=b bs=1M"),
            (vec![f(Read, "a"), f(Write, "b")], true)
        );
        assert!(!files("dd if=a of=b weird=1").1);
        assert_eq!(files("xxd a b"), (vec![f(Read, "a"), f(Write, "b")], true));
        assert_eq!(files("xxd -c 16 a"), (vec![f(Read, "a")], true));
        assert_eq!(
            files("rm -rf a b"),
            (vec![t(Delete, "a"), t(Delete, "b")], true)
        );
        assert_eq!(files("rm -f a"), (vec![f(Delete, "a")], true));
        assert_eq!(files("rmdir a"), (vec![f(Delete, "a")], true));
        assert_eq!(files("unlink a"), (vec![f(Delete, "a")], true));
        assert_eq!(files("shred -u -n 3 a"), (vec![f(Delete, "a")], true));
        assert_eq!(files("chmod 600 a"), (vec![f(Write, "a")], true));
        assert_eq!(files("chmod -x a"), (vec![f(Write, "a")], true));
        assert_eq!(files("chmod -R u+w d"), (vec![t(Write, "d")], true));
        assert_eq!(files("chown -R u:g d"), (vec![t(Write, "d")], true));
        assert_eq!(
            files("tar czf out.tgz src").0,
            vec![f(Read, "out.tgz"), t(Read, "src"), f(Write, "out.tgz")]
        );
        assert_eq!(
            files("tar -xzf a.tgz -C dst").0,
            vec![f(Read, "a.tgz"), t(Write, "dst")]
        );
        assert_eq!(
            files("tar xf a.tar").0,
            vec![f(Read, "a.tar"), t(Write, ".")]
        );
        assert_eq!(files("tar tf a.tar"), (vec![f(Read, "a.tar")], true));
        assert_eq!(
            files("zip -r a.zip src").0,
            vec![f(Read, "a.zip"), t(Read, "src"), f(Write, "a.zip")]
        );
        assert_eq!(
            files("unzip a.zip -d out").0,
            vec![f(Read, "a.zip"), t(Write, "out")]
        );
        assert_eq!(files("unzip -l a.zip").0, vec![f(Read, "a.zip")]);
    }

    #[test]
    fn network_tools_name_their_files() {
        assert_eq!(
            files("curl -d @body.json https://x").0,
            vec![f(Read, "body.json")]
        );
        assert_eq!(
            files("curl -F file=@a.txt;type=text/plain https://x").0,
            vec![f(Read, "a.txt")]
        );
        assert_eq!(files("curl -T up https://x").0, vec![f(Read, "up")]);
        assert_eq!(
            files("curl -sSL -o out https://x"),
            (vec![f(Write, "out")], true)
        );
        assert_eq!(
            files("curl --data-binary=@k https://x").0,
            vec![f(Read, "k")]
        );
        assert_eq!(files("curl -d a=b https://x").0, vec![]);
        assert_eq!(files("wget -O out https://x").0, vec![f(Write, "out")]);
        assert_eq!(files("wget https://x").0, vec![t(Write, ".")]);
        assert_eq!(
            files("scp -i key a host:b").0,
            vec![f(Read, "a"), f(Read, "key")]
        );
        assert_eq!(files("scp host:b local").0, vec![t(Write, "local")]);
        assert_eq!(files("rsync -av src/ host:dst").0, vec![t(Read, "src/")]);
        assert_eq!(
            files("rsync -a --delete a/ b/").0,
            vec![t(Delete, "b/"), t(Read, "a/"), t(Write, "b/")]
        );
        assert_eq!(
            files("openssl rsa -in k.pem -out k2.pem").0,
            vec![f(Read, "k.pem"), f(Write, "k2.pem")]
        );
        assert_eq!(
            files("openssl enc -pass file:pw -in a").0,
            vec![f(Read, "a"), f(Read, "pw")]
        );
    }

    #[test]
    fn flags_never_become_paths_and_unknown_flags_are_not_understood() {
        // `--` ends options.
        assert_eq!(files("rm -- -rf"), (vec![f(Delete, "-rf")], true));
        // Options after operands are options (GNU).
        assert_eq!(files("ls src -la"), (vec![f(Read, "src")], true));
        assert_eq!(files("ls"), (vec![f(Read, ".")], true));
        assert_eq!(files("ls -R src"), (vec![t(Read, "src")], true));
        assert_eq!(files("du -sh"), (vec![t(Read, ".")], true));
        assert_eq!(files("ls -I target"), (vec![f(Read, ".")], true));
        assert_eq!(files("ls --sort=size"), (vec![f(Read, ".")], true));
        // An unknown option: not understood, and its value is still looked at.
        let r = classify(&argv("cat --frobnicate=/etc/x a"));
        assert!(!r.understood);
        assert!(r.loose.contains(&"/etc/x".to_owned()));
        let r = classify(&argv("cat -Q /etc/x"));
        assert!(!r.understood);
        assert_eq!(r.files.len(), 1);
        // A short option's value is attached or the next word.
        assert_eq!(
            files("sort -o/tmp/o a").0,
            vec![f(Read, "a"), f(Write, "/tmp/o")]
        );
    }

    #[test]
    fn commands_without_files_and_cd() {
        assert_eq!(files("echo ~/.ssh/id_rsa"), (vec![], true));
        assert_eq!(files("pwd"), (vec![], true));
        assert_eq!(files("which -a git"), (vec![], true));
        assert_eq!(
            classify(&argv("cd src")).chdir,
            Some(Chdir::To("src".to_owned()))
        );
        assert_eq!(classify(&argv("cd")).chdir, Some(Chdir::Home));
        assert_eq!(files("cd src"), (vec![f(Read, "src")], true));
        assert_eq!(files("cd"), (vec![], true));
        assert_eq!(
            classify(&argv("wc --files0-from=list")).hidden_ops,
            vec![Read]
        );
        assert_eq!(
            classify(&argv("tar cf a.tar -T list")).hidden_ops,
            vec![Read]
        );
        assert_eq!(classify(&argv("cd -")).chdir, Some(Chdir::Unknown));
        assert_eq!(classify(&argv("pushd x")).chdir, Some(Chdir::Unknown));
        let r = classify(&argv("mytool --in=./a b"));
        assert!(!r.known && !r.understood);
        assert_eq!(r.loose, argv("mytool --in=./a b"));
        assert_eq!(
            git_clean_paths(&argv("git clean -fdx")),
            Some(vec![".".to_owned()])
        );
        assert_eq!(git_clean_paths(&argv("git -C x status")), None);
    }

    mod props {
        use super::super::*;
        use Operation::{FsDelete as Delete, FsWrite as Write};
        use proptest::prelude::*;

        /// A command with no-value short flags, value-taking short options (whose values are
        /// no files) and what its operands are.
        const COMMANDS: &[(&str, &str, &str, Operation)] = &[
            ("cat", "AbeEnstTuv", "", Read),
            ("head", "qvz", "nc", Read),
            ("wc", "clmwL", "", Read),
            ("sort", "bdfgiMhnRrVcsuz", "kSt", Read),
            ("base64", "di", "w", Read),
            ("tee", "aip", "", Write),
            ("touch", "acfhm", "dt", Write),
            ("rm", "fiIdv", "", Delete),
            ("shred", "fuvxz", "ns", Delete),
            ("truncate", "co", "s", Write),
        ];

        fn name() -> impl Strategy<Value = String> {
            "[a-z][a-z0-9_.]{0,7}"
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

            /// Flags (alone or combined), option values (attached or in the next word) and
            /// operands in any order: exactly the operands are files, with the command's
            /// operation; after `--` even words that look like flags are files.
            #[test]
            fn operands_are_files_and_nothing_else(
                which in 0..COMMANDS.len(),
                flag_picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
                value_picks in proptest::collection::vec((any::<prop::sample::Index>(), name(), any::<bool>()), 0..3),
                operands in proptest::collection::vec(name(), 0..5),
                dashed in proptest::collection::vec("-[a-z]{1,4}", 0..3),
                combine in any::<bool>(),
                order in any::<prop::sample::Index>(),
            ) {
                let (cmd, short, short_val, op) = COMMANDS[which];
                let flags: Vec<char> = flag_picks.iter().map(|i| short.as_bytes()[i.index(short.len())] as char).collect();
                let mut opts: Vec<Vec<String>> = Vec::new();
                if combine && !flags.is_empty() {
                    opts.push(vec![format!("-{}", flags.iter().collect::<String>())]);
                } else {
                    opts.extend(flags.iter().map(|c| vec![format!("-{c}")]));
                }
                if !short_val.is_empty() {
                    for (i, value, attached) in &value_picks {
                        let c = short_val.as_bytes()[i.index(short_val.len())] as char;
                        if *attached {
                            opts.push(vec![format!("-{c}{value}")]);
                        } else {
                            opts.push(vec![format!("-{c}"), value.clone()]);
                        }
                    }
                }
                // Options go before, between or after the operands (GNU permutes).
                let at = order.index(operands.len() + 1);
                let mut argv = vec![cmd.to_owned()];
                argv.extend(operands[..at].iter().cloned());
                for o in &opts {
                    argv.extend(o.iter().cloned());
                }
                argv.extend(operands[at..].iter().cloned());
                if !dashed.is_empty() {
                    argv.push("--".to_owned());
                    argv.extend(dashed.iter().cloned());
                }
                let r = classify(&argv);
                prop_assert!(r.understood, "{argv:?}");
                let got: Vec<(Operation, String)> = r.files.iter().map(|f| (f.op, f.word.clone())).collect();
                let want: Vec<(Operation, String)> = operands.iter().chain(dashed.iter()).map(|w| (op, w.clone())).collect();
                prop_assert_eq!(got, want, "{:?}", argv);
            }

            /// An option the table does not know is never understood, and a file after it
            /// is still a file.
            #[test]
            fn unknown_options_are_not_understood(
                which in 0..COMMANDS.len(),
                unknown in "--zz[a-z]{1,8}",
                file in name(),
            ) {
                let (cmd, _, _, op) = COMMANDS[which];
                let r = classify(&[cmd.to_owned(), unknown, file.clone()]);
                prop_assert!(!r.understood);
                prop_assert!(r.files.iter().any(|f| f.op == op && f.word == file));
            }
        }
    }
}
