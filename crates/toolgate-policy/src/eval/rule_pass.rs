//! The rules' pass: each part of an action against the policy's rules (and the self-protection
//! rules), with the reason a recursive part met a rule.

use super::{Engine, RulesOutcome, describe_part};
use crate::action::{Action, Operation, Part};
use crate::decision::Effect;
use crate::rules::{
    BeneathTree, CallFacts, CompiledRule, beneath_trees, beneath_trees_listed, dir_components,
    expand_vars,
};

impl Engine {
    /// The rules' verdict on an action (no contracts). An action without parts is an
    /// internal error and is denied. Recursive parts are judged by pattern alone.
    pub fn decide_rules(&self, action: &Action, facts: &CallFacts<'_>) -> RulesOutcome {
        self.decide_rules_in(action, facts, None)
    }

    /// Like [`Engine::decide_rules`]; with `fs`, what exists beneath the directories of a
    /// recursive part is listed, so that a deny rule meets it only through a file that is
    /// there (by pattern alone when the listing is incomplete).
    pub fn decide_rules_in(
        &self,
        action: &Action,
        facts: &CallFacts<'_>,
        fs: Option<&dyn crate::fsfacts::FsFacts>,
    ) -> RulesOutcome {
        if action.parts.is_empty() {
            return RulesOutcome {
                effect: Effect::Deny,
                rule: None,
                reason: format!(
                    "internal error: the call to `{}` normalised to nothing; denied",
                    action.tool
                ),
                matched_rules: Vec::new(),
            };
        }
        // The policy's own deny names the reason when there is one (both deny); otherwise
        // the self-protection, which no allow rule opens, looks at the plain parts first
        // and at the parts that hide what they touch last.
        let outcome = self.decide_policy_rules(action, facts, fs);
        if outcome.effect == Effect::Deny {
            return outcome;
        }
        self.protected(action, facts, false, fs)
            .or_else(|| self.protected(action, facts, true, fs))
            .unwrap_or(outcome)
    }

    /// [`Engine::decide_rules`] without the self-protection (an action with parts).
    fn decide_policy_rules(
        &self,
        action: &Action,
        facts: &CallFacts<'_>,
        fs: Option<&dyn crate::fsfacts::FsFacts>,
    ) -> RulesOutcome {
        let mut matched = vec![false; self.rules.len()];
        let mut best: Option<(Effect, Option<usize>, &Part, Vec<BeneathTree>)> = None;
        for part in &action.parts {
            let trees = match (part.beneath.is_some(), fs) {
                (false, _) => Vec::new(),
                (true, Some(fs)) => beneath_trees_listed(part, fs),
                (true, None) => beneath_trees(part),
            };
            let (effect, rule) = self.decide_part(
                facts,
                part,
                &mut matched,
                part.beneath.is_some().then_some(trees.as_slice()),
            );
            if best.as_ref().is_none_or(|(e, _, _, _)| effect > *e) {
                best = Some((effect, rule, part, trees));
            }
        }
        let matched_rules = self
            .rules
            .iter()
            .zip(&matched)
            .filter(|(_, m)| **m)
            .map(|(r, _)| r.id.clone())
            .collect();
        let Some((effect, rule, part, trees)) = best else {
            return RulesOutcome {
                effect: Effect::Deny,
                rule: None,
                reason: "internal error: no part evaluated; denied".to_owned(),
                matched_rules,
            };
        };
        let what = describe_part(part);
        match rule.and_then(|i| self.rules.get(i)) {
            Some(r) if r.effect == Effect::Deny && part.beneath.is_some() && !part.hidden => {
                RulesOutcome {
                    effect,
                    rule: Some(r.id.clone()),
                    reason: self
                        .beneath_reason(r, part, &trees)
                        .unwrap_or_else(|| format!("{what} matches {} rule `{}`", r.effect, r.id)),
                    matched_rules,
                }
            }
            Some(r) => RulesOutcome {
                effect,
                rule: Some(r.id.clone()),
                reason: format!("{what} matches {} rule `{}`", r.effect, r.id),
                matched_rules,
            },
            None if part.hidden && self.policy.default != effect => RulesOutcome {
                effect,
                rule: None,
                reason: format!(
                    "no rule matches {what}: {effect}, not `default: {}`, for a part that hides what it touches",
                    self.policy.default
                ),
                matched_rules,
            },
            None => RulesOutcome {
                effect,
                rule: None,
                reason: format!("no rule matches {what}: default is {effect}"),
                matched_rules,
            },
        }
    }

    /// Why a deny rule matched a recursive part through what lies beneath one of its
    /// directories: "a recursive `fs.read` of `/w` can reach files matching `**/*.key`,
    /// which deny rule `protect-keys` protects". `None` when a pattern matches a directory
    /// itself (the ordinary reason says it) or none can be named.
    fn beneath_reason(
        &self,
        rule: &CompiledRule,
        part: &Part,
        trees: &[BeneathTree],
    ) -> Option<String> {
        let filters = &part.beneath.as_ref()?.filters;
        let raw = self.policy.rules.get(rule.index)?.resources.as_ref()?;
        // A listing names the very file.
        for (tree, dir) in trees.iter().zip(&part.resources) {
            if let Some(path) = rule.met_path(tree) {
                return Some(format!(
                    "a recursive `{}` of `{dir}` reaches `{path}`, which deny rule `{}` protects",
                    part.operation, rule.id
                ));
            }
        }
        let mut found: Option<(&str, &str)> = None;
        for dir in &part.resources {
            let tree = crate::beneath::PathSet::beneath(dir, filters);
            for pattern in raw {
                let Ok(expanded) = expand_vars(pattern, &self.vars) else {
                    continue;
                };
                let mut globs = vec![expanded.clone()];
                if let Some(d) = expanded.strip_suffix("/**").filter(|d| !d.is_empty()) {
                    globs.push(d.to_owned());
                }
                let direct = globs.iter().any(|g| {
                    globset::GlobBuilder::new(g)
                        .literal_separator(true)
                        .backslash_escape(true)
                        .build()
                        .is_ok_and(|g| g.compile_matcher().is_match(dir))
                });
                if direct {
                    return None;
                }
                let meets = match (crate::beneath::PathSet::from_glob(&expanded), &tree) {
                    (Some(g), Some(t)) => g.meets(t),
                    _ => true,
                };
                if meets && found.is_none() {
                    found = Some((dir, pattern));
                }
            }
        }
        let (dir, pattern) = found?;
        let narrowed = if filters.is_empty() {
            String::new()
        } else {
            format!(
                " (file names {})",
                filters
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        // A read or delete is judged by pattern alone only when the listing ran out.
        let unlisted = if matches!(part.operation, Operation::FsRead | Operation::FsDelete)
            && trees.iter().any(|t| t.existing.is_none())
        {
            format!(
                " (what lies beneath could not be listed: over {} paths, or a directory toolgate cannot read). help: search a narrower directory",
                crate::rules::LISTING_LIMIT
            )
        } else {
            String::new()
        };
        Some(format!(
            "a recursive `{}` of `{dir}`{narrowed} can reach files matching `{pattern}`, which deny rule `{}` protects{unlisted}",
            part.operation, rule.id
        ))
    }

    /// One part: every matching deny wins, else the first match, else the default.
    pub(super) fn decide_part(
        &self,
        facts: &CallFacts<'_>,
        part: &Part,
        matched: &mut [bool],
        trees: Option<&[BeneathTree]>,
    ) -> (Effect, Option<usize>) {
        let mut first: Option<usize> = None;
        let mut first_deny: Option<usize> = None;
        // How many of the part's resources each rule's globs match (each resource counted
        // once per rule), from one pass of the combined index per resource.
        let mut hits = vec![0usize; self.rules.len()];
        let indexed = !self.owners.is_empty() || !self.components.is_empty();
        if indexed && !part.resources.is_empty() {
            let mut seen = vec![usize::MAX; self.rules.len()];
            let mut buf = Vec::new();
            let mut hit = |owner: usize, n: usize| {
                if let Some(mark) = seen.get_mut(owner)
                    && *mark != n
                {
                    *mark = n;
                    if let Some(h) = hits.get_mut(owner) {
                        *h += 1;
                    }
                }
            };
            for (n, resource) in part.resources.iter().enumerate() {
                if !self.owners.is_empty() {
                    self.resource_index
                        .matches_into(resource.as_str(), &mut buf);
                    for g in &buf {
                        if let Some(&owner) = self.owners.get(*g) {
                            hit(owner, n);
                        }
                    }
                }
                if !self.components.is_empty() {
                    for name in dir_components(resource) {
                        for &owner in self.components.get(name).into_iter().flatten() {
                            hit(owner, n);
                        }
                    }
                }
            }
        }
        let total = part.resources.len();
        // What lies beneath a recursive part's directories, built once for all rules.
        let built;
        let trees = match (trees, &part.beneath) {
            (Some(t), _) => Some(t),
            (None, Some(_)) => {
                built = beneath_trees(part);
                Some(built.as_slice())
            }
            (None, None) => None,
        };
        let every: Vec<usize>;
        let candidates: &[usize] = match Operation::ALL
            .iter()
            .position(|o| *o == part.operation)
            .and_then(|k| self.by_operation.get(k))
        {
            Some(list) => list,
            // Not reached (`ALL` lists every operation); fail safe by trying every rule.
            None => {
                every = (0..self.rules.len()).collect();
                &every
            }
        };
        for &i in candidates {
            let Some(rule) = self.rules.get(i) else {
                continue;
            };
            let h = hits.get(i).copied().unwrap_or(0);
            let resources_ok = if rule.effect == Effect::Deny {
                h > 0
            } else {
                total > 0 && h == total
            };
            if rule.matches_in(facts, part, Some(resources_ok), trees) {
                if let Some(m) = matched.get_mut(i) {
                    *m = true;
                }
                if first.is_none() {
                    first = Some(i);
                }
                if rule.effect == Effect::Deny && first_deny.is_none() {
                    first_deny = Some(i);
                }
            }
        }
        if let Some(i) = first_deny {
            return (Effect::Deny, Some(i));
        }
        match first.and_then(|i| self.rules.get(i).map(|r| (r.effect, i))) {
            Some((effect, i)) => (effect, Some(i)),
            // A part that hides what it touches never takes `default: allow`: it asks.
            None if part.hidden => (self.policy.default.max(Effect::Ask), None),
            None => (self.policy.default, None),
        }
    }
}
