//! Programs over text whose scripts may name files: `jq`, `yq`, `awk`, `sed`.

use super::{Reading, Spec, parse, reading_of, split_pattern};
use crate::action::Operation::{FsRead as Read, FsWrite as Write};

pub(super) fn jq(args: &[String]) -> Reading {
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

pub(super) fn yq(args: &[String]) -> Reading {
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

pub(super) fn awk(args: &[String]) -> Reading {
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

pub(super) fn sed(args: &[String]) -> Reading {
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
