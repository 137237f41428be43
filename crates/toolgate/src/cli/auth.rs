//! `toolgate auth login|status|logout URL`: the OAuth credentials of remote MCP servers,
//! obtained ahead of time (so `wrap --url` starts without a browser), shown without their
//! tokens, and forgotten (revoked where the authorization server offers it).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args as ClapArgs, Subcommand};
use serde_json::json;
use url::Url;

use toolgate_mcp::protocol;
use toolgate_runtime::remote::authorizer::Authorizer as _;
use toolgate_runtime::remote::handshake;
use toolgate_runtime::remote::http::{check_url, redact};
use toolgate_runtime::remote::oauth::endpoints::{self, ClientAuth};
use toolgate_runtime::remote::oauth::store::{ClientKind, Entry, Secret, now};
use toolgate_runtime::remote::oauth::{NetArgs, OAuthArgs, OAuthAuthorizer, Store, server_key};

/// Arguments of `toolgate auth`.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:
  toolgate auth login https://mcp.example.com/mcp
  toolgate auth status
  toolgate auth logout https://mcp.example.com/mcp")]
pub struct Args {
    #[command(subcommand)]
    command: AuthCommand,
}

#[derive(Debug, Subcommand)]
enum AuthCommand {
    /// Authorize toolgate at a remote MCP server now (opens the browser; the URL is also printed).
    #[command(after_help = "Examples:
  toolgate auth login https://mcp.example.com/mcp
  toolgate auth login https://mcp.example.com/mcp \\
    --client-id my-app --client-secret-env MY_APP_SECRET
  toolgate auth login https://mcp.example.com/mcp --scope 'read write' \\
    --callback-port 8765

Credentials are stored in $TOOLGATE_CREDENTIALS_DIR, else $XDG_DATA_HOME/toolgate/credentials,
else ~/.local/share/toolgate/credentials (0600). `toolgate wrap --url` uses them.
TOOLGATE_BROWSER names a program to open the URL with instead of xdg-open/open.")]
    Login {
        /// The MCP server URL.
        url: String,
        #[command(flatten)]
        oauth: OAuthArgs,
    },
    /// Show stored credentials: issuer, client, scopes, expiry, refreshable (never a token).
    #[command(after_help = "Examples:
  toolgate auth status
  toolgate auth status https://mcp.example.com/mcp --check
  toolgate auth status --json

With a URL, exits 1 when that server has no usable credentials (none, or expired and not
refreshable); `--check` exits 2 when the server refuses them.")]
    Status {
        /// Only this server.
        url: Option<String>,
        /// Also send the server a request with the credentials (refreshing them if they are
        /// about to expire); never opens a browser.
        #[arg(long, requires = "url")]
        check: bool,
        /// One JSON document.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        oauth: OAuthArgs,
    },
    /// Forget a server's credentials, revoking them where the authorization server offers it.
    #[command(after_help = "Examples:
  toolgate auth logout https://mcp.example.com/mcp
  toolgate auth logout https://mcp.example.com/mcp \\
    --client-secret-env MY_APP_SECRET")]
    Logout {
        /// The MCP server URL.
        url: String,
        /// The environment variable holding the secret of a confidential `--client-id`.
        #[arg(long, value_name = "VAR")]
        client_secret_env: Option<String>,
        #[command(flatten)]
        net: NetArgs,
    },
}

/// Runs `toolgate auth …`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Diagnostics like wrap's: a refused refresh, a wrong `state` at the callback.
    super::logs::init("warn", super::logs::Format::Text);
    let runtime =
        toolgate_runtime::rt::current_thread().context("cannot start the async runtime")?;
    runtime.block_on(async move {
        match args.command {
            AuthCommand::Login { url, oauth } => login(&url, &oauth).await,
            AuthCommand::Status {
                url,
                check,
                json,
                oauth,
            } => status(url.as_deref(), check, json, &oauth).await,
            AuthCommand::Logout {
                url,
                client_secret_env,
                net,
            } => logout(&url, client_secret_env.as_deref(), &net).await,
        }
    })
}

fn parse_server(text: &str, allow_http: bool) -> anyhow::Result<Url> {
    let url = Url::parse(text).with_context(|| {
        format!("`{text}` is not a URL\n  help: give the MCP endpoint, e.g. `https://mcp.example.com/mcp`")
    })?;
    check_url(&url, allow_http, "server URL")?;
    Ok(url)
}

/// How many requests `login` and `status --check` make before giving up.
const MAX_ATTEMPTS: usize = 5;

/// Sends `initialize` with the authorizer's credentials until the server accepts them or
/// the authorizer gives up. `Ok(false)`: the server needs no credentials.
async fn probe_until_accepted(
    auth: &OAuthAuthorizer,
    http: &reqwest::Client,
    server: &Url,
) -> anyhow::Result<bool> {
    for _ in 0..MAX_ATTEMPTS {
        let header = auth.authorization().await?;
        let (status, www) = probe(http, server, header.as_deref()).await?;
        match status {
            200..=299 => return Ok(header.is_some()),
            401 | 403 => {
                auth.challenge(status, www.as_deref(), header.as_deref())
                    .await?
            }
            other => anyhow::bail!(
                "`{}` answered HTTP {other} to `initialize`: not an authorization failure\n  \
                 help: check the URL (it must be the server's MCP endpoint)",
                redact(server)
            ),
        }
    }
    anyhow::bail!(
        "`{}` still refused the credentials after {MAX_ATTEMPTS} attempts",
        redact(server)
    )
}

/// One `initialize` POST; returns the status and `WWW-Authenticate`. A session the server
/// opened is closed again (DELETE, best effort).
async fn probe(
    http: &reqwest::Client,
    server: &Url,
    authorization: Option<&str>,
) -> anyhow::Result<(u16, Option<String>)> {
    let body = handshake::initialize_request(&json!(1), "toolgate-auth", protocol::V2025_11_25);
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(value) = authorization {
        let value = reqwest::header::HeaderValue::from_str(value)
            .context("the access token is not a valid header value")?;
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    let response = handshake::post_initialize(
        http,
        server,
        headers.clone(),
        body,
        Some(Duration::from_secs(30)),
    )
    .await
    .with_context(|| format!("cannot reach `{}`", redact(server)))?;
    let status = response.status().as_u16();
    let www = response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let session = handshake::session_id(&response).filter(|v| v.to_str().is_ok());
    drop(response);
    if let Some(session) = session {
        let limit = Duration::from_secs(5);
        let _ = handshake::end_session(http, server, headers, session, None, limit).await;
    }
    Ok((status, www))
}

async fn login(url: &str, oauth: &OAuthArgs) -> anyhow::Result<ExitCode> {
    let server = parse_server(url, oauth.net.allow_http)?;
    let net = oauth.net.options();
    let http = toolgate_runtime::remote::http::client(&net)?;
    let auth = OAuthAuthorizer::new(
        &server,
        oauth.config(true)?,
        http.clone(),
        Store::open_default()?,
    );
    if !probe_until_accepted(&auth, &http, &server).await? {
        outln!(
            "`{}` accepted a request without credentials: it needs no authorization",
            redact(&server)
        );
        return Ok(ExitCode::SUCCESS);
    }
    outln!("logged in to {}", auth.key());
    if let Some(entry) = auth.entry().await {
        print_entry(&entry, now());
    }
    Ok(ExitCode::SUCCESS)
}

async fn status(
    url: Option<&str>,
    check: bool,
    as_json: bool,
    oauth: &OAuthArgs,
) -> anyhow::Result<ExitCode> {
    let store = Store::open_default()?;
    let server = url
        .map(|u| parse_server(u, oauth.net.allow_http))
        .transpose()?;
    let key = server.as_ref().map(server_key);
    if let (true, Some(server)) = (check, &server) {
        let net = oauth.net.options();
        let http = toolgate_runtime::remote::http::client(&net)?;
        let auth = OAuthAuthorizer::new(server, oauth.config(false)?, http.clone(), store.clone());
        let needed = probe_until_accepted(&auth, &http, server).await?;
        if !as_json {
            if needed {
                outln!("{}: the server accepts the stored credentials", auth.key());
            } else {
                outln!("{}: the server needs no credentials", auth.key());
            }
        }
    }
    let t = now();
    let entries: Vec<Entry> = store
        .load()?
        .into_iter()
        .filter(|e| key.as_ref().is_none_or(|k| &e.server == k))
        .collect();
    if as_json {
        let items: Vec<serde_json::Value> = entries.iter().map(|e| entry_json(e, t)).collect();
        outln!("{}", serde_json::to_string_pretty(&items)?);
    } else if entries.is_empty() {
        match &key {
            Some(k) => outln!("no credentials for {k}\n  help: run `toolgate auth login {k}`"),
            None => outln!("no stored credentials (`toolgate auth login URL` adds some)"),
        }
    } else {
        for entry in &entries {
            outln!("{}", entry.server);
            print_entry(entry, t);
        }
    }
    let usable = entries.iter().any(|e| {
        e.tokens
            .as_ref()
            .is_some_and(|tk| !tk.expired(t) || tk.refresh_token.is_some())
    });
    Ok(if key.is_some() && !usable {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn kind_name(kind: ClientKind) -> &'static str {
    match kind {
        ClientKind::PreRegistered => "pre-registered",
        ClientKind::Dynamic => "dynamic registration",
        ClientKind::MetadataDocument => "client ID metadata document",
    }
}

fn expiry_text(entry: &Entry, t: u64) -> String {
    match &entry.tokens {
        None => "no token (refused; log in again)".to_owned(),
        Some(tokens) => match tokens.expires_at {
            None => "not given by the server".to_owned(),
            Some(at) if at > t => format!("in {} ({})", human(at - t), rfc3339(at)),
            Some(at) => format!("expired {} ago ({})", human(t - at), rfc3339(at)),
        },
    }
}

fn print_entry(entry: &Entry, t: u64) {
    let tokens = entry.tokens.as_ref();
    outln!("  issuer:      {}", entry.issuer);
    outln!(
        "  client:      {} ({})",
        entry.client.client_id,
        kind_name(entry.client.kind)
    );
    outln!(
        "  scopes:      {}",
        tokens
            .and_then(|t| t.scope.as_deref())
            .filter(|s| !s.is_empty())
            .unwrap_or("(none reported)")
    );
    outln!("  expires:     {}", expiry_text(entry, t));
    outln!(
        "  refreshable: {}",
        if tokens.is_some_and(|t| t.refresh_token.is_some()) {
            "yes"
        } else {
            "no"
        }
    );
}

fn entry_json(entry: &Entry, t: u64) -> serde_json::Value {
    let tokens = entry.tokens.as_ref();
    json!({
        "server": entry.server,
        "issuer": entry.issuer,
        "client_id": entry.client.client_id,
        "client_kind": entry.client.kind,
        "scope": tokens.and_then(|t| t.scope.clone()),
        "expires_at": tokens.and_then(|t| t.expires_at),
        "expired": tokens.is_none_or(|tk| tk.expired(t)),
        "refreshable": tokens.is_some_and(|t| t.refresh_token.is_some()),
        "revocable": entry.revocation_endpoint.is_some(),
    })
}

async fn logout(url: &str, secret_env: Option<&str>, net: &NetArgs) -> anyhow::Result<ExitCode> {
    let server = parse_server(url, net.allow_http)?;
    let key = server_key(&server);
    let store = Store::open_default()?;
    let entries: Vec<Entry> = store
        .load()?
        .into_iter()
        .filter(|e| e.server == key)
        .collect();
    if entries.is_empty() {
        outln!("no credentials for {key}");
        return Ok(ExitCode::SUCCESS);
    }
    let secret = secret_env
        .and_then(|var| std::env::var(var).ok())
        .filter(|v| !v.is_empty())
        .map(Secret::new);
    let http = toolgate_runtime::remote::http::client(&net.options())?;
    let mut code = ExitCode::SUCCESS;
    for entry in &entries {
        let (Some(endpoint), Some(tokens)) = (&entry.revocation_endpoint, &entry.tokens) else {
            if entry.tokens.is_some() {
                outln!(
                    "{}: `{}` offers no revocation endpoint; the tokens are forgotten but stay valid until they expire",
                    key,
                    entry.issuer
                );
            }
            continue;
        };
        let auth = ClientAuth::new(&entry.client, secret.clone());
        let mut revoked = Vec::new();
        let mut wanted = vec![("refresh_token", tokens.refresh_token.as_ref())];
        wanted.push(("access_token", Some(&tokens.access_token)));
        for (hint, token) in wanted {
            let Some(token) = token else { continue };
            match endpoints::revoke(&http, endpoint, &auth, token, hint, net.allow_http).await {
                Ok(()) => revoked.push(hint.replace('_', " ")),
                Err(e) => {
                    eprintln_warning(&format!(
                        "cannot revoke the {} of `{key}` at `{}`: {e}",
                        hint.replace('_', " "),
                        entry.issuer
                    ));
                    code = ExitCode::from(1);
                }
            }
        }
        if !revoked.is_empty() {
            outln!(
                "{key}: revoked the {} at {}",
                revoked.join(" and "),
                entry.issuer
            );
        }
    }
    store.modify(|all| all.retain(|e| e.server != key))?;
    outln!("logged out of {key}");
    Ok(code)
}

#[allow(
    clippy::print_stderr,
    reason = "a message for the person at the terminal"
)]
fn eprintln_warning(message: &str) {
    eprintln!("toolgate: warning: {message}");
}

fn human(secs: u64) -> String {
    match secs {
        0..=119 => format!("{secs}s"),
        120..=7199 => format!("{}m", secs / 60),
        7200..=172_799 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

/// Unix seconds as RFC 3339 UTC (proleptic Gregorian, days-from-civil inverted).
fn rfc3339(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_798_761_599), "2026-12-31T23:59:59Z");
        assert_eq!(human(59), "59s");
        assert_eq!(human(3599), "59m");
    }
}
