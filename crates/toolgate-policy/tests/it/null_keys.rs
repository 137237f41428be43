//! A key written without a value (YAML null) is an error, never an absent key: read as
//! absent, `resources:` whose list was commented out would make an allow rule match every
//! path, `allowed_path_prefixes:` would lift a contract's limit.

use toolgate_policy::load;

fn error_of(yaml: &str) -> String {
    match load(yaml, "p.yaml") {
        Ok(_) => panic!("loaded:\n{yaml}"),
        Err(diags) => format!("{diags:?}"),
    }
}

#[test]
fn every_rule_constraint_without_a_value_is_refused() {
    for key in [
        "resources",
        "servers",
        "tools",
        "executables",
        "commands",
        "hosts",
        "methods",
        "annotations",
        "builtin",
        "description",
    ] {
        let yaml = format!(
            "version: 1\ndefault: ask\nrules:\n  - id: r\n    effect: allow\n    operations: [fs.read]\n    {key}:\n"
        );
        let err = error_of(&yaml);
        assert!(
            err.contains("no value") || err.contains("null") || err.contains("expected"),
            "{key}: {err}"
        );
    }
    // Written with a value, the same rule loads.
    load(
        "version: 1\ndefault: ask\nrules:\n  - id: r\n    effect: allow\n    operations: [fs.read]\n    resources: ['${workspace}/**']\n",
        "p.yaml",
    )
    .unwrap_or_else(|d| panic!("{d:?}"));
}

#[test]
fn every_contract_key_without_a_value_is_refused() {
    for key in [
        "sink_params",
        "trusted_destinations",
        "allowed_path_prefixes",
        "path_params",
        "arg_patterns",
        "arg_values",
        "max_calls",
        "budget",
        "output",
        "on_tainted",
        "exfiltrating",
    ] {
        let yaml = format!("version: 1\ndefault: ask\ntools:\n  write_file:\n    {key}:\n");
        let err = error_of(&yaml);
        assert!(
            err.contains("no value") || err.contains("null") || err.contains("expected"),
            "{key}: {err}"
        );
    }
}

#[test]
fn top_level_keys_without_a_value_are_refused() {
    for key in ["packs", "taint", "redact_output"] {
        let yaml = format!("version: 1\ndefault: ask\n{key}:\n");
        let err = error_of(&yaml);
        assert!(
            err.contains("no value") || err.contains("expected"),
            "{key}: {err}"
        );
    }
}

#[test]
fn output_redaction_loads_and_is_strict() {
    for ok in [
        "version: 1\ndefault: ask\ntools:\n  fetch:\n    output: {redact: secrets}\n",
        "version: 1\ndefault: ask\ntools:\n  fetch:\n    output: {trusted_fields: [a], redact: secrets}\n",
        "version: 1\ndefault: ask\nredact_output: secrets\n",
    ] {
        load(ok, "p.yaml").unwrap_or_else(|d| panic!("{ok}: {d:?}"));
    }
    for (bad, says) in [
        ("output: {redact: }", "no value"),
        ("output: {redact: everything}", "everything"),
        (
            "output: {redact: secrets, trusted: true}",
            "unknown field `trusted`",
        ),
        ("output: {}", "`trusted_fields` or `redact`"),
        (
            "output: {text_format: yaml, redact: secrets}",
            "trusted_fields",
        ),
        ("output: {trusted_fields: [a], redact: null}", "no value"),
    ] {
        let yaml = format!("version: 1\ndefault: ask\ntools:\n  fetch:\n    {bad}\n");
        let err = error_of(&yaml);
        assert!(err.contains(says), "{bad}: {err}");
    }
    let err = error_of("version: 1\ndefault: ask\nredact_output: all\n");
    assert!(err.contains("all"), "{err}");
}
