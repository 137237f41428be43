//! Recursive tools: a search or listing of a directory (`Grep`, `Glob`, `search_files`,
//! `directory_tree`) becomes a part that reaches beneath the directory
//! ([`Part::beneath`]), narrowed by the file-name filters its arguments give.
//!
//! A filter is kept only where it provably narrows: an exclusion (`!*.rs`), a glob that
//! does not parse, an argument of the wrong type or an unknown file type narrows nothing,
//! and several sources (a glob and a type) are united, never intersected.

use serde_json::{Map, Value};

use super::{NormalizeContext, RecursiveMapping, path};
use crate::action::{Beneath, Operation, Part};

/// File names a call narrows to: `None` is every name.
type Names = Option<Vec<String>>;

/// Unites two narrowings (every name wins).
fn unite(a: Names, b: Names) -> Names {
    match (a, b) {
        (Some(mut a), Some(b)) => {
            for f in b {
                if !a.contains(&f) {
                    a.push(f);
                }
            }
            Some(a)
        }
        _ => None,
    }
}

/// True when a `/` of the glob lies inside `{…}` or `[…]`: splitting it on `/` would cut an
/// alternation or a class apart.
fn slash_inside_group(glob: &str) -> bool {
    let mut braces = 0usize;
    let mut class = false;
    let mut escaped = false;
    for c in glob.chars() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '[' if !class => class = true,
            ']' if class => class = false,
            '{' if !class => braces += 1,
            '}' if !class => braces = braces.saturating_sub(1),
            '/' if braces > 0 || class => return true,
            _ => {}
        }
    }
    false
}

/// The file-name filter of a path glob: its last component, or every name (`**`, a `/`
/// inside a group, an empty last component).
fn last_component_filter(glob: &str) -> Names {
    if slash_inside_group(glob) {
        return None;
    }
    let last = glob.rsplit('/').next().unwrap_or(glob);
    if last.is_empty() || last == "**" {
        return None;
    }
    Some(vec![last.to_owned()])
}

/// Splits on top-level commas (outside `{…}`).
fn split_top_level_commas(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(s.get(start..i).unwrap_or(""));
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s.get(start..).unwrap_or(""));
    out
}

/// A ripgrep-style `--glob` value: the whole value and its pieces (split on whitespace and
/// top-level commas, as a client may split it), each narrowing by its last component.
pub(crate) fn name_glob_filters(value: &str) -> Names {
    let whole = value.trim();
    if whole.is_empty() {
        return None;
    }
    let mut pieces: Vec<&str> = vec![whole];
    for word in whole.split_whitespace() {
        pieces.push(word);
        pieces.extend(split_top_level_commas(word));
    }
    let mut out: Names = Some(Vec::new());
    for piece in pieces {
        let piece = piece.trim();
        if piece.is_empty() {
            continue;
        }
        if piece.starts_with('!') {
            // An exclusion: everything else is searched.
            return None;
        }
        out = unite(out, last_component_filter(piece));
        out.as_ref()?;
    }
    out.filter(|v| !v.is_empty())
}

/// ripgrep's file types (`--type`) for the names agents use, each with the globs of
/// ripgrep's default type list (generously: a type's globs may grow, never shrink, so a
/// glob too many only narrows less).
fn type_globs(name: &str) -> Option<&'static [&'static str]> {
    Some(match name.trim().to_ascii_lowercase().as_str() {
        "rust" => &["*.rs"],
        "py" | "python" => &["*.py", "*.pyi", "*.pyw"],
        "js" | "javascript" => &["*.js", "*.jsx", "*.vue", "*.cjs", "*.mjs"],
        "ts" | "typescript" => &["*.ts", "*.tsx", "*.cts", "*.mts"],
        "go" => &["*.go"],
        "java" => &["*.java", "*.jsp", "*.jspx", "*.properties"],
        "c" => &["*.[chH]", "*.[chH].in", "*.cats"],
        "cpp" => &[
            "*.[ChH]",
            "*.cc",
            "*.[ch]pp",
            "*.[ch]xx",
            "*.hh",
            "*.inl",
            "*.[ChH].in",
            "*.cc.in",
            "*.[ch]pp.in",
            "*.[ch]xx.in",
            "*.hh.in",
        ],
        "h" => &["*.h", "*.hh", "*.hpp"],
        "cs" | "csharp" => &["*.cs"],
        "md" | "markdown" => &[
            "*.markdown",
            "*.md",
            "*.mdown",
            "*.mdwn",
            "*.mkd",
            "*.mkdn",
            "*.mdx",
        ],
        "json" => &["*.json", "composer.lock", "*.jsonc"],
        "jsonl" => &["*.jsonl"],
        "yaml" => &["*.yaml", "*.yml"],
        "toml" => &["*.toml", "Cargo.lock"],
        "sh" => &[
            ".login",
            ".logout",
            ".profile",
            "profile",
            ".bash_login",
            "bash_login",
            ".bash_logout",
            "bash_logout",
            ".bash_profile",
            "bash_profile",
            ".bashrc",
            "bashrc",
            "*.bashrc",
            ".cshrc",
            "*.cshrc",
            ".kshrc",
            "*.kshrc",
            ".tcshrc",
            ".zshenv",
            "zshenv",
            ".zlogin",
            "zlogin",
            ".zlogout",
            "zlogout",
            ".zprofile",
            "zprofile",
            ".zshrc",
            "zshrc",
            "*.bash",
            "*.csh",
            "*.ksh",
            "*.sh",
            "*.tcsh",
            "*.zsh",
        ],
        "html" => &["*.htm", "*.html", "*.ejs"],
        "css" => &["*.css", "*.scss"],
        "ruby" => &[
            "config.ru",
            "Gemfile",
            ".irbrc",
            "Rakefile",
            "*.gemspec",
            "*.rb",
            "*.rbw",
        ],
        "php" => &[
            "*.php", "*.php3", "*.php4", "*.php5", "*.php7", "*.php8", "*.pht", "*.phtml",
        ],
        "kotlin" => &["*.kt", "*.kts"],
        "swift" => &["*.swift"],
        "scala" => &["*.scala", "*.sbt"],
        "sql" => &["*.sql", "*.psql"],
        "xml" => &[
            "*.xml",
            "*.xml.dist",
            "*.dtd",
            "*.xsl",
            "*.xslt",
            "*.xsd",
            "*.xjb",
            "*.rng",
            "*.sch",
            "*.xhtml",
        ],
        "txt" => &["*.txt"],
        "lua" => &["*.lua"],
        "dart" => &["*.dart"],
        "zig" => &["*.zig"],
        "nix" => &["*.nix"],
        "proto" | "protobuf" => &["*.proto"],
        "make" => &[
            "[Gg][Nn][Uu]makefile",
            "[Mm]akefile",
            "[Gg][Nn][Uu]makefile.am",
            "[Mm]akefile.am",
            "[Gg][Nn][Uu]makefile.in",
            "[Mm]akefile.in",
            "*.mk",
            "*.mak",
        ],
        "docker" => &["*Dockerfile*"],
        "svg" => &["*.svg"],
        "csv" => &["*.csv"],
        _ => return None,
    })
}

/// Filters of a `types` argument: a name or a list of names.
fn type_filters(value: &Value) -> Names {
    let names: Vec<&str> = match value {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().map(Value::as_str).collect::<Option<_>>()?,
        _ => return None,
    };
    let mut out: Names = Some(Vec::new());
    for n in names {
        let globs = type_globs(n)?;
        out = unite(out, Some(globs.iter().map(|g| (*g).to_owned()).collect()));
    }
    out.filter(|v| !v.is_empty())
}

/// Filters of a `name_globs` argument: a string or a list of strings.
fn name_glob_value(value: &Value) -> Names {
    match value {
        Value::String(s) => name_glob_filters(s),
        Value::Array(items) => {
            let mut out: Names = Some(Vec::new());
            for item in items {
                out = unite(out, name_glob_filters(item.as_str()?));
                out.as_ref()?;
            }
            out.filter(|v| !v.is_empty())
        }
        _ => None,
    }
}

/// What a glob relative to the searched directory (`Glob`'s `pattern`) says.
#[derive(Debug, PartialEq, Eq)]
enum RelativeGlob {
    /// Narrows to `dir` (relative, or absolute when it starts with `/` or `~`) and names.
    Narrow { dir: Option<String>, names: Names },
    /// Climbs out of the directory in a way that cannot be followed (`*/../x`, `..`
    /// inside a group): the call hides what it touches.
    Hides,
}

fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

fn relative_glob(pattern: &str) -> RelativeGlob {
    let pattern = pattern.trim();
    if pattern.is_empty() {
        return RelativeGlob::Narrow {
            dir: None,
            names: None,
        };
    }
    let grouped = slash_inside_group(pattern);
    let components: Vec<&str> = pattern.split('/').collect();
    let literal = components
        .iter()
        .take(components.len().saturating_sub(1))
        .take_while(|c| !has_glob_meta(c))
        .count();
    let after_literal = components.get(literal..).unwrap_or_default();
    if (grouped && pattern.contains(".."))
        || after_literal
            .iter()
            .any(|c| c.contains("..") && (has_glob_meta(c) || *c == ".."))
    {
        return RelativeGlob::Hides;
    }
    if grouped {
        // The groups cannot be split into components, and an alternative may be absolute
        // (`{/etc,src}/*`): everything from the root.
        return RelativeGlob::Narrow {
            dir: Some("/".to_owned()),
            names: None,
        };
    }
    let prefix = components.get(..literal).unwrap_or_default().join("/");
    let dir = if prefix.is_empty() {
        // `/x*` has an empty literal prefix before the first `/`: the root.
        pattern.starts_with('/').then(|| "/".to_owned())
    } else {
        Some(prefix)
    };
    RelativeGlob::Narrow {
        dir,
        names: last_component_filter(pattern),
    }
}

/// Adds the parts of a recursive tool's directories to `parts`. Returns whether any
/// directory argument (or the workspace default) was found; a directory that cannot be
/// resolved adds its operation to `unresolved`.
pub(super) fn add_recursive_parts(
    args: &Map<String, Value>,
    r: &RecursiveMapping,
    op: Operation,
    ctx: &NormalizeContext,
    parts: &mut Vec<Part>,
    unresolved: &mut Vec<Operation>,
) -> bool {
    let mut dirs: Vec<String> = Vec::new();
    let mut found = false;
    let mut bad = false;
    for name in &r.params {
        let Some(value) = args.get(name) else {
            continue;
        };
        for res in path::resolve_value(value, ctx.workspace, ctx) {
            found = true;
            match res {
                Ok(d) if !dirs.contains(&d) => dirs.push(d),
                Ok(_) => {}
                Err(_) => bad = true,
            }
        }
    }
    if !found && r.workspace_default {
        found = true;
        match path::resolve_path(ctx.workspace, "/", ctx) {
            Ok(w) => dirs.push(w),
            Err(_) => bad = true,
        }
    }

    // File-name filters: every source present is united; one that narrows nothing wins.
    let mut names: Names = Some(Vec::new());
    let mut any_source = false;
    for (params, read) in [
        (&r.name_globs, name_glob_value as fn(&Value) -> Names),
        (&r.types, type_filters as fn(&Value) -> Names),
    ] {
        for p in params {
            match args.get(p) {
                None | Some(Value::Null) => {}
                Some(v) => {
                    any_source = true;
                    names = unite(names, read(v));
                }
            }
        }
    }

    // A glob relative to the directory narrows the directory and the names.
    let mut relative_dirs: Vec<String> = Vec::new();
    let mut narrowed_dirs = false;
    for p in &r.relative_globs {
        let value = match args.get(p) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => s.as_str(),
            Some(_) => {
                any_source = true;
                names = None;
                continue;
            }
        };
        any_source = true;
        match relative_glob(value) {
            RelativeGlob::Hides => bad = true,
            RelativeGlob::Narrow { dir, names: n } => {
                names = unite(names, n);
                if let Some(d) = dir {
                    let anchored = d.starts_with('/') || d.starts_with('~');
                    let bases: Vec<&str> = if anchored {
                        vec!["/"]
                    } else {
                        dirs.iter().map(String::as_str).collect()
                    };
                    for base in bases {
                        match path::resolve_path_all(&d, base, ctx) {
                            Ok(all) => relative_dirs.extend(all),
                            Err(_) => bad = true,
                        }
                    }
                    if !anchored {
                        narrowed_dirs = true;
                    }
                    found = true;
                }
            }
        }
    }
    if narrowed_dirs {
        // The pattern's literal directories replace the searched directories.
        dirs.clear();
    }
    for d in relative_dirs {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    let filters = match names {
        Some(n) if any_source && !n.is_empty() => n,
        _ => Vec::new(),
    };

    for dir in dirs {
        if ctx.fs.is_regular_file(&dir) {
            // A file is a plain read of it.
            super::add_resource(parts, op, dir);
            continue;
        }
        let beneath = Beneath {
            filters: filters.clone(),
        };
        match parts
            .iter_mut()
            .find(|p| p.operation == op && !p.opaque && p.beneath.as_ref() == Some(&beneath))
        {
            Some(p) => {
                if !p.resources.contains(&dir) {
                    p.resources.push(dir);
                }
            }
            None => {
                let mut p = Part::new(op);
                p.resources.push(dir);
                p.beneath = Some(beneath);
                parts.push(p);
            }
        }
    }
    if bad && !unresolved.contains(&op) {
        unresolved.push(op);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Names {
        Some(list.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn name_globs_split_and_exclusions() {
        assert_eq!(name_glob_filters("*.rs"), names(&["*.rs"]));
        assert_eq!(name_glob_filters("*.{rs,key}"), names(&["*.{rs,key}"]));
        assert_eq!(
            name_glob_filters("*.rs *.key"),
            names(&["*.rs *.key", "*.rs", "*.key"])
        );
        assert_eq!(
            name_glob_filters("*.rs,*.md"),
            names(&["*.rs,*.md", "*.rs", "*.md"])
        );
        assert_eq!(name_glob_filters("src/**/*.ts"), names(&["*.ts"]));
        assert_eq!(name_glob_filters("!*.rs"), None);
        assert_eq!(name_glob_filters("*.rs !*.md"), None);
        assert_eq!(name_glob_filters("deploy/**"), None);
        assert_eq!(name_glob_filters("{a/b,c}"), None);
        assert_eq!(name_glob_filters("  "), None);
    }

    #[test]
    fn relative_globs() {
        use RelativeGlob::*;
        let n = |dir: Option<&str>, names: Names| Narrow {
            dir: dir.map(str::to_owned),
            names,
        };
        assert_eq!(relative_glob("**/*.pem"), n(None, names(&["*.pem"])));
        assert_eq!(relative_glob("*.rs"), n(None, names(&["*.rs"])));
        assert_eq!(
            relative_glob("deploy/*.key"),
            n(Some("deploy"), names(&["*.key"]))
        );
        assert_eq!(relative_glob("../../*"), n(Some("../.."), names(&["*"])));
        assert_eq!(relative_glob("src/**"), n(Some("src"), None));
        assert_eq!(
            relative_glob("/home/u/.ssh/*"),
            n(Some("/home/u/.ssh"), names(&["*"]))
        );
        assert_eq!(relative_glob("/*"), n(Some("/"), names(&["*"])));
        assert_eq!(relative_glob("*/../../x"), Hides);
        assert_eq!(relative_glob("{..,a}/x"), Hides);
        assert_eq!(relative_glob("{../b,a}/x"), Hides);
        assert_eq!(relative_glob("{a/b,c}/*.rs"), n(Some("/"), None));
        assert_eq!(relative_glob("{/a,c}/*.rs"), n(Some("/"), None));
        assert_eq!(relative_glob("/{a/b,c}/*.rs"), n(Some("/"), None));
    }

    #[test]
    fn types_unite_and_unknown_narrows_nothing() {
        assert_eq!(type_filters(&Value::from("rust")), names(&["*.rs"]));
        assert_eq!(type_filters(&Value::from("nosuchtype")), None);
        assert_eq!(
            type_filters(&serde_json::json!(["rust", "go"])),
            names(&["*.rs", "*.go"])
        );
        assert_eq!(type_filters(&serde_json::json!(["rust", "x"])), None);
        assert_eq!(type_filters(&Value::from(3)), None);
    }
}
