//! One gateway session's share of its agent session's state in the store: what the
//! enforcer imports before each decision and what it offers after each output.
//!
//! - Before a `tools/call` is handed to the relay, [`StoreShare::prepare`] makes ONE round
//!   trip: what other sessions and replicas appended since this session last read (taint
//!   tokens, session approvals), and, for a budgeted tool, the attempt counted atomically.
//!   The backend imports it when it decides. If the store cannot be read, the call is
//!   denied before it reaches the relay ([`toolgate_runtime::enforce::Enforcer::deny_undecidable`]).
//! - What an output taints is indexed before the output is delivered (the enforcer's
//!   `index_before_delivery`), queued here, and written by [`StoreShare::flush`] before the
//!   response leaves the gateway. If it cannot be written, the response is withheld: no other
//!   replica may decide on state that misses it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use toolgate_store::{BudgetAsk, Cursor, Store, StoreError};

use toolgate_runtime::enforce::share::SessionShare;
use toolgate_runtime::enforce::share::TaintToken;
use toolgate_runtime::proxy::StartFuture;

use super::metrics::Metrics;

#[derive(Debug, Default)]
struct Mailbox {
    cursor: Cursor,
    tokens_in: Vec<TaintToken>,
    approvals_in: Vec<String>,
    counts: HashMap<String, (u64, u64)>,
    tokens_out: Vec<String>,
    approvals_out: Vec<String>,
    known_approvals: HashSet<String>,
    tools_changed: bool,
}

/// The prefix of an entry of the approvals stream that says the server's tools changed.
const TOOLS_CHANGED: &str = "!tools-changed ";
/// The prefix of an entry of the approvals stream that says a session was ended (`DELETE`):
/// `!closed <session id>`. Every replica that holds or would resume it ends it.
const CLOSED: &str = "!closed ";

/// The store side of one session.
#[derive(Debug)]
pub struct StoreShare {
    store: Arc<dyn Store>,
    /// The agent session (the store's key).
    agent: String,
    /// The server whose pins this session shares.
    server: String,
    /// This MCP session's own id.
    session_id: String,
    /// Set once a `!closed` entry for this session was read.
    closed: std::sync::atomic::AtomicBool,
    state: Mutex<Mailbox>,
    metrics: Arc<Metrics>,
}

fn lock(m: &Mutex<Mailbox>) -> MutexGuard<'_, Mailbox> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Most tokens or approvals taken from one read (the rest come with the next).
const MAX_IMPORT: usize = 100_000;

impl StoreShare {
    pub fn new(
        store: Arc<dyn Store>,
        agent: String,
        server: String,
        session_id: String,
        metrics: Arc<Metrics>,
    ) -> StoreShare {
        StoreShare {
            store,
            agent,
            server,
            session_id,
            closed: std::sync::atomic::AtomicBool::new(false),
            state: Mutex::new(Mailbox::default()),
            metrics,
        }
    }

    /// Reads what was appended since the last read; with `budget` (a tool and its window),
    /// counts one attempt of it. One round trip.
    pub async fn prepare(
        &self,
        budget: Option<(&str, Option<(u64, u64)>)>,
    ) -> Result<(), StoreError> {
        let cursor = lock(&self.state).cursor.clone();
        let ask = budget.map(|(tool, window)| BudgetAsk { tool, window });
        let result = self
            .store
            .prepare(&self.agent, &cursor, ask, now_ms())
            .await;
        self.metrics.store_round_trip(result.is_ok());
        let prepared = result?;
        let mut st = lock(&self.state);
        for entry in prepared.taint {
            match serde_json::from_str::<TaintToken>(&entry) {
                Ok(t) if t.token.len() <= toolgate_runtime::enforce::share::MAX_TOKEN_LEN => {
                    if st.tokens_in.len() < MAX_IMPORT {
                        st.tokens_in.push(t);
                    }
                }
                // Not ours (someone wrote under our keys): nothing is learnt from it, and it
                // cannot make anything pass.
                _ => tracing::warn!(
                    "the state store holds an unreadable taint entry for agent session `{}`; ignored",
                    self.agent
                ),
            }
        }
        for key in prepared.approvals {
            // Our own entries come back too: known, skipped.
            if !st.known_approvals.insert(key.clone()) {
                continue;
            }
            if let Some(id) = key.strip_prefix(CLOSED) {
                if id == self.session_id {
                    self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            } else if key.starts_with(TOOLS_CHANGED) {
                st.tools_changed = true;
            } else if st.approvals_in.len() < MAX_IMPORT {
                st.approvals_in.push(key);
            }
        }
        if let (Some((tool, _)), Some(counts)) = (budget, prepared.counts) {
            st.counts.insert(tool.to_owned(), counts);
        }
        st.cursor = prepared.cursor;
        Ok(())
    }

    /// True once the session was ended (`DELETE`) through any replica.
    pub fn closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Writes what this session queued (taint tokens, approvals); nothing to write: no
    /// round trip.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let (tokens, approvals) = {
            let mut st = lock(&self.state);
            (
                std::mem::take(&mut st.tokens_out),
                std::mem::take(&mut st.approvals_out),
            )
        };
        if tokens.is_empty() && approvals.is_empty() {
            return Ok(());
        }
        let result = self.store.append(&self.agent, &tokens, &approvals).await;
        self.metrics.store_round_trip(result.is_ok());
        if result.is_err() {
            // Kept for the next flush: they are still owed to the other replicas.
            let mut st = lock(&self.state);
            let mut t = tokens;
            t.append(&mut st.tokens_out);
            st.tokens_out = t;
            let mut a = approvals;
            a.append(&mut st.approvals_out);
            st.approvals_out = a;
        }
        result
    }
}

impl SessionShare for StoreShare {
    fn join(&self, within: Duration) -> StartFuture<'_> {
        Box::pin(async move {
            match tokio::time::timeout(within, self.prepare(None)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!("{e}; calls are denied until it answers"),
                Err(_) => tracing::warn!(
                    "the state store did not answer within {} ms; calls are denied until it does",
                    within.as_millis()
                ),
            }
        })
    }

    fn take_tokens(&self) -> Vec<TaintToken> {
        std::mem::take(&mut lock(&self.state).tokens_in)
    }

    fn take_approvals(&self) -> Vec<String> {
        std::mem::take(&mut lock(&self.state).approvals_in)
    }

    fn counted(&self, tool: &str) -> Option<(u64, u64)> {
        lock(&self.state).counts.remove(tool)
    }

    fn share_tokens(&self, tokens: Vec<TaintToken>) {
        let mut st = lock(&self.state);
        for t in tokens {
            if let Ok(entry) = serde_json::to_string(&t) {
                st.tokens_out.push(entry);
            }
        }
    }

    fn share_approvals(&self, keys: Vec<String>) {
        let mut st = lock(&self.state);
        for key in keys {
            if st.known_approvals.insert(key.clone()) {
                st.approvals_out.push(key);
            }
        }
    }

    fn share_tools_changed(&self, tools: &[String]) {
        let mut nonce = [0u8; 8];
        let _ = getrandom::fill(&mut nonce);
        let entry = format!(
            "{TOOLS_CHANGED}{} {} {}",
            now_ms(),
            hex::encode(nonce),
            serde_json::to_string(tools).unwrap_or_default()
        );
        let mut st = lock(&self.state);
        st.known_approvals.insert(entry.clone());
        st.approvals_out.push(entry);
    }

    fn take_tools_changed(&self) -> bool {
        std::mem::take(&mut lock(&self.state).tools_changed)
    }

    fn pins_accepted(&self, pins: &BTreeMap<String, Value>) {
        let defs: BTreeMap<String, String> = pins
            .iter()
            .filter_map(|(k, v)| serde_json::to_string(v).ok().map(|v| (k.clone(), v)))
            .collect();
        let store = Arc::clone(&self.store);
        let server = self.server.clone();
        let metrics = Arc::clone(&self.metrics);
        // Off the call path: the session enforces its own pins meanwhile.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let result = store.save_pins(&server, &defs).await;
                metrics.store_round_trip(result.is_ok());
                if let Err(e) = result {
                    tracing::warn!("the pins of `{server}` were not saved: {e}");
                }
            });
        }
    }
}

use toolgate_runtime::clock::now_ms;
