//! What a person is asked and what they answer, as the broker, the gateway's approvals API
//! and `toolgate approvals` carry it: toolgate's description of an action, never raw
//! arguments.

use serde::{Deserialize, Serialize};

/// The longest accepted text field, in bytes.
pub const MAX_FIELD: usize = 8 * 1024;
/// A human's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Choice {
    AllowOnce,
    AllowSession,
    Deny,
}

impl Choice {
    /// The command-line spelling (`allow-once`, `allow-session`, `deny`).
    pub fn cli_name(self) -> &'static str {
        match self {
            Choice::AllowOnce => "allow-once",
            Choice::AllowSession => "allow-session",
            Choice::Deny => "deny",
        }
    }
}

impl std::str::FromStr for Choice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow-once" | "allow_once" => Ok(Choice::AllowOnce),
            "allow-session" | "allow_session" => Ok(Choice::AllowSession),
            "deny" => Ok(Choice::Deny),
            other => Err(format!(
                "unknown decision `{other}` (expected allow-once, allow-session or deny)"
            )),
        }
    }
}

/// Why a request left the queue without a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Withdrawal {
    /// The MCP client cancelled the call.
    Cancelled,
    /// Nobody decided in time.
    Expired,
    /// The proxy disconnected (its client or server went away).
    ProxyGone,
    /// No longer pending at a gateway: answered by another approver, withdrawn or expired.
    Settled,
}

impl Withdrawal {
    pub fn describe(self) -> &'static str {
        match self {
            Withdrawal::Cancelled => "cancelled by the client",
            Withdrawal::Expired => "expired without a decision",
            Withdrawal::ProxyGone => "the proxy went away",
            Withdrawal::Settled => "answered elsewhere, withdrawn or expired",
        }
    }
}

/// What a proxy asks about: toolgate's description of the action, never raw arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Question {
    pub server: Option<String>,
    pub tool: String,
    /// The normalised action: operation and paths / argv / host + method / destination.
    pub what: String,
    /// Why toolgate asks.
    pub why: String,
    /// For a tainted or unproven destination: where the value came from.
    pub provenance: Option<String>,
    /// For a changed tool definition: what changed.
    pub changes: Option<String>,
}

impl Question {
    /// Size limits on every field.
    pub fn validate(&self) -> Result<(), String> {
        let fields = [
            ("server", self.server.as_deref()),
            ("tool", Some(self.tool.as_str())),
            ("what", Some(self.what.as_str())),
            ("why", Some(self.why.as_str())),
            ("provenance", self.provenance.as_deref()),
            ("changes", self.changes.as_deref()),
        ];
        for (name, value) in fields {
            if value.is_some_and(|v| v.len() > MAX_FIELD) {
                return Err(format!("`{name}` is longer than {MAX_FIELD} bytes"));
            }
        }
        if self.tool.is_empty() {
            return Err("`tool` is empty".to_owned());
        }
        Ok(())
    }
}

/// A request in the queue, as approvers see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pending {
    /// The broker's id for this request (what `--id` takes).
    pub id: u64,
    pub question: Question,
    /// The agent session the proxy belongs to.
    pub session: Option<String>,
    /// The asking proxy's process id.
    pub proxy_pid: u32,
    /// Unix time in milliseconds when the request arrived / when it expires.
    pub created_ms: u64,
    pub expires_ms: u64,
}

/// Control characters would let a tool description drive the approver's terminal.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
        .take(MAX_FIELD / 4)
        .collect()
}

/// `question` as another person's terminal may show it: control characters blanked, each
/// field cut to a quarter of the protocol's limit.
pub fn question_of(question: &Question) -> Question {
    Question {
        server: question.server.as_deref().map(clean),
        tool: clean(&question.tool),
        what: clean(&question.what),
        why: clean(&question.why),
        provenance: question.provenance.as_deref().map(clean),
        changes: question.changes.as_deref().map(clean),
    }
}

impl Question {
    /// The prompt of a ruling no one is asked about (an allow, a deny): the tool and the
    /// reason.
    pub fn of_deny(server: Option<String>, tool: &str, why: &str) -> Question {
        Question {
            server,
            tool: tool.to_owned(),
            what: tool.to_owned(),
            why: why.to_owned(),
            ..Question::default()
        }
    }

    /// The message shown to the human: what, where, why (and provenance / changes).
    pub fn message(&self) -> String {
        let mut text = format!("toolgate: allow {}?", self.what);
        let server = self.server.as_deref().unwrap_or("the wrapped server");
        text.push_str(&format!("\nTool: {} on {server}", self.tool));
        text.push_str(&format!("\nWhy you are asked: {}", self.why));
        if let Some(p) = &self.provenance {
            text.push_str(&format!("\nWhere the value came from: {p}"));
        }
        if let Some(c) = &self.changes {
            text.push_str(&format!("\nWhat changed: {c}"));
        }
        text
    }
}
