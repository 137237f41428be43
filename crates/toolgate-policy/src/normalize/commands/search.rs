//! Readers that search or compare trees of files: `diff`, `grep`, `rg`, `ag`.

use super::{Reading, Spec, name_filters, parse, reading_of, split_pattern};
use crate::action::Operation::FsRead as Read;

pub(super) fn diff(args: &[String]) -> Reading {
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

pub(super) fn grep(args: &[String]) -> Reading {
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

pub(super) fn rg(args: &[String]) -> Reading {
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

pub(super) fn ag(args: &[String]) -> Reading {
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
