//! Compiling a rule (a policy's, or a built-in protection rule) into a [`CompiledRule`].

use super::{
    CompiledRule, GLOB_SYNTAX, HTTP_METHODS, NamePattern, NameSet, PathIssue, Vars, build_set,
    constraint_applies, expand_vars, glob, names_tools_exactly, op_bit, what_it_has,
};
use crate::action::Operation;
use crate::decision::Effect;
use crate::diag_impl::Severity;
use crate::model::{KNOWN_ANNOTATIONS, Rule};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Compiles one rule for standalone matching (with its own resource glob set). Returns the
/// rule when it has no error-severity issue. Only tests match a rule on its own: the engine
/// builds one index over all rules.
#[cfg(test)]
pub fn compile_rule(
    rule: &Rule,
    index: usize,
    vars: &Vars,
) -> (Option<CompiledRule>, Vec<PathIssue>) {
    compile_rule_with(rule, index, vars, true)
}

/// Like `compile_rule`; without `resource_set` the resource globs are only validated and
/// the caller matches them (the engine builds one index over all rules).
pub fn compile_rule_with(
    rule: &Rule,
    index: usize,
    vars: &Vars,
    resource_set: bool,
) -> (Option<CompiledRule>, Vec<PathIssue>) {
    let base = vec!["rules".to_owned(), index.to_string()];
    let at = |k: &[&str]| {
        let mut p = base.clone();
        p.extend(k.iter().map(|s| (*s).to_owned()));
        p
    };
    let mut issues = Vec::new();

    if rule.id.trim().is_empty() {
        issues.push(
            PathIssue::new(Severity::Error, at(&["id"]), "rule id is empty".to_owned())
                .help("give every rule a short unique id, e.g. `protect-ssh-keys`"),
        );
    }
    if rule.operations.is_empty() {
        issues.push(
            PathIssue::new(
                Severity::Error,
                at(&["operations"]),
                format!(
                    "rule `{}` has an empty `operations` list and can never match",
                    rule.id
                ),
            )
            .help(format!(
                "list the operations it applies to: {}",
                Operation::ALL.map(|o| format!("`{o}`")).join(", ")
            )),
        );
    }
    let mut operations = 0u16;
    for op in &rule.operations {
        operations |= op_bit(*op);
    }

    // Constraints that cannot apply to some of the rule's operations.
    for key in ["resources", "executables", "commands", "hosts", "methods"] {
        let present = match key {
            "resources" => rule.resources.is_some(),
            "executables" => rule.executables.is_some(),
            "commands" => rule.commands.is_some(),
            "hosts" => rule.hosts.is_some(),
            _ => rule.methods.is_some(),
        };
        if !present {
            continue;
        }
        for (i, op) in rule.operations.iter().enumerate() {
            if !constraint_applies(key, *op) {
                issues.push(
                    PathIssue::new(
                        Severity::Error,
                        at(&[key]),
                        format!(
                            "`{key}` cannot apply to `{op}` in rule `{}`: a `{op}` action has {}",
                            rule.id,
                            what_it_has(*op)
                        ),
                    )
                    .key()
                    .help(format!(
                        "remove `{op}` from `operations` (operations.{i}) or move `{key}` to a separate rule"
                    )),
                );
            }
        }
    }

    // Empty lists would silently disable the rule.
    let empties: [(&str, bool); 8] = [
        (
            "resources",
            rule.resources.as_ref().is_some_and(Vec::is_empty),
        ),
        ("servers", rule.servers.as_ref().is_some_and(Vec::is_empty)),
        ("tools", rule.tools.as_ref().is_some_and(Vec::is_empty)),
        (
            "executables",
            rule.executables.as_ref().is_some_and(Vec::is_empty),
        ),
        (
            "commands",
            rule.commands.as_ref().is_some_and(Vec::is_empty),
        ),
        ("hosts", rule.hosts.as_ref().is_some_and(Vec::is_empty)),
        ("methods", rule.methods.as_ref().is_some_and(Vec::is_empty)),
        (
            "annotations",
            rule.annotations.as_ref().is_some_and(BTreeMap::is_empty),
        ),
    ];
    for (key, empty) in empties {
        if empty {
            issues.push(
                PathIssue::new(
                    Severity::Error,
                    at(&[key]),
                    format!(
                        "empty `{key}` in rule `{}`: the rule could never match",
                        rule.id
                    ),
                )
                .key()
                .help(format!(
                    "remove `{key}` to match any value, or list at least one"
                )),
            );
        }
    }

    let resources = rule.resources.as_ref().map(|list| {
        let mut globs = Vec::new();
        for (i, raw) in list.iter().enumerate() {
            let path = at(&["resources", &i.to_string()]);
            let expanded = match expand_vars(raw, vars) {
                Ok(e) => e,
                Err(msg) => {
                    issues.push(
                        PathIssue::new(Severity::Error, path, msg)
                            .help("supported variables: `${workspace}`, `${home}` (and a leading `~/`)"),
                    );
                    continue;
                }
            };
            if !expanded.starts_with('/') && !expanded.starts_with("**") {
                issues.push(
                    PathIssue::new(
                        Severity::Error,
                        path,
                        format!("resource pattern `{raw}` is relative and can never match"),
                    )
                    .help(format!(
                        "resources are canonical absolute paths: write `${{workspace}}/{raw}` or `**/{raw}`"
                    )),
                );
                continue;
            }
            let mut pats = vec![expanded.clone()];
            if let Some(dir) = expanded.strip_suffix("/**")
                && !dir.is_empty()
            {
                pats.push(dir.to_owned());
            }
            for p in pats {
                match glob(&p) {
                    Ok(g) => globs.push(g),
                    Err(e) => issues.push(
                        PathIssue::new(
                            Severity::Error,
                            path.clone(),
                            format!("invalid glob `{raw}`: {e}"),
                        )
                        .help("globs support `*` (within one path component), `**`, `?`, `[...]` and `{a,b}`"),
                    ),
                }
            }
        }
        globs
    });

    let mut name_globs = |key: &str,
                          list: &Option<Vec<String>>,
                          lower: bool|
     -> Option<Vec<NamePattern>> {
        list.as_ref().map(|list| {
            let mut globs = Vec::new();
            for (i, raw) in list.iter().enumerate() {
                let path = at(&[key, &i.to_string()]);
                let mut p = raw.trim().to_owned();
                if lower {
                    p = p.trim_end_matches('.').to_lowercase();
                    if p.contains('/') || p.contains(':') || p.contains('@') {
                        issues.push(
                            PathIssue::new(
                                Severity::Error,
                                path.clone(),
                                format!("`{raw}` is not a host name"),
                            )
                            .help("`hosts` holds host names or globs such as `*.example.com`, without scheme, port, path or user"),
                        );
                        continue;
                    }
                }
                if p.is_empty() {
                    issues.push(
                        PathIssue::new(Severity::Error, path, format!("empty pattern in `{key}`"))
                            .help("remove it, or use `*` to match any name"),
                    );
                    continue;
                }
                // A plain name cannot fail to parse and matches only itself: no glob needed.
                if !p.contains(GLOB_SYNTAX) {
                    globs.push(NamePattern::Literal(p));
                    continue;
                }
                match glob(&p) {
                    Ok(g) => globs.push(NamePattern::Glob(g)),
                    Err(e) => issues.push(
                        PathIssue::new(Severity::Error, path, format!("invalid glob `{raw}`: {e}"))
                            .help("globs support `*`, `?`, `[...]` and `{a,b}`"),
                    ),
                }
            }
            globs
        })
    };
    let servers = name_globs("servers", &rule.servers, false);
    let tools = name_globs("tools", &rule.tools, false);
    let hosts = name_globs("hosts", &rule.hosts, true);

    let executables = rule.executables.as_ref().map(|list| {
        let mut out = Vec::new();
        for (i, raw) in list.iter().enumerate() {
            let base_name = raw.rsplit('/').next().unwrap_or(raw).to_owned();
            if base_name.is_empty() {
                issues.push(
                    PathIssue::new(
                        Severity::Error,
                        at(&["executables", &i.to_string()]),
                        format!("`{raw}` names no executable"),
                    )
                    .help("write the executable's basename, e.g. `rm`"),
                );
                continue;
            }
            if base_name != *raw {
                issues.push(
                    PathIssue::new(
                        Severity::Warning,
                        at(&["executables", &i.to_string()]),
                        format!("executables match by basename: `{raw}` is read as `{base_name}`"),
                    )
                    .help(format!("write `{base_name}`; it also matches `/usr/bin/{base_name}` and any other path")),
                );
            }
            out.push(base_name);
        }
        out
    });

    if let Some(cmds) = &rule.commands {
        for (i, argv) in cmds.iter().enumerate() {
            if argv.is_empty() {
                issues.push(
                    PathIssue::new(
                        Severity::Error,
                        at(&["commands", &i.to_string()]),
                        format!("empty command in rule `{}` can never match", rule.id),
                    )
                    .help("write the exact argv, e.g. `[npm, test]`"),
                );
            }
        }
    }

    let methods = rule.methods.as_ref().map(|list| {
        let mut out = Vec::new();
        for (i, raw) in list.iter().enumerate() {
            let m = raw.trim().to_uppercase();
            if m.is_empty() || !m.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-') {
                issues.push(
                    PathIssue::new(
                        Severity::Error,
                        at(&["methods", &i.to_string()]),
                        format!("`{raw}` is not an HTTP method"),
                    )
                    .help("use methods such as `GET`, `HEAD`, `POST`"),
                );
                continue;
            }
            if !HTTP_METHODS.contains(&m.as_str()) {
                let mut issue = PathIssue::new(
                    Severity::Warning,
                    at(&["methods", &i.to_string()]),
                    format!("`{raw}` is not a standard HTTP method"),
                );
                if let Some(s) = crate::diag_impl::did_you_mean(&m, HTTP_METHODS) {
                    issue = issue.help(format!("did you mean `{s}`?"));
                }
                issues.push(issue);
            }
            out.push(m);
        }
        out
    });

    if let Some(ann) = &rule.annotations {
        for key in ann.keys() {
            if !KNOWN_ANNOTATIONS.contains(&key.as_str()) {
                let mut issue = PathIssue::new(
                    Severity::Error,
                    at(&["annotations", key]),
                    format!("unknown tool annotation `{key}`"),
                )
                .key();
                issue = match crate::diag_impl::did_you_mean(key, KNOWN_ANNOTATIONS) {
                    Some(s) => issue.help(format!("did you mean `{s}`?")),
                    None => issue.help(format!(
                        "MCP defines {}",
                        KNOWN_ANNOTATIONS.map(|k| format!("`{k}`")).join(", ")
                    )),
                };
                issues.push(issue);
            }
        }
    }

    if rule.effect == Effect::Allow
        && rule.operations.iter().all(|o| *o == Operation::Unknown)
        && !rule.operations.is_empty()
        && (rule.annotations.is_none() || rule.resources.is_some())
        && !names_tools_exactly(rule.tools.as_deref())
    {
        issues.push(
            PathIssue::new(
                Severity::Warning,
                at(&["operations"]),
                format!("allow rule `{}` only covers `unknown`, whose parts are opaque: it never matches", rule.id),
            )
            .help("allow rules never match what toolgate could not understand; name the tools exactly in `tools:` (no glob), map the tool in the `tools:` section (e.g. `operation: fs.read` with `path_params`), or constrain `annotations` (e.g. `readOnlyHint: true`) without `resources`"),
        );
    }

    if issues.iter().any(|i| i.severity == Severity::Error) {
        return (None, issues);
    }
    let compiled = CompiledRule {
        id: rule.id.clone(),
        effect: rule.effect,
        index,
        operations,
        resources: if resource_set {
            resources.clone().and_then(build_set)
        } else {
            None
        },
        resource_globs: resources,
        resource_paths: OnceLock::new(),
        servers: servers.map(NameSet::build),
        tools: tools.map(NameSet::build),
        executables,
        commands: rule.commands.clone(),
        hosts: hosts.map(NameSet::build),
        methods,
        annotations: rule.annotations.clone(),
        builtin: rule.builtin,
    };
    (Some(compiled), issues)
}

/// A built-in deny rule of toolgate's self-protection ([`crate::protect`]): `operations` on
/// any of `globs` (absolute and escaped, or `**/NAME…` for a name anywhere), with its own resource set, matched like a policy's
/// deny rule (a part that hides what it touches meets it).
pub fn protected_rule(
    id: &str,
    operations: &[Operation],
    globs: &[String],
) -> Result<CompiledRule, String> {
    let mut compiled = Vec::with_capacity(globs.len());
    for g in globs {
        if !g.starts_with('/') && !g.starts_with("**/") {
            return Err(format!("`{g}` is not an absolute path or a `**/` pattern"));
        }
        compiled.push(glob(g).map_err(|e| format!("invalid glob `{g}`: {e}"))?);
    }
    let set = build_set(compiled.clone()).ok_or("the globs do not compile")?;
    Ok(CompiledRule {
        id: id.to_owned(),
        effect: Effect::Deny,
        index: usize::MAX,
        operations: operations.iter().fold(0, |bits, op| bits | op_bit(*op)),
        resource_globs: Some(compiled),
        resources: Some(set),
        resource_paths: OnceLock::new(),
        servers: None,
        tools: None,
        executables: None,
        commands: None,
        hosts: None,
        methods: None,
        annotations: None,
        builtin: None,
    })
}
