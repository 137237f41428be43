//! The policy file model (`version: 1`).
//!
//! Deserialisation is strict: every struct rejects unknown fields, and the loader
//! (`crate::load`) rejects duplicate keys and adds the semantic checks that serde cannot
//! express (duplicate rule ids, globs, variables, constraints that cannot apply, …).
//!
//! The JSON Schema (`crate::schema`) is derived from these types: a field's doc comment is
//! its description there, and the `schemars` attributes add what the types do not say
//! (non-empty lists, the known packs and annotation hints).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::action::Operation;
use crate::contracts::{Redact, ToolContract};
use crate::decision::Effect;
use crate::taint::TaintLimits;

/// The only policy format version this build understands.
pub const POLICY_VERSION: u32 = 1;

/// A policy file.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "toolgate policy")]
pub struct Policy {
    /// The format version; must be `1`.
    #[serde(deserialize_with = "crate::strict::whole_u32")]
    #[schemars(schema_with = "crate::schema::version_one")]
    pub version: u32,
    /// The effect when no rule matches; `ask` when absent.
    #[serde(default = "default_effect")]
    pub default: Effect,
    /// Semantic rules, evaluated in file order (every matching deny wins; otherwise the first
    /// match).
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Per-tool contracts keyed by tool name or glob; merged field by field over pack entries.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolContract>,
    /// Built-in packs to apply. Absent: all packs. `[]`: none.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(extend(
        "items" = {"type": "string", "enum": crate::contracts::packs::pack_names()},
        "uniqueItems" = true
    ))]
    pub packs: Option<Vec<String>>,
    /// Bounds of the taint index kept per session; defaults when absent.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub taint: Option<TaintLimits>,
    /// `secrets`: in the result of every tool (of a wrapped MCP server), replace secrets of
    /// a known shape with `[REDACTED: <what>]` before the model sees it, as a tool's
    /// `output: {redact: secrets}` does. Off when absent.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub redact_output: Option<Redact>,
}

fn default_effect() -> Effect {
    Effect::Ask
}

/// A semantic rule. Every present constraint must hold for the rule to match a part. Every
/// matching deny wins; otherwise the first matching rule in file order decides.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "rule")]
pub struct Rule {
    /// Unique id, named in decisions and the audit.
    #[schemars(length(min = 1))]
    pub id: String,
    /// What the rule decides when it matches.
    pub effect: Effect,
    /// The operations the rule applies to (at least one).
    #[schemars(length(min = 1))]
    pub operations: Vec<Operation>,
    /// A note for the people who read the policy.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub description: Option<String>,
    /// Path globs (`${workspace}`, `${home}` and a leading `~/` expand). `*` stays in one
    /// component, `**` crosses directories; `dir/**` also covers `dir`. Allow/ask: every
    /// requested resource must match; deny: any one is enough. fs.*, git.* and unknown only.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub resources: Option<Vec<String>>,
    /// Server name globs (the `--server` name given to `toolgate wrap`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub servers: Option<Vec<String>>,
    /// Tool name globs.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub tools: Option<Vec<String>>,
    /// Executable basenames (`rm` also matches `/bin/rm`); wrappers such as sudo, env and
    /// `sh -c` are looked through. shell.exec and git.* only.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub executables: Option<Vec<String>>,
    /// Exact argv lists, e.g. `[npm, test]`. shell.exec and git.* only.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub commands: Option<Vec<Vec<String>>>,
    /// Host globs such as `*.example.com` (no scheme, port or path). net.request only.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub hosts: Option<Vec<String>>,
    /// HTTP methods, e.g. GET, HEAD (case-insensitive). net.request only.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub methods: Option<Vec<String>>,
    /// Required hints of the pinned tool definition, e.g. `readOnlyHint: true`. Allow rules
    /// count only explicit values; ask/deny rules use MCP's defaults for absent hints.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::boolean_map_opt"
    )]
    #[schemars(schema_with = "crate::schema::annotation_hints")]
    pub annotations: Option<BTreeMap<String, bool>>,
    /// `true`: only the client's own built-in tools, seen through a client hook (Claude
    /// Code's `Task`, `TodoWrite`, `Bash`, …), never a tool of an MCP server, whatever its
    /// name; `false`: only MCP servers' tools.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::boolean_opt"
    )]
    pub builtin: Option<bool>,
}

/// The constraint keys of a rule, in documentation order.
pub const RULE_CONSTRAINTS: [&str; 9] = [
    "resources",
    "servers",
    "tools",
    "executables",
    "commands",
    "hosts",
    "methods",
    "annotations",
    "builtin",
];

/// The annotation hints MCP defines (`ToolAnnotations`).
pub const KNOWN_ANNOTATIONS: [&str; 4] = [
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];
