//! What controls a tool is under and where each comes from, and its typical call.

use crate::model::{Control, Origin};
use serde_json::{Map, Value, json};
use toolgate_policy::LoadedPolicy;
use toolgate_policy::contracts::heuristics::{is_destination_param, is_recipient_param};
use toolgate_policy::contracts::packs::parsed_pack;
use toolgate_policy::contracts::{EntrySource, OutputLabel, OutputSpec, TextFormat, ToolContract};

/// The placeholder arguments of a typical call, from the schema's property names and types.
pub fn typical_arguments(definition: &Value, contract: &ToolContract) -> Value {
    let schema = definition.get("inputSchema");
    let props = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut args = Map::new();
    let Some(props) = props else {
        return Value::Object(args);
    };
    let listed = |list: &Option<Vec<String>>, k: &str| {
        list.as_ref().is_some_and(|l| l.iter().any(|x| x == k))
    };
    for (name, prop) in props {
        let interesting = required.contains(&name.as_str())
            || listed(&contract.path_params, name)
            || listed(&contract.sink_params, name)
            || listed(&contract.url_params, name)
            || contract.command_param.as_deref() == Some(name.as_str());
        if !interesting {
            continue;
        }
        args.insert(name.clone(), placeholder(name, prop, contract));
    }
    Value::Object(args)
}

fn placeholder(name: &str, prop: &Value, contract: &ToolContract) -> Value {
    if let Some(first) = prop
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    let ty = prop.get("type").and_then(Value::as_str).unwrap_or("string");
    let lower = name.to_ascii_lowercase();
    let listed =
        |list: &Option<Vec<String>>| list.as_ref().is_some_and(|l| l.iter().any(|x| x == name));
    let text = if contract.command_param.as_deref() == Some(name) || lower == "command" {
        "ls"
    } else if listed(&contract.url_params) || lower.contains("url") || lower.contains("uri") {
        "https://example.com/"
    } else if listed(&contract.sink_params)
        || is_recipient_param(name)
        || (is_destination_param(name) && !lower.contains("path"))
    {
        "someone@example.com"
    } else if listed(&contract.path_params)
        || lower.contains("path")
        || lower.contains("file")
        || lower.contains("dir")
        || lower == "source"
        || lower == "destination"
    {
        "notes/example.txt"
    } else {
        "example"
    };
    match ty {
        "integer" | "number" => json!(1),
        "boolean" => json!(false),
        "object" => json!({}),
        "array" => {
            let item = prop
                .get("items")
                .cloned()
                .unwrap_or(json!({"type": "string"}));
            json!([placeholder(name, &item, contract)])
        }
        _ => json!(text),
    }
}

fn layer_contract(src: &EntrySource, loaded: &LoadedPolicy) -> Option<ToolContract> {
    match src {
        EntrySource::Heuristics => None,
        EntrySource::User { key } => loaded.policy.tools.get(key).cloned(),
        EntrySource::Pack { pack, key } => parsed_pack(pack).ok()?.tools.get(key).cloned(),
    }
}

fn origins(
    sources: &[EntrySource],
    loaded: &LoadedPolicy,
    merged: &ToolContract,
    has: impl Fn(&ToolContract) -> bool,
) -> Vec<Origin> {
    let mut out = Vec::new();
    for src in sources {
        if let Some(c) = layer_contract(src, loaded)
            && has(&c)
        {
            out.push(match src {
                EntrySource::User { key } => Origin::User { key: key.clone() },
                EntrySource::Pack { pack, key } => Origin::Pack {
                    pack: pack.clone(),
                    key: key.clone(),
                },
                EntrySource::Heuristics => Origin::Heuristic,
            });
        }
    }
    if out.is_empty() && has(merged) {
        out.push(Origin::Heuristic);
    }
    if out.is_empty() {
        out.push(Origin::None);
    }
    out
}

fn list(v: &Option<Vec<String>>) -> String {
    match v {
        Some(l) if !l.is_empty() => l
            .iter()
            .map(|x| format!("`{x}`"))
            .collect::<Vec<_>>()
            .join(", "),
        _ => "none".to_owned(),
    }
}

pub(super) fn controls(
    c: &ToolContract,
    sources: &[EntrySource],
    loaded: &LoadedPolicy,
    fingerprint: &str,
) -> Vec<Control> {
    let mut out = vec![Control {
        control: "pinning",
        detail: format!(
            "definition pinned on first use (fingerprint `{}`); a changed definition asks",
            fingerprint.get(..12).unwrap_or(fingerprint)
        ),
        origin: vec![Origin::BuiltIn],
    }];
    let budget = match (&c.max_calls, &c.budget) {
        (None, None) => "no budget".to_owned(),
        (Some(0), _) => "forbidden (`max_calls: 0`)".to_owned(),
        (m, b) => {
            let mut parts = Vec::new();
            if let Some(m) = m {
                parts.push(format!("{m} calls per session"));
            }
            if let Some(b) = b {
                parts.push(format!("{} calls per {}", b.max, b.per));
            }
            parts.join(", ")
        }
    };
    out.push(Control {
        control: "budget",
        detail: budget,
        origin: origins(sources, loaded, c, |x| {
            x.max_calls.is_some() || x.budget.is_some()
        }),
    });
    let mut cons = Vec::new();
    if let Some(p) = &c.allowed_path_prefixes {
        cons.push(format!("paths inside {}", list(&Some(p.clone()))));
    }
    if let Some(p) = &c.arg_patterns {
        cons.push(format!(
            "patterns on {}",
            list(&Some(p.keys().cloned().collect()))
        ));
    }
    if let Some(p) = &c.arg_values {
        cons.push(format!(
            "fixed values of {}",
            list(&Some(p.keys().cloned().collect()))
        ));
    }
    out.push(Control {
        control: "constraints",
        detail: if cons.is_empty() {
            "no argument constraints".to_owned()
        } else {
            cons.join("; ")
        },
        origin: origins(sources, loaded, c, |x| {
            x.allowed_path_prefixes.is_some() || x.arg_patterns.is_some() || x.arg_values.is_some()
        }),
    });
    let sink = if c.exfiltrating == Some(true) {
        format!(
            "sends: sink arguments {}; trusted destinations {}; tainted destination → {}",
            match &c.sink_params {
                Some(l) if !l.is_empty() => list(&c.sink_params),
                _ => "destination-named arguments".to_owned(),
            },
            list(&c.trusted_destinations),
            match c.on_tainted {
                Some(toolgate_policy::contracts::OnTainted::Ask) => "ask",
                _ => "deny",
            }
        )
    } else {
        "not a sending tool".to_owned()
    };
    out.push(Control {
        control: "sink_gate",
        detail: sink,
        origin: origins(sources, loaded, c, |x| {
            x.exfiltrating.is_some()
                || x.sink_params.is_some()
                || x.trusted_destinations.is_some()
                || x.on_tainted.is_some()
        }),
    });
    out.push(Control {
        control: "output_trust",
        detail: output_trust_detail(c.output.as_ref()),
        origin: origins(sources, loaded, c, |x| x.output.is_some()),
    });
    out.push(Control {
        control: "annotations",
        detail: match &c.annotations {
            Some(a) if !a.is_empty() => format!(
                "expects {}",
                a.iter()
                    .map(|(k, v)| format!("`{k}: {v}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => "no expected annotations".to_owned(),
        },
        origin: origins(sources, loaded, c, |x| x.annotations.is_some()),
    });
    out
}

/// How a tool's output is trusted, in words.
fn output_trust_detail(output: Option<&OutputSpec>) -> String {
    match output {
        Some(OutputSpec::Label(OutputLabel::Trusted)) => "output trusted".to_owned(),
        Some(OutputSpec::Fields(f)) => format!(
            "output trusted at {} only (structured content, and text content read as {}; text that does not parse is untrusted; {})",
            list(&Some(f.trusted_fields.clone())),
            match f.format() {
                TextFormat::Json => "JSON",
                TextFormat::Yaml => "YAML",
            },
            if f.trusted_wins() {
                "a value an untrusted field repeats stays trusted"
            } else {
                "a value an untrusted field repeats is untrusted"
            }
        ),
        Some(OutputSpec::Redact(_)) => {
            "output untrusted (destinations in it are tainted), secrets in it redacted".to_owned()
        }
        _ => "output untrusted (destinations in it are tainted)".to_owned(),
    }
}

#[cfg(test)]
mod output_trust_tests {
    #![allow(
        clippy::unwrap_used,
        reason = "tests: a failed expectation should stop the test with its message"
    )]

    use super::*;

    #[test]
    fn the_detail_says_how_text_is_read() {
        let spec: OutputSpec = serde_json::from_str(
            r#"{"trusted_fields": ["participants[*]"], "text_format": "yaml", "trusted_wins": true}"#,
        )
        .unwrap();
        let d = output_trust_detail(Some(&spec));
        assert!(d.contains("`participants[*]`"), "{d}");
        assert!(d.contains("read as YAML"), "{d}");
        assert!(d.contains("does not parse is untrusted"), "{d}");
        assert!(d.contains("stays trusted"), "{d}");
        let spec: OutputSpec = serde_json::from_str(r#"{"trusted_fields": ["a"]}"#).unwrap();
        let d = output_trust_detail(Some(&spec));
        assert!(
            d.contains("read as JSON") && d.contains("repeats is untrusted"),
            "{d}"
        );
        assert!(output_trust_detail(None).starts_with("output untrusted"));
    }
}
