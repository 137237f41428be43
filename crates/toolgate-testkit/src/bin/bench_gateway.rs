//! `bench_gateway`: `toolgate gateway` under load (issue: the gateway's performance targets).
//!
//! Everything on loopback, in one run, against the release `toolgate`:
//!
//! - **upstream**: a minimal, fast Streamable HTTP MCP server in this process, on its own
//!   thread (`initialize` with a session id of its own per session, 202 for notifications,
//!   `tools/list`, `tools/call` of `echo` answered with a JSON body). The gateway serves it as
//!   the `url:` server `echo`: no child processes, so the gateway's own memory and CPU are
//!   what is measured. The stdio variant serves `bench_upstream` as the server `stdio` (one
//!   child per session).
//! - **load generator**: tokio, one reqwest client (HTTP/1.1 keep-alive pool) per replica.
//!   Sessions are opened (`initialize`, `notifications/initialized`) with 64 in flight; each
//!   active session sends `tools/list` once to every replica it will use, then `tools/call`
//!   of `echo` in a closed loop (one in flight per session) for `--warmup` + `--duration`
//!   seconds; a call counts when it starts after the warm-up and ends before the deadline.
//!   Every reply is checked (HTTP 200, a JSON-RPC result, not `isError`).
//! - **one replica**: VmRSS of the gateway after one warm-up session, then after `--sessions`
//!   more idle sessions (the difference divided by their number is the memory per idle
//!   session); then `--active` of them call in the closed loop: calls/s, p50, p99; the
//!   gateway's `toolgate_gateway_store_round_trips_total` and its CPU time (`/proc/PID/stat`)
//!   before and after: round trips and CPU per call.
//! - **store**: with `--store redis` (the default when `redis-server` is installed) the bench
//!   starts a `redis-server` on a free loopback port (the testkit's `RedisServer`) and every
//!   gateway uses it (`store.url`); `--redis URL` names one already running; `--store memory`:
//!   each gateway its own in-memory store. The Redis server's CPU per call is reported.
//! - **two replicas**: two gateways with the same secret and the same store, sessions opened
//!   alternately on each, and every active session alternating its requests between the two
//!   (the first request on the other replica resumes the session there: timed apart).
//! - **paced** (`--rate`, default 5 000 calls/s): the same active sessions send on a schedule
//!   that adds up to that rate (achieved rate reported): the latency at a
//!   given load, where the closed loop gives the latency at saturation (Little's law: 200
//!   calls always in flight take 200 ÷ throughput each).
//! - **stdio**: `--stdio-sessions` sessions of the `stdio` server, all active.
//! - **one call at a time** (latency added per call): a direct HTTP client to the upstream, the
//!   gateway (one session), `toolgate wrap --url` to the same upstream, `bench_upstream`
//!   directly over stdio, `toolgate wrap -- bench_upstream`, and the gateway's `stdio` server.
//!
//! Each replica runs with an allow-all policy (`default: allow`) and an audit log in a temp
//! dir, as a deployment does. The tables give medians over `--rounds` (with min–max).
//!
//! Usage: `bench_gateway [--toolgate PATH] [--bench-upstream PATH] [--sessions N]
//! [--active N] [--duration S] [--warmup S] [--stdio-sessions N] [--seq-calls N] [--rounds R]
//! [--client-threads N] [--rate CALLS_PER_S] [--store auto|redis|memory]
//! [--redis redis://HOST:PORT] [--only PHASES]
//! [--upstream-init-delay-ms MS] [--keep]` (`--keep`: leave the temp dir with the configs,
//! the gateways' logs and audit logs, and print where it is)

// A measuring tool, not library code: indexing of sorted samples, printing tables.
#![allow(
    clippy::indexing_slicing,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a benchmark tool: a failed setup step aborts the run with a message; a benchmark tool: its report is printed; statistics over counts and durations, far from the limits of the types"
)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use sha2::Digest as _;

const USAGE: &str = "bench_gateway [--toolgate PATH] [--bench-upstream PATH] [--sessions N] [--active N] [--duration S] [--warmup S] [--stdio-sessions N] [--seq-calls N] [--rounds R] [--client-threads N] [--rate CALLS_PER_S, 0: off] [--store auto|redis|memory] [--redis URL] [--only one,two,stdio,seq] [--upstream-init-delay-ms MS] [--keep]";

const TOKEN: &str = "bench-token-0123456789abcdef";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bench_gateway: {err:#}");
            ExitCode::from(1)
        }
    }
}

#[derive(Debug, Clone)]
struct Options {
    toolgate: PathBuf,
    bench_upstream: PathBuf,
    sessions: usize,
    active: usize,
    duration: Duration,
    warmup: Duration,
    stdio_sessions: usize,
    seq_calls: usize,
    rounds: usize,
    client_threads: usize,
    redis: Option<String>,
    only: Vec<String>,
    rate: Option<f64>,
    keep: bool,
    /// `redis` (a `redis-server` the bench starts), `memory`, or `auto` (Redis when installed).
    store: String,
}

impl Options {
    fn runs(&self, phase: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|p| p == phase)
    }
}

fn parse_options() -> anyhow::Result<Options> {
    let dir = std::env::current_exe()?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut o = Options {
        toolgate: dir.join("toolgate"),
        bench_upstream: dir.join("bench_upstream"),
        sessions: 1000,
        active: 200,
        duration: Duration::from_secs(5),
        warmup: Duration::from_secs(2),
        stdio_sessions: 50,
        seq_calls: 2000,
        rounds: 1,
        client_threads: 1,
        redis: None,
        only: Vec::new(),
        rate: Some(5000.0),
        keep: false,
        store: "auto".to_owned(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--keep" {
            o.keep = true;
            continue;
        }
        if arg == "--help" || arg == "-h" {
            println!("usage: {USAGE}");
            std::process::exit(0);
        }
        let value = args
            .next()
            .with_context(|| format!("`{arg}` needs a value\nusage: {USAGE}"))?;
        let secs =
            |v: &str| -> anyhow::Result<Duration> { Ok(Duration::from_secs_f64(v.parse()?)) };
        match arg.as_str() {
            "--toolgate" => o.toolgate = value.into(),
            "--bench-upstream" => o.bench_upstream = value.into(),
            "--sessions" => o.sessions = value.parse()?,
            "--active" => o.active = value.parse()?,
            "--duration" => o.duration = secs(&value)?,
            "--warmup" => o.warmup = secs(&value)?,
            "--stdio-sessions" => o.stdio_sessions = value.parse()?,
            "--seq-calls" => o.seq_calls = value.parse()?,
            "--rounds" => o.rounds = value.parse::<usize>()?.max(1),
            "--client-threads" => o.client_threads = value.parse::<usize>()?.max(1),
            "--redis" => o.redis = Some(value),
            "--store" => o.store = value,
            "--rate" => o.rate = Some(value.parse::<f64>()?).filter(|r| *r > 0.0),
            "--upstream-init-delay-ms" => INIT_DELAY_MS.store(value.parse()?, Ordering::Relaxed),
            "--only" => o.only = value.split(',').map(str::to_owned).collect(),
            _ => anyhow::bail!("unknown argument `{arg}`\nusage: {USAGE}"),
        }
    }
    anyhow::ensure!(
        o.active <= o.sessions,
        "`--active` ({}) must not exceed `--sessions` ({})",
        o.active,
        o.sessions
    );
    Ok(o)
}

// --- the upstream ----------------------------------------------------------------------

static UPSTREAM_SESSIONS: AtomicU64 = AtomicU64::new(0);
/// `--upstream-init-delay-ms`: how long the upstream takes to answer `initialize` (a server
/// that starts slowly), to see how session opening and resuming behave then.
static INIT_DELAY_MS: AtomicU64 = AtomicU64::new(0);
static UPSTREAM_TID: AtomicI32 = AtomicI32::new(0);

async fn mcp(headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Some(id) = msg.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let method = msg["method"].as_str().unwrap_or_default();
    let delay = INIT_DELAY_MS.load(Ordering::Relaxed);
    if method == "initialize" && delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let result = match method {
        "initialize" => json!({
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bench-gateway-upstream", "version": "0"}
        }),
        "tools/list" => json!({"tools": [{
            "name": "echo",
            "description": "Echoes the message.",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
        }]}),
        "tools/call" => {
            let text = msg["params"]["arguments"]["message"]
                .as_str()
                .unwrap_or_default();
            json!({"content": [{"type": "text", "text": text}]})
        }
        _ => json!({}),
    };
    let reply = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    let mut response = ([("content-type", "application/json")], reply).into_response();
    let session = if method == "initialize" {
        let n = UPSTREAM_SESSIONS.fetch_add(1, Ordering::Relaxed);
        Some(format!("upstream-{n}"))
    } else {
        headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    if let Some(v) = session.and_then(|s| axum::http::HeaderValue::from_str(&s).ok()) {
        response.headers_mut().insert("mcp-session-id", v);
    }
    response
}

/// Starts the upstream on its own thread (a current-thread runtime); returns its URL.
fn start_upstream() -> anyhow::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    std::thread::spawn(move || {
        let tid = std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|p| p.file_name()?.to_str()?.parse().ok())
            .unwrap_or(0);
        UPSTREAM_TID.store(tid, Ordering::SeqCst);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let app = axum::Router::new().route(
                "/mcp",
                axum::routing::post(mcp)
                    .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
                    .delete(|| async { StatusCode::OK }),
            );
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            axum::serve(listener, app).await.expect("serve");
        });
    });
    Ok(url)
}

// --- /proc -----------------------------------------------------------------------------

fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix(field)?
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse()
                    .ok()
            })
        })
        .unwrap_or(0)
}

/// `USER_HZ`: the unit of `/proc/PID/stat`'s times, 100 on every Linux build.
fn clock_ticks() -> f64 {
    100.0
}

/// utime + stime of a process (or `/proc/self/task/TID`) in seconds.
fn cpu_seconds(stat_path: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(stat_path) else {
        return 0.0;
    };
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state is field 3, utime 14, stime 15 (1-based in proc(5)).
    let get = |n: usize| -> f64 {
        fields
            .get(n - 3)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    (get(14) + get(15)) / clock_ticks()
}

fn pid_cpu(pid: u32) -> f64 {
    cpu_seconds(&format!("/proc/{pid}/stat"))
}

/// CPU seconds of this process apart from the upstream's thread, and of that thread.
fn own_cpu() -> (f64, f64) {
    let upstream = cpu_seconds(&format!(
        "/proc/self/task/{}/stat",
        UPSTREAM_TID.load(Ordering::SeqCst)
    ));
    (cpu_seconds("/proc/self/stat") - upstream, upstream)
}

/// CPU seconds of the `redis-server` this bench started (its child), 0 without one.
fn redis_cpu() -> f64 {
    children(std::process::id())
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim() == "redis-server")
        })
        .map(pid_cpu)
        .sum()
}

/// The direct children of `pid` (all its threads').
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(
                    list.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
    }
    out
}

// --- a gateway process -----------------------------------------------------------------

struct Gateway {
    child: Child,
    addr: String,
}

impl Gateway {
    fn start(toolgate: &Path, config: &Path, log: &Path) -> anyhow::Result<Gateway> {
        let mut child = Command::new(toolgate)
            .arg("gateway")
            .arg("--config")
            .arg(config)
            .env("TOOLGATE_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(std::fs::File::create(log)?))
            .spawn()
            .with_context(|| format!("cannot start `{}`", toolgate.display()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = tx.send(line);
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        let Some(addr) = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("http://"))
        else {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!(
                "the gateway printed no address (`{}`); its log:\n{}",
                line.trim(),
                std::fs::read_to_string(log).unwrap_or_default()
            );
        };
        Ok(Gateway {
            child,
            addr: addr.to_owned(),
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn url(&self, server: &str) -> String {
        format!("http://{}/servers/{server}/mcp", self.addr)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        // Its sessions' children are in their own process groups; a `url:` upstream has
        // none, and stdio children exit on their stdin's EOF when the gateway dies.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Scratch {
    dir: tempfile::TempDir,
    policy: PathBuf,
}

fn scratch(o: &Options, upstream_url: &str) -> anyhow::Result<Scratch> {
    let dir = tempfile::tempdir()?;
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "version: 1\ndefault: allow\npacks: []\nrules:\n  - id: bench-deny-blocked\n    description: The benchmark's denied call.\n    effect: deny\n    operations: [unknown]\n    tools: [\"blocked\"]\n",
    )?;
    std::fs::write(
        dir.path().join("secret"),
        "6c0f4a1d2b3e4f506c0f4a1d2b3e4f506c0f4a1d2b3e4f506c0f4a1d2b3e4f50",
    )?;
    let digest = hex::encode(sha2::Sha256::digest(TOKEN.as_bytes()));
    for replica in ["a", "b"] {
        let store = match &o.redis {
            Some(url) => format!("store:\n  url: {url}\n  namespace: bench\n"),
            None => String::new(),
        };
        let config = format!(
            "version: 1
listen: 127.0.0.1:0
public_url: http://127.0.0.1
replica: {replica}
secret:
  file: {secret}
audit: audit-{replica}.jsonl
{store}auth:
  tokens:
    - user: bench
      sha256: {digest}
      groups: [bench]
sessions:
  max: 100000
servers:
  echo:
    url: {upstream_url}
    policy: policy.yaml
  stdio:
    command: [{upstream:?}]
    policy: policy.yaml
",
            upstream = o.bench_upstream.display().to_string(),
            // Absolute: the gateway reads `secret.file` from its working directory, not
            // beside the config as it does `audit` and `policy`.
            secret = dir.path().join("secret").display(),
        );
        std::fs::write(dir.path().join(format!("gateway-{replica}.yaml")), config)?;
    }
    Ok(Scratch { dir, policy })
}

impl Scratch {
    fn start(&self, o: &Options, replica: &str) -> anyhow::Result<Gateway> {
        let p = self.dir.path();
        Gateway::start(
            &o.toolgate,
            &p.join(format!("gateway-{replica}.yaml")),
            &p.join(format!("gateway-{replica}.log")),
        )
    }
}

// --- the client ------------------------------------------------------------------------

fn client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .http1_only()
        .pool_max_idle_per_host(usize::MAX)
        .pool_idle_timeout(Duration::from_secs(600))
        .timeout(Duration::from_secs(30))
        .build()?)
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench_gateway","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":"list","method":"tools/list"}"#;

fn call_frame(tool: &str, id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"message":"call {id}"}}}}}}"#
    )
}

/// The JSON-RPC message of a body: JSON, or the last SSE event's data.
fn message(body: &[u8]) -> anyhow::Result<Value> {
    if body.starts_with(b"event:") || body.starts_with(b"data:") {
        let text = std::str::from_utf8(body)?;
        let data = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .next_back()
            .context("an SSE body without data")?;
        return Ok(serde_json::from_str(data.trim())?);
    }
    Ok(serde_json::from_slice(body)?)
}

async fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: String,
) -> anyhow::Result<(u16, Option<String>, bytes::Bytes)> {
    let mut req = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(body);
    if let Some(s) = session {
        req = req
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-06-18");
    }
    let r = req.send().await?;
    let status = r.status().as_u16();
    let sid = r
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Ok((status, sid, r.bytes().await?))
}

/// A result, not an error, not `isError`.
fn check_result(status: u16, body: &[u8]) -> anyhow::Result<()> {
    anyhow::ensure!(
        status == 200,
        "HTTP {status}: {}",
        String::from_utf8_lossy(body)
    );
    let v = message(body)?;
    anyhow::ensure!(
        v.get("result").is_some() && v["result"]["isError"] != json!(true),
        "not a successful result: {v}"
    );
    Ok(())
}

async fn open_session(http: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let (status, sid, body) = post(http, url, None, INIT.to_owned()).await?;
    check_result(status, &body).context("initialize")?;
    let sid = sid.context("no Mcp-Session-Id on the initialize reply")?;
    let (status, _, body) = post(http, url, Some(&sid), INITIALIZED.to_owned()).await?;
    anyhow::ensure!(
        status == 202,
        "notifications/initialized: HTTP {status}: {}",
        String::from_utf8_lossy(&body)
    );
    Ok(sid)
}

/// Opens `n` sessions, session `i` on `urls[i % len]`, 64 at a time.
async fn open_many(
    clients: &[reqwest::Client],
    urls: &[String],
    n: usize,
) -> anyhow::Result<Vec<String>> {
    let results: Vec<anyhow::Result<(usize, String)>> = futures_util::stream::iter(0..n)
        .map(|i| {
            let k = i % urls.len();
            let (http, url) = (clients[k].clone(), urls[k].clone());
            async move { Ok((i, open_session(&http, &url).await?)) }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let mut sids = vec![String::new(); n];
    for r in results {
        let (i, sid) = r?;
        sids[i] = sid;
    }
    Ok(sids)
}

/// `tools/list` once per session on every replica from its own (`i % len`) on: the first
/// request on another replica resumes the session there.
async fn list_all(
    clients: &[reqwest::Client],
    urls: &[String],
    sids: &[String],
) -> anyhow::Result<()> {
    for round in 0..urls.len() {
        let results: Vec<anyhow::Result<()>> = futures_util::stream::iter(sids.iter().enumerate())
            .map(|(i, sid)| {
                let k = (i + round) % urls.len();
                let (http, url, sid) = (clients[k].clone(), urls[k].clone(), sid.clone());
                async move {
                    let (status, _, body) = post(&http, &url, Some(&sid), LIST.to_owned()).await?;
                    check_result(status, &body).context("tools/list")
                }
            })
            .buffer_unordered(64)
            .collect()
            .await;
        for r in results {
            r?;
        }
    }
    Ok(())
}

struct Loop {
    /// Latencies of the calls that started after the warm-up and ended before the end.
    times: Vec<Duration>,
    /// Every call made, warm-up included.
    all_calls: u64,
    window: Duration,
}

/// Every session calls `tool` in a closed loop, alternating over `urls` from its own. With
/// `rate` (calls/s over all sessions), each session sends on a schedule instead (one call
/// every `sessions / rate` s, the sessions' schedules spread over that interval; a late call
/// is sent at once, so the achieved rate shows whether the gateway kept up).
async fn closed_loop(
    clients: &[reqwest::Client],
    urls: &[String],
    sids: &[String],
    tool: &str,
    warmup: Duration,
    duration: Duration,
    rate: Option<f64>,
) -> anyhow::Result<Loop> {
    let interval = rate.map(|r| Duration::from_secs_f64(sids.len() as f64 / r.max(1.0)));
    let start = Instant::now();
    let measure_from = start + warmup;
    let until = measure_from + duration;
    let mut set = tokio::task::JoinSet::new();
    for (i, sid) in sids.iter().enumerate() {
        let clients: Vec<reqwest::Client> = clients.to_vec();
        let urls: Vec<String> = urls.to_vec();
        let sid = sid.clone();
        let tool = tool.to_owned();
        let first = interval.map(|iv| start + iv.mul_f64(i as f64 / sids.len().max(1) as f64));
        set.spawn(async move {
            let mut times = Vec::new();
            let mut n: u64 = 0;
            let mut next = first;
            loop {
                if let Some(at) = next {
                    tokio::time::sleep_until(at.into()).await;
                }
                let now = Instant::now();
                // From the send (tokio's timer wakes up to a millisecond late: counting from the
                // schedule would charge that to the gateway); the achieved rate shows whether
                // the gateway kept up.
                let t = now;
                if let (Some(at), Some(iv)) = (next, interval) {
                    next = Some(at + iv);
                }
                if now >= until {
                    break;
                }
                let k = (i + n as usize) % urls.len();
                n += 1;
                let id = (i as u64) * 1_000_000_000 + n;
                let (status, _, body) =
                    post(&clients[k], &urls[k], Some(&sid), call_frame(&tool, id)).await?;
                let end = Instant::now();
                check_result(status, &body)
                    .with_context(|| format!("tools/call on replica {k} of session {i}"))?;
                if now >= measure_from && end <= until {
                    times.push(end - t);
                }
            }
            anyhow::Ok((times, n))
        });
    }
    let mut times = Vec::new();
    let mut all_calls = 0;
    while let Some(r) = set.join_next().await {
        let (t, n) = r??;
        times.extend(t);
        all_calls += n;
    }
    times.sort();
    Ok(Loop {
        times,
        all_calls,
        window: duration,
    })
}

async fn metric(http: &reqwest::Client, addr: &str, name: &str) -> anyhow::Result<f64> {
    let text = http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await?
        .text()
        .await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

fn percentile_us(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1e6
}

// --- the phases ------------------------------------------------------------------------

#[derive(Debug, Clone, Default)]
struct Throughput {
    sessions: usize,
    active: usize,
    calls_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    round_trips_per_call: f64,
    gateway_cpu_us_per_call: f64,
    client_cpu_us_per_call: f64,
    upstream_cpu_us_per_call: f64,
    children_cpu_us_per_call: f64,
    /// The bench's own `redis-server`, if any.
    store_cpu_us_per_call: f64,
    /// Opening the sessions, and (two replicas) the first request on the other one.
    open_s: f64,
    resume_s: f64,
    /// With `--rate`: achieved calls/s, p50, p99 (µs).
    paced: Option<(f64, f64, f64)>,
    /// The gateways' CPU over one second with every session idle, in % of one core.
    idle_cpu_percent: f64,
}

#[derive(Debug, Clone, Default)]
struct Memory {
    base_kb: u64,
    loaded_kb: u64,
    hwm_kb: u64,
    sessions: usize,
    children_kb: u64,
    children: usize,
}

impl Memory {
    fn per_session_kb(&self) -> f64 {
        (self.loaded_kb as f64 - self.base_kb as f64) / self.sessions.max(1) as f64
    }
}

/// Runs a loaded phase on `gws` with `server`/`tool`: opens `sessions`, of which the first
/// `active` call. With `memory`, RSS before and after opening.
#[allow(
    clippy::too_many_arguments,
    reason = "one call site passes every knob of the scenario explicitly"
)]
async fn loaded(
    o: &Options,
    gws: &[&Gateway],
    server: &str,
    tool: &str,
    sessions: usize,
    active: usize,
) -> anyhow::Result<(Throughput, Memory)> {
    let clients: Vec<reqwest::Client> = gws.iter().map(|_| client()).collect::<Result<_, _>>()?;
    let urls: Vec<String> = gws.iter().map(|g| g.url(server)).collect();
    // Warm-up: one session, a listing, 200 calls on every replica.
    let warm = open_many(&clients, &urls, 1).await?;
    list_all(&clients, &urls, &warm).await?;
    closed_loop(
        &clients,
        &urls,
        &warm,
        tool,
        Duration::ZERO,
        Duration::from_millis(300),
        None,
    )
    .await?;
    let rss = |g: &Gateway| status_kb(g.pid(), "VmRSS:");
    let kids_rss = |g: &Gateway| -> (u64, usize) {
        let c = children(g.pid());
        (c.iter().map(|p| status_kb(*p, "VmRSS:")).sum(), c.len())
    };
    let base_kb: u64 = gws.iter().map(|g| rss(g)).sum();
    let opened = Instant::now();
    let sids = open_many(&clients, &urls, sessions).await?;
    let open_s = opened.elapsed().as_secs_f64();
    let mut memory = Memory {
        base_kb,
        loaded_kb: gws.iter().map(|g| rss(g)).sum(),
        hwm_kb: gws.iter().map(|g| status_kb(g.pid(), "VmHWM:")).sum(),
        sessions,
        ..Memory::default()
    };
    for g in gws {
        let (kb, n) = kids_rss(g);
        memory.children_kb += kb;
        memory.children += n;
    }
    // Idle sessions should cost no CPU: the gateways' CPU over one second of no traffic.
    let idle0: f64 = gws.iter().map(|g| pid_cpu(g.pid())).sum();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_cpu_percent = (gws.iter().map(|g| pid_cpu(g.pid())).sum::<f64>() - idle0) * 100.0;
    let actives = &sids[..active];
    let resumed = Instant::now();
    list_all(&clients, &urls, actives).await?;
    let resume_s = resumed.elapsed().as_secs_f64();
    let mut trips0 = 0.0;
    for (g, c) in gws.iter().zip(&clients) {
        trips0 += metric(c, &g.addr, "toolgate_gateway_store_round_trips_total").await?;
    }
    let gw_cpu = |gws: &[&Gateway]| -> f64 { gws.iter().map(|g| pid_cpu(g.pid())).sum() };
    let kids_cpu = |gws: &[&Gateway]| -> f64 {
        gws.iter()
            .flat_map(|g| children(g.pid()))
            .map(pid_cpu)
            .sum()
    };
    let (cpu0, kids0, (own0, up0), st0) = (gw_cpu(gws), kids_cpu(gws), own_cpu(), redis_cpu());
    let run = closed_loop(&clients, &urls, actives, tool, o.warmup, o.duration, None).await?;
    let (cpu1, kids1, (own1, up1), st1) = (gw_cpu(gws), kids_cpu(gws), own_cpu(), redis_cpu());
    let mut trips1 = 0.0;
    for (g, c) in gws.iter().zip(&clients) {
        trips1 += metric(c, &g.addr, "toolgate_gateway_store_round_trips_total").await?;
    }
    let calls = run.all_calls.max(1) as f64;
    let per_call = |a: f64, b: f64| (b - a) / calls * 1e6;
    let paced = match o.rate {
        Some(rate) if server == "echo" => {
            let p = closed_loop(
                &clients,
                &urls,
                actives,
                tool,
                o.warmup,
                o.duration,
                Some(rate),
            )
            .await?;
            Some((
                p.times.len() as f64 / p.window.as_secs_f64(),
                percentile_us(&p.times, 50.0),
                percentile_us(&p.times, 99.0),
            ))
        }
        _ => None,
    };
    Ok((
        Throughput {
            sessions,
            active,
            calls_per_s: run.times.len() as f64 / run.window.as_secs_f64(),
            p50_us: percentile_us(&run.times, 50.0),
            p99_us: percentile_us(&run.times, 99.0),
            round_trips_per_call: (trips1 - trips0) / calls,
            gateway_cpu_us_per_call: per_call(cpu0, cpu1),
            client_cpu_us_per_call: per_call(own0, own1),
            upstream_cpu_us_per_call: per_call(up0, up1),
            children_cpu_us_per_call: per_call(kids0, kids1),
            store_cpu_us_per_call: per_call(st0, st1),
            open_s,
            resume_s,
            paced,
            idle_cpu_percent,
        },
        memory,
    ))
}

/// A stdio peer (bench_upstream or toolgate wrap) with a reader thread.
struct Bridge {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Vec<u8>>,
}

impl Bridge {
    fn spawn(mut cmd: Command) -> anyhow::Result<Bridge> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start a stdio peer")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Ok(Bridge {
            stdin: child.stdin.take(),
            child,
            lines,
        })
    }

    fn send(&mut self, frame: &str) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        stdin.write_all(frame.as_bytes())?;
        stdin.write_all(b"\n")?;
        stdin.flush()?;
        Ok(())
    }

    fn response(&self) -> anyhow::Result<Value> {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(30))
                .context("no answer within 30 s")?;
            let v: Value = serde_json::from_slice(&line)?;
            if v.get("id").is_some() && v.get("method").is_none() {
                return Ok(v);
            }
        }
    }

    /// Sequential calls after initialize + tools/list; sorted latencies.
    fn sequential(&mut self, tool: &str, calls: usize) -> anyhow::Result<Vec<Duration>> {
        self.send(INIT)?;
        self.response()?;
        self.send(INITIALIZED)?;
        self.send(LIST)?;
        self.response()?;
        let warm = calls / 10;
        let mut times = Vec::with_capacity(calls);
        for n in 0..(warm + calls) as u64 {
            let frame = call_frame(tool, n + 1);
            let start = Instant::now();
            self.send(&frame)?;
            let r = self.response()?;
            let d = start.elapsed();
            anyhow::ensure!(
                r.get("result").is_some() && r["result"]["isError"] != json!(true),
                "call failed: {r}"
            );
            if n as usize >= warm {
                times.push(d);
            }
        }
        times.sort();
        Ok(times)
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn http_sequential(
    http: &reqwest::Client,
    url: &str,
    tool: &str,
    calls: usize,
) -> anyhow::Result<Vec<Duration>> {
    let sid = open_session(http, url).await?;
    let (status, _, body) = post(http, url, Some(&sid), LIST.to_owned()).await?;
    check_result(status, &body)?;
    let warm = calls / 10;
    let mut times = Vec::with_capacity(calls);
    for n in 0..(warm + calls) as u64 {
        let start = Instant::now();
        let (status, _, body) = post(http, url, Some(&sid), call_frame(tool, n + 1)).await?;
        let d = start.elapsed();
        check_result(status, &body)?;
        if n as usize >= warm {
            times.push(d);
        }
    }
    times.sort();
    Ok(times)
}

#[derive(Debug, Clone, Copy, Default)]
struct Seq {
    p50_us: f64,
    p99_us: f64,
}

fn seq_of(times: &[Duration]) -> Seq {
    Seq {
        p50_us: percentile_us(times, 50.0),
        p99_us: percentile_us(times, 99.0),
    }
}

const SEQ_ROWS: [&str; 6] = [
    "HTTP client → upstream (direct)",
    "HTTP client → gateway → upstream (url:)",
    "stdio client → toolgate wrap --url → upstream",
    "stdio client → bench_upstream (direct)",
    "stdio client → toolgate wrap → bench_upstream",
    "HTTP client → gateway → bench_upstream (command:)",
];

fn wrap_cmd(o: &Options, s: &Scratch, tag: &str) -> Command {
    let dir = s.dir.path().join(format!("wrap-{tag}"));
    let _ = std::fs::create_dir_all(&dir);
    let mut cmd = Command::new(&o.toolgate);
    cmd.args([
        "wrap",
        "--server",
        "bench",
        "--approval",
        "none",
        "--policy",
    ])
    .arg(&s.policy)
    .arg("--audit")
    .arg(dir.join("audit.jsonl"))
    .arg("--workspace")
    .arg(&dir)
    .env("HOME", &dir)
    .env("TOOLGATE_PINS_DIR", dir.join("pins"))
    .env("TOOLGATE_BROKER_DIR", dir.join("broker"));
    cmd
}

fn sequential(
    o: &Options,
    s: &Scratch,
    rt: &tokio::runtime::Runtime,
    upstream_url: &str,
) -> anyhow::Result<[Seq; 6]> {
    let gw = s.start(o, "a")?;
    let http = client()?;
    let direct = rt.block_on(async {
        // The upstream ignores the token.
        http_sequential(&http, upstream_url, "echo", o.seq_calls).await
    })?;
    let via_gw = rt.block_on(http_sequential(&http, &gw.url("echo"), "echo", o.seq_calls))?;
    let mut cmd = wrap_cmd(o, s, "url");
    cmd.args(["--url", upstream_url]);
    let wrap_url = Bridge::spawn(cmd)?.sequential("echo", o.seq_calls)?;
    let stdio_direct =
        Bridge::spawn(Command::new(&o.bench_upstream))?.sequential("bench", o.seq_calls)?;
    let mut cmd = wrap_cmd(o, s, "stdio");
    cmd.arg("--").arg(&o.bench_upstream);
    let wrap_stdio = Bridge::spawn(cmd)?.sequential("bench", o.seq_calls)?;
    let gw_stdio = rt.block_on(http_sequential(
        &http,
        &gw.url("stdio"),
        "bench",
        o.seq_calls,
    ))?;
    Ok([
        seq_of(&direct),
        seq_of(&via_gw),
        seq_of(&wrap_url),
        seq_of(&stdio_direct),
        seq_of(&wrap_stdio),
        seq_of(&gw_stdio),
    ])
}

#[derive(Debug, Default)]
struct Round {
    one: Option<(Throughput, Memory)>,
    two: Option<(Throughput, Memory)>,
    stdio: Option<(Throughput, Memory)>,
    seq: Option<[Seq; 6]>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| !x.is_nan());
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

/// `median (min–max)` with `digits` decimals; just the value with one round.
fn fmt_m(v: &[f64], digits: usize) -> String {
    let m = median(v.to_vec());
    if v.len() < 2 {
        return format!("{m:.digits$}");
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{m:.digits$} ({lo:.digits$}–{hi:.digits$})")
}

fn run() -> anyhow::Result<()> {
    let o = parse_options()?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    anyhow::ensure!(
        o.toolgate.is_file(),
        "no `{}`\nhelp: `cargo build --release -p toolgate -p toolgate-testkit`, or pass `--toolgate`",
        o.toolgate.display()
    );
    let mut o = o;
    let redis = match (o.store.as_str(), &o.redis) {
        (_, Some(_)) | ("memory", _) => None,
        ("redis" | "auto", None) => {
            let server = toolgate_testkit::redis::RedisServer::start();
            anyhow::ensure!(
                server.is_some() || o.store == "auto",
                "`--store redis` needs `redis-server` on PATH"
            );
            server
        }
        (other, None) => anyhow::bail!("`--store {other}`: use `auto`, `redis` or `memory`"),
    };
    if let Some(r) = &redis {
        o.redis = Some(r.url());
    }
    let o = o;
    let upstream_url = start_upstream()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(o.client_threads)
        .enable_all()
        .build()?;
    let s = scratch(&o, &upstream_url)?;
    let started = Instant::now();
    let mut rounds: Vec<Round> = Vec::new();
    for r in 0..o.rounds {
        let mut round = Round::default();
        if o.runs("one") {
            eprintln!("round {}: one replica", r + 1);
            let a = s.start(&o, "a")?;
            round.one =
                Some(rt.block_on(loaded(&o, &[&a], "echo", "echo", o.sessions, o.active))?);
        }
        if o.runs("two") {
            eprintln!("round {}: two replicas", r + 1);
            let (a, b) = (s.start(&o, "a")?, s.start(&o, "b")?);
            round.two =
                Some(rt.block_on(loaded(&o, &[&a, &b], "echo", "echo", o.sessions, o.active))?);
        }
        if o.runs("stdio") && o.stdio_sessions > 0 {
            eprintln!("round {}: stdio", r + 1);
            let a = s.start(&o, "a")?;
            round.stdio = Some(rt.block_on(loaded(
                &o,
                &[&a],
                "stdio",
                "bench",
                o.stdio_sessions,
                o.stdio_sessions,
            ))?);
        }
        if o.runs("seq") {
            eprintln!("round {}: one call at a time", r + 1);
            round.seq = Some(sequential(&o, &s, &rt, &upstream_url)?);
        }
        rounds.push(round);
    }
    report(&o, &rounds, started.elapsed());
    if o.keep {
        let kept = s.dir.keep();
        eprintln!("kept {}", kept.display());
    }
    Ok(())
}

fn report(o: &Options, rounds: &[Round], took: Duration) {
    let store = if o.redis.is_some() {
        "one Redis store (redis-server on loopback) shared by the replicas"
    } else {
        "in-memory store per replica (not shared)"
    };
    println!(
        "bench_gateway: {} round(s) in {:.0} s; {} s closed loop after {} s warm-up; {}; {} client thread(s); medians (min–max over rounds)\n",
        rounds.len(),
        took.as_secs_f64(),
        o.duration.as_secs_f64(),
        o.warmup.as_secs_f64(),
        store,
        o.client_threads
    );
    let pick = |f: &dyn Fn(&Round) -> Option<(Throughput, Memory)>| -> Vec<(Throughput, Memory)> {
        rounds.iter().filter_map(f).collect()
    };
    let one = pick(&|r| r.one.clone());
    let two = pick(&|r| r.two.clone());
    let stdio = pick(&|r| r.stdio.clone());
    let col = |v: &[(Throughput, Memory)], f: fn(&Throughput) -> f64| -> Vec<f64> {
        v.iter().map(|(t, _)| f(t)).collect()
    };
    if !one.is_empty() || !two.is_empty() || !stdio.is_empty() {
        println!(
            "| setup | sessions (active) | calls/s | p50 | p99 | store round trips per call | gateway CPU per call | Redis CPU per call | load generator / upstream CPU per call |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for (name, v) in [
            ("one replica, url: upstream", &one),
            ("two replicas, round-robin per request, url: upstream", &two),
            (
                "one replica, stdio upstream (bench_upstream children)",
                &stdio,
            ),
        ] {
            let Some((t, _)) = v.first() else { continue };
            let others = if name.contains("stdio") {
                format!(
                    "{} / children {} µs",
                    fmt_m(&col(v, |t| t.client_cpu_us_per_call), 0),
                    fmt_m(&col(v, |t| t.children_cpu_us_per_call), 0)
                )
            } else {
                format!(
                    "{} / {} µs",
                    fmt_m(&col(v, |t| t.client_cpu_us_per_call), 0),
                    fmt_m(&col(v, |t| t.upstream_cpu_us_per_call), 0)
                )
            };
            println!(
                "| {name} | {} ({}) | {} | {} µs | {} µs | {} | {} µs | {} µs | {others} |",
                t.sessions,
                t.active,
                fmt_m(&col(v, |t| t.calls_per_s), 0),
                fmt_m(&col(v, |t| t.p50_us), 0),
                fmt_m(&col(v, |t| t.p99_us), 0),
                fmt_m(&col(v, |t| t.round_trips_per_call), 3),
                fmt_m(&col(v, |t| t.gateway_cpu_us_per_call), 0),
                fmt_m(&col(v, |t| t.store_cpu_us_per_call), 1),
            );
        }
        println!();
    }
    if let Some(rate) = o.rate {
        for (name, v) in [("one replica", &one), ("two replicas", &two)] {
            let p: Vec<(f64, f64, f64)> = v.iter().filter_map(|(t, _)| t.paced).collect();
            if p.is_empty() {
                continue;
            }
            println!(
                "{name}, {} active sessions paced at {rate:.0} calls/s in all: achieved {} calls/s, p50 {} µs, p99 {} µs (from the sends)",
                v[0].0.active,
                fmt_m(&p.iter().map(|x| x.0).collect::<Vec<_>>(), 0),
                fmt_m(&p.iter().map(|x| x.1).collect::<Vec<_>>(), 0),
                fmt_m(&p.iter().map(|x| x.2).collect::<Vec<_>>(), 0),
            );
        }
    }
    for (name, v) in [("one replica", &one), ("two replicas", &two)] {
        if v.is_empty() {
            continue;
        }
        println!(
            "{name}: CPU of the gateway(s) with {} sessions and no traffic: {} % of a core",
            v[0].0.sessions,
            fmt_m(&col(v, |t| t.idle_cpu_percent), 1)
        );
        println!(
            "{name}: opening {} sessions took {} s; the active sessions' first tools/list on every replica (two replicas: the resume on the other one) {} s",
            v[0].0.sessions,
            fmt_m(&col(v, |t| t.open_s), 2),
            fmt_m(&col(v, |t| t.resume_s), 2)
        );
    }
    if !one.is_empty() && !two.is_empty() {
        let ratios: Vec<f64> = one
            .iter()
            .zip(&two)
            .map(|((a, _), (b, _))| b.calls_per_s / a.calls_per_s)
            .collect();
        println!(
            "two replicas / one replica (calls/s, per round): {}",
            fmt_m(&ratios, 2)
        );
    }
    println!();
    let mem_rows: Vec<(&str, &Vec<(Throughput, Memory)>)> = [
        ("one replica, url: upstream", &one),
        ("two replicas (sum)", &two),
        ("one replica, stdio upstream", &stdio),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .collect();
    if !mem_rows.is_empty() {
        println!(
            "| memory | idle sessions | gateway VmRSS before → after | VmHWM after | per idle session (gateway) | upstream children |"
        );
        println!("|---|---|---|---|---|---|");
        for (name, v) in mem_rows {
            let m = &v[0].1;
            let mcol =
                |f: fn(&Memory) -> f64| -> Vec<f64> { v.iter().map(|(_, m)| f(m)).collect() };
            let kids = if m.children == 0 {
                "none".to_owned()
            } else {
                format!(
                    "{} children, {} KiB each",
                    m.children,
                    fmt_m(
                        &mcol(|m| m.children_kb as f64 / m.children.max(1) as f64),
                        0
                    )
                )
            };
            println!(
                "| {name} | {} | {} → {} MiB | {} MiB | {} KiB | {kids} |",
                m.sessions,
                fmt_m(&mcol(|m| m.base_kb as f64 / 1024.0), 1),
                fmt_m(&mcol(|m| m.loaded_kb as f64 / 1024.0), 1),
                fmt_m(&mcol(|m| m.hwm_kb as f64 / 1024.0), 1),
                fmt_m(&mcol(Memory::per_session_kb), 1),
            );
        }
        println!();
    }
    let seqs: Vec<[Seq; 6]> = rounds.iter().filter_map(|r| r.seq).collect();
    if !seqs.is_empty() {
        println!(
            "One call at a time ({} calls per path after {} warm-up calls):\n",
            o.seq_calls,
            o.seq_calls / 10
        );
        println!("| path | p50 | p99 | added p50 |");
        println!("|---|---|---|---|");
        for (i, name) in SEQ_ROWS.iter().enumerate() {
            let p50: Vec<f64> = seqs.iter().map(|s| s[i].p50_us).collect();
            let p99: Vec<f64> = seqs.iter().map(|s| s[i].p99_us).collect();
            let base = match i {
                0 | 3 => None,
                1 | 2 => Some(0),
                _ => Some(3),
            };
            let added = match base {
                None => "—".to_owned(),
                Some(b) => {
                    let a: Vec<f64> = seqs.iter().map(|s| s[i].p50_us - s[b].p50_us).collect();
                    format!("{} µs", fmt_m(&a, 0))
                }
            };
            println!(
                "| {name} | {} µs | {} µs | {added} |",
                fmt_m(&p50, 0),
                fmt_m(&p99, 0)
            );
        }
        println!();
    }
    // The issue's targets.
    let mut lines = Vec::new();
    if let Some(cps) = (!one.is_empty()).then(|| median(col(&one, |t| t.calls_per_s))) {
        lines.push(format!(
            "{} one replica ≥ 5000 allowed calls/s: {cps:.0}",
            verdict(cps >= 5000.0)
        ));
        let p99 = median(col(&one, |t| t.p99_us));
        lines.push(format!(
            "{} p99 ≤ 5 ms at {} active sessions, closed loop (saturated): {:.2} ms",
            verdict(p99 <= 5000.0),
            o.active,
            p99 / 1000.0
        ));
        let paced: Vec<f64> = one
            .iter()
            .filter_map(|(t, _)| t.paced.map(|p| p.2))
            .collect();
        if let (false, Some(rate)) = (paced.is_empty(), o.rate) {
            let p99 = median(paced);
            lines.push(format!(
                "{} p99 ≤ 5 ms at {} active sessions, paced at {rate:.0} calls/s: {:.2} ms",
                verdict(p99 <= 5000.0),
                o.active,
                p99 / 1000.0
            ));
        }
        let kb = median(one.iter().map(|(_, m)| m.per_session_kb()).collect());
        lines.push(format!(
            "{} ≤ 64 KB per idle session: {kb:.1} KiB",
            verdict(kb * 1024.0 <= 64_000.0)
        ));
        if !two.is_empty() {
            let r = median(col(&two, |t| t.calls_per_s)) / cps;
            lines.push(format!(
                "{} two replicas ≥ 1.6× one: {r:.2}× (on this machine's cores)",
                verdict(r >= 1.6)
            ));
        }
    }
    for l in lines {
        println!("{l}");
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "MET   " } else { "MISSED" }
}
