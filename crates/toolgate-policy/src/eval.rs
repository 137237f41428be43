//! The decision engine: normalised action + contracts + rules → one [`Decision`].
//!
//! Rules: every matching deny wins; otherwise the first matching rule in file order;
//! otherwise `default`. Each part of an action is evaluated on its own and the action's
//! verdict is its most restrictive part's. The final decision is the most restrictive of
//! the contracts' results and the rules' result; every contributing result is recorded.
//! Deterministic: the same inputs give the same decision.

#[cfg(test)]
mod props;
mod rule_pass;

use std::collections::HashMap;

use serde::Serialize;

use crate::action::{Action, Operation, Part};
use crate::contracts_impl::Contracts;
use crate::contracts_impl::packs::pack_names;
use crate::decision::{Contract, ContractResult, Effect, SinkFinding};
use crate::diag_impl::{Diagnostic, Diagnostics};
use crate::model::Policy;
use crate::normalize::{NormalizeContext, ToolCall, normalize_mapped};
use crate::protect_impl::{Protections, SELF_PROTECTION_RULE};
use crate::rules::{
    CallFacts, CompiledRule, Vars, beneath_trees, beneath_trees_listed, compile_rule_with,
    component_literal,
};
use crate::session::Session;

/// The verdict on one tool call and how it was reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub action: Action,
    pub effect: Effect,
    /// What decided: a contract, a rule, or the default.
    pub contract: Contract,
    /// The deciding rule's id when `contract` is `rule`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    pub reason: String,
    /// Every rule that matched any part, in file order.
    pub matched_rules: Vec<String>,
    /// Every contributing result (contracts, then the rules' result).
    pub results: Vec<ContractResult>,
    /// Set when a session approval turned an `ask` into `allow`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by_session: Option<String>,
    /// For an approval prompt: the sink values of the deciding sink-gate result (which
    /// argument, which value, where it came from).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sinks: Vec<SinkFinding>,
}

/// The rules' verdict on an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulesOutcome {
    pub effect: Effect,
    /// The deciding rule, or `None` when the default decided.
    pub rule: Option<String>,
    pub reason: String,
    pub matched_rules: Vec<String>,
}

impl RulesOutcome {
    /// As a contributing result (`rule` or `default`).
    pub fn to_result(&self) -> ContractResult {
        let mut r = ContractResult::new(
            if self.rule.is_some() {
                Contract::Rule
            } else {
                Contract::Default
            },
            self.effect,
            self.reason.clone(),
        );
        r.rule = self.rule.clone();
        r
    }
}

/// A compiled policy, ready to decide calls.
#[derive(Debug)]
pub struct Engine {
    policy: Policy,
    vars: Vars,
    rules: Vec<CompiledRule>,
    /// Every rule's resource globs in one set; `owners[i]` is the rule of glob `i`.
    resource_index: globset::GlobSet,
    owners: Vec<usize>,
    /// Resource globs `**/NAME/**` kept out of the set: NAME → the rules that have one
    /// (see [`component_literal`]).
    components: HashMap<String, Vec<usize>>,
    /// For each operation (by position in [`Operation::ALL`]), the rules that cover it, in
    /// file order: a part is only compared with those (a rule never matches a part whose
    /// operation it does not cover).
    by_operation: Vec<Vec<usize>>,
    contracts: Contracts,
    /// toolgate's self-protection: built-in deny rules evaluated before the policy's.
    protections: Protections,
}

impl Engine {
    /// Compiles the rules with the real `${workspace}` and `${home}` (canonical absolute
    /// paths). Fails when any rule does not compile; a proxy must not start then.
    pub fn new(policy: Policy, vars: Vars) -> Result<Engine, Diagnostics> {
        let mut diags = Diagnostics::new("policy", "");
        for (name, value) in [("workspace", &vars.workspace), ("home", &vars.home)] {
            if !value.starts_with('/') {
                diags.push(
                    Diagnostic::error(format!(
                        "`${{{name}}}` must be an absolute path, got `{value}`"
                    ))
                    .with_help(format!("pass an absolute --{name}")),
                );
            }
        }
        let mut rules = Vec::with_capacity(policy.rules.len());
        for (i, rule) in policy.rules.iter().enumerate() {
            let (compiled, issues) = compile_rule_with(rule, i, &vars, false);
            for issue in issues {
                if issue.severity == crate::diag_impl::Severity::Error {
                    let mut d = Diagnostic::error(format!(
                        "{} (at `{}`)",
                        issue.message,
                        issue.path.join(".")
                    ));
                    if let Some(h) = issue.help {
                        d = d.with_help(h);
                    }
                    diags.push(d);
                }
            }
            if let Some(c) = compiled {
                rules.push(c);
            }
        }
        let packs = policy.packs.clone().unwrap_or_else(pack_names);
        let contracts = match Contracts::compile(&policy.tools, &packs) {
            Ok(c) => c,
            Err(issues) => {
                for issue in issues {
                    if issue.severity == crate::contracts_impl::Severity::Error {
                        let mut d = Diagnostic::error(format!(
                            "{} (at `{}`)",
                            issue.message,
                            issue.path.join(".")
                        ));
                        if let Some(h) = issue.help {
                            d = d.with_help(h);
                        }
                        diags.push(d);
                    }
                }
                Contracts::default()
            }
        };
        let mut builder = globset::GlobSetBuilder::new();
        let mut owners = Vec::new();
        let mut components: HashMap<String, Vec<usize>> = HashMap::new();
        for (pos, rule) in rules.iter().enumerate() {
            for g in rule.resource_globs().unwrap_or_default() {
                if let Some(name) = component_literal(g.glob()) {
                    components.entry(name.to_owned()).or_default().push(pos);
                } else {
                    builder.add(g.clone());
                    owners.push(pos);
                }
            }
        }
        let resource_index = match builder.build() {
            Ok(set) => set,
            Err(e) => {
                diags.push(Diagnostic::error(format!(
                    "cannot compile the resource globs: {e}"
                )));
                globset::GlobSet::empty()
            }
        };
        if diags.has_errors() {
            return Err(diags);
        }
        Ok(Engine {
            policy,
            vars,
            by_operation: Operation::ALL
                .iter()
                .map(|op| {
                    (0..rules.len())
                        .filter(|i| rules.get(*i).is_some_and(|r| r.covers(*op)))
                        .collect()
                })
                .collect(),
            rules,
            resource_index,
            owners,
            components,
            contracts,
            protections: Protections::default(),
        })
    }

    /// Adds toolgate's self-protection (see [`crate::protect`]): deny rules on toolgate's own
    /// files, evaluated before, and regardless of, the policy's rules.
    pub fn with_protections(mut self, protections: Protections) -> Engine {
        self.protections = protections;
        self
    }

    /// The self-protection in force.
    pub fn protections(&self) -> &Protections {
        &self.protections
    }

    /// The self-protection's verdict on an action: a deny when any part meets a protected
    /// resource.
    /// Parts that hide what they touch (`hidden`) are looked at apart: the policy's own
    /// deny rules meet them too, and name the reason when they do.
    fn protected(
        &self,
        action: &Action,
        facts: &CallFacts<'_>,
        hidden: bool,
        fs: Option<&dyn crate::fsfacts::FsFacts>,
    ) -> Option<RulesOutcome> {
        for part in action.parts.iter().filter(|p| p.hidden == hidden) {
            // A recursive part meets a protected file as a policy's deny rule does: through
            // what exists beneath it, where that can be listed.
            let trees = match (part.beneath.is_some(), fs) {
                (false, _) => Vec::new(),
                (true, Some(fs)) => beneath_trees_listed(part, fs),
                (true, None) => beneath_trees(part),
            };
            for (rule, p) in &self.protections.rules {
                if rule.matches_in(
                    facts,
                    part,
                    None,
                    part.beneath.is_some().then_some(trees.as_slice()),
                ) {
                    return Some(RulesOutcome {
                        effect: Effect::Deny,
                        rule: Some(SELF_PROTECTION_RULE.to_owned()),
                        reason: crate::protect_impl::reason(&describe_part(part), p, part.hidden),
                        matched_rules: vec![SELF_PROTECTION_RULE.to_owned()],
                    });
                }
            }
        }
        None
    }

    /// The compiled contracts (packs and `tools:` entries).
    pub fn contracts(&self) -> &Contracts {
        &self.contracts
    }

    /// Decides one tool call: normalises it, runs the contracts (pinning, budget,
    /// constraints, sink gate; the attempt counts toward budgets) and the rules, and returns
    /// the most restrictive result with every contributing one recorded. A session approval
    /// of this exact action (and tool definition) turns an `ask`, never a `deny`, into
    /// `allow`. Annotations count only from the session's pinned, unchanged definition.
    pub fn decide(
        &self,
        call: &ToolCall<'_>,
        session: &mut Session,
        ctx: &NormalizeContext<'_>,
        now_ms: u64,
    ) -> Decision {
        self.decide_as(call, session, ctx, now_ms, false)
    }

    /// [`Engine::decide`] for a call whose origin the caller knows: `builtin` is true only
    /// for a client's own built-in tool seen through a client hook (rules with
    /// `builtin: true` match only those; an MCP server's tool is never built in, whatever
    /// its name).
    pub fn decide_as(
        &self,
        call: &ToolCall<'_>,
        session: &mut Session,
        ctx: &NormalizeContext<'_>,
        now_ms: u64,
        builtin: bool,
    ) -> Decision {
        // The contract is resolved first (the session keeps it per tool, so this is a
        // lookup); its mapping is the one normalisation uses, for the same definition
        // (pinned, else the call's), and nothing before the rules changes the pins. The
        // pinned definition is borrowed, not copied: normalisation reads it before the
        // contracts take the session mutably, and the rules read it again afterwards.
        let resolved = self
            .contracts
            .lookup_in(call.tool, session, call.definition);
        let action = Self::normalized(call, session, &resolved, ctx);
        // A URL that one of the user's own allow rules matches (host and method) passes the
        // sink gate: the user trusts it.
        let trust = |token: &str| self.allow_rule_trusting(call, &action, token, builtin);
        let results = self.contracts.check_resolved(
            call,
            &action,
            session,
            Some(ctx),
            now_ms,
            resolved,
            Some(&trust),
        );
        let annotations = session
            .pinned_definition(call.tool)
            .and_then(|d| d.get("annotations"))
            .and_then(serde_json::Value::as_object);
        let facts = CallFacts {
            server: call.server,
            tool: call.tool,
            annotations,
            builtin,
        };
        let rules = self.decide_rules_in(&action, &facts, Some(ctx.fs));
        let mut decision = combine(action, &rules, results);
        if decision.effect == Effect::Ask {
            let fp = session.fingerprint_of(call.tool).map(str::to_owned);
            if let Some(scope) =
                session.approval_for_call(&decision.action, Some(call.arguments), fp.as_deref())
            {
                let what = match scope {
                    crate::session::ApprovalScope::Action => "this action".to_owned(),
                    crate::session::ApprovalScope::Destination(d) => format!("destination `{d}`"),
                };
                decision.effect = Effect::Allow;
                decision.reason = format!(
                    "approved for this session ({what}); without the approval: {}",
                    decision.reason
                );
                decision.approved_by_session = Some(what);
            }
        }
        if builtin
            && let Some(result) = crate::command_sink::gate(
                &self.contracts,
                call.tool,
                call.arguments,
                session,
                &decision.action,
                decision.effect,
            )
        {
            decision.effect = result.effect;
            decision.contract = Contract::SinkGate;
            decision.rule = None;
            decision.reason = result.reason.clone();
            decision.approved_by_session = None;
            decision.results.push(result);
        }
        decision
    }

    /// The allow rule that trusts a URL destination of this call, if any: every exact
    /// `net.request` part of the action to the URL's host is allowed by a rule that names
    /// its hosts (not only `*`), the method included when the rule lists methods. The rule
    /// is judged without annotations (an allow rule that requires them does not vouch here).
    fn allow_rule_trusting(
        &self,
        call: &ToolCall<'_>,
        action: &Action,
        token: &str,
        builtin: bool,
    ) -> Option<String> {
        let url = url::Url::parse(token).ok()?;
        let host = url.host_str()?.trim_end_matches('.').to_ascii_lowercase();
        let parts: Vec<&Part> = action
            .parts
            .iter()
            .filter(|p| {
                p.operation == Operation::NetRequest
                    && p.network.as_ref().is_some_and(|n| {
                        n.url == token || n.host.trim_end_matches('.').eq_ignore_ascii_case(&host)
                    })
            })
            .collect();
        if parts.is_empty() || parts.iter().any(|p| p.opaque) {
            return None;
        }
        let facts = CallFacts {
            server: call.server,
            tool: call.tool,
            annotations: None,
            builtin,
        };
        let mut matched = vec![false; self.rules.len()];
        let mut trusted_by = None;
        for part in parts {
            let (effect, rule) = self.decide_part(&facts, part, &mut matched, None);
            let rule = rule.and_then(|i| self.rules.get(i))?;
            let names_hosts = self
                .policy
                .rules
                .get(rule.index)
                .and_then(|r| r.hosts.as_ref())
                .is_some_and(|h| {
                    !h.is_empty() && h.iter().all(|p| !p.trim_matches(['*', '.']).is_empty())
                });
            if effect != Effect::Allow || !names_hosts {
                return None;
            }
            trusted_by = Some(rule.id.clone());
        }
        trusted_by
    }

    /// The policy the engine was compiled from.
    /// The action `call` stands for, normalised as [`Engine::decide`] normalises it (the
    /// tool's contract mapping, its pinned definition): what a hook's after-event read, say.
    pub fn action_of(
        &self,
        call: &ToolCall<'_>,
        session: &mut Session,
        ctx: &NormalizeContext<'_>,
    ) -> Action {
        let resolved = self
            .contracts
            .lookup_in(call.tool, session, call.definition);
        Self::normalized(call, session, &resolved, ctx)
    }

    fn normalized(
        call: &ToolCall<'_>,
        session: &Session,
        resolved: &crate::contracts_impl::ResolvedTool<'_>,
        ctx: &NormalizeContext<'_>,
    ) -> Action {
        let definition = session.pinned_definition(call.tool).or(call.definition);
        let call = ToolCall {
            definition,
            ..*call
        };
        normalize_mapped(&call, resolved.mapping(), ctx)
    }

    /// Whether the results of `tool` have their secrets of a known shape redacted before the
    /// model sees them: the policy's `redact_output`, or the tool's `output: {redact: …}`.
    pub fn redacts_output(&self, tool: &str, session: &mut Session) -> bool {
        self.policy.redact_output.is_some()
            || self
                .contracts
                .lookup_in(tool, session, None)
                .contract()
                .output
                .as_ref()
                .is_some_and(|o| o.redact().is_some())
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The `${workspace}` and `${home}` it was compiled with.
    pub fn vars(&self) -> &Vars {
        &self.vars
    }
}

/// Combines contributing results into a decision: the most restrictive effect wins. On a
/// tie the contracts (pinning, budget, constraint, sink gate: they carry what a prompt
/// needs) name the decider of an ask or deny, then a matching rule, then the default; an
/// allow is named after the rule (or default) that granted it.
pub fn combine(action: Action, rules: &RulesOutcome, contracts: Vec<ContractResult>) -> Decision {
    let rule_result = rules.to_result();
    let mut results = contracts;
    results.push(rule_result);
    let effect = results
        .iter()
        .map(|r| r.effect)
        .max()
        .unwrap_or(Effect::Deny);
    let rank = |r: &ContractResult| match (effect, r.contract) {
        // An allow is granted by the rules (or the default); passing contracts only agree.
        (Effect::Allow, Contract::Rule) => 0,
        (Effect::Allow, Contract::Default) => 1,
        (Effect::Allow, _) => 2,
        (_, Contract::Rule) => 1,
        (_, Contract::Default) => 2,
        _ => 0,
    };
    let decider = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.effect == effect)
        .min_by_key(|(i, r)| (rank(r), *i))
        .map(|(_, r)| r.clone());
    let decider = decider.unwrap_or_else(|| {
        ContractResult::new(
            Contract::Default,
            Effect::Deny,
            "internal error: no result; denied",
        )
    });
    // An allowed call that passed the sink gate says why its destinations passed too:
    // "matches allow rule `x`; destination `a@corp.com` is trusted".
    let mut reason = decider.reason.clone();
    if effect == Effect::Allow {
        for r in results
            .iter()
            .filter(|r| r.contract == Contract::SinkGate && r.effect == Effect::Allow)
        {
            reason.push_str("; ");
            reason.push_str(&r.reason);
        }
    }
    Decision {
        action,
        effect: decider.effect,
        contract: decider.contract,
        rule: decider.rule.clone(),
        reason,
        matched_rules: rules.matched_rules.clone(),
        sinks: if decider.contract == Contract::SinkGate {
            decider.sinks.clone()
        } else {
            Vec::new()
        },
        results,
        approved_by_session: None,
    }
}

/// A short description of a part for reasons: "`fs.read` of `/w/a`".
pub fn describe_part(part: &Part) -> String {
    let op = part.operation;
    let detail = if let Some(net) = &part.network {
        format!(" `{} {}`", net.method, net.url)
    } else if let Some(argv) = &part.argv {
        format!(" `{}`", argv.join(" "))
    } else if let Some(exe) = part
        .executable
        .as_ref()
        .filter(|_| !op.is_fs() || part.resources.is_empty())
    {
        format!(" of `{exe}`")
    } else if !part.resources.is_empty() {
        let shown: Vec<String> = part
            .resources
            .iter()
            .take(3)
            .map(|r| format!("`{r}`"))
            .collect();
        let more = part.resources.len().saturating_sub(3);
        let listed = if more > 0 {
            format!(" of {} and {more} more", shown.join(", "))
        } else {
            format!(" of {}", shown.join(", "))
        };
        let by = part
            .executable
            .as_ref()
            .map(|exe| format!(" by `{exe}`"))
            .unwrap_or_default();
        let whole = match &part.beneath {
            None => listed,
            Some(b) if b.filters.is_empty() => format!("{listed} and everything beneath"),
            Some(b) => format!(
                "{listed} and what lies beneath (file names {})",
                b.filters
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        format!("{whole}{by}")
    } else {
        String::new()
    };
    let opaque = if part.hidden {
        " (hides what it touches)"
    } else if part.opaque && op != Operation::Unknown {
        " (not understood exactly)"
    } else {
        ""
    };
    format!("`{op}`{detail}{opaque}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::load;

    fn engine(yaml: &str) -> Engine {
        let p = load(yaml, "p.yaml").unwrap().policy;
        Engine::new(
            p,
            Vars {
                workspace: "/w".into(),
                home: "/home/u".into(),
            },
        )
        .unwrap()
    }

    fn fs(op: Operation, paths: &[&str]) -> Part {
        let mut p = Part::new(op);
        p.resources = paths.iter().map(|s| (*s).to_owned()).collect();
        p
    }

    fn action(parts: Vec<Part>) -> Action {
        Action {
            server: None,
            tool: "t".into(),
            parts,
        }
    }

    const FACTS: CallFacts<'static> = CallFacts {
        server: None,
        tool: "t",
        annotations: None,
        builtin: false,
    };

    const POLICY: &str = "version: 1\ndefault: ask\nrules:\n  - {id: ws, effect: allow, operations: [fs.read], resources: ['${workspace}/**']}\n  - {id: env, effect: deny, operations: [fs.read], resources: ['**/.env']}\n  - {id: ask-src, effect: ask, operations: [fs.read], resources: ['${workspace}/src/**']}\n";

    #[test]
    fn deny_wins_over_earlier_allow() {
        let e = engine(POLICY);
        let o = e.decide_rules(&action(vec![fs(Operation::FsRead, &["/w/.env"])]), &FACTS);
        assert_eq!((o.effect, o.rule.as_deref()), (Effect::Deny, Some("env")));
        assert_eq!(o.matched_rules, vec!["ws", "env"]);
    }

    #[test]
    fn first_match_wins_and_default() {
        let e = engine(POLICY);
        let o = e.decide_rules(
            &action(vec![fs(Operation::FsRead, &["/w/src/a.rs"])]),
            &FACTS,
        );
        assert_eq!((o.effect, o.rule.as_deref()), (Effect::Allow, Some("ws")));
        let o = e.decide_rules(
            &action(vec![fs(Operation::FsRead, &["/etc/passwd"])]),
            &FACTS,
        );
        assert_eq!((o.effect, o.rule), (Effect::Ask, None));
        // Every resource must match an allow rule.
        let o = e.decide_rules(
            &action(vec![fs(Operation::FsRead, &["/w/a", "/etc/passwd"])]),
            &FACTS,
        );
        assert_eq!(o.effect, Effect::Ask);
    }

    #[test]
    fn most_restrictive_part_decides() {
        let e = engine(POLICY);
        let o = e.decide_rules(
            &action(vec![
                fs(Operation::FsRead, &["/w/a"]),
                fs(Operation::FsRead, &["/w/x/.env"]),
            ]),
            &FACTS,
        );
        assert_eq!(o.effect, Effect::Deny);
        let o = e.decide_rules(&action(vec![]), &FACTS);
        assert_eq!(o.effect, Effect::Deny);
    }

    #[test]
    fn builtin_rules_match_only_the_clients_own_tools() {
        let e = engine(
            "version: 1\ndefault: ask\nrules:\n  - {id: book, effect: allow, operations: [unknown], builtin: true, tools: [Task]}\n  - {id: mcp, effect: deny, operations: [unknown], builtin: false, tools: [Nuke]}\n",
        );
        let unknown = || action(vec![Part::new(Operation::Unknown)]);
        let facts = |tool, server, builtin| CallFacts {
            server,
            tool,
            annotations: None,
            builtin,
        };
        let o = e.decide_rules(&unknown(), &facts("Task", None, true));
        assert_eq!((o.effect, o.rule.as_deref()), (Effect::Allow, Some("book")));
        // The same name from an MCP server (through the hook, or wrapped): not built in.
        let o = e.decide_rules(&unknown(), &facts("Task", Some("evil"), false));
        assert_eq!((o.effect, o.rule), (Effect::Ask, None));
        let o = e.decide_rules(&unknown(), &facts("Task", None, false));
        assert_eq!((o.effect, o.rule), (Effect::Ask, None));
        let o = e.decide_rules(&unknown(), &facts("Nuke", Some("s"), false));
        assert_eq!(o.effect, Effect::Deny);
        let o = e.decide_rules(&unknown(), &facts("Nuke", None, true));
        assert_eq!(o.effect, Effect::Ask);
        // Strict loading: a quoted boolean is not one.
        assert!(
            load(
                "version: 1\nrules:\n  - {id: b, effect: allow, operations: [unknown], builtin: 'true', tools: [Task]}\n",
                "p.yaml"
            )
            .is_err()
        );
    }

    #[test]
    fn self_protection_denies_whatever_the_rules_allow() {
        use crate::protect_impl::{Protected, ProtectedKind, Protections};
        let e = engine(
            "version: 1\ndefault: allow\nrules:\n  - {id: ws, effect: allow, operations: [fs.read, fs.write, fs.delete], resources: ['${workspace}/**', '/run/**']}\n",
        )
        .with_protections(
            Protections::compile(vec![
                Protected::file(
                    ProtectedKind::PolicyFile,
                    &["/w/toolgate.yaml".to_owned(), "/real/p[1].yaml".to_owned()],
                ),
                Protected::tree(ProtectedKind::BrokerDirectory, &["/run/tg".to_owned()]).secret(),
                Protected::anywhere(ProtectedKind::ClientHooks, &["**/.claude/settings.json"]),
            ])
            .unwrap(),
        );
        for (op, path) in [
            (Operation::FsWrite, "/w/toolgate.yaml"),
            (Operation::FsDelete, "/w/toolgate.yaml"),
            (Operation::FsWrite, "/real/p[1].yaml"),
            (Operation::FsRead, "/run/tg/token"),
            (Operation::FsDelete, "/run/tg"),
            (Operation::FsWrite, "/w/sub/.claude/settings.json"),
            (Operation::FsWrite, "/elsewhere/.claude/settings.json"),
        ] {
            let o = e.decide_rules(&action(vec![fs(op, &["/w/a.rs", path])]), &FACTS);
            assert_eq!(
                (o.effect, o.rule.as_deref()),
                (Effect::Deny, Some("toolgate-self-protection")),
                "{op} {path}"
            );
            assert!(
                o.reason.contains("toolgate's self-protection"),
                "{}",
                o.reason
            );
            assert!(o.reason.contains("help: "), "{}", o.reason);
        }
        assert!(
            e.decide_rules(
                &action(vec![fs(Operation::FsWrite, &["/w/toolgate.yaml"])]),
                &FACTS
            )
            .reason
            .contains("toolgate's own policy file")
        );
        // Reading the policy is fine; the escaped glob matches only itself.
        for (op, path) in [
            (Operation::FsRead, "/w/toolgate.yaml"),
            (Operation::FsWrite, "/real/p1.yaml"),
            (Operation::FsWrite, "/run/tgx"),
            (Operation::FsWrite, "/w/toolgate.yaml.bak"),
            (Operation::FsWrite, "/w/.claude/commands/review.md"),
        ] {
            let o = e.decide_rules(&action(vec![fs(op, &[path])]), &FACTS);
            assert_eq!(o.effect, Effect::Allow, "{op} {path}: {}", o.reason);
        }
        // A write that hides what it touches could be any of them.
        let o = e.decide_rules(&action(vec![Part::hidden(Operation::FsWrite)]), &FACTS);
        assert_eq!(o.effect, Effect::Deny);
        assert!(o.reason.contains("hides what it touches"), "{}", o.reason);
    }

    #[test]
    fn combine_picks_most_restrictive_and_records_all() {
        let e = engine(POLICY);
        let a = action(vec![fs(Operation::FsRead, &["/w/a"])]);
        let o = e.decide_rules(&a, &FACTS);
        let d = combine(
            a,
            &o,
            vec![ContractResult::new(
                Contract::Budget,
                Effect::Deny,
                "over budget",
            )],
        );
        assert_eq!((d.effect, d.contract), (Effect::Deny, Contract::Budget));
        assert_eq!(d.results.len(), 2);
    }
}
