//! `bench_remote`: `toolgate wrap --url` against `mcp-remote`, on the same local Streamable
//! HTTP server, in the same run (the bridge must add at most a fifth of `mcp-remote`'s
//! latency and memory, and carry at least five times its throughput).
//!
//! The server runs in this process (on its own thread): a minimal, fast Streamable HTTP MCP
//! server on 127.0.0.1 (`initialize` with a session id, 202 for notifications, `tools/list`,
//! `tools/call` of `echo` answered with a JSON body). Three clients call `echo`:
//!
//! - **direct**: an HTTP client (reqwest, one keep-alive connection pool) POSTs each call;
//! - **toolgate**: a stdio client talks to `toolgate wrap --url` (an allow-all policy, an
//!   audit log: the configuration a user runs);
//! - **mcp-remote**: the same stdio client talks to `node mcp-remote/dist/proxy.js URL`.
//!
//! For each: the latency of sequential calls (p50, p99), the throughput with `--concurrency`
//! calls in flight, and the bridge's peak RSS (`VmHWM`). The added p50 is the bridge's p50
//! minus the direct client's. The run ends with the three criteria: toolgate's added p50 at
//! most a fifth of mcp-remote's, its throughput at least 5× mcp-remote's, its peak RSS at
//! most a fifth of mcp-remote's.
//!
//! Usage: `bench_remote --toolgate PATH --mcp-remote PATH/dist/proxy.js [--node node]
//! [--calls N] [--concurrency C] [--rounds R]`

// A measuring tool, not library code: JSON indexing on known shapes, and a panic in the
// server thread ends the run, which is what should happen.
#![allow(
    clippy::indexing_slicing,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a benchmark tool: a failed setup step aborts the run with a message; a benchmark tool: its report is printed"
)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

const USAGE: &str = "bench_remote --toolgate PATH --mcp-remote PATH/dist/proxy.js [--node node] [--calls N] [--concurrency C] [--rounds R]";

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(err) => {
            eprintln!("bench_remote: {err:#}");
            ExitCode::from(1)
        }
    }
}

struct Options {
    toolgate: String,
    mcp_remote: String,
    node: String,
    calls: usize,
    concurrency: usize,
    rounds: usize,
}

fn parse_options() -> anyhow::Result<Options> {
    let mut o = Options {
        toolgate: String::new(),
        mcp_remote: String::new(),
        node: "node".to_owned(),
        calls: 2000,
        concurrency: 16,
        rounds: 3,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("`{arg}` needs a value\nusage: {USAGE}"))?;
        match arg.as_str() {
            "--toolgate" => o.toolgate = value,
            "--mcp-remote" => o.mcp_remote = value,
            "--node" => o.node = value,
            "--calls" => o.calls = value.parse()?,
            "--concurrency" => o.concurrency = value.parse()?,
            "--rounds" => o.rounds = value.parse()?,
            _ => anyhow::bail!("unknown argument `{arg}`\nusage: {USAGE}"),
        }
    }
    anyhow::ensure!(
        !o.toolgate.is_empty() && !o.mcp_remote.is_empty(),
        "usage: {USAGE}"
    );
    Ok(o)
}

// --- the server ------------------------------------------------------------------------

async fn mcp(headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Some(id) = msg.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let method = msg["method"].as_str().unwrap_or_default();
    let result = match method {
        "initialize" => json!({
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bench-remote", "version": "0"}
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
    if method == "initialize" || headers.contains_key("mcp-session-id") {
        response.headers_mut().insert(
            "mcp-session-id",
            axum::http::HeaderValue::from_static("bench-session"),
        );
    }
    response
}

/// Starts the server on its own thread; returns its URL.
fn start_server() -> anyhow::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    std::thread::spawn(move || {
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

// --- measurements ----------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Figures {
    p50_us: f64,
    p99_us: f64,
    calls_per_s: f64,
    peak_rss_kb: Option<u64>,
}

fn call_frame(id: usize) -> Vec<u8> {
    let mut frame = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": format!("call {id}")}}})
    .to_string()
    .into_bytes();
    frame.push(b'\n');
    frame
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1e6
}

fn direct(url: &str, o: &Options) -> anyhow::Result<Figures> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = reqwest::Client::builder().build()?;
        let post = |body: Vec<u8>, session: bool| {
            let mut req = client
                .post(url)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .body(body);
            if session {
                req = req
                    .header("mcp-session-id", "bench-session")
                    .header("mcp-protocol-version", "2025-11-25");
            }
            req.send()
        };
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}});
        post(init.to_string().into_bytes(), false).await?.bytes().await?;
        let mut times = Vec::with_capacity(o.calls);
        for id in 1..=o.calls {
            let start = Instant::now();
            let body = post(call_frame(id), true).await?.bytes().await?;
            times.push(start.elapsed());
            anyhow::ensure!(body.windows(4).any(|w| w == b"call"), "unexpected answer");
        }
        times.sort();
        let start = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        let per = o.calls / o.concurrency.max(1);
        for worker in 0..o.concurrency {
            let client = client.clone();
            let url = url.to_owned();
            set.spawn(async move {
                for n in 0..per {
                    client
                        .post(&url)
                        .header("accept", "application/json, text/event-stream")
                        .header("content-type", "application/json")
                        .header("mcp-session-id", "bench-session")
                        .body(call_frame(worker * per + n + 1))
                        .send()
                        .await?
                        .bytes()
                        .await?;
                }
                anyhow::Ok(())
            });
        }
        while let Some(r) = set.join_next().await {
            r??;
        }
        let rate = (per * o.concurrency) as f64 / start.elapsed().as_secs_f64();
        Ok(Figures {
            p50_us: percentile(&times, 50.0),
            p99_us: percentile(&times, 99.0),
            calls_per_s: rate,
            peak_rss_kb: None,
        })
    })
}

/// A stdio bridge (toolgate or mcp-remote) with a reader thread.
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
            .context("cannot start the bridge")?;
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

    fn send(&mut self, frame: &[u8]) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        stdin.write_all(frame)?;
        stdin.flush()?;
        Ok(())
    }

    /// The next response (a line with an `id` and no `method`).
    fn response(&self) -> anyhow::Result<Value> {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(30))
                .context("no answer from the bridge within 30 s")?;
            let v: Value = serde_json::from_slice(&line)?;
            if v.get("id").is_some() && v.get("method").is_none() {
                return Ok(v);
            }
        }
    }

    fn peak_rss_kb(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status.lines().find_map(|line| {
            let rest = line.strip_prefix("VmHWM:")?;
            rest.trim().trim_end_matches("kB").trim().parse().ok()
        })
    }

    fn measure(&mut self, o: &Options) -> anyhow::Result<Figures> {
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}});
        self.send(format!("{init}\n").as_bytes())?;
        self.response()?;
        self.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")?;
        self.send(b"{\"jsonrpc\":\"2.0\",\"id\":\"l\",\"method\":\"tools/list\"}\n")?;
        self.response()?;
        let mut times = Vec::with_capacity(o.calls);
        for id in 1..=o.calls {
            let frame = call_frame(id);
            let start = Instant::now();
            self.send(&frame)?;
            let r = self.response()?;
            times.push(start.elapsed());
            anyhow::ensure!(r.get("result").is_some(), "call {id} failed: {r}");
        }
        times.sort();
        // Throughput: `concurrency` calls in flight.
        let start = Instant::now();
        let total = o.calls;
        let mut sent = 0;
        let mut done = 0;
        while done < total {
            while sent < total && sent - done < o.concurrency {
                sent += 1;
                self.send(&call_frame(o.calls + sent))?;
            }
            self.response()?;
            done += 1;
        }
        let rate = total as f64 / start.elapsed().as_secs_f64();
        Ok(Figures {
            p50_us: percentile(&times, 50.0),
            p99_us: percentile(&times, 99.0),
            calls_per_s: rate,
            peak_rss_kb: self.peak_rss_kb(),
        })
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

fn toolgate(url: &str, o: &Options, scratch: &std::path::Path) -> anyhow::Result<Figures> {
    let policy = scratch.join("policy.yaml");
    std::fs::write(&policy, "version: 1\ndefault: allow\npacks: []\n")?;
    let mut cmd = Command::new(&o.toolgate);
    cmd.args([
        "wrap",
        "--server",
        "bench",
        "--approval",
        "none",
        "--policy",
    ])
    .arg(&policy)
    .arg("--audit")
    .arg(scratch.join("audit.jsonl"))
    .arg("--workspace")
    .arg(scratch)
    .args(["--url", url])
    .env("HOME", scratch)
    .env("TOOLGATE_PINS_DIR", scratch.join("pins"))
    .env("TOOLGATE_BROKER_DIR", scratch.join("broker"));
    Bridge::spawn(cmd)?.measure(o)
}

fn mcp_remote(url: &str, o: &Options, scratch: &std::path::Path) -> anyhow::Result<Figures> {
    let mut cmd = Command::new(&o.node);
    cmd.arg(&o.mcp_remote)
        .arg(url)
        .args(["--transport", "http-only", "--allow-http"])
        .env("HOME", scratch)
        .env("MCP_REMOTE_CONFIG_DIR", scratch.join("mcp-auth"));
    Bridge::spawn(cmd)?.measure(o)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn run() -> anyhow::Result<bool> {
    let o = parse_options()?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = start_server()?;
    let scratch = tempfile::tempdir()?;
    let mut rows: Vec<(&str, Vec<Figures>)> = vec![
        ("direct HTTP client", vec![]),
        ("toolgate wrap --url", vec![]),
        ("mcp-remote", vec![]),
    ];
    for round in 0..o.rounds {
        eprintln!("round {} of {}", round + 1, o.rounds);
        rows[0].1.push(direct(&url, &o)?);
        let dir = scratch.path().join(format!("toolgate-{round}"));
        std::fs::create_dir_all(&dir)?;
        rows[1].1.push(toolgate(&url, &o, &dir)?);
        let dir = scratch.path().join(format!("mcp-remote-{round}"));
        std::fs::create_dir_all(&dir)?;
        rows[2].1.push(mcp_remote(&url, &o, &dir)?);
    }
    let med = |i: usize, f: fn(&Figures) -> f64| median(rows[i].1.iter().map(f).collect());
    let rss = |i: usize| {
        median(
            rows[i]
                .1
                .iter()
                .filter_map(|f| f.peak_rss_kb)
                .map(|k| k as f64)
                .collect(),
        )
    };
    println!(
        "{} calls per round, {} rounds, {} in flight for throughput; medians over rounds\n",
        o.calls, o.rounds, o.concurrency
    );
    println!("| client | p50 | p99 | added p50 | calls/s | peak RSS |");
    println!("|---|---|---|---|---|---|");
    let direct_p50 = med(0, |f| f.p50_us);
    for (i, (name, _)) in rows.iter().enumerate() {
        let added = if i == 0 {
            "—".to_owned()
        } else {
            format!("{:.0} µs", med(i, |f| f.p50_us) - direct_p50)
        };
        let peak = if i == 0 {
            "—".to_owned()
        } else {
            format!("{:.1} MiB", rss(i) / 1024.0)
        };
        println!(
            "| {name} | {:.0} µs | {:.0} µs | {added} | {:.0} | {peak} |",
            med(i, |f| f.p50_us),
            med(i, |f| f.p99_us),
            med(i, |f| f.calls_per_s),
        );
    }
    let added_tg = med(1, |f| f.p50_us) - direct_p50;
    let added_mr = med(2, |f| f.p50_us) - direct_p50;
    let checks = [
        (
            format!("added p50: toolgate {added_tg:.0} µs ≤ mcp-remote {added_mr:.0} µs / 5"),
            added_tg <= added_mr / 5.0,
        ),
        (
            format!(
                "throughput: toolgate {:.0}/s ≥ 5 × mcp-remote {:.0}/s",
                med(1, |f| f.calls_per_s),
                med(2, |f| f.calls_per_s)
            ),
            med(1, |f| f.calls_per_s) >= 5.0 * med(2, |f| f.calls_per_s),
        ),
        (
            format!(
                "peak RSS: toolgate {:.1} MiB ≤ mcp-remote {:.1} MiB / 5",
                rss(1) / 1024.0,
                rss(2) / 1024.0
            ),
            rss(1) <= rss(2) / 5.0,
        ),
    ];
    println!();
    let mut all = true;
    for (what, ok) in checks {
        println!("{} {what}", if ok { "PASS" } else { "FAIL" });
        all &= ok;
    }
    Ok(all)
}
