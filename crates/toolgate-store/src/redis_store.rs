//! [`RedisStore`]: the [`Store`] in Redis (≥ 6.2) or Valkey, shared by every replica.

mod lua;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::StreamExt as _;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError, Script, Value};
use tokio::sync::watch;

use lua::{LUA_ANSWER, LUA_APPEND, LUA_LIST, LUA_NOW, LUA_PREPARE, LUA_PUT, LUA_WRONG};

use crate::store::{
    APPROVALS_MAXLEN, BoxFuture, BudgetAsk, Cursor, PINS_TTL, Prepared, READ_LIMIT, Store,
    StoreError, TAINT_MAXLEN, bounded, hash_hex, millis, ttl_ms,
};

/// Without a notification, a `wait_answer` looks again this often (in case one was lost while
/// the subscriber connection was down).
const FALLBACK_POLL: Duration = Duration::from_secs(2);

/// The [`Store`] in Redis (≥ 6.2) or Valkey: what every replica of a gateway shares.
///
/// One multiplexed connection for commands, made again after it failed (every operation
/// either uses the live connection or makes one connection attempt, all within `timeout`),
/// and one subscriber connection for notifications, kept by a background task. Scripts are
/// sent by hash (`EVALSHA`), and in full only when Redis does not know them yet. The URL may
/// be `redis://`, `rediss://` (TLS, rustls with the platform's roots) or `redis+unix://`.
pub struct RedisStore {
    shared: Arc<Link>,
    scripts: Scripts,
    keys: Keys,
    timeout: Duration,
    session_ttl_ms: u64,
    /// Ends the subscriber task with the store.
    _listener: AbortOnDrop,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.shared.shown)
            .field("namespace", &self.keys.ns)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// What the store and its subscriber task share.
struct Link {
    client: Client,
    config: AsyncConnectionConfig,
    /// The URL without password.
    shown: String,
    /// The live command connection and its generation.
    current: Mutex<Option<(u64, MultiplexedConnection)>>,
    /// One connection attempt at a time.
    connecting: tokio::sync::Mutex<()>,
    generations: AtomicU64,
    /// Bumped on every message on the events channel and on every (re)subscription.
    events: watch::Sender<u64>,
}

struct Scripts {
    prepare: Script,
    append: Script,
    put: Script,
    list: Script,
    answer: Script,
}

struct Keys {
    ns: String,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Keys {
    fn session(&self, session: &str) -> String {
        format!("{}:{{s:{}}}", self.ns, hash_hex(session))
    }
    fn pins(&self, server: &str) -> String {
        format!("{}:pins:{}", self.ns, hash_hex(server))
    }
    fn nonce(&self, nonce: &str) -> String {
        format!("{}:nonce:{}", self.ns, hash_hex(nonce))
    }
    fn pending_prefix(&self) -> String {
        format!("{}:{{pending}}:", self.ns)
    }
    fn pending_index(&self) -> String {
        format!("{}:{{pending}}:index", self.ns)
    }
    fn events(&self) -> String {
        format!("{}:events", self.ns)
    }
}

/// A request of one round trip.
enum Request<'a> {
    Cmd(&'a redis::Cmd),
    Pipe(&'a redis::Pipeline),
    Script(&'a redis::ScriptInvocation<'a>),
}

fn check_namespace(namespace: &str) -> Result<(), StoreError> {
    let why = if namespace.is_empty() {
        "it is empty"
    } else if namespace.len() > 128 {
        "it is longer than 128 bytes"
    } else if !namespace
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
    {
        "it has a character other than letters, digits, `-`, `_`, `.` and `:`"
    } else {
        return Ok(());
    };
    Err(StoreError::BadNamespace {
        namespace: namespace.to_owned(),
        why: why.to_owned(),
    })
}

/// The URL as logs show it: without password (or the whole URL hidden when it does not parse).
fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(None);
            }
            // `redis+unix://` takes its password as `?pass=`.
            if parsed.query_pairs().any(|(name, _)| name == "pass") {
                let kept: Vec<(String, String)> = parsed
                    .query_pairs()
                    .filter(|(name, _)| name != "pass")
                    .map(|(name, value)| (name.into_owned(), value.into_owned()))
                    .collect();
                parsed.set_query(None);
                if !kept.is_empty() {
                    parsed.query_pairs_mut().extend_pairs(kept);
                }
            }
            parsed.to_string().trim_end_matches('/').to_owned()
        }
        Err(_) if !url.contains('@') => url.to_owned(),
        Err(_) => "(unparsable url)".to_owned(),
    }
}

/// `<ms>-<seq>`, the form of a stream entry id.
fn is_entry_id(id: &str) -> bool {
    let mut parts = id.split('-');
    let digits =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    digits(parts.next()) && digits(parts.next()) && parts.next().is_none()
}

/// An error text as this crate's messages are: without Redis's generic `ERR ` code, and
/// with a capitalised first word lower-cased (acronyms such as `OOM` stay).
fn lower_first(text: String) -> String {
    let text = text.strip_prefix("ERR ").map(str::to_owned).unwrap_or(text);
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second))
            if first.is_ascii_uppercase() && !second.is_ascii_uppercase() =>
        {
            format!(
                "{}{}",
                first.to_ascii_lowercase(),
                text.get(1..).unwrap_or_default()
            )
        }
        _ => text,
    }
}

impl RedisStore {
    /// Connects to the Redis at `url` (checking that it answers, within `timeout`) and starts
    /// the subscriber task. `namespace` prefixes every key (letters, digits, `-`, `_`, `.`,
    /// `:`); `session_ttl` is how long an agent session's state lives after its last use.
    ///
    /// Must be called within a tokio runtime. After this, the store reconnects by itself:
    /// while Redis is down every operation fails within `timeout`, and succeeds again once it
    /// is back.
    pub async fn connect(
        url: &str,
        namespace: &str,
        timeout: Duration,
        session_ttl: Duration,
    ) -> Result<RedisStore, StoreError> {
        check_namespace(namespace)?;
        let shown = redact(url);
        let client = Client::open(url).map_err(|e| StoreError::BadUrl {
            url: shown.clone(),
            why: lower_first(e.to_string().replace(" - InvalidClientConfig", "")),
        })?;
        let timeout = bounded(timeout).max(Duration::from_millis(1));
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        let shared = Arc::new(Link {
            client,
            config,
            shown,
            current: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            generations: AtomicU64::new(0),
            events: watch::Sender::new(0),
        });
        let keys = Keys {
            ns: namespace.to_owned(),
        };
        // The subscriber's first subscription bumps `events`; waited for below, so that no
        // wait of this store's first moments wakes for it.
        let mut subscribed = shared.events.subscribe();
        let listener = tokio::spawn(listen(shared.clone(), keys.events(), timeout));
        let store = RedisStore {
            shared,
            scripts: Scripts {
                prepare: Script::new(&format!("{LUA_WRONG}{LUA_PREPARE}")),
                append: Script::new(&format!("{LUA_WRONG}{LUA_APPEND}")),
                put: Script::new(&format!("{LUA_WRONG}{LUA_NOW}{LUA_PUT}")),
                list: Script::new(&format!("{LUA_WRONG}{LUA_NOW}{LUA_LIST}")),
                answer: Script::new(LUA_ANSWER),
            },
            keys,
            timeout,
            session_ttl_ms: millis(session_ttl),
            _listener: AbortOnDrop(listener),
        };
        store.ping().await?;
        let _ = tokio::time::timeout(timeout, subscribed.changed()).await;
        Ok(store)
    }

    /// One round trip, within the timeout. `key`: the key a WRONGTYPE error is about.
    async fn run(&self, request: Request<'_>, key: Option<&str>) -> Result<Value, StoreError> {
        let started = tokio::time::Instant::now();
        let (generation, mut con) =
            match tokio::time::timeout(self.timeout, self.shared.connection()).await {
                Err(_) => return Err(self.timed_out()),
                Ok(Err(e)) => return Err(self.unreachable(&e)),
                Ok(Ok(c)) => c,
            };
        let sent = async {
            match request {
                Request::Cmd(cmd) => cmd.query_async::<Value>(&mut con).await,
                Request::Pipe(pipe) => pipe.query_async::<Value>(&mut con).await,
                Request::Script(script) => script.invoke_async::<Value>(&mut con).await,
            }
        };
        match tokio::time::timeout_at(started + self.timeout, sent).await {
            Err(_) => {
                self.shared.forget(Some(generation));
                Err(self.timed_out())
            }
            Ok(Err(e)) => {
                if e.is_unrecoverable_error() || e.is_io_error() || e.is_timeout() {
                    self.shared.forget(Some(generation));
                }
                Err(self.failure(&e, key))
            }
            Ok(Ok(value)) => Ok(value),
        }
    }

    /// Runs a script and checks its `{'ok', ...}` / `{'bad', key, why}` reply: the values after
    /// `ok`.
    async fn script(&self, script: &redis::ScriptInvocation<'_>) -> Result<Vec<Value>, StoreError> {
        let reply = self.run(Request::Script(script), None).await?;
        let Value::Array(mut items) = reply else {
            return Err(self.unexpected("a script", &reply));
        };
        let tag = items.first().and_then(text);
        match tag.as_deref() {
            Some("ok") => {
                items.remove(0);
                Ok(items)
            }
            Some("bad") => Err(StoreError::BadData {
                store: self.describe(),
                key: items.get(1).and_then(text).unwrap_or_default(),
                why: lower_first(items.get(2).and_then(text).unwrap_or_default()),
            }),
            _ => Err(self.unexpected("a script", &Value::Array(items))),
        }
    }

    fn timed_out(&self) -> StoreError {
        StoreError::Timeout {
            store: self.describe(),
            ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }

    fn unreachable(&self, e: &RedisError) -> StoreError {
        if e.is_timeout() {
            return self.timed_out();
        }
        StoreError::Unreachable {
            store: self.describe(),
            why: lower_first(e.to_string()),
        }
    }

    fn failure(&self, e: &RedisError, key: Option<&str>) -> StoreError {
        if e.is_timeout() {
            return self.timed_out();
        }
        if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
            return self.unreachable(e);
        }
        if let Some(key) = key
            && e.to_string().contains("WRONGTYPE")
        {
            return StoreError::BadData {
                store: self.describe(),
                key: key.to_owned(),
                why: "it holds a value of another type (WRONGTYPE)".to_owned(),
            };
        }
        StoreError::Failed {
            store: self.describe(),
            why: lower_first(e.to_string()),
        }
    }

    fn unexpected(&self, what: &str, reply: &Value) -> StoreError {
        let mut shown = format!("{reply:?}");
        shown.truncate(200);
        StoreError::Failed {
            store: self.describe(),
            why: format!("an unexpected reply to {what}: {shown}"),
        }
    }

    fn bad(&self, key: &str, why: &str) -> StoreError {
        StoreError::BadData {
            store: self.describe(),
            key: key.to_owned(),
            why: why.to_owned(),
        }
    }

    fn range_start(&self, cursor: &str) -> Result<String, StoreError> {
        if cursor.is_empty() {
            Ok("-".to_owned())
        } else if is_entry_id(cursor) {
            Ok(format!("({cursor}"))
        } else {
            Err(StoreError::BadCursor {
                store: self.describe(),
                cursor: cursor.to_owned(),
            })
        }
    }

    /// The entries of an `XRANGE` reply; moves `cursor` to the last one.
    fn entries(
        &self,
        key: &str,
        reply: Option<Value>,
        cursor: &mut String,
    ) -> Result<Vec<String>, StoreError> {
        let not_ours = || self.bad(key, "an entry without its single field `v`");
        let Some(Value::Array(entries)) = reply else {
            return Err(self.unexpected("XRANGE", &reply.unwrap_or(Value::Nil)));
        };
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            let Value::Array(parts) = entry else {
                return Err(not_ours());
            };
            let mut parts = parts.into_iter();
            let (Some(id), Some(Value::Array(fields)), None) = (
                parts.next().as_ref().and_then(text),
                parts.next(),
                parts.next(),
            ) else {
                return Err(not_ours());
            };
            let mut fields = fields.into_iter();
            let (Some(name), Some(value), None) = (fields.next(), fields.next(), fields.next())
            else {
                return Err(not_ours());
            };
            if text(&name).as_deref() != Some("v") {
                return Err(not_ours());
            }
            let Some(value) = text(&value) else {
                return Err(self.bad(key, "an entry that is not UTF-8 text"));
            };
            out.push(value);
            *cursor = id;
        }
        Ok(out)
    }

    fn item_key(&self, id: &str) -> String {
        format!("{}{}", self.keys.pending_prefix(), hash_hex(id))
    }
}

/// A string reply as text (None for other types and for bytes that are not UTF-8).
fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Okay => Some("OK".to_owned()),
        _ => None,
    }
}

fn integer(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Int(n) => u64::try_from(*n).ok(),
        other => text(other)?.parse().ok(),
    }
}

impl Link {
    fn lock(&self) -> MutexGuard<'_, Option<(u64, MultiplexedConnection)>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live connection, or a new one (one attempt).
    async fn connection(&self) -> Result<(u64, MultiplexedConnection), RedisError> {
        if let Some(live) = self.lock().clone() {
            return Ok(live);
        }
        let _turn = self.connecting.lock().await;
        if let Some(live) = self.lock().clone() {
            return Ok(live);
        }
        let con = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        *self.lock() = Some((generation, con.clone()));
        Ok((generation, con))
    }

    /// Drops the connection (of this generation, or whichever is live): the next operation
    /// connects again.
    fn forget(&self, generation: Option<u64>) {
        let mut current = self.lock();
        if generation.is_none() || current.as_ref().map(|(g, _)| *g) == generation {
            *current = None;
        }
    }

    fn bump(&self) {
        self.events.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// The subscriber task: keeps a subscription to the events channel and bumps `events` on
/// every message. When the subscription breaks, Redis most likely went away: the command
/// connection is dropped too, so that the next operation connects afresh instead of failing
/// once on the dead connection.
async fn listen(shared: Arc<Link>, channel: String, timeout: Duration) {
    let mut pause = Duration::from_millis(50);
    loop {
        let subscribed = tokio::time::timeout(timeout, async {
            let mut pubsub = shared.client.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            Ok::<_, RedisError>(pubsub)
        })
        .await;
        if let Ok(Ok(pubsub)) = subscribed {
            pause = Duration::from_millis(50);
            // Whatever was published while we were not subscribed: waiters look again.
            shared.bump();
            let mut messages = pubsub.into_on_message();
            while messages.next().await.is_some() {
                shared.bump();
            }
            shared.forget(None);
            shared.bump();
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(timeout).min(Duration::from_secs(1));
    }
}

impl Store for RedisStore {
    fn prepare<'a>(
        &'a self,
        session: &'a str,
        cursor: &'a Cursor,
        budget: Option<BudgetAsk<'a>>,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Prepared, StoreError>> {
        Box::pin(async move {
            let base = self.keys.session(session);
            let (taint_key, approvals_key, calls_key) = (
                format!("{base}:taint"),
                format!("{base}:approvals"),
                format!("{base}:calls"),
            );
            let mut invocation = self.scripts.prepare.prepare_invoke();
            invocation
                .key(&taint_key)
                .key(&approvals_key)
                .key(&calls_key)
                .arg(self.range_start(&cursor.taint)?)
                .arg(self.range_start(&cursor.approvals)?)
                .arg(self.session_ttl_ms)
                .arg(READ_LIMIT);
            if let Some(ask) = budget {
                invocation.arg(ask.tool);
                if let Some((max, per_ms)) = ask.window {
                    let keep = i128::from(max) + 1;
                    invocation
                        .key(format!("{base}:window:{}", hash_hex(ask.tool)))
                        .arg(now_ms)
                        .arg((i128::from(now_ms) - i128::from(per_ms)).to_string())
                        .arg((-keep - 1).max(i128::from(i64::MIN)).to_string())
                        .arg(self.session_ttl_ms.max(ttl_ms(per_ms)));
                }
            }
            let mut reply = self.script(&invocation).await?.into_iter();
            let mut prepared = Prepared {
                cursor: cursor.clone(),
                ..Prepared::default()
            };
            prepared.taint = self.entries(&taint_key, reply.next(), &mut prepared.cursor.taint)?;
            prepared.approvals =
                self.entries(&approvals_key, reply.next(), &mut prepared.cursor.approvals)?;
            if budget.is_some() {
                let calls = reply.next();
                let within = reply.next();
                match (integer(calls.as_ref()), integer(within.as_ref())) {
                    (Some(calls), Some(within)) => prepared.counts = Some((calls, within)),
                    _ => {
                        return Err(self.unexpected("the budget count", &calls.unwrap_or_default()));
                    }
                }
            }
            Ok(prepared)
        })
    }

    fn append<'a>(
        &'a self,
        session: &'a str,
        taint: &'a [String],
        approvals: &'a [String],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if taint.is_empty() && approvals.is_empty() {
                return Ok(());
            }
            let base = self.keys.session(session);
            let mut invocation = self.scripts.append.prepare_invoke();
            invocation
                .key(format!("{base}:taint"))
                .key(format!("{base}:approvals"))
                .key(format!("{base}:calls"))
                .arg(self.session_ttl_ms)
                .arg(TAINT_MAXLEN)
                .arg(APPROVALS_MAXLEN)
                .arg(taint.len());
            for entry in taint.iter().chain(approvals) {
                invocation.arg(entry);
            }
            self.script(&invocation).await.map(drop)
        })
    }

    fn load_pins<'a>(
        &'a self,
        server: &'a str,
    ) -> BoxFuture<'a, Result<BTreeMap<String, String>, StoreError>> {
        Box::pin(async move {
            let key = self.keys.pins(server);
            let reply = self
                .run(Request::Cmd(redis::cmd("HGETALL").arg(&key)), Some(&key))
                .await?;
            let pairs: Vec<(Value, Value)> = match reply {
                Value::Array(flat) => {
                    let mut flat = flat.into_iter();
                    let mut pairs = Vec::new();
                    while let (Some(name), Some(value)) = (flat.next(), flat.next()) {
                        pairs.push((name, value));
                    }
                    pairs
                }
                Value::Map(pairs) => pairs,
                other => return Err(self.unexpected("HGETALL", &other)),
            };
            pairs
                .into_iter()
                .map(|(name, value)| match (text(&name), text(&value)) {
                    (Some(name), Some(value)) => Ok((name, value)),
                    _ => Err(self.bad(&key, "a field or value that is not UTF-8 text")),
                })
                .collect()
        })
    }

    fn save_pins<'a>(
        &'a self,
        server: &'a str,
        pins: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if pins.is_empty() {
                return Ok(());
            }
            let key = self.keys.pins(server);
            let mut pipe = redis::pipe();
            pipe.atomic()
                .cmd("HSET")
                .arg(&key)
                .arg(pins)
                .ignore()
                .cmd("PEXPIRE")
                .arg(&key)
                .arg(millis(PINS_TTL))
                .ignore();
            self.run(Request::Pipe(&pipe), Some(&key)).await.map(drop)
        })
    }

    fn redeem_once<'a>(
        &'a self,
        nonce: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let key = self.keys.nonce(nonce);
            let mut cmd = redis::cmd("SET");
            cmd.arg(&key)
                .arg(1)
                .arg("NX")
                .arg("PX")
                .arg(crate::store::ttl_ms(ttl_ms));
            match self.run(Request::Cmd(&cmd), Some(&key)).await? {
                Value::Okay => Ok(true),
                Value::Nil => Ok(false),
                other => match text(&other).as_deref() {
                    Some("OK") => Ok(true),
                    _ => Err(self.unexpected("SET NX", &other)),
                },
            }
        })
    }

    fn put_pending<'a>(
        &'a self,
        id: &'a str,
        request_json: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut invocation = self.scripts.put.prepare_invoke();
            invocation
                .key(self.item_key(id))
                .key(self.keys.pending_index())
                .arg(id)
                .arg(request_json)
                .arg(crate::store::ttl_ms(ttl_ms))
                .arg(hash_hex(id))
                .arg(self.keys.events());
            self.script(&invocation).await.map(drop)
        })
    }

    fn list_pending<'a>(&'a self) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>> {
        Box::pin(async move {
            let mut invocation = self.scripts.list.prepare_invoke();
            invocation
                .key(self.keys.pending_index())
                .arg(self.keys.pending_prefix());
            let reply = self.script(&invocation).await?;
            let Some(Value::Array(rows)) = reply.into_iter().next() else {
                return Err(self.unexpected("the pending list", &Value::Nil));
            };
            let mut open = Vec::with_capacity(rows.len());
            for row in rows {
                let fields: Vec<String> = match &row {
                    Value::Array(fields) => fields.iter().filter_map(text).collect(),
                    _ => Vec::new(),
                };
                let [created, id, request] = <[String; 3]>::try_from(fields).map_err(|_| {
                    self.bad(
                        &self.keys.pending_index(),
                        "a pending approval that is not UTF-8 text",
                    )
                })?;
                let Ok(created) = created.parse::<u64>() else {
                    return Err(
                        self.bad(&self.item_key(&id), "a creation time that is not a number")
                    );
                };
                open.push((created, id, request));
            }
            open.sort();
            Ok(open
                .into_iter()
                .map(|(_, id, request)| (id, request))
                .collect())
        })
    }

    fn answer_pending<'a>(
        &'a self,
        id: &'a str,
        answer_json: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let mut invocation = self.scripts.answer.prepare_invoke();
            invocation
                .key(self.item_key(id))
                .arg(answer_json)
                .arg(self.keys.events());
            let reply = self.script(&invocation).await?;
            match integer(reply.first()) {
                Some(recorded) => Ok(recorded == 1),
                None => {
                    Err(self.unexpected("an answer", &reply.into_iter().next().unwrap_or_default()))
                }
            }
        })
    }

    fn wait_answer<'a>(
        &'a self,
        id: &'a str,
        within: Duration,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        Box::pin(async move {
            let key = self.item_key(id);
            let mut cmd = redis::cmd("HMGET");
            cmd.arg(&key).arg("id").arg("answer");
            let deadline = tokio::time::Instant::now() + bounded(within);
            loop {
                // Subscribed before looking, so an answer recorded in between still wakes us.
                let mut changes = self.shared.events.subscribe();
                let reply = self.run(Request::Cmd(&cmd), Some(&key)).await?;
                let Value::Array(fields) = &reply else {
                    return Err(self.unexpected("HMGET", &reply));
                };
                match (fields.first(), fields.get(1)) {
                    (Some(Value::Nil), _) => return Ok(None),
                    (Some(_), Some(Value::Nil)) => {}
                    (Some(_), Some(answer)) => match text(answer) {
                        Some(answer) => return Ok(Some(answer)),
                        None => return Err(self.bad(&key, "an answer that is not UTF-8 text")),
                    },
                    _ => return Err(self.unexpected("HMGET", &reply)),
                }
                let now = tokio::time::Instant::now();
                if now >= deadline {
                    return Ok(None);
                }
                let wake = deadline.min(now + FALLBACK_POLL);
                let _ = tokio::time::timeout_at(wake, changes.changed()).await;
            }
        })
    }

    fn remove_pending<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let index = self.keys.pending_index();
            let mut pipe = redis::pipe();
            pipe.atomic()
                .cmd("DEL")
                .arg(self.item_key(id))
                .ignore()
                .cmd("ZREM")
                .arg(&index)
                .arg(hash_hex(id))
                .ignore()
                .cmd("PUBLISH")
                .arg(self.keys.events())
                .arg("remove")
                .ignore();
            self.run(Request::Pipe(&pipe), Some(&index)).await.map(drop)
        })
    }

    fn wait_pending_change<'a>(
        &'a self,
        within: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut changes = self.shared.events.subscribe();
            let _ = tokio::time::timeout(bounded(within), changes.changed()).await;
            Ok(())
        })
    }

    fn ping<'a>(&'a self) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let reply = self.run(Request::Cmd(&redis::cmd("PING")), None).await?;
            match text(&reply).as_deref() {
                Some("PONG") => Ok(()),
                _ => Err(self.unexpected("PING", &reply)),
            }
        })
    }

    fn describe(&self) -> String {
        self.shared.shown.clone()
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        reason = "tests: a failed expectation should stop the test with its message"
    )]
    use super::*;

    #[test]
    fn urls_are_shown_without_password() {
        assert_eq!(
            redact("redis://:s3cret@10.0.0.1:6380/2"),
            "redis://10.0.0.1:6380/2"
        );
        assert_eq!(
            redact("rediss://app:s3cret@cache:6379"),
            "rediss://app@cache:6379"
        );
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(
            redact("redis+unix:///run/redis.sock?db=1&pass=s3cret"),
            "redis+unix:///run/redis.sock?db=1"
        );
        assert_eq!(
            redact("redis+unix:///run/redis.sock?pass=s3cret"),
            "redis+unix:///run/redis.sock"
        );
        assert_eq!(redact("not a url with:pw@"), "(unparsable url)");
    }

    #[test]
    fn error_texts_are_lower_cased_but_not_acronyms() {
        assert_eq!(
            lower_first("Connection refused".to_owned()),
            "connection refused"
        );
        assert_eq!(
            lower_first("ERR hash value is not an integer".to_owned()),
            "hash value is not an integer"
        );
        assert_eq!(
            lower_first("OOM command not allowed".to_owned()),
            "OOM command not allowed"
        );
        assert_eq!(lower_first("".to_owned()), "");
    }

    #[test]
    fn cursors_and_namespaces_are_checked() {
        assert!(is_entry_id("1733240000000-0"));
        assert!(!is_entry_id("1733240000000"));
        assert!(!is_entry_id("1-2-3"));
        assert!(!is_entry_id("-1"));
        assert!(check_namespace("toolgate:prod-1").is_ok());
        for bad in ["", "a{b}", "a b", "ü"] {
            assert!(check_namespace(bad).is_err(), "{bad}");
        }
    }
}
