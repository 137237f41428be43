//! `toolgate report`: a security review of a setup: what the policy enforces tool by tool,
//! where the gaps are, what the audit log says happened, and policy lines for what people
//! approve again and again. Markdown to stdout, `--json`, or `--html FILE`.
#![allow(clippy::print_stdout, reason = "this command's output is its stdout")]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::Value;
use toolgate_policy::{Engine, STARTER_POLICY, Vars, load};

use toolgate_report::{self as report, Inputs, ServerTools, ToolSource, audit};
use toolgate_runtime::fsfacts::canonical_dir;
use toolgate_runtime::pins::PinStore;

/// Arguments of `toolgate report`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  toolgate report --policy toolgate.yaml --html report.html
  toolgate report --server filesystem --since 2026-03-01 --json | jq .findings
  toolgate report --probe -- npx -y @modelcontextprotocol/server-filesystem \"$PWD\"
  toolgate report --policy toolgate.yaml --suggest

Tool definitions come from the pin store (every pinned server, or --server NAME), from
--tools FILE (a tools/list result or a list of tools), or from --probe -- CMD ARGS...,
which starts the server, lists every page of its tools and stops it.
The report prints no argument value from the audit log but the paths of asks a person
approved, in the rules it suggests for them.")]
pub struct Args {
    /// The policy file [default: `toolgate.yaml` in the current directory, when it exists;
    /// else the built-in starter policy]
    #[arg(long, value_name = "PATH")]
    policy: Option<PathBuf>,
    /// The workspace (`${workspace}`, and where the audit log is by default) [default: the
    /// current directory]
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// The home directory (`${home}`) [default: $HOME]
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
    /// The server: its pins, or the name for --tools/--probe (whose definitions are then
    /// compared with its pins).
    #[arg(long, value_name = "NAME")]
    server: Option<String>,
    /// Tool definitions from a file: a `tools/list` result, a response holding one, or a
    /// JSON list of tools.
    #[arg(long, value_name = "PATH", conflicts_with = "probe")]
    tools: Option<PathBuf>,
    /// Start the server given after `--`, list its tools, and stop it.
    #[arg(long, requires = "command")]
    probe: bool,
    /// How long the probe may take (`30s`, `2m`; a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "30s",
          value_parser = toolgate_runtime::duration::parse_duration)]
    probe_timeout: Duration,
    /// The audit log [default: `.toolgate/audit.jsonl` in the workspace]
    #[arg(long, value_name = "PATH")]
    audit: Option<PathBuf>,
    /// Only records at or after this date or RFC 3339 time.
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Only records at or before this date (the whole day) or RFC 3339 time.
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// Print the report as JSON (shape: docs/report.md).
    #[arg(long, conflicts_with = "suggest")]
    json: bool,
    /// Write the report as one self-contained HTML page.
    #[arg(long, value_name = "PATH")]
    html: Option<PathBuf>,
    /// Print only the suggested policy lines, ready to paste.
    #[arg(long)]
    suggest: bool,
    /// The server command for --probe.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// Reads `--tools FILE`: a list, `{"tools": [...]}`, or a response `{"result": {"tools": [...]}}`.
fn tools_from_file(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read tools `{}`", path.display()))?;
    let v: Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "`{}` is not JSON\n  help: give a `tools/list` result or a list of tool definitions",
            path.display()
        )
    })?;
    let list = match &v {
        Value::Array(a) => a.clone(),
        _ => match v
            .get("tools")
            .or_else(|| v.pointer("/result/tools"))
            .and_then(Value::as_array)
        {
            Some(a) => a.clone(),
            None => bail!(
                "`{}` holds no list of tools\n  help: give a `tools/list` result (`{{\"tools\": [...]}}`), a response holding one, or a list of tool definitions",
                path.display()
            ),
        },
    };
    Ok(list)
}

/// Runs `toolgate report`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !args.command.is_empty() && !args.probe {
        bail!(
            "a command after `--` is only used with `--probe`\n  help: `toolgate report --probe -- CMD ARGS...`"
        );
    }
    let workspace = match &args.workspace {
        Some(w) => canonical_dir(w)?,
        None => canonical_dir(&std::env::current_dir()?)?,
    };
    let home = crate::cli::policy::home_dir(args.home.clone())?;
    // What `policy init` wrote here, when no other is named (said on stderr).
    let policy = args.policy.clone().or_else(|| {
        let here = PathBuf::from(crate::cli::policy::DEFAULT_POLICY);
        here.is_file().then(|| {
            crate::cli::policy::announce_here();
            here
        })
    });
    let (label, loaded) = match &policy {
        Some(p) => match crate::cli::policy::load_policy(p)? {
            Some(l) => (p.display().to_string(), l),
            None => return Ok(ExitCode::from(1)),
        },
        None => match load(STARTER_POLICY, "starter.yaml") {
            Ok(l) => ("the starter policy".to_owned(), l),
            Err(d) => {
                crate::cli::policy::print_diagnostics(&d);
                bail!("the built-in starter policy does not load");
            }
        },
    };
    let vars = Vars {
        workspace: workspace.clone(),
        home,
    };
    let engine = match Engine::new(loaded.policy.clone(), vars) {
        Ok(e) => e,
        Err(d) => {
            crate::cli::policy::print_diagnostics(&d);
            return Ok(ExitCode::from(1));
        }
    };
    let since = args
        .since
        .as_deref()
        .map(|s| audit::parse_bound(s, false))
        .transpose()
        .map_err(|e| anyhow::anyhow!("`--since`: {e}"))?;
    let until = args
        .until
        .as_deref()
        .map(|s| audit::parse_bound(s, true))
        .transpose()
        .map_err(|e| anyhow::anyhow!("`--until`: {e}"))?;

    // Tool definitions.
    let store = PinStore::open_default().ok();
    let pins_of = |name: &str| store.as_ref().and_then(|s| s.load(name).ok());
    // The pins of the server named with `--server`, compared with a file's or a probe's tools.
    let pinned_of_named = || {
        args.server
            .as_deref()
            .and_then(pins_of)
            .filter(|p| !p.is_empty())
    };
    let mut servers = Vec::new();
    if let Some(file) = &args.tools {
        let name = args.server.clone().unwrap_or_else(|| {
            file.file_stem()
                .map_or_else(|| "tools".to_owned(), |s| s.to_string_lossy().into_owned())
        });
        servers.push(ServerTools {
            pinned: pinned_of_named(),
            name,
            source: ToolSource::File,
            tools: tools_from_file(file)?,
        });
    } else if args.probe {
        let tools = report::probe::probe(
            &args.command,
            Path::new(&workspace),
            args.probe_timeout.max(Duration::from_secs(1)),
        )
        .map_err(|e| anyhow::anyhow!("the probe failed: {e}"))?;
        let name = args.server.clone().unwrap_or_else(|| {
            args.command
                .iter()
                .flat_map(|a| {
                    a.to_string_lossy()
                        .split('/')
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .rfind(|c| c.contains("server") || c.contains("mcp"))
                .unwrap_or_else(|| "probed".to_owned())
        });
        servers.push(ServerTools {
            pinned: pinned_of_named(),
            name,
            source: ToolSource::Probe,
            tools,
        });
    } else if let Some(store) = &store {
        let all: Vec<(String, BTreeMap<String, toolgate_runtime::pins::PinnedTool>)> =
            match &args.server {
                Some(name) => vec![(
                    name.clone(),
                    store
                        .load(name)
                        .with_context(|| format!("cannot read the pins of server `{name}`"))?,
                )],
                None => store
                    .all()
                    .context("cannot list the pin store")?
                    .into_iter()
                    .filter_map(|(name, pins)| match pins {
                        Ok(p) => Some((name, p)),
                        Err(e) => {
                            eprintln!("toolgate: skipping the pins of `{name}`: {e}");
                            None
                        }
                    })
                    .collect(),
            };
        for (name, pins) in all {
            servers.push(ServerTools {
                name,
                source: ToolSource::Pins,
                tools: pins.into_values().map(|p| p.definition).collect(),
                pinned: None,
            });
        }
    }

    // The audit log.
    let audit_path = args
        .audit
        .clone()
        .unwrap_or_else(|| toolgate_runtime::paths::default_audit(Path::new(&workspace)));
    let (figures, note) = if audit_path.exists() {
        (
            Some(audit::figures(
                &audit_path,
                since.as_deref(),
                until.as_deref(),
            )?),
            None,
        )
    } else if args.audit.is_some() {
        bail!("audit log `{}` does not exist", audit_path.display());
    } else {
        (
            None,
            Some(format!(
                "No audit log at `{}` (give one with `--audit PATH`).",
                audit_path.display()
            )),
        )
    };

    let r = report::build(Inputs {
        policy_label: label,
        loaded: &loaded,
        engine: &engine,
        servers,
        audit: figures,
        audit_note: note,
    });
    if let Some(path) = &args.html {
        std::fs::write(path, report::html::render(&r))
            .with_context(|| format!("cannot write `{}`", path.display()))?;
        eprintln!("toolgate: wrote the report to {}", path.display());
    }
    if args.suggest {
        out!("{}", report::suggestion_yaml(&r));
    } else if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&r).context("cannot encode the report")?
        );
    } else if args.html.is_none() {
        out!("{}", report::markdown::render(&r));
    }
    Ok(ExitCode::SUCCESS)
}
