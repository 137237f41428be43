//! Checking one call against its tool's contract: pinning, budget, argument constraints and
//! the sink gate.

use super::{Contracts, ResolvedTool, annotations_match, expand_home, show_value, within};
use crate::action::Action;
use crate::contracts_impl::heuristics::is_recipient_param;
use crate::contracts_impl::{ToolContract, compile_pattern, parse_window};
use crate::decision::{Contract, ContractResult, Effect};
use crate::fsfacts::lexical_normalize;
use crate::normalize::{NormalizeContext, ToolCall};
use crate::session::{PinState, Session};
use serde_json::Value;

impl Contracts {
    /// Pinning, budget, constraints and sink gate for one call; records the attempt in the
    /// budget. Without a [`NormalizeContext`] prefixes with `${workspace}` or `${home}`
    /// cannot be resolved and deny; prefer [`Contracts::check_in`].
    pub fn check(
        &self,
        call: &ToolCall,
        action: &Action,
        session: &mut Session,
        now_ms: u64,
    ) -> Vec<ContractResult> {
        self.check_in(call, action, session, None, now_ms)
    }

    /// [`Contracts::check`] with the normalisation context (workspace, home, filesystem
    /// facts) used to resolve prefixes and path arguments.
    pub fn check_in(
        &self,
        call: &ToolCall,
        action: &Action,
        session: &mut Session,
        ctx: Option<&NormalizeContext>,
        now_ms: u64,
    ) -> Vec<ContractResult> {
        let resolved = self.lookup_in(call.tool, session, call.definition);
        self.check_resolved(call, action, session, ctx, now_ms, resolved, None)
    }

    /// [`Contracts::check_in`] with the tool's contract already resolved, by
    /// [`Contracts::lookup_in`] (the session's pinned definition, else the call's), and the
    /// engine's test of which allow rule trusts a destination (for the sink gate).
    #[allow(
        clippy::too_many_arguments,
        reason = "one call site (the engine); a struct would only rename them"
    )]
    pub(crate) fn check_resolved(
        &self,
        call: &ToolCall,
        action: &Action,
        session: &mut Session,
        ctx: Option<&NormalizeContext>,
        now_ms: u64,
        resolved: ResolvedTool<'_>,
        rule_trust: Option<crate::contracts_impl::sink::RuleTrust<'_>>,
    ) -> Vec<ContractResult> {
        let tool = call.tool;
        let mut results = Vec::new();
        // Everything that reads the definition borrows the session immutably; the budget,
        // which writes, comes last (and is reported second).
        let resolved = {
            let definition = session.pinned_definition(tool).or(call.definition);
            if session.limits().pinning {
                results.push(pinning(session, tool, resolved.contract(), definition));
            }
            if let Some(r) = self.constraints(resolved.contract(), call, action, ctx) {
                results.push(r);
            }
            // A call that passes a recipient argument (`to`, `bcc`, …) to a tool nobody
            // described is gated too, schema or not.
            let recipient_args = resolved.contract().exfiltrating.is_none()
                && call
                    .arguments
                    .as_object()
                    .is_some_and(|a| a.keys().any(|k| is_recipient_param(k)));
            if resolved.exfiltrating() || recipient_args {
                results.push(crate::contracts_impl::sink::gate(
                    &resolved, call, definition, session, rule_trust,
                ));
            }
            resolved
        };
        if let Some(r) = self.budget(resolved.contract(), tool, session, now_ms) {
            let at = usize::from(session.limits().pinning).min(results.len());
            results.insert(at, r);
        }
        results
    }

    /// A budget window (`10m`) in milliseconds (one that does not parse, which loading
    /// rejects, is the longest window).
    pub fn window_ms(&self, per: &str) -> u64 {
        self.windows
            .get(per)
            .copied()
            .or_else(|| {
                parse_window(per)
                    .ok()
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            })
            .unwrap_or(u64::MAX)
    }

    fn budget(
        &self,
        c: &ToolContract,
        tool: &str,
        session: &mut Session,
        now_ms: u64,
    ) -> Option<ContractResult> {
        let window = c.budget.as_ref().map(|b| (b.max, self.window_ms(&b.per)));
        let counted = session.record_attempt(tool, now_ms, window);
        if c.max_calls.is_none() && c.budget.is_none() {
            return None;
        }
        let Some((total, in_window)) = counted else {
            return Some(ContractResult::new(
                Contract::Budget,
                Effect::Ask,
                format!(
                    "the calls of `{tool}` cannot be counted: the session tracks too many tools"
                ),
            ));
        };
        if let Some(max) = c.max_calls {
            if max == 0 {
                return Some(ContractResult::new(
                    Contract::Budget,
                    Effect::Deny,
                    format!("`{tool}` is forbidden (`max_calls: 0`)"),
                ));
            }
            if total > max {
                return Some(ContractResult::new(
                    Contract::Budget,
                    Effect::Deny,
                    format!(
                        "call budget of {max} for `{tool}` exceeded (attempt {total} this session)"
                    ),
                ));
            }
        }
        if let Some(b) = &c.budget
            && in_window > b.max
        {
            return Some(ContractResult::new(
                Contract::Budget,
                Effect::Deny,
                format!(
                    "budget of {} calls per {} for `{tool}` exceeded",
                    b.max, b.per
                ),
            ));
        }
        let mut parts = Vec::new();
        if let Some(max) = c.max_calls {
            parts.push(format!("call {total} of {max} this session"));
        }
        if let Some(b) = &c.budget {
            parts.push(format!("{in_window} of {} per {}", b.max, b.per));
        }
        Some(ContractResult::new(
            Contract::Budget,
            Effect::Allow,
            format!("within budget: {}", parts.join(", ")),
        ))
    }

    fn constraints(
        &self,
        c: &ToolContract,
        call: &ToolCall,
        action: &Action,
        ctx: Option<&NormalizeContext>,
    ) -> Option<ContractResult> {
        if c.allowed_path_prefixes.is_none() && c.arg_patterns.is_none() && c.arg_values.is_none() {
            return None;
        }
        let mut violations: Vec<String> = Vec::new();
        let mut checked = 0usize;
        let args = call.arguments;
        if let Some(prefixes) = &c.allowed_path_prefixes {
            let mut roots = Vec::new();
            for p in prefixes {
                match resolve_prefix(p, ctx) {
                    Some(r) => roots.push(r),
                    None => {
                        violations.push(format!("allowed path prefix `{p}` cannot be resolved"))
                    }
                }
            }
            let mut paths: Vec<(String, String)> = Vec::new();
            for part in &action.parts {
                for r in &part.resources {
                    paths.push((format!("a {} resource", part.operation), r.clone()));
                }
                if part.opaque || part.operation == crate::action::Operation::Unknown {
                    violations.push(format!(
                        "a `{}` part of the call could not be understood, so its paths cannot be confined",
                        part.operation
                    ));
                } else if part.operation.is_fs() && part.resources.is_empty() {
                    violations.push(format!("no path was found for a `{}` part", part.operation));
                }
            }
            for param in c.path_params.iter().flatten() {
                let values: Vec<&Value> = match args.get(param) {
                    None | Some(Value::Null) => {
                        violations.push(format!("path argument `{param}` is missing"));
                        continue;
                    }
                    Some(Value::Array(items)) => items.iter().collect(),
                    Some(v) => vec![v],
                };
                for v in values {
                    let Some(s) = v.as_str() else {
                        violations.push(format!(
                            "path argument `{param}` is not a string (got `{}`)",
                            show_value(v)
                        ));
                        continue;
                    };
                    match resolve_path(s, ctx) {
                        Some(p) => paths.push((format!("`{param}`"), p)),
                        None => {
                            violations.push(format!("path `{s}` in `{param}` cannot be resolved"))
                        }
                    }
                }
            }
            if paths.is_empty() && violations.is_empty() {
                violations.push("the call has no path to confine".to_owned());
            }
            for (origin, p) in &paths {
                checked += 1;
                if !roots.iter().any(|r| within(p, r)) {
                    violations.push(format!(
                        "path `{p}` ({origin}) is outside the allowed prefixes [{}]",
                        prefixes
                            .iter()
                            .map(|x| format!("`{x}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        }
        if let Some(patterns) = &c.arg_patterns {
            for (arg, pat) in patterns {
                let re = match self.regexes.get(pat) {
                    Some(r) => r.clone(),
                    None => match compile_pattern(pat) {
                        Ok(r) => r,
                        Err(e) => {
                            violations.push(format!("pattern for `{arg}` is invalid: {e}"));
                            continue;
                        }
                    },
                };
                for v in arg_items(args, arg, &mut violations) {
                    let text = match v {
                        Value::String(s) => s.clone(),
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => b.to_string(),
                        other => {
                            violations.push(format!(
                                "argument `{arg}` has the wrong type for a pattern (got `{}`)",
                                show_value(other)
                            ));
                            continue;
                        }
                    };
                    checked += 1;
                    if !re.is_match(&text) {
                        violations.push(format!(
                            "argument `{arg}` = `{}` does not match `{pat}`",
                            show_value(v)
                        ));
                    }
                }
            }
        }
        if let Some(values) = &c.arg_values {
            for (arg, allowed) in values {
                for v in arg_items(args, arg, &mut violations) {
                    checked += 1;
                    if !allowed.contains(v) {
                        violations.push(format!(
                            "argument `{arg}` = `{}` is not one of the allowed values",
                            show_value(v)
                        ));
                    }
                }
            }
        }
        Some(match violations.split_first() {
            Some((first, rest)) => {
                let more = if rest.is_empty() {
                    String::new()
                } else {
                    format!(" (and {} more)", rest.len())
                };
                ContractResult::new(Contract::Constraint, Effect::Deny, format!("{first}{more}"))
            }
            None => ContractResult::new(
                Contract::Constraint,
                Effect::Allow,
                format!("all {checked} constrained values are allowed"),
            ),
        })
    }
}

/// The values of a constrained argument: the value, or each element of an array. Missing
/// arguments and objects are violations.
fn arg_items<'v>(args: &'v Value, arg: &str, violations: &mut Vec<String>) -> Vec<&'v Value> {
    match args.get(arg) {
        None => {
            violations.push(format!("constrained argument `{arg}` is missing"));
            Vec::new()
        }
        Some(Value::Array(items)) => {
            if items.is_empty() {
                violations.push(format!("constrained argument `{arg}` is an empty list"));
            }
            items.iter().collect()
        }
        Some(Value::Object(_)) => {
            violations.push(format!("constrained argument `{arg}` is an object"));
            Vec::new()
        }
        Some(v) => vec![v],
    }
}

fn resolve_prefix(prefix: &str, ctx: Option<&NormalizeContext>) -> Option<String> {
    let p = prefix.trim();
    let raw = if let Some(rest) = p.strip_prefix("${workspace}") {
        format!("{}{rest}", ctx?.workspace)
    } else if let Some(rest) = p.strip_prefix("${home}") {
        format!("{}{rest}", ctx?.home)
    } else if p == "~" || p.starts_with("~/") {
        expand_home(p, ctx?.home)?
    } else {
        p.to_owned()
    };
    let lexical = lexical_normalize(&raw)?;
    match ctx {
        Some(ctx) => ctx.fs.canonicalize(&lexical),
        None => Some(lexical),
    }
}

fn resolve_path(value: &str, ctx: Option<&NormalizeContext>) -> Option<String> {
    if value.contains('\0') {
        return None;
    }
    let raw = match ctx {
        Some(ctx) => {
            if let Some(h) = expand_home(value, ctx.home) {
                h
            } else if value.starts_with('/') {
                value.to_owned()
            } else {
                format!("{}/{value}", ctx.workspace)
            }
        }
        None => value.to_owned(),
    };
    let lexical = lexical_normalize(&raw)?;
    match ctx {
        Some(ctx) => ctx.fs.canonicalize(&lexical),
        None => Some(lexical),
    }
}

fn pinning(
    session: &Session,
    tool: &str,
    c: &ToolContract,
    definition: Option<&Value>,
) -> ContractResult {
    match session.pin_state(tool) {
        PinState::Unlisted => ContractResult::new(
            Contract::Pinning,
            Effect::Ask,
            format!("`{tool}` was never listed by the server, so its definition is not pinned"),
        ),
        PinState::Removed { .. } => ContractResult::new(
            Contract::Pinning,
            Effect::Ask,
            format!("`{tool}` is no longer listed by the server"),
        ),
        PinState::Changed {
            changes,
            since_last_session,
            ..
        } => {
            let when = if since_last_session {
                "since an earlier session"
            } else {
                "since it was pinned"
            };
            ContractResult::new(
                Contract::Pinning,
                Effect::Ask,
                format!(
                    "the definition of `{tool}` changed {when}: {}",
                    if changes.is_empty() {
                        "its fingerprint".to_owned()
                    } else {
                        changes.join(", ")
                    }
                ),
            )
        }
        PinState::Pinned { fingerprint } => {
            if let Some(expected) = &c.annotations
                && !annotations_match(definition, expected)
            {
                return ContractResult::new(
                    Contract::Pinning,
                    Effect::Ask,
                    format!(
                        "the pinned definition of `{tool}` does not declare the expected annotations {}",
                        expected
                            .iter()
                            .map(|(k, v)| format!("`{k}: {v}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
            let short: String = fingerprint.chars().take(12).collect();
            ContractResult::new(
                Contract::Pinning,
                Effect::Allow,
                format!("`{tool}` matches its pinned definition (sha256 {short})"),
            )
        }
    }
}
