//! Properties: the scanner never calls a string with an unquoted operator simple, quoting
//! round-trips, lexical normalisation is idempotent, normalisation never panics, and the
//! "simple" verdict agrees with a real POSIX shell (`/bin/sh`) on the resulting argv.

use std::process::Command;

use proptest::prelude::*;
use serde_json::Value;
use toolgate_policy::shell::{Scan, scan};
use toolgate_policy::{MapFs, NormalizeContext, ToolCall, lexical_normalize, normalize};

/// Renders a word so that a POSIX shell reads it back exactly.
fn quote(word: &str, style: u8) -> String {
    match style % 3 {
        0 => format!("'{}'", word.replace('\'', "'\\''")),
        1 => {
            let mut out = String::from("\"");
            for c in word.chars() {
                if matches!(c, '"' | '\\' | '$' | '`') {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push('"');
            out
        }
        _ => {
            let mut out = String::new();
            for c in word.chars() {
                if !c.is_alphanumeric()
                    && !matches!(c, '-' | '_' | '.' | '/' | ',' | '+' | '@' | '%' | ':')
                {
                    out.push('\\');
                }
                out.push(c);
            }
            if out.is_empty() { "''".to_owned() } else { out }
        }
    }
}

const OPERATORS: &[&str] = &[
    ";", "&", "|", "<", ">", "(", ")", "`", "$(", "\n", "&&", "||", ">>", "2>&1", "${x}", "$x",
    "*", "?", "[a]",
];

fn word() -> impl Strategy<Value = String> {
    // Any printable text without newline (a newline inside quotes is literal but awkward in
    // the `\` style), including quotes, operators and non-ASCII.
    "[a-zA-Z0-9 '\"\\\\;&|<>()$`*?~#!{}=:/.é-]{0,8}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn quoted_words_round_trip(words in prop::collection::vec((word(), 0u8..3), 1..6)) {
        let line = words.iter().map(|(w, s)| quote(w, *s)).collect::<Vec<_>>().join(" ");
        let want: Vec<String> = words.iter().map(|(w, _)| w.clone()).collect();
        prop_assert_eq!(scan(&line), Scan::Simple(want), "{:?}", line);
    }

    #[test]
    fn an_unquoted_operator_is_never_simple(
        words in prop::collection::vec((word(), 0u8..3), 1..6),
        op in prop::sample::select(OPERATORS),
        at in 0usize..6,
        glue in 0u8..3,
    ) {
        let mut rendered: Vec<String> = words.iter().map(|(w, s)| quote(w, *s)).collect();
        let at = at % (rendered.len() + 1);
        let op = (*op).to_owned();
        match glue {
            // As its own word, glued to the previous word, or to the next one.
            0 => rendered.insert(at, op),
            1 if at > 0 => rendered[at - 1].push_str(&op),
            _ if at < rendered.len() => rendered[at] = format!("{op}{}", rendered[at]),
            _ => rendered.push(op),
        }
        let line = rendered.join(" ");
        prop_assert!(!matches!(scan(&line), Scan::Simple(_)), "{:?} was called simple", line);
    }

    #[test]
    fn lexical_normalize_is_idempotent(p in "/[a-z./]{0,30}") {
        let once = lexical_normalize(&p).unwrap();
        prop_assert_eq!(lexical_normalize(&once), Some(once.clone()));
        prop_assert!(once.starts_with('/'));
        prop_assert!(once == "/" || !once.ends_with('/'));
        prop_assert!(!once.split('/').any(|c| c == "." || c == ".."));
        prop_assert!(!once.contains("//"));
    }

    #[test]
    fn normalize_never_panics(args in arb_json(), tool in prop::sample::select(TOOLS)) {
        let fs = MapFs::new().symlink("/w/l", "/w/l2").symlink("/w/l2", "/w/l");
        let ctx = NormalizeContext { workspace: "/w", home: "/home/u", fs: &fs };
        let call = ToolCall { server: None, tool, arguments: &args, definition: None };
        let action = normalize(&call, None, &ctx);
        prop_assert!(!action.parts.is_empty());
        for p in &action.parts {
            for r in &p.resources {
                prop_assert!(r.starts_with('/'));
                prop_assert_eq!(lexical_normalize(r), Some(r.clone()));
            }
        }
    }
}

const TOOLS: &[&str] = &[
    "read_file",
    "read_multiple_files",
    "move_file",
    "write_file",
    "execute_command",
    "shell",
    "git_diff",
    "git_add",
    "fetch",
    "http_request",
    "frobnicate",
];

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,20}".prop_map(Value::String),
        "(https?://|~/|\\.\\./|/|-)[a-z@:./\\\\%-]{0,16}".prop_map(Value::String),
        "[a-z ;|&$()`'\"]{0,20}".prop_map(Value::String),
    ];
    let value = leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(
                    &[
                        "path",
                        "paths",
                        "source",
                        "destination",
                        "command",
                        "args",
                        "cwd",
                        "url",
                        "redirect_url",
                        "method",
                        "repo_path",
                        "target",
                        "files",
                        "x"
                    ][..]
                )
                .prop_map(str::to_owned),
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop_oneof![
        value.clone(),
        prop::collection::btree_map(
            prop::sample::select(
                &[
                    "path",
                    "paths",
                    "source",
                    "destination",
                    "command",
                    "args",
                    "cwd",
                    "url",
                    "redirect_url",
                    "method",
                    "repo_path",
                    "target",
                    "files"
                ][..]
            )
            .prop_map(str::to_owned),
            value,
            0..5
        )
        .prop_map(|m| Value::Object(m.into_iter().collect())),
    ]
}

/// The argv `/bin/sh` builds from a line, via `printf '%s\0'` (only for lines the scanner calls
/// simple: nothing in them runs).
fn sh_argv(line: &str) -> Option<Vec<String>> {
    let script = format!("printf '%s\\0' {line}");
    let out = Command::new("timeout")
        .args(["5", "/bin/sh", "-c", &script])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let mut words: Vec<String> = text.split('\0').map(str::to_owned).collect();
    words.pop();
    Some(words)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Differential: whenever the scanner says simple, a real shell agrees on every word.
    #[test]
    fn simple_verdict_agrees_with_sh(line in "[a-zA-Z0-9 '\"\\\\=:/.,@%+_é-]{1,24}") {
        if !std::path::Path::new("/bin/sh").exists() {
            return Ok(());
        }
        if let Scan::Simple(argv) = scan(&line) {
            let theirs = sh_argv(&line);
            prop_assert_eq!(Some(argv), theirs, "{:?}", line);
        }
    }
}
