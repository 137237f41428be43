//! `toolgate init`: wrap the MCP servers of a client's configuration with toolgate.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use super::configure::{Action, Selection};
use toolgate_clients::document::WrapSettings;

/// Wrap the MCP servers (stdio and remote) of a client's configuration with `toolgate wrap`.
///
/// Shows a unified diff first. Every wrapped entry keeps its original `command`
/// and `args` (a remote entry: the whole original entry) under `x-toolgate-upstream`,
/// so `toolgate unwrap` can restore it.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  toolgate init --dry-run
  toolgate init --client claude-code --policy \"$PWD/toolgate.yaml\"
  toolgate init --client cursor --hooks --scope project
  toolgate init --client claude-desktop --workspace \"$HOME/src/app\"

Every wrapped entry and hook command gets `--workspace`, the directory the policy's
`${workspace}` means: the project's directory for a project configuration (`.mcp.json`,
`.cursor/`, `.vscode/`, `.claude/settings.json`, a project of `~/.claude.json`), and for a
user configuration (`~/.claude.json`, Claude Desktop, `~/.cursor/mcp.json`, Windsurf, the
user's hooks) the one `--workspace DIR` names; without it such a configuration is refused.
A workspace is never your home directory or `/`. The policy must load (`toolgate policy
check`), or nothing is written.

It shows a diff and asks before writing (`--yes` to apply without asking). Each wrapped entry
keeps its original command under `x-toolgate-upstream`, which `toolgate unwrap` restores.
Remote entries (`url`, `serverUrl`, `mcp-remote`) become `toolgate wrap --url URL`; header
values that are secrets or use the client's variables move to the entry's `env` as
`TOOLGATE_HDR_<SERVER>_<NAME>` and are passed as `--header 'Name: ${TOOLGATE_HDR_…}'`.
With `--hooks` it adds `toolgate hook <client>` for every hook event of Claude Code
(`~/.claude/settings.json`, or `.claude/settings.json` with `--scope project`) or Cursor
(`~/.cursor/hooks.json`, `.cursor/hooks.json`); `toolgate unwrap --hooks` removes exactly
those entries.")]
pub struct Args {
    #[command(flatten)]
    selection: Selection,
    /// The policy file the wrapped servers and hooks use, stored as an absolute path
    /// [default: `toolgate.yaml` in the current directory when it exists and you trusted it
    /// (`toolgate policy trust`), else none: the built-in starter policy]
    #[arg(long, value_name = "PATH")]
    policy: Option<PathBuf>,
    /// The workspace of the servers and hooks of user configurations, which belong to no
    /// project (stored as an absolute path; never your home directory or `/`)
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
}

/// Runs `toolgate init`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .context("cannot find the path of the toolgate binary")?;
    if let Some(dir) = toolgate_clients::hooks::build_dir_of(&exe) {
        eprintln!(
            "warning: toolgate runs from the build directory `{}`: the entries written run `{}`, which a `cargo clean` or a rebuild removes or replaces (the client then blocks every call)\n  help: install it (`cargo install --path crates/toolgate`, or a release), then run `toolgate init` again from there",
            dir.display(),
            exe.display()
        );
    }
    let policy = match args.policy {
        Some(p) => Some(
            p.canonicalize()
                .with_context(|| format!("cannot find the policy file `{}`", p.display()))?,
        ),
        None => policy_here()?,
    };
    // A policy that does not load would deny every call of every entry written: refuse it
    // before anything is written, with its own first error.
    if let Some(path) = &policy
        && let Err((diags, summary)) = toolgate_clients::check_policy(path)
    {
        if let Some(d) = &diags {
            crate::cli::policy::print_diagnostics(d);
        }
        anyhow::bail!(
            "{summary}\nhelp: fix it (`toolgate policy check --policy {}`), then run `toolgate init` again; nothing was written",
            path.display()
        );
    }
    let workspace = args
        .workspace
        .as_deref()
        .map(|w| super::configure::check_workspace(w, "`--workspace`"))
        .transpose()?;
    let settings = WrapSettings {
        exe: path_string(exe)?,
        policy: policy.map(path_string).transpose()?,
        workspace,
        dialect: toolgate_clients::remote::Dialect::Other,
        broker_dir: None,
    };
    super::configure::run(&args.selection, &Action::Init(settings))
}

/// Without `--policy`: `./toolgate.yaml` when there is one and it is trusted as it is (what
/// `wrap` and `hook` would take from this directory), named on stderr; one that is not
/// trusted is refused, as they refuse it. None: the entries carry no `--policy`.
fn policy_here() -> anyhow::Result<Option<PathBuf>> {
    use toolgate_runtime::trust;
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    match trust::enforcing_default(&cwd) {
        Ok(Some(here)) => {
            eprintln!(
                "toolgate: the entries use the policy `{}` of this directory (trusted; --policy chooses another)",
                here.path.display()
            );
            Ok(Some(here.path))
        }
        Ok(None) => {
            eprintln!(
                "toolgate: no --policy and no `{}` here: the entries carry no --policy (the built-in starter policy, or a trusted `{}` of the directory the client starts them in)",
                trust::DEFAULT_POLICY,
                trust::DEFAULT_POLICY
            );
            Ok(None)
        }
        // Gone after it was trusted, or unreadable: that reason, as `wrap` and `hook` give it.
        Err(reason) if !cwd.join(trust::DEFAULT_POLICY).is_file() => {
            anyhow::bail!("{reason}; nothing was written")
        }
        Err(_) => anyhow::bail!(
            "`./{}` is here but not trusted as it is, so `init` does not wire it into your clients\nhelp: review it and run `toolgate policy trust`, or pass `--policy PATH`; nothing was written",
            trust::DEFAULT_POLICY
        ),
    }
}

fn path_string(path: PathBuf) -> anyhow::Result<String> {
    path.into_os_string()
        .into_string()
        .map_err(|p| anyhow::anyhow!("`{}` is not valid UTF-8", PathBuf::from(p).display()))
}
