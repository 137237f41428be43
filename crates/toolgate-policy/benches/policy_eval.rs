//! Evaluation and loading benchmarks, against the policy engine's targets:
//! - one call with the starter policy (target p50 ≤ 5 µs),
//! - one call with 500 rules (target p99 ≤ 20 µs),
//! - loading a 500-rule policy (target ≤ 20 ms).
//!
//! Run: `cargo bench -p toolgate-policy --bench policy_eval`. Besides criterion's report,
//! the bench prints p50/p99 of single calls measured one by one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::indexing_slicing,
    reason = "a benchmark tool: a failed setup step aborts the run with a message; a benchmark tool: its report is printed"
)]

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, criterion_group};
use serde_json::{Value, json};
use toolgate_policy::{
    Engine, LexicalFs, NormalizeContext, STARTER_POLICY, Session, SessionLimits, TaintLimits,
    ToolCall, Vars, load,
};

fn vars() -> Vars {
    Vars {
        workspace: "/home/u/project".into(),
        home: "/home/u".into(),
    }
}

fn engine(src: &str) -> Engine {
    Engine::new(load(src, "bench.yaml").unwrap().policy, vars()).unwrap()
}

fn session() -> Session {
    let mut limits = SessionLimits::new(TaintLimits::default());
    limits.pinning = false;
    Session::new(limits)
}

/// 500 rules that a typical call has to look through: most never match it, a deny near
/// the end does.
fn policy_500() -> String {
    let mut s = String::from("version: 1\ndefault: ask\nrules:\n");
    for i in 0..496 {
        match i % 4 {
            0 => s.push_str(&format!(
                "  - {{id: r{i}, effect: allow, operations: [fs.read], resources: ['${{workspace}}/dir{i}/**']}}\n"
            )),
            1 => s.push_str(&format!(
                "  - {{id: r{i}, effect: deny, operations: [fs.write, fs.delete], resources: ['**/secret{i}/**']}}\n"
            )),
            2 => s.push_str(&format!(
                "  - {{id: r{i}, effect: allow, operations: [shell.exec], commands: [[tool{i}, run]]}}\n"
            )),
            _ => s.push_str(&format!(
                "  - {{id: r{i}, effect: allow, operations: [net.request], hosts: ['api{i}.example.com'], methods: [GET]}}\n"
            )),
        }
    }
    s.push_str(
        "  - {id: protect-env, effect: deny, operations: [fs.read], resources: ['**/.env']}\n",
    );
    s.push_str(
        "  - {id: ws, effect: allow, operations: [fs.read], resources: ['${workspace}/**']}\n",
    );
    s.push_str("  - {id: rm, effect: deny, operations: [shell.exec], executables: [rm]}\n");
    s.push_str("  - {id: last, effect: ask, operations: [unknown]}\n");
    s
}

fn decide_once(engine: &Engine, session: &mut Session, tool: &str, args: &Value) -> u8 {
    let fs = LexicalFs;
    let ctx = NormalizeContext {
        workspace: "/home/u/project",
        home: "/home/u",
        fs: &fs,
    };
    let call = ToolCall {
        server: Some("filesystem"),
        tool,
        arguments: args,
        definition: None,
    };
    engine.decide(&call, session, &ctx, 0).effect as u8
}

/// p50 and p99 in microseconds of `n` single calls timed one by one.
fn quantiles(engine: &Engine, tool: &str, args: &Value, n: usize) -> (f64, f64) {
    let mut s = session();
    for _ in 0..1000 {
        black_box(decide_once(engine, &mut s, tool, args));
    }
    let mut times: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            black_box(decide_once(engine, &mut s, tool, args));
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    (times[n / 2], times[n * 99 / 100])
}

fn bench(c: &mut Criterion) {
    let starter = engine(STARTER_POLICY);
    let big_src = policy_500();
    let big = engine(&big_src);
    let read = json!({"path": "src/main.rs"});
    let env = json!({"path": "config/.env"});
    let shell = json!({"command": "sudo rm -rf build"});

    let mut s = session();
    c.bench_function("decide/starter/read_file", |b| {
        b.iter(|| decide_once(&starter, &mut s, "read_file", black_box(&read)))
    });
    c.bench_function("decide/starter/execute_command", |b| {
        b.iter(|| decide_once(&starter, &mut s, "execute_command", black_box(&shell)))
    });
    c.bench_function("decide/500_rules/read_file", |b| {
        b.iter(|| decide_once(&big, &mut s, "read_file", black_box(&read)))
    });
    c.bench_function("decide/500_rules/read_dotenv", |b| {
        b.iter(|| decide_once(&big, &mut s, "read_file", black_box(&env)))
    });
    c.bench_function("load/500_rules", |b| {
        b.iter(|| {
            let loaded = load(black_box(&big_src), "bench.yaml").unwrap();
            Engine::new(loaded.policy, vars()).unwrap()
        })
    });

    // Where loading time goes (single runs, milliseconds).
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let parsed: toolgate_policy::Policy = serde_saphyr::from_str(&big_src).unwrap();
    let parse_ms = ms(t);
    let t = Instant::now();
    let _ = toolgate_policy::diag::SourceMap::build(&big_src);
    let map_ms = ms(t);
    let t = Instant::now();
    let loaded = load(&big_src, "bench.yaml").unwrap();
    let load_ms = ms(t);
    let t = Instant::now();
    let packs = toolgate_policy::contracts::packs::pack_names();
    let _ = toolgate_policy::contracts::Contracts::compile(&parsed.tools, &packs).unwrap();
    let contracts_ms = ms(t);
    let t = Instant::now();
    let _ = Engine::new(loaded.policy, vars()).unwrap();
    let engine_ms = ms(t);
    eprintln!(
        "loading 500 rules: parse {parse_ms:.1} ms, source map {map_ms:.1} ms, load() {load_ms:.1} ms (incl. contracts {contracts_ms:.1} ms), Engine::new {engine_ms:.1} ms"
    );

    for (name, e, tool, args) in [
        ("starter read_file", &starter, "read_file", &read),
        (
            "starter execute_command",
            &starter,
            "execute_command",
            &shell,
        ),
        ("500 rules read_file", &big, "read_file", &read),
        ("500 rules read .env", &big, "read_file", &env),
    ] {
        let (p50, p99) = quantiles(e, tool, args, 20_000);
        eprintln!("single calls, {name}: p50 {p50:.2} µs, p99 {p99:.2} µs");
    }
}

criterion_group!(benches, bench);

/// The per-call work of `toolgate wrap` for an allowed call under
/// `{version: 1, default: allow, packs: []}` with pinning on: `Engine::decide` of a
/// pinned `read_file`, then `record_output` of its 2-byte result "ok", `n` times.
fn calls_only(n: usize) {
    let engine = engine("version: 1\ndefault: allow\npacks: []\n");
    let mut s = Session::new(SessionLimits::new(TaintLimits::default()));
    let definition = json!({
        "name": "read_file",
        "description": "Read a file",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "annotations": {"readOnlyHint": true}
    });
    s.pin_tools(std::slice::from_ref(&definition));
    s.listing_complete();
    let args = json!({"path": "src/main.rs"});
    let result = json!({"content": [{"type": "text", "text": "ok"}]});
    for _ in 0..n {
        let effect = decide_once(&engine, &mut s, "read_file", black_box(&args));
        assert_eq!(effect, toolgate_policy::Effect::Allow as u8);
        engine.contracts().record_output(
            &mut s,
            Some("filesystem"),
            "read_file",
            black_box(&result),
        );
    }
}

/// `n` decisions with the 500-rule policy: `read_file` of a workspace file (allowed by the
/// second-last fs rule) and of a `.env` (denied), alternating.
fn decide_500_only(n: usize) {
    let big = engine(&policy_500());
    let mut s = session();
    let read = json!({"path": "src/main.rs"});
    let env = json!({"path": "config/.env"});
    for i in 0..n {
        let args = if i % 2 == 0 { &read } else { &env };
        black_box(decide_once(&big, &mut s, "read_file", black_box(args)));
    }
}

/// `POLICY_LOAD_ONLY=N` loads and compiles the 500-rule policy N times and exits, without
/// criterion: a small, repeatable workload for `valgrind --tool=callgrind`.
/// `POLICY_CALLS_ONLY=N` runs [`calls_only`] instead, `POLICY_DECIDE_500_ONLY=N`
/// [`decide_500_only`].
fn main() {
    let count = |v: std::ffi::OsString| v.to_str().and_then(|s| s.parse().ok()).unwrap_or(1);
    if let Some(n) = std::env::var_os("POLICY_CALLS_ONLY") {
        calls_only(count(n));
        return;
    }
    if let Some(n) = std::env::var_os("POLICY_DECIDE_500_ONLY") {
        decide_500_only(count(n));
        return;
    }
    if let Some(n) = std::env::var_os("POLICY_LOAD_ONLY") {
        let n: usize = n.to_str().and_then(|s| s.parse().ok()).unwrap_or(1);
        let src = policy_500();
        for _ in 0..n {
            let loaded = load(black_box(&src), "bench.yaml").unwrap();
            black_box(Engine::new(loaded.policy, vars()).unwrap());
        }
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
