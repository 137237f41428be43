//! The results toolgate writes itself: a denied call's tool result.
//!
//! A denial is a normal tool result with `isError: true` (never a JSON-RPC error: that is
//! for protocol faults), whose text tells a model to stop retrying and a person what to
//! change, and whose `_meta` carries the verdict for programs.

use serde_json::{Value, json};

use crate::approval::META_DECISION;

/// Why toolgate blocked a call, as shown to the agent and the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked<'a> {
    /// The tool (or `resources/read`, …) that was blocked.
    pub tool: &'a str,
    /// The reason, e.g. "`/home/u/.ssh/id_rsa` matches deny rule `protect-secrets`".
    pub reason: &'a str,
    /// The contract that decided (`rule`, `sink_gate`, `pinning`, `approval`, `error`, …).
    pub contract: &'a str,
    /// The rule id, for rule decisions.
    pub rule: Option<&'a str>,
}

impl Blocked<'_> {
    /// The one-line text, e.g. `toolgate blocked read_file: … matches deny rule protect-secrets`.
    pub fn text(&self) -> String {
        format!(
            "toolgate blocked {}: {}. This call was not run; do not retry it unchanged. \
             A person can change this in the toolgate policy (`toolgate policy explain` shows why).",
            self.tool,
            self.reason.trim_end_matches('.')
        )
    }

    /// The `_meta` object describing the verdict.
    pub fn meta(&self) -> Value {
        let decision = match self.rule {
            Some(rule) => json!({"effect": "deny", "contract": self.contract, "rule": rule}),
            None => json!({"effect": "deny", "contract": self.contract}),
        };
        json!({ META_DECISION: decision })
    }

    /// A `tools/call` result for the denial.
    pub fn tool_result(&self) -> Value {
        json!({
            "content": [{"type": "text", "text": self.text()}],
            "isError": true,
            "_meta": self.meta()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denial_is_an_error_result_with_an_actionable_text() {
        let b = Blocked {
            tool: "read_file",
            reason: "/home/u/.ssh/id_rsa matches deny rule protect-secrets",
            contract: "rule",
            rule: Some("protect-secrets"),
        };
        let r = b.tool_result();
        assert_eq!(r["isError"], true);
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with(
                "toolgate blocked read_file: /home/u/.ssh/id_rsa matches deny rule protect-secrets."
            ),
            "{text}"
        );
        assert!(text.contains("do not retry"));
        assert_eq!(r["_meta"][META_DECISION]["rule"], "protect-secrets");
        assert_eq!(r["_meta"][META_DECISION]["effect"], "deny");
    }
}
