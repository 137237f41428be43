//! `ToolContract`: strict parsing, field-by-field merge (with proptests), validation issues,
//! tool-name glob precedence, mapping, packs.

use std::collections::BTreeMap;

use proptest::prelude::*;
use toolgate_policy::Operation;
use toolgate_policy::contracts::heuristics::is_exfiltrating_name;
use toolgate_policy::contracts::packs::{load_pack, pack_names};
use toolgate_policy::contracts::{
    BudgetSpec, Contracts, EntrySource, OnTainted, OutputLabel, OutputSpec, Severity, ToolContract,
};

fn parse(yaml: &str) -> Result<ToolContract, String> {
    serde_saphyr::from_str::<ToolContract>(yaml).map_err(|e| e.to_string())
}

fn user(yaml: &str) -> BTreeMap<String, ToolContract> {
    serde_saphyr::from_str(yaml).unwrap()
}

#[test]
fn parses_every_field() {
    let c = parse(
        r#"
exfiltrating: true
sink_params: [to]
trusted_destinations: ["*@corp.com"]
on_tainted: ask
path_params: [file]
allowed_path_prefixes: ["${workspace}/out"]
arg_patterns: {branch: "feature/[a-z-]+"}
arg_values: {mode: [fast, 3, true]}
max_calls: 2
budget: {max: 5, per: 10m}
output: {trusted_fields: [channels.id, /users/0/email]}
operation: fs.write
command_param: cmd
args_param: args
cwd_param: cwd
url_params: [target]
method_param: method
param_operations: {source: fs.delete}
git_subcommand: diff
annotations: {readOnlyHint: true}
"#,
    )
    .unwrap();
    assert_eq!(c.on_tainted, Some(OnTainted::Ask));
    assert_eq!(
        c.budget,
        Some(BudgetSpec {
            max: 5,
            per: "10m".into()
        })
    );
    assert_eq!(c.operation, Some(Operation::FsWrite));
    assert!(matches!(c.output, Some(OutputSpec::Fields(_))));
    assert_eq!(
        parse("output: trusted").unwrap().output,
        Some(OutputSpec::Label(OutputLabel::Trusted))
    );
    assert!(
        c.validate(&["tools".into(), "x".into()])
            .iter()
            .all(|i| i.severity != Severity::Error)
    );
}

#[test]
fn rejects_typos_and_wrong_types() {
    for bad in [
        "allowed_path_prefix: [/w]",
        "exfiltrating: yes please",
        "on_tainted: allow",
        "max_calls: -1",
        "budget: {max: 5}",
        "budget: {max: 5, per: 1m, burst: 2}",
        "output: sometimes",
        "output: {trusted_field: [a]}",
        "operation: fs.readwrite",
    ] {
        assert!(parse(bad).is_err(), "accepted `{bad}`");
    }
}

#[test]
fn validate_table() {
    let cases: &[(&str, &str, Severity)] = &[
        ("sink_params: []", "sink_params", Severity::Error),
        (
            "trusted_destinations: ['*']",
            "trusted_destinations",
            Severity::Error,
        ),
        (
            "trusted_destinations: ['*corp.com']",
            "trusted_destinations",
            Severity::Warning,
        ),
        (
            "trusted_destinations: ['a[']",
            "trusted_destinations",
            Severity::Error,
        ),
        (
            "allowed_path_prefixes: [relative/dir]\npath_params: [p]",
            "allowed_path_prefixes",
            Severity::Error,
        ),
        (
            "allowed_path_prefixes: ['${cwd}/x']\npath_params: [p]",
            "allowed_path_prefixes",
            Severity::Error,
        ),
        ("arg_patterns: {x: '('}", "arg_patterns", Severity::Error),
        (
            "arg_patterns: {x: 'a{1000}{1000}'}",
            "arg_patterns",
            Severity::Error,
        ),
        ("arg_values: {x: []}", "arg_values", Severity::Error),
        ("arg_values: {x: [[1]]}", "arg_values", Severity::Error),
        ("budget: {max: 1, per: soon}", "budget", Severity::Error),
        ("budget: {max: 1, per: 0s}", "budget", Severity::Error),
        ("output: {trusted_fields: []}", "output", Severity::Error),
        (
            "output: {trusted_fields: ['a..b']}",
            "output",
            Severity::Error,
        ),
        (
            "output: {trusted_fields: ['participants[x]']}",
            "output",
            Severity::Error,
        ),
        (
            "output: {trusted_fields: ['participants[*']}",
            "output",
            Severity::Error,
        ),
        (
            "exfiltrating: false\nsink_params: [to]",
            "sink_params",
            Severity::Warning,
        ),
        (
            "annotations: {readonly: true}",
            "annotations",
            Severity::Error,
        ),
        (
            "operation: fs.read\ncommand_param: cmd",
            "command_param",
            Severity::Warning,
        ),
    ];
    for (yaml, key, severity) in cases {
        let c = parse(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
        let issues = c.validate(&["tools".into(), "t".into()]);
        let hit = issues
            .iter()
            .find(|i| i.path.get(2).map(String::as_str) == Some(*key))
            .unwrap_or_else(|| panic!("{yaml}: no issue at {key}: {issues:?}"));
        assert_eq!(hit.severity, *severity, "{yaml}: {hit:?}");
        assert_eq!(hit.path[..2], ["tools".to_owned(), "t".to_owned()]);
        assert!(
            hit.message
                .chars()
                .find(|c| c.is_alphabetic())
                .unwrap()
                .is_lowercase(),
            "{}",
            hit.message
        );
    }
    let glob_off = parse("exfiltrating: false").unwrap();
    let issues = glob_off.validate(&["tools".into(), "slack_*".into()]);
    assert!(
        issues.iter().any(|i| i.severity == Severity::Warning),
        "{issues:?}"
    );
    assert!(
        glob_off
            .validate(&["tools".into(), "slack_post_message".into()])
            .is_empty()
    );
    let errs = Contracts::compile(&user("t:\n  arg_patterns: {x: '('}\n"), &[]).unwrap_err();
    assert_eq!(errs[0].path, ["tools", "t", "arg_patterns", "x"]);
    // A bad field path is located at its element, with a help line.
    let errs = Contracts::compile(
        &user("t:\n  output: {trusted_fields: [organizer.email, 'messages[*]x']}\n"),
        &[],
    )
    .unwrap_err();
    assert_eq!(
        errs[0].path,
        ["tools", "t", "output", "trusted_fields", "1"]
    );
    assert!(
        errs[0].message.contains("`messages[*]x`"),
        "{}",
        errs[0].message
    );
    assert!(
        errs[0]
            .help
            .as_deref()
            .unwrap()
            .contains("participants[*].email")
    );
    // `text_format` takes `json` or `yaml`; `trusted_wins` a boolean.
    assert!(parse("output: {trusted_fields: [a], text_format: yaml, trusted_wins: true}").is_ok());
    assert!(parse("output: {trusted_fields: [a], text_format: xml}").is_err());
    assert!(parse("output: {trusted_fields: [a], trusted_wins: [true]}").is_err());
    assert!(parse("output: {trusted_fields: [a], bogus: 1}").is_err());
    assert!(parse("output: trustd").is_err());
    assert!(Contracts::compile(&BTreeMap::new(), &["nope".into()]).is_err());
}

#[test]
fn merge_keeps_pack_protections() {
    let pack = parse("exfiltrating: true\nsink_params: [to, cc]\nmax_calls: 5").unwrap();
    let over = parse("trusted_destinations: ['*@corp.com']\nsink_params: [recipients]").unwrap();
    let m = over.merge_over(&pack);
    assert_eq!(m.exfiltrating, Some(true));
    assert_eq!(m.sink_params.unwrap(), ["to", "cc", "recipients"]);
    assert_eq!(m.max_calls, Some(5));
    assert_eq!(m.trusted_destinations.unwrap(), ["*@corp.com"]);
    let off = parse("exfiltrating: false").unwrap().merge_over(&pack);
    assert_eq!(off.exfiltrating, Some(false));
}

#[test]
fn exact_name_beats_glob_and_specific_glob_beats_general() {
    let c = Contracts::compile(
        &user(
            r#"
"*": {max_calls: 100}
"send_*": {max_calls: 10, on_tainted: ask}
send_email: {max_calls: 1}
"#,
        ),
        &pack_names(),
    )
    .unwrap();
    let r = c.lookup("send_email");
    assert_eq!(r.contract().max_calls, Some(1));
    assert_eq!(
        r.contract().on_tainted,
        Some(OnTainted::Ask),
        "fields the exact entry leaves out come from globs"
    );
    assert_eq!(r.contract().exfiltrating, Some(true), "pack field survives");
    assert!(matches!(r.sources().last(), Some(EntrySource::User { key }) if key == "send_email"));
    assert_eq!(c.lookup("send_sms").contract().max_calls, Some(10));
    assert_eq!(c.lookup("anything").contract().max_calls, Some(100));
    assert!(c.lookup("send_sms").has_entry());
}

#[test]
fn heuristics_only_when_nothing_else_says() {
    let c = Contracts::compile(&BTreeMap::new(), &[]).unwrap();
    let r = c.lookup("delete_record");
    assert!(!r.has_entry());
    assert_eq!(r.contract().budget.as_ref().unwrap().max, 10);
    assert_eq!(c.lookup("publish_post").contract().exfiltrating, Some(true));
    assert_eq!(
        *c.lookup("confirm_order").contract(),
        ToolContract::default()
    );
    // An entry that says nothing about exfiltration keeps the heuristic.
    let c = Contracts::compile(&user("send_invoice: {max_calls: 3}"), &[]).unwrap();
    assert_eq!(c.lookup("send_invoice").contract().exfiltrating, Some(true));
}

#[test]
fn mapping_from_entry_over_builtin() {
    let c = Contracts::compile(
        &user("run_it: {operation: shell.exec, command_param: cmd}\nread_file: {path_params: [extra]}"),
        &pack_names(),
    )
    .unwrap();
    let m = c.lookup("run_it").mapping().cloned().unwrap();
    assert_eq!(m.operation, Some(Operation::ShellExec));
    assert_eq!(m.command_param.as_deref(), Some("cmd"));
    let m = c.lookup("read_file").mapping().cloned().unwrap();
    assert_eq!(m.operation, Some(Operation::FsRead));
    assert_eq!(m.path_params, ["path", "extra"]);
    assert!(c.lookup("totally_unknown").mapping().is_none());
}

#[test]
fn every_pack_parses_validates_and_compiles() {
    for name in pack_names() {
        let pack = load_pack(&name).unwrap();
        assert!(!pack.tools.is_empty(), "{name}");
        for (tool, c) in &pack.tools {
            let issues = c.validate(&["packs".into(), name.clone(), tool.clone()]);
            assert!(issues.is_empty(), "{name}/{tool}: {issues:?}");
            // A pack never leaves a sending tool to chance: exfiltration is stated.
            assert!(
                c.exfiltrating.is_some(),
                "{name}/{tool} does not state `exfiltrating`"
            );
            if is_exfiltrating_name(tool) && c.exfiltrating == Some(false) {
                panic!("{name}/{tool} switches the heuristic off");
            }
        }
    }
    Contracts::compile(&BTreeMap::new(), &pack_names()).unwrap();
}

fn opt_list() -> impl Strategy<Value = Option<Vec<String>>> {
    proptest::option::of(proptest::collection::vec("[a-c]{1,2}", 0..3))
}

fn contract() -> impl Strategy<Value = ToolContract> {
    (
        proptest::option::of(any::<bool>()),
        opt_list(),
        opt_list(),
        proptest::option::of(prop_oneof![Just(OnTainted::Deny), Just(OnTainted::Ask)]),
        opt_list(),
        proptest::option::of(0u64..5),
        proptest::option::of(proptest::collection::btree_map("[a-c]", "[a-c]+", 0..3)),
    )
        .prop_map(
            |(ex, sinks, trusted, on_tainted, paths, max, patterns)| ToolContract {
                exfiltrating: ex,
                sink_params: sinks,
                trusted_destinations: trusted,
                on_tainted,
                path_params: paths,
                max_calls: max,
                arg_patterns: patterns,
                ..ToolContract::default()
            },
        )
}

proptest! {
    #[test]
    fn merge_is_field_wise(base in contract(), over in contract()) {
        let m = over.merge_over(&base);
        prop_assert_eq!(m.exfiltrating, over.exfiltrating.or(base.exfiltrating));
        prop_assert_eq!(m.on_tainted, over.on_tainted.or(base.on_tainted));
        prop_assert_eq!(m.max_calls, over.max_calls.or(base.max_calls));
        prop_assert_eq!(m.trusted_destinations.as_ref(), over.trusted_destinations.as_ref().or(base.trusted_destinations.as_ref()));
        // Lists of arguments to inspect only grow.
        for side in [&base.sink_params, &over.sink_params] {
            for p in side.iter().flatten() {
                prop_assert!(m.sink_params.as_ref().is_some_and(|l| l.contains(p)));
            }
        }
        for side in [&base.path_params, &over.path_params] {
            for p in side.iter().flatten() {
                prop_assert!(m.path_params.as_ref().is_some_and(|l| l.contains(p)));
            }
        }
        // Per-key map merge: the user's key wins, the pack's other keys stay.
        for (k, v) in base.arg_patterns.iter().flatten() {
            let want = over.arg_patterns.as_ref().and_then(|o| o.get(k)).unwrap_or(v);
            prop_assert_eq!(m.arg_patterns.as_ref().and_then(|x| x.get(k)), Some(want));
        }
        // Merging over nothing changes nothing; merging nothing over keeps the base.
        prop_assert_eq!(&over.merge_over(&ToolContract::default()), &over);
        prop_assert_eq!(&ToolContract::default().merge_over(&base), &base);
        // Never switches the gate off without an explicit `false`.
        if base.exfiltrating == Some(true) && over.exfiltrating.is_none() {
            prop_assert_eq!(m.exfiltrating, Some(true));
        }
    }
}
