//! Archivers and encoders: `tar`, `zip`, `unzip`, `openssl`, `xxd`.

use super::{Reading, Spec, parse, reading_of};
use crate::action::Operation::{FsDelete as Delete, FsRead as Read, FsWrite as Write};

pub(super) fn tar(args: &[String]) -> Reading {
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

pub(super) fn zip(args: &[String]) -> Reading {
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

pub(super) fn unzip(args: &[String]) -> Reading {
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

pub(super) fn openssl(args: &[String]) -> Reading {
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

pub(super) fn xxd(args: &[String]) -> Reading {
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
