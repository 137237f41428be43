//! `toolgate broker`: run the per-user approval broker in the foreground.

use std::process::ExitCode;

use std::time::{Duration, Instant};

use anyhow::Context as _;

use toolgate_broker::{Layout, daemon};

/// Run the local approval broker (one per user) until interrupted.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  toolgate broker                 # in a terminal of its own; Ctrl-C stops it
  nohup toolgate broker >/dev/null 2>&1 &   # in the background; `toolgate status` checks it
  toolgate broker stop            # the one running, wherever it was started")]
pub struct Args {
    /// Detach from the terminal and the starting process's session (used when a hook
    /// starts the broker).
    #[arg(long, hide = true)]
    pub daemon: bool,
    /// Exit after this long with no connection and no request waiting (`0`: never); the
    /// next hook or proxy starts a broker again, and the agent sessions' state is kept on
    /// disk
    #[arg(long, value_name = "DURATION", default_value = "240m",
          value_parser = toolgate_runtime::duration::parse_duration)]
    pub idle_exit: Duration,
    #[command(subcommand)]
    pub action: Option<Action>,
}

/// What to do with the running broker.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Stop the running broker (SIGTERM to the process that serves this user's socket), and
    /// wait until it is gone
    #[command(after_help = "Examples:
  toolgate broker stop
  TOOLGATE_BROKER_DIR=/tmp/tg-broker toolgate broker stop   # a broker of another directory")]
    Stop,
}

/// Runs `toolgate broker`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(Action::Stop) = args.action {
        return stop(&Layout::for_user());
    }
    if args.daemon {
        // A session of its own: the client's signals to its process group and terminal
        // never reach it. (Fails only for a group leader, which a spawned child is not.)
        let _ = rustix::process::setsid();
    }
    super::logs::init("info", super::logs::Format::Text);
    let layout = Layout::for_user();
    let runtime =
        toolgate_runtime::rt::current_thread().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let bound = daemon::bind(&layout)?;
        tracing::info!(
            "toolgate broker listening on `{}`; approve with `toolgate approvals`",
            layout.socket.display()
        );
        daemon::serve(
            bound,
            daemon::signals(),
            (!args.idle_exit.is_zero()).then_some(args.idle_exit),
        )
        .await;
        tracing::info!(
            "toolgate broker stopped; removed `{}`",
            layout.socket.display()
        );
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// How long `broker stop` waits for the broker to be gone.
const STOP_WITHIN: Duration = Duration::from_secs(10);

/// `toolgate broker stop`: the process at the other end of this user's broker socket gets
/// SIGTERM (it serves the calls in flight no further, withdraws its questions and removes
/// the socket); returns once the socket is gone.
fn stop(layout: &Layout) -> anyhow::Result<ExitCode> {
    let runtime =
        toolgate_runtime::rt::current_thread().context("cannot start the async runtime")?;
    let cred = runtime.block_on(async {
        let stream = tokio::net::UnixStream::connect(&layout.socket).await?;
        stream.peer_cred()
    });
    let cred = match cred {
        Ok(c) => c,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            outln!("no broker is running (`{}`)", layout.socket.display());
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => {
            return Err(e).with_context(|| {
                format!("cannot reach the broker at `{}`", layout.socket.display())
            });
        }
    };
    let me = rustix::process::getuid().as_raw();
    let (Some(pid), true) = (cred.pid(), cred.uid() == me) else {
        anyhow::bail!(
            "the process at `{}` is not one of yours (uid {}), or tells no pid: not stopped",
            layout.socket.display(),
            cred.uid()
        );
    };
    let pid = rustix::process::Pid::from_raw(pid)
        .ok_or_else(|| anyhow::anyhow!("the broker told pid {pid}"))?;
    rustix::process::kill_process(pid, rustix::process::Signal::TERM)
        .with_context(|| format!("cannot signal the broker (pid {})", pid.as_raw_nonzero()))?;
    let deadline = Instant::now() + STOP_WITHIN;
    while layout.socket.exists() {
        if Instant::now() >= deadline {
            anyhow::bail!(
                "the broker (pid {}) did not stop within {} s\nhelp: `kill -KILL {}` ends it at once",
                pid.as_raw_nonzero(),
                STOP_WITHIN.as_secs(),
                pid.as_raw_nonzero()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    outln!("stopped the broker (pid {})", pid.as_raw_nonzero());
    Ok(ExitCode::SUCCESS)
}
