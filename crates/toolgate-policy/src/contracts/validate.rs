//! Semantic checks of one tool contract that serde cannot express.

use super::{
    Issue, MAX_BUDGET_WINDOW, OutputSpec, ToolContract, compile_destination, compile_pattern,
    fields, has_glob_meta, parse_window,
};
use crate::action::Operation;

impl ToolContract {
    /// Semantic checks that serde cannot express. `key_path` locates the entry, e.g.
    /// `["tools", "send_email"]`.
    pub fn validate(&self, key_path: &[String]) -> Vec<Issue> {
        let mut issues = Vec::new();
        let at = |keys: &[&str]| -> Vec<String> {
            let mut p = key_path.to_vec();
            p.extend(keys.iter().map(|k| (*k).to_owned()));
            p
        };
        let empty_help = Some("remove the key to keep the default, or list at least one value");
        for (key, list) in [
            ("sink_params", &self.sink_params),
            ("trusted_destinations", &self.trusted_destinations),
            ("path_params", &self.path_params),
            ("allowed_path_prefixes", &self.allowed_path_prefixes),
            ("url_params", &self.url_params),
        ] {
            if let Some(l) = list {
                if l.is_empty() {
                    issues.push(Issue::error(
                        at(&[key]),
                        format!("`{key}` is an empty list"),
                        empty_help,
                    ));
                }
                for v in l {
                    if v.trim().is_empty() {
                        issues.push(Issue::error(
                            at(&[key]),
                            format!("`{key}` contains an empty value"),
                            None,
                        ));
                    }
                }
            }
        }
        if let Some(dests) = &self.trusted_destinations {
            for d in dests {
                let t = d.trim();
                if t.chars().all(|c| matches!(c, '*' | '?' | '/' | '.' | '@')) && !t.is_empty() {
                    issues.push(Issue::error(
                        at(&["trusted_destinations"]),
                        format!("`{d}` trusts every destination"),
                        Some("to switch the sink gate off say `exfiltrating: false`"),
                    ));
                    continue;
                }
                if let Err(e) = compile_destination(t) {
                    issues.push(Issue::error(
                        at(&["trusted_destinations"]),
                        format!("invalid destination glob `{d}`: {e}"),
                        None,
                    ));
                    continue;
                }
                let rest = t.trim_start_matches('*');
                if t.starts_with('*') && !rest.starts_with(['@', '.']) && !rest.is_empty() {
                    issues.push(Issue::warning(
                        at(&["trusted_destinations"]),
                        format!("`{d}` also matches look-alikes such as `evil{rest}`"),
                        Some("anchor the glob at a separator: `*@corp.com` or `*.corp.com`"),
                    ));
                }
            }
        }
        if let Some(r) = &self.recursive {
            if r.params.is_empty() {
                issues.push(Issue::error(
                    at(&["recursive", "params"]),
                    "`recursive.params` is an empty list",
                    Some("name the arguments that hold the directory, e.g. `params: [path]`"),
                ));
            }
            for (key, list) in [
                ("params", Some(&r.params)),
                ("name_globs", r.name_globs.as_ref()),
                ("relative_globs", r.relative_globs.as_ref()),
                ("types", r.types.as_ref()),
            ] {
                let Some(l) = list else { continue };
                if l.is_empty() && key != "params" {
                    issues.push(Issue::error(
                        at(&["recursive", key]),
                        format!("`recursive.{key}` is an empty list"),
                        empty_help,
                    ));
                }
                if l.iter().any(|v| v.trim().is_empty()) {
                    issues.push(Issue::error(
                        at(&["recursive", key]),
                        format!("`recursive.{key}` contains an empty value"),
                        None,
                    ));
                }
            }
            if let Some(op) = self.operation
                && !op.is_fs()
            {
                issues.push(Issue::error(
                    at(&["recursive"]),
                    format!("`recursive` applies to file operations, not `{op}`"),
                    Some(
                        "say `operation: fs.read` (a search or listing), `fs.write` or `fs.delete`",
                    ),
                ));
            }
        }
        if let Some(prefixes) = &self.allowed_path_prefixes {
            for p in prefixes {
                let t = p.trim();
                let stripped = t
                    .strip_prefix("${workspace}")
                    .or_else(|| t.strip_prefix("${home}"))
                    .or_else(|| t.strip_prefix('~'))
                    .unwrap_or(t);
                if stripped.contains("${") {
                    issues.push(Issue::error(
                        at(&["allowed_path_prefixes"]),
                        format!("unsupported variable in `{p}`"),
                        Some("only `${workspace}` and `${home}` (or `~`) may start a prefix"),
                    ));
                } else if stripped.len() == t.len() && !t.starts_with('/') {
                    issues.push(Issue::error(
                        at(&["allowed_path_prefixes"]),
                        format!("`{p}` is not an absolute path"),
                        Some("start it with `/`, `${workspace}`, `${home}` or `~`"),
                    ));
                } else if has_glob_meta(stripped) {
                    issues.push(Issue::warning(
                        at(&["allowed_path_prefixes"]),
                        format!("`{p}` contains glob characters, which match literally here"),
                        Some("prefixes are directories, not globs"),
                    ));
                }
            }
            if self.path_params.is_none() && self.operation.is_none() {
                issues.push(Issue::warning(
                    at(&["allowed_path_prefixes"]),
                    "`allowed_path_prefixes` without `path_params` relies on the built-in adapter finding the paths",
                    Some("calls whose paths cannot be found are denied; add `path_params: [...]`"),
                ));
            }
        }
        if let Some(patterns) = &self.arg_patterns {
            if patterns.is_empty() {
                issues.push(Issue::error(
                    at(&["arg_patterns"]),
                    "`arg_patterns` is empty",
                    empty_help,
                ));
            }
            for (arg, pat) in patterns {
                if let Err(e) = compile_pattern(pat) {
                    issues.push(Issue::error(
                        at(&["arg_patterns", arg]),
                        format!("invalid regex for `{arg}`: {e}"),
                        Some("patterns use the Rust `regex` syntax and must match the whole value"),
                    ));
                }
            }
        }
        if let Some(values) = &self.arg_values {
            if values.is_empty() {
                issues.push(Issue::error(
                    at(&["arg_values"]),
                    "`arg_values` is empty",
                    empty_help,
                ));
            }
            for (arg, list) in values {
                if list.is_empty() {
                    issues.push(Issue::error(
                        at(&["arg_values", arg]),
                        format!("no allowed value for `{arg}`: every call would be denied"),
                        Some("list the allowed values, or use `max_calls: 0` to forbid the tool"),
                    ));
                }
                if list.iter().any(|v| v.is_array() || v.is_object()) {
                    issues.push(Issue::error(
                        at(&["arg_values", arg]),
                        format!(
                            "allowed values of `{arg}` must be strings, numbers, booleans or null"
                        ),
                        None,
                    ));
                }
            }
        }
        if let Some(b) = &self.budget {
            if let Err(e) = parse_window(&b.per) {
                issues.push(Issue::error(
                    at(&["budget", "per"]),
                    format!("invalid duration `{}`: {e}", b.per),
                    Some("use a duration such as `30s`, `10m` or `1h`"),
                ));
            }
            if b.max > MAX_BUDGET_WINDOW {
                issues.push(Issue::error(
                    at(&["budget", "max"]),
                    format!("`max` is {}, the limit is {MAX_BUDGET_WINDOW}", b.max),
                    Some("use `max_calls` for a per-session limit"),
                ));
            }
        }
        if let Some(OutputSpec::Fields(f)) = &self.output {
            if f.trusted_fields.is_empty() {
                issues.push(Issue::error(
                    at(&["output", "trusted_fields"]),
                    "`trusted_fields` is empty",
                    Some("say `output: untrusted` instead"),
                ));
            }
            let named = f
                .trusted_fields
                .iter()
                .enumerate()
                .map(|(i, field)| ("trusted_fields", i, field))
                .chain(
                    f.ask_fields()
                        .iter()
                        .enumerate()
                        .map(|(i, field)| ("ask_fields", i, field)),
                );
            for (key, i, field) in named {
                if let Err(why) = fields::parse_path(field) {
                    issues.push(Issue::error(
                        at(&["output", key, &i.to_string()]),
                        format!("`{field}` is not a field path: {why}"),
                        Some(
                            "write a dotted path such as `organizer.email` or `participants[*].email`, or a JSON pointer such as `/people/0/email` (for names with a dot or a bracket)",
                        ),
                    ));
                }
            }
        }
        if self.exfiltrating == Some(false) && key_path.last().is_some_and(|k| has_glob_meta(k)) {
            issues.push(Issue::warning(
                at(&["exfiltrating"]),
                "`exfiltrating: false` on a glob switches the sink gate off for every matching tool, pack tools included",
                Some("name the tools one by one"),
            ));
        }
        if self.exfiltrating == Some(false) {
            for (key, set) in [
                ("sink_params", self.sink_params.is_some()),
                ("trusted_destinations", self.trusted_destinations.is_some()),
                ("on_tainted", self.on_tainted.is_some()),
            ] {
                if set {
                    issues.push(Issue::warning(
                        at(&[key]),
                        format!("`{key}` has no effect with `exfiltrating: false`"),
                        None,
                    ));
                }
            }
        }
        let op = self.operation;
        let op_mismatch = |key: &str, want: &[Operation], issues: &mut Vec<Issue>| {
            if let Some(o) = op
                && !want.contains(&o)
            {
                issues.push(Issue::warning(
                    at(&[key]),
                    format!("`{key}` is not used by `operation: {o}`"),
                    None,
                ));
            }
        };
        if self.command_param.is_some() || self.args_param.is_some() {
            op_mismatch(
                "command_param",
                &[
                    Operation::ShellExec,
                    Operation::GitRead,
                    Operation::GitWrite,
                    Operation::GitRemote,
                ],
                &mut issues,
            );
        }
        if self.url_params.is_some() || self.method_param.is_some() {
            op_mismatch("url_params", &[Operation::NetRequest], &mut issues);
        }
        if let Some(po) = &self.param_operations
            && po.is_empty()
        {
            issues.push(Issue::error(
                at(&["param_operations"]),
                "`param_operations` is empty",
                empty_help,
            ));
        }
        if let Some(ann) = &self.annotations {
            for k in ann.keys() {
                if ![
                    "readOnlyHint",
                    "destructiveHint",
                    "idempotentHint",
                    "openWorldHint",
                ]
                .contains(&k.as_str())
                {
                    issues.push(Issue::error(
                        at(&["annotations", k]),
                        format!("unknown annotation `{k}`"),
                        Some("MCP defines readOnlyHint, destructiveHint, idempotentHint and openWorldHint"),
                    ));
                }
            }
        }
        issues
    }
}
