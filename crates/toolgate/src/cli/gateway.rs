//! `toolgate gateway [check|hash-token|schema]`: run the multi-agent gateway, check its
//! configuration, hash a static token, print the configuration's JSON Schema.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;
use sha2::Digest as _;

use crate::cli::policy::print_diagnostics;
use toolgate_gateway::load::{LoadedConfig, load_config, redact_password, secret_key};

#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Examples:
  toolgate gateway check --config gateway.yaml
  toolgate gateway --config gateway.yaml
  printf %s \"$TOKEN\" | toolgate gateway hash-token
  toolgate gateway schema > gateway.schema.json

docs/gateway.md describes the configuration; docs/gateway.example.yaml is a starting point."
)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Cmd>,
    /// The configuration file (gateway.yaml); runs the gateway.
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Validate a configuration and the policies it names: exit 0 valid, 1 invalid, 2 usage.
    #[command(after_help = "Examples:
  toolgate gateway check --config gateway.yaml
  toolgate gateway check --config gateway.yaml && echo valid

Errors and warnings are located (file:line:column) with a `help:` line.")]
    Check {
        /// The configuration file.
        #[arg(long, value_name = "PATH")]
        config: PathBuf,
    },
    /// Read a bearer token on stdin, print its SHA-256 (hex) for `auth.tokens[].sha256`.
    #[command(after_help = "Examples:
  printf %s \"$TOKEN\" | toolgate gateway hash-token
  openssl rand -hex 32 | tee ci-bot.token | toolgate gateway hash-token

One trailing newline is ignored. The token is never printed.")]
    HashToken,
    /// Print the JSON Schema of the configuration (for editors' completion and checks).
    #[command(after_help = "Examples:
  toolgate gateway schema > gateway.schema.json
  toolgate gateway schema | jq '.properties | keys'")]
    Schema,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match (args.command, args.config) {
        (Some(Cmd::Check { config }), _) => check(&config),
        (Some(Cmd::HashToken), _) => hash_token(),
        (Some(Cmd::Schema), _) => {
            outln!("{}", toolgate_gateway::schema::gateway_schema_text());
            Ok(ExitCode::SUCCESS)
        }
        (None, Some(config)) => serve(config),
        (None, None) => {
            eprintln!(
                "error: `toolgate gateway` needs `--config PATH` (or a subcommand)\n  help: start from docs/gateway.example.yaml; `toolgate gateway --help` lists the subcommands"
            );
            Ok(ExitCode::from(2))
        }
    }
}

/// Loads the configuration; on errors prints the diagnostics and returns `None`.
fn load(path: &Path) -> Option<LoadedConfig> {
    match load_config(path) {
        Ok(loaded) => {
            print_diagnostics(&loaded.warnings);
            Some(loaded)
        }
        Err(diags) => {
            print_diagnostics(&diags);
            let (e, w) = (diags.errors(), diags.warnings());
            eprintln!(
                "gateway configuration is invalid: {e} error{}{}",
                plural(e),
                if w > 0 {
                    format!(", {w} warning{}", plural(w))
                } else {
                    String::new()
                }
            );
            None
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn serve(path: PathBuf) -> anyhow::Result<ExitCode> {
    let Some(loaded) = load(&path) else {
        return Ok(ExitCode::from(1));
    };
    // Fail before binding anything when the key is missing or too short.
    secret_key(&loaded.config)?;
    super::logs::init("info", super::logs::Format::Json);
    toolgate_gateway::run(loaded, path)
}

fn check(path: &Path) -> anyhow::Result<ExitCode> {
    let Some(loaded) = load(path) else {
        return Ok(ExitCode::from(1));
    };
    let c = &loaded.config;
    let mut warnings = loaded.warnings.warnings();
    // The key may live only on the gateway's hosts: a warning here, an error at start.
    if let Err(e) = secret_key(c) {
        warnings += 1;
        eprintln!(
            "warning: the secret cannot be read here: {e:#}\n  help: `toolgate gateway` will not start without it\n"
        );
    }
    let servers: Vec<String> = c
        .servers
        .iter()
        .map(|(name, s)| {
            let kind = if s.url.is_some() { "remote" } else { "local" };
            format!("{name} ({kind})")
        })
        .collect();
    let mut auth = Vec::new();
    if let Some(jwt) = &c.auth.jwt {
        auth.push(format!("jwt from {}", jwt.issuer));
    }
    if !c.auth.tokens.is_empty() {
        let n = c.auth.tokens.len();
        auth.push(format!("{n} static token{}", plural(n)));
    }
    let store = match &c.store {
        Some(s) => match (&s.url, &s.path) {
            (_, Some(path)) => format!("the file `{}` (one replica)", path.display()),
            (url, None) => format!(
                "{} (namespace {})",
                redact_password(url.as_deref().unwrap_or_default()),
                s.namespace()
            ),
        },
        None => "in memory (one replica)".to_owned(),
    };
    outln!(
        "gateway configuration is valid: {} server{}: {}; auth: {}; store: {}{}",
        servers.len(),
        plural(servers.len()),
        servers.join(", "),
        auth.join(", "),
        store,
        if warnings > 0 {
            format!("; {warnings} warning{}", plural(warnings))
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

fn hash_token() -> anyhow::Result<ExitCode> {
    let mut input = Vec::new();
    const MAX: usize = 64 * 1024;
    std::io::stdin()
        .take(MAX as u64 + 1)
        .read_to_end(&mut input)
        .context("cannot read the token from stdin")?;
    if input.len() > MAX {
        eprintln!("error: the input is longer than 64 KiB: not a bearer token");
        return Ok(ExitCode::from(1));
    }
    let text = String::from_utf8(input).map_err(|_| anyhow::anyhow!("the token is not UTF-8"))?;
    let token = text
        .strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .unwrap_or(&text);
    if token.is_empty() {
        eprintln!(
            "error: no token on stdin\n  help: printf %s \"$TOKEN\" | toolgate gateway hash-token"
        );
        return Ok(ExitCode::from(1));
    }
    // What `Authorization: Bearer <token>` can carry (RFC 6750's b64token).
    let b64token = token
        .trim_end_matches('=')
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b));
    if !b64token {
        eprintln!(
            "error: the token contains characters a bearer token cannot carry (spaces, quotes, more than one line, ...)\n  help: use letters, digits and `-._~+/` only, e.g. a token from `openssl rand -hex 32`"
        );
        return Ok(ExitCode::from(1));
    }
    if token.len() < 16 {
        eprintln!(
            "warning: the token is only {} characters long; use at least 32 random bytes (`openssl rand -hex 32`)",
            token.len()
        );
    }
    outln!("{}", hex::encode(sha2::Sha256::digest(token.as_bytes())));
    Ok(ExitCode::SUCCESS)
}
