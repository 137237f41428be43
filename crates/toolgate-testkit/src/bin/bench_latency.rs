//! `bench_latency`: end-to-end latency of the `toolgate wrap` relay against a direct call.
//!
//! In one run it drives `bench_upstream` directly and through `toolgate wrap -- bench_upstream`
//! with N sequential `tools/call` requests each (one in flight at a time, as an agent does),
//! alternating the two in rounds so that noise on a shared machine hits both alike. It reports
//! p50/p99 latency of each, the added p50/p99, sequential calls/s, the peak RSS of the toolgate
//! process (`VmHWM` from `/proc/<pid>/status`), and the start-up time to the first response
//! (`initialize`) with and without toolgate.
//!
//! toolgate runs with a policy that allows every call (`default: allow`, no packs; override
//! with `--policy`), `--approval none`, and a private audit log and pin store in a temp dir,
//! so the figures include the real decision path (policy evaluation, pinning, audit record)
//! of an allowed call. Each session lists its tools once after `initialize`, as clients do
//! (toolgate pins tool definitions from `tools/list`).
//!
//! A plain binary rather than a criterion bench: what matters here is the latency
//! *distribution* (p99) of a long-lived pipe pair, the RSS and the start-up of a child process;
//! criterion's per-iteration sampling model measures means of a closure and would hide the tail.
//!
//! Build and run (release):
//! `cargo build --release -p toolgate -p toolgate-testkit --bins && target/release/bench_latency`

#![allow(clippy::print_stdout)]

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench_latency","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":"list","method":"tools/list"}"#;
const ALLOW_ALL_POLICY: &str = "version: 1\ndefault: allow\npacks: []\n";

/// Relay targets from issue 2.
const TARGET_ADDED_P50_US: f64 = 15.0;
const TARGET_ADDED_P99_US: f64 = 100.0;
const TARGET_CALLS_PER_S: f64 = 50_000.0;
const TARGET_RSS_KB: u64 = 8 * 1024;
const TARGET_ADDED_STARTUP_MS: f64 = 10.0;

#[derive(Debug)]
struct Options {
    toolgate: PathBuf,
    upstream: PathBuf,
    calls: usize,
    warmup: usize,
    rounds: usize,
    startup_runs: usize,
    result_bytes: usize,
    policy: Option<PathBuf>,
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bench_latency: {err:#}");
            ExitCode::from(1)
        }
    }
}

const USAGE: &str = "usage: bench_latency [--calls N] [--warmup N] [--rounds N] [--startup-runs N] \
[--result-bytes N] [--toolgate PATH] [--upstream PATH] [--policy PATH]";

fn parse_options() -> anyhow::Result<Options> {
    let exe = std::env::current_exe().context("cannot locate the bench_latency executable")?;
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut options = Options {
        toolgate: dir.join("toolgate"),
        upstream: dir.join("bench_upstream"),
        calls: 20_000,
        warmup: 2_000,
        rounds: 5,
        startup_runs: 21,
        result_bytes: 0,
        policy: None,
    };
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        let arg = arg.to_string_lossy().into_owned();
        if arg == "--help" || arg == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
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
            "--calls" => options.calls = number()?,
            "--warmup" => options.warmup = number()?,
            "--rounds" => options.rounds = number()?.max(1),
            "--startup-runs" => options.startup_runs = number()?.max(1),
            "--result-bytes" => options.result_bytes = number()?,
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
    Ok(options)
}

/// One MCP peer process on a pipe pair.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Peer {
    fn spawn(cmd: &Cmd) -> anyhow::Result<Peer> {
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
        Ok(Peer {
            child,
            stdin,
            stdout: BufReader::with_capacity(256 * 1024, stdout),
            line: String::with_capacity(4096),
        })
    }

    /// Writes one frame and reads one reply line.
    fn round_trip(&mut self, frame: &[u8]) -> anyhow::Result<()> {
        self.send(frame)?;
        self.line.clear();
        if self.stdout.read_line(&mut self.line)? == 0 {
            bail!("the peer closed its stdout");
        }
        if self.line.contains("\"error\"") || self.line.contains("\"isError\":true") {
            bail!("the peer answered with an error: {}", self.line.trim_end());
        }
        Ok(())
    }

    fn send(&mut self, frame: &[u8]) -> anyhow::Result<()> {
        self.stdin.write_all(frame)?;
        self.stdin.write_all(b"\n")?;
        self.stdin.flush()?;
        Ok(())
    }

    fn initialize(&mut self) -> anyhow::Result<()> {
        self.round_trip(INITIALIZE.as_bytes())?;
        self.send(INITIALIZED.as_bytes())?;
        self.round_trip(TOOLS_LIST.as_bytes())
    }

    fn peak_rss_kb(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status.lines().find_map(|line| {
            let rest = line.strip_prefix("VmHWM:")?;
            rest.trim().trim_end_matches("kB").trim().parse().ok()
        })
    }

    /// Closes stdin and waits (bounded) for the process to exit; kills it after 5 s.
    fn finish(self) -> anyhow::Result<()> {
        let Peer {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if child.try_wait()?.is_some() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                child.kill()?;
                child.wait()?;
                bail!("the peer did not exit within 5 s of stdin EOF; killed it");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

struct Series {
    samples_ns: Vec<u64>,
    busy: Duration,
}

impl Series {
    fn new(capacity: usize) -> Series {
        Series {
            samples_ns: Vec::with_capacity(capacity),
            busy: Duration::ZERO,
        }
    }

    fn percentile_us(&self, sorted: &[u64], p: f64) -> f64 {
        if sorted.is_empty() {
            return f64::NAN;
        }
        let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted.get(rank - 1).copied().unwrap_or_default() as f64 / 1000.0
    }

    fn summary(&self) -> (f64, f64, f64) {
        let mut sorted = self.samples_ns.clone();
        sorted.sort_unstable();
        let calls_per_s = self.samples_ns.len() as f64 / self.busy.as_secs_f64();
        (
            self.percentile_us(&sorted, 0.50),
            self.percentile_us(&sorted, 0.99),
            calls_per_s,
        )
    }
}

fn call_frame(id: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"bench","arguments":{{}}}}}}"#
    )
}

fn drive(
    peer: &mut Peer,
    first_id: usize,
    calls: usize,
    series: &mut Series,
) -> anyhow::Result<()> {
    let started = Instant::now();
    for id in first_id..first_id + calls {
        let frame = call_frame(id);
        let t0 = Instant::now();
        peer.round_trip(frame.as_bytes())?;
        let elapsed = t0.elapsed();
        series
            .samples_ns
            .push(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
    }
    series.busy += started.elapsed();
    Ok(())
}

fn startup_ms(cmd: &Cmd) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    let mut peer = Peer::spawn(cmd)?;
    peer.round_trip(INITIALIZE.as_bytes())?;
    let elapsed = t0.elapsed();
    peer.finish()?;
    Ok(elapsed.as_secs_f64() * 1000.0)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "MISSED" }
}

/// A command line and its extra environment.
struct Cmd {
    argv: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
}

/// A private directory for toolgate's policy, audit log and pins; removed on drop.
struct StateDir(PathBuf);

impl StateDir {
    fn create() -> anyhow::Result<StateDir> {
        let dir = std::env::temp_dir().join(format!("toolgate-bench-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("pins"))
            .with_context(|| format!("cannot create `{}`", dir.display()))?;
        Ok(StateDir(dir))
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run() -> anyhow::Result<()> {
    let options = parse_options()?;
    let state = StateDir::create()?;
    let policy = match &options.policy {
        Some(path) => path.clone(),
        None => {
            let path = state.0.join("policy.yaml");
            std::fs::write(&path, ALLOW_ALL_POLICY)?;
            path
        }
    };
    let mut upstream_argv: Vec<OsString> = vec![options.upstream.clone().into_os_string()];
    if options.result_bytes > 0 {
        upstream_argv.push("--result-bytes".into());
        upstream_argv.push(options.result_bytes.to_string().into());
    }
    let mut wrapped_argv: Vec<OsString> = vec![
        options.toolgate.clone().into_os_string(),
        "wrap".into(),
        "--policy".into(),
        policy.into_os_string(),
        "--audit".into(),
        state.0.join("audit.jsonl").into_os_string(),
        "--approval".into(),
        "none".into(),
        "--".into(),
    ];
    wrapped_argv.extend(upstream_argv.iter().cloned());
    let upstream = Cmd {
        argv: upstream_argv,
        envs: Vec::new(),
    };
    let wrapped = Cmd {
        argv: wrapped_argv,
        envs: vec![(
            OsString::from("TOOLGATE_PINS_DIR"),
            state.0.join("pins").into_os_string(),
        )],
    };

    // Start-up to the first response, alternating so both see the same machine load.
    let mut direct_startup = Vec::with_capacity(options.startup_runs);
    let mut wrapped_startup = Vec::with_capacity(options.startup_runs);
    for _ in 0..options.startup_runs {
        direct_startup.push(startup_ms(&upstream)?);
        wrapped_startup.push(startup_ms(&wrapped)?);
    }

    // Sequential calls on two long-lived sessions, alternating in rounds.
    let mut direct = Peer::spawn(&upstream)?;
    let mut relay = Peer::spawn(&wrapped)?;
    direct.initialize()?;
    relay.initialize()?;
    let mut sink = Series::new(options.warmup);
    drive(&mut direct, 1, options.warmup, &mut sink)?;
    drive(&mut relay, 1, options.warmup, &mut sink)?;
    let mut direct_series = Series::new(options.calls);
    let mut relay_series = Series::new(options.calls);
    let per_round = options.calls.div_ceil(options.rounds);
    let mut next_id = options.warmup + 1;
    let mut remaining = options.calls;
    while remaining > 0 {
        let n = per_round.min(remaining);
        drive(&mut direct, next_id, n, &mut direct_series)?;
        drive(&mut relay, next_id, n, &mut relay_series)?;
        next_id += n;
        remaining -= n;
    }
    let relay_rss = relay.peak_rss_kb();
    let upstream_rss = direct.peak_rss_kb();
    direct.finish()?;
    relay.finish()?;

    let (d50, d99, dcps) = direct_series.summary();
    let (r50, r99, rcps) = relay_series.summary();
    let ds = median(&mut direct_startup);
    let rs = median(&mut wrapped_startup);

    println!(
        "toolgate relay benchmark: {} sequential tools/call per side (+{} warm-up), {} rounds, result {} bytes",
        options.calls, options.warmup, options.rounds, options.result_bytes
    );
    println!();
    println!(
        "{:<28} {:>12} {:>14} {:>12} {:>14}  verdict",
        "metric", "direct", "via toolgate", "added", "target"
    );
    println!(
        "{:<28} {:>12.1} {:>14.1} {:>12.1} {:>14}  {}",
        "p50 latency (µs)",
        d50,
        r50,
        r50 - d50,
        format!("+≤{TARGET_ADDED_P50_US}"),
        verdict(r50 - d50 <= TARGET_ADDED_P50_US)
    );
    println!(
        "{:<28} {:>12.1} {:>14.1} {:>12.1} {:>14}  {}",
        "p99 latency (µs)",
        d99,
        r99,
        r99 - d99,
        format!("+≤{TARGET_ADDED_P99_US}"),
        verdict(r99 - d99 <= TARGET_ADDED_P99_US)
    );
    println!(
        "{:<28} {:>12.0} {:>14.0} {:>12} {:>14}  {}",
        "sequential calls/s",
        dcps,
        rcps,
        format!("×{:.2}", rcps / dcps),
        format!("≥{TARGET_CALLS_PER_S}"),
        verdict(rcps >= TARGET_CALLS_PER_S)
    );
    println!(
        "{:<28} {:>12.2} {:>14.2} {:>12.2} {:>14}  {}",
        format!("start-up (ms, median of {})", options.startup_runs),
        ds,
        rs,
        rs - ds,
        format!("+≤{TARGET_ADDED_STARTUP_MS}"),
        verdict(rs - ds <= TARGET_ADDED_STARTUP_MS)
    );
    let rss = |kb: Option<u64>| {
        kb.map_or_else(
            || "n/a".to_owned(),
            |kb| format!("{:.1} MB", kb as f64 / 1024.0),
        )
    };
    println!(
        "{:<28} {:>12} {:>14} {:>12} {:>14}  {}",
        "peak RSS (VmHWM)",
        rss(upstream_rss),
        rss(relay_rss),
        "",
        "≤8 MB",
        verdict(relay_rss.is_some_and(|kb| kb <= TARGET_RSS_KB))
    );
    println!();
    println!(
        "(\"direct\" RSS is bench_upstream's own; \"via toolgate\" RSS is the toolgate process alone.)"
    );
    Ok(())
}
