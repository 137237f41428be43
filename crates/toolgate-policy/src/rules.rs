//! Rule matchers: compiled once per policy, matched against each [`Part`] of an action.
//!
//! Globs always use `literal_separator(true)`: `*` never crosses a `/`, only `**` does.
//! `${workspace}` and `${home}` (and a leading `~/`) expand in resource patterns, and a
//! pattern ending in `/**` also covers the directory itself.
//!
//! A part that reaches beneath its directories ([`Part::beneath`]: a recursive search,
//! listing, copy or delete) is compared with what lies beneath them too
//! ([`crate::beneath`]): a deny rule matches when one of its globs matches a directory or
//! *meets* what lies beneath it; an allow or ask rule only when its globs match every
//! directory and *cover* everything beneath it.

mod beneath_trees;
mod compile;
#[cfg(test)]
mod props;

pub use beneath_trees::{BeneathTree, LISTING_LIMIT, beneath_trees, beneath_trees_listed};
#[cfg(test)]
pub(crate) use compile::compile_rule;
pub use compile::{compile_rule_with, protected_rule};

use std::collections::BTreeMap;
use std::sync::OnceLock;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::action::{Operation, Part};
use crate::beneath::PathSet;
use crate::decision::Effect;
use crate::diag_impl::Severity;
use crate::model::Rule;

/// The values substituted for `${workspace}` and `${home}`: canonical absolute paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vars {
    pub workspace: String,
    pub home: String,
}

impl Vars {
    /// Placeholder values used when a policy is checked without a concrete workspace.
    pub fn placeholder() -> Vars {
        Vars {
            workspace: "/__toolgate_workspace__".to_owned(),
            home: "/__toolgate_home__".to_owned(),
        }
    }
}

/// A problem found while compiling a rule, addressed by YAML key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathIssue {
    pub severity: Severity,
    pub path: Vec<String>,
    pub message: String,
    pub help: Option<String>,
    /// Point at the key rather than the value.
    pub at_key: bool,
}

impl PathIssue {
    fn new(severity: Severity, path: Vec<String>, message: String) -> Self {
        PathIssue {
            severity,
            path,
            message,
            help: None,
            at_key: false,
        }
    }

    fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    fn key(mut self) -> Self {
        self.at_key = true;
        self
    }
}

/// What a rule sees of the call besides the part: server, tool and pinned annotations.
#[derive(Debug, Clone, Copy)]
pub struct CallFacts<'a> {
    pub server: Option<&'a str>,
    pub tool: &'a str,
    /// The `annotations` object of the pinned (unchanged) tool definition, if any.
    pub annotations: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// True for a client's own built-in tool seen through a client hook (`Task`, `Bash`, …);
    /// false for every tool of an MCP server (through `wrap`, or `mcp__server__tool`).
    pub builtin: bool,
}

/// A rule ready to match.
#[derive(Debug, Clone)]
pub struct CompiledRule {
    pub id: String,
    pub effect: Effect,
    /// Position in the file (0-based).
    pub index: usize,
    operations: u16,
    /// The expanded resource globs (validated; matched through the engine's combined index).
    resource_globs: Option<Vec<globset::Glob>>,
    /// A per-rule set, built only for standalone matching (`compile_rule`, in tests).
    resources: Option<GlobSet>,
    /// The union of the resource globs as a lazy DFA, built on first use by a part that
    /// reaches beneath its directories.
    resource_paths: OnceLock<Option<PathSet>>,
    servers: Option<NameSet>,
    tools: Option<NameSet>,
    executables: Option<Vec<String>>,
    commands: Option<Vec<Vec<String>>>,
    hosts: Option<NameSet>,
    methods: Option<Vec<String>>,
    annotations: Option<BTreeMap<String, bool>>,
    builtin: Option<bool>,
}

/// Names matched exactly when a pattern has no glob syntax, else through one glob set
/// (building a glob set compiles regexes: literals skip it).
#[derive(Debug, Clone, Default)]
struct NameSet {
    literals: Vec<String>,
    globs: Option<GlobSet>,
}

/// One `servers`/`tools`/`hosts` pattern: a plain name, or a parsed glob.
enum NamePattern {
    Literal(String),
    Glob(globset::Glob),
}

/// Characters that can make a pattern parse as something other than literal characters
/// (globset's syntax, including `}` and `,`, which it may reject or treat specially).
const GLOB_SYNTAX: [char; 8] = ['*', '?', '[', ']', '{', '}', ',', '\\'];

impl NameSet {
    fn build(patterns: Vec<NamePattern>) -> NameSet {
        let mut out = NameSet::default();
        let mut b = GlobSetBuilder::new();
        let mut any = false;
        for p in patterns {
            match p {
                NamePattern::Literal(l) => out.literals.push(l),
                NamePattern::Glob(g) if g.glob().contains(['*', '?', '[', '{', '\\']) => {
                    b.add(g);
                    any = true;
                }
                NamePattern::Glob(g) => out.literals.push(g.glob().to_owned()),
            }
        }
        if any {
            out.globs = b.build().ok();
        }
        out
    }

    fn is_match(&self, name: &str) -> bool {
        self.literals.iter().any(|l| l == name)
            || self.globs.as_ref().is_some_and(|g| g.is_match(name))
    }
}

/// True when a rule's `tools:` lists names only (no glob syntax), at least one.
fn names_tools_exactly(tools: Option<&[String]>) -> bool {
    tools
        .is_some_and(|t| !t.is_empty() && t.iter().all(|n| !n.contains(['*', '?', '[', '{', '\\'])))
}

pub(crate) fn op_bit(op: Operation) -> u16 {
    let idx = Operation::ALL.iter().position(|o| *o == op).unwrap_or(0);
    1u16 << idx
}

/// Which operations can carry a constraint at all.
pub fn constraint_applies(constraint: &str, op: Operation) -> bool {
    match constraint {
        "resources" => op.is_fs() || op.is_git() || op == Operation::Unknown,
        // A file part of a shell command carries the command's executable (`mv`'s deletes).
        "executables" => op == Operation::ShellExec || op.is_git() || op.is_fs(),
        "commands" => op == Operation::ShellExec || op.is_git(),
        "hosts" | "methods" => op == Operation::NetRequest,
        _ => true,
    }
}

fn what_it_has(op: Operation) -> &'static str {
    match op {
        Operation::FsRead | Operation::FsWrite | Operation::FsDelete => "paths",
        Operation::ShellExec => "an executable and argv",
        Operation::GitRead | Operation::GitWrite | Operation::GitRemote => {
            "a repository path and argv"
        }
        Operation::NetRequest => "a URL, host and method",
        Operation::Unknown => "only resources when known",
    }
}

const HTTP_METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT",
];

/// Expands `${workspace}`, `${home}` and a leading `~`/`~/` in a resource pattern. The
/// substituted paths are glob-escaped. Unsupported `${var}` is an error.
pub fn expand_vars(pattern: &str, vars: &Vars) -> Result<String, String> {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut rest = pattern;
    if rest == "~" {
        return Ok(globset::escape(&vars.home));
    }
    if let Some(tail) = rest.strip_prefix("~/") {
        out.push_str(&globset::escape(&vars.home));
        out.push('/');
        rest = tail;
    }
    while let Some(start) = rest.find("${") {
        out.push_str(rest.get(..start).unwrap_or(""));
        let after = rest.get(start + 2..).unwrap_or("");
        let Some(end) = after.find('}') else {
            return Err(format!("unterminated variable in `{pattern}`"));
        };
        let name = after.get(..end).unwrap_or("");
        match name {
            "workspace" => out.push_str(&globset::escape(&vars.workspace)),
            "home" => out.push_str(&globset::escape(&vars.home)),
            other => return Err(format!("unsupported variable `${{{other}}}`")),
        }
        rest = after.get(end + 1..).unwrap_or("");
    }
    out.push_str(rest);
    Ok(out)
}

/// For a resource glob of the form `**/NAME/**`, with NAME one path component without glob
/// syntax: NAME.
///
/// With `literal_separator(true)` globset compiles such a glob to the regex
/// `^(?:/?|.*/)NAME/.*$` in which `.` matches any byte: the path starts with `NAME/` or
/// contains `/NAME/`. As NAME holds no `/`, that is "a component of the path that is followed
/// by a `/` equals NAME" ([`dir_components`]): a hash lookup per component instead of one
/// more regex in the engine's combined set (property-tested against globset).
pub fn component_literal(glob: &str) -> Option<&str> {
    let name = glob.strip_prefix("**/")?.strip_suffix("/**")?;
    (!name.is_empty() && !name.contains('/') && !name.contains(GLOB_SYNTAX)).then_some(name)
}

/// The components of `path` that are followed by a `/`: all but the last (`/a/b/c` gives
/// ``, `a`, `b`).
pub fn dir_components(path: &str) -> impl Iterator<Item = &str> {
    path.rsplit_once('/')
        .map(|(dir, _)| dir)
        .into_iter()
        .flat_map(|dir| dir.split('/'))
}

fn glob(pattern: &str) -> Result<globset::Glob, String> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| e.kind().to_string())
}

fn build_set(globs: Vec<globset::Glob>) -> Option<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for g in globs {
        b.add(g);
    }
    b.build().ok()
}

/// MCP's defaults for absent annotation hints.
fn annotation_default(key: &str) -> Option<bool> {
    match key {
        "readOnlyHint" | "idempotentHint" => Some(false),
        "destructiveHint" | "openWorldHint" => Some(true),
        _ => None,
    }
}

impl CompiledRule {
    /// True when this rule applies to `op` at all.
    pub fn covers(&self, op: Operation) -> bool {
        self.operations & op_bit(op) != 0
    }

    /// The one exception to "allow rules never match opaque parts": an allow rule that
    /// constrains the pinned definition's `annotations` (and not `resources`) may match the
    /// opaque `unknown` part of a tool nothing else describes. Its evidence is the pinned
    /// definition, not the arguments; deny rules still see the part's resources first.
    ///
    /// The same holds for an allow rule that names its tools exactly (`tools: [read_inbox]`,
    /// no glob): the user vouched for that tool by name. Deny rules are still evaluated first
    /// and see every resource of the part, and a `resources` constraint still has to match.
    fn vouches_for_unknown(&self, part: &Part) -> bool {
        part.operation == Operation::Unknown
            && !part.hidden
            && ((self.annotations.is_some() && self.resource_globs.is_none())
                || self
                    .tools
                    .as_ref()
                    .is_some_and(|t| t.globs.is_none() && !t.literals.is_empty()))
    }

    /// The expanded resource globs, when the rule constrains resources.
    pub fn resource_globs(&self) -> Option<&[globset::Glob]> {
        self.resource_globs.as_deref()
    }

    /// Whether the rule matches one part of a call, on its own (tests: the engine matches
    /// through its index and [`CompiledRule::matches_in`]).
    #[cfg(test)]
    pub fn matches(&self, facts: &CallFacts<'_>, part: &Part) -> bool {
        self.matches_with(facts, part, None)
    }

    /// The rule's resource globs as one set of paths (a lazy DFA), when it has resources.
    /// `None` also when the DFA cannot be built; callers then answer safely.
    pub fn resource_paths(&self) -> Option<&PathSet> {
        self.resource_paths
            .get_or_init(|| self.resource_globs.as_ref().and_then(PathSet::from_globs))
            .as_ref()
    }

    /// For a part that reaches beneath its directories, given `trees` (what lies beneath
    /// each of its resources, in order: [`beneath_trees`]): for a deny rule, whether its
    /// globs meet what lies beneath any directory; for an allow or ask rule, whether they
    /// cover everything beneath every directory. Sound either way: a set that could not be
    /// built meets, and never covers.
    ///
    /// Where a tree carries a complete listing of what exists beneath it
    /// ([`BeneathTree::existing`]), a deny rule meets it only through a path that exists
    /// (its pattern may name files that are not there), and an allow rule must also match
    /// the symlink targets found in it.
    pub fn beneath_verdict(&self, trees: &[BeneathTree]) -> bool {
        let set = self.resource_paths();
        if self.effect == Effect::Deny {
            trees.iter().any(|t| match (set, &t.existing, &t.set) {
                // The entries only where the pattern can meet the tree at all (a cheap walk
                // of two small DFAs first); symlink targets lie elsewhere: always.
                (Some(s), Some(existing), tree) => {
                    (tree.as_ref().is_none_or(|tree| s.meets(tree))
                        && s.find(existing.entries.iter().map(String::as_str))
                            .is_some())
                        || s.find(existing.links.iter().map(String::as_str)).is_some()
                }
                (Some(s), None, Some(tree)) => s.meets(tree),
                _ => true,
            })
        } else {
            !trees.is_empty()
                && trees.iter().all(|t| match (set, &t.set) {
                    (Some(s), Some(tree)) => {
                        s.covers(tree)
                            && t.existing.as_ref().is_none_or(|e| {
                                s.find_missing(e.links.iter().map(String::as_str)).is_none()
                            })
                    }
                    _ => false,
                })
        }
    }

    /// For a deny rule that meets what lies beneath a tree: the existing path it matches
    /// (when the tree has a listing), for the reason of a decision.
    pub fn met_path<'t>(&self, tree: &'t BeneathTree) -> Option<&'t str> {
        let set = self.resource_paths()?;
        set.find(tree.existing.as_ref()?.reached())
    }

    /// Like `CompiledRule::matches`, with the resource verdict computed by the caller
    /// (`Some(ok)`: for deny rules "any resource matches", else "every resource matches").
    /// For a part that reaches beneath its directories, what lies beneath them is compared
    /// too ([`CompiledRule::beneath_verdict`]).
    #[cfg(test)]
    pub fn matches_with(
        &self,
        facts: &CallFacts<'_>,
        part: &Part,
        resources_ok: Option<bool>,
    ) -> bool {
        let trees = part.beneath.as_ref().map(|_| beneath_trees(part));
        self.matches_in(facts, part, resources_ok, trees.as_deref())
    }

    /// Like `CompiledRule::matches_with`, with what lies beneath a recursive part's
    /// directories built once by the caller ([`beneath_trees`]; `None` builds them here).
    pub fn matches_in(
        &self,
        facts: &CallFacts<'_>,
        part: &Part,
        resources_ok: Option<bool>,
        trees: Option<&[BeneathTree]>,
    ) -> bool {
        let allow = self.effect == Effect::Allow;
        if !self.covers(part.operation) {
            return false;
        }
        if allow && part.opaque && !self.vouches_for_unknown(part) {
            return false;
        }
        if self.builtin.is_some_and(|b| b != facts.builtin) {
            return false;
        }
        if let Some(set) = &self.servers {
            match facts.server {
                Some(s) if set.is_match(s) => {}
                _ => return false,
            }
        }
        if let Some(set) = &self.tools
            && !set.is_match(facts.tool)
        {
            return false;
        }
        if self.resource_globs.is_some() {
            // A part that hides what it touches could be any resource: every deny rule
            // treats it as matching.
            let hidden_deny = part.hidden && self.effect == Effect::Deny;
            if part.resources.is_empty() && !hidden_deny {
                return false;
            }
            let ok = match (resources_ok, &self.resources) {
                _ if hidden_deny => true,
                (Some(ok), _) => ok,
                (None, Some(set)) => {
                    if self.effect == Effect::Deny {
                        part.resources.iter().any(|r| set.is_match(r))
                    } else {
                        part.resources.iter().all(|r| set.is_match(r))
                    }
                }
                // No way to tell: fail closed (deny rules match, others do not).
                (None, None) => self.effect == Effect::Deny,
            };
            // What lies beneath a recursive part's directories: a deny rule also matches
            // when it meets it, an allow or ask rule only when it covers it as well.
            let ok = match &part.beneath {
                Some(_) if !hidden_deny && (ok != (self.effect == Effect::Deny)) => {
                    let built;
                    let trees = match trees {
                        Some(t) => t,
                        None => {
                            built = beneath_trees(part);
                            &built
                        }
                    };
                    self.beneath_verdict(trees)
                }
                _ => ok,
            };
            if !ok {
                return false;
            }
        }
        if let Some(execs) = &self.executables {
            match &part.executable {
                Some(e) => {
                    let base = e.rsplit('/').next().unwrap_or(e);
                    if !execs.iter().any(|x| x == base) {
                        return false;
                    }
                }
                None => return false,
            }
        }
        if let Some(cmds) = &self.commands {
            match &part.argv {
                Some(argv) if cmds.iter().any(|c| c == argv) => {}
                _ => return false,
            }
        }
        if self.hosts.is_some() || self.methods.is_some() {
            let Some(net) = &part.network else {
                return false;
            };
            if let Some(set) = &self.hosts
                && !set.is_match(net.host.to_lowercase().trim_end_matches('.'))
            {
                return false;
            }
            if let Some(methods) = &self.methods
                && !methods.iter().any(|m| m.eq_ignore_ascii_case(&net.method))
            {
                return false;
            }
        }
        if let Some(want) = &self.annotations {
            for (key, value) in want {
                let given = facts
                    .annotations
                    .and_then(|a| a.get(key))
                    .and_then(serde_json::Value::as_bool);
                let effective = match given {
                    Some(v) => Some(v),
                    // Allow rules count only what the pinned definition says explicitly;
                    // ask and deny rules fall back to MCP's defaults (destructive, open world).
                    None if allow => None,
                    None => annotation_default(key),
                };
                if effective != Some(*value) {
                    return false;
                }
            }
        }
        true
    }
}

/// Rule `later` can never decide because `earlier` matches everything it matches.
/// Conservative: only reports when every constraint of `earlier` is absent or a superset.
pub fn covers_rule(earlier: &Rule, later: &Rule) -> bool {
    fn superset<T: PartialEq>(a: &Option<Vec<T>>, b: &Option<Vec<T>>) -> bool {
        match (a, b) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => b.iter().all(|x| a.contains(x)),
        }
    }
    if !later
        .operations
        .iter()
        .all(|o| earlier.operations.contains(o))
    {
        return false;
    }
    // An allow rule cannot match opaque parts a later ask/deny rule still sees.
    if earlier.effect == Effect::Allow && later.effect != Effect::Allow {
        return false;
    }
    let ann = match (&earlier.annotations, &later.annotations) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(a), Some(b)) => a.iter().all(|(k, v)| b.get(k) == Some(v)),
    };
    // Resources: "**" covers everything.
    let res = match (&earlier.resources, &later.resources) {
        (Some(a), _) if a.iter().any(|p| p == "**" || p == "/**") => true,
        (a, b) => superset(a, b),
    };
    let builtin = earlier.builtin.is_none() || earlier.builtin == later.builtin;
    ann && res
        && builtin
        && superset(&earlier.servers, &later.servers)
        && superset(&earlier.tools, &later.tools)
        && superset(&earlier.executables, &later.executables)
        && superset(&earlier.commands, &later.commands)
        && superset(&earlier.hosts, &later.hosts)
        && superset(&earlier.methods, &later.methods)
}

#[cfg(test)]
mod tests {
    use super::beneath_trees::Existing;
    use super::*;
    use crate::action::Network;

    fn vars() -> Vars {
        Vars {
            workspace: "/w".into(),
            home: "/home/u".into(),
        }
    }

    fn rule(yaml: &str) -> Rule {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn compiled(yaml: &str) -> CompiledRule {
        let (c, issues) = compile_rule(&rule(yaml), 0, &vars());
        assert!(
            issues.iter().all(|i| i.severity != Severity::Error),
            "{issues:?}"
        );
        c.unwrap()
    }

    fn fs(op: Operation, paths: &[&str]) -> Part {
        let mut p = Part::new(op);
        p.resources = paths.iter().map(|s| (*s).to_owned()).collect();
        p
    }

    const FACTS: CallFacts<'static> = CallFacts {
        server: Some("filesystem"),
        tool: "read_file",
        annotations: None,
        builtin: false,
    };

    #[test]
    fn resource_globs_table() {
        let allow = compiled(
            "{id: a, effect: allow, operations: [fs.read], resources: ['${workspace}/**']}",
        );
        let deny = compiled(
            "{id: d, effect: deny, operations: [fs.read], resources: ['**/.env', '~/.ssh/**']}",
        );
        let cases: &[(&CompiledRule, &[&str], bool)] = &[
            (&allow, &["/w"], true),
            (&allow, &["/w/a/b.rs"], true),
            (&allow, &["/w/a", "/etc/passwd"], false),
            (&allow, &["/wx/a"], false),
            (&allow, &[], false),
            (&deny, &["/w/.env"], true),
            (&deny, &["/w/src/a", "/w/.env"], true),
            (&deny, &["/home/u/.ssh"], true),
            (&deny, &["/home/u/.ssh/id_rsa"], true),
            (&deny, &["/w/.env.local"], false),
        ];
        for (r, paths, want) in cases {
            assert_eq!(
                r.matches(&FACTS, &fs(Operation::FsRead, paths)),
                *want,
                "{} {paths:?}",
                r.id
            );
        }
        // Operation must be covered.
        assert!(!allow.matches(&FACTS, &fs(Operation::FsWrite, &["/w/a"])));
    }

    #[test]
    fn star_does_not_cross_separator() {
        let r = compiled(
            "{id: a, effect: allow, operations: [fs.read], resources: ['${workspace}/*.md']}",
        );
        assert!(r.matches(&FACTS, &fs(Operation::FsRead, &["/w/README.md"])));
        assert!(!r.matches(&FACTS, &fs(Operation::FsRead, &["/w/docs/x.md"])));
    }

    #[test]
    fn workspace_with_glob_metacharacters_is_escaped() {
        let v = Vars {
            workspace: "/w[1]".into(),
            home: "/h".into(),
        };
        let (c, _) = compile_rule(
            &rule("{id: a, effect: allow, operations: [fs.read], resources: ['${workspace}/**']}"),
            0,
            &v,
        );
        let c = c.unwrap();
        assert!(c.matches(&FACTS, &fs(Operation::FsRead, &["/w[1]/x"])));
        assert!(!c.matches(&FACTS, &fs(Operation::FsRead, &["/w1/x"])));
    }

    #[test]
    fn an_allow_rule_naming_a_tool_exactly_vouches_for_its_unknown_part() {
        let mut p = Part::new(Operation::Unknown);
        p.opaque = true;
        // FACTS is a call of `read_file`.
        let named = compiled("{id: a, effect: allow, operations: [unknown], tools: [read_file]}");
        assert!(named.matches(&FACTS, &p));
        let other = compiled("{id: a, effect: allow, operations: [unknown], tools: [send_email]}");
        assert!(!other.matches(&FACTS, &p));
        // A glob is not naming: it would vouch for tools nobody looked at.
        let glob = compiled("{id: a, effect: allow, operations: [unknown], tools: ['read_*']}");
        assert!(!glob.matches(&FACTS, &p));
        // An opaque shell part is never vouched for by a tool name.
        let shell = compiled(
            "{id: a, effect: allow, operations: [shell.exec, unknown], tools: [read_file]}",
        );
        let mut sh = Part::new(Operation::ShellExec);
        sh.opaque = true;
        assert!(!shell.matches(&FACTS, &sh));
    }

    #[test]
    fn opaque_parts_never_match_allow() {
        let allow = compiled("{id: a, effect: allow, operations: [shell.exec], executables: [ls]}");
        let deny = compiled("{id: d, effect: deny, operations: [shell.exec], executables: [rm]}");
        let mut p = Part::new(Operation::ShellExec);
        p.executable = Some("ls".into());
        p.opaque = true;
        assert!(!allow.matches(&FACTS, &p));
        p.executable = Some("/bin/rm".into());
        assert!(deny.matches(&FACTS, &p));
    }

    #[test]
    fn commands_are_exact_argv() {
        let r =
            compiled("{id: t, effect: allow, operations: [shell.exec], commands: [[npm, test]]}");
        let mut p = Part::new(Operation::ShellExec);
        p.argv = Some(vec!["npm".into(), "test".into()]);
        p.executable = Some("npm".into());
        assert!(r.matches(&FACTS, &p));
        p.argv = Some(vec!["npm".into(), "test".into(), "--x".into()]);
        assert!(!r.matches(&FACTS, &p));
        p.argv = None;
        assert!(!r.matches(&FACTS, &p));
    }

    #[test]
    fn hosts_and_methods() {
        let r = compiled(
            "{id: h, effect: allow, operations: [net.request], hosts: ['*.Example.com'], methods: [get]}",
        );
        let net = |host: &str, method: &str| {
            let mut p = Part::new(Operation::NetRequest);
            p.network = Some(Network {
                url: format!("https://{host}/"),
                scheme: "https".into(),
                host: host.into(),
                port: Some(443),
                method: method.into(),
            });
            p
        };
        assert!(r.matches(&FACTS, &net("api.example.com", "GET")));
        assert!(!r.matches(&FACTS, &net("example.com", "GET")));
        assert!(!r.matches(&FACTS, &net("api.example.com.evil.net", "GET")));
        assert!(!r.matches(&FACTS, &net("api.example.com", "POST")));
    }

    #[test]
    fn annotations_explicit_for_allow_defaults_for_deny() {
        let allow = compiled(
            "{id: ro, effect: allow, operations: [unknown, fs.read], annotations: {readOnlyHint: true}}",
        );
        let ask = compiled(
            "{id: de, effect: ask, operations: [unknown], annotations: {destructiveHint: true}}",
        );
        let p = Part::new(Operation::FsRead);
        let u = Part::new(Operation::Unknown);
        let ro: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"readOnlyHint": true}"#).unwrap();
        let with = CallFacts {
            annotations: Some(&ro),
            ..FACTS
        };
        assert!(allow.matches(&with, &p));
        assert!(!allow.matches(&FACTS, &p));
        // destructiveHint defaults to true when absent.
        assert!(ask.matches(&FACTS, &u));
        let nd: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"destructiveHint": false}"#).unwrap();
        assert!(!ask.matches(
            &CallFacts {
                annotations: Some(&nd),
                ..FACTS
            },
            &u
        ));
    }

    #[test]
    fn compile_errors_are_located_by_path() {
        let (c, issues) = compile_rule(
            &rule(
                "{id: x, effect: allow, operations: [fs.read], resources: ['${wrkspace}/**', 'src/**'], hosts: [a.com]}",
            ),
            3,
            &vars(),
        );
        assert!(c.is_none());
        let paths: Vec<String> = issues.iter().map(|i| i.path.join(".")).collect();
        assert!(
            paths.contains(&"rules.3.resources.0".to_owned()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"rules.3.resources.1".to_owned()),
            "{paths:?}"
        );
        assert!(paths.contains(&"rules.3.hosts".to_owned()), "{paths:?}");
    }

    fn beneath(paths: &[&str], filters: &[&str]) -> Part {
        let mut p = fs(Operation::FsRead, paths);
        p.beneath = Some(crate::action::Beneath {
            filters: filters.iter().map(|f| (*f).to_owned()).collect(),
        });
        p
    }

    #[test]
    fn deny_rules_meet_and_allow_rules_cover_what_lies_beneath() {
        let keys = compiled(
            "{id: k, effect: deny, operations: [fs.read], resources: ['**/*.key', '~/.ssh/**']}",
        );
        let ws = compiled(
            "{id: w, effect: allow, operations: [fs.read], resources: ['${workspace}/**']}",
        );
        let ask = compiled(
            "{id: a, effect: ask, operations: [fs.read], resources: ['${workspace}/src/**']}",
        );
        let cases: &[(&CompiledRule, Part, bool)] = &[
            (&keys, beneath(&["/w"], &[]), true),
            (&keys, beneath(&["/w"], &["*.rs"]), false),
            (&keys, beneath(&["/w"], &["*.key"]), true),
            (&keys, beneath(&["/w/src", "/home/u"], &["*.rs"]), true),
            (&keys, beneath(&["/home/u/.ssh"], &["*.rs"]), true),
            (&ws, beneath(&["/w"], &[]), true),
            (&ws, beneath(&["/w", "/tmp"], &[]), false),
            (&ws, beneath(&["/"], &["*.rs"]), false),
            (&ask, beneath(&["/w/src/a"], &[]), true),
            (&ask, beneath(&["/w"], &["*.rs"]), false),
        ];
        for (r, part, want) in cases {
            assert_eq!(r.matches(&FACTS, part), *want, "{} {part:?}", r.id);
        }
        // The same parts without `beneath`: the directories alone.
        assert!(!keys.matches(&FACTS, &fs(Operation::FsRead, &["/w"])));
        assert!(ws.matches(&FACTS, &fs(Operation::FsRead, &["/w", "/w/a"])));
    }

    #[test]
    fn a_listing_decides_what_a_deny_pattern_meets() {
        let keys =
            compiled("{id: k, effect: deny, operations: [fs.read], resources: ['**/id_rsa*']}");
        let ws = compiled(
            "{id: w, effect: allow, operations: [fs.read], resources: ['${workspace}/**']}",
        );
        let part = beneath(&["/w"], &["*.rs"]);
        let tree = |entries: &[&str], links: &[&str]| {
            let mut t = beneath_trees(&part);
            if let Some(first) = t.first_mut() {
                first.existing = Some(Existing {
                    entries: entries.iter().map(|s| (*s).to_owned()).collect(),
                    links: links.iter().map(|s| (*s).to_owned()).collect(),
                });
            }
            t
        };
        // By pattern, `*.rs` names `id_rsa.rs`.
        assert!(keys.matches(&FACTS, &part));
        assert!(!keys.matches_in(&FACTS, &part, None, Some(&tree(&["/w/a.rs"], &[]))));
        assert!(keys.matches_in(&FACTS, &part, None, Some(&tree(&["/w/id_rsa.rs"], &[]))));
        // A symlink target counts whatever its name.
        assert!(keys.matches_in(&FACTS, &part, None, Some(&tree(&[], &["/k/id_rsa"]))));
        // Allow rules must cover the symlink targets too.
        assert!(ws.matches_in(&FACTS, &part, None, Some(&tree(&["/w/a.rs"], &["/w/b"]))));
        assert!(!ws.matches_in(&FACTS, &part, None, Some(&tree(&[], &["/etc/passwd"]))));
    }

    #[test]
    fn shadowing() {
        let a = rule("{id: a, effect: ask, operations: [fs.read, fs.write]}");
        let b = rule("{id: b, effect: allow, operations: [fs.read], resources: ['/x/**']}");
        assert!(covers_rule(&a, &b));
        assert!(!covers_rule(&b, &a));
    }
}
