//! The audit record of a decision, as every path writes it (`wrap`, the gateway, the
//! broker's hooks): what the action was and what decided, never the call's arguments.

use serde_json::Value;
use toolgate_audit::{Event, Kind as AuditKind, Net};
use toolgate_policy::{Action, Effect};

/// The record of a decision on a call of `tool` with `arguments` (kept as their canonical
/// SHA-256): the operations, resources, executable and host of `action` (none: the call
/// was decided before it was understood), the effect, and what decided (`contract`,
/// `rule`, `reason`).
pub fn decision_event(
    tool: &str,
    arguments: &Value,
    action: Option<&Action>,
    effect: Effect,
    contract: &str,
    rule: Option<String>,
    reason: &str,
) -> Event {
    let mut e = Event::new(AuditKind::Decision);
    e.tool = Some(tool.to_owned());
    for part in action.map(|a| a.parts.as_slice()).unwrap_or_default() {
        let op = part.operation.as_str().to_owned();
        if !e.operations.contains(&op) {
            e.operations.push(op);
        }
        e.resources.extend(part.resources.iter().cloned());
        if e.executable.is_none() {
            e.executable = part.executable.clone();
        }
        if e.net.is_none() {
            e.net = part.network.as_ref().map(|n| Net {
                host: n.host.clone(),
                method: Some(n.method.clone()),
            });
        }
    }
    e.effect = Some(effect.as_str().to_owned());
    e.contract = Some(contract.to_owned());
    e.rule = rule;
    e.reason = Some(reason.to_owned());
    e.args_sha256 = Some(super::canonical_sha256(arguments));
    e
}
