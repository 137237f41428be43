//! Diagnostics on stderr: the one `tracing` set-up of the commands that log.

use tracing_subscriber::EnvFilter;

/// The environment variable that overrides a command's default filter (an env-filter:
/// `debug`, `toolgate_runtime=trace,warn`).
pub const LOG_ENV: &str = "TOOLGATE_LOG";

/// How a command writes its diagnostics.
#[derive(Debug, Clone, Copy)]
pub enum Format {
    /// Human lines without the target, coloured only when stderr is a terminal.
    Text,
    /// One JSON object per line, without the current span (for log collectors).
    Json,
}

/// Sends `tracing` diagnostics to stderr, filtered by [`LOG_ENV`] when it is set and valid,
/// else by `default`. The commands' defaults:
///
/// - `toolgate wrap` and `toolgate auth`: `warn`, [`Format::Text`] (wrap's stderr is the MCP
///   client's log: problems only);
/// - `toolgate broker`: `info`, [`Format::Text`];
/// - `toolgate gateway`: `info`, [`Format::Json`].
///
/// Only the first call in a process installs anything; later calls change nothing.
pub fn init(default: &str, format: Format) {
    let filter = EnvFilter::try_from_env(LOG_ENV).unwrap_or_else(|_| EnvFilter::new(default));
    let _ = match format {
        Format::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_target(false)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        Format::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_current_span(false)
            .try_init(),
    };
}
