//! The results toolgate writes itself: a denied call's tool result.
//!
//! A denial is a normal tool result with `isError: true` (never a JSON-RPC error: that is
//! for protocol faults), whose text tells a model to stop retrying and a person what to
//! change, and whose `_meta` carries the verdict for programs.

use serde::Serialize;
use serde_json::value::RawValue;

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
    /// A call denied because toolgate could not read its shared state (`store`: an outage)
    /// was judged on nothing: it may be retried later, and the policy is not what to change.
    pub fn text(&self) -> String {
        if self.contract == "store" {
            return format!(
                "toolgate blocked {}: {}. This call was not run and nothing about it was judged: toolgate could not read its shared state, so it may be retried later, unchanged. A person can check the gateway (`/readyz`) and its state store.",
                self.tool,
                self.reason.trim_end_matches('.')
            );
        }
        format!(
            "toolgate blocked {}: {}. This call was not run; do not retry it unchanged. \
             A person can change this in the toolgate policy (`toolgate policy explain` shows why).",
            self.tool,
            self.reason.trim_end_matches('.')
        )
    }

    /// The `tools/call` result for the denial:
    /// `{"content":[{"type":"text","text":…}],"isError":true,"_meta":{<META_DECISION>:{…}}}`.
    pub fn tool_result(&self) -> ToolResult<'_> {
        ToolResult {
            content: [Text {
                kind: "text",
                text: self.text(),
            }],
            is_error: true,
            meta: Meta {
                decision: Decision {
                    effect: "deny",
                    contract: self.contract,
                    rule: self.rule,
                },
            },
        }
    }

    /// The JSON-RPC response to request `id` carrying [`Self::tool_result`], serialised
    /// straight from borrowed fields (a denial is on the latency path).
    pub fn response(&self, id: &RawValue) -> Vec<u8> {
        let mut out = Vec::with_capacity(256 + self.reason.len());
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        out.extend_from_slice(id.get().as_bytes());
        out.extend_from_slice(br#","result":"#);
        // Writing into a Vec cannot fail, and these types always serialise.
        if serde_json::to_writer(&mut out, &self.tool_result()).is_err() {
            out.truncate(0);
            return toolgate_mcp::build::tool_error_result(
                id,
                "toolgate blocked this call: internal error",
            );
        }
        out.push(b'}');
        out
    }
}

/// A denial as a `tools/call` result.
#[derive(Debug, Serialize)]
pub struct ToolResult<'a> {
    content: [Text; 1],
    #[serde(rename = "isError")]
    is_error: bool,
    #[serde(rename = "_meta")]
    meta: Meta<'a>,
}

#[derive(Debug, Serialize)]
struct Text {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
}

#[derive(Debug, Serialize)]
struct Meta<'a> {
    #[serde(rename = "dev.toolgate/decision")]
    decision: Decision<'a>,
}

#[derive(Debug, Serialize)]
struct Decision<'a> {
    effect: &'static str,
    contract: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::META_DECISION;

    #[test]
    fn a_store_outage_says_the_call_may_be_retried_later() {
        let b = Blocked {
            tool: "send_email",
            reason: "the state store did not answer within 200 ms",
            contract: "store",
            rule: None,
        };
        let text = b.text();
        assert!(text.contains("may be retried later"), "{text}");
        assert!(
            !text.contains("do not retry") && !text.contains("policy"),
            "{text}"
        );
    }

    #[test]
    fn denial_is_an_error_result_with_an_actionable_text() {
        let b = Blocked {
            tool: "read_file",
            reason: "/home/u/.ssh/id_rsa matches deny rule protect-secrets",
            contract: "rule",
            rule: Some("protect-secrets"),
        };
        let id = RawValue::from_string("7".to_owned()).unwrap();
        let response: serde_json::Value = serde_json::from_slice(&b.response(&id)).unwrap();
        assert_eq!(response["jsonrpc"], "2.0");
        assert_eq!(response["id"], 7);
        let r = &response["result"];
        assert_eq!(r["isError"], true);
        assert_eq!(r["content"][0]["type"], "text");
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
        assert_eq!(r["_meta"][META_DECISION]["contract"], "rule");
        let without_rule = Blocked { rule: None, ..b };
        let response: serde_json::Value =
            serde_json::from_slice(&without_rule.response(&id)).unwrap();
        assert_eq!(
            response["result"]["_meta"][META_DECISION],
            serde_json::json!({"effect": "deny", "contract": "rule"})
        );
    }

    #[test]
    fn the_meta_key_is_the_decision_key() {
        // `Meta` names the key literally (serde needs a literal); it must stay META_DECISION.
        assert_eq!(META_DECISION, "dev.toolgate/decision");
    }
}
