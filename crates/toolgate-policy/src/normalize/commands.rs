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

use Operation::{FsDelete as Delete, FsRead as Read, FsWrite as Write};

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

/// Long option lists are written once per command; `help` and `version` everywhere.
macro_rules! long {
    ($($x:expr),* $(,)?) => { &[$($x,)* "help", "version"] };
}

/// Reads one argv (the looked-through command: `sudo`, `env`, `nice` … removed).
pub(crate) fn classify(argv: &[String]) -> Reading {
    let Some(first) = argv.first() else {
        return Reading::default();
    };
    let name = first.rsplit('/').next().unwrap_or(first);
    let args = argv.get(1..).unwrap_or_default();
    match name {
        "cat" => simple(
            args,
            Read,
            &Spec {
                short: "AbeEnstTuv",
                long: long![
                    "show-all",
                    "number-nonblank",
                    "show-ends",
                    "number",
                    "squeeze-blank",
                    "show-tabs",
                    "show-nonprinting"
                ],
                ..Spec::default()
            },
        ),
        "head" | "tail" => simple(
            args,
            Read,
            &Spec {
                short: if name == "tail" { "qvzfF" } else { "qvz" },
                short_val: if name == "tail" { "ncs" } else { "nc" },
                long: long![
                    "quiet",
                    "silent",
                    "verbose",
                    "zero-terminated",
                    "follow",
                    "retry"
                ],
                long_val: &[
                    "lines",
                    "bytes",
                    "sleep-interval",
                    "pid",
                    "max-unchanged-stats",
                ],
                numeric: true,
                ..Spec::default()
            },
        ),
        "less" | "more" => {
            // `+cmd` is a command for the pager, not a file.
            let words: Vec<String> = args
                .iter()
                .filter(|w| !w.starts_with('+'))
                .cloned()
                .collect();
            simple(
                &words,
                Read,
                &Spec {
                    short: "FRSXNimMgGiIqQesrUuwWcdfpl",
                    short_val: "xyzhbjP",
                    long: long![
                        "quit-if-one-screen",
                        "RAW-CONTROL-CHARS",
                        "chop-long-lines",
                        "no-init",
                        "LINE-NUMBERS",
                        "ignore-case",
                        "squeeze-blank-lines"
                    ],
                    numeric: true,
                    ..Spec::default()
                },
            )
        }
        "base64" | "base32" | "basenc" => simple(
            args,
            Read,
            &Spec {
                short: "di",
                short_val: "w",
                long: long![
                    "decode",
                    "ignore-garbage",
                    "base64",
                    "base64url",
                    "base32",
                    "base32hex",
                    "base16",
                    "z85"
                ],
                long_val: &["wrap"],
                ..Spec::default()
            },
        ),
        "od" => simple(
            args,
            Read,
            &Spec {
                short: "bcdfilosxv",
                short_val: "AjNSwt",
                long: long!["output-duplicates", "traditional"],
                long_val: &[
                    "address-radix",
                    "endian",
                    "skip-bytes",
                    "read-bytes",
                    "strings",
                    "format",
                    "width",
                ],
                ..Spec::default()
            },
        ),
        "strings" => simple(
            args,
            Read,
            &Spec {
                short: "adfw",
                short_val: "ntesT",
                long: long!["all", "data", "print-file-name", "include-all-whitespace"],
                long_val: &["bytes", "radix", "encoding", "output-separator", "target"],
                numeric: true,
                ..Spec::default()
            },
        ),
        "wc" => simple(
            args,
            Read,
            &Spec {
                short: "clmwL",
                long: long!["bytes", "chars", "lines", "words", "max-line-length"],
                long_val: &["total"],
                paths: &[("--files0-from", Read)],
                ..Spec::default()
            },
        ),
        "sort" => simple(
            args,
            Read,
            &Spec {
                short: "bdfgiMhnRrVcCsuzm",
                short_val: "kSt",
                long: long![
                    "ignore-leading-blanks",
                    "dictionary-order",
                    "ignore-case",
                    "general-numeric-sort",
                    "ignore-nonprinting",
                    "month-sort",
                    "human-numeric-sort",
                    "numeric-sort",
                    "random-sort",
                    "reverse",
                    "version-sort",
                    "check",
                    "merge",
                    "stable",
                    "unique",
                    "zero-terminated",
                    "debug"
                ],
                long_val: &[
                    "key",
                    "buffer-size",
                    "field-separator",
                    "parallel",
                    "sort",
                    "batch-size",
                ],
                paths: &[
                    ("-o", Write),
                    ("--output", Write),
                    ("--files0-from", Read),
                    ("--random-source", Read),
                ],
                ..Spec::default()
            },
        ),
        "diff" => diff(args),
        "grep" | "egrep" | "fgrep" => grep(args),
        "rg" => rg(args),
        "ag" => ag(args),
        "jq" => jq(args),
        "yq" => yq(args),
        "awk" | "gawk" | "mawk" | "nawk" => awk(args),
        "sed" => sed(args),
        "source" | "." => {
            let mut r = Reading::known();
            if let Some(script) = args.first() {
                r.file(Read, script);
            }
            r.operand_op = Some(Read);
            r
        }
        "curl" => curl(args),
        "wget" => wget(args),
        "scp" => copy_remote(
            args,
            "346BCpqrTvAO",
            "cFiJlPoSX",
            &[("-i", Read), ("-F", Read)],
        ),
        "rsync" => rsync(args),
        "tar" => tar(args),
        "zip" => zip(args),
        "unzip" => unzip(args),
        "openssl" => openssl(args),
        "xxd" => xxd(args),
        "tee" => simple(
            args,
            Write,
            &Spec {
                short: "aip",
                long: long!["append", "ignore-interrupts", "output-error"],
                ..Spec::default()
            },
        ),
        "cp" | "mv" | "install" | "ln" => copy(name, args),
        "touch" => simple(
            args,
            Write,
            &Spec {
                short: "acfhm",
                short_val: "dt",
                long: long!["no-create", "no-dereference"],
                long_val: &["date", "time"],
                paths: &[("-r", Read), ("--reference", Read)],
                ..Spec::default()
            },
        ),
        "mkdir" => {
            let p = parse(
                args,
                &Spec {
                    short: "pvZ",
                    short_val: "m",
                    long: long!["parents", "verbose", "context"],
                    long_val: &["mode"],
                    ..Spec::default()
                },
            );
            let mut r = reading_of(&p);
            let parents = p.has(&["-p", "--parents"]);
            for w in &p.operands {
                if parents {
                    // Every missing directory on the way is made.
                    for (i, _) in w.match_indices('/').filter(|(i, _)| *i > 0) {
                        let prefix = w.get(..i).unwrap_or_default();
                        if !prefix.ends_with('/') && !prefix.ends_with("/.") && prefix != "." {
                            r.file(Write, prefix);
                        }
                    }
                }
                r.file(Write, w);
            }
            r.operand_op = Some(Write);
            r
        }
        "truncate" => simple(
            args,
            Write,
            &Spec {
                short: "co",
                short_val: "s",
                long: long!["no-create", "io-blocks"],
                long_val: &["size"],
                paths: &[("-r", Read), ("--reference", Read)],
                ..Spec::default()
            },
        ),
        "dd" => dd(args),
        "rm" => {
            let p = parse(
                args,
                &Spec {
                    short: "fiIrRdv",
                    long: long![
                        "force",
                        "interactive",
                        "one-file-system",
                        "no-preserve-root",
                        "preserve-root",
                        "recursive",
                        "dir",
                        "verbose"
                    ],
                    ..Spec::default()
                },
            );
            let mut r = reading_of(&p);
            let recursive = p.has(&["-r", "-R", "--recursive"]);
            r.files_or_trees(Delete, &p.operands, recursive, &[]);
            r.operand_op = Some(Delete);
            r
        }
        "rmdir" | "unlink" => simple(
            args,
            Delete,
            &Spec {
                short: "pv",
                long: long!["parents", "ignore-fail-on-non-empty", "verbose"],
                ..Spec::default()
            },
        ),
        "shred" => simple(
            args,
            Delete,
            &Spec {
                short: "fuvxz",
                short_val: "ns",
                long: long!["force", "remove", "verbose", "exact", "zero"],
                long_val: &["iterations", "size"],
                paths: &[("--random-source", Read)],
                ..Spec::default()
            },
        ),
        "chmod" | "chown" | "chgrp" => chmod(name, args),
        "find" => find(args),
        "ls" | "dir" | "vdir" => listing(
            args,
            &Spec {
                short: "aAbBcCdDfFgGhHiklLmnNopqQrRsStuUvxXZ1",
                short_val: "IwT",
                long: long![
                    "all",
                    "almost-all",
                    "author",
                    "escape",
                    "ignore-backups",
                    "color",
                    "directory",
                    "dired",
                    "classify",
                    "file-type",
                    "full-time",
                    "group-directories-first",
                    "no-group",
                    "human-readable",
                    "si",
                    "dereference-command-line",
                    "dereference-command-line-symlink-to-dir",
                    "hyperlink",
                    "inode",
                    "kibibytes",
                    "dereference",
                    "numeric-uid-gid",
                    "literal",
                    "hide-control-chars",
                    "show-control-chars",
                    "quote-name",
                    "reverse",
                    "recursive",
                    "size",
                    "context",
                    "zero"
                ],
                long_val: &[
                    "block-size",
                    "format",
                    "hide",
                    "indicator-style",
                    "ignore",
                    "quoting-style",
                    "sort",
                    "time",
                    "time-style",
                    "tabsize",
                    "width",
                ],
                ..Spec::default()
            },
            false,
        ),
        "du" => listing(
            args,
            &Spec {
                short: "0abcDhHklLmPsSx",
                short_val: "dBt",
                long: long![
                    "null",
                    "all",
                    "apparent-size",
                    "bytes",
                    "total",
                    "dereference-args",
                    "human-readable",
                    "inodes",
                    "dereference",
                    "count-links",
                    "no-dereference",
                    "separate-dirs",
                    "si",
                    "summarize",
                    "one-file-system",
                    "time"
                ],
                long_val: &[
                    "max-depth",
                    "block-size",
                    "threshold",
                    "exclude",
                    "time-style",
                ],
                paths: &[
                    ("-X", Read),
                    ("--exclude-from", Read),
                    ("--files0-from", Read),
                ],
                ..Spec::default()
            },
            true,
        ),
        "tree" => listing(
            args,
            &Spec {
                short: "adlfxiqNQpugshDFrtvUcCnJA",
                short_val: "LPIHT",
                long: long![
                    "noreport",
                    "dirsfirst",
                    "filesfirst",
                    "gitignore",
                    "inodes",
                    "device",
                    "prune",
                    "matchdirs",
                    "ignore-case",
                    "du",
                    "si"
                ],
                long_val: &["sort", "charset", "filelimit", "timefmt"],
                paths: &[("-o", Write)],
                ..Spec::default()
            },
            true,
        ),
        "stat" => simple(
            args,
            Read,
            &Spec {
                short: "LftZ",
                short_val: "c",
                long: long!["dereference", "file-system", "terse"],
                long_val: &["format", "printf", "cached"],
                ..Spec::default()
            },
        ),
        "file" => {
            let p = parse(
                args,
                &Spec {
                    short: "bhiLNnprsz0kESl",
                    short_val: "eFP",
                    long: long![
                        "brief",
                        "mime",
                        "mime-type",
                        "mime-encoding",
                        "dereference",
                        "no-dereference",
                        "keep-going",
                        "raw",
                        "special-files",
                        "uncompress",
                        "uncompress-noreport",
                        "no-pad",
                        "print0",
                        "preserve-date",
                        "extension",
                        "apple",
                        "no-sandbox"
                    ],
                    long_val: &["separator", "exclude", "exclude-quiet", "parameter"],
                    paths: &[
                        ("-m", Read),
                        ("--magic-file", Read),
                        ("-f", Read),
                        ("--files-from", Read),
                    ],
                    ..Spec::default()
                },
            );
            let mut r = reading_of(&p);
            if p.has(&["-f", "--files-from"]) {
                // The names come from a file: which files is not known here.
                r.hidden_ops.push(Read);
            }
            r.files_or_trees(Read, &p.operands, false, &[]);
            r.operand_op = Some(Read);
            r
        }
        "echo" | "printf" | "pwd" | "true" | "false" | "which" | "type" | "date" | "whoami"
        | "uname" | "hostname" | "basename" | "dirname" | "sleep" | "seq" | "yes" | "id" => {
            nothing(name, args)
        }
        "cd" => {
            let mut r = Reading::known();
            let ops: Vec<&String> = args
                .iter()
                .skip_while(|w| matches!(w.as_str(), "-L" | "-P" | "-e" | "-@"))
                .collect();
            r.chdir = Some(match ops.as_slice() {
                [] => Chdir::Home,
                [dir] if dir.as_str() == "--" => Chdir::Home,
                [dd, dir] if dd.as_str() == "--" => Chdir::To((*dir).clone()),
                [dir] if dir.as_str() != "-" => Chdir::To((*dir).clone()),
                _ => {
                    r.understood = false;
                    Chdir::Unknown
                }
            });
            // Going somewhere is looking at it: `cd ~/.ssh` meets the rules of `~/.ssh`,
            // and an agent's shell may stay there for its next command. (The home
            // directory of a bare `cd`: the caller reads it as `~`.)
            if let Some(Chdir::To(dir)) = &r.chdir {
                let dir = dir.clone();
                r.file(Read, &dir);
            }
            r
        }
        "pushd" | "popd" => {
            let mut r = unknown(argv);
            if name == "pushd" {
                for dir in args.iter().filter(|w| !w.starts_with(['-', '+'])) {
                    r.file(Read, dir);
                }
            }
            r.chdir = Some(Chdir::Unknown);
            r
        }
        _ => unknown(argv),
    }
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

fn diff(args: &[String]) -> Reading {
    let p = parse(
        args,
        &Spec {
            short: "abBdeEiInNpqrsStTuwyZ",
            short_val: "CUxFIWDLS",
            long: long![
                "brief",
                "recursive",
                "new-file",
                "text",
                "ignore-case",
                "ignore-all-space",
                "ignore-space-change",
                "ignore-blank-lines",
                "report-identical-files",
                "side-by-side",
                "expand-tabs",
                "initial-tab",
                "suppress-common-lines",
                "color",
                "no-dereference",
                "strip-trailing-cr",
                "minimal",
                "speed-large-files",
                "unidirectional-new-file",
                "ignore-tab-expansion",
                "ignore-trailing-space",
                "suppress-blank-empty",
                "show-c-function",
                "normal",
                "ed",
                "rcs",
                "paginate",
                "unified",
                "context",
                "ignore-file-name-case",
                "no-ignore-file-name-case"
            ],
            long_val: &[
                "exclude",
                "label",
                "ignore-matching-lines",
                "show-function-line",
                "width",
                "tabsize",
                "starting-file",
                "palette",
            ],
            paths: &[
                ("-X", Read),
                ("--exclude-from", Read),
                ("--from-file", Read),
                ("--to-file", Read),
            ],
            ..Spec::default()
        },
    );
    let mut r = reading_of(&p);
    let recursive = p.has(&["-r", "--recursive"]);
    r.files_or_trees(Read, &p.operands, recursive, &[]);
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

fn grep(args: &[String]) -> Reading {
    let p = parse(
        args,
        &Spec {
            short: "EFGPiyvwxcLloqsbHhnTZzUraRIV",
            short_val: "ABCmdDe",
            long: long![
                "extended-regexp",
                "fixed-strings",
                "basic-regexp",
                "perl-regexp",
                "ignore-case",
                "no-ignore-case",
                "invert-match",
                "word-regexp",
                "line-regexp",
                "count",
                "color",
                "colour",
                "files-without-match",
                "files-with-matches",
                "only-matching",
                "quiet",
                "silent",
                "no-messages",
                "byte-offset",
                "with-filename",
                "no-filename",
                "line-number",
                "initial-tab",
                "null",
                "null-data",
                "text",
                "recursive",
                "dereference-recursive",
                "line-buffered",
                "binary"
            ],
            long_val: &[
                "after-context",
                "before-context",
                "context",
                "max-count",
                "label",
                "binary-files",
                "devices",
                "directories",
                "include",
                "exclude",
                "exclude-dir",
                "regexp",
            ],
            paths: &[("-f", Read), ("--file", Read), ("--exclude-from", Read)],
            numeric: true,
        },
    );
    let mut r = reading_of(&p);
    let recursive = p.has(&["-r", "-R", "--recursive", "--dereference-recursive"])
        || p.values(&["-d", "--directories"])
            .iter()
            .any(|v| v == "recurse");
    let files = split_pattern(&p, &["-e", "--regexp", "-f", "--file"]);
    let filters = name_filters(p.values(&["--include"]));
    if recursive && files.is_empty() {
        r.tree(Read, ".", &filters);
    }
    r.files_or_trees(Read, &files, recursive, &filters);
    r.operand_op = Some(Read);
    r
}

/// ripgrep's `--type` names as file-name globs (those agents use; an unknown type narrows
/// nothing).
fn rg_type_globs(types: &[String]) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for t in types {
        let globs: &[&str] = match t.as_str() {
            "rust" => &["*.rs"],
            "py" => &["*.py", "*.pyi"],
            "js" => &["*.js", "*.jsx", "*.mjs", "*.cjs", "*.vue"],
            "ts" => &["*.ts", "*.tsx", "*.cts", "*.mts"],
            "go" => &["*.go"],
            "c" => &["*.c", "*.h", "*.H", "*.cats"],
            "cpp" => &[
                "*.C", "*.cc", "*.cpp", "*.cxx", "*.c++", "*.h", "*.hh", "*.hpp", "*.hxx", "*.inl",
            ],
            "java" => &["*.java", "*.jsp", "*.jspx", "*.properties"],
            "md" | "markdown" => &[
                "*.markdown",
                "*.md",
                "*.mdown",
                "*.mdwn",
                "*.mkd",
                "*.mkdn",
                "*.mdx",
            ],
            "json" => &["*.json", "composer.lock", "*.sarif"],
            "yaml" => &["*.yaml", "*.yml"],
            "toml" => &["*.toml", "Cargo.lock"],
            "sh" => &["*.sh", "*.bash", "*.zsh", ".bashrc", ".zshrc", ".profile"],
            "html" => &["*.htm", "*.html", "*.ejs"],
            "css" => &["*.css", "*.scss"],
            _ => return None,
        };
        out.extend(globs.iter().map(|g| (*g).to_owned()));
    }
    Some(out)
}

fn rg(args: &[String]) -> Reading {
    let p = parse(
        args,
        &Spec {
            short: "aciFHhIlLnNopqsSuUvwxz0.bPUV",
            short_val: "ABCdeEgjmMrtT",
            long: long![
                "hidden",
                "no-ignore",
                "no-ignore-vcs",
                "no-ignore-parent",
                "no-ignore-dot",
                "no-ignore-global",
                "files",
                "files-with-matches",
                "files-without-match",
                "count",
                "count-matches",
                "ignore-case",
                "smart-case",
                "case-sensitive",
                "fixed-strings",
                "word-regexp",
                "line-regexp",
                "invert-match",
                "line-number",
                "no-line-number",
                "with-filename",
                "no-filename",
                "heading",
                "no-heading",
                "column",
                "no-column",
                "vimgrep",
                "json",
                "only-matching",
                "quiet",
                "follow",
                "multiline",
                "multiline-dotall",
                "pcre2",
                "no-messages",
                "trim",
                "text",
                "sort-files",
                "stats",
                "null",
                "no-config",
                "byte-offset",
                "passthru",
                "unrestricted",
                "no-require-git",
                "one-file-system",
                "crlf",
                "debug",
                "list-file-types",
                "type-list",
                "binary",
                "no-binary",
                "pretty",
                "block-buffered",
                "line-buffered",
                "max-columns-preview",
                "include-zero",
                "glob-case-insensitive"
            ],
            long_val: &[
                "glob",
                "iglob",
                "type",
                "type-not",
                "type-add",
                "type-clear",
                "max-count",
                "max-depth",
                "max-columns",
                "after-context",
                "before-context",
                "context",
                "regexp",
                "replace",
                "sort",
                "sortr",
                "color",
                "colors",
                "encoding",
                "threads",
                "max-filesize",
                "engine",
                "path-separator",
                "context-separator",
                "field-match-separator",
                "field-context-separator",
                "dfa-size-limit",
                "regex-size-limit",
            ],
            paths: &[("-f", Read), ("--file", Read), ("--ignore-file", Read)],
            numeric: false,
        },
    );
    let mut r = reading_of(&p);
    let no_pattern = p.has(&["--files", "--type-list", "--list-file-types"]);
    let files = if no_pattern {
        p.operands.clone()
    } else {
        split_pattern(&p, &["-e", "--regexp", "-f", "--file"])
    };
    let globs = p.values(&["-g", "--glob"]);
    let positive: Vec<String> = globs
        .iter()
        .filter(|g| !g.starts_with('!'))
        .cloned()
        .collect();
    let mut filters = name_filters(positive.clone());
    if positive.len() != filters.len() {
        filters.clear();
    }
    let types = p.values(&["-t", "--type"]);
    if !types.is_empty() && positive.is_empty() {
        filters = rg_type_globs(&types).unwrap_or_default();
    } else if !types.is_empty() {
        // Both narrow: a file must pass both, so either alone is a sound filter.
    }
    if p.has(&["--iglob", "--glob-case-insensitive"]) {
        filters.clear();
    }
    if files.is_empty() {
        r.tree(Read, ".", &filters);
    }
    r.files_or_trees(Read, &files, true, &filters);
    r.operand_op = Some(Read);
    r
}

fn ag(args: &[String]) -> Reading {
    let p = parse(
        args,
        &Spec {
            short: "ilLcvwQsSuUtaHfz0",
            short_val: "ACBmG",
            long: long![
                "ignore-case",
                "literal",
                "hidden",
                "files-with-matches",
                "files-without-matches",
                "count",
                "invert-match",
                "word-regexp",
                "case-sensitive",
                "smart-case",
                "unrestricted",
                "all-types",
                "all-text",
                "follow",
                "search-zip",
                "nocolor",
                "color",
                "nogroup",
                "group",
                "column",
                "numbers",
                "nonumbers",
                "vimgrep",
                "filename",
                "nofilename",
                "null",
                "stats",
                "skip-vcs-ignores",
                "print-long-lines"
            ],
            long_val: &[
                "after",
                "before",
                "context",
                "max-count",
                "depth",
                "ignore",
                "file-search-regex",
            ],
            paths: &[("-p", Read), ("--path-to-ignore", Read)],
            numeric: false,
        },
    );
    let mut r = reading_of(&p);
    let files = p.operands.get(1..).unwrap_or_default().to_vec();
    if files.is_empty() {
        r.tree(Read, ".", &[]);
    }
    r.files_or_trees(Read, &files, true, &[]);
    r.operand_op = Some(Read);
    r
}

fn jq(args: &[String]) -> Reading {
    let mut r = Reading::known();
    let mut operands: Vec<String> = Vec::new();
    let mut filter_given = false;
    let mut i = 0;
    let mut rest_are_args = false;
    while let Some(w) = args.get(i) {
        i += 1;
        if rest_are_args {
            continue;
        }
        match w.as_str() {
            "--" => {
                operands.extend(args.get(i..).unwrap_or_default().iter().cloned());
                break;
            }
            "--args" | "--jsonargs" => {
                // The remaining operands after the filter are values, not files.
                if filter_given || !operands.is_empty() {
                    rest_are_args = true;
                } else {
                    // The next operand is the filter, the rest are values.
                    if let Some(f) = args.get(i) {
                        operands.push(f.clone());
                        i += 1;
                    }
                    rest_are_args = true;
                }
            }
            "--arg" | "--argjson" => i += 2,
            "--slurpfile" | "--rawfile" => {
                if let Some(f) = args.get(i + 1) {
                    r.file(Read, f);
                }
                i += 2;
            }
            "-f" | "--from-file" => {
                if let Some(f) = args.get(i) {
                    r.file(Read, f);
                }
                filter_given = true;
                i += 1;
            }
            "--indent" => i += 1,
            "--tab"
            | "--seq"
            | "--stream"
            | "--stream-errors"
            | "--exit-status"
            | "--null-input"
            | "--compact-output"
            | "--raw-output"
            | "--raw-output0"
            | "--join-output"
            | "--ascii-output"
            | "--sort-keys"
            | "--color-output"
            | "--monochrome-output"
            | "--slurp"
            | "--raw-input"
            | "--unbuffered"
            | "--help"
            | "--version" => {}
            w if w.starts_with("--") => {
                r.understood = false;
            }
            w if w.len() > 1 && w.starts_with('-') => {
                let ok = w.chars().skip(1).all(|c| "cnrjasCMSeRhV0".contains(c));
                if !ok {
                    r.understood = false;
                }
            }
            _ => operands.push(w.clone()),
        }
    }
    let files = if filter_given {
        operands
    } else {
        operands.get(1..).unwrap_or_default().to_vec()
    };
    r.files_or_trees(Read, &files, false, &[]);
    r.operand_op = Some(Read);
    r
}

fn yq(args: &[String]) -> Reading {
    let words: Vec<String> = match args.first().map(String::as_str) {
        Some("eval" | "e" | "eval-all" | "ea") => args.get(1..).unwrap_or_default().to_vec(),
        _ => args.to_vec(),
    };
    let p = parse(
        &words,
        &Spec {
            short: "PrneCMN0iSj",
            short_val: "opI",
            long: long![
                "inplace",
                "prettyPrint",
                "null-input",
                "exit-status",
                "colors",
                "no-colors",
                "no-doc",
                "unwrapScalar"
            ],
            long_val: &["output-format", "input-format", "indent", "expression"],
            paths: &[("--from-file", Read)],
            ..Spec::default()
        },
    );
    let mut r = reading_of(&p);
    let files = split_pattern(&p, &["--from-file", "--expression"]);
    let op = if p.has(&["-i", "--inplace"]) {
        Write
    } else {
        Read
    };
    r.files_or_trees(Read, &files, false, &[]);
    if op == Write {
        r.files_or_trees(Write, &files, false, &[]);
    }
    r.operand_op = Some(op);
    r
}

fn awk(args: &[String]) -> Reading {
    let p = parse(
        args,
        &Spec {
            short: "bcCdhlLMnNOPrsStVy",
            short_val: "Fv",
            long: long![
                "characters-as-bytes",
                "traditional",
                "posix",
                "re-interval",
                "sandbox",
                "lint"
            ],
            long_val: &["field-separator", "assign"],
            paths: &[
                ("-f", Read),
                ("--file", Read),
                ("-i", Read),
                ("--include", Read),
                ("-E", Read),
                ("--exec", Read),
            ],
            ..Spec::default()
        },
    );
    let mut r = reading_of(&p);
    let files: Vec<String> = split_pattern(&p, &["-f", "--file", "-E", "--exec"])
        .into_iter()
        .filter(|w| !is_assignment(w))
        .collect();
    r.files_or_trees(Read, &files, false, &[]);
    r.operand_op = Some(Read);
    // The program itself may write files and run commands.
    r.understood = false;
    r
}

fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn sed(args: &[String]) -> Reading {
    // `-i[SUFFIX]` takes the rest of its cluster, never the next word.
    let mut in_place = false;
    let words: Vec<String> = args
        .iter()
        .map(|w| {
            if w.starts_with('-') && !w.starts_with("--") {
                let body = w.get(1..).unwrap_or_default();
                if let Some(pos) = body.find('i') {
                    let before = body.get(..pos).unwrap_or_default();
                    // Only when no value-taking flag (`-e`, `-f`, `-l`) comes before it.
                    if !before.contains(['e', 'f', 'l']) {
                        in_place = true;
                        return if before.is_empty() {
                            "-s".to_owned()
                        } else {
                            format!("-{before}")
                        };
                    }
                }
            } else if w == "--in-place" || w.starts_with("--in-place=") {
                in_place = true;
                return "--separate".to_owned();
            }
            w.clone()
        })
        .collect();
    let p = parse(
        &words,
        &Spec {
            short: "nrEsuz",
            short_val: "el",
            long: long![
                "quiet",
                "silent",
                "regexp-extended",
                "separate",
                "unbuffered",
                "null-data",
                "posix",
                "debug",
                "sandbox",
                "follow-symlinks"
            ],
            long_val: &["expression", "line-length"],
            paths: &[("-f", Read), ("--file", Read)],
            ..Spec::default()
        },
    );
    let mut r = reading_of(&p);
    let files = split_pattern(&p, &["-e", "--expression", "-f", "--file"]);
    r.files_or_trees(Read, &files, false, &[]);
    if in_place {
        r.files_or_trees(Write, &files, false, &[]);
    }
    r.operand_op = Some(if in_place { Write } else { Read });
    // A script may write (`w file`) and run (`e`) at run time.
    r.understood = false;
    r
}

/// `@file` (not `@-`) in a curl data option names a file it reads.
fn curl_at_file(value: &str) -> Option<&str> {
    let at = value.find('@')?;
    // `-d @f`, `--data-urlencode name@f`, `-F name=@f;type=x`, `-F name=<f`.
    let path = value.get(at + 1..)?;
    let path = path.split(';').next().unwrap_or(path);
    if path.is_empty() || path == "-" {
        return None;
    }
    Some(path)
}

fn curl(args: &[String]) -> Reading {
    let mut r = Reading::known();
    let mut i = 0;
    let value_read_at: &[&str] = &[
        "-d",
        "--data",
        "--data-ascii",
        "--data-binary",
        "--data-urlencode",
        "--json",
    ];
    let form: &[&str] = &["-F", "--form"];
    let read_file: &[&str] = &[
        "-T",
        "--upload-file",
        "-K",
        "--config",
        "--cacert",
        "--cert",
        "-E",
        "--key",
        "--netrc-file",
        "--capath",
        "--crlfile",
        "--proxy-cacert",
        "--proxy-cert",
        "--proxy-key",
    ];
    let write_file: &[&str] = &[
        "-o",
        "--output",
        "-c",
        "--cookie-jar",
        "-D",
        "--dump-header",
        "--trace",
        "--trace-ascii",
        "--stderr",
        "--libcurl",
        "--output-dir",
    ];
    let with_value: &[&str] = &[
        "-X",
        "--request",
        "-H",
        "--header",
        "-A",
        "--user-agent",
        "-u",
        "--user",
        "-e",
        "--referer",
        "-m",
        "--max-time",
        "--connect-timeout",
        "-w",
        "--write-out",
        "-x",
        "--proxy",
        "-r",
        "--range",
        "--retry",
        "--retry-delay",
        "--retry-max-time",
        "-U",
        "--proxy-user",
        "--resolve",
        "--connect-to",
        "--data-raw",
        "--url",
        "-Y",
        "-y",
        "--limit-rate",
        "--max-filesize",
        "--max-redirs",
        "--oauth2-bearer",
        "--interface",
        "-z",
        "--time-cond",
        "--compressed-ssh",
        "--tlsv1.2",
        "--ciphers",
        "--dns-servers",
        "-b",
        "--cookie",
        "--url-query",
        "--variable",
        "--aws-sigv4",
        "--request-target",
    ];
    let flags = "sSLfIiGkvqNO#ZJRnlBjgM0123456:";
    while let Some(w) = args.get(i) {
        i += 1;
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_owned())),
            _ => (w.as_str(), None),
        };
        let value = |i: &mut usize| -> Option<String> {
            inline.clone().or_else(|| {
                *i += 1;
                args.get(*i - 1).cloned()
            })
        };
        if value_read_at.contains(&name) || form.contains(&name) {
            if let Some(v) = value(&mut i) {
                let file = if form.contains(&name) {
                    v.split_once('=')
                        .and_then(|(_, f)| f.strip_prefix('@').or_else(|| f.strip_prefix('<')))
                        .map(|f| f.split(';').next().unwrap_or(f).to_owned())
                        .filter(|f| !f.is_empty() && f != "-")
                } else {
                    curl_at_file(&v).map(str::to_owned)
                };
                if let Some(f) = file {
                    r.file(Read, &f);
                }
            }
        } else if read_file.contains(&name) {
            if let Some(v) = value(&mut i)
                && v != "-"
                && v != "."
            {
                r.file(Read, &v);
            }
        } else if write_file.contains(&name) {
            if let Some(v) = value(&mut i)
                && v != "-"
            {
                if name == "--output-dir" {
                    r.tree(Write, &v, &[]);
                } else {
                    r.file(Write, &v);
                }
            }
        } else if with_value.contains(&name) {
            let _ = value(&mut i);
        } else if name == "-O" || name == "--remote-name" || name == "--remote-name-all" {
            // Saved under the URL's last segment, in the working directory.
            r.tree(Write, ".", &[]);
        } else if name.starts_with("--") {
            r.understood = false;
            r.loose.extend(inline);
        } else if w.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("file:")) {
            // A `file:` URL reads the file.
            r.file(Read, w);
        } else if let Some(cluster) = name.strip_prefix('-').filter(|c| !c.is_empty()) {
            if cluster.contains('O') {
                r.tree(Write, ".", &[]);
            }
            if !cluster.chars().all(|c| flags.contains(c)) {
                r.understood = false;
                r.loose.push(cluster.to_owned());
            }
        }
        // Other words are URLs.
    }
    r
}

fn wget(args: &[String]) -> Reading {
    let p = parse(
        args,
        &Spec {
            short: "qvnNcrkKpmSdbxEF",
            short_val: "tTwlUQeAR",
            long: long![
                "quiet",
                "verbose",
                "no-verbose",
                "continue",
                "timestamping",
                "recursive",
                "convert-links",
                "page-requisites",
                "mirror",
                "server-response",
                "no-check-certificate",
                "spider",
                "no-parent",
                "force-directories",
                "no-directories",
                "background",
                "show-progress",
                "no-clobber",
                "content-disposition",
                "adjust-extension"
            ],
            long_val: &[
                "tries",
                "timeout",
                "wait",
                "level",
                "user-agent",
                "quota",
                "header",
                "method",
                "user",
                "password",
                "limit-rate",
                "accept",
                "reject",
                "post-data",
                "body-data",
                "execute",
                "progress",
            ],
            paths: &[
                ("-O", Write),
                ("--output-document", Write),
                ("-o", Write),
                ("--output-file", Write),
                ("-a", Write),
                ("--append-output", Write),
                ("-i", Read),
                ("--input-file", Read),
                ("--post-file", Read),
                ("--body-file", Read),
                ("--load-cookies", Read),
                ("--save-cookies", Write),
                ("--ca-certificate", Read),
                ("--certificate", Read),
                ("--private-key", Read),
                ("-P", Write),
                ("--directory-prefix", Write),
            ],
            ..Spec::default()
        },
    );
    let mut r = reading_of(&p);
    if let Some(dir) = p.values(&["-P", "--directory-prefix"]).first() {
        r.files.retain(|f| &f.word != dir);
        r.tree(Write, dir, &[]);
    } else if !p.has(&["-O", "--output-document", "--spider"]) {
        r.tree(Write, ".", &[]);
    }
    if p.has(&["-e", "--execute"]) {
        r.understood = false;
    }
    r
}

/// `host:path`, `user@host:path`, `rsync://…`: not a local file.
fn is_remote(word: &str) -> bool {
    if word.contains("://") {
        return true;
    }
    match (word.find(':'), word.find('/')) {
        (Some(c), Some(s)) => c < s,
        (Some(_), None) => true,
        _ => false,
    }
}

/// `scp`: sources are read, the last operand is written; remote operands are no files.
fn copy_remote(
    args: &[String],
    short: &'static str,
    short_val: &'static str,
    paths: &'static [(&'static str, Operation)],
) -> Reading {
    let p = parse(
        args,
        &Spec {
            short,
            short_val,
            paths,
            ..Spec::default()
        },
    );
    let mut r = reading_of(&p);
    let recursive = p.has(&["-r"]);
    copy_operands(&mut r, &p.operands, recursive, Read, false);
    r
}

fn copy_operands(
    r: &mut Reading,
    operands: &[String],
    recursive: bool,
    source_op: Operation,
    delete_target: bool,
) {
    if let Some((target, sources)) = operands.split_last() {
        for s in sources.iter().filter(|s| !is_remote(s)) {
            if recursive {
                r.tree(source_op, s, &[]);
            } else {
                r.file(source_op, s);
            }
        }
        if !is_remote(target) {
            r.tree(Write, target, &[]);
            if delete_target {
                r.tree(Delete, target, &[]);
            }
        }
    }
}

fn rsync(args: &[String]) -> Reading {
    let p = parse(
        args,
        &Spec {
            short: "avzrhPnulptgoDHAXcqWRSxCiLkKEIOJm",
            short_val: "eTBfM",
            long: long![
                "archive",
                "verbose",
                "compress",
                "recursive",
                "human-readable",
                "progress",
                "partial",
                "dry-run",
                "update",
                "links",
                "perms",
                "times",
                "group",
                "owner",
                "devices",
                "specials",
                "hard-links",
                "acls",
                "xattrs",
                "checksum",
                "quiet",
                "whole-file",
                "relative",
                "sparse",
                "one-file-system",
                "itemize-changes",
                "copy-links",
                "stats",
                "delete",
                "delete-after",
                "delete-before",
                "delete-during",
                "delete-excluded",
                "remove-source-files",
                "ignore-existing",
                "existing",
                "mkpath",
                "no-motd",
                "info",
                "inplace",
                "append",
                "prune-empty-dirs"
            ],
            long_val: &[
                "exclude", "include", "filter", "bwlimit", "timeout", "chmod", "chown", "max-size",
                "min-size", "port",
            ],
            paths: &[
                ("--exclude-from", Read),
                ("--include-from", Read),
                ("--files-from", Read),
                ("--password-file", Read),
                ("--log-file", Write),
                ("--backup-dir", Write),
            ],
            ..Spec::default()
        },
    );
    let mut r = reading_of(&p);
    let recursive = p.has(&["-a", "-r", "--archive", "--recursive"]);
    let deletes = p.opts.iter().any(|(n, _)| n.starts_with("--delete"));
    let source_op = if p.has(&["--remove-source-files"]) {
        Delete
    } else {
        Read
    };
    if p.has(&["--files-from"]) {
        r.hidden_ops.push(source_op);
    }
    copy_operands(&mut r, &p.operands, recursive, source_op, deletes);
    if source_op == Delete {
        // The sources are read before they go.
        copy_operands(&mut r, &p.operands, recursive, Read, false);
    }
    if p.has(&["-e"])
        || p.opts
            .iter()
            .any(|(n, _)| n == "--rsh" || n == "--rsync-path")
    {
        // A remote shell command to run.
        r.understood = false;
    }
    r
}

fn tar(args: &[String]) -> Reading {
    let mut r = Reading::known();
    // Old style: `tar czf a.tgz dir`, the first word is a cluster without `-`.
    let mut words: Vec<String> = args.to_vec();
    if let Some(first) = words.first().cloned()
        && !first.starts_with('-')
        && !first.is_empty()
    {
        words.remove(0);
        // Each letter that takes a value takes the next word, in order.
        let mut rebuilt: Vec<String> = Vec::new();
        for c in first.chars() {
            rebuilt.push(format!("-{c}"));
            if "fCTXbLNKVgH".contains(c) && !words.is_empty() {
                rebuilt.push(words.remove(0));
            }
        }
        rebuilt.extend(words);
        words = rebuilt;
    }
    let p = parse(
        &words,
        &Spec {
            short: "cxtruAdzjJZavpPkhmoOSWlBiMG",
            short_val: "bLNKVgH",
            long: long![
                "create",
                "extract",
                "get",
                "list",
                "append",
                "update",
                "diff",
                "compare",
                "gzip",
                "gunzip",
                "bzip2",
                "xz",
                "zstd",
                "lzma",
                "auto-compress",
                "verbose",
                "to-stdout",
                "keep-old-files",
                "keep-newer-files",
                "overwrite",
                "no-same-owner",
                "no-same-permissions",
                "preserve-permissions",
                "same-permissions",
                "dereference",
                "numeric-owner",
                "totals",
                "wildcards",
                "no-recursion",
                "recursion",
                "absolute-names",
                "sparse",
                "show-transformed-names",
                "no-overwrite-dir",
                "remove-files"
            ],
            long_val: &[
                "exclude",
                "strip-components",
                "transform",
                "xform",
                "owner",
                "group",
                "mode",
                "mtime",
                "format",
                "blocking-factor",
                "sort",
            ],
            paths: &[
                ("-f", Read),
                ("--file", Read),
                ("-C", Read),
                ("--directory", Read),
                ("-T", Read),
                ("--files-from", Read),
                ("-X", Read),
                ("--exclude-from", Read),
            ],
            ..Spec::default()
        },
    );
    r.understood = p.understood;
    r.loose = p.loose.clone();
    let archives = p.values(&["-f", "--file"]);
    let dir = p.values(&["-C", "--directory"]).pop();
    for (op, w) in &p.files {
        let is_archive = archives.contains(w);
        let is_dir = dir.as_ref() == Some(w);
        if !is_archive && !is_dir && w != "-" {
            r.file(*op, w);
        }
    }
    let base = |w: &str| -> String {
        match &dir {
            Some(d) if !w.starts_with('/') => format!("{d}/{w}"),
            _ => w.to_owned(),
        }
    };
    let creating = p.has(&["-c", "--create", "-r", "--append", "-u", "--update", "-A"]);
    let extracting = p.has(&["-x", "--extract", "--get"]);
    let removing = p.has(&["--remove-files"]);
    if creating {
        for a in archives.iter().filter(|a| *a != "-") {
            r.file(Write, a);
            r.file(Read, a);
        }
        for w in &p.operands {
            r.tree(Read, &base(w), &[]);
            if removing {
                r.tree(Delete, &base(w), &[]);
            }
        }
        if p.has(&["-T", "--files-from"]) {
            // `tar c -T list`: which files is not known here.
            r.hidden_ops.push(Read);
        }
    } else if extracting {
        for a in archives.iter().filter(|a| *a != "-") {
            r.file(Read, a);
        }
        if !p.has(&["-O", "--to-stdout"]) {
            r.tree(Write, dir.as_deref().unwrap_or("."), &[]);
        }
    } else {
        for a in archives.iter().filter(|a| *a != "-") {
            r.file(Read, a);
        }
        if !p.has(&["-t", "--list", "-d", "--diff", "--compare"]) {
            r.understood = false;
        }
    }
    if p.opts.iter().any(|(n, _)| {
        n == "-I"
            || n == "--use-compress-program"
            || n == "--to-command"
            || n.starts_with("--checkpoint")
    }) {
        r.understood = false;
    }
    r
}

fn zip(args: &[String]) -> Reading {
    let p = parse(
        args,
        &Spec {
            short: "rqvjDXy0123456789uoSlFgkTAJ",
            short_val: "Pnt",
            long: long![
                "recurse-paths",
                "quiet",
                "verbose",
                "junk-paths",
                "symlinks"
            ],
            ..Spec::default()
        },
    );
    let mut r = reading_of(&p);
    let recursive = p.has(&["-r", "--recurse-paths"]);
    let moving = p.has(&["-m"]);
    if let Some((archive, files)) = p.operands.split_first() {
        r.file(Write, archive);
        r.file(Read, archive);
        r.files_or_trees(Read, files, recursive, &[]);
        if moving {
            r.files_or_trees(Delete, files, recursive, &[]);
        }
    }
    r
}

fn unzip(args: &[String]) -> Reading {
    let p = parse(
        args,
        &Spec {
            short: "lqtvpnoaCjLVXKMUZfuz",
            short_val: "P",
            paths: &[("-d", Write)],
            ..Spec::default()
        },
    );
    let mut r = reading_of(&p);
    let dir = p.values(&["-d"]).pop();
    r.files.retain(|f| Some(&f.word) != dir.as_ref());
    if let Some(archive) = p.operands.first() {
        r.file(Read, archive);
    }
    // Further operands are member names in the archive, not files.
    if !p.has(&["-l", "-t", "-v", "-p", "-Z", "-z"]) {
        r.tree(Write, dir.as_deref().unwrap_or("."), &[]);
    }
    if p.operands.iter().any(|w| w == "-x") {
        r.understood = false;
    }
    r
}

fn openssl(args: &[String]) -> Reading {
    let mut r = Reading::known();
    let reads: &[&str] = &[
        "-in",
        "-inkey",
        "-key",
        "-kfile",
        "-config",
        "-CAfile",
        "-CAkey",
        "-cert",
        "-certfile",
        "-signkey",
        "-signer",
        "-recip",
        "-verify",
        "-prverify",
        "-prvkey",
        "-peerkey",
        "-untrusted",
        "-CRLfile",
        "-paramfile",
        "-sigfile",
        "-rand",
    ];
    let writes: &[&str] = &["-out", "-keyout", "-signature", "-writerand"];
    let with_value: &[&str] = &[
        "-days",
        "-subj",
        "-newkey",
        "-pkeyopt",
        "-sigopt",
        "-md",
        "-cipher",
        "-inform",
        "-outform",
        "-keyform",
        "-certform",
        "-set_serial",
        "-extensions",
        "-reqexts",
        "-name",
        "-connect",
        "-servername",
        "-port",
        "-host",
        "-iter",
        "-K",
        "-iv",
        "-S",
        "-digest",
        "-nameopt",
        "-certopt",
        "-addext",
        "-algorithm",
        "-curve",
        "-engine",
        "-provider",
        "-section",
        "-checkhost",
        "-verify_hostname",
        "-purpose",
        "-alpn",
    ];
    let passes: &[&str] = &["-passin", "-passout", "-pass", "-kfile"];
    let mut i = 1;
    while let Some(w) = args.get(i) {
        i += 1;
        if passes.contains(&w.as_str()) {
            if let Some(v) = args.get(i) {
                if let Some(f) = v.strip_prefix("file:") {
                    r.file(Read, f);
                }
                i += 1;
            }
        } else if reads.contains(&w.as_str()) {
            if let Some(v) = args.get(i) {
                r.file(Read, v);
            }
            i += 1;
        } else if writes.contains(&w.as_str()) {
            if let Some(v) = args.get(i) {
                r.file(Write, v);
            }
            i += 1;
        } else if with_value.contains(&w.as_str()) {
            i += 1;
        } else if w.starts_with('-') {
            // A flag or an option with a value: which, we do not know.
            r.understood = false;
        } else {
            r.loose.push(w.clone());
        }
    }
    r
}

fn xxd(args: &[String]) -> Reading {
    let mut r = Reading::known();
    let no_val: &[&str] = &[
        "-a",
        "-autoskip",
        "-b",
        "-bits",
        "-C",
        "-capitalize",
        "-E",
        "-EBCDIC",
        "-e",
        "-i",
        "-include",
        "-p",
        "-ps",
        "-postscript",
        "-plain",
        "-r",
        "-revert",
        "-u",
        "-d",
        "-h",
        "-help",
        "-v",
        "-version",
    ];
    let val: &[&str] = &[
        "-c",
        "-cols",
        "-g",
        "-groupsize",
        "-l",
        "-len",
        "-o",
        "-offset",
        "-s",
        "-seek",
        "-n",
        "-name",
        "-R",
    ];
    let mut operands = Vec::new();
    let mut i = 0;
    while let Some(w) = args.get(i) {
        i += 1;
        if no_val.contains(&w.as_str()) {
        } else if val.contains(&w.as_str()) {
            i += 1;
        } else if w.len() > 2
            && w.starts_with('-')
            && val.iter().any(|v| v.len() == 2 && w.starts_with(v))
        {
            // `-c8`: the value attached.
        } else if w.starts_with('-') && w != "-" {
            r.understood = false;
            r.loose.push(w.clone());
        } else {
            operands.push(w.clone());
        }
    }
    let mut ops = operands.into_iter();
    if let Some(input) = ops.next()
        && input != "-"
    {
        r.file(Read, &input);
    }
    if let Some(output) = ops.next()
        && output != "-"
    {
        r.file(Write, &output);
    }
    r.loose.extend(ops);
    r
}

fn copy(name: &str, args: &[String]) -> Reading {
    let spec = match name {
        "cp" => Spec {
            short: "abdfHilLnPprRsTuvxZ",
            short_val: "S",
            long: long![
                "archive",
                "attributes-only",
                "backup",
                "copy-contents",
                "dereference",
                "force",
                "interactive",
                "link",
                "no-dereference",
                "no-clobber",
                "parents",
                "recursive",
                "reflink",
                "remove-destination",
                "strip-trailing-slashes",
                "symbolic-link",
                "no-target-directory",
                "update",
                "verbose",
                "one-file-system",
                "preserve",
                "debug"
            ],
            long_val: &["no-preserve", "sparse", "suffix"],
            paths: &[("-t", Write), ("--target-directory", Write)],
            ..Spec::default()
        },
        "mv" => Spec {
            short: "bfinTuvZ",
            short_val: "S",
            long: long![
                "backup",
                "force",
                "interactive",
                "no-clobber",
                "strip-trailing-slashes",
                "no-target-directory",
                "update",
                "verbose",
                "context",
                "debug",
                "exchange",
                "no-copy"
            ],
            long_val: &["suffix"],
            paths: &[("-t", Write), ("--target-directory", Write)],
            ..Spec::default()
        },
        "install" => Spec {
            short: "bcCdDpsTvZ",
            short_val: "mogS",
            long: long![
                "backup",
                "compare",
                "directory",
                "preserve-timestamps",
                "strip",
                "no-target-directory",
                "verbose",
                "context"
            ],
            long_val: &["mode", "owner", "group", "suffix"],
            paths: &[("-t", Write), ("--target-directory", Write)],
            ..Spec::default()
        },
        _ => Spec {
            short: "bdfFinLPrsTv",
            short_val: "S",
            long: long![
                "backup",
                "directory",
                "force",
                "interactive",
                "logical",
                "no-dereference",
                "physical",
                "relative",
                "symbolic",
                "no-target-directory",
                "verbose"
            ],
            long_val: &["suffix"],
            paths: &[("-t", Write), ("--target-directory", Write)],
            ..Spec::default()
        },
    };
    let p = parse(args, &spec);
    let mut r = reading_of(&p);
    let recursive = name == "cp" && p.has(&["-r", "-R", "-a", "--recursive", "--archive"]);
    let target_dir = p.values(&["-t", "--target-directory"]).pop();
    if name == "install" && p.has(&["-d", "--directory"]) {
        r.files_or_trees(Write, &p.operands, false, &[]);
        return r;
    }
    let (sources, target): (&[String], Option<&String>) = match &target_dir {
        Some(_) => (&p.operands, None),
        None => match p.operands.split_last() {
            Some((t, s)) => (s, Some(t)),
            None => (&[], None),
        },
    };
    if let Some(dir) = &target_dir {
        r.files.retain(|f| &f.word != dir);
        r.tree(Write, dir, &[]);
    }
    if let Some(t) = target {
        if recursive || name == "mv" {
            r.tree(Write, t, &[]);
        } else {
            r.file(Write, t);
        }
    }
    let source_op = match name {
        "mv" => Delete,
        _ => Read,
    };
    for s in sources {
        if recursive {
            r.tree(source_op, s, &[]);
        } else {
            r.file(source_op, s);
        }
        if name == "mv" {
            r.file(Read, s);
        }
    }
    r.operand_op = Some(source_op);
    r
}

fn dd(args: &[String]) -> Reading {
    let mut r = Reading::known();
    for w in args {
        match w.split_once('=') {
            Some(("if", f)) => r.file(Read, f),
            Some(("of", f)) => r.file(Write, f),
            Some((
                "bs" | "ibs" | "obs" | "cbs" | "count" | "skip" | "seek" | "iseek" | "oseek"
                | "status" | "conv" | "iflag" | "oflag",
                _,
            )) => {}
            _ => {
                if w != "--help" && w != "--version" {
                    r.understood = false;
                    r.loose.push(w.clone());
                }
            }
        }
    }
    r
}

fn chmod(name: &str, args: &[String]) -> Reading {
    let mut r = Reading::known();
    let mut recursive = false;
    let mut first_given = false;
    let mut operands: Vec<String> = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while let Some(w) = args.get(i) {
        i += 1;
        if options_done || !w.starts_with('-') || w == "-" {
            operands.push(w.clone());
            continue;
        }
        if w == "--" {
            options_done = true;
            continue;
        }
        if let Some(long) = w.strip_prefix("--") {
            let (n, v) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            match n {
                "recursive" => recursive = true,
                "changes" | "silent" | "quiet" | "verbose" | "preserve-root"
                | "no-preserve-root" | "dereference" | "no-dereference" | "help" | "version" => {}
                "reference" => {
                    let v = v.or_else(|| {
                        i += 1;
                        args.get(i - 1).cloned()
                    });
                    if let Some(f) = v {
                        r.file(Read, &f);
                    }
                    first_given = true;
                }
                "from" => {
                    if v.is_none() {
                        i += 1;
                    }
                }
                _ => r.understood = false,
            }
            continue;
        }
        let body = w.get(1..).unwrap_or_default();
        let flags = if name == "chmod" { "cfvR" } else { "cfvRhHLP" };
        if body.chars().all(|c| flags.contains(c)) {
            recursive |= body.contains('R');
        } else if name == "chmod" && !first_given && operands.is_empty() {
            // `chmod -x file`: a mode.
            operands.push(w.clone());
        } else {
            r.understood = false;
        }
    }
    let files = if first_given {
        operands
    } else {
        operands.get(1..).unwrap_or_default().to_vec()
    };
    r.files_or_trees(Write, &files, recursive, &[]);
    r.operand_op = Some(Write);
    r
}

fn find(args: &[String]) -> Reading {
    let mut r = Reading::known();
    let mut i = 0;
    // Global options before the paths.
    while let Some(w) = args.get(i) {
        if matches!(w.as_str(), "-H" | "-L" | "-P") || w.starts_with("-O") {
            i += 1;
        } else if w == "-D" {
            i += 2;
        } else {
            break;
        }
    }
    let mut paths = Vec::new();
    while let Some(w) = args.get(i) {
        if w.starts_with('-') || w == "(" || w == "!" || w == "," || w == ")" {
            break;
        }
        paths.push(w.clone());
        i += 1;
    }
    if paths.is_empty() {
        paths.push(".".to_owned());
    }
    let no_val: &[&str] = &[
        "-print",
        "-print0",
        "-ls",
        "-prune",
        "-quit",
        "-true",
        "-false",
        "-empty",
        "-executable",
        "-readable",
        "-writable",
        "-nouser",
        "-nogroup",
        "-depth",
        "-follow",
        "-xdev",
        "-mount",
        "-noleaf",
        "-daystart",
        "-a",
        "-and",
        "-ignore_readdir_race",
        "-noignore_readdir_race",
        "-d",
        "-help",
        "-version",
        "(",
        ")",
    ];
    let one_val: &[&str] = &[
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-regex",
        "-iregex",
        "-type",
        "-xtype",
        "-size",
        "-mtime",
        "-mmin",
        "-atime",
        "-amin",
        "-ctime",
        "-cmin",
        "-newer",
        "-anewer",
        "-cnewer",
        "-perm",
        "-user",
        "-group",
        "-uid",
        "-gid",
        "-maxdepth",
        "-mindepth",
        "-links",
        "-inum",
        "-samefile",
        "-wholename",
        "-iwholename",
        "-lname",
        "-ilname",
        "-used",
        "-fstype",
        "-context",
        "-printf",
        "-regextype",
        "-files0-from",
    ];
    let mut names: Vec<String> = Vec::new();
    let mut narrowing = true;
    let mut deletes = false;
    let mut runs = false;
    while let Some(w) = args.get(i) {
        i += 1;
        let w = w.as_str();
        if no_val.contains(&w) {
            continue;
        }
        if matches!(w, "-o" | "-or" | "!" | "-not" | ",") {
            narrowing = false;
            continue;
        }
        if one_val.contains(&w) {
            let v = args.get(i).cloned().unwrap_or_default();
            i += 1;
            match w {
                "-name" => names.push(v),
                "-iname" => narrowing = false,
                "-files0-from" => {
                    r.file(Read, &v);
                    r.hidden_ops.push(Read);
                }
                _ => {}
            }
            continue;
        }
        if w.starts_with("-newer") {
            i += 1;
            continue;
        }
        match w {
            "-delete" => deletes = true,
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                runs = true;
                while let Some(a) = args.get(i) {
                    i += 1;
                    if a == ";" || a == "+" {
                        break;
                    }
                }
            }
            "-fprint" | "-fprint0" | "-fls" => {
                if let Some(f) = args.get(i) {
                    r.file(Write, f);
                }
                i += 1;
                r.understood = false;
            }
            "-fprintf" => {
                if let Some(f) = args.get(i) {
                    r.file(Write, f);
                }
                i += 2;
                r.understood = false;
            }
            _ => {
                r.understood = false;
                r.loose.push(w.to_owned());
            }
        }
    }
    // find opens its working directory to return to it.
    r.file(Read, ".");
    let filters: Vec<String> = if narrowing && names.len() == 1 {
        name_filters(names)
    } else {
        Vec::new()
    };
    for p in &paths {
        r.tree(Read, p, &filters);
        if deletes {
            r.tree(Delete, p, &filters);
        }
        if runs {
            // The command it runs on each file may do anything to it.
            r.tree(Write, p, &filters);
            r.tree(Delete, p, &filters);
        }
    }
    if deletes || runs {
        r.understood = false;
    }
    r
}

/// `git clean` deletes untracked files beneath the repository (or the paths given).
pub(crate) fn git_clean_paths(argv: &[String]) -> Option<Vec<String>> {
    let mut i = 1;
    while let Some(w) = argv.get(i) {
        i += 1;
        match w.as_str() {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" => i += 1,
            w if w.starts_with('-') => {}
            "clean" => {
                let mut paths = Vec::new();
                let mut after_dd = false;
                while let Some(a) = argv.get(i) {
                    i += 1;
                    if after_dd || !a.starts_with('-') {
                        paths.push(a.clone());
                    } else if a == "--" {
                        after_dd = true;
                    } else if a == "-e" || a == "--exclude" {
                        i += 1;
                    }
                }
                if paths.is_empty() {
                    paths.push(".".to_owned());
                }
                return Some(paths);
            }
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

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
