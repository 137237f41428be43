//! `toolgate audit verify|summary|tail`: read and check the audit log.
//!
//! Exit codes: 0 when the log is intact, 1 when its chain is broken (with the located
//! problem on stderr), 2 when it cannot be read at all.
#![allow(clippy::print_stdout, reason = "this command's output is its stdout")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use toolgate_audit::printable;

use anyhow::Context as _;
use clap::{Args as ClapArgs, Subcommand};
use toolgate_audit::{ApprovalHow, ApprovalScope, Kind, Record, Verification};
// Where `toolgate wrap` writes by default, relative to the workspace (here: the current
// directory).
use toolgate_runtime::paths::DEFAULT_AUDIT;

/// Arguments of `toolgate audit`.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:
  toolgate audit verify
  toolgate audit summary --audit ~/project/.toolgate/audit.jsonl
  toolgate audit tail -n 20")]
pub struct Args {
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(Debug, ClapArgs)]
struct LogArg {
    /// The audit log.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_AUDIT)]
    audit: PathBuf,
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Check the hash chain: report the first edited, deleted, inserted or reordered record.
    #[command(after_help = "Examples:
  toolgate audit verify
  toolgate audit verify --audit ~/project/.toolgate/audit.jsonl
  toolgate audit verify --audit gw-a.jsonl --audit gw-b.jsonl   # a gateway's replicas

Each log is checked on its own (every replica of a gateway writes its own chain).
Exit status: 0 when every chain is intact, 1 when one is broken, 2 when a log cannot be read.")]
    Verify {
        /// The audit log; repeat for several (e.g. one per gateway replica).
        #[arg(long, value_name = "PATH", default_value = DEFAULT_AUDIT, num_args = 1..)]
        audit: Vec<PathBuf>,
    },
    /// Counts by kind, effect, server, tool, contract and rule; time range; chain status.
    #[command(after_help = "Examples:
  toolgate audit summary
  toolgate audit summary --json")]
    Summary {
        #[command(flatten)]
        log: LogArg,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show the last records, oldest first.
    #[command(after_help = "Examples:
  toolgate audit tail
  toolgate audit tail -n 50 --audit ~/project/.toolgate/audit.jsonl
  toolgate audit tail --json | jq -c 'select(.effect == \"deny\")'")]
    Tail {
        /// How many records.
        #[arg(short = 'n', long = "lines", value_name = "N", default_value_t = 10)]
        n: usize,
        /// Print each record as a JSON line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        log: LogArg,
    },
}

/// Runs `toolgate audit …`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        AuditCommand::Verify { audit } => verify_all(&audit),
        AuditCommand::Summary { log, json } => summary(&log.audit, json),
        AuditCommand::Tail { n, json, log } => tail(&log.audit, n, json),
    }
}

fn range(first: Option<&str>, last: Option<&str>) -> String {
    match (first, last) {
        (Some(a), Some(b)) if a != b => format!("{a} – {b}"),
        (Some(a), _) | (None, Some(a)) => a.to_owned(),
        (None, None) => "no records".to_owned(),
    }
}

fn report_broken(path: &Path, v: &Verification) {
    if let Some(problem) = &v.problem {
        eprintln!(
            "toolgate: audit log `{}` is broken: {problem}",
            path.display()
        );
        let s = if v.records == 1 { "" } else { "s" };
        eprintln!(
            "  {} record{s} verified before the problem; everything from line {} on is untrusted",
            v.records, problem.line
        );
    }
}

fn verify_all(paths: &[PathBuf]) -> anyhow::Result<ExitCode> {
    if let [one] = paths {
        return verify(one);
    }
    let mut broken = 0usize;
    for path in paths {
        outln!("{}:", path.display());
        match verify(path) {
            Ok(code) if code == ExitCode::SUCCESS => {}
            Ok(_) => broken += 1,
            Err(e) => {
                eprintln!(
                    "toolgate: audit log `{}` cannot be read: {e:#}",
                    path.display()
                );
                return Ok(ExitCode::from(2));
            }
        }
    }
    if broken > 0 {
        eprintln!(
            "toolgate: {broken} of {} audit logs are broken",
            paths.len()
        );
        return Ok(ExitCode::from(1));
    }
    outln!("all {} audit logs are intact", paths.len());
    Ok(ExitCode::SUCCESS)
}

fn verify(path: &Path) -> anyhow::Result<ExitCode> {
    let v = toolgate_audit::verify_path(path)?;
    if !v.is_intact() {
        report_broken(path, &v);
        return Ok(ExitCode::from(1));
    }
    let s = if v.records == 1 { "" } else { "s" };
    let seqs = match v.last_seq {
        Some(last) if last > 0 => format!("seq 1–{last}"),
        _ => "header only".to_owned(),
    };
    outln!(
        "audit log is intact: {} record{s} ({seqs}), {}",
        v.records,
        range(v.first_time.as_deref(), v.last_time.as_deref())
    );
    outln!("chain: {}", v.chain.as_deref().unwrap_or("-"));
    outln!(
        "last hash: {} (keep it elsewhere to detect records removed from the end later)",
        v.last_hash.as_deref().unwrap_or("-")
    );
    Ok(ExitCode::SUCCESS)
}

fn counts(map: &BTreeMap<String, u64>) -> String {
    if map.is_empty() {
        return "-".to_owned();
    }
    let mut items: Vec<(&String, &u64)> = map.iter().collect();
    items.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    items
        .iter()
        .map(|(k, n)| format!("{} {n}", printable(k)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn summary(path: &Path, as_json: bool) -> anyhow::Result<ExitCode> {
    let s = toolgate_audit::summarize(path)?;
    let v = &s.verification;
    if as_json {
        let doc = serde_json::to_value(&s).context("cannot encode summary")?;
        outln!(
            "{}",
            serde_json::to_string_pretty(&doc).context("cannot encode summary")?
        );
    } else {
        let rs = if s.records == 1 { "" } else { "s" };
        outln!(
            "audit log `{}`: {} record{rs}, {}",
            path.display(),
            s.records,
            range(s.first_time.as_deref(), s.last_time.as_deref())
        );
        match &v.problem {
            None => outln!(
                "chain:     intact ({}, last seq {})",
                v.chain.as_deref().unwrap_or("-"),
                v.last_seq.unwrap_or(0)
            ),
            Some(p) => outln!(
                "chain:     BROKEN at line {}: {}",
                p.line,
                printable(&p.to_string())
            ),
        }
        if s.unreadable > 0 {
            outln!("unreadable lines: {}", s.unreadable);
        }
        outln!("kinds:     {}", counts(&s.by_kind));
        outln!("effects:   {}", counts(&s.by_effect));
        outln!("servers:   {}", counts(&s.by_server));
        outln!("tools:     {}", counts(&s.by_tool));
        outln!("contracts: {}", counts(&s.by_contract));
        outln!("rules:     {}", counts(&s.by_rule));
    }
    Ok(if v.is_intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `time  EFFECT  server/tool  operation  resource  reason`
fn human_line(r: &Record) -> String {
    let e = &r.event;
    let label = match (e.kind, e.effect.as_deref()) {
        (Kind::Decision, Some(effect)) => effect.to_uppercase(),
        (Kind::Result, _) if e.is_error == Some(true) => "ERROR".to_owned(),
        (kind, _) => kind.as_str().to_uppercase(),
    };
    let who = match (e.server.as_deref(), e.tool.as_deref()) {
        (Some(s), Some(t)) => format!("{s}/{t}"),
        (None, Some(t)) => t.to_owned(),
        (Some(s), None) => format!("{s}/-"),
        (None, None) => "-".to_owned(),
    };
    let op = if e.operations.is_empty() {
        "-".to_owned()
    } else {
        e.operations.join(",")
    };
    let resource = if let Some(net) = &e.net {
        match &net.method {
            Some(m) => format!("{m} {}", net.host),
            None => net.host.clone(),
        }
    } else if let Some(first) = e.resources.first() {
        match e.resources.len() {
            1 => first.clone(),
            n => format!("{first} (+{} more)", n.saturating_sub(1)),
        }
    } else if let Some(exe) = &e.executable {
        exe.clone()
    } else {
        "-".to_owned()
    };
    let mut line = format!("{}  {label:<9}  {who}  {op}  {resource}", r.time);
    if let Some(reason) = &e.reason {
        line.push_str("  ");
        line.push_str(reason);
    }
    if let Some(a) = &e.approval {
        let how = match a.how {
            ApprovalHow::Client => "client",
            ApprovalHow::InputRequired => "input_required",
            ApprovalHow::Broker => "broker",
            ApprovalHow::Tty => "tty",
        };
        let scope = match a.scope {
            ApprovalScope::Once => "once",
            ApprovalScope::Session => "session",
        };
        line.push_str(&format!("  [approved via {how}, {scope}]"));
    }
    printable(&line)
}

fn tail(path: &Path, n: usize, as_json: bool) -> anyhow::Result<ExitCode> {
    let lines = toolgate_audit::tail(path, n)?;
    let mut unreadable = false;
    for l in lines {
        match l.record {
            Ok(r) if as_json => {
                outln!(
                    "{}",
                    serde_json::to_string(&r).context("cannot encode record")?
                );
            }
            Ok(r) => outln!("{}", human_line(&r)),
            Err(err) => {
                eprintln!(
                    "toolgate: line {} is not a readable record: {}",
                    l.line,
                    printable(&err)
                );
                unreadable = true;
            }
        }
    }
    Ok(if unreadable {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
