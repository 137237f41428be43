//! `toolgate`: a local, fail-closed firewall for MCP tool calls. This executable is the
//! command line (`cli/`), the offline demo and the approvals terminal UI over the library
//! crates (`toolgate-runtime`, `toolgate-broker`, `toolgate-gateway`, `toolgate-clients`,
//! `toolgate-report`).

/// `println!` for command output: a closed stdout (`toolgate audit tail | head`) ends the
/// command quietly instead of panicking. Never used by `wrap` or `serve`, whose stdout
/// carries protocol frames and is written by the relay.
macro_rules! outln {
    () => {
        $crate::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for command output; see [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!($($arg)*))
    };
}

mod approvals_ui;
mod cli;
mod demo;

use std::process::ExitCode;

fn main() -> ExitCode {
    // `toolgate hook` runs once per tool call of a coding agent: its usual arguments are read
    // without building the whole command line (see `cli::hook::quick_args`).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == "hook")
        && let Some(hook) = cli::hook::quick_args(args.get(1..).unwrap_or_default())
    {
        return match cli::hook::run(hook) {
            Ok(code) => code,
            Err(_) => ExitCode::from(toolgate_broker::hook::BLOCKING_EXIT),
        };
    }
    cli::main()
}

/// Writes command output to stdout; exits quietly (status 0) when the reader went away.
fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_fmt(args)
        .and_then(|()| stdout.flush())
        .is_err()
    {
        std::process::exit(0);
    }
}
