//! The policy file model (`version: 1`).
//!
//! Deserialisation is strict: every struct rejects unknown fields, and the loader
//! (`crate::load`) rejects duplicate keys and adds the semantic checks that serde cannot
//! express (duplicate rule ids, globs, variables, constraints that cannot apply, …).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::action::Operation;
use crate::contracts::ToolContract;
use crate::decision::Effect;
use crate::taint::TaintLimits;

/// The only policy format version this build understands.
pub const POLICY_VERSION: u32 = 1;

/// A policy file.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The format version; must be `1`.
    #[serde(deserialize_with = "crate::strict::whole_u32")]
    pub version: u32,
    /// The effect when no rule matches. `ask` when absent.
    #[serde(default = "default_effect")]
    pub default: Effect,
    /// Semantic rules, evaluated in file order (every matching deny wins; otherwise the first match).
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Per-tool contracts keyed by tool name or glob; merged field by field over pack entries.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolContract>,
    /// Which built-in packs apply. Absent: all packs. `[]`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packs: Option<Vec<String>>,
    /// Bounds on the taint index kept per session (`max_tokens`, `max_text_bytes`,
    /// `max_token_len`, `prefer_taint`); defaults when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taint: Option<TaintLimits>,
}

fn default_effect() -> Effect {
    Effect::Ask
}

/// One semantic rule. Every present constraint must hold for the rule to match a part.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Unique id, reported in decisions and the audit.
    pub id: String,
    pub effect: Effect,
    /// The operations this rule applies to (at least one).
    pub operations: Vec<Operation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Path globs (`${workspace}`, `${home}` and a leading `~/` expand). Allow/ask: every
    /// requested resource must match; deny: any one is enough.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<String>>,
    /// Server name globs (the `--server` name given to `toolgate wrap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub servers: Option<Vec<String>>,
    /// Tool name globs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Executable basenames (`rm` also matches `/bin/rm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executables: Option<Vec<String>>,
    /// Exact argv lists, e.g. `[npm, test]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<Vec<String>>>,
    /// Host globs such as `*.example.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<String>>,
    /// HTTP methods (upper case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub methods: Option<Vec<String>>,
    /// Required values of the pinned tool definition's annotations, e.g. `readOnlyHint: true`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::boolean_map_opt"
    )]
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
