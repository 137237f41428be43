//! The engine, session and calls that the policy crate's decision tests share: the
//! workspace is `/w`, the home `/home/u`, and calls come from the server `srv`.
#![allow(
    dead_code,
    clippy::unwrap_used,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; helpers shared by several tests, not every one uses every helper"
)]

use serde_json::Value;
use toolgate_policy::{
    Action, Decision, Engine, FsFacts, NormalizeContext, Session, SessionLimits, TaintLimits,
    ToolCall, Vars, load, normalize,
};

/// The engine of the policy text `src`.
pub fn engine(src: &str) -> Engine {
    Engine::new(
        load(src, "p.yaml").unwrap().policy,
        Vars {
            workspace: "/w".into(),
            home: "/home/u".into(),
        },
    )
    .unwrap()
}

/// A fresh session with default taint bounds; `pinning: false` for calls that are about
/// their arguments, not about listing.
pub fn session(pinning: bool) -> Session {
    let mut limits = SessionLimits::new(TaintLimits::default());
    limits.pinning = pinning;
    Session::new(limits)
}

fn context(fs: &dyn FsFacts) -> NormalizeContext<'_> {
    NormalizeContext {
        workspace: "/w",
        home: "/home/u",
        fs,
    }
}

/// `e`'s decision on `srv`'s call of `tool` with `args`.
pub fn decide(e: &Engine, s: &mut Session, fs: &dyn FsFacts, tool: &str, args: &Value) -> Decision {
    let call = ToolCall {
        server: Some("srv"),
        tool,
        arguments: args,
        definition: None,
    };
    e.decide(&call, s, &context(fs), 0)
}

/// The action a call of `tool` with `args` from `server` normalises to.
pub fn normalized(fs: &dyn FsFacts, server: Option<&str>, tool: &str, args: &Value) -> Action {
    let call = ToolCall {
        server,
        tool,
        arguments: args,
        definition: None,
    };
    normalize(&call, None, &context(fs))
}
