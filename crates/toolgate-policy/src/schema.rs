//! The JSON Schema (draft 2020-12) of the policy format, for editors
//! (`# yaml-language-server: $schema=…`) and `toolgate policy schema`.
//!
//! Hand-written so that descriptions read well; a test keeps it in sync with the model:
//! every field serde accepts appears in the schema and nothing else does.

use serde_json::{Value, json};

use crate::action::Operation;
use crate::model::KNOWN_ANNOTATIONS;

/// Where the schema is published; the starter policy points editors here.
pub const SCHEMA_URL: &str =
    "https://raw.githubusercontent.com/toolgate/toolgate/main/docs/policy.schema.json";

fn string_list(description: &str) -> Value {
    json!({"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "description": description})
}

fn operations() -> Value {
    Value::Array(
        Operation::ALL
            .iter()
            .map(|o| Value::String(o.as_str().to_owned()))
            .collect(),
    )
}

fn annotations(description: &str) -> Value {
    let props: serde_json::Map<String, Value> = KNOWN_ANNOTATIONS
        .iter()
        .map(|k| ((*k).to_owned(), json!({"type": "boolean"})))
        .collect();
    json!({
        "type": "object",
        "description": description,
        "properties": props,
        "additionalProperties": false,
        "minProperties": 1
    })
}

/// The schema as a JSON value.
pub fn policy_schema() -> Value {
    let effect = json!({"type": "string", "enum": ["allow", "ask", "deny"]});
    let rule = json!({
        "type": "object",
        "description": "A semantic rule. Every present constraint must hold. Every matching deny wins; otherwise the first matching rule in file order decides.",
        "required": ["id", "effect", "operations"],
        "additionalProperties": false,
        "properties": {
            "id": {"type": "string", "minLength": 1, "description": "Unique id, named in decisions and the audit."},
            "effect": effect,
            "operations": {"type": "array", "minItems": 1, "items": {"enum": operations()}, "description": "The operations the rule applies to."},
            "description": {"type": "string"},
            "resources": string_list("Path globs (`${workspace}`, `${home}`, leading `~/`). `*` stays in one component, `**` crosses directories; `dir/**` also covers `dir`. Allow/ask: every path must match; deny: one is enough. fs.*, git.* and unknown only."),
            "servers": string_list("Server name globs (the --server name of `toolgate wrap`)."),
            "tools": string_list("Tool name globs."),
            "executables": string_list("Executable basenames (`rm` matches `/bin/rm`); wrappers such as sudo, env, sh -c are looked through. shell.exec and git.* only."),
            "commands": {"type": "array", "minItems": 1, "items": {"type": "array", "minItems": 1, "items": {"type": "string"}}, "description": "Exact argv lists, e.g. [npm, test]. shell.exec and git.* only."},
            "hosts": string_list("Host globs such as `*.example.com` (no scheme, port or path). net.request only."),
            "methods": string_list("HTTP methods, e.g. GET, HEAD. net.request only."),
            "annotations": annotations("Required hints of the pinned tool definition. Allow rules count only explicit values; ask/deny rules use MCP's defaults for absent hints."),
            "builtin": {"type": "boolean", "description": "true: only the client's own built-in tools seen through a client hook (Claude Code's Task, TodoWrite, …), never an MCP server's tool of the same name; false: only MCP servers' tools."}
        }
    });
    let contract = json!({
        "type": "object",
        "description": "A per-tool contract; merged field by field over the pack entry for the same tool.",
        "additionalProperties": false,
        "properties": {
            "exfiltrating": {"type": "boolean", "description": "The tool sends data out: its sinks go through the sink gate. `false` switches a pack's gate off explicitly."},
            "sink_params": string_list("Arguments that carry a destination."),
            "trusted_destinations": string_list("Destinations that always pass: exact values or globs (`*@corp.com`, `https://hooks.corp.com/*`)."),
            "on_tainted": {"type": "string", "enum": ["deny", "ask"], "description": "What a destination seen only in untrusted tool output gets (default deny)."},
            "path_params": string_list("Arguments that hold a path or a list of paths."),
            "allowed_path_prefixes": string_list("Every path must be inside one of these (canonical, component-wise)."),
            "arg_patterns": {"type": "object", "additionalProperties": {"type": "string"}, "description": "{arg: regex}: full match."},
            "arg_values": {"type": "object", "additionalProperties": {"type": "array"}, "description": "{arg: [allowed literals]}."},
            "max_calls": {"type": "integer", "minimum": 0, "description": "Calls per session (attempts count); 0 forbids the tool."},
            "budget": {"type": "object", "required": ["max", "per"], "additionalProperties": false, "properties": {"max": {"type": "integer", "minimum": 0}, "per": {"type": "string", "description": "A duration such as 10m or 1h."}}},
            "output": {"oneOf": [
                {"type": "string", "enum": ["trusted", "untrusted"]},
                {"type": "object", "required": ["trusted_fields"], "additionalProperties": false, "properties": {
                    "trusted_fields": string_list("Fields of the output that are trusted, in structuredContent and in text content holding a JSON (or YAML) document: dotted paths such as `organizer.email`, `participants[*]`, `messages[*].sender`, or JSON pointers such as `/people/0/email`."),
                    "text_format": {"type": "string", "enum": ["json", "yaml"], "description": "How text content is parsed (default json). Text that does not parse is untrusted as a whole."},
                    "trusted_wins": {"type": "boolean", "description": "A value in a trusted field that an untrusted field of the same output repeats counts as trusted (default false: untrusted wins)."}
                }}
            ], "description": "Trust label of the tool's output (default untrusted)."},
            "operation": {"enum": operations(), "description": "The tool's primary operation, for tools the built-in adapters do not know."},
            "command_param": {"type": "string"},
            "args_param": {"type": "string"},
            "cwd_param": {"type": "string"},
            "url_params": string_list("Arguments holding URLs."),
            "method_param": {"type": "string"},
            "param_operations": {"type": "object", "additionalProperties": {"enum": operations()}, "description": "Per-argument operation, e.g. {source: fs.delete}."},
            "git_subcommand": {"type": "string"},
            "annotations": annotations("Expected hints of the pinned definition; a definition that says otherwise makes every call ask."),
            "recursive": {
                "type": "object",
                "description": "The tool reaches beneath a directory (a recursive search or listing): deny rules meet every path their pattern can match beneath it, allow rules must cover all of it. Filters narrow only where they provably exclude a pattern.",
                "required": ["params"],
                "additionalProperties": false,
                "properties": {
                    "params": string_list("Arguments naming a directory searched or listed recursively (a regular file is a plain read)."),
                    "name_globs": string_list("Arguments holding file-name globs in the manner of ripgrep's --glob (`*.rs`, several separated by spaces or commas; a leading `!` narrows nothing)."),
                    "relative_globs": string_list("Arguments holding a glob relative to the directory (`src/**/*.rs`): literal leading directories narrow the directory, the last component the names."),
                    "types": string_list("Arguments holding ripgrep file-type names (`rust`, `py`); an unknown type narrows nothing."),
                    "workspace_default": {"type": "boolean", "description": "Without a directory argument the call searches the workspace."}
                }
            }
        }
    });
    let taint = json!({
        "type": "object",
        "description": "Bounds of the per-session taint index. Past them values degrade to unproven (ask), never to trusted.",
        "additionalProperties": false,
        "properties": {
            "max_tokens": {"type": "integer", "minimum": 0},
            "max_text_bytes": {"type": "integer", "minimum": 0},
            "max_token_len": {"type": "integer", "minimum": 0},
            "prefer_taint": {"type": "boolean"},
            "window_bytes": {"type": "integer", "minimum": 0, "description": "Bytes of the most recent untrusted text searched verbatim for destinations of any shape (default 4 MiB; 0 turns the search off)."}
        }
    });
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_URL,
        "title": "toolgate policy",
        "type": "object",
        "required": ["version"],
        "additionalProperties": false,
        "properties": {
            "version": {"const": 1},
            "default": {"type": "string", "enum": ["allow", "ask", "deny"], "default": "ask", "description": "The effect when no rule matches."},
            "rules": {"type": "array", "items": {"$ref": "#/$defs/rule"}},
            "tools": {"type": "object", "additionalProperties": {"$ref": "#/$defs/contract"}, "description": "Per-tool contracts keyed by tool name or glob."},
            "packs": {"type": "array", "items": {"type": "string", "enum": crate::contracts::packs::pack_names()}, "uniqueItems": true, "description": "Built-in packs to apply (all when absent)."},
            "taint": {"$ref": "#/$defs/taint"}
        },
        "$defs": {"rule": rule, "contract": contract, "taint": taint}
    })
}

/// The schema as pretty JSON text.
pub fn policy_schema_text() -> String {
    serde_json::to_string_pretty(&policy_schema()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The fields serde accepts for `T`, read from its unknown-field error.
    fn serde_fields<T: serde::de::DeserializeOwned + std::fmt::Debug>() -> BTreeSet<String> {
        let err = serde_saphyr::from_str::<T>("__probe__: 1\n").unwrap_err();
        match err.without_snippet() {
            serde_saphyr::Error::SerdeUnknownField { expected, .. } => {
                expected.iter().map(|s| (*s).to_owned()).collect()
            }
            other => panic!("unexpected error {other:?}"),
        }
    }

    fn schema_fields(v: &Value) -> BTreeSet<String> {
        v["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    #[test]
    fn schema_lists_exactly_the_model_fields() {
        let s = policy_schema();
        assert_eq!(serde_fields::<crate::model::Policy>(), schema_fields(&s));
        assert_eq!(
            serde_fields::<crate::model::Rule>(),
            schema_fields(&s["$defs"]["rule"])
        );
        assert_eq!(
            serde_fields::<crate::contracts::ToolContract>(),
            schema_fields(&s["$defs"]["contract"])
        );
        assert_eq!(
            serde_fields::<crate::taint::TaintLimits>(),
            schema_fields(&s["$defs"]["taint"])
        );
    }

    #[test]
    fn starter_points_at_the_schema() {
        let starter = include_str!("starter.yaml");
        assert!(starter.starts_with(&format!("# yaml-language-server: $schema={SCHEMA_URL}")));
    }
}
