//! [`OAuthAuthorizer`]: the [`Authorizer`] of one MCP server. It hands out the stored
//! access token (refreshed ahead of its expiry), and on a challenge refreshes, adopts what
//! another process stored, steps up the scope, or runs the browser flow.
//!
//! Several processes: a browser flow and a refresh run under the server's lock in the store;
//! whoever gets it first re-reads the store and adopts a token another process obtained
//! meanwhile, so one browser flow runs and a rotated refresh token is used once.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::Mutex;
use url::Url;

use super::callback::Listener;
use super::challenge::{self, Bearer};
use super::endpoints::{self, AuthorizationRequest, ClientAuth, EndpointError};
use super::metadata::{self, AuthServer, Discovered};
use super::pkce;
use super::store::{ClientInfo, ClientKind, Entry, Secret, Store, now};
use crate::remote::authorizer::{AuthError, AuthFuture, Authorizer};
use crate::remote::http::redact;

/// How many step-up re-authorizations one authorizer runs.
const MAX_STEP_UPS: usize = 3;

/// Environment variable naming a program to open authorization URLs with (instead of
/// `xdg-open`/`open`); it gets the URL as its one argument.
pub const BROWSER_ENV: &str = "TOOLGATE_BROWSER";

/// What the authorizer needs besides the server URL.
#[derive(Debug, Clone)]
pub struct Config {
    /// A pre-registered client.
    pub client_id: Option<String>,
    /// Its secret (read from the environment at start-up).
    pub client_secret: Option<Secret>,
    /// A client ID metadata document URL.
    pub client_metadata_url: Option<Url>,
    /// Scopes the user asked for.
    pub scope: Option<String>,
    /// Send RFC 8707 `resource`.
    pub resource_parameter: bool,
    /// Fixed callback port.
    pub callback_port: Option<u16>,
    /// The bound of an interactive flow (and of waiting for another process's).
    pub timeout: Duration,
    /// Whether a browser flow may run; otherwise missing credentials are [`AuthError::NeedsLogin`].
    pub interactive: bool,
    /// Plain http to hosts other than loopback.
    pub allow_http: bool,
}

/// The authorizer of one server.
pub struct OAuthAuthorizer {
    server: Url,
    /// The store key: the URL without user information or fragment.
    key: String,
    /// The URL as messages show it: also without its query (`http::redact`).
    shown: String,
    cfg: Config,
    http: reqwest::Client,
    store: Store,
    state: Mutex<CredentialState>,
}

impl std::fmt::Debug for OAuthAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthAuthorizer")
            .field("server", &self.shown)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct CredentialState {
    /// The credentials in use.
    entry: Option<Entry>,
    /// The `Authorization` value a browser flow of this authorizer obtained last.
    last_flow_header: Option<String>,
    /// The scope sets step-ups asked for.
    step_ups: Vec<BTreeSet<String>>,
    /// While a browser flow waits: the issuer, if the client is a registration reused from
    /// an earlier flow (an authorization server that forgot it shows the user an error page
    /// and never redirects, so a timeout drops it: the next flow registers again).
    reused_client_at: Option<String>,
}

/// Why a refresh did not give a token.
enum RefreshError {
    /// The refresh token or client is no longer accepted: the user must log in.
    Refused(String),
    /// Anything else (network, store).
    Other(anyhow::Error),
}

impl OAuthAuthorizer {
    /// An authorizer for `server` (already checked by `check_url`).
    pub fn new(server: &Url, cfg: Config, http: reqwest::Client, store: Store) -> Self {
        OAuthAuthorizer {
            key: server_key(server),
            shown: redact(server),
            server: server.clone(),
            cfg,
            http,
            store,
            state: Mutex::new(CredentialState::default()),
        }
    }

    /// The store key of the server.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The stored credentials now in use, if any (for `auth status` and `auth login`).
    pub async fn entry(&self) -> Option<Entry> {
        self.state.lock().await.entry.clone()
    }

    fn login_hint(&self) -> String {
        format!("help: run `toolgate auth login {}`", self.shown)
    }

    fn load(&self, st: &mut CredentialState) -> Result<(), AuthError> {
        if st.entry.is_none() {
            st.entry = self
                .store
                .find(&self.key, None)
                .map_err(|e| AuthError::Failed(format!("{e:#}")))?;
        }
        Ok(())
    }

    async fn authorization_inner(&self) -> Result<Option<String>, AuthError> {
        let mut st = self.state.lock().await;
        self.load(&mut st)?;
        let Some(tokens) = st.entry.as_ref().and_then(|e| e.tokens.clone()) else {
            return Ok(None);
        };
        let t = now();
        if tokens.expiring(t) {
            if tokens.refresh_token.is_some() {
                match self.refresh(&mut st, Some(&tokens.header())).await {
                    Ok(()) => {}
                    Err(RefreshError::Refused(msg)) => {
                        if !self.cfg.interactive {
                            return Err(AuthError::NeedsLogin(msg));
                        }
                        tracing::warn!("{msg}");
                        return Ok(None);
                    }
                    Err(RefreshError::Other(e)) if !tokens.expired(t) => {
                        tracing::warn!(
                            "cannot refresh the token of `{}` ahead of its expiry (still using it): {e:#}",
                            self.shown
                        );
                    }
                    Err(RefreshError::Other(e)) => return Err(AuthError::Failed(format!("{e:#}"))),
                }
            } else if tokens.expired(t) {
                return Ok(None);
            }
        }
        Ok(st
            .entry
            .as_ref()
            .and_then(|e| e.tokens.as_ref())
            .map(|t| t.header()))
    }

    /// Refreshes under the server's lock, adopting a token another process stored.
    async fn refresh(
        &self,
        st: &mut CredentialState,
        rejected: Option<&str>,
    ) -> Result<(), RefreshError> {
        let Some(ours) = st.entry.clone() else {
            return Err(RefreshError::Other(anyhow::anyhow!(
                "no credentials to refresh"
            )));
        };
        let _lock = self
            .store
            .lock_server(&self.key, self.cfg.timeout)
            .await
            .map_err(RefreshError::Other)?;
        let stored = self
            .store
            .find(&self.key, Some(&ours.issuer))
            .map_err(RefreshError::Other)?;
        let t = now();
        if let Some(stored) = &stored
            && let Some(tokens) = &stored.tokens
            && Some(tokens.header().as_str()) != rejected
            && ours.tokens.as_ref() != Some(tokens)
            && !tokens.expiring(t)
        {
            tracing::debug!(
                "adopting the token another toolgate stored for `{}`",
                self.shown
            );
            st.entry = Some(stored.clone());
            return Ok(());
        }
        // The stored refresh token is the newest (another process may have rotated it).
        let base = match stored {
            Some(stored) if stored.tokens.is_some() => stored,
            _ => ours,
        };
        let Some(tokens) = base.tokens.clone() else {
            return Err(RefreshError::Other(anyhow::anyhow!(
                "no credentials to refresh"
            )));
        };
        let auth = ClientAuth::new(&base.client, self.cfg.client_secret.clone());
        let result = endpoints::refresh(
            &self.http,
            &base.token_endpoint,
            &auth,
            &tokens,
            base.resource.as_deref(),
            self.cfg.allow_http,
        )
        .await;
        match result {
            Ok(fresh) => {
                let mut entry = base;
                entry.tokens = Some(fresh);
                entry.updated_at = now();
                self.store.put(entry.clone()).map_err(RefreshError::Other)?;
                st.entry = Some(entry);
                Ok(())
            }
            Err(EndpointError::OAuth { code, .. }) if code == "invalid_grant" => {
                let mut entry = base;
                entry.tokens = None;
                entry.updated_at = now();
                let issuer = entry.issuer.clone();
                self.store.put(entry.clone()).map_err(RefreshError::Other)?;
                st.entry = Some(entry);
                Err(RefreshError::Refused(format!(
                    "the authorization server `{issuer}` refused the refresh token of `{}` \
                     (`invalid_grant`: it was revoked or has expired)\n  {}",
                    self.shown,
                    self.login_hint()
                )))
            }
            Err(EndpointError::OAuth { code, .. })
                if code == "invalid_client" && base.client.kind == ClientKind::Dynamic =>
            {
                // The authorization server forgot the registration: drop it, so the next
                // flow registers again.
                let issuer = base.issuer.clone();
                self.store
                    .modify(|entries| {
                        entries.retain(|e| {
                            !(e.server == base.server && metadata::same_issuer(&e.issuer, &issuer))
                        });
                    })
                    .map_err(RefreshError::Other)?;
                st.entry = None;
                Err(RefreshError::Refused(format!(
                    "the authorization server `{issuer}` no longer knows toolgate's client \
                     (`invalid_client`); it will be registered again\n  {}",
                    self.login_hint()
                )))
            }
            Err(e) => Err(RefreshError::Other(anyhow::anyhow!(
                "cannot refresh the token of `{}`: {e}",
                self.shown
            ))),
        }
    }

    async fn challenge_inner(
        &self,
        status: u16,
        www_authenticate: Option<&str>,
        rejected: Option<&str>,
    ) -> Result<(), AuthError> {
        let bearer = www_authenticate
            .and_then(challenge::bearer)
            .unwrap_or_default();
        let mut st = self.state.lock().await;
        self.load(&mut st)?;
        let current = st
            .entry
            .as_ref()
            .and_then(|e| e.tokens.as_ref())
            .map(|t| t.header());
        let replaced = matches!((rejected, &current), (Some(r), Some(c)) if r != c);
        match status {
            403 => {
                if bearer.error.as_deref() != Some("insufficient_scope") {
                    return Err(AuthError::Failed(format!(
                        "`{}` refused the request (HTTP 403{}): the credentials are valid but not allowed to do this",
                        redact(&self.server),
                        bearer
                            .error
                            .as_deref()
                            .map(|e| format!(", `{}`", super::callback::clean(e)))
                            .unwrap_or_default()
                    )));
                }
                if replaced {
                    return Ok(());
                }
                let mut wanted: BTreeSet<String> = st
                    .entry
                    .as_ref()
                    .and_then(|e| e.tokens.as_ref())
                    .map(|t| t.scopes())
                    .unwrap_or_default();
                wanted.extend(
                    bearer
                        .scope
                        .as_deref()
                        .unwrap_or_default()
                        .split_ascii_whitespace()
                        .map(str::to_owned),
                );
                let text = wanted.iter().cloned().collect::<Vec<_>>().join(" ");
                if st.step_ups.contains(&wanted) || st.step_ups.len() >= MAX_STEP_UPS {
                    return Err(AuthError::Failed(format!(
                        "`{}` still answers `insufficient_scope` after re-authorization with scope `{text}`: \
                         not asking again\n  help: check the scopes your account may grant, or pass `--scope`",
                        redact(&self.server)
                    )));
                }
                st.step_ups.push(wanted);
                tracing::info!("`{}` needs scope `{text}`: authorizing again", self.shown);
                self.flow(&mut st, &bearer, Some(text), rejected).await
            }
            401 => {
                if replaced {
                    return Ok(());
                }
                // Another process may have stored a newer token.
                let stored = self
                    .store
                    .find(&self.key, None)
                    .map_err(|e| AuthError::Failed(format!("{e:#}")))?;
                if let Some(stored) = stored
                    && let Some(tokens) = &stored.tokens
                    && Some(tokens.header().as_str()) != rejected
                    && !tokens.expired(now())
                {
                    st.entry = Some(stored);
                    return Ok(());
                }
                if rejected.is_some() && rejected == st.last_flow_header.as_deref() {
                    return Err(AuthError::Failed(format!(
                        "`{}` refused the token its authorization server has just issued{}\n  \
                         help: check that the server accepts tokens of this authorization server (try `--no-resource-parameter` or `--scope`)",
                        redact(&self.server),
                        bearer
                            .error_description
                            .as_deref()
                            .map(|d| format!(" ({})", super::callback::clean(d)))
                            .unwrap_or_default()
                    )));
                }
                let refreshable = st
                    .entry
                    .as_ref()
                    .and_then(|e| e.tokens.as_ref())
                    .is_some_and(|t| t.refresh_token.is_some());
                if rejected.is_some() && refreshable {
                    match self.refresh(&mut st, rejected).await {
                        Ok(()) => return Ok(()),
                        Err(RefreshError::Refused(msg)) => {
                            if !self.cfg.interactive {
                                return Err(AuthError::NeedsLogin(msg));
                            }
                            tracing::warn!("{msg}");
                        }
                        Err(RefreshError::Other(e)) => {
                            tracing::warn!("{e:#}");
                        }
                    }
                }
                self.flow(&mut st, &bearer, None, rejected).await
            }
            other => Err(AuthError::Failed(format!(
                "unexpected challenge status {other} from `{}`",
                redact(&self.server)
            ))),
        }
    }

    /// Discovery, then (under the server's lock) adoption or the browser flow, within
    /// `--auth-timeout`.
    async fn flow(
        &self,
        st: &mut CredentialState,
        bearer: &Bearer,
        scope: Option<String>,
        rejected: Option<&str>,
    ) -> Result<(), AuthError> {
        let limit = self.cfg.timeout;
        let outcome =
            tokio::time::timeout(limit, self.flow_unbounded(st, bearer, scope, rejected)).await;
        let reused = st.reused_client_at.take();
        match outcome {
            Ok(result) => result,
            Err(_) => {
                if let Some(issuer) = reused {
                    self.forget_registration(&issuer);
                }
                Err(AuthError::Timeout(limit, self.shown.clone()))
            }
        }
    }

    /// Stops reusing the dynamic registration at `issuer` (its tokens, if any, stay).
    fn forget_registration(&self, issuer: &str) {
        let key = &self.key;
        let result = self.store.modify(|entries| {
            for e in entries.iter_mut() {
                if &e.server == key
                    && metadata::same_issuer(&e.issuer, issuer)
                    && e.client.kind == ClientKind::Dynamic
                {
                    e.client.redirect_uri = None;
                }
            }
        });
        if let Err(e) = result {
            tracing::warn!("{e:#}");
        }
    }

    async fn flow_unbounded(
        &self,
        st: &mut CredentialState,
        bearer: &Bearer,
        scope: Option<String>,
        rejected: Option<&str>,
    ) -> Result<(), AuthError> {
        let failed = |e: anyhow::Error| AuthError::Failed(format!("{e:#}"));
        let found = metadata::discover(
            &self.http,
            &self.server,
            bearer.resource_metadata.as_deref(),
            self.cfg.allow_http,
        )
        .await
        .map_err(failed)?;
        let meta = &found.auth_server;
        let _lock = self
            .store
            .lock_server(&self.key, self.cfg.timeout)
            .await
            .map_err(failed)?;
        let stored = self
            .store
            .find(&self.key, Some(&meta.issuer))
            .map_err(failed)?;
        let wanted: Option<BTreeSet<String>> = scope
            .as_deref()
            .map(|s| s.split_ascii_whitespace().map(str::to_owned).collect());
        if let Some(stored) = &stored
            && let Some(tokens) = &stored.tokens
            && Some(tokens.header().as_str()) != rejected
            && !tokens.expired(now())
            && wanted
                .as_ref()
                .is_none_or(|w| w.is_subset(&tokens.scopes()))
        {
            // Another process finished a flow while this one waited for the lock.
            st.entry = Some(stored.clone());
            return Ok(());
        }
        if !self.cfg.interactive {
            return Err(AuthError::NeedsLogin(format!(
                "no valid credentials for `{}`\n  {}",
                self.shown,
                self.login_hint()
            )));
        }
        check_pkce(meta).map_err(AuthError::Failed)?;
        let scope = choose_scope(
            scope,
            self.cfg.scope.as_deref(),
            bearer.scope.as_deref(),
            found.resource_metadata.scopes_supported.as_deref(),
        );
        let resource = self
            .cfg
            .resource_parameter
            .then(|| found.resource.to_string());
        let (client, listener) = self
            .client_identity(&found, stored.as_ref(), scope.as_deref())
            .await
            .map_err(failed)?;
        if stored.as_ref().is_some_and(|e| e.client == client) && client.kind == ClientKind::Dynamic
        {
            st.reused_client_at = Some(meta.issuer.clone());
        }
        let (verifier, code_challenge) = pkce::pair().map_err(failed)?;
        let state = pkce::random_string(32).map_err(failed)?;
        let redirect_uri = listener.redirect_uri();
        let url = endpoints::authorization_url(
            meta,
            &AuthorizationRequest {
                client_id: &client.client_id,
                redirect_uri: &redirect_uri,
                code_challenge: &code_challenge,
                state: &state,
                scope: scope.as_deref(),
                resource: resource.as_deref(),
            },
        )
        .map_err(failed)?;
        #[allow(
            clippy::print_stderr,
            reason = "a message for the person at the terminal"
        )]
        {
            eprintln!(
                "toolgate: to authorize access to `{}`, open this URL in a browser (waiting {}s):\n  {url}",
                redact(&self.server),
                self.cfg.timeout.as_secs()
            );
        }
        open_browser(&url);
        let response = listener.wait(&state).await.map_err(failed)?;
        check_iss(response.iss.as_deref(), meta).map_err(AuthError::Failed)?;
        let auth = ClientAuth::new(&client, self.cfg.client_secret.clone());
        let tokens = endpoints::exchange_code(
            &self.http,
            &meta.token_endpoint,
            &auth,
            &response.code,
            &verifier,
            &redirect_uri,
            resource.as_deref(),
            scope.as_deref(),
            self.cfg.allow_http,
        )
        .await
        .map_err(|e| {
            AuthError::Failed(format!("cannot obtain a token for `{}`: {e}", self.shown))
        })?;
        let header = tokens.header();
        let entry = Entry {
            server: self.key.clone(),
            issuer: meta.issuer.clone(),
            client,
            token_endpoint: meta.token_endpoint.clone(),
            revocation_endpoint: meta.revocation_endpoint.clone(),
            resource,
            tokens: Some(tokens),
            updated_at: now(),
        };
        self.store.put(entry.clone()).map_err(failed)?;
        st.entry = Some(entry);
        st.last_flow_header = Some(header);
        Ok(())
    }

    /// The client to authorize as, and the bound callback listener whose redirect URI it
    /// uses: `--client-id`; else a client ID metadata document (if given and supported);
    /// else the registered client of an earlier flow (if its callback port is free); else
    /// a new dynamic registration.
    async fn client_identity(
        &self,
        found: &Discovered,
        stored: Option<&Entry>,
        scope: Option<&str>,
    ) -> anyhow::Result<(ClientInfo, Listener)> {
        let meta = &found.auth_server;
        let port = self.cfg.callback_port.unwrap_or(0);
        if let Some(id) = &self.cfg.client_id {
            let listener = Listener::bind(port).await?;
            return Ok((
                ClientInfo {
                    client_id: id.clone(),
                    client_secret: None,
                    kind: ClientKind::PreRegistered,
                    redirect_uri: Some(listener.redirect_uri()),
                    secret_basic: ClientAuth::prefers_basic(
                        meta.token_endpoint_auth_methods_supported.as_deref(),
                    ),
                },
                listener,
            ));
        }
        if let Some(doc) = &self.cfg.client_metadata_url {
            if meta.client_id_metadata_document_supported {
                let listener = Listener::bind(port).await?;
                return Ok((
                    ClientInfo {
                        client_id: doc.to_string(),
                        client_secret: None,
                        kind: ClientKind::MetadataDocument,
                        redirect_uri: Some(listener.redirect_uri()),
                        secret_basic: false,
                    },
                    listener,
                ));
            }
            tracing::warn!(
                "the authorization server `{}` does not support client ID metadata documents; registering dynamically",
                meta.issuer
            );
        }
        if let Some(client) = stored.map(|e| &e.client)
            && client.kind == ClientKind::Dynamic
            && let Some(uri) = client.redirect_uri.as_deref()
            && let Some(old_port) = Url::parse(uri).ok().and_then(|u| u.port())
            && (self.cfg.callback_port.is_none() || self.cfg.callback_port == Some(old_port))
            && let Ok(listener) = Listener::bind(old_port).await
            && listener.redirect_uri() == uri
        {
            return Ok((client.clone(), listener));
        }
        let listener = Listener::bind(port).await?;
        let client = endpoints::register(
            &self.http,
            meta,
            &listener.redirect_uri(),
            scope,
            self.cfg.allow_http,
        )
        .await?;
        Ok((client, listener))
    }
}

impl Authorizer for OAuthAuthorizer {
    fn authorization(&self) -> AuthFuture<'_, Option<String>> {
        Box::pin(self.authorization_inner())
    }

    fn challenge<'a>(
        &'a self,
        status: u16,
        www_authenticate: Option<&'a str>,
        rejected: Option<&'a str>,
    ) -> AuthFuture<'a, ()> {
        Box::pin(self.challenge_inner(status, www_authenticate, rejected))
    }
}

/// PKCE is mandatory: the authorization server must advertise `S256` (MCP 2025-11-25:
/// a client MUST refuse when `code_challenge_methods_supported` is absent or lacks it).
fn check_pkce(meta: &AuthServer) -> Result<(), String> {
    if meta
        .code_challenge_methods_supported
        .as_ref()
        .is_some_and(|m| m.iter().any(|m| m == "S256"))
    {
        Ok(())
    } else {
        Err(format!(
            "the authorization server `{}` does not advertise PKCE `S256` (`code_challenge_methods_supported`): refused",
            meta.issuer
        ))
    }
}

/// The scopes to request: a step-up's set, else `--scope`, else the challenge's `scope`,
/// else the protected resource's `scopes_supported`, else none (the parameter is left out).
/// Never a built-in list.
fn choose_scope(
    step_up: Option<String>,
    user: Option<&str>,
    challenge: Option<&str>,
    supported: Option<&[String]>,
) -> Option<String> {
    step_up
        .or_else(|| user.map(str::to_owned))
        .or_else(|| challenge.map(str::to_owned))
        .or_else(|| supported.filter(|s| !s.is_empty()).map(|s| s.join(" ")))
        .filter(|s| !s.trim().is_empty())
}

/// RFC 9207: an `iss` in the authorization response must be the issuer's identifier, and
/// must be there when the metadata promises it.
fn check_iss(iss: Option<&str>, meta: &AuthServer) -> Result<(), String> {
    match (iss, meta.authorization_response_iss_parameter_supported) {
        (Some(iss), _) if iss != meta.issuer => Err(format!(
            "the authorization response names issuer `{}`, not `{}`: refused (RFC 9207; a mix-up attack?)",
            super::callback::clean(iss),
            meta.issuer
        )),
        (None, true) => Err(format!(
            "the authorization response has no `iss`, though `{}` promises one: refused (RFC 9207)",
            meta.issuer
        )),
        _ => Ok(()),
    }
}

/// The store key of a server URL: the URL without user information or fragment.
pub fn server_key(server: &Url) -> String {
    let mut url = server.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_fragment(None);
    url.to_string()
}

/// Opens `url` with `$TOOLGATE_BROWSER`, else the desktop's opener. Its output never
/// reaches toolgate's stdout (which may carry protocol frames); failures are only logged,
/// since the URL is printed too.
fn open_browser(url: &Url) {
    let custom = std::env::var_os(BROWSER_ENV).filter(|v| !v.is_empty());
    let program = custom.clone().unwrap_or_else(|| {
        if cfg!(target_os = "macos") {
            "open".into()
        } else {
            "xdg-open".into()
        }
    });
    let stderr = if custom.is_some() {
        std::process::Stdio::inherit()
    } else {
        std::process::Stdio::null()
    };
    match std::process::Command::new(&program)
        .arg(url.as_str())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
    {
        Ok(mut child) => {
            // Reaped on a thread of its own, so no zombie is left behind.
            std::thread::spawn(move || {
                let _ = child.wait();
            });
        }
        Err(e) => tracing::debug!(
            "cannot start `{}` to open the authorization URL: {e}",
            program.to_string_lossy()
        ),
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests {
    use super::*;

    fn meta() -> AuthServer {
        AuthServer {
            issuer: "https://as.example/".into(),
            code_challenge_methods_supported: Some(vec!["plain".into(), "S256".into()]),
            ..AuthServer::default()
        }
    }

    #[test]
    fn pkce_s256_is_required() {
        check_pkce(&meta()).unwrap();
        let mut m = meta();
        m.code_challenge_methods_supported = Some(vec!["plain".into()]);
        assert!(check_pkce(&m).unwrap_err().contains("S256"));
        m.code_challenge_methods_supported = None;
        assert!(check_pkce(&m).is_err());
    }

    #[test]
    fn scopes_come_from_the_server_never_a_fixed_list() {
        let supported = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(
            choose_scope(Some("x y".into()), Some("u"), Some("c"), Some(&supported)).as_deref(),
            Some("x y")
        );
        assert_eq!(
            choose_scope(None, Some("u"), Some("c"), Some(&supported)).as_deref(),
            Some("u")
        );
        assert_eq!(
            choose_scope(None, None, Some("c"), Some(&supported)).as_deref(),
            Some("c")
        );
        assert_eq!(
            choose_scope(None, None, None, Some(&supported)).as_deref(),
            Some("a b")
        );
        assert_eq!(choose_scope(None, None, None, Some(&[])), None);
        assert_eq!(choose_scope(None, None, None, None), None);
    }

    #[test]
    fn iss_is_checked_when_sent_or_promised() {
        let mut m = meta();
        check_iss(None, &m).unwrap();
        check_iss(Some("https://as.example/"), &m).unwrap();
        assert!(
            check_iss(Some("https://evil.example/"), &m)
                .unwrap_err()
                .contains("mix-up")
        );
        m.authorization_response_iss_parameter_supported = true;
        assert!(check_iss(None, &m).is_err());
        check_iss(Some("https://as.example/"), &m).unwrap();
    }

    #[test]
    fn server_keys_drop_credentials_and_fragments() {
        let url = Url::parse("https://user:pw@mcp.example/mcp?tenant=a#x").unwrap();
        assert_eq!(server_key(&url), "https://mcp.example/mcp?tenant=a");
    }
}
