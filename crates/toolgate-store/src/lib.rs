//! Stub of the store API (replaced at merge).
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cursor {
    pub taint: String,
    pub approvals: String,
}

#[derive(Debug, Clone, Copy)]
pub struct BudgetAsk<'a> {
    pub tool: &'a str,
    pub window: Option<(u64, u64)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prepared {
    pub taint: Vec<String>,
    pub approvals: Vec<String>,
    pub cursor: Cursor,
    pub counts: Option<(u64, u64)>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the state store `{store}` is unreachable: {why}")]
    Unreachable { store: String, why: String },
}

pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    fn prepare<'a>(
        &'a self,
        session: &'a str,
        cursor: &'a Cursor,
        budget: Option<BudgetAsk<'a>>,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Prepared, StoreError>>;
    fn append<'a>(
        &'a self,
        session: &'a str,
        taint: &'a [String],
        approvals: &'a [String],
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn load_pins<'a>(
        &'a self,
        server: &'a str,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, StoreError>>;
    fn save_pins<'a>(
        &'a self,
        server: &'a str,
        pins: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn redeem_once<'a>(
        &'a self,
        nonce: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    fn put_pending<'a>(
        &'a self,
        id: &'a str,
        request_json: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn list_pending<'a>(&'a self) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>>;
    fn answer_pending<'a>(
        &'a self,
        id: &'a str,
        answer_json: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    fn wait_answer<'a>(
        &'a self,
        id: &'a str,
        within: Duration,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>>;
    fn remove_pending<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;
    fn wait_pending_change<'a>(&'a self, within: Duration)
    -> BoxFuture<'a, Result<(), StoreError>>;
    fn ping<'a>(&'a self) -> BoxFuture<'a, Result<(), StoreError>>;
    fn describe(&self) -> String;
}

#[derive(Debug, Default)]
struct Mem {
    taint: HashMap<String, Vec<String>>,
    approvals: HashMap<String, Vec<String>>,
    counts: HashMap<(String, String), Vec<u64>>,
    pins: HashMap<String, BTreeMap<String, String>>,
    nonces: std::collections::HashSet<String>,
}

#[derive(Debug, Default)]
pub struct MemoryStore {
    mem: Mutex<Mem>,
}

impl MemoryStore {
    pub fn new(_ttl: Duration) -> MemoryStore {
        MemoryStore::default()
    }
}

fn after(list: &[String], cursor: &str) -> (Vec<String>, String) {
    let from: usize = cursor.parse().unwrap_or(0);
    (
        list.get(from..).unwrap_or_default().to_vec(),
        list.len().to_string(),
    )
}

impl Store for MemoryStore {
    fn prepare<'a>(
        &'a self,
        session: &'a str,
        cursor: &'a Cursor,
        budget: Option<BudgetAsk<'a>>,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Prepared, StoreError>> {
        let mut m = self.mem.lock().unwrap_or_else(|p| p.into_inner());
        let (taint, tc) = after(
            m.taint.get(session).map(Vec::as_slice).unwrap_or_default(),
            &cursor.taint,
        );
        let (approvals, ac) = after(
            m.approvals
                .get(session)
                .map(Vec::as_slice)
                .unwrap_or_default(),
            &cursor.approvals,
        );
        let counts = budget.map(|b| {
            let v = m
                .counts
                .entry((session.to_owned(), b.tool.to_owned()))
                .or_default();
            v.push(now_ms);
            let total = v.len() as u64;
            let win = b.window.map_or(0, |(_, per)| {
                v.iter()
                    .filter(|t| **t > now_ms.saturating_sub(per))
                    .count() as u64
            });
            (total, win)
        });
        Box::pin(std::future::ready(Ok(Prepared {
            taint,
            approvals,
            cursor: Cursor {
                taint: tc,
                approvals: ac,
            },
            counts,
        })))
    }
    fn append<'a>(
        &'a self,
        session: &'a str,
        taint: &'a [String],
        approvals: &'a [String],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut m = self.mem.lock().unwrap_or_else(|p| p.into_inner());
        m.taint
            .entry(session.to_owned())
            .or_default()
            .extend_from_slice(taint);
        m.approvals
            .entry(session.to_owned())
            .or_default()
            .extend_from_slice(approvals);
        Box::pin(std::future::ready(Ok(())))
    }
    fn load_pins<'a>(
        &'a self,
        server: &'a str,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, StoreError>> {
        let m = self.mem.lock().unwrap_or_else(|p| p.into_inner());
        Box::pin(std::future::ready(Ok(m
            .pins
            .get(server)
            .cloned()
            .unwrap_or_default())))
    }
    fn save_pins<'a>(
        &'a self,
        server: &'a str,
        pins: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut m = self.mem.lock().unwrap_or_else(|p| p.into_inner());
        m.pins
            .entry(server.to_owned())
            .or_default()
            .extend(pins.clone());
        Box::pin(std::future::ready(Ok(())))
    }
    fn redeem_once<'a>(
        &'a self,
        nonce: &'a str,
        _ttl_ms: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let mut m = self.mem.lock().unwrap_or_else(|p| p.into_inner());
        Box::pin(std::future::ready(Ok(m.nonces.insert(nonce.to_owned()))))
    }
    fn put_pending<'a>(
        &'a self,
        _id: &'a str,
        _request_json: &'a str,
        _ttl_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }
    fn list_pending<'a>(&'a self) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }
    fn answer_pending<'a>(
        &'a self,
        _id: &'a str,
        _answer_json: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(std::future::ready(Ok(false)))
    }
    fn wait_answer<'a>(
        &'a self,
        _id: &'a str,
        within: Duration,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        Box::pin(async move {
            tokio::time::sleep(within).await;
            Ok(None)
        })
    }
    fn remove_pending<'a>(&'a self, _id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }
    fn wait_pending_change<'a>(
        &'a self,
        within: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            tokio::time::sleep(within).await;
            Ok(())
        })
    }
    fn ping<'a>(&'a self) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }
    fn describe(&self) -> String {
        "memory".to_owned()
    }
}
