//! `bench_hook`: the cost of one hook invocation, as a client pays it: a new process per
//! event (start, read stdin, connect to the warm broker, decide, print, exit), measured from
//! spawn to exit, and the peak RSS of the hook processes. `--toolgate` names the executable:
//! `toolgate-hook` (what `toolgate init --hooks` installs; the default) or `toolgate`, which
//! is run as `toolgate hook`.
//!
//! ```sh
//! cargo build --release -p toolgate -p toolgate-testkit
//! target/release/bench_hook --toolgate target/release/toolgate-hook --runs 1000
//! target/release/bench_hook --toolgate target/release/toolgate --runs 1000
//! ```
//!
//! It starts its own broker (the first hook does, as in real use) in a temporary directory,
//! runs a warm-up, then `--runs` invocations of each event kind in turn: a Claude Code
//! `PreToolUse` of `Bash` (`npm test`, allowed), a `PreToolUse` of an MCP `send_email` (the
//! sink gate), a `PostToolUse` with a 64 KiB tool output (indexed for taint) and a
//! `UserPromptSubmit`. Prints p50 / p99 / max per kind and the peak RSS of any hook process
//! (`getrusage(RUSAGE_CHILDREN)`); then, apart, `--runs` prompts that each name a new address,
//! which the broker writes to its session store before answering. The broker is stopped at
//! the end. The broker directory is in the temporary directory (`TMPDIR`), and so is the
//! hooks' `HOME`, where each prompt is written to Claude Code's transcript before its event
//! (a prompt vouches for its destinations only once the transcript holds it).
#![allow(
    clippy::print_stdout,
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a benchmark tool: its report is printed; statistics over counts and durations, far from the limits of the types"
)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const POLICY: &str = r#"version: 1
default: ask
rules:
  - id: allow-tests
    effect: allow
    operations: [shell.exec]
    commands:
      - [npm, test]
  - id: allow-mail
    effect: allow
    operations: [unknown]
    tools: [send_email]
"#;

struct Options {
    toolgate: PathBuf,
    runs: usize,
    warmup: usize,
}

fn options() -> Options {
    let mut o = Options {
        toolgate: PathBuf::new(),
        runs: 500,
        warmup: 50,
    };
    let mut toolgate = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next().unwrap_or_else(|| {
                eprintln!("bench_hook: `{arg}` needs a value");
                std::process::exit(2)
            })
        };
        match arg.as_str() {
            "--toolgate" => toolgate = Some(PathBuf::from(value())),
            "--runs" => o.runs = value().parse().unwrap_or(o.runs),
            "--warmup" => o.warmup = value().parse().unwrap_or(o.warmup),
            other => {
                eprintln!("bench_hook: unknown argument `{other}`");
                std::process::exit(2);
            }
        }
    }
    o.toolgate = toolgate.unwrap_or_else(|| toolgate_testkit::built_binary("toolgate-hook"));
    o
}

/// Claude Code's transcript of the bench's session, in the hooks' `HOME`.
fn transcript(base: &Path) -> PathBuf {
    base.join("home/.claude/projects/-bench/bench.jsonl")
}

/// Appends a prompt to the transcript as Claude Code records what the user typed.
fn typed(base: &Path, text: &str) {
    let path = transcript(base);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let line = json!({
        "type": "user", "isSidechain": false, "sessionId": "bench",
        "message": {"role": "user", "content": text}
    });
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| writeln!(f, "{line}"));
    if let Err(e) = written {
        eprintln!("bench_hook: cannot write the transcript: {e}");
        std::process::exit(1)
    }
}

fn event(base: &Path, name: &str, extra: Value) -> Vec<u8> {
    let mut v = json!({
        "session_id": "bench",
        "transcript_path": transcript(base),
        "cwd": base.join("project"),
        "permission_mode": "default",
        "hook_event_name": name,
    });
    if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
        o.extend(e);
    }
    v.to_string().into_bytes()
}

/// One hook invocation: wall time from spawn to exit, and its exit code.
fn once(o: &Options, base: &Path, input: &[u8]) -> (Duration, Option<i32>) {
    let start = Instant::now();
    let mut command = Command::new(&o.toolgate);
    if o.toolgate.file_name().is_none_or(|n| n != "toolgate-hook") {
        command.arg("hook");
    }
    let mut child = command
        .args(["claude-code", "--session", "bench", "--policy"])
        .arg(base.join("policy.yaml"))
        .env("TOOLGATE_BROKER_DIR", base.join("b"))
        .env("HOME", base.join("home"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("bench_hook: cannot start toolgate: {e}");
            std::process::exit(1)
        });
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input);
    }
    let status = child.wait().ok().and_then(|s| s.code());
    (start.elapsed(), status)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted
        .get(rank.min(sorted.len() - 1))
        .copied()
        .unwrap_or_default()
}

/// The peak RSS of the largest child waited for, in KiB (`getrusage(RUSAGE_CHILDREN)`).
#[allow(
    unsafe_code,
    reason = "getrusage(2) through libc, the only way to read the children's peak RSS"
)]
fn max_child_rss_kb() -> i64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable `rusage`; getrusage only writes into it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) };
    if rc != 0 {
        return -1;
    }
    // SAFETY: getrusage succeeded, so it initialised the struct.
    unsafe { usage.assume_init() }.ru_maxrss
}

fn stop_broker(o: &Options, base: &Path) {
    let out = Command::new(&o.toolgate)
        .arg("status")
        .env("TOOLGATE_BROKER_DIR", base.join("b"))
        .env("HOME", base.join("home"))
        .output();
    let Ok(out) = out else { return };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let pid = text
        .find("reachable (pid ")
        .and_then(|at| text.get(at + "reachable (pid ".len()..))
        .and_then(|rest| rest.split(')').next())
        .and_then(|p| p.parse::<u32>().ok());
    if let Some(pid) = pid {
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }
}

fn main() {
    let o = options();
    let dir = tempfile::tempdir().unwrap_or_else(|e| {
        eprintln!("bench_hook: no temp dir: {e}");
        std::process::exit(1)
    });
    let base = dir
        .path()
        .canonicalize()
        .unwrap_or_else(|_| dir.path().to_path_buf());
    let project = base.join("project");
    let _ = std::fs::create_dir_all(&project);
    let _ = std::fs::write(base.join("policy.yaml"), POLICY);
    let output =
        "lorem ipsum dolor sit amet, see https://docs.example.com/page and mail bob@corp.example. "
            .repeat(64 * 1024 / 90);
    let prompt = "reply to bob@corp.example and open https://docs.example.com/page";
    typed(&base, prompt);
    let kinds: Vec<(&str, Vec<u8>, i32)> = vec![
        (
            "PreToolUse Bash (allowed)",
            event(
                &base,
                "PreToolUse",
                json!({"tool_name": "Bash", "tool_input": {"command": "npm test"}, "tool_use_id": "t"}),
            ),
            0,
        ),
        (
            "PreToolUse mcp__mail__send_email (sink gate)",
            event(
                &base,
                "PreToolUse",
                json!({"tool_name": "mcp__mail__send_email", "tool_input": {"to": ["bob@corp.example"], "subject": "s", "body": "b"}, "tool_use_id": "t"}),
            ),
            0,
        ),
        (
            "PostToolUse Bash, 64 KiB output",
            event(
                &base,
                "PostToolUse",
                json!({"tool_name": "Bash", "tool_input": {"command": "cat notes"}, "tool_response": {"stdout": output, "stderr": "", "interrupted": false}, "tool_use_id": "t"}),
            ),
            0,
        ),
        (
            "UserPromptSubmit",
            event(&base, "UserPromptSubmit", json!({ "prompt": prompt })),
            0,
        ),
    ];
    // The first hook starts the broker; the warm-up compiles the policy and fills caches.
    let cold = once(
        &o,
        &base,
        kinds.first().map(|k| k.1.as_slice()).unwrap_or_default(),
    );
    println!(
        "first hook (starts the broker): {:.2} ms",
        cold.0.as_secs_f64() * 1e3
    );
    for i in 0..o.warmup {
        if let Some((_, input, _)) = kinds.get(i % kinds.len()) {
            once(&o, &base, input);
        }
    }
    println!(
        "toolgate hook claude-code, {} runs per event kind (after {} warm-up runs):",
        o.runs, o.warmup
    );
    let mut all = Vec::new();
    for (name, input, expected) in &kinds {
        let mut times = Vec::with_capacity(o.runs);
        let mut wrong = 0;
        for _ in 0..o.runs {
            let (t, code) = once(&o, &base, input);
            if code != Some(*expected) {
                wrong += 1;
            }
            times.push(t);
        }
        times.sort();
        all.extend(times.iter().copied());
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "  {name:<46} p50 {:6.2} ms  p99 {:6.2} ms  max {:6.2} ms{}",
            ms(percentile(&times, 50.0)),
            ms(percentile(&times, 99.0)),
            ms(percentile(&times, 100.0)),
            if wrong > 0 {
                format!("  ({wrong} unexpected exit codes)")
            } else {
                String::new()
            }
        );
    }
    all.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "  {:<46} p50 {:6.2} ms  p99 {:6.2} ms",
        "all events",
        ms(percentile(&all, 50.0)),
        ms(percentile(&all, 99.0))
    );
    // Not in "all events": each run names a destination the session has not seen, so the
    // broker writes it to its session store (one durable commit) before answering.
    let mut fresh = Vec::with_capacity(o.runs);
    for n in 0..o.runs {
        let text = format!("reply to user{n}@corp{n}.example");
        typed(&base, &text);
        let input = event(&base, "UserPromptSubmit", json!({ "prompt": text }));
        fresh.push(once(&o, &base, &input).0);
    }
    fresh.sort();
    println!(
        "  {:<46} p50 {:6.2} ms  p99 {:6.2} ms  max {:6.2} ms",
        "UserPromptSubmit, a new address each (a write)",
        ms(percentile(&fresh, 50.0)),
        ms(percentile(&fresh, 99.0)),
        ms(percentile(&fresh, 100.0))
    );
    println!(
        "peak RSS of any hook process: {:.2} MiB",
        max_child_rss_kb() as f64 / 1024.0
    );
    stop_broker(&o, &base);
}
