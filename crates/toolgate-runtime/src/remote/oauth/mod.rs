//! OAuth 2.1 for remote MCP servers, as the MCP authorization specification (2025-11-25)
//! describes it: discovery from a 401 (`challenge`, `metadata`), a client identity
//! (pre-registered, client ID metadata document, or dynamic registration: `endpoints`),
//! authorization code with PKCE S256 through the user's browser and a loopback callback
//! (`pkce`, `callback`), tokens refreshed ahead of expiry and kept per (server, issuer) in
//! a private file (`store`), and the [`Authorizer`] the transport calls (`session`).
//!
//! How the transport uses it: before each request, `authorization()` (a `Bearer …` value,
//! or `None`: send without); on a 401 or 403, `challenge(status, WWW-Authenticate,
//! the value the refused request carried)`, then retry the request once with a fresh
//! `authorization()`. An `Err` is final for that request (answer it with a JSON-RPC
//! error carrying the message: it never contains a token). Calls are serialised inside
//! the authorizer; while a browser flow runs, `authorization()` waits for it (bounded by
//! `--auth-timeout`).

pub mod callback;
pub mod challenge;
pub mod endpoints;
pub mod metadata;
pub mod pkce;
pub mod session;
pub mod store;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use url::Url;

pub use session::{Config, OAuthAuthorizer, server_key};
pub use store::{Secret, Store};

use super::authorizer::Authorizer;
use super::http::NetOptions;

/// Network flags shared by `wrap --url` and `toolgate auth`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct NetArgs {
    /// Allow plain `http://` to hosts other than loopback (the server and its authorization server).
    #[arg(long)]
    pub allow_http: bool,
    /// Trust the PEM root certificates in this file too, besides the platform's.
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
}

impl NetArgs {
    /// The options of `remote::http::client`.
    pub fn options(&self) -> NetOptions {
        NetOptions {
            allow_http: self.allow_http,
            ca_file: self.ca_file.clone(),
        }
    }
}

/// OAuth flags shared by `wrap --url` and `toolgate auth login`.
#[derive(Debug, Clone, clap::Args)]
pub struct OAuthArgs {
    /// A client registered ahead of time at the authorization server (skips dynamic registration).
    #[arg(long, value_name = "ID")]
    pub client_id: Option<String>,
    /// The environment variable holding the secret of a confidential `--client-id`.
    #[arg(long, value_name = "VAR", requires = "client_id")]
    pub client_secret_env: Option<String>,
    /// Your client ID metadata document (an https URL), used where the authorization server supports them.
    #[arg(long, value_name = "URL")]
    pub client_metadata_url: Option<String>,
    /// Scopes to request (space-separated). Default: what the server's challenge or metadata asks for.
    #[arg(long, value_name = "SCOPES")]
    pub scope: Option<String>,
    /// Do not send the RFC 8707 `resource` parameter (for authorization servers that reject it).
    #[arg(long)]
    pub no_resource_parameter: bool,
    /// The port of the loopback callback on 127.0.0.1 [default: any free port]
    #[arg(long, value_name = "PORT")]
    pub callback_port: Option<u16>,
    /// How long to wait for the browser authorization (e.g. `90s`, `5m`).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = crate::duration::parse_duration)]
    pub auth_timeout: Duration,
    #[command(flatten)]
    pub net: NetArgs,
}

impl Default for OAuthArgs {
    fn default() -> Self {
        OAuthArgs {
            client_id: None,
            client_secret_env: None,
            client_metadata_url: None,
            scope: None,
            no_resource_parameter: false,
            callback_port: None,
            auth_timeout: Duration::from_secs(300),
            net: NetArgs::default(),
        }
    }
}

impl OAuthArgs {
    /// The authorizer's configuration; reads the client secret from the environment.
    pub fn config(&self, interactive: bool) -> anyhow::Result<Config> {
        let client_secret = match &self.client_secret_env {
            Some(var) => {
                let value = std::env::var(var).ok().filter(|v| !v.is_empty());
                let value = value.with_context(|| {
                    format!("`--client-secret-env {var}`: the environment variable `{var}` is not set\n  help: export it with the client secret")
                })?;
                Some(Secret::new(value))
            }
            None => None,
        };
        let client_metadata_url = match &self.client_metadata_url {
            Some(text) => {
                let url = Url::parse(text)
                    .with_context(|| format!("`--client-metadata-url` `{text}` is not a URL"))?;
                anyhow::ensure!(
                    url.scheme() == "https" && url.path() != "/",
                    "`--client-metadata-url` `{text}` must be an https URL with a path"
                );
                Some(url)
            }
            None => None,
        };
        let scope = self
            .scope
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        Ok(Config {
            client_id: self.client_id.clone(),
            client_secret,
            client_metadata_url,
            scope: scope.map(str::to_owned),
            resource_parameter: !self.no_resource_parameter,
            callback_port: self.callback_port,
            timeout: self.auth_timeout,
            interactive,
            allow_http: self.net.allow_http,
        })
    }
}

/// The authorizer of `server_url` for `wrap --url`: interactive (a 401 without usable
/// credentials opens the browser flow, bounded by `--auth-timeout`), sharing the
/// transport's client (one connection pool per process).
pub fn authorizer_with_client(
    server_url: &Url,
    args: &OAuthArgs,
    net: &NetOptions,
    http: reqwest::Client,
) -> anyhow::Result<Arc<dyn Authorizer>> {
    super::http::check_url(server_url, net.allow_http, "server URL")?;
    let cfg = args.config(true)?;
    Ok(Arc::new(OAuthAuthorizer::new(
        server_url,
        cfg,
        http,
        Store::open_default()?,
    )))
}
