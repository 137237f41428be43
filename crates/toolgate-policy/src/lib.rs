#![doc = include_str!("../README.md")]
// A type that a public signature mentions but no public path names is a gap in the surface
// below: caught at compile time, not by a caller.
#![warn(unnameable_types)]

// Every module is private: what other crates use is re-exported below, at the root or in a
// small curated module. A curated module keeps the name callers already use (`contracts`,
// `diag`, …), so the module it curates is declared under `<name>_impl`, from the same file.
// The groups' comments are plain comments: rustdoc would prepend a doc comment on a
// re-export to each re-exported item's own documentation.
mod action;
mod beneath;
mod blob;
#[path = "cases.rs"]
mod cases_impl;
mod command_sink;
#[path = "contracts/mod.rs"]
mod contracts_impl;
mod decision;
#[path = "diag.rs"]
mod diag_impl;
mod eval;
#[path = "explain.rs"]
mod explain_impl;
mod fingerprint;
mod fsfacts;
mod load;
mod model;
mod normalize;
#[path = "protect.rs"]
mod protect_impl;
mod rules;
mod schema;
pub mod secret_shapes;
mod secrets;
mod session;
mod strict;
mod taint;

// Loading: a policy file read strictly into a `Policy` (or `diag::Diagnostics`), and the
// starter policy of `toolgate policy init`.
pub use load::{LoadedPolicy, STARTER_POLICY, load};

// The model: the policy file as deserialised. (Nothing in the workspace reads
// `RULE_CONSTRAINTS`; it stays as public as it was, rather than dead code.)
pub use model::{Policy, RULE_CONSTRAINTS, Rule};

// Actions & normalisation: a tool call turned into the parts it touches (paths, commands,
// git operations, URLs), and the built-in mappings that recognise tools by name.
pub use action::{Action, Beneath, Network, Operation, Part, UnknownOperation};
pub use normalize::{
    NormalizeContext, RecursiveMapping, ToolCall, ToolMapping, UrlError, base_tool_name,
    builtin_mapping, normalize, normalize_url,
};

// Filesystem facts: how paths resolve, through a trait the caller implements (`LexicalFs` and
// `MapFs` for tests and pure uses).
pub use fsfacts::{FsFacts, LexicalFs, Listing, MapFs, ServerProcess, lexical_normalize};

// Evaluation & decisions: the compiled `Engine`, what it decides and why; `combine` and
// `describe_part` for a caller that decides a call of its own (the runtime's resource reads)
// the engine's way; the glob algebra recursive parts are judged by.
pub use beneath::{covers_beneath, meets_beneath};
pub use decision::{Contract, ContractResult, Effect, SinkFinding, SinkVerdict};
pub use eval::{Decision, Engine, RulesOutcome, combine, describe_part};
pub use rules::{CallFacts, Vars};

// Sessions & taint: one agent session's pins, budgets, approvals and taint index, the
// fingerprint that pins a tool definition, and the command sink's reading of a shell call.
pub use command_sink::{collect_strings, tainted_in_command};
pub use fingerprint::{FINGERPRINT_FIELDS, fingerprint};
pub use secrets::{SECRET_FILE_GLOBS, secret_read};
pub use session::{
    ApprovalScope, MAX_CHECKED_BYTES, MAX_PHRASE_WORDS, MAX_PROMPT_WORDS, MAX_SECRETS, NewSecret,
    PinReport, PinState, RecordedOutput, SecretCheck, SecretFinding, SecretSource, Session,
    SessionLimits, VouchKey, phrase_key, prompt_digests, secret_digest, token_digest,
};
pub use taint::{
    OutputTrust, Provenance, TaintIndex, TaintLimits, TaintSource, canonical_destination,
    tokenize_destinations,
};

// Schema: the JSON Schema of the policy format.
pub use schema::{SCHEMA_URL, policy_schema, policy_schema_text, root_schema};

/// Located diagnostics: what a policy (or a cases file, or the gateway's configuration)
/// that does not load reports, with `file:line:column`, a snippet and a `help:` line.
pub mod diag {
    pub use crate::diag_impl::{
        Diagnostic, Diagnostics, Pos, Related, Severity, SourceMap, did_you_mean, pos_at,
    };
}

/// The YAML conventions of a policy file, for another configuration file read the same way
/// (the gateway's): the parser's options, strict scalars, and serde errors as diagnostics.
pub mod yaml {
    pub use crate::load::yaml_error;
    pub use crate::strict::{present, whole_u32, whole_usize_opt, yaml_options};
}

/// The shell scanner behind the normalisation of commands.
pub mod shell {
    pub use crate::normalize::{Scan, look_through, scan};
}

/// Contracts & packs: per-tool contracts (a policy's `tools:` entries, merged over the
/// built-in packs), and the heuristics for tools with no entry.
pub mod contracts {
    pub use crate::contracts_impl::{
        BudgetSpec, Contracts, EntrySource, Issue, OnTainted, OutputLabel, OutputSpec,
        RecursiveSpec, Redact, RedactOutput, ResolvedTool, Severity, TextFormat, ToolContract,
        TrustedFields, parse_duration,
    };

    /// The built-in packs: contracts for well-known MCP servers, embedded in the binary.
    pub mod packs {
        pub use crate::contracts_impl::packs::{PACKS, Pack, load_pack, pack_names, parsed_pack};
    }

    /// What a tool or argument name suggests, for tools no contract describes.
    pub mod heuristics {
        pub use crate::contracts_impl::heuristics::{
            is_destination_param, is_destructive_name, is_exfiltrating_name, is_recipient_param,
        };
    }
}

/// Self-protection: toolgate's own files, which the binary names and the engine denies to
/// a governed agent.
pub mod protect {
    pub use crate::protect_impl::{
        Protected, ProtectedKind, Protections, SELF_PROTECTION_RULE, escape,
    };
}

/// The cases files of `toolgate policy test`, and their runner.
pub mod cases {
    pub use crate::cases_impl::{
        Case, CasesFile, Expect, Step, parse_cases, run_case, session_for,
    };
}

/// Explain: a decision as text for people and as the JSON of `toolgate policy explain --json`.
pub mod explain {
    pub use crate::explain_impl::{to_json, to_text};
}
