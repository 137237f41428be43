//! Verdicts and the record of how they were reached.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A verdict. Ordered by restrictiveness: `Allow < Ask < Deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    Allow,
    Ask,
    Deny,
}

impl Effect {
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
}
