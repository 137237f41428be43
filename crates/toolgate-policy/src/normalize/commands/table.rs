//! The table: which commands are known, and the option spec or reader each one gets.

use super::archive::{openssl, tar, unzip, xxd, zip};
use super::files::{chmod, copy, dd};
use super::find::find;
use super::search::{ag, diff, grep, rg};
use super::text::{awk, jq, sed, yq};
use super::transfer::{copy_remote, curl, rsync, wget};
use super::{Chdir, Reading, Spec, listing, nothing, parse, reading_of, simple, unknown};
use crate::action::Operation::{FsDelete as Delete, FsRead as Read, FsWrite as Write};

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
