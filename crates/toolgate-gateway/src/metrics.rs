//! The gateway's Prometheus metrics (`GET /metrics`, text exposition format).

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Decision {
    server: String,
    effect: String,
    contract: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Method {
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Status {
    status: String,
}

/// Every metric the gateway exports.
pub struct Metrics {
    registry: Registry,
    decisions: Family<Decision, Counter>,
    latency: Family<Method, Histogram>,
    store: Family<Outcome, Counter>,
    sessions: Gauge<i64, std::sync::atomic::AtomicI64>,
    auth: Family<Status, Counter>,
    _unused: Option<Counter<u64, AtomicU64>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    pub fn new(replica: &str) -> Metrics {
        let mut registry = Registry::with_prefix_and_labels(
            "toolgate_gateway",
            [(
                std::borrow::Cow::Borrowed("replica"),
                std::borrow::Cow::Owned(replica.to_owned()),
            )]
            .into_iter(),
        );
        let decisions = Family::<Decision, Counter>::default();
        registry.register(
            "decisions",
            "Tool call decisions by server, effect and deciding contract",
            decisions.clone(),
        );
        let latency = Family::<Method, Histogram>::new_with_constructor(|| {
            // 50 µs to about 26 s.
            Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
        });
        registry.register(
            "request_seconds",
            "Time from a request's arrival to its response, by MCP method",
            latency.clone(),
        );
        let store = Family::<Outcome, Counter>::default();
        registry.register(
            "store_round_trips",
            "Round trips to the state store, by outcome (ok, error)",
            store.clone(),
        );
        let sessions = Gauge::<i64, std::sync::atomic::AtomicI64>::default();
        registry.register(
            "sessions",
            "Sessions held by this replica",
            sessions.clone(),
        );
        let auth = Family::<Status, Counter>::default();
        registry.register(
            "auth_refusals",
            "Requests refused by authentication (401) or authorization (403)",
            auth.clone(),
        );
        Metrics {
            registry,
            decisions,
            latency,
            store,
            sessions,
            auth,
            _unused: None,
        }
    }

    pub fn decision(&self, server: &str, effect: &str, contract: &str) {
        self.decisions
            .get_or_create(&Decision {
                server: server.to_owned(),
                effect: effect.to_owned(),
                contract: contract.to_owned(),
            })
            .inc();
    }

    pub fn request(&self, method: &str, seconds: f64) {
        // Only methods of the protocol are labels: a client cannot grow the series.
        let method = match method {
            "initialize" | "tools/call" | "tools/list" | "resources/read" | "resources/list"
            | "prompts/get" | "prompts/list" | "ping" | "server/discover" => method,
            _ => "other",
        };
        self.latency
            .get_or_create(&Method {
                method: method.to_owned(),
            })
            .observe(seconds);
    }

    pub fn store_round_trip(&self, ok: bool) {
        self.store
            .get_or_create(&Outcome {
                outcome: if ok { "ok" } else { "error" }.to_owned(),
            })
            .inc();
    }

    pub fn sessions(&self, n: usize) {
        self.sessions.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub fn refused(&self, status: u16) {
        self.auth
            .get_or_create(&Status {
                status: status.to_string(),
            })
            .inc();
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
