//! Requests to the authorization server: dynamic client registration (RFC 7591), the
//! authorization URL, the token endpoint (authorization code with PKCE, refresh) and
//! revocation (RFC 7009). Every request goes through the one `remote::http` client.

use std::time::Duration;

use anyhow::Context as _;
use serde::Deserialize;
use url::Url;

use super::callback::clean;
use super::metadata::{AuthServer, read_limited};
use super::store::{ClientInfo, ClientKind, Secret, Tokens, now};
use crate::remote::http::{check_url, redact};

/// How long one request to the authorization server may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How large an answer of the authorization server may be.
const MAX_BODY: usize = 256 * 1024;

/// The client credentials of a request: the identity and, for a confidential client, the
/// secret (a pre-registered one from the environment, or one issued at registration).
#[derive(Debug, Clone)]
pub struct ClientAuth {
    /// The client identifier.
    pub client_id: String,
    /// The secret, for a confidential client.
    pub secret: Option<Secret>,
    /// Use HTTP Basic (`client_secret_basic`) rather than form fields.
    pub basic: bool,
}

impl ClientAuth {
    /// The credentials of `client`, with a pre-registered secret if given.
    pub fn new(client: &ClientInfo, secret: Option<Secret>) -> Self {
        ClientAuth {
            client_id: client.client_id.clone(),
            secret: secret.or_else(|| client.client_secret.clone()),
            basic: client.secret_basic,
        }
    }

    /// Whether a secret goes in HTTP Basic, from the token endpoint's advertised methods
    /// (RFC 8414 §2: without the list, the default is `client_secret_basic`).
    pub fn prefers_basic(methods: Option<&[String]>) -> bool {
        match methods {
            Some(methods) => {
                methods.iter().any(|m| m == "client_secret_basic")
                    && !methods.iter().any(|m| m == "client_secret_post")
            }
            None => true,
        }
    }
}

/// An OAuth error answer (RFC 6749 §5.2), or another failure.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The server answered with an OAuth error code.
    #[error("the {what} answered `{code}`{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    OAuth {
        /// Which endpoint.
        what: &'static str,
        /// `invalid_grant`, `invalid_client`, …
        code: String,
        /// The server's description (cleaned).
        description: Option<String>,
    },
    /// Anything else.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

#[cfg(test)]
impl EndpointError {
    /// The OAuth error code, if the server sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            EndpointError::OAuth { code, .. } => Some(code),
            EndpointError::Other(_) => None,
        }
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

#[derive(Deserialize)]
struct TokenBody {
    access_token: String,
    token_type: String,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    scope: Option<String>,
}

#[derive(Deserialize)]
struct RegistrationBody {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
}

async fn post_form(
    http: &reqwest::Client,
    endpoint: &str,
    what: &'static str,
    allow_http: bool,
    auth: Option<&ClientAuth>,
    fields: &[(&str, &str)],
) -> Result<(u16, Vec<u8>), EndpointError> {
    let url =
        Url::parse(endpoint).with_context(|| format!("the {what} `{endpoint}` is not a URL"))?;
    check_url(&url, allow_http, what)?;
    let mut request = http
        .post(url.clone())
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(reqwest::header::ACCEPT, "application/json")
        .timeout(REQUEST_TIMEOUT);
    if let Some(ClientAuth {
        client_id,
        secret: Some(secret),
        basic: true,
    }) = auth
    {
        // RFC 6749 §2.3.1: both parts form-urlencoded before Basic encoding.
        let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        request = request.basic_auth(enc(client_id), Some(enc(secret.expose())));
    }
    let body = form_body(auth, fields);
    let response = request
        .body(body)
        .send()
        .await
        .with_context(|| format!("cannot reach the {what} `{}`", redact(&url)))?;
    let status = response.status().as_u16();
    let body = read_limited(response, MAX_BODY)
        .await
        .with_context(|| format!("cannot read the answer of the {what} `{}`", redact(&url)))?;
    Ok((status, body))
}

/// The form fields, with the client's credentials unless they go in HTTP Basic.
fn form_body(auth: Option<&ClientAuth>, fields: &[(&str, &str)]) -> String {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in fields {
        form.append_pair(k, v);
    }
    if let Some(auth) = auth {
        match (&auth.secret, auth.basic) {
            (Some(_), true) => {}
            (Some(secret), false) => {
                form.append_pair("client_id", &auth.client_id);
                form.append_pair("client_secret", secret.expose());
            }
            (None, _) => {
                form.append_pair("client_id", &auth.client_id);
            }
        }
    }
    form.finish()
}

fn oauth_error(what: &'static str, status: u16, body: &[u8]) -> EndpointError {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) => EndpointError::OAuth {
            what,
            code: clean(&e.error),
            description: e.error_description.as_deref().map(clean),
        },
        Err(_) => EndpointError::Other(anyhow::anyhow!("the {what} answered HTTP {status}")),
    }
}

fn tokens_from(body: &[u8], requested_scope: Option<&str>) -> Result<Tokens, EndpointError> {
    let t: TokenBody = serde_json::from_slice(body)
        .map_err(|e| anyhow::anyhow!("the token endpoint's answer is not a token response: {e}"))?;
    if !t.token_type.eq_ignore_ascii_case("bearer") {
        return Err(anyhow::anyhow!(
            "the token endpoint issued a `{}` token; toolgate supports Bearer tokens only",
            clean(&t.token_type)
        )
        .into());
    }
    let obtained_at = now();
    // Some servers send `expires_in` as a string.
    let expires_in = match t.expires_in {
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::String(s)) => s.parse().ok(),
        _ => None,
    };
    Ok(Tokens {
        access_token: Secret::new(t.access_token),
        refresh_token: t.refresh_token.map(Secret::new),
        expires_at: expires_in.map(|s| obtained_at.saturating_add(s)),
        obtained_at,
        scope: t.scope.or_else(|| requested_scope.map(str::to_owned)),
    })
}

/// Registers toolgate as a native public client (RFC 7591) with `redirect_uri`.
pub async fn register(
    http: &reqwest::Client,
    meta: &AuthServer,
    redirect_uri: &str,
    scope: Option<&str>,
    allow_http: bool,
) -> anyhow::Result<ClientInfo> {
    let Some(endpoint) = meta.registration_endpoint.as_deref() else {
        anyhow::bail!(
            "the authorization server `{}` offers no dynamic client registration\n  \
             help: register toolgate there and pass `--client-id` (and `--client-secret-env` for a confidential client)",
            meta.issuer
        );
    };
    let url = Url::parse(endpoint)
        .with_context(|| format!("the registration endpoint `{endpoint}` is not a URL"))?;
    check_url(&url, allow_http, "registration endpoint")?;
    let mut body = serde_json::json!({
        "client_name": "toolgate",
        "application_type": "native",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    if let (Some(scope), Some(map)) = (scope, body.as_object_mut()) {
        map.insert("scope".to_owned(), scope.into());
    }
    let response = http
        .post(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .timeout(REQUEST_TIMEOUT)
        .body(body.to_string())
        .send()
        .await
        .with_context(|| format!("cannot reach the registration endpoint `{}`", redact(&url)))?;
    let status = response.status().as_u16();
    let bytes = read_limited(response, MAX_BODY).await?;
    if !(200..300).contains(&status) {
        return Err(anyhow::Error::new(oauth_error(
            "registration endpoint",
            status,
            &bytes,
        )))
        .context("dynamic client registration failed");
    }
    let reg: RegistrationBody = serde_json::from_slice(&bytes)
        .context("the registration endpoint's answer has no `client_id`")?;
    Ok(ClientInfo {
        client_id: reg.client_id,
        client_secret: reg.client_secret.map(Secret::new),
        kind: ClientKind::Dynamic,
        redirect_uri: Some(redirect_uri.to_owned()),
        secret_basic: ClientAuth::prefers_basic(
            meta.token_endpoint_auth_methods_supported.as_deref(),
        ),
    })
}

/// The parameters of an authorization request.
#[derive(Debug)]
pub struct AuthorizationRequest<'a> {
    /// The client identifier.
    pub client_id: &'a str,
    /// The callback.
    pub redirect_uri: &'a str,
    /// The S256 code challenge.
    pub code_challenge: &'a str,
    /// The CSRF state.
    pub state: &'a str,
    /// Space-separated scopes, if any.
    pub scope: Option<&'a str>,
    /// The RFC 8707 resource, unless disabled.
    pub resource: Option<&'a str>,
}

/// The URL the user agent opens.
pub fn authorization_url(meta: &AuthServer, req: &AuthorizationRequest<'_>) -> anyhow::Result<Url> {
    let mut url = Url::parse(&meta.authorization_endpoint).with_context(|| {
        format!(
            "the authorization endpoint `{}` is not a URL",
            meta.authorization_endpoint
        )
    })?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code");
        q.append_pair("client_id", req.client_id);
        q.append_pair("redirect_uri", req.redirect_uri);
        q.append_pair("code_challenge", req.code_challenge);
        q.append_pair("code_challenge_method", "S256");
        q.append_pair("state", req.state);
        if let Some(scope) = req.scope {
            q.append_pair("scope", scope);
        }
        if let Some(resource) = req.resource {
            q.append_pair("resource", resource);
        }
    }
    Ok(url)
}

/// Exchanges an authorization code (with its PKCE verifier) for tokens.
#[allow(
    clippy::too_many_arguments,
    reason = "one call site; a struct would only rename the arguments"
)]
pub async fn exchange_code(
    http: &reqwest::Client,
    token_endpoint: &str,
    auth: &ClientAuth,
    code: &str,
    verifier: &str,
    redirect_uri: &str,
    resource: Option<&str>,
    scope: Option<&str>,
    allow_http: bool,
) -> Result<Tokens, EndpointError> {
    let mut fields = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("code_verifier", verifier),
        ("redirect_uri", redirect_uri),
    ];
    if let Some(resource) = resource {
        fields.push(("resource", resource));
    }
    let body = token_request(http, token_endpoint, auth, &fields, allow_http).await?;
    tokens_from(&body, scope)
}

/// POSTs a grant to the token endpoint; the body of a 2xx answer, else its OAuth error.
async fn token_request(
    http: &reqwest::Client,
    token_endpoint: &str,
    auth: &ClientAuth,
    fields: &[(&str, &str)],
    allow_http: bool,
) -> Result<Vec<u8>, EndpointError> {
    let (status, body) = post_form(
        http,
        token_endpoint,
        "token endpoint",
        allow_http,
        Some(auth),
        fields,
    )
    .await?;
    if !(200..300).contains(&status) {
        return Err(oauth_error("token endpoint", status, &body));
    }
    Ok(body)
}

/// Refreshes `tokens`; a response without a new refresh token keeps the old one.
pub async fn refresh(
    http: &reqwest::Client,
    token_endpoint: &str,
    auth: &ClientAuth,
    tokens: &Tokens,
    resource: Option<&str>,
    allow_http: bool,
) -> Result<Tokens, EndpointError> {
    let Some(refresh_token) = tokens.refresh_token.as_ref() else {
        return Err(anyhow::anyhow!("no refresh token").into());
    };
    let mut fields = vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token.expose()),
    ];
    if let Some(resource) = resource {
        fields.push(("resource", resource));
    }
    let body = token_request(http, token_endpoint, auth, &fields, allow_http).await?;
    let mut fresh = tokens_from(&body, tokens.scope.as_deref())?;
    if fresh.refresh_token.is_none() {
        fresh.refresh_token = tokens.refresh_token.clone();
    }
    Ok(fresh)
}

/// Revokes `token` (RFC 7009). `hint` is `refresh_token` or `access_token`.
pub async fn revoke(
    http: &reqwest::Client,
    endpoint: &str,
    auth: &ClientAuth,
    token: &Secret,
    hint: &str,
    allow_http: bool,
) -> Result<(), EndpointError> {
    let fields = [("token", token.expose()), ("token_type_hint", hint)];
    let (status, body) = post_form(
        http,
        endpoint,
        "revocation endpoint",
        allow_http,
        Some(auth),
        &fields,
    )
    .await?;
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(oauth_error("revocation endpoint", status, &body))
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests {
    use super::*;

    #[test]
    fn the_authorization_url_carries_pkce_state_scope_and_resource() {
        let meta = AuthServer {
            issuer: "https://as.example".into(),
            authorization_endpoint: "https://as.example/authorize?tenant=a".into(),
            token_endpoint: "https://as.example/token".into(),
            ..AuthServer::default()
        };
        let url = authorization_url(
            &meta,
            &AuthorizationRequest {
                client_id: "cid",
                redirect_uri: "http://127.0.0.1:5000/callback",
                code_challenge: "ch",
                state: "st",
                scope: Some("a b"),
                resource: Some("https://mcp.example/mcp"),
            },
        )
        .unwrap();
        let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("tenant"), Some("a"));
        assert_eq!(get("response_type"), Some("code"));
        assert_eq!(get("code_challenge_method"), Some("S256"));
        assert_eq!(get("scope"), Some("a b"));
        assert_eq!(get("resource"), Some("https://mcp.example/mcp"));
        assert_eq!(get("state"), Some("st"));
    }

    #[test]
    fn token_responses() {
        let t = tokens_from(
            br#"{"access_token":"a","token_type":"bearer","expires_in":"60","refresh_token":"r"}"#,
            Some("s"),
        )
        .unwrap();
        assert_eq!(t.expires_at, Some(t.obtained_at + 60));
        assert_eq!(t.scope.as_deref(), Some("s"));
        let err = tokens_from(br#"{"access_token":"a","token_type":"DPoP"}"#, None).unwrap_err();
        assert!(err.to_string().contains("Bearer tokens only"), "{err}");
        let e = oauth_error(
            "token endpoint",
            400,
            br#"{"error":"invalid_grant","error_description":"revoked\u001b[31m"}"#,
        );
        assert_eq!(e.code(), Some("invalid_grant"));
        assert_eq!(
            e.to_string(),
            "the token endpoint answered `invalid_grant` (revoked[31m)"
        );
    }
}
