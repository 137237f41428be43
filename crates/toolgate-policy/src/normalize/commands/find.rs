//! Commands that walk a tree and act on what they meet: `find`, `git clean`.

use super::{Reading, name_filters};
use crate::action::Operation::{FsDelete as Delete, FsRead as Read, FsWrite as Write};

pub(super) fn find(args: &[String]) -> Reading {
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
