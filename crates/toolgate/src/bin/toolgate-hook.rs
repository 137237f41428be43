//! `toolgate-hook`: `toolgate hook` as a small executable of its own.
//!
//! A coding agent runs its hook command as a new process for every tool call. The `toolgate`
//! executable carries the whole firewall, and merely loading it (its relocations, the pages of
//! code the kernel maps around each one it runs) costs more memory than a hook may use (a hook
//! runs for every tool call: ≤ 3 MB). This executable holds only what a hook does: read the
//! event, ask the broker
//! (starting `toolgate broker` from the `toolgate` beside it when none runs), print the
//! client's answer. It shares that code with `toolgate hook`, which stays for users who run
//! it, and `toolgate init --hooks` writes this executable when it is installed.
//!
//! Usage: `toolgate-hook claude-code|cursor [--policy PATH] [--audit PATH] [--authoritative]
//! [--session NAME] [--timeout DURATION]`, the arguments of `toolgate hook`.

use toolgate_broker::hook::{self, command};

use std::process::ExitCode;

/// Unusual arguments (`--help`, a typo) are left to clap, which explains or reports them.
#[derive(Debug, clap::Parser)]
#[command(
    name = "toolgate-hook",
    version,
    about = "Decide a coding agent's own tool calls (a client hook): reads the hook event on stdin; the arguments of `toolgate hook`"
)]
struct Cli {
    #[command(flatten)]
    args: command::Args,
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let args = match command::quick_args(&argv) {
        Some(args) => args,
        None => <Cli as clap::Parser>::parse().args,
    };
    match command::run(args) {
        Ok(code) => code,
        Err(_) => ExitCode::from(hook::BLOCKING_EXIT),
    }
}
