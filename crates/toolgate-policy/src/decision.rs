//! Verdicts and the record of how they were reached.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A verdict. Ordered by restrictiveness: `Allow < Ask < Deny`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum Effect {
    Allow,
    Ask,
    Deny,
}

impl Effect {
    /// The word the policy file and the audit use: `allow`, `deny` or `ask`.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Ask => "ask",
            Effect::Deny => "deny",
        }
    }

    /// The more restrictive of two effects.
    pub fn most_restrictive(self, other: Effect) -> Effect {
        self.max(other)
    }
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which contract produced a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Contract {
    Pinning,
    Budget,
    Constraint,
    SinkGate,
    Rule,
    Default,
}

impl Contract {
    /// The name the audit and `explain` use.
    pub fn as_str(self) -> &'static str {
        match self {
            Contract::Pinning => "pinning",
            Contract::Budget => "budget",
            Contract::Constraint => "constraint",
            Contract::SinkGate => "sink_gate",
            Contract::Rule => "rule",
            Contract::Default => "default",
        }
    }
}

impl fmt::Display for Contract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One contributing result: a contract (or a rule) and what it said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractResult {
    pub contract: Contract,
    pub effect: Effect,
    /// The rule id for `Contract::Rule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// A sentence for a person and a model, e.g. "`/home/u/.ssh/id_rsa` matches deny rule
    /// `protect-secrets`".
    pub reason: String,
    /// For the sink gate: every sink value that was checked, with its verdict and where it
    /// came from (for explain and for the approval prompt). Empty for other contracts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sinks: Vec<SinkFinding>,
}

impl ContractResult {
    /// A result without a rule id and without sink findings.
    pub fn new(contract: Contract, effect: Effect, reason: impl Into<String>) -> Self {
        ContractResult {
            contract,
            effect,
            rule: None,
            reason: reason.into(),
            sinks: Vec::new(),
        }
    }
}

/// How the sink gate judged one destination value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SinkVerdict {
    /// Matches a `trusted_destinations` entry.
    Trusted,
    /// The human approved this destination for the session.
    Approved,
    /// Seen in a trusted tool output (`output: trusted`).
    Vouched,
    /// Seen only in untrusted tool output: an injected destination.
    Tainted,
    /// Neither trusted nor seen anywhere: a human must decide.
    Unproven,
    /// A destination argument that is present but holds no usable destination (`null`,
    /// `true`, `""`, `{}`, or a list holding one): what the server makes of it is unknown,
    /// so a human must decide. Never approved for the session.
    Unusable,
    /// Matched by one of the user's own allow rules (a `net.request` rule that names its
    /// hosts, and the method): the user trusts it. The rule is in `trusted_by_rule`.
    AllowedByRule,
    /// The user typed this destination in a prompt of the agent session (a client hook
    /// vouched for it): it passes even when untrusted output repeats it.
    UserVouched,
}

impl SinkVerdict {
    /// The name the audit and `explain` use.
    pub fn as_str(self) -> &'static str {
        match self {
            SinkVerdict::Trusted => "trusted",
            SinkVerdict::Approved => "approved",
            SinkVerdict::Vouched => "vouched",
            SinkVerdict::Tainted => "tainted",
            SinkVerdict::Unproven => "unproven",
            SinkVerdict::Unusable => "unusable",
            SinkVerdict::AllowedByRule => "allowed_by_rule",
            SinkVerdict::UserVouched => "user_vouched",
        }
    }
}

/// One checked sink value of an exfiltrating tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkFinding {
    /// Where the value sits in the arguments, e.g. `cc[1]` or `recipients[0].email`.
    pub argument: String,
    /// The raw value (truncated for display by the caller if needed).
    pub value: String,
    /// The canonical destination the value stands for (lower case, decoded, …).
    pub destination: String,
    pub verdict: SinkVerdict,
    /// The tool output that vouched for or tainted the value: server, tool and sequence number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_seq: Option<u64>,
    /// For [`SinkVerdict::AllowedByRule`]: the id of the allow rule that matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted_by_rule: Option<String>,
}
