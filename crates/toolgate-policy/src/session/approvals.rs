//! Session approvals: of actions, calls and destinations, and their export to the other
//! proxies of the same agent session.

use super::{ApprovalKey, ApprovalScope, Session};
use crate::action::{Action, Operation};
use crate::decision::{SinkFinding, SinkVerdict};
use serde_json::Value;

/// The arguments in an approval key: the SHA-256 of their canonical form (equal arguments,
/// however written, give equal keys).
fn canonical_json(v: &Value) -> String {
    toolgate_jcs::canonical_sha256(v).unwrap_or_else(|_| v.to_string())
}

fn action_needs_arguments(action: &Action) -> bool {
    action.parts.is_empty()
        || action
            .parts
            .iter()
            .any(|p| p.opaque || p.operation == Operation::Unknown)
}

fn action_key(action: &Action, arguments: Option<&Value>) -> Option<String> {
    let mut key = serde_json::to_string(action).ok()?;
    if action_needs_arguments(action) {
        // An opaque action says too little: bind the approval to the exact arguments.
        key.push('\u{0}');
        key.push_str(&canonical_json(arguments?));
    }
    Some(key)
}

impl Session {
    fn insert_approval(&mut self, key: ApprovalKey) -> bool {
        if self.approvals.contains(&key) {
            return true;
        }
        if self.approvals.len() >= self.limits.max_approvals {
            return false;
        }
        self.approvals.insert(key)
    }

    /// Remember that the human approved this exact action for the session. `arguments` is
    /// required when the action has an opaque or unknown part (the action alone says too
    /// little). Returns false when nothing was remembered (memory bound, or missing
    /// arguments): the next identical call asks again.
    pub fn approve(&mut self, action: &Action, arguments: Option<&Value>) -> bool {
        let Some(key) = action_key(action, arguments) else {
            return false;
        };
        let fingerprint = self.fingerprint_of(&action.tool).map(str::to_owned);
        self.insert_approval(ApprovalKey::Action { key, fingerprint })
    }

    /// Whether this exact action was approved for this tool definition. Actions with an
    /// opaque or unknown part need [`Session::approval_for_call`].
    pub fn approval_for(
        &self,
        action: &Action,
        fingerprint: Option<&str>,
    ) -> Option<ApprovalScope> {
        self.approval_for_call(action, None, fingerprint)
    }

    /// Like [`Session::approval_for`], with the call's arguments for opaque actions.
    pub fn approval_for_call(
        &self,
        action: &Action,
        arguments: Option<&Value>,
        fingerprint: Option<&str>,
    ) -> Option<ApprovalScope> {
        let key = action_key(action, arguments)?;
        let k = ApprovalKey::Action {
            key,
            fingerprint: fingerprint.map(str::to_owned),
        };
        self.approvals.contains(&k).then_some(ApprovalScope::Action)
    }

    /// Remember that the human approved a destination (canonical form, as in
    /// [`SinkFinding::destination`]) of a tool for the session.
    pub fn approve_destination(&mut self, tool: &str, destination: &str) -> bool {
        let fingerprint = self.fingerprint_of(tool).map(str::to_owned);
        self.insert_approval(ApprovalKey::Destination {
            tool: tool.to_owned(),
            fingerprint,
            destination: destination.to_owned(),
        })
    }

    /// Approve every unproven destination of a sink-gate result (what the approval prompt
    /// showed). Tainted destinations are approved too when `include_tainted` (the contract
    /// said `on_tainted: ask` and the human agreed). Returns false if any was not remembered.
    pub fn approve_sinks(
        &mut self,
        tool: &str,
        findings: &[SinkFinding],
        include_tainted: bool,
    ) -> bool {
        let mut all = true;
        for f in findings {
            let approvable = f.verdict == SinkVerdict::Unproven
                || (include_tainted && f.verdict == SinkVerdict::Tainted);
            if approvable && !self.approve_destination(tool, &f.destination) {
                all = false;
            }
        }
        all
    }

    /// Whether a destination of a tool was approved for the current definition.
    pub fn destination_approved(&self, tool: &str, destination: &str) -> bool {
        let k = ApprovalKey::Destination {
            tool: tool.to_owned(),
            fingerprint: self.fingerprint_of(tool).map(str::to_owned),
            destination: destination.to_owned(),
        };
        self.approvals.contains(&k)
    }

    /// The session approvals as opaque keys, to share with the other proxies of the same
    /// agent session. Each key stays bound to the normalised action (or destination) and the
    /// tool's definition fingerprint. Approvals bound to the call's exact arguments (opaque
    /// actions) are not exported: a key never carries raw arguments.
    pub fn export_approvals(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .approvals
            .iter()
            .filter(|k| !matches!(k, ApprovalKey::Action { key, .. } if key.contains('\u{0}')))
            .filter_map(|k| serde_json::to_string(k).ok())
            .collect();
        out.sort();
        out
    }

    /// Imports a key from [`Session::export_approvals`] (of another proxy of the same agent
    /// session). It covers only the same action or destination of a tool with the same
    /// definition fingerprint. Returns false when the key is malformed or the memory bound
    /// is reached.
    pub fn import_approval(&mut self, key: &str) -> bool {
        match serde_json::from_str::<ApprovalKey>(key) {
            Ok(ApprovalKey::Action { key, .. }) if key.contains('\u{0}') => false,
            Ok(k) => self.insert_approval(k),
            Err(_) => false,
        }
    }
}
