//! Copiers and changers of files: `cp`, `mv`, `install`, `ln`, `dd`, `chmod`, `chown`, `chgrp`.

use super::{Reading, Spec, parse, reading_of};
use crate::action::Operation::{FsDelete as Delete, FsRead as Read, FsWrite as Write};

pub(super) fn copy(name: &str, args: &[String]) -> Reading {
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

pub(super) fn dd(args: &[String]) -> Reading {
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

pub(super) fn chmod(name: &str, args: &[String]) -> Reading {
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
