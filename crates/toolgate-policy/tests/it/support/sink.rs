//! The sink gate of one call, with the built-in packs under a user's `tools:` entries.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a policy that does not compile or a call the gate skips fails the test"
)]

use std::collections::BTreeMap;

use serde_json::Value;
use toolgate_policy::contracts::{Contracts, ToolContract};
use toolgate_policy::{
    Action, Contract, ContractResult, Operation, Part, Session, SessionLimits, TaintLimits,
    ToolCall,
};

/// A session with pinning off (the calls carry no tool definitions).
pub fn session() -> Session {
    let mut limits = SessionLimits::new(TaintLimits::default());
    limits.pinning = false;
    Session::new(limits)
}

/// The contracts of a `tools:` mapping (YAML) over every built-in pack.
pub fn contracts(yaml: &str) -> Contracts {
    let user: BTreeMap<String, ToolContract> = serde_saphyr::from_str(yaml).unwrap();
    Contracts::compile(&user, &toolgate_policy::contracts::packs::pack_names()).unwrap()
}

/// The sink gate's result for one call of `tool` (which must be exfiltrating).
pub fn sink_gate(c: &Contracts, s: &mut Session, tool: &str, args: &Value) -> ContractResult {
    let call = ToolCall {
        server: None,
        tool,
        arguments: args,
        definition: None,
    };
    let action = Action {
        server: None,
        tool: tool.to_owned(),
        parts: vec![Part::new(Operation::Unknown)],
    };
    c.check(&call, &action, s, 0)
        .into_iter()
        .find(|r| r.contract == Contract::SinkGate)
        .expect("the tool is exfiltrating: the sink gate runs")
}
