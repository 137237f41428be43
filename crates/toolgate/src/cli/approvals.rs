//! `toolgate approvals`: answer the questions proxies send to the local broker, or (with
//! `--gateway URL`) the questions of a `toolgate gateway`'s sessions.
//!
//! A terminal UI by default; `--plain` prints one line per event and reads decisions as lines
//! (`o 3`, `s 3`, `d 3`); `--json` prints the queue; `--id N --decision D` decides one request.
#![allow(clippy::print_stdout, reason = "this command's output is its stdout")]

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::AsyncBufReadExt as _;

use crate::approvals_ui::{self, Command, Key, Ui, safe};
use crate::cli::approvals_gateway::GatewayLink;
use toolgate_broker::client::Connection;
use toolgate_broker::proto::{Choice, FromBroker, Role, ToBroker};
use toolgate_broker::{Layout, connect};

/// Approve or deny the calls waiting at the local broker.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  toolgate approvals
  toolgate approvals --plain
  toolgate approvals --id 3 --decision allow-once
  TOOLGATE_GATEWAY_TOKEN=... toolgate approvals --gateway https://mcp.example.com")]
pub struct Args {
    /// Answer the approvals of a `toolgate gateway` (its base URL) instead of the local
    /// broker's, as one of its approvers (`auth.approvers`).
    #[arg(long, value_name = "URL")]
    pub gateway: Option<String>,
    /// The environment variable that holds the approver's bearer token for `--gateway`.
    #[arg(
        long,
        value_name = "VAR",
        default_value = "TOOLGATE_GATEWAY_TOKEN",
        requires = "gateway"
    )]
    pub token_env: String,
    /// Extra PEM root certificates to trust for `--gateway`.
    #[arg(long, value_name = "PATH", requires = "gateway")]
    pub ca_file: Option<std::path::PathBuf>,
    /// Line mode for screen readers and dumb terminals: events as lines; answer with
    /// `o ID` (allow once), `s ID` (allow for the session) or `d ID` (deny).
    #[arg(long, conflicts_with_all = ["json", "id"])]
    pub plain: bool,
    /// Print the queue as JSON and exit.
    #[arg(long, conflicts_with = "id")]
    pub json: bool,
    /// Decide the request with this id (see `--json`), then exit.
    #[arg(long, value_name = "ID", requires = "decision")]
    pub id: Option<u64>,
    /// The decision for `--id`.
    #[arg(long, value_name = "DECISION", requires = "id", value_parser = parse_decision)]
    pub decision: Option<Choice>,
}

fn parse_decision(s: &str) -> Result<Choice, String> {
    s.parse()
}

/// Where the questions come from: the local broker or a gateway.
enum Link {
    Broker(Connection),
    Gateway(Box<GatewayLink>),
}

impl Link {
    async fn recv(&mut self) -> anyhow::Result<Option<FromBroker>> {
        match self {
            Link::Broker(c) => c.recv().await,
            Link::Gateway(g) => g.recv().await,
        }
    }

    async fn send(&mut self, message: &ToBroker) -> anyhow::Result<()> {
        match self {
            Link::Broker(c) => Ok(c.send(message).await?),
            Link::Gateway(g) => g.send(message).await,
        }
    }

    fn describe(&self) -> String {
        match self {
            Link::Broker(c) => format!("the broker (pid {})", c.broker_pid),
            Link::Gateway(_) => "the gateway".to_owned(),
        }
    }
}

use toolgate_runtime::clock::now_ms;

/// Runs `toolgate approvals`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runtime =
        toolgate_runtime::rt::current_thread().context("cannot start the async runtime")?;
    let code = runtime.block_on(async move {
        let mut conn = match &args.gateway {
            Some(url) => {
                let token = std::env::var(&args.token_env).with_context(|| {
                    format!(
                        "`--gateway` needs the approver's token in `${}`. help: set it, or name another variable with --token-env",
                        args.token_env
                    )
                })?;
                Link::Gateway(Box::new(
                    GatewayLink::connect(url, token, args.ca_file.clone()).await?,
                ))
            }
            None => Link::Broker(
                connect(&Layout::for_user(), Role::Approver, None, None)
                    .await
                    .map_err(|e| anyhow::anyhow!(e))?,
            ),
        };
        let pending = match conn.recv().await? {
            Some(FromBroker::Snapshot { pending }) => pending,
            other => anyhow::bail!("the broker did not send its queue (got {other:?})"),
        };
        if args.json {
            outln!("{}", serde_json::to_string_pretty(&pending)?);
            return Ok(ExitCode::SUCCESS);
        }
        if let (Some(id), Some(decision)) = (args.id, args.decision) {
            return decide_one(&mut conn, id, decision).await;
        }
        let terminal = std::io::stdout().is_terminal()
            && std::io::stdin().is_terminal()
            && std::env::var("TERM").is_ok_and(|t| t != "dumb");
        if args.plain || !terminal {
            return plain(conn, pending).await;
        }
        tui(conn, pending).await
    });
    runtime.shutdown_background();
    code
}

async fn decide_one(conn: &mut Link, id: u64, decision: Choice) -> anyhow::Result<ExitCode> {
    conn.send(&ToBroker::Decide { id, decision }).await?;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), conn.recv()).await {
            Err(_) => anyhow::bail!("the broker did not confirm the decision within 10 s"),
            Ok(Ok(None)) => anyhow::bail!("the broker closed the connection"),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(Some(FromBroker::DecideResult {
                id: got,
                accepted,
                message,
            }))) if got == id => {
                outln!("{}", safe(&message));
                return Ok(if accepted {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                });
            }
            Ok(Ok(Some(FromBroker::Error { message, .. }))) => {
                anyhow::bail!("the broker refused: {message}")
            }
            Ok(Ok(Some(_))) => {}
        }
    }
}

/// One line per event (the `--plain` format).
fn plain_lines(message: &FromBroker) -> Vec<String> {
    match message {
        FromBroker::Added { request } => {
            let mut out = vec![format!("pending {}", request.id)];
            for (k, v) in approvals_ui::detail_lines(request, now_ms()) {
                out.push(format!("  {k}: {v}"));
            }
            out.push(format!(
                "  answer: o {0} (allow once), s {0} (allow for session), d {0} (deny)",
                request.id
            ));
            out
        }
        FromBroker::Resolved { id, decision, by } => {
            vec![format!(
                "resolved {id} {} by {}",
                decision.cli_name(),
                safe(by)
            )]
        }
        FromBroker::Withdrawn { id, why } => {
            vec![format!(
                "withdrawn {id} {} ({})",
                serde_json::to_value(why)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                why.describe()
            )]
        }
        FromBroker::DecideResult {
            accepted, message, ..
        } => vec![format!(
            "{} {}",
            if *accepted { "ok" } else { "refused" },
            safe(message)
        )],
        FromBroker::Error { message, .. } => vec![format!("error {}", safe(message))],
        _ => Vec::new(),
    }
}

fn parse_plain(line: &str) -> Result<(u64, Choice), String> {
    let mut words = line.split_whitespace();
    let (Some(verb), Some(id), None) = (words.next(), words.next(), words.next()) else {
        return Err("expected `o ID`, `s ID` or `d ID`".to_owned());
    };
    let decision = match verb {
        "o" | "once" => Choice::AllowOnce,
        "s" | "session" => Choice::AllowSession,
        "d" | "deny" => Choice::Deny,
        other => other.parse()?,
    };
    let id = id
        .parse()
        .map_err(|_| format!("`{id}` is not a request id"))?;
    Ok((id, decision))
}

fn emit(lines: &[String]) {
    let mut out = std::io::stdout().lock();
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
    let _ = out.flush();
}

async fn plain(
    mut conn: Link,
    pending: Vec<toolgate_broker::proto::Pending>,
) -> anyhow::Result<ExitCode> {
    emit(&[format!(
        "connected to {}: {} pending",
        conn.describe(),
        pending.len()
    )]);
    for request in pending {
        emit(&plain_lines(&FromBroker::Added { request }));
    }
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut stdin_open = true;
    loop {
        tokio::select! {
            message = conn.recv() => match message {
                Ok(Some(m)) => emit(&plain_lines(&m)),
                Ok(None) => {
                    emit(&[format!("disconnected: {} closed the connection", conn.describe())]);
                    return Ok(ExitCode::from(1));
                }
                Err(e) => {
                    emit(&[format!("disconnected: {e}")]);
                    return Ok(ExitCode::from(1));
                }
            },
            line = stdin.next_line(), if stdin_open => match line {
                Ok(Some(line)) if line.trim().is_empty() => {}
                Ok(Some(line)) if matches!(line.trim(), "q" | "quit") => return Ok(ExitCode::SUCCESS),
                Ok(Some(line)) => match parse_plain(&line) {
                    Ok((id, decision)) => conn.send(&ToBroker::Decide { id, decision }).await?,
                    Err(why) => emit(&[format!("error {why}")]),
                },
                // Without input the terminal keeps showing events.
                Ok(None) | Err(_) => stdin_open = false,
            },
        }
    }
}

/// Restores the terminal even when the UI loop fails.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

async fn tui(
    mut conn: Link,
    pending: Vec<toolgate_broker::proto::Pending>,
) -> anyhow::Result<ExitCode> {
    use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

    let mut ui = Ui::default();
    ui.on_broker(FromBroker::Snapshot { pending });
    let (key_tx, mut keys) = tokio::sync::mpsc::unbounded_channel::<Key>();
    // Keys come from a blocking reader thread; it ends with the process.
    std::thread::spawn(move || {
        while let Ok(ev) = event::read() {
            let Event::Key(k) = ev else { continue };
            if k.kind != KeyEventKind::Press {
                continue;
            }
            let key = match k.code {
                KeyCode::Up => Some(Key::Up),
                KeyCode::Down => Some(Key::Down),
                KeyCode::Esc => Some(Key::Quit),
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                    Some(Key::Quit)
                }
                KeyCode::Char(c) => Key::from_char(c),
                _ => None,
            };
            if let Some(key) = key
                && key_tx.send(key).is_err()
            {
                break;
            }
        }
    });
    let mut terminal = ratatui::init();
    let _restore = Restore;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut connected = true;
    loop {
        terminal.draw(|f| approvals_ui::render(&ui, f, now_ms()))?;
        tokio::select! {
            message = conn.recv(), if connected => match message {
                Ok(Some(m)) => ui.on_broker(m),
                Ok(None) => {
                    connected = false;
                    ui.on_disconnect("the broker closed the connection".to_owned());
                }
                Err(e) => {
                    connected = false;
                    ui.on_disconnect(e.to_string());
                }
            },
            key = keys.recv() => match key.map(|k| ui.on_key(k)) {
                None | Some(Command::Quit) => break,
                Some(Command::Decide(id, decision)) => {
                    if connected {
                        conn.send(&ToBroker::Decide { id, decision }).await?;
                    }
                }
                Some(Command::Nothing) => {}
            },
            _ = tick.tick() => {}
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_answers_parse() {
        assert_eq!(parse_plain("o 3"), Ok((3, Choice::AllowOnce)));
        assert_eq!(parse_plain(" s  12 "), Ok((12, Choice::AllowSession)));
        assert_eq!(parse_plain("deny 1"), Ok((1, Choice::Deny)));
        assert_eq!(parse_plain("allow-once 4"), Ok((4, Choice::AllowOnce)));
        assert!(parse_plain("o").is_err());
        assert!(parse_plain("o x").is_err());
        assert!(parse_plain("maybe 1").is_err());
        assert!(parse_plain("o 1 2").is_err());
    }
}
