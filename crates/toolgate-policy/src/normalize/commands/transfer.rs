//! Network transfers: `curl`, `wget`, `scp`, `rsync` (local files read or written, remote not).

use super::{Reading, Spec, parse, reading_of};
use crate::action::Operation;
use Operation::{FsDelete as Delete, FsRead as Read, FsWrite as Write};

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

pub(super) fn curl(args: &[String]) -> Reading {
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

pub(super) fn wget(args: &[String]) -> Reading {
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
pub(super) fn copy_remote(
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

pub(super) fn rsync(args: &[String]) -> Reading {
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
