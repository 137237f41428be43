//! Compiled contracts: lookup by tool name (exact beats glob) and the per-call checks
//! (pinning, budget, constraints, sink gate).

mod call;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use globset::GlobMatcher;
use regex::Regex;
use serde_json::Value;

use super::heuristics::{
    DEFAULT_DESTRUCTIVE_BUDGET_MAX, DEFAULT_DESTRUCTIVE_BUDGET_PER, is_recipient_param, name_marks,
};
use super::packs::{PACKS, parsed_pack};
use super::{
    BudgetSpec, DestinationPattern, Issue, OutputLabel, OutputSpec, Severity, ToolContract,
    compile_destination, compile_pattern, has_glob_meta, parse_window,
};
use crate::normalize::{ToolMapping, builtin_mapping};
use crate::session::{RecordedOutput, Session};
use crate::taint::OutputTrust;

/// Where a layer of a resolved contract came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntrySource {
    /// Heuristics from the tool name and schema (no entry needed).
    Heuristics,
    /// A pack entry: pack name and key (exact name or glob).
    Pack { pack: String, key: String },
    /// A `tools:` entry of the policy: its key (exact name or glob).
    User { key: String },
}

#[derive(Debug, Clone)]
struct GlobEntry {
    user: bool,
    specificity: usize,
    key: String,
    pack: Option<String>,
    matcher: GlobMatcher,
    contract: ToolContract,
}

/// Compiled contracts of a policy: packs and `tools:` entries, with compiled regexes, globs
/// and windows.
#[derive(Debug, Clone, Default)]
pub struct Contracts {
    /// Exact-name layers, lowest first (packs in order, then the user entry).
    exact: HashMap<String, Vec<(EntrySource, ToolContract)>>,
    /// Glob layers, lowest first.
    globs: Vec<GlobEntry>,
    regexes: HashMap<String, Regex>,
    destinations: HashMap<String, DestinationPattern>,
    windows: HashMap<String, u64>,
    /// Tells compilations apart, for the resolutions a session keeps (0: empty contracts).
    id: u64,
}

/// The id of the next compiled [`Contracts`].
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The contract that applies to one tool: every layer merged.
#[derive(Debug, Clone)]
pub struct ResolvedTool<'a> {
    pub tool: String,
    resolution: Arc<Resolution>,
    contracts: &'a Contracts,
}

/// What a tool resolves to under one definition: the merged contract, its layers, and the
/// mapping its calls are normalised with. A session keeps these per tool
/// ([`Contracts::lookup_in`]), so a call does not resolve its tool again.
#[derive(Debug)]
pub(crate) struct Resolution {
    contract: ToolContract,
    sources: Vec<EntrySource>,
    mapping: Option<ToolMapping>,
}

impl ResolvedTool<'_> {
    /// The merged contract.
    pub fn contract(&self) -> &ToolContract {
        &self.resolution.contract
    }

    /// The layers that contributed, lowest first.
    pub fn sources(&self) -> &[EntrySource] {
        &self.resolution.sources
    }

    /// True when a pack or `tools:` entry describes the tool (not only heuristics).
    pub fn has_entry(&self) -> bool {
        self.sources()
            .iter()
            .any(|s| !matches!(s, EntrySource::Heuristics))
    }

    /// The mapping for normalisation: the entry's mapping fields over the built-in adapter's
    /// mapping; the built-in mapping alone when the entry gives none.
    pub fn mapping(&self) -> Option<&ToolMapping> {
        self.resolution.mapping.as_ref()
    }

    /// True when the sink gate applies.
    pub fn exfiltrating(&self) -> bool {
        self.contract().exfiltrating == Some(true)
    }

    /// The trust label of this tool's output: `None` means untrusted as a whole,
    /// `Some([])` trusted as a whole, `Some(fields)` trusted at those fields only.
    pub fn trusted_output(&self) -> Option<Vec<String>> {
        match &self.contract().output {
            Some(OutputSpec::Label(OutputLabel::Trusted)) => Some(Vec::new()),
            Some(OutputSpec::Fields(f)) => Some(f.trusted_fields.clone()),
            _ => None,
        }
    }

    pub(super) fn contracts(&self) -> &Contracts {
        self.contracts
    }
}

/// True when every expected annotation hint has that value in the definition's
/// `annotations` (a missing hint never matches).
pub fn annotations_match(definition: Option<&Value>, expected: &BTreeMap<String, bool>) -> bool {
    let ann = definition.and_then(|d| d.get("annotations"));
    expected
        .iter()
        .all(|(k, v)| ann.and_then(|a| a.get(k)).and_then(Value::as_bool) == Some(*v))
}

fn specificity(key: &str) -> usize {
    key.chars()
        .filter(|c| !matches!(c, '*' | '?' | '[' | ']' | '{' | '}'))
        .count()
}

fn compile_tool_glob(key: &str) -> Result<GlobMatcher, String> {
    globset::GlobBuilder::new(key)
        .literal_separator(false)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| e.kind().to_string())
}

/// The heuristic layer for a tool with the given name and (optional) definition.
fn heuristic_contract(tool: &str, definition: Option<&Value>) -> ToolContract {
    let mut c = ToolContract::default();
    let schema_recipient = definition
        .and_then(|d| d.get("inputSchema"))
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .is_some_and(|p| p.keys().any(|k| is_recipient_param(k)));
    let (exfiltrating, destructive) = name_marks(tool);
    if exfiltrating || schema_recipient {
        c.exfiltrating = Some(true);
    }
    if destructive {
        c.budget = Some(BudgetSpec {
            max: DEFAULT_DESTRUCTIVE_BUDGET_MAX,
            per: DEFAULT_DESTRUCTIVE_BUDGET_PER.to_owned(),
        });
    }
    c
}

fn within(path: &str, root: &str) -> bool {
    if root == "/" {
        return path.starts_with('/');
    }
    let root = root.trim_end_matches('/');
    path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn expand_home(value: &str, home: &str) -> Option<String> {
    if value == "~" {
        return Some(home.to_owned());
    }
    value
        .strip_prefix("~/")
        .map(|rest| format!("{home}/{rest}"))
}

fn show_value(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if s.chars().count() > 120 {
        let cut: String = s.chars().take(117).collect();
        format!("{cut}...")
    } else {
        s
    }
}

/// One embedded pack compiled on its own, shared by every policy that names it.
#[derive(Debug)]
struct PackLayer {
    /// [`ToolContract::validate`] issues of its entries, in key order.
    validate_issues: Vec<Issue>,
    /// Empty names and bad globs, in key order.
    key_issues: Vec<Issue>,
    /// Its entries and compiled parts (globs unsorted, in key order).
    compiled: Contracts,
}

/// The compiled embedded pack `name` (parsed, validated and compiled once per process).
fn pack_layer(name: &str) -> Result<&'static PackLayer, String> {
    static LAYERS: OnceLock<Vec<Result<PackLayer, String>>> = OnceLock::new();
    let layers = LAYERS.get_or_init(|| {
        PACKS
            .iter()
            .map(|(name, _)| {
                let pack = parsed_pack(name)?;
                let mut layer = PackLayer {
                    validate_issues: Vec::new(),
                    key_issues: Vec::new(),
                    compiled: Contracts::default(),
                };
                for (key, c) in &pack.tools {
                    layer.validate_issues.extend(c.validate(&[
                        "packs".to_owned(),
                        (*name).to_owned(),
                        key.clone(),
                    ]));
                }
                for (key, c) in &pack.tools {
                    layer.compiled.add_entry(
                        Some(name),
                        key.clone(),
                        c.clone(),
                        &mut layer.key_issues,
                    );
                }
                Ok(layer)
            })
            .collect()
    });
    match PACKS
        .iter()
        .position(|(n, _)| *n == name)
        .and_then(|i| layers.get(i))
    {
        Some(Ok(layer)) => Ok(layer),
        Some(Err(e)) => Err(e.clone()),
        None => Err(format!("unknown pack `{name}`")),
    }
}

impl Contracts {
    /// Compile the user's `tools:` entries over the named packs (in order). Errors (not
    /// warnings) fail the compilation; [`ToolContract::validate`] gives both.
    ///
    /// Each embedded pack is parsed, validated and compiled once per process
    /// (`pack_layer`); a compilation copies the compiled packs it names and compiles only
    /// the user's entries.
    pub fn compile(
        user: &BTreeMap<String, ToolContract>,
        packs: &[String],
    ) -> Result<Contracts, Vec<Issue>> {
        // Issue order: every entry's `validate` issues (packs in order, then the user's),
        // then the key issues (empty names, bad globs) in the same order.
        let mut issues = Vec::new();
        let mut key_issues = Vec::new();
        let mut out = Contracts::default();
        for name in packs {
            match pack_layer(name) {
                Ok(layer) => {
                    issues.extend(layer.validate_issues.iter().cloned());
                    key_issues.extend(layer.key_issues.iter().cloned());
                    out.absorb(&layer.compiled);
                }
                Err(e) => issues.push(Issue {
                    severity: Severity::Error,
                    path: vec!["packs".to_owned(), name.clone()],
                    message: e,
                    help: Some(format!(
                        "known packs: {}",
                        super::packs::pack_names().join(", ")
                    )),
                }),
            }
        }
        for (key, c) in user {
            issues.extend(c.validate(&["tools".to_owned(), key.clone()]));
        }
        for (key, c) in user {
            out.add_entry(None, key.clone(), c.clone(), &mut key_issues);
        }
        issues.append(&mut key_issues);
        // Stable: packs before user, less specific first, then key order.
        out.globs
            .sort_by(|a, b| (a.user, a.specificity, &a.key).cmp(&(b.user, b.specificity, &b.key)));
        if issues.iter().any(|i| i.severity == Severity::Error) {
            return Err(issues);
        }
        out.id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        Ok(out)
    }

    /// Adds one entry (a pack's when `pack` is set, else the user's): its regexes,
    /// destination patterns and windows, and the entry itself by exact name or glob.
    fn add_entry(
        &mut self,
        pack: Option<&str>,
        key: String,
        c: ToolContract,
        issues: &mut Vec<Issue>,
    ) {
        let path = match pack {
            Some(p) => vec!["packs".to_owned(), p.to_owned(), key.clone()],
            None => vec!["tools".to_owned(), key.clone()],
        };
        self.compile_parts(&c);
        if key.trim().is_empty() {
            issues.push(Issue {
                severity: Severity::Error,
                path,
                message: "empty tool name".to_owned(),
                help: None,
            });
            return;
        }
        if has_glob_meta(&key) {
            match compile_tool_glob(&key) {
                Ok(matcher) => self.globs.push(GlobEntry {
                    user: pack.is_none(),
                    specificity: specificity(&key),
                    key,
                    pack: pack.map(str::to_owned),
                    matcher,
                    contract: c,
                }),
                Err(e) => issues.push(Issue {
                    severity: Severity::Error,
                    path,
                    message: format!("invalid tool name glob `{key}`: {e}"),
                    help: Some("use `*` and `?` wildcards, e.g. `slack_*`".to_owned()),
                }),
            }
        } else {
            let source = match pack {
                Some(p) => EntrySource::Pack {
                    pack: p.to_owned(),
                    key: key.clone(),
                },
                None => EntrySource::User { key: key.clone() },
            };
            self.exact.entry(key).or_default().push((source, c));
        }
    }

    /// Appends a compiled pack's entries and compiled parts (globs unsorted).
    fn absorb(&mut self, layer: &Contracts) {
        for (key, layers) in &layer.exact {
            self.exact
                .entry(key.clone())
                .or_default()
                .extend(layers.iter().cloned());
        }
        self.globs.extend(layer.globs.iter().cloned());
        for (k, v) in &layer.regexes {
            self.regexes.insert(k.clone(), v.clone());
        }
        for (k, v) in &layer.destinations {
            self.destinations.insert(k.clone(), v.clone());
        }
        for (k, v) in &layer.windows {
            self.windows.insert(k.clone(), *v);
        }
    }

    fn compile_parts(&mut self, c: &ToolContract) {
        if let Some(p) = &c.arg_patterns {
            for pat in p.values() {
                if let Ok(re) = compile_pattern(pat) {
                    self.regexes.insert(pat.clone(), re);
                }
            }
        }
        if let Some(d) = &c.trusted_destinations {
            for pat in d {
                if let Ok(m) = compile_destination(pat) {
                    self.destinations.insert(pat.clone(), m);
                }
            }
        }
        if let Some(b) = &c.budget
            && let Ok(d) = parse_window(&b.per)
        {
            let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
            self.windows.insert(b.per.clone(), ms);
        }
    }

    /// The merged contract of a tool: heuristics, then packs, then the user's entries (see
    /// the module docs for the precedence).
    pub fn lookup(&self, tool: &str) -> ResolvedTool<'_> {
        self.lookup_with(tool, None)
    }

    /// Like [`Contracts::lookup`], with the tool's definition for schema heuristics.
    pub fn lookup_with(&self, tool: &str, definition: Option<&Value>) -> ResolvedTool<'_> {
        ResolvedTool {
            tool: tool.to_owned(),
            resolution: Arc::new(self.resolve(tool, definition)),
            contracts: self,
        }
    }

    /// [`Contracts::lookup_with`] with the session's pinned definition, else
    /// `call_definition`. The session keeps the resolution until its pins change, so the
    /// calls of a tool resolve it once.
    pub fn lookup_in(
        &self,
        tool: &str,
        session: &mut Session,
        call_definition: Option<&Value>,
    ) -> ResolvedTool<'_> {
        let pinned = session.pinned_definition(tool);
        // A definition from the call itself is not the session's: not kept.
        if pinned.is_none() && call_definition.is_some() {
            return self.lookup_with(tool, call_definition);
        }
        let resolution = match session.resolution(self.id, tool) {
            Some(kept) => kept,
            None => {
                let fresh = Arc::new(self.resolve(tool, pinned));
                session.keep_resolution(self.id, tool, Arc::clone(&fresh));
                fresh
            }
        };
        ResolvedTool {
            tool: tool.to_owned(),
            resolution,
            contracts: self,
        }
    }

    fn resolve(&self, tool: &str, definition: Option<&Value>) -> Resolution {
        let mut contract = heuristic_contract(tool, definition);
        let mut sources = Vec::new();
        if contract != ToolContract::default() {
            sources.push(EntrySource::Heuristics);
        }
        // A namespaced or differently cased name (`filesystem/read_file`, `READ_FILE`) gets
        // the entries of the tool it names, below the entries of its exact name.
        let base = crate::normalize::base_tool_name(tool);
        let by_base = if base != tool {
            self.exact.get(base.as_ref())
        } else {
            None
        };
        let exact = self.exact.get(tool);
        let mut apply = |src: EntrySource, c: &ToolContract, contract: &mut ToolContract| {
            *contract = c.merge_over(contract);
            sources.push(src);
        };
        for user in [false, true] {
            for g in self.globs.iter().filter(|g| g.user == user) {
                if g.matcher.is_match(tool) {
                    let src = match &g.pack {
                        Some(p) => EntrySource::Pack {
                            pack: p.clone(),
                            key: g.key.clone(),
                        },
                        None => EntrySource::User { key: g.key.clone() },
                    };
                    apply(src, &g.contract, &mut contract);
                }
            }
            for (src, c) in by_base
                .into_iter()
                .flatten()
                .chain(exact.into_iter().flatten())
            {
                if matches!(src, EntrySource::User { .. }) == user {
                    apply(src.clone(), c, &mut contract);
                }
            }
        }
        let builtin = builtin_mapping(tool, definition);
        let mapping = if contract.has_mapping() {
            Some(contract.mapping_over(builtin.unwrap_or_default()))
        } else {
            builtin
        };
        Resolution {
            contract,
            sources,
            mapping,
        }
    }

    pub(super) fn destination_matcher(&self, pattern: &str) -> Option<&DestinationPattern> {
        self.destinations.get(pattern)
    }

    /// Feed a `tools/call` result into the session's taint index with this tool's output
    /// label (untrusted unless its contract says `output: trusted` or `trusted_fields`).
    pub fn record_output(
        &self,
        session: &mut Session,
        server: Option<&str>,
        tool: &str,
        result: &Value,
    ) -> u64 {
        self.record_output_noted(session, server, tool, result).seq
    }

    /// [`Contracts::record_output`], and what the caller should say about it: with
    /// `trusted_fields`, the text content blocks that were not a JSON (or YAML) document and
    /// so were untrusted as a whole, and the trusted values that an untrusted field of the
    /// same output repeated.
    pub fn record_output_noted(
        &self,
        session: &mut Session,
        server: Option<&str>,
        tool: &str,
        result: &Value,
    ) -> RecordedOutput {
        self.record_output_from(session, server, tool, result, None)
    }

    /// [`Contracts::record_output_noted`] for the output of a call that read `secret_file`
    /// (see [`crate::secret_read`]): its secret values are fingerprinted, as those of
    /// a tool marked `output: secret` are, so that no sink call carries them out.
    pub fn record_output_from(
        &self,
        session: &mut Session,
        server: Option<&str>,
        tool: &str,
        result: &Value,
        secret_file: Option<&str>,
    ) -> RecordedOutput {
        let output = self
            .lookup_in(tool, session, None)
            .contract()
            .output
            .clone();
        let secret = match (&output, secret_file) {
            (_, Some(file)) if file.starts_with('/') => Some(format!("`{file}`")),
            (_, Some(source)) => Some(source.to_owned()),
            (Some(OutputSpec::Label(OutputLabel::Secret)), None) => {
                Some("an output marked `output: secret`".to_owned())
            }
            _ => None,
        };
        let recorded = self.record_labelled(session, server, tool, result, output);
        if let Some(what) = secret {
            session.record_secret(tool, recorded.seq, &what, result);
        }
        recorded
    }

    fn record_labelled(
        &self,
        session: &mut Session,
        server: Option<&str>,
        tool: &str,
        result: &Value,
        output: Option<OutputSpec>,
    ) -> RecordedOutput {
        match output {
            Some(OutputSpec::Label(OutputLabel::Trusted)) => RecordedOutput::plain(
                session.record_output(server, tool, result, OutputTrust::Trusted),
            ),
            Some(OutputSpec::Fields(fields)) => {
                session.record_output_fields(server, tool, result, &fields)
            }
            _ => RecordedOutput::plain(session.record_output(
                server,
                tool,
                result,
                OutputTrust::Untrusted,
            )),
        }
    }
}
