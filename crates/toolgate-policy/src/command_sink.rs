//! The sink gate for a client's own shell tool (a hook's `Bash`, Cursor's shell): its
//! command is one free-text argument, so no `sink_params` name the destination in it. Every
//! destination-shaped word of the command (raw and as the shell decodes it) is looked up in
//! the session's taint index; one that only untrusted output named, and the user did not,
//! makes the call the tool's `on_tainted` (deny by default). A secret of a known shape in
//! the command ([`crate::secret_shapes`]) that the user did not type asks.
//!
//! MCP tools are not judged here: their contracts name their sink arguments.

use serde_json::Value;

use crate::action::{Action, Operation};
use crate::contracts_impl::{Contracts, OnTainted};
use crate::decision::{Contract, ContractResult, Effect};
use crate::normalize::decoded_words;
use crate::session::{SecretCheck, Session};
use crate::taint::{Provenance, TaintSource, tokenize_destinations};

/// The most strings of one call's arguments that are searched.
const MAX_COMMAND_STRINGS: usize = 64;
/// The most bytes of one call's arguments that are searched.
const MAX_COMMAND_BYTES: usize = 256 * 1024;

/// The gate on a built-in `tool`'s call with `arguments`, whose `action` the rest of the
/// engine decided `effect`: when that is not a deny and a shell command names a destination
/// only untrusted output named, the tool's `on_tainted` effect (deny by default) and why.
pub(crate) fn gate(
    contracts: &Contracts,
    tool: &str,
    arguments: &Value,
    session: &mut Session,
    action: &Action,
    effect: Effect,
) -> Option<ContractResult> {
    let shell = action
        .parts
        .iter()
        .any(|p| p.operation == Operation::ShellExec);
    if effect == Effect::Deny || !shell {
        return None;
    }
    let unchecked = match session.secret_check(arguments) {
        SecretCheck::Carried(found) => {
            return Some(ContractResult::new(
                Contract::SinkGate,
                Effect::Deny,
                crate::contracts_impl::secret_reason(&found),
            ));
        }
        SecretCheck::Unchecked => Some(crate::session::unchecked_reason()),
        SecretCheck::Clean => None,
    };
    let Some((token, source)) = tainted_in_command(session, arguments) else {
        // A secret of a known shape in a command asks: the shell can send it anywhere.
        let reason = crate::contracts_impl::shape_reason(session, arguments).or(unchecked)?;
        return Some(ContractResult::new(Contract::SinkGate, Effect::Ask, reason));
    };
    let from = match &source.server {
        Some(s) => format!("`{s}`/`{}`", source.tool),
        None => format!("`{}`", source.tool),
    };
    let ask = contracts
        .lookup_in(tool, session, None)
        .contract()
        .on_tainted
        == Some(OnTainted::Ask);
    let effect = if ask { Effect::Ask } else { Effect::Deny };
    let reason = format!(
        "the command names `{token}`, which came from untrusted output of {from} (a prompt injection can put it there)"
    );
    Some(ContractResult {
        contract: Contract::SinkGate,
        effect,
        rule: None,
        reason,
        sinks: Vec::new(),
    })
}

/// A destination in a shell call's arguments that only untrusted output named (and the
/// user did not), with where it was seen.
pub fn tainted_in_command(session: &Session, arguments: &Value) -> Option<(String, TaintSource)> {
    let mut strings = Vec::new();
    collect_strings(arguments, &mut strings, MAX_COMMAND_STRINGS, 0);
    let mut budget = MAX_COMMAND_BYTES;
    for s in strings {
        let s = cut(s, budget);
        budget = budget.saturating_sub(s.len());
        // The raw text (what the scanner cannot decode is still seen) and the words bash
        // passes on, decoded (`evil"".example`, `ev''il`, `exampl\e`, `$'\x65'`), of
        // every command, nested command and redirection in it.
        let decoded = decoded_words(s);
        let texts = std::iter::once(s).chain(decoded.iter().map(String::as_str));
        for text in texts {
            for token in tokenize_destinations(text) {
                // A shell command reaches hosts, URLs and addresses; `@file` (curl's
                // "read this file") and `#…` (a comment) are no chat handle or channel.
                if token.starts_with(['@', '#']) || session.user_vouched(&token) {
                    continue;
                }
                if let Provenance::Tainted(source) = session.taint().classify(&token) {
                    return Some((token, source));
                }
            }
        }
        if budget == 0 {
            break;
        }
    }
    None
}

/// `s` cut to at most `max` bytes, at a character boundary.
pub fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or_default()
}

/// The strings in `v` (depth first, at most `max`, at most 32 levels deep): what the sink
/// gate reads of a shell call's arguments, and how a hook reads a client's tool response that
/// is not an MCP result.
pub fn collect_strings<'a>(v: &'a Value, out: &mut Vec<&'a str>, max: usize, depth: usize) {
    if out.len() >= max || depth > 32 {
        return;
    }
    match v {
        Value::String(s) => out.push(s),
        Value::Array(items) => {
            for item in items {
                collect_strings(item, out, max, depth + 1);
            }
        }
        Value::Object(map) => {
            for item in map.values() {
                collect_strings(item, out, max, depth + 1);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_whole_characters() {
        assert_eq!(cut("héllo", 2), "h");
    }
}
