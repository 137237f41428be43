//! What one proxy shares with the other proxies of its agent session: the seam between the
//! enforcer and where the shared state lives (the local broker for `wrap`, the gateway's
//! store for `toolgate gateway`).
//!
//! The backend imports what others shared before it decides (`take_*`), and offers what it
//! saw (`share_*`). The state itself is the policy session's; this trait only moves it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::broker::BrokerChannel;
use crate::broker::proto::TaintToken;
use crate::proxy::StartFuture;

/// The shared side of one agent session.
pub trait SessionShare: Send + Sync + std::fmt::Debug {
    /// Called once before the relay carries anything: receive what the session's other
    /// proxies shared so far (bounded by `within`).
    fn join(&self, within: Duration) -> StartFuture<'_>;
    /// Called before each decision: a chance to (re)connect in the background.
    fn kick(&self) {}
    /// Taint tokens other proxies saw, not yet imported.
    fn take_tokens(&self) -> Vec<TaintToken>;
    /// Session approval keys other proxies recorded, not yet imported.
    fn take_approvals(&self) -> Vec<String>;
    /// Budget attempts other proxies counted (tool, time), not yet imported.
    fn take_attempts(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    /// Digests of destinations the user typed (client hooks), not yet imported.
    fn take_vouched(&self) -> Vec<[u8; 32]> {
        Vec::new()
    }
    /// The attempt counts of `tool` (this session's total, and within the budget window,
    /// this attempt included) when the shared state counted this attempt itself (atomically,
    /// across replicas); the local count is then not used.
    fn counted(&self, _tool: &str) -> Option<(u64, u64)> {
        None
    }
    /// Offers the destination tokens an output added.
    fn share_tokens(&self, tokens: Vec<TaintToken>);
    /// Offers the session's approval keys (all of them; known ones are skipped).
    fn share_approvals(&self, keys: Vec<String>);
    /// Offers one counted attempt of a budgeted tool.
    fn share_attempt(&self, _tool: &str, _at_ms: u64) {}
    /// The accepted tool definitions changed (pins shared by every session of a server).
    fn pins_accepted(&self, _pins: &BTreeMap<String, Value>) {}
    /// A listing of the server showed these tools changed (a rug pull): the agent session's
    /// other proxies must not trust their own listings until they list again.
    fn share_tools_changed(&self, _tools: &[String]) {}
    /// True once when another proxy of the session saw the server's tools change.
    fn take_tools_changed(&self) -> bool {
        false
    }
}

/// The local approval broker as the share of `toolgate wrap`.
#[derive(Debug)]
pub struct BrokerShare(pub Arc<BrokerChannel>);

impl SessionShare for BrokerShare {
    fn join(&self, within: Duration) -> StartFuture<'_> {
        Box::pin(async move { self.0.join_session(within).await })
    }
    fn kick(&self) {
        self.0.kick();
    }
    fn take_tokens(&self) -> Vec<TaintToken> {
        self.0.take_shared()
    }
    fn take_approvals(&self) -> Vec<String> {
        self.0.take_approvals()
    }
    fn take_attempts(&self) -> Vec<(String, u64)> {
        self.0.take_attempts()
    }
    fn take_vouched(&self) -> Vec<[u8; 32]> {
        self.0.take_vouched()
    }
    fn share_tokens(&self, tokens: Vec<TaintToken>) {
        self.0.share(tokens);
    }
    fn share_approvals(&self, keys: Vec<String>) {
        self.0.share_approvals(keys);
    }
    fn share_attempt(&self, tool: &str, at_ms: u64) {
        self.0.share_attempt(tool, at_ms);
    }
}
