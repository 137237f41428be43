//! Per-tool contracts: the `tools:` entries of a policy and the embedded packs.
//!
//! A [`ToolContract`] says what one tool (or a glob of tools) is: whether it exfiltrates and
//! through which arguments, which destinations are trusted, which paths and argument values
//! it may use, how often it may be called, how much its output is trusted, and how to read
//! its arguments (the [`ToolMapping`] given to normalisation).
//!
//! # Layering and precedence
//!
//! For a tool name the contract is merged **field by field**, later layers over earlier ones:
//!
//! 1. heuristics from the tool name (and its schema), see [`heuristics`];
//! 2. pack glob entries (least specific first), then the pack entry with the exact name;
//! 3. user glob entries (least specific first), then the user entry with the exact name.
//!
//! An exact name therefore beats any glob, and a more specific glob (more literal characters)
//! beats a less specific one; between equally specific globs the later key in sorted order
//! wins. A field that a layer leaves out keeps the lower layer's value: a user entry that adds
//! `trusted_destinations` keeps the pack's `exfiltrating` and `sink_params`. Turning a
//! protection off takes an explicit value (`exfiltrating: false`). The lists of arguments to
//! inspect (`sink_params`, `path_params`, `url_params`) are united, never replaced, so no
//! layer can drop a sink another layer declared; every other field is replaced as a whole
//! (maps such as `arg_patterns` per key).

mod check;
pub(crate) mod fields;
pub mod heuristics;
pub mod packs;
mod sink;
pub(crate) use sink::{secret_reason, shape_reason};
mod validate;

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::action::Operation;
use crate::normalize::ToolMapping;

pub(crate) use check::Resolution;
pub use check::{Contracts, EntrySource, ResolvedTool};

/// What the sink gate does with a destination that came from untrusted tool output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum OnTainted {
    Deny,
    Ask,
}

/// A windowed call budget: at most `max` calls per `per` (a humantime duration, `10m`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct BudgetSpec {
    /// At most this many calls in the window.
    #[serde(deserialize_with = "crate::strict::whole")]
    pub max: u64,
    /// The window: a duration such as `10m` or `1h`.
    pub per: String,
}

/// `output: trusted | untrusted | secret`: the whole output is trusted or not; `secret`: it
/// is untrusted and its secret values may never leave (a sink call carrying one is denied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum OutputLabel {
    Trusted,
    Untrusted,
    Secret,
}

/// What `redact:` (and a policy's `redact_output:`) replaces in a tool's result before the
/// model sees it: `secrets`, the secrets of a known shape ([`crate::secret_shapes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum Redact {
    /// Private key blocks, cloud keys, provider tokens, JWTs and passwords in URLs.
    Secrets,
}

/// How the text content blocks of a tool with `trusted_fields` are read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum TextFormat {
    /// JSON (the default).
    #[default]
    Json,
    /// YAML (a JSON document is YAML too). A document with a comment is not read.
    Yaml,
}

/// `output: {trusted_fields: [...], text_format: json|yaml, trusted_wins: bool}`: only these
/// fields of the output are trusted, in `structuredContent` and in every text content block
/// that holds a JSON (or YAML) document. Text that does not parse is untrusted as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct TrustedFields {
    /// Fields of the output that are trusted, in `structuredContent` and in text content
    /// holding a JSON (or YAML) document: dotted paths such as `organizer.email`,
    /// `participants[*]`, `messages[*].sender` (a name walks arrays element by element), or
    /// JSON pointers such as `/people/0/email`.
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub trusted_fields: Vec<String>,
    /// Fields (paths as in `trusted_fields`) that name an existing counterparty which
    /// someone outside can still put there: the sender of an incoming transfer or of a
    /// mail. A destination read from one neither vouches nor is denied: the call asks, and
    /// the question says which field it came from. A value that an untrusted part of the
    /// same output repeats is tainted as usual.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(inner(length(min = 1)))]
    pub ask_fields: Option<Vec<String>>,
    /// How text content is parsed: `json` (the default) or `yaml`. Text that does not parse
    /// is untrusted as a whole.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub text_format: Option<TextFormat>,
    /// A value in a trusted field that the same output also holds in an untrusted field:
    /// trusted (`true`) or untrusted (`false`, the default: an injection that repeats a
    /// participant's address does not get it vouched for).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::boolean_opt"
    )]
    pub trusted_wins: Option<bool>,
    /// `secrets`: replace secrets of a known shape in the result (text content and
    /// `structuredContent` strings) with `[REDACTED: <what>]` before the model sees it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub redact: Option<Redact>,
}

/// `output: {redact: secrets}`: the output is untrusted as a whole (as `output: untrusted`),
/// and secrets of a known shape in it are replaced before the model sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct RedactOutput {
    /// `secrets`: replace secrets of a known shape in the result (text content and
    /// `structuredContent` strings) with `[REDACTED: <what>]` before the model sees it.
    pub redact: Redact,
}

/// Every key an `output:` map may have, read in one pass and then sorted into
/// [`TrustedFields`] or [`RedactOutput`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputMap {
    #[serde(default, deserialize_with = "crate::strict::present")]
    trusted_fields: Option<Vec<String>>,
    #[serde(default, deserialize_with = "crate::strict::present")]
    ask_fields: Option<Vec<String>>,
    #[serde(default, deserialize_with = "crate::strict::present")]
    text_format: Option<TextFormat>,
    #[serde(default, deserialize_with = "crate::strict::boolean_opt")]
    trusted_wins: Option<bool>,
    #[serde(default, deserialize_with = "crate::strict::present")]
    redact: Option<Redact>,
}

impl OutputMap {
    fn into_spec<E: serde::de::Error>(self) -> Result<OutputSpec, E> {
        match self.trusted_fields {
            Some(trusted_fields) => Ok(OutputSpec::Fields(TrustedFields {
                trusted_fields,
                ask_fields: self.ask_fields,
                text_format: self.text_format,
                trusted_wins: self.trusted_wins,
                redact: self.redact,
            })),
            // `text_format` and `trusted_wins` say how `trusted_fields` are read.
            None if self.text_format.is_some()
                || self.trusted_wins.is_some()
                || self.ask_fields.is_some() =>
            {
                Err(E::missing_field("trusted_fields"))
            }
            None => match self.redact {
                Some(redact) => Ok(OutputSpec::Redact(RedactOutput { redact })),
                None => Err(E::custom(
                    "an `output` map needs `trusted_fields` or `redact`",
                )),
            },
        }
    }
}

impl TrustedFields {
    /// The text format (JSON unless the contract says YAML).
    pub fn format(&self) -> TextFormat {
        self.text_format.unwrap_or_default()
    }

    /// Whether a trusted value wins over the same value in an untrusted field.
    pub fn trusted_wins(&self) -> bool {
        self.trusted_wins == Some(true)
    }

    /// The `ask_fields` (none unless the contract names some).
    pub fn ask_fields(&self) -> &[String] {
        self.ask_fields.as_deref().unwrap_or(&[])
    }
}

/// The trust label of a tool's output.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(untagged)]
#[schemars(inline)]
pub enum OutputSpec {
    Label(OutputLabel),
    Fields(TrustedFields),
    Redact(RedactOutput),
}

impl OutputSpec {
    /// What the output's redaction replaces, if it has one.
    pub fn redact(&self) -> Option<Redact> {
        match self {
            OutputSpec::Label(_) => None,
            OutputSpec::Fields(f) => f.redact,
            OutputSpec::Redact(r) => Some(r.redact),
        }
    }
}

/// A label or a map, each read by its own deserializer so that a mistake inside the map
/// (`text_format: xml`, an unknown key) is reported as itself, where it is, rather than as
/// "did not match any variant".
impl<'de> Deserialize<'de> for OutputSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = OutputSpec;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "`trusted`, `untrusted`, `secret`, `{trusted_fields: [...]}` or `{redact: secrets}`",
                )
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<OutputSpec, E> {
                OutputLabel::deserialize(serde::de::value::StrDeserializer::<E>::new(v))
                    .map(OutputSpec::Label)
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<OutputSpec, A::Error> {
                OutputMap::deserialize(serde::de::value::MapAccessDeserializer::new(map))?
                    .into_spec()
            }
        }
        d.deserialize_any(V)
    }
}

/// A per-tool contract: one `tools:` entry (or pack entry). Every field is optional; an entry
/// is merged field by field over the pack entry for the same tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "contract")]
pub struct ToolContract {
    /// The tool sends data somewhere: its sinks go through the sink gate. `false` switches a
    /// pack's gate off explicitly.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::boolean_opt"
    )]
    pub exfiltrating: Option<bool>,
    /// Arguments that carry a destination (added to the destination-named ones).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub sink_params: Option<Vec<String>>,
    /// Destinations that always pass: exact values or globs (`*@corp.com`,
    /// `https://hooks.corp.com/*`), matched case-insensitively against the canonical form.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub trusted_destinations: Option<Vec<String>>,
    /// What a destination seen only in untrusted tool output gets: `deny` (the default) or
    /// `ask`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub on_tainted: Option<OnTainted>,
    /// Arguments that hold a path or a list of paths.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub path_params: Option<Vec<String>>,
    /// Every path the call touches must be inside one of these (canonical, component-wise;
    /// `${workspace}`, `${home}` and a leading `~` expand).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub allowed_path_prefixes: Option<Vec<String>>,
    /// `{arg: regex}`: the argument must match in full.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub arg_patterns: Option<BTreeMap<String, String>>,
    /// `{arg: [literals]}`: the argument must be one of these values.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub arg_values: Option<BTreeMap<String, Vec<serde_json::Value>>>,
    /// Calls per session, counting attempts (also ones later denied); `0` forbids the tool.
    #[serde(
        default,
        deserialize_with = "crate::strict::whole_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_calls: Option<u64>,
    /// A windowed budget, e.g. `{max: 5, per: 10m}`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub budget: Option<BudgetSpec>,
    /// Trust label of the tool's output (default untrusted), and whether secrets in it are
    /// redacted (`{redact: secrets}`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub output: Option<OutputSpec>,
    /// The tool's primary operation, for tools the built-in adapters do not know.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub operation: Option<Operation>,
    /// Shell tools: the argument holding the command (string or argv array).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub command_param: Option<String>,
    /// Shell tools: a separate argument array (`{command: git, args: [...]}`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub args_param: Option<String>,
    /// Shell tools: the working-directory argument.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub cwd_param: Option<String>,
    /// HTTP tools: arguments holding URLs.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub url_params: Option<Vec<String>>,
    /// HTTP tools: the argument holding the method.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub method_param: Option<String>,
    /// Per-argument operation override, e.g. `{source: fs.delete}` for a move.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub param_operations: Option<BTreeMap<String, Operation>>,
    /// Git tools in the style of mcp-server-git: the git subcommand (`git_diff` → `diff`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub git_subcommand: Option<String>,
    /// Expected annotation hints of the pinned definition (e.g. `readOnlyHint: true`); a
    /// definition that says otherwise makes every call ask.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(schema_with = "crate::schema::annotation_hints")]
    pub annotations: Option<BTreeMap<String, bool>>,
    /// The tool reaches beneath a directory (a recursive search or listing): which
    /// arguments name the directory and which narrow the files it touches. Deny rules meet
    /// every path their pattern can match beneath it, allow rules must cover all of it.
    /// Filters narrow only where they provably exclude a pattern.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    pub recursive: Option<RecursiveSpec>,
}

/// How a recursive tool names its directories and narrows the files beneath them (the
/// `recursive:` field of a tool entry). Every list names arguments; lists are united when
/// entries merge. A filter narrows a call only where it provably excludes a rule's pattern.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct RecursiveSpec {
    /// Arguments that name a directory searched or listed recursively (a path or a list of
    /// paths). A value that is a regular file is a plain read of it.
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub params: Vec<String>,
    /// Arguments holding file-name globs in the manner of ripgrep's `--glob` (`*.rs`,
    /// `*.{ts,tsx}`, several separated by spaces or commas); a glob with a `/` narrows by
    /// its last component, one starting with `!` (an exclusion) narrows nothing.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub name_globs: Option<Vec<String>>,
    /// Arguments holding a glob relative to the directory (`src/**/*.rs`): its leading
    /// literal directories narrow the directory, its last component the file names.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub relative_globs: Option<Vec<String>>,
    /// Arguments holding ripgrep file-type names (`rust`, `py`, `ts`); an unknown type
    /// narrows nothing.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::present"
    )]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub types: Option<Vec<String>>,
    /// Without any directory argument, the call searches the workspace (the call's
    /// working directory).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::strict::boolean_opt"
    )]
    pub workspace_default: Option<bool>,
}

impl RecursiveSpec {
    /// This spec over `base`: every list united, `workspace_default` if either says so.
    pub fn merge_over(&self, base: &RecursiveSpec) -> RecursiveSpec {
        let mut params = base.params.clone();
        for p in &self.params {
            if !params.contains(p) {
                params.push(p.clone());
            }
        }
        RecursiveSpec {
            params,
            name_globs: union(&base.name_globs, &self.name_globs),
            relative_globs: union(&base.relative_globs, &self.relative_globs),
            types: union(&base.types, &self.types),
            workspace_default: match (self.workspace_default, base.workspace_default) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(false) || b.unwrap_or(false)),
            },
        }
    }

    /// As the normalisation mapping reads it.
    pub fn to_mapping(&self) -> crate::normalize::RecursiveMapping {
        crate::normalize::RecursiveMapping {
            params: self.params.clone(),
            name_globs: self.name_globs.clone().unwrap_or_default(),
            relative_globs: self.relative_globs.clone().unwrap_or_default(),
            types: self.types.clone().unwrap_or_default(),
            workspace_default: self.workspace_default.unwrap_or(false),
        }
    }
}

/// How bad an [`Issue`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

/// A semantic problem found in a contract, located by its YAML key path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    pub severity: Severity,
    /// YAML key path, e.g. `["tools", "send_email", "arg_patterns", "to"]`.
    pub path: Vec<String>,
    pub message: String,
    pub help: Option<String>,
}

impl Issue {
    fn error(path: Vec<String>, message: impl Into<String>, help: Option<&str>) -> Issue {
        Issue {
            severity: Severity::Error,
            path,
            message: message.into(),
            help: help.map(str::to_owned),
        }
    }

    fn warning(path: Vec<String>, message: impl Into<String>, help: Option<&str>) -> Issue {
        Issue {
            severity: Severity::Warning,
            path,
            message: message.into(),
            help: help.map(str::to_owned),
        }
    }
}

/// The largest windowed budget `max` (the window keeps one timestamp per call).
pub const MAX_BUDGET_WINDOW: u64 = 100_000;
/// The longest `arg_patterns` regex source.
pub const MAX_PATTERN_LEN: usize = 4096;
/// The compiled size limit of one `arg_patterns` regex.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

fn union(a: &Option<Vec<String>>, b: &Option<Vec<String>>) -> Option<Vec<String>> {
    match (a, b) {
        (None, None) => None,
        (Some(x), None) | (None, Some(x)) => Some(x.clone()),
        (Some(base), Some(over)) => {
            let mut out = base.clone();
            for v in over {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            Some(out)
        }
    }
}

fn merge_map<V: Clone>(
    over: &Option<BTreeMap<String, V>>,
    base: &Option<BTreeMap<String, V>>,
) -> Option<BTreeMap<String, V>> {
    match (over, base) {
        (None, None) => None,
        (Some(x), None) | (None, Some(x)) => Some(x.clone()),
        (Some(o), Some(b)) => {
            let mut out = b.clone();
            for (k, v) in o {
                out.insert(k.clone(), v.clone());
            }
            Some(out)
        }
    }
}

/// Compile an `arg_patterns` regex: full match, bounded size.
pub fn compile_pattern(pattern: &str) -> Result<regex::Regex, String> {
    if pattern.len() > MAX_PATTERN_LEN {
        return Err(format!(
            "pattern is {} bytes long, the limit is {MAX_PATTERN_LEN}",
            pattern.len()
        ));
    }
    regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| e.to_string())
}

/// A compiled `trusted_destinations` entry.
///
/// A pattern with `://` is a URL pattern: it only matches URL destinations, its scheme
/// exactly, its authority (`host[:port]`) as a glob that cannot reach into the path, and the
/// rest (path, query) as a glob. Any other pattern (an address such as `*@corp.com`, a host
/// such as `*.corp.com`, a channel) only matches destinations that are not URLs, so
/// `*@corp.com` never trusts `https://evil.example/?to=a@corp.com`. Matching is
/// case-insensitive against the canonical destination.
#[derive(Debug, Clone)]
pub enum DestinationPattern {
    Url {
        scheme: String,
        authority: globset::GlobMatcher,
        rest: globset::GlobMatcher,
    },
    Plain(globset::GlobMatcher),
}

/// Split a URL string into `(scheme, authority, rest)`; `rest` starts with `/`, `?` or `#`
/// (or is `/` when the URL has nothing after the authority).
pub fn split_url(s: &str) -> Option<(&str, &str, &str)> {
    let (scheme, after) = s.split_once("://")?;
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (authority, rest) = after.split_at(end);
    if scheme.is_empty() || authority.is_empty() {
        return None;
    }
    Some((scheme, authority, if rest.is_empty() { "/" } else { rest }))
}

fn glob(pattern: &str) -> Result<globset::GlobMatcher, String> {
    globset::GlobBuilder::new(pattern)
        .case_insensitive(true)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| e.kind().to_string())
}

impl DestinationPattern {
    /// True when the canonical destination token matches.
    pub fn is_match(&self, token: &str) -> bool {
        match self {
            DestinationPattern::Plain(g) => !token.contains("://") && g.is_match(token),
            DestinationPattern::Url {
                scheme,
                authority,
                rest,
            } => split_url(token).is_some_and(|(s, a, r)| {
                s.eq_ignore_ascii_case(scheme)
                    && !a.contains('@')
                    && authority.is_match(a)
                    && rest.is_match(r)
            }),
        }
    }
}

/// Compile a `trusted_destinations` entry (exact value or glob), see [`DestinationPattern`].
pub fn compile_destination(pattern: &str) -> Result<DestinationPattern, String> {
    let p = pattern.trim();
    if p.contains("://") {
        let (scheme, authority, rest) =
            split_url(p).ok_or_else(|| "a URL pattern needs a scheme and a host".to_owned())?;
        if has_glob_meta(scheme) {
            return Err("the scheme of a URL pattern cannot be a glob".to_owned());
        }
        return Ok(DestinationPattern::Url {
            scheme: scheme.to_ascii_lowercase(),
            authority: glob(authority)?,
            rest: glob(rest)?,
        });
    }
    glob(p).map(DestinationPattern::Plain)
}

/// toolgate's one duration grammar: humantime's (`500ms`, `30s`, `10m`, `1h 30m`, `1.5s`,
/// `2days`), white space around it ignored; the error is humantime's message. Budget windows,
/// `gateway.yaml` and the command line (`toolgate_runtime::duration`) all parse through it,
/// each adding only its own limits. It lives here because this is the lowest crate all of
/// them depend on.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|e| e.to_string())
}

/// Parse a budget window (`10m`, `1h 30m`): [`parse_duration`], longer than zero.
pub fn parse_window(per: &str) -> Result<Duration, String> {
    let d = parse_duration(per)?;
    if d.is_zero() {
        return Err("the window is zero".to_owned());
    }
    Ok(d)
}

fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', '{'])
}

impl ToolContract {
    /// This entry (the user's) over `base` (a pack's), field by field. Lists of arguments to
    /// inspect are united; every other field present here replaces the base's.
    pub fn merge_over(&self, base: &ToolContract) -> ToolContract {
        ToolContract {
            exfiltrating: self.exfiltrating.or(base.exfiltrating),
            sink_params: union(&base.sink_params, &self.sink_params),
            trusted_destinations: self
                .trusted_destinations
                .clone()
                .or_else(|| base.trusted_destinations.clone()),
            on_tainted: self.on_tainted.or(base.on_tainted),
            path_params: union(&base.path_params, &self.path_params),
            allowed_path_prefixes: self
                .allowed_path_prefixes
                .clone()
                .or_else(|| base.allowed_path_prefixes.clone()),
            arg_patterns: merge_map(&self.arg_patterns, &base.arg_patterns),
            arg_values: merge_map(&self.arg_values, &base.arg_values),
            max_calls: self.max_calls.or(base.max_calls),
            budget: self.budget.clone().or_else(|| base.budget.clone()),
            output: self.output.clone().or_else(|| base.output.clone()),
            operation: self.operation.or(base.operation),
            command_param: self
                .command_param
                .clone()
                .or_else(|| base.command_param.clone()),
            args_param: self.args_param.clone().or_else(|| base.args_param.clone()),
            cwd_param: self.cwd_param.clone().or_else(|| base.cwd_param.clone()),
            url_params: union(&base.url_params, &self.url_params),
            method_param: self
                .method_param
                .clone()
                .or_else(|| base.method_param.clone()),
            param_operations: merge_map(&self.param_operations, &base.param_operations),
            git_subcommand: self
                .git_subcommand
                .clone()
                .or_else(|| base.git_subcommand.clone()),
            annotations: merge_map(&self.annotations, &base.annotations),
            recursive: match (&self.recursive, &base.recursive) {
                (Some(a), Some(b)) => Some(a.merge_over(b)),
                (a, b) => a.clone().or_else(|| b.clone()),
            },
        }
    }

    /// True when the entry says how to read the tool's arguments.
    pub fn has_mapping(&self) -> bool {
        self.operation.is_some()
            || self.path_params.is_some()
            || self.param_operations.is_some()
            || self.command_param.is_some()
            || self.args_param.is_some()
            || self.cwd_param.is_some()
            || self.url_params.is_some()
            || self.method_param.is_some()
            || self.git_subcommand.is_some()
            || self.recursive.is_some()
    }

    /// The semantic mapping for normalisation, when the entry gives one.
    pub fn mapping(&self) -> Option<ToolMapping> {
        if !self.has_mapping() {
            return None;
        }
        Some(self.mapping_over(ToolMapping::default()))
    }

    /// This entry's mapping fields over `base` (e.g. a built-in adapter's mapping).
    pub fn mapping_over(&self, base: ToolMapping) -> ToolMapping {
        let mut m = base;
        if let Some(op) = self.operation {
            m.operation = Some(op);
        }
        if let Some(p) = &self.path_params {
            for v in p {
                if !m.path_params.contains(v) {
                    m.path_params.push(v.clone());
                }
            }
        }
        if let Some(p) = &self.param_operations {
            for (k, v) in p {
                m.param_operations.insert(k.clone(), *v);
            }
        }
        if let Some(c) = &self.command_param {
            m.command_param = Some(c.clone());
        }
        if let Some(c) = &self.args_param {
            m.args_param = Some(c.clone());
        }
        if let Some(c) = &self.cwd_param {
            m.cwd_param = Some(c.clone());
        }
        if let Some(u) = &self.url_params {
            for v in u {
                if !m.url_params.contains(v) {
                    m.url_params.push(v.clone());
                }
            }
        }
        if let Some(c) = &self.method_param {
            m.method_param = Some(c.clone());
        }
        if let Some(g) = &self.git_subcommand {
            m.git_subcommand = Some(g.clone());
        }
        if let Some(r) = &self.recursive {
            let mine = r.to_mapping();
            m.recursive = Some(match m.recursive.take() {
                Some(base) => base.united(mine),
                None => mine,
            });
        }
        m
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod window_tests {
    use std::time::Duration;

    use super::parse_window;

    /// What a budget's `per` accepts (humantime, longer than zero), with which value;
    /// anything else is refused.
    #[test]
    fn window_grammar_table() {
        let accepted: &[(&str, Duration)] = &[
            ("500ms", Duration::from_millis(500)),
            ("30s", Duration::from_secs(30)),
            ("10m", Duration::from_secs(600)),
            ("1h", Duration::from_secs(3600)),
            ("1h 30m", Duration::from_secs(5400)),
            ("1h30m", Duration::from_secs(5400)),
            (" 10m ", Duration::from_secs(600)),
            ("2min", Duration::from_secs(120)),
            ("1.5s", Duration::from_millis(1500)),
            ("1d", Duration::from_secs(86_400)),
            ("1ns", Duration::from_nanos(1)),
        ];
        for (text, want) in accepted {
            assert_eq!(parse_window(text), Ok(*want), "{text:?}");
        }
        let refused = [
            "",
            " ",
            "0",
            "0s",
            "0ms",
            "10",
            "soon",
            "-1s",
            "+1s",
            "1 parsec",
            "5S",
            "s",
            "18446744073709551616s",
        ];
        for text in refused {
            assert!(parse_window(text).is_err(), "{text:?} was accepted");
        }
        assert_eq!(parse_window("0s").unwrap_err(), "the window is zero");
    }
}
