//! The tools and resources of `toolgate serve`.

use std::path::Path;

use serde_json::{Map, Value, json};
use toolgate_policy::cases::session_for;
use toolgate_policy::contracts::packs::{PACKS, load_pack};
use toolgate_policy::diag::Diagnostics;
use toolgate_policy::{Effect, Engine, OutputTrust, Policy, STARTER_POLICY, Vars, explain, load};

use super::{RpcError, Server};
use crate::enforce::backend::decide_on_disk;
use crate::fsfacts::canonical_dir;

/// The longest inline policy or policy file `serve` reads, in bytes.
const MAX_POLICY_BYTES: u64 = 1024 * 1024;
/// The most untrusted context strings one `check_verdict` takes.
const MAX_CONTEXT_ITEMS: usize = 256;
/// The most recent audit records `audit_summary` returns.
const MAX_RECENT: u64 = 100;

/// The tool name the untrusted context strings are recorded under (their taint source).
pub const CONTEXT_TOOL: &str = "untrusted_context";

/// `tools/list`.
pub fn definitions() -> Vec<Value> {
    vec![
        json!({
            "name": "check_verdict",
            "title": "Check a verdict",
            "description": "Decide a hypothetical MCP tool call exactly as `toolgate wrap` would (allow, deny or ask), \
        without running it, and explain why: the normalised action, matching rules, contract results and the decision \
        (the JSON of `toolgate policy explain --json`). `untrusted_context` are texts the session has already seen in \
        untrusted tool output (an email body, a web page): a destination taken from them is tainted. `policy` is an \
        inline toolgate policy (YAML) to use instead of the configured one. Never writes the audit log.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "The server name (as given to `toolgate wrap --server`)."},
                    "tool": {"type": "string", "description": "The tool name, e.g. `read_file`, `send_email`."},
                    "arguments": {"type": "object", "description": "The call's arguments.", "default": {}},
                    "untrusted_context": {
                        "type": "array", "items": {"type": "string"},
                        "description": "Texts seen earlier in untrusted tool output of the same server."
                    },
                    "policy": {"type": "string", "description": "An inline toolgate policy (YAML, `version: 1`)."},
                    "tool_definition": {
                        "type": "object",
                        "description": "The tool's definition as the server lists it (`tools/list`): pinned first, as wrap does, so annotation rules and pinning apply."
                    }
                },
                "required": ["tool"],
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
        }),
        json!({
            "name": "validate_policy",
            "title": "Validate a policy",
            "description": "Validate a toolgate policy and return every diagnostic (errors and warnings with \
        line, column and help), like `toolgate policy check`. Give the YAML text as `policy`, or the path of a \
        `.yaml`/`.yml` file as `path`.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "policy": {"type": "string", "description": "The policy YAML text."},
                    "path": {"type": "string", "description": "The path of a policy file (`.yaml` or `.yml`)."}
                },
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
        }),
        json!({
            "name": "list_packs",
            "title": "List the built-in packs",
            "description": "List toolgate's built-in packs (per-tool contracts for common MCP servers: filesystem, \
        git, fetch, shell, email, slack, github, gdrive, agent-tools): what each covers, its tools and the tools it leaves to the rules.",
            "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
            "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
        }),
        json!({
            "name": "audit_summary",
            "title": "Summarise the audit log",
            "description": "Summarise toolgate's audit log: records, decisions per effect, contract, rule, tool and \
        server, whether the hash chain is intact, and the most recent records.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "recent": {"type": "integer", "minimum": 0, "maximum": MAX_RECENT, "default": 10,
                               "description": "How many recent records to include."}
                },
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
        }),
    ]
}

/// A tool's result: its JSON, or a tool error (reported with `isError`).
type Outcome = Result<Value, ToolError>;

/// A tool error: a message and optional structured details.
#[derive(Debug)]
pub struct ToolError {
    message: String,
    details: Option<Value>,
}

impl ToolError {
    fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            details: None,
        }
    }
}

fn tool_result(outcome: Outcome) -> Value {
    match outcome {
        Ok(value) => json!({
            "content": [{"type": "text", "text": serde_json::to_string_pretty(&value).unwrap_or_default()}],
            "structuredContent": value,
            "isError": false,
        }),
        Err(e) => {
            let mut text = e.message.clone();
            let mut out = json!({"isError": true});
            if let Some(details) = e.details {
                if let Some(rendered) = details.get("rendered").and_then(Value::as_str) {
                    text.push_str("\n\n");
                    text.push_str(rendered);
                }
                let mut structured = details;
                if let Some(obj) = structured.as_object_mut() {
                    obj.insert("error".into(), Value::String(e.message));
                }
                set(&mut out, "structuredContent", structured);
            }
            set(&mut out, "content", json!([{"type": "text", "text": text}]));
            out
        }
    }
}

/// Sets `key` of a JSON object (`value` is always an object here).
fn set(value: &mut Value, key: &str, field: Value) {
    if let Some(obj) = value.as_object_mut() {
        obj.insert(key.to_owned(), field);
    }
}

/// `tools/call`.
pub fn call(server: &Server, params: &Value) -> Result<Value, RpcError> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("`tools/call` needs a `name`"))?;
    let empty = Value::Object(Map::new());
    let args = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(v @ Value::Object(_)) => v,
        Some(_) => return Err(RpcError::invalid_params("`arguments` must be an object")),
    };
    let outcome = match name {
        "check_verdict" => check_verdict(server, args),
        "validate_policy" => validate_policy(args),
        "list_packs" => no_arguments(args).map(|()| packs_json(false)),
        "audit_summary" => audit_summary(server, args),
        other => {
            return Err(RpcError::invalid_params(format!(
                "unknown tool `{other}`; the tools are check_verdict, validate_policy, list_packs, audit_summary"
            )));
        }
    };
    Ok(tool_result(outcome))
}

fn no_arguments(args: &Value) -> Result<(), ToolError> {
    match args.as_object().and_then(|o| o.keys().next()) {
        Some(k) => Err(ToolError::new(format!(
            "unknown argument `{k}`; this tool takes none"
        ))),
        None => Ok(()),
    }
}

fn check_keys(args: &Value, known: &[&str]) -> Result<(), ToolError> {
    if let Some(obj) = args.as_object() {
        for k in obj.keys() {
            if !known.contains(&k.as_str()) {
                return Err(ToolError::new(format!(
                    "unknown argument `{k}`; expected one of {}",
                    known
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
    }
    Ok(())
}

fn opt_str<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ToolError::new(format!("`{key}` must be a string"))),
    }
}

/// Diagnostics as JSON: every item with its location, plus (when `with_source`) the plain
/// rendering with source snippets.
pub fn diagnostics_json(d: &Diagnostics, with_source: bool) -> Value {
    let items: Vec<Value> = d
        .items
        .iter()
        .map(|i| {
            json!({
                "severity": i.severity.as_str(),
                "message": i.message,
                "help": i.help,
                "line": i.pos.map(|p| p.line),
                "column": i.pos.map(|p| p.column),
                "label": i.label,
            })
        })
        .collect();
    let mut out = json!({
        "errors": d.errors(),
        "warnings": d.warnings(),
        "diagnostics": items,
    });
    if with_source {
        set(&mut out, "rendered", Value::String(d.render_plain()));
    }
    out
}

fn home() -> Result<String, ToolError> {
    let home = std::env::var_os("HOME").ok_or_else(|| {
        ToolError::new("cannot tell the home directory (`$HOME` is not set), so `~` and `${home}` rules cannot apply")
    })?;
    canonical_dir(Path::new(&home))
        .map_err(|e| ToolError::new(format!("the home directory: {e:#}")))
}

/// Loads and compiles a policy for the workspace, with toolgate's self-protection as `wrap`
/// and hooks apply it (`policy_file`: the policy's file, when it came from one); errors
/// carry the diagnostics.
fn compile(
    source: &str,
    name: &str,
    workspace: &Path,
    policy_file: Option<&Path>,
) -> Result<Engine, ToolError> {
    let loaded = load(source, name).map_err(|d| ToolError {
        message: format!("the policy `{name}` is invalid"),
        details: Some(diagnostics_json(&d, true)),
    })?;
    let workspace = canonical_dir(workspace).map_err(|e| {
        ToolError::new(format!(
            "the workspace `{}` cannot be resolved: {e:#}",
            workspace.display()
        ))
    })?;
    let protections = crate::selfprotect::protections(policy_file, Path::new(&workspace), None)
        .map_err(|e| ToolError::new(format!("toolgate's self-protection cannot be set up: {e}")))?;
    let vars = Vars {
        workspace,
        home: home()?,
    };
    let engine = Engine::new(loaded.policy, vars).map_err(|d| ToolError {
        message: format!("the policy `{name}` does not compile"),
        details: Some(diagnostics_json(&d, true)),
    })?;
    Ok(engine.with_protections(protections))
}

/// The policy `check_verdict` uses: inline, else the configured file, else the starter policy.
fn policy_source(server: &Server, inline: Option<&str>) -> Result<(String, String), ToolError> {
    if let Some(text) = inline {
        if text.len() as u64 > MAX_POLICY_BYTES {
            return Err(ToolError::new(format!(
                "the inline policy is {} bytes; the limit is {MAX_POLICY_BYTES}",
                text.len()
            )));
        }
        return Ok((text.to_owned(), "inline policy".to_owned()));
    }
    match &server.config().policy {
        Some(path) => std::fs::read_to_string(path)
            .map(|s| (s, path.display().to_string()))
            .map_err(|e| {
                ToolError::new(format!(
                    "the policy `{}` cannot be read ({e})\nhelp: fix the path given to `toolgate serve --policy`",
                    path.display()
                ))
            }),
        None => Ok((STARTER_POLICY.to_owned(), "starter policy".to_owned())),
    }
}

/// `check_verdict`: the decision `wrap` would make, in a fresh session whose taint index holds
/// the untrusted context.
fn check_verdict(server: &Server, args: &Value) -> Outcome {
    check_keys(
        args,
        &[
            "server",
            "tool",
            "arguments",
            "untrusted_context",
            "policy",
            "tool_definition",
        ],
    )?;
    let tool = opt_str(args, "tool")?.ok_or_else(|| ToolError::new("`tool` is required"))?;
    let server_name = opt_str(args, "server")?;
    let empty = Value::Object(Map::new());
    let arguments = match args.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(v @ Value::Object(_)) => v,
        Some(_) => return Err(ToolError::new("`arguments` must be a JSON object")),
    };
    let context: Vec<&str> = match args.get("untrusted_context") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            if items.len() > MAX_CONTEXT_ITEMS {
                return Err(ToolError::new(format!(
                    "`untrusted_context` has {} items; the limit is {MAX_CONTEXT_ITEMS}",
                    items.len()
                )));
            }
            items
                .iter()
                .map(|v| {
                    v.as_str().ok_or_else(|| {
                        ToolError::new("`untrusted_context` must be an array of strings")
                    })
                })
                .collect::<Result<_, _>>()?
        }
        Some(_) => {
            return Err(ToolError::new(
                "`untrusted_context` must be an array of strings",
            ));
        }
    };
    let definition = match args.get("tool_definition") {
        None | Some(Value::Null) => None,
        Some(Value::Object(def)) => {
            let mut def = def.clone();
            match def.get("name") {
                None => {
                    def.insert("name".to_owned(), Value::String(tool.to_owned()));
                }
                Some(Value::String(n)) if n == tool => {}
                Some(other) => {
                    return Err(ToolError::new(format!(
                        "`tool_definition` names the tool {other}, but `tool` is `{tool}`"
                    )));
                }
            }
            Some(Value::Object(def))
        }
        Some(_) => return Err(ToolError::new("`tool_definition` must be a JSON object")),
    };
    let inline = opt_str(args, "policy")?;
    let (source, name) = policy_source(server, inline)?;
    let policy_file = match inline {
        Some(_) => None,
        None => server.config().policy.as_deref(),
    };
    let engine = compile(&source, &name, &server.config().workspace, policy_file)?;
    Ok(decide(
        &engine,
        server_name,
        tool,
        arguments,
        &context,
        definition.as_ref(),
    ))
}

/// Decides one hypothetical call with wrap's engine, filesystem facts and session type.
/// With a tool definition, it is pinned first (what wrap does with a `tools/list`) and
/// pinning is on; without one pinning is off, as in `policy explain`.
pub fn decide(
    engine: &Engine,
    server: Option<&str>,
    tool: &str,
    arguments: &Value,
    context: &[&str],
    definition: Option<&Value>,
) -> Value {
    let mut session = session_for(engine, definition.is_some());
    if let Some(def) = definition {
        session.pin_tools(std::slice::from_ref(def));
    }
    for text in context {
        // Shaped as a tool result, fed as untrusted output (what wrap records for an
        // untrusted tool's `tools/call` result).
        let result = json!({"content": [{"type": "text", "text": text}]});
        session.record_output(server, CONTEXT_TOOL, &result, OutputTrust::Untrusted);
    }
    let decision = decide_on_disk(
        engine,
        &mut session,
        (server, tool, arguments),
        now_ms(),
        false,
    );
    explain::to_json(&decision)
}

use crate::clock::now_ms;

fn policy_summary(p: &Policy) -> Value {
    let count = |e: Effect| p.rules.iter().filter(|r| r.effect == e).count();
    json!({
        "rules": p.rules.len(),
        "deny_rules": count(Effect::Deny),
        "ask_rules": count(Effect::Ask),
        "allow_rules": count(Effect::Allow),
        "tool_contracts": p.tools.len(),
        "packs": match &p.packs {
            None => toolgate_policy::contracts::packs::pack_names(),
            Some(list) => list.clone(),
        },
        "default": p.default.to_string(),
    })
}

/// `validate_policy`: every diagnostic of loading and compiling.
fn validate_policy(args: &Value) -> Outcome {
    check_keys(args, &["policy", "path"])?;
    let (source, name, with_source) = match (opt_str(args, "policy")?, opt_str(args, "path")?) {
        (Some(_), Some(_)) => {
            return Err(ToolError::new(
                "give either `policy` (the YAML text) or `path`, not both",
            ));
        }
        (None, None) => {
            return Err(ToolError::new(
                "give `policy` (the YAML text) or `path` (a policy file)",
            ));
        }
        (Some(text), None) => {
            if text.len() as u64 > MAX_POLICY_BYTES {
                return Err(ToolError::new(format!(
                    "the policy is {} bytes; the limit is {MAX_POLICY_BYTES}",
                    text.len()
                )));
            }
            (text.to_owned(), "policy.yaml".to_owned(), true)
        }
        (None, Some(path)) => (read_policy_file(Path::new(path))?, path.to_owned(), false),
    };
    // A file's diagnostics carry no source snippets: `path` must not turn this server into a
    // way to read files the wrapped servers are forbidden to read.
    let mut out = match load(&source, &name) {
        Err(d) => {
            let mut out = diagnostics_json(&d, with_source);
            set(&mut out, "valid", Value::Bool(false));
            out
        }
        Ok(loaded) => match Engine::new(loaded.policy.clone(), Vars::placeholder()) {
            Err(mut d) => {
                d.items.extend(loaded.warnings.items.iter().cloned());
                let mut out = diagnostics_json(&d, with_source);
                set(&mut out, "valid", Value::Bool(false));
                out
            }
            Ok(_) => {
                let mut out = diagnostics_json(&loaded.warnings, with_source);
                set(&mut out, "valid", Value::Bool(true));
                set(&mut out, "summary", policy_summary(&loaded.policy));
                out
            }
        },
    };
    set(&mut out, "name", Value::String(name));
    Ok(out)
}

fn read_policy_file(path: &Path) -> Result<String, ToolError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if !matches!(ext.as_deref(), Some("yaml" | "yml")) {
        return Err(ToolError::new(format!(
            "`{}` is not a policy file: only `.yaml` and `.yml` files are read\nhelp: pass the policy text as `policy` instead",
            path.display()
        )));
    }
    let meta = std::fs::metadata(path)
        .map_err(|e| ToolError::new(format!("cannot read `{}` ({e})", path.display())))?;
    if !meta.is_file() {
        return Err(ToolError::new(format!(
            "`{}` is not a regular file",
            path.display()
        )));
    }
    if meta.len() > MAX_POLICY_BYTES {
        return Err(ToolError::new(format!(
            "`{}` is {} bytes; the limit is {MAX_POLICY_BYTES}",
            path.display(),
            meta.len()
        )));
    }
    std::fs::read_to_string(path)
        .map_err(|e| ToolError::new(format!("cannot read `{}` ({e})", path.display())))
}

/// The packs: name, description, servers, tools, uncovered tools (and the YAML source when
/// `with_source`).
pub fn packs_json(with_source: bool) -> Value {
    let packs: Vec<Value> = PACKS
        .iter()
        .map(|(name, source)| match load_pack(name) {
            Ok(pack) => {
                let mut v = json!({
                    "name": name,
                    "description": pack.description,
                    "servers": pack.servers,
                    "tools": pack.tools.keys().collect::<Vec<_>>(),
                    "uncovered": pack.uncovered,
                });
                if with_source {
                    set(&mut v, "yaml", Value::String((*source).to_owned()));
                }
                v
            }
            Err(e) => json!({"name": name, "error": e}),
        })
        .collect();
    json!({
        "packs": packs,
        "help": "a policy enables packs with `packs: [name, ...]` (all when absent, none with `packs: []`); its own `tools:` entries replace a pack's entry for the same tool",
    })
}

/// `audit_summary`: reads the log, never creates or writes it.
fn audit_summary(server: &Server, args: &Value) -> Outcome {
    check_keys(args, &["recent"])?;
    let recent = match args.get("recent") {
        None | Some(Value::Null) => 10,
        Some(v) => v.as_u64().filter(|n| *n <= MAX_RECENT).ok_or_else(|| {
            ToolError::new(format!(
                "`recent` must be an integer from 0 to {MAX_RECENT}"
            ))
        })?,
    };
    summary_json(&server.config().audit, recent)
}

fn summary_json(path: &Path, recent: u64) -> Outcome {
    let shown = path.display().to_string();
    if !path.exists() {
        return Ok(json!({"path": shown, "exists": false, "records": 0}));
    }
    let s = toolgate_audit::summarize(path)
        .map_err(|e| ToolError::new(format!("cannot summarise the audit log `{shown}`: {e}")))?;
    let mut doc = serde_json::to_value(&s)
        .map_err(|e| ToolError::new(format!("cannot encode the summary: {e}")))?;
    let tail = toolgate_audit::tail(path, usize::try_from(recent).unwrap_or(0))
        .map_err(|e| ToolError::new(format!("cannot read the audit log `{shown}`: {e}")))?;
    let recent: Vec<Value> = tail
        .into_iter()
        .map(|l| match l.record {
            Ok(r) => serde_json::to_value(&r).unwrap_or(Value::Null),
            Err(e) => json!({"line": l.line, "unreadable": e}),
        })
        .collect();
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("path".into(), Value::String(shown));
        obj.insert("exists".into(), Value::Bool(true));
        obj.insert("recent".into(), Value::Array(recent));
    }
    Ok(doc)
}

const PACKS_URI: &str = "toolgate://packs";
const AUDIT_URI: &str = "toolgate://audit/summary";

/// `resources/list`.
pub fn resource_list() -> Vec<Value> {
    vec![
        json!({
            "uri": PACKS_URI,
            "name": "packs",
            "title": "toolgate built-in packs",
            "description": "The built-in packs with their tools and YAML source (the format of a policy's `tools:` mapping).",
            "mimeType": "application/json",
        }),
        json!({
            "uri": AUDIT_URI,
            "name": "audit-summary",
            "title": "toolgate audit summary",
            "description": "Counts of the audit log's decisions, its hash chain state and the 10 most recent records.",
            "mimeType": "application/json",
        }),
    ]
}

/// `resources/read`.
pub fn read_resource(server: &Server, params: &Value) -> Result<Value, RpcError> {
    let uri = params
        .get("uri")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("`resources/read` needs a `uri`"))?;
    let value = match uri {
        PACKS_URI => packs_json(true),
        AUDIT_URI => match summary_json(&server.config().audit, 10) {
            Ok(v) => v,
            Err(e) => {
                json!({"path": server.config().audit.display().to_string(), "error": e.message})
            }
        },
        other => {
            return Err(RpcError {
                code: -32002,
                message: format!(
                    "resource `{other}` not found; the resources are `{PACKS_URI}` and `{AUDIT_URI}`"
                ),
            });
        }
    };
    let text = serde_json::to_string_pretty(&value).map_err(|e| RpcError {
        code: -32603,
        message: format!("cannot encode `{uri}`: {e}"),
    })?;
    Ok(json!({"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pack_loads_and_lists_tools() {
        let v = packs_json(false);
        let packs = v["packs"].as_array().unwrap();
        assert_eq!(packs.len(), PACKS.len());
        for p in packs {
            assert!(p.get("error").is_none(), "{p}");
            assert!(!p["tools"].as_array().unwrap().is_empty(), "{p}");
        }
    }

    #[test]
    fn validate_reports_located_diagnostics() {
        let v =
            validate_policy(&json!({"policy": "version: 1\ndefault: allow\nrulez: []\n"})).unwrap();
        assert_eq!(v["valid"], false);
        assert!(v["errors"].as_u64().unwrap() >= 1);
        assert_eq!(v["diagnostics"][0]["line"], 3);
        assert!(v["rendered"].as_str().unwrap().contains("rulez"));
        let v = validate_policy(&json!({"policy": STARTER_POLICY})).unwrap();
        assert_eq!(v["valid"], true, "{v}");
    }

    #[test]
    fn validate_path_reads_only_policy_files_and_shows_no_source() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("id_rsa");
        std::fs::write(&secret, "-----BEGIN KEY-----\n").unwrap();
        let err = validate_policy(&json!({"path": secret})).unwrap_err();
        assert!(
            err.message.contains("only `.yaml` and `.yml`"),
            "{}",
            err.message
        );
        let bad = dir.path().join("p.yaml");
        std::fs::write(&bad, "version: 1\nsecret_token_xyz: 1\n").unwrap();
        let v = validate_policy(&json!({"path": bad})).unwrap();
        assert_eq!(v["valid"], false);
        assert!(v.get("rendered").is_none());
    }
}
