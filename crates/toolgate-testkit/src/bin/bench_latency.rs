//! `bench_latency`: end-to-end cost of `toolgate wrap` against calling the same server directly.
//!
//! Every suite drives `bench_upstream` directly and through `toolgate wrap -- bench_upstream`
//! on two long-lived sessions, one request in flight at a time (as an agent works), and
//! alternates the two sides in rounds so that noise on a shared machine hits both alike. A
//! round trip is timed from writing the request line to reading the reply line; the reply is
//! checked (id, result or denial) after the clock stops. The suites (`--suite a,b,…` or
//! `--suite all`):
//!
//! - `relay`: `ping`, a request toolgate does not intercept and passes through byte for byte:
//!   p50/p99 round trip, calls/s, peak RSS (the relay's targets: added p50 ≤ 15 µs, p99
//!   ≤ 100 µs, ≥ 50 000 calls/s, peak RSS ≤ 8 MB);
//! - `allowed`: `tools/call` of a tool the policy allows: decision, pinning check, audit and
//!   taint indexing of the result (enforcement's target: added p50 ≤ 25 µs, p99 ≤ 150 µs);
//! - `denied`: `tools/call` of `blocked`, which the policy denies, so toolgate answers itself;
//!   its round trip against the direct allowed call for reference (target: p50 ≤ 20 µs);
//! - `large`: calls returning 1 MiB of text (added p50 ≤ 2 ms including taint indexing) and
//!   toolgate's VmRSS after the warm-up and after 1,000 such results (bounded);
//! - `list`: a `tools/list` of 1,000 tools with realistic schemas (added ≤ 3 ms); toolgate pins
//!   every definition, the first listing of a session (pins written) is reported apart;
//! - `rest`: VmHWM and VmRSS of toolgate after `initialize` + `tools/list`, before any call
//!   (target: ≤ 10 MB);
//! - `startup`: time from spawn to the `initialize` reply, median of fresh spawns (target:
//!   ≤ +10 ms over the server's own).
//!
//! Without `--suite` it runs `allowed,startup` (the figures of the first version of this tool).
//!
//! toolgate runs with a policy that allows every call except tool `blocked` (`default: allow`,
//! no packs, one deny rule; override with `--policy`), `--approval none`, and a private audit
//! log and pin store per suite in a temp dir, so the figures include the real decision path.
//! Each session lists its tools once after `initialize`, as clients do.
//!
//! Every read is bounded: a watchdog kills a peer that does not answer within `--timeout-ms`,
//! which ends the blocked read with an error instead of hanging; a suite that fails is
//! reported and the others still run (exit code 1).
//!
//! A plain binary rather than a criterion bench: what matters here is the latency
//! *distribution* (p99) of a long-lived pipe pair, the RSS and the start-up of a child process;
//! criterion's per-iteration sampling model measures means of a closure and would hide the tail.
//!
//! Build and run (release):
//! `cargo build --release -p toolgate -p toolgate-testkit --bins && target/release/bench_latency --suite all`

#![allow(
    clippy::print_stdout,
    reason = "a benchmark tool: its report is printed"
)]

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench_latency","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const BENCH_POLICY: &str = "version: 1\ndefault: allow\npacks: []\nrules:\n  - id: bench-deny-blocked\n    description: The benchmark's denied call.\n    effect: deny\n    operations: [unknown]\n    tools: [\"blocked\"]\ntools:\n  send_email:\n    exfiltrating: true\n    sink_params: [to]\n";
/// The `_meta` key of toolgate's verdict on a call it answered itself.
const META_DECISION: &str = "dev.toolgate/decision";

const MB: u64 = 1024; // kB per MB, as /proc reports kB

const USAGE: &str =
    "usage: bench_latency [--suite all|relay,allowed,denied,large,list,rest,startup]
  [--calls N] [--warmup N] [--rounds N] [--startup-runs N] [--result-bytes N]
  [--large-calls N] [--large-bytes N] [--large-dense] [--list-tools N] [--lists N] [--timeout-ms N]
  [--toolgate PATH] [--upstream PATH] [--policy PATH]

  --suite         what to measure (default `allowed,startup`; `all` = every suite)
  --calls         timed requests per side in relay/allowed/denied (default 20000)
  --warmup        untimed requests per side before them (default 2000)
  --rounds        the timed requests alternate between the sides in this many rounds (5)
  --startup-runs  fresh spawns per side for start-up (default 21)
  --result-bytes  text bytes of the result of an allowed call (default 0: `ok`)
  --large-calls   timed 1 MiB calls per side in `large` (default 1000)
  --large-bytes   result size in `large` (default 1048576)
  --large-dense   in `large`, every line of the result holds its own e-mail address and
                  URL (a CRM export) instead of prose
  --list-tools    tools in the `list` suite's listing (default 1000)
  --lists         timed tools/list per side in `list` (default 200)
  --timeout-ms    longest wait for one reply before the peer is killed (default 10000)
  --policy        toolgate policy (default: allow all, deny tool `blocked`)";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Suite {
    Relay,
    Allowed,
    Denied,
    Large,
    List,
    Rest,
    Startup,
}

impl Suite {
    const ALL: [Suite; 7] = [
        Suite::Relay,
        Suite::Allowed,
        Suite::Denied,
        Suite::Large,
        Suite::List,
        Suite::Rest,
        Suite::Startup,
    ];

    fn name(self) -> &'static str {
        match self {
            Suite::Relay => "relay",
            Suite::Allowed => "allowed",
            Suite::Denied => "denied",
            Suite::Large => "large",
            Suite::List => "list",
            Suite::Rest => "rest",
            Suite::Startup => "startup",
        }
    }

    fn parse_list(text: &str) -> anyhow::Result<Vec<Suite>> {
        if text == "all" {
            return Ok(Suite::ALL.to_vec());
        }
        let mut suites = Vec::new();
        for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let suite = Suite::ALL
                .into_iter()
                .find(|s| s.name() == name)
                .with_context(|| {
                    format!(
                        "unknown suite `{name}`\nhelp: one of all, relay, allowed, denied, large, list, rest, startup"
                    )
                })?;
            if !suites.contains(&suite) {
                suites.push(suite);
            }
        }
        if suites.is_empty() {
            bail!("`--suite` needs at least one suite\nhelp: {USAGE}");
        }
        Ok(suites)
    }
}

#[derive(Debug)]
struct Options {
    toolgate: PathBuf,
    upstream: PathBuf,
    suites: Vec<Suite>,
    calls: usize,
    warmup: usize,
    rounds: usize,
    startup_runs: usize,
    result_bytes: usize,
    large_calls: usize,
    large_bytes: usize,
    large_dense: bool,
    list_tools: usize,
    lists: usize,
    timeout: Duration,
    policy: Option<PathBuf>,
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(err) => {
            eprintln!("bench_latency: {err:#}");
            ExitCode::from(1)
        }
    }
}

fn parse_options() -> anyhow::Result<Option<Options>> {
    let exe = std::env::current_exe().context("cannot locate the bench_latency executable")?;
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut options = Options {
        toolgate: dir.join("toolgate"),
        upstream: dir.join("bench_upstream"),
        suites: vec![Suite::Allowed, Suite::Startup],
        calls: 20_000,
        warmup: 2_000,
        rounds: 5,
        startup_runs: 21,
        result_bytes: 0,
        large_calls: 1_000,
        large_bytes: 1 << 20,
        large_dense: false,
        list_tools: 1_000,
        lists: 200,
        timeout: Duration::from_secs(10),
        policy: None,
    };
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        let arg = arg.to_string_lossy().into_owned();
        if arg == "--help" || arg == "-h" {
            println!("{USAGE}");
            return Ok(None);
        }
        if arg == "--large-dense" {
            options.large_dense = true;
            continue;
        }
        let value = args
            .next()
            .with_context(|| format!("`{arg}` needs a value\nhelp: {USAGE}"))?;
        let number = || -> anyhow::Result<usize> {
            let text = value.to_string_lossy();
            text.parse()
                .with_context(|| format!("invalid value `{text}` for `{arg}`"))
        };
        match arg.as_str() {
            "--suite" => options.suites = Suite::parse_list(&value.to_string_lossy())?,
            "--calls" => options.calls = number()?.max(1),
            "--warmup" => options.warmup = number()?,
            "--rounds" => options.rounds = number()?.max(1),
            "--startup-runs" => options.startup_runs = number()?.max(1),
            "--result-bytes" => options.result_bytes = number()?,
            "--large-calls" => options.large_calls = number()?.max(1),
            "--large-bytes" => options.large_bytes = number()?,
            "--list-tools" => options.list_tools = number()?.max(2),
            "--lists" => options.lists = number()?.max(1),
            "--timeout-ms" => {
                options.timeout = Duration::from_millis(u64::try_from(number()?.max(1))?);
            }
            "--toolgate" => options.toolgate = PathBuf::from(&value),
            "--upstream" => options.upstream = PathBuf::from(&value),
            "--policy" => options.policy = Some(PathBuf::from(&value)),
            other => bail!("unknown argument `{other}`\nhelp: {USAGE}"),
        }
    }
    for path in [&options.toolgate, &options.upstream] {
        if !path.is_file() {
            bail!(
                "`{}` does not exist\nhelp: cargo build --release -p toolgate -p toolgate-testkit --bins",
                path.display()
            );
        }
    }
    Ok(Some(options))
}

// ---------------------------------------------------------------------------------------------
// Peers

/// Kills a peer whose reply is overdue, so a blocked read or write ends instead of hanging.
///
/// The timed path only stores a timestamp before and a zero after each round trip; the check
/// runs on its own thread every 100 ms.
struct Watchdog {
    shared: Arc<WatchShared>,
    thread: Option<JoinHandle<()>>,
}

struct WatchShared {
    base: Instant,
    /// Nanoseconds since `base` when the pending round trip started; 0 when none is pending.
    armed_ns: AtomicU64,
    stop: AtomicBool,
    fired: AtomicBool,
}

impl Watchdog {
    fn start(child: Arc<Mutex<Child>>, timeout: Duration) -> anyhow::Result<Watchdog> {
        let shared = Arc::new(WatchShared {
            base: Instant::now(),
            armed_ns: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            fired: AtomicBool::new(false),
        });
        let watched = Arc::clone(&shared);
        let limit = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        let thread = std::thread::Builder::new()
            .name("bench-watchdog".into())
            .spawn(move || {
                while !watched.stop.load(Ordering::Acquire) {
                    let armed = watched.armed_ns.load(Ordering::Acquire);
                    if armed != 0 && watched.now_ns().saturating_sub(armed) > limit {
                        watched.fired.store(true, Ordering::Release);
                        if let Ok(mut child) = child.lock() {
                            let _ = child.kill();
                        }
                        return;
                    }
                    std::thread::park_timeout(Duration::from_millis(100));
                }
            })
            .context("cannot start a watchdog thread")?;
        Ok(Watchdog {
            shared,
            thread: Some(thread),
        })
    }

    fn arm(&self) {
        self.shared
            .armed_ns
            .store(self.shared.now_ns().max(1), Ordering::Release);
    }

    fn disarm(&self) {
        self.shared.armed_ns.store(0, Ordering::Release);
    }

    fn fired(&self) -> bool {
        self.shared.fired.load(Ordering::Acquire)
    }
}

impl WatchShared {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// A command line and its extra environment.
#[derive(Clone)]
struct Cmd {
    label: &'static str,
    argv: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
}

/// What a reply must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A result that is not an error result.
    Result,
    /// toolgate's own denial: an `isError` result with a deny verdict in `_meta`.
    Denied,
    /// A `tools/list` result with this many tools.
    Tools(usize),
}

/// One MCP peer process on a pipe pair.
struct Peer {
    label: &'static str,
    pid: u32,
    child: Arc<Mutex<Child>>,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
    frame: Vec<u8>,
    watchdog: Watchdog,
    timeout: Duration,
}

impl Peer {
    fn spawn(cmd: &Cmd, timeout: Duration) -> anyhow::Result<Peer> {
        let (program, args) = cmd.argv.split_first().context("empty command")?;
        let mut child = Command::new(program)
            .args(args)
            .envs(cmd.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start `{}`", program.to_string_lossy()))?;
        let stdin = child.stdin.take().context("child has no stdin")?;
        let stdout = child.stdout.take().context("child has no stdout")?;
        let pid = child.id();
        let child = Arc::new(Mutex::new(child));
        let watchdog = Watchdog::start(Arc::clone(&child), timeout)?;
        Ok(Peer {
            label: cmd.label,
            pid,
            child,
            stdin: Some(stdin),
            stdout: BufReader::with_capacity(256 * 1024, stdout),
            line: Vec::with_capacity(4096),
            frame: Vec::with_capacity(256),
            watchdog,
            timeout,
        })
    }

    /// Writes `frame` (without newline) and reads one reply line; returns the time between.
    /// The reply stays in `self.line` for [`Peer::check`].
    fn round_trip(&mut self, frame: &[u8]) -> anyhow::Result<Duration> {
        self.frame.clear();
        self.frame.extend_from_slice(frame);
        self.frame.push(b'\n');
        self.line.clear();
        let stdin = self.stdin.as_mut().context("stdin already closed")?;
        self.watchdog.arm();
        let t0 = Instant::now();
        let outcome = stdin
            .write_all(&self.frame)
            .and_then(|()| stdin.flush())
            .and_then(|()| self.stdout.read_until(b'\n', &mut self.line));
        let elapsed = t0.elapsed();
        self.watchdog.disarm();
        let read = match outcome {
            Ok(read) => read,
            Err(err) => return Err(self.lost(Some(err))),
        };
        if read == 0 || self.line.last() != Some(&b'\n') {
            return Err(self.lost(None));
        }
        Ok(elapsed)
    }

    fn lost(&self, err: Option<std::io::Error>) -> anyhow::Error {
        if self.watchdog.fired() {
            anyhow::anyhow!(
                "`{}` gave no reply within {} ms; killed it\nhelp: a slow machine? raise `--timeout-ms`",
                self.label,
                self.timeout.as_millis()
            )
        } else if let Some(err) = err {
            anyhow::anyhow!("talking to `{}` failed: {err}", self.label)
        } else {
            anyhow::anyhow!("`{}` closed its stdout", self.label)
        }
    }

    /// Checks the last reply: it answers request `id` as `expect` says.
    fn check(&self, id: &Value, expect: Expect) -> anyhow::Result<()> {
        check_reply(self.label, &self.line, id, expect)
    }

    fn send(&mut self, frame: &[u8]) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("stdin already closed")?;
        stdin.write_all(frame)?;
        stdin.write_all(b"\n")?;
        stdin.flush()?;
        Ok(())
    }

    /// `initialize`, `notifications/initialized`, one `tools/list` of `tools` tools. Returns
    /// the time of that first `tools/list` round trip.
    fn initialize(&mut self, tools: usize) -> anyhow::Result<Duration> {
        self.round_trip(INITIALIZE.as_bytes())?;
        self.check(&Value::from(0), Expect::Result)?;
        self.send(INITIALIZED.as_bytes())?;
        let first = self.round_trip(&Request::List.frame(0))?;
        self.check(&Value::from(0), Expect::Tools(tools))?;
        Ok(first)
    }

    /// `VmHWM` and `VmRSS` in kB from `/proc/<pid>/status`.
    fn memory_kb(&self) -> (Option<u64>, Option<u64>) {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", self.pid)) else {
            return (None, None);
        };
        let field = |name: &str| {
            status.lines().find_map(|line| {
                let rest = line.strip_prefix(name)?.strip_prefix(':')?;
                rest.trim().trim_end_matches("kB").trim().parse().ok()
            })
        };
        (field("VmHWM"), field("VmRSS"))
    }

    /// Closes stdin and waits (bounded) for the process to exit; kills it after 5 s.
    fn finish(&mut self) -> anyhow::Result<()> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut child = self
                .child
                .lock()
                .map_err(|_| anyhow::anyhow!("the watchdog of `{}` failed", self.label))?;
            if child.try_wait()?.is_some() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                child.kill()?;
                child.wait()?;
                bail!(
                    "`{}` did not exit within 5 s of stdin EOF; killed it",
                    self.label
                );
            }
            drop(child);
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Peer {
    /// A peer left behind by an error is killed, never leaked.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let Ok(mut child) = self.child.lock() else {
            return;
        };
        if matches!(child.try_wait(), Ok(None)) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Checks that `line` answers request `id` as `expect` says; `label` names the peer.
fn check_reply(label: &str, line: &[u8], id: &Value, expect: Expect) -> anyhow::Result<()> {
    let reply: Value = serde_json::from_slice(line).with_context(|| {
        format!(
            "`{label}` answered with a line that is not JSON: {}",
            excerpt(line)
        )
    })?;
    let complain = |what: &str| {
        anyhow::anyhow!(
            "`{label}` answered request {id} with {what}: {}",
            excerpt(line)
        )
    };
    if reply.get("id") != Some(id) {
        return Err(complain("another id"));
    }
    let Some(result) = reply.get("result") else {
        return Err(complain("no result"));
    };
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    match expect {
        Expect::Result if is_error => Err(complain("an error result")),
        Expect::Result => Ok(()),
        Expect::Denied => {
            let effect = result
                .pointer(&format!(
                    "/_meta/{}/effect",
                    META_DECISION.replace('/', "~1")
                ))
                .and_then(Value::as_str);
            if is_error && effect == Some("deny") {
                Ok(())
            } else {
                Err(anyhow::anyhow!(
                    "`{label}` answered request {id} with something else than toolgate's denial: {}\nhelp: the policy must deny tool `blocked` (see `--policy`)",
                    excerpt(line)
                ))
            }
        }
        Expect::Tools(n) => {
            let listed = result.get("tools").and_then(Value::as_array).map(Vec::len);
            if listed == Some(n) {
                Ok(())
            } else {
                Err(complain(&format!("{listed:?} tools instead of {n}")))
            }
        }
    }
}

fn excerpt(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!(
            "{}… ({} bytes)",
            text.get(..cut).unwrap_or(text),
            line.len()
        ),
        None => text.to_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// Requests and series

#[derive(Debug, Clone, Copy)]
enum Request {
    Ping,
    Call(&'static str),
    List,
    /// `send_email` to this address.
    Mail(&'static str),
}

impl Request {
    fn frame(self, id: usize) -> Vec<u8> {
        match self {
            Request::Ping => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
            Request::Call(tool) => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
            ),
            Request::List => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#),
            Request::Mail(to) => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"send_email","arguments":{{"to":"{to}","body":"hi"}}}}}}"#
            ),
        }
        .into_bytes()
    }
}

/// One side of a suite: a session, what it sends and what it must get back.
struct Side<'a> {
    peer: &'a mut Peer,
    request: Request,
    expect: Expect,
}

#[derive(Default)]
struct Series {
    samples_ns: Vec<u64>,
}

impl Series {
    fn sorted(&self) -> Vec<u64> {
        let mut sorted = self.samples_ns.clone();
        sorted.sort_unstable();
        sorted
    }

    /// p50, p99 (µs) and requests per second (= requests ÷ the sum of their round trips, so
    /// the harness's own checking between requests is not counted).
    fn summary(&self) -> Summary {
        let sorted = self.sorted();
        let percentile = |p: f64| {
            if sorted.is_empty() {
                return f64::NAN;
            }
            let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            sorted.get(rank - 1).copied().unwrap_or_default() as f64 / 1000.0
        };
        let total_s = self.samples_ns.iter().sum::<u64>() as f64 / 1e9;
        Summary {
            p50_us: percentile(0.50),
            p99_us: percentile(0.99),
            per_s: self.samples_ns.len() as f64 / total_s,
        }
    }
}

struct Summary {
    p50_us: f64,
    p99_us: f64,
    per_s: f64,
}

/// `n` requests on one side, ids from `first_id`, each timed and checked.
fn drive(
    side: &mut Side<'_>,
    first_id: usize,
    n: usize,
    series: &mut Series,
) -> anyhow::Result<()> {
    for id in first_id..first_id + n {
        let frame = side.request.frame(id);
        let elapsed = side.peer.round_trip(&frame)?;
        side.peer.check(&Value::from(id), side.expect)?;
        series
            .samples_ns
            .push(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
    }
    Ok(())
}

/// `warmup` untimed then `calls` timed requests per side, the sides alternating in `rounds`.
/// `between` runs after the warm-up (e.g. to sample memory).
fn alternate(
    direct: &mut Side<'_>,
    via: &mut Side<'_>,
    warmup: usize,
    calls: usize,
    rounds: usize,
    mut between: impl FnMut(&Peer),
) -> anyhow::Result<(Series, Series)> {
    let mut sink = Series::default();
    drive(direct, 1, warmup, &mut sink)?;
    drive(via, 1, warmup, &mut sink)?;
    between(via.peer);
    let mut direct_series = Series::default();
    let mut via_series = Series::default();
    let per_round = calls.div_ceil(rounds.max(1)).max(1);
    let mut next_id = warmup + 1;
    let mut remaining = calls;
    while remaining > 0 {
        let n = per_round.min(remaining);
        drive(direct, next_id, n, &mut direct_series)?;
        drive(via, next_id, n, &mut via_series)?;
        next_id += n;
        remaining -= n;
    }
    Ok((direct_series, via_series))
}

// ---------------------------------------------------------------------------------------------
// Tables

struct Row {
    metric: String,
    direct: String,
    via: String,
    added: String,
    target: String,
    /// `None`: no target for this row.
    ok: Option<bool>,
}

impl Row {
    fn new(metric: impl Into<String>, direct: String, via: String, added: String) -> Row {
        Row {
            metric: metric.into(),
            direct,
            via,
            added,
            target: String::new(),
            ok: None,
        }
    }

    fn target(mut self, target: impl Into<String>, ok: bool) -> Row {
        self.target = target.into();
        self.ok = Some(ok);
        self
    }
}

struct Table {
    title: String,
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl Table {
    fn new(title: impl Into<String>) -> Table {
        Table {
            title: title.into(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn print(&self) {
        let headers = ["metric", "direct", "via toolgate", "added/ratio", "target"];
        let cells = |row: &Row| {
            [
                row.metric.clone(),
                row.direct.clone(),
                row.via.clone(),
                row.added.clone(),
                row.target.clone(),
            ]
        };
        let mut widths = headers.map(|h| h.chars().count());
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(cells(row)) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |cells: [String; 5], verdict: &str| {
            let mut out = String::new();
            for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
                let pad = " ".repeat(width.saturating_sub(cell.chars().count()));
                if i == 0 {
                    out.push_str(&format!("{cell}{pad}"));
                } else {
                    out.push_str(&format!("  {pad}{cell}"));
                }
            }
            format!("{out}  {verdict}")
        };
        println!("== {}", self.title);
        println!("{}", line(headers.map(str::to_owned), "verdict"));
        for row in &self.rows {
            let verdict = match row.ok {
                None => "",
                Some(true) => "ok",
                Some(false) => "MISSED",
            };
            println!("{}", line(cells(row), verdict));
        }
        for note in &self.notes {
            println!("   {note}");
        }
        println!();
    }
}

fn us(v: f64) -> String {
    format!("{v:.1}")
}

/// The p50 and p99 rows of a section timed in milliseconds; the p50 added by toolgate is
/// held to `target_ms` (enforcement's latency target for that section).
fn millisecond_rows(table: &mut Table, d: &Summary, v: &Summary, target_ms: f64) {
    let added50_ms = (v.p50_us - d.p50_us) / 1000.0;
    table.rows.push(
        Row::new(
            "p50 round trip (ms)",
            ms(d.p50_us / 1000.0),
            ms(v.p50_us / 1000.0),
            plus(added50_ms, 2),
        )
        .target(format!("+≤{target_ms}"), added50_ms <= target_ms),
    );
    table.rows.push(Row::new(
        "p99 round trip (ms)",
        ms(d.p99_us / 1000.0),
        ms(v.p99_us / 1000.0),
        plus((v.p99_us - d.p99_us) / 1000.0, 2),
    ));
}

fn ms(v: f64) -> String {
    format!("{v:.2}")
}

fn plus(v: f64, digits: usize) -> String {
    format!("{v:+.digits$}")
}

fn mb(kb: Option<u64>) -> String {
    kb.map_or_else(
        || "n/a".to_owned(),
        |kb| format!("{:.1} MB", kb as f64 / MB as f64),
    )
}

fn p50_p99_rows(
    d: &Summary,
    v: &Summary,
    p50_target: f64,
    p99_target: f64,
    issue: &str,
) -> [Row; 2] {
    let added50 = v.p50_us - d.p50_us;
    let added99 = v.p99_us - d.p99_us;
    [
        Row::new(
            "p50 round trip (µs)",
            us(d.p50_us),
            us(v.p50_us),
            plus(added50, 1),
        )
        .target(format!("+≤{p50_target} ({issue})"), added50 <= p50_target),
        Row::new(
            "p99 round trip (µs)",
            us(d.p99_us),
            us(v.p99_us),
            plus(added99, 1),
        )
        .target(format!("+≤{p99_target} ({issue})"), added99 <= p99_target),
    ]
}

fn per_s_row(d: &Summary, v: &Summary) -> Row {
    Row::new(
        "sequential requests/s",
        format!("{:.0}", d.per_s),
        format!("{:.0}", v.per_s),
        format!("×{:.2}", v.per_s / d.per_s),
    )
    .target("≥50000", v.per_s >= 50_000.0)
}

fn peak_row(direct: &Peer, via: &Peer, limit_mb: u64, issue: &str) -> Row {
    let (direct_hwm, _) = direct.memory_kb();
    let (via_hwm, _) = via.memory_kb();
    Row::new(
        "peak RSS (VmHWM)",
        mb(direct_hwm),
        mb(via_hwm),
        String::new(),
    )
    .target(
        format!("≤{limit_mb} MB ({issue})"),
        via_hwm.is_some_and(|kb| kb <= limit_mb * MB),
    )
}

// ---------------------------------------------------------------------------------------------
// Suites

/// Everything a suite needs to start its two sides.
struct Setup<'a> {
    options: &'a Options,
    policy: PathBuf,
    state: &'a Path,
}

impl Setup<'_> {
    /// The direct and the wrapped command for `bench_upstream` with `upstream_args`; the
    /// wrapped one gets its own audit log and pin store under `<state>/<name>/`.
    fn commands(&self, name: &str, upstream_args: &[String]) -> anyhow::Result<(Cmd, Cmd)> {
        let dir = self.state.join(name);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir.join("pins"))
            .with_context(|| format!("cannot create `{}`", dir.display()))?;
        let mut upstream_argv: Vec<OsString> = vec![self.options.upstream.clone().into_os_string()];
        upstream_argv.extend(upstream_args.iter().map(OsString::from));
        let mut wrapped_argv: Vec<OsString> = vec![
            self.options.toolgate.clone().into_os_string(),
            "wrap".into(),
            "--policy".into(),
            self.policy.clone().into_os_string(),
            "--audit".into(),
            dir.join("audit.jsonl").into_os_string(),
            "--approval".into(),
            "none".into(),
            "--".into(),
        ];
        wrapped_argv.extend(upstream_argv.iter().cloned());
        Ok((
            Cmd {
                label: "upstream (direct)",
                argv: upstream_argv,
                envs: Vec::new(),
            },
            Cmd {
                label: "toolgate wrap",
                argv: wrapped_argv,
                envs: vec![(
                    OsString::from("TOOLGATE_PINS_DIR"),
                    dir.join("pins").into_os_string(),
                )],
            },
        ))
    }

    fn sessions(
        &self,
        name: &str,
        upstream_args: &[String],
        tools: usize,
    ) -> anyhow::Result<(Peer, Peer)> {
        let (direct_cmd, via_cmd) = self.commands(name, upstream_args)?;
        let mut direct = Peer::spawn(&direct_cmd, self.options.timeout)?;
        let mut via = Peer::spawn(&via_cmd, self.options.timeout)?;
        direct.initialize(tools)?;
        via.initialize(tools)?;
        Ok((direct, via))
    }
}

fn finish_both(mut direct: Peer, mut via: Peer) -> anyhow::Result<()> {
    let a = direct.finish();
    let b = via.finish();
    a.and(b)
}

fn suite_relay(setup: &Setup<'_>) -> anyhow::Result<Table> {
    let o = setup.options;
    let (mut direct, mut via) = setup.sessions("relay", &[], 2)?;
    let (ds, vs) = alternate(
        &mut Side {
            peer: &mut direct,
            request: Request::Ping,
            expect: Expect::Result,
        },
        &mut Side {
            peer: &mut via,
            request: Request::Ping,
            expect: Expect::Result,
        },
        o.warmup,
        o.calls,
        o.rounds,
        |_| {},
    )?;
    let (d, v) = (ds.summary(), vs.summary());
    let mut table = Table::new(format!(
        "relay: frames toolgate does not intercept (`ping`, passed through byte for byte); {} per side (+{} warm-up), {} rounds",
        o.calls, o.warmup, o.rounds
    ));
    table.rows.extend(p50_p99_rows(&d, &v, 15.0, 100.0, "#2"));
    table.rows.push(per_s_row(&d, &v));
    table.rows.push(peak_row(&direct, &via, 8, "#2"));
    // Both sides' last request had the same id: a pass-through reply is the same bytes.
    if direct.line == via.line {
        table
            .notes
            .push("the last reply through toolgate was byte for byte the direct one".to_owned());
    } else {
        table.notes.push(format!(
            "the last reply through toolgate differs from the direct one: {} vs {}",
            excerpt(&via.line),
            excerpt(&direct.line)
        ));
    }
    finish_both(direct, via)?;
    Ok(table)
}

fn suite_allowed(setup: &Setup<'_>) -> anyhow::Result<Table> {
    let o = setup.options;
    let args = if o.result_bytes > 0 {
        vec!["--result-bytes".to_owned(), o.result_bytes.to_string()]
    } else {
        Vec::new()
    };
    let (mut direct, mut via) = setup.sessions("allowed", &args, 2)?;
    let call = Request::Call("bench");
    let (ds, vs) = alternate(
        &mut Side {
            peer: &mut direct,
            request: call,
            expect: Expect::Result,
        },
        &mut Side {
            peer: &mut via,
            request: call,
            expect: Expect::Result,
        },
        o.warmup,
        o.calls,
        o.rounds,
        |_| {},
    )?;
    let (d, v) = (ds.summary(), vs.summary());
    let mut table = Table::new(format!(
        "allowed call: `tools/call` decided, audited, result taint-indexed; {} per side (+{} warm-up), {} rounds, result {}",
        o.calls,
        o.warmup,
        o.rounds,
        if o.result_bytes == 0 {
            "`ok`".to_owned()
        } else {
            format!("{} bytes", o.result_bytes)
        }
    ));
    table.rows.extend(p50_p99_rows(&d, &v, 25.0, 150.0, "#4"));
    table.rows.push(per_s_row(&d, &v));
    table.rows.push(peak_row(&direct, &via, 8, "#2"));
    finish_both(direct, via)?;
    Ok(table)
}

fn suite_denied(setup: &Setup<'_>) -> anyhow::Result<Table> {
    let o = setup.options;
    let (mut direct, mut via) = setup.sessions("denied", &[], 2)?;
    let (ds, vs) = alternate(
        &mut Side {
            peer: &mut direct,
            request: Request::Call("bench"),
            expect: Expect::Result,
        },
        &mut Side {
            peer: &mut via,
            request: Request::Call("blocked"),
            expect: Expect::Denied,
        },
        o.warmup,
        o.calls,
        o.rounds,
        |_| {},
    )?;
    let (d, v) = (ds.summary(), vs.summary());
    let mut table = Table::new(format!(
        "denied call: `tools/call` of `blocked`, answered by toolgate itself; {} per side (+{} warm-up), {} rounds",
        o.calls, o.warmup, o.rounds
    ));
    table.rows.push(
        Row::new(
            "p50 round trip (µs)",
            us(d.p50_us),
            us(v.p50_us),
            plus(v.p50_us - d.p50_us, 1),
        )
        .target("≤20 (absolute)", v.p50_us <= 20.0),
    );
    table.rows.push(Row::new(
        "p99 round trip (µs)",
        us(d.p99_us),
        us(v.p99_us),
        plus(v.p99_us - d.p99_us, 1),
    ));
    table.rows.push(Row::new(
        "sequential requests/s",
        format!("{:.0}", d.per_s),
        format!("{:.0}", v.per_s),
        format!("×{:.2}", v.per_s / d.per_s),
    ));
    table
        .notes
        .push("direct: the allowed call `bench` straight to the server, for reference; every denial was checked (isError, deny verdict)".to_owned());
    finish_both(direct, via)?;
    Ok(table)
}

fn suite_large(setup: &Setup<'_>) -> anyhow::Result<Table> {
    let o = setup.options;
    let mut args = vec!["--result-bytes".to_owned(), o.large_bytes.to_string()];
    if o.large_dense {
        args.push("--dense-result".to_owned());
    }
    let tools = if o.large_dense { 3 } else { 2 };
    let (mut direct, mut via) = setup.sessions("large", &args, tools)?;
    let warmup = (o.large_calls / 100).clamp(1, 20);
    let mut after_warmup = None;
    let call = Request::Call("bench");
    let (ds, vs) = alternate(
        &mut Side {
            peer: &mut direct,
            request: call,
            expect: Expect::Result,
        },
        &mut Side {
            peer: &mut via,
            request: call,
            expect: Expect::Result,
        },
        warmup,
        o.large_calls,
        o.rounds,
        |peer| after_warmup = peer.memory_kb().1,
    )?;
    let (d, v) = (ds.summary(), vs.summary());
    let (hwm, rss_end) = via.memory_kb();
    let (direct_hwm, direct_rss) = direct.memory_kb();
    let mut table = Table::new(format!(
        "large results: `tools/call` returning {} bytes of {} (new tokens each call); {} per side (+{} warm-up), {} rounds",
        o.large_bytes,
        if o.large_dense {
            "destination-dense text (an address and a URL on every line)"
        } else {
            "prose"
        },
        o.large_calls,
        warmup,
        o.rounds
    ));
    millisecond_rows(&mut table, &d, &v, 2.0);
    table.rows.push(Row::new(
        format!("VmRSS after {warmup} warm-up results"),
        String::new(),
        mb(after_warmup),
        String::new(),
    ));
    let growth = rss_end
        .zip(after_warmup)
        .map(|(end, start)| end as f64 - start as f64);
    table.rows.push(
        Row::new(
            format!("VmRSS after {} more results", o.large_calls),
            mb(direct_rss),
            mb(rss_end),
            growth.map_or_else(
                || "n/a".to_owned(),
                |kb| format!("{:+.1} MB", kb / MB as f64),
            ),
        )
        .target(
            "growth ≤16 MB (bounded)",
            growth.is_some_and(|kb| kb <= 16.0 * MB as f64),
        ),
    );
    table.rows.push(Row::new(
        "peak RSS (VmHWM)",
        mb(direct_hwm),
        mb(hwm),
        String::new(),
    ));
    if o.large_dense {
        sink_after_dense(o, &mut direct, &mut via, &mut table)?;
    }
    finish_both(direct, via)?;
    Ok(table)
}

/// The sink call right after a destination-dense result (it must wait for no indexing it does
/// not need: target ≤ 1 ms), to an address in the
/// middle of it (past the tokens indexed as it arrives): `send_email` runs directly, and
/// toolgate denies it as tainted. Each side alternates a dense result (untimed) and the
/// timed sink call, in the same sessions as the large results before.
fn sink_after_dense(
    o: &Options,
    direct: &mut Peer,
    via: &mut Peer,
    table: &mut Table,
) -> anyhow::Result<()> {
    let n = o.large_bytes / 200;
    let to: &'static str =
        Box::leak(format!("jane.roe{n}@customer{}.example", n % 97).into_boxed_str());
    let calls = o.large_calls.clamp(1, 200);
    let mut id = 1_000_000;
    let mut series = [Series::default(), Series::default()];
    for _ in 0..calls {
        for (side, (peer, expect)) in [(&mut *direct, Expect::Result), (&mut *via, Expect::Denied)]
            .into_iter()
            .enumerate()
        {
            peer.round_trip(&Request::Call("bench").frame(id))?;
            peer.check(&Value::from(id), Expect::Result)?;
            id += 1;
            let elapsed = peer.round_trip(&Request::Mail(to).frame(id))?;
            peer.check(&Value::from(id), expect)?;
            id += 1;
            if let Some(s) = series.get_mut(side) {
                s.samples_ns
                    .push(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
            }
        }
    }
    let [d, v] = series.map(|s| s.summary());
    let (d50, v50) = (d.p50_us / 1000.0, v.p50_us / 1000.0);
    let (d99, v99) = (d.p99_us / 1000.0, v.p99_us / 1000.0);
    table.rows.push(
        Row::new(
            format!(
                "`send_email` to an address of the result just received, p50 (ms; {calls} per side)"
            ),
            ms(d50),
            ms(v50),
            plus(v50 - d50, 3),
        )
        .target("≤1 ms (the sink decision that follows)", v50 <= 1.0),
    );
    table.rows.push(Row::new(
        "the same, p99 (ms)",
        ms(d99),
        ms(v99),
        plus(v99 - d99, 3),
    ));
    table.notes.push(format!(
        "sink call: `send_email` to `{to}`, which the result names; toolgate denies it (tainted), the server runs it"
    ));
    Ok(())
}

fn suite_list(setup: &Setup<'_>) -> anyhow::Result<Table> {
    let o = setup.options;
    let args = ["--tools".to_owned(), o.list_tools.to_string()];
    let (direct_cmd, via_cmd) = setup.commands("list", &args)?;
    let mut direct = Peer::spawn(&direct_cmd, o.timeout)?;
    let mut via = Peer::spawn(&via_cmd, o.timeout)?;
    let direct_first = direct.initialize(o.list_tools)?;
    let via_first = via.initialize(o.list_tools)?;
    let direct_bytes = direct.line.len();
    let via_bytes = via.line.len();
    let expect = Expect::Tools(o.list_tools);
    let warmup = (o.lists / 20).clamp(1, 10);
    let (ds, vs) = alternate(
        &mut Side {
            peer: &mut direct,
            request: Request::List,
            expect,
        },
        &mut Side {
            peer: &mut via,
            request: Request::List,
            expect,
        },
        warmup,
        o.lists,
        o.rounds,
        |_| {},
    )?;
    let (d, v) = (ds.summary(), vs.summary());
    let mut table = Table::new(format!(
        "tools/list of {} tools with realistic schemas ({} bytes); {} per side (+{} warm-up), {} rounds",
        o.list_tools, direct_bytes, o.lists, warmup, o.rounds
    ));
    let first_d = direct_first.as_secs_f64() * 1000.0;
    let first_v = via_first.as_secs_f64() * 1000.0;
    table.rows.push(Row::new(
        "first list, pins written (ms)",
        ms(first_d),
        ms(first_v),
        plus(first_v - first_d, 2),
    ));
    millisecond_rows(&mut table, &d, &v, 3.0);
    let (direct_hwm, _) = direct.memory_kb();
    let (via_hwm, _) = via.memory_kb();
    table.rows.push(Row::new(
        "peak RSS (VmHWM)",
        mb(direct_hwm),
        mb(via_hwm),
        String::new(),
    ));
    if via_bytes != direct_bytes {
        table.notes.push(format!(
            "the listing through toolgate has {via_bytes} bytes, the direct one {direct_bytes}"
        ));
    }
    finish_both(direct, via)?;
    Ok(table)
}

fn suite_rest(setup: &Setup<'_>) -> anyhow::Result<Table> {
    let (direct, via) = setup.sessions("rest", &[], 2)?;
    let (direct_hwm, direct_rss) = direct.memory_kb();
    let (hwm, rss) = via.memory_kb();
    let mut table =
        Table::new("memory at rest: after `initialize` + `tools/list`, before any call");
    table.rows.push(
        Row::new("peak RSS (VmHWM)", mb(direct_hwm), mb(hwm), String::new())
            .target("≤10 MB", hwm.is_some_and(|kb| kb <= 10 * MB)),
    );
    table.rows.push(
        Row::new("RSS (VmRSS)", mb(direct_rss), mb(rss), String::new())
            .target("≤10 MB", rss.is_some_and(|kb| kb <= 10 * MB)),
    );
    table.notes.push(
        "\"direct\" is bench_upstream's own; \"via toolgate\" is the toolgate process alone"
            .to_owned(),
    );
    finish_both(direct, via)?;
    Ok(table)
}

fn startup_ms(cmd: &Cmd, timeout: Duration) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    let mut peer = Peer::spawn(cmd, timeout)?;
    peer.round_trip(INITIALIZE.as_bytes())?;
    let elapsed = t0.elapsed();
    peer.check(&Value::from(0), Expect::Result)?;
    peer.finish()?;
    Ok(elapsed.as_secs_f64() * 1000.0)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn suite_startup(setup: &Setup<'_>) -> anyhow::Result<Table> {
    let o = setup.options;
    let (direct_cmd, via_cmd) = setup.commands("startup", &[])?;
    let mut direct = Vec::with_capacity(o.startup_runs);
    let mut via = Vec::with_capacity(o.startup_runs);
    for _ in 0..o.startup_runs {
        direct.push(startup_ms(&direct_cmd, o.timeout)?);
        via.push(startup_ms(&via_cmd, o.timeout)?);
    }
    let (d, v) = (median(&mut direct), median(&mut via));
    let mut table = Table::new(format!(
        "start-up: spawn to the `initialize` reply, median of {} fresh spawns per side (alternating)",
        o.startup_runs
    ));
    table.rows.push(
        Row::new("start-up (ms)", ms(d), ms(v), plus(v - d, 2)).target("+≤10", v - d <= 10.0),
    );
    Ok(table)
}

/// Runs the chosen suites; `Ok(false)` when one of them failed (the others still ran).
fn run() -> anyhow::Result<bool> {
    let Some(options) = parse_options()? else {
        return Ok(true);
    };
    // Private (0700) and removed at the end; toolgate warns about an audit log others can read.
    let state = tempfile::Builder::new()
        .prefix("toolgate-bench-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let policy = match &options.policy {
        Some(path) => path.clone(),
        None => {
            let path = state.path().join("policy.yaml");
            std::fs::write(&path, BENCH_POLICY)
                .with_context(|| format!("cannot write `{}`", path.display()))?;
            path
        }
    };
    let setup = Setup {
        options: &options,
        policy,
        state: state.path(),
    };
    println!(
        "toolgate benchmark: `{}` vs `{}` directly; suites: {}",
        options.toolgate.display(),
        options.upstream.display(),
        options
            .suites
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!();
    let mut all_ok = true;
    for suite in &options.suites {
        let started = Instant::now();
        let table = match suite {
            Suite::Relay => suite_relay(&setup),
            Suite::Allowed => suite_allowed(&setup),
            Suite::Denied => suite_denied(&setup),
            Suite::Large => suite_large(&setup),
            Suite::List => suite_list(&setup),
            Suite::Rest => suite_rest(&setup),
            Suite::Startup => suite_startup(&setup),
        };
        match table {
            Ok(mut table) => {
                table
                    .notes
                    .push(format!("({:.1} s)", started.elapsed().as_secs_f64()));
                table.print();
            }
            Err(err) => {
                all_ok = false;
                println!("== {}: failed: {err:#}", suite.name());
                println!();
            }
        }
    }
    Ok(all_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(line: &str, id: u64, expect: Expect) -> Result<(), String> {
        check_reply("peer", line.as_bytes(), &Value::from(id), expect).map_err(|e| format!("{e:#}"))
    }

    const DENIAL: &str = r#"{"jsonrpc":"2.0","id":7,"result":{"_meta":{"dev.toolgate/decision":{"contract":"rule","effect":"deny","rule":"bench-deny-blocked"}},"content":[{"type":"text","text":"toolgate blocked blocked"}],"isError":true}}"#;
    const ALLOWED: &str = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}],"isError":false}}"#;

    #[test]
    fn a_denial_is_recognised_and_only_a_denial() {
        assert_eq!(check(DENIAL, 7, Expect::Denied), Ok(()));
        // The call got through to the server: not a denial.
        let err = check(ALLOWED, 7, Expect::Denied).unwrap_err();
        assert!(
            err.contains("something else than toolgate's denial"),
            "{err}"
        );
        // An error result without toolgate's verdict is not a denial either.
        let plain_error = ALLOWED.replace(r#""isError":false"#, r#""isError":true"#);
        assert!(check(&plain_error, 7, Expect::Denied).is_err());
        // A denial where a result was expected is an error.
        assert!(
            check(DENIAL, 7, Expect::Result)
                .unwrap_err()
                .contains("an error result")
        );
    }

    #[test]
    fn replies_must_answer_the_request_sent() {
        assert_eq!(check(ALLOWED, 7, Expect::Result), Ok(()));
        assert!(
            check(ALLOWED, 8, Expect::Result)
                .unwrap_err()
                .contains("another id")
        );
        let error = r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}"#;
        assert!(
            check(error, 7, Expect::Result)
                .unwrap_err()
                .contains("no result")
        );
        assert!(
            check("{\"id\":7", 7, Expect::Result)
                .unwrap_err()
                .contains("not JSON")
        );
    }

    #[test]
    fn a_listing_must_have_the_expected_number_of_tools() {
        let list = r#"{"jsonrpc":"2.0","id":0,"result":{"tools":[{"name":"a"},{"name":"b"}]}}"#;
        assert_eq!(check(list, 0, Expect::Tools(2)), Ok(()));
        assert!(
            check(list, 0, Expect::Tools(1000))
                .unwrap_err()
                .contains("instead of 1000")
        );
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let series = Series {
            samples_ns: (1..=100).rev().map(|us| us * 1000).collect(),
        };
        let summary = series.summary();
        assert_eq!(summary.p50_us, 50.0);
        assert_eq!(summary.p99_us, 99.0);
        // 100 requests in 5,050 µs of round trips.
        assert!((summary.per_s - 100.0 / 0.00505).abs() < 1e-6);
    }

    #[test]
    fn suites_parse_by_name_and_all() {
        assert_eq!(Suite::parse_list("all").unwrap(), Suite::ALL.to_vec());
        assert_eq!(
            Suite::parse_list("denied, relay,denied").unwrap(),
            vec![Suite::Denied, Suite::Relay]
        );
        assert!(Suite::parse_list("relay,fast").is_err());
        assert!(Suite::parse_list(",").is_err());
    }
}
