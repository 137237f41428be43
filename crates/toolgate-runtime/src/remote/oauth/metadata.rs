//! Discovery: protected resource metadata (RFC 9728) and authorization server metadata
//! (RFC 8414, OpenID Connect Discovery), located as the MCP authorization specification
//! (2025-11-25, "Authorization Server Discovery") orders them.

use std::time::Duration;

use anyhow::Context as _;
use serde::Deserialize;
use url::Url;

use crate::remote::http::{check_url, redact};

/// How large a metadata document may be.
const MAX_METADATA_BYTES: usize = 256 * 1024;

/// How long one metadata request may take.
const METADATA_TIMEOUT: Duration = Duration::from_secs(30);

/// RFC 9728 §2: what a protected resource says about itself (the members toolgate uses).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ProtectedResource {
    /// The resource identifier; must match the server URL.
    #[serde(default)]
    pub resource: Option<String>,
    /// Issuer identifiers of the authorization servers it accepts tokens from.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Scopes it understands.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
}

/// RFC 8414 §2 / OIDC Discovery §3: the members of authorization server metadata toolgate uses.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct AuthServer {
    /// The issuer identifier.
    pub issuer: String,
    /// Where the user agent is sent.
    pub authorization_endpoint: String,
    /// Where codes and refresh tokens are exchanged.
    pub token_endpoint: String,
    /// RFC 7591 dynamic client registration.
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    /// RFC 7009 token revocation.
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    /// PKCE methods; toolgate requires `S256`.
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// Client authentication methods at the token endpoint.
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// RFC 9207: the authorization response carries `iss`.
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
    /// Client ID metadata documents (MCP 2025-11-25).
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
}

/// The URLs to try for protected resource metadata, in order: the one the server named in
/// its challenge, then the path-aware well-known URL, then the root one (RFC 9728 §3.1).
pub fn resource_metadata_urls(server: &Url, from_challenge: Option<&Url>) -> Vec<Url> {
    let mut urls: Vec<Url> = from_challenge.into_iter().cloned().collect();
    let path = server.path().trim_end_matches('/');
    let mut push = |path: &str| {
        let mut url = server.clone();
        url.set_path(path);
        url.set_query(None);
        url.set_fragment(None);
        if !urls.contains(&url) {
            urls.push(url);
        }
    };
    if !path.is_empty() {
        push(&format!("/.well-known/oauth-protected-resource{path}"));
    }
    push("/.well-known/oauth-protected-resource");
    urls
}

/// The URLs to try for an issuer's metadata, in the MCP specification's order: with a path
/// component, OAuth path insertion, OIDC path insertion, OIDC path appending; without one,
/// OAuth then OIDC at the root.
pub fn auth_server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let at = |p: String| {
        let mut url = issuer.clone();
        url.set_path(&p);
        url.set_query(None);
        url.set_fragment(None);
        url
    };
    if path.is_empty() {
        vec![
            at("/.well-known/oauth-authorization-server".to_owned()),
            at("/.well-known/openid-configuration".to_owned()),
        ]
    } else {
        vec![
            at(format!("/.well-known/oauth-authorization-server{path}")),
            at(format!("/.well-known/openid-configuration{path}")),
            at(format!("{path}/.well-known/openid-configuration")),
        ]
    }
}

/// The canonical resource identifier of a server URL (RFC 8707 §2, MCP "Canonical Server
/// URI"): no fragment, no query, the scheme and host lower-cased (the `url` crate does that).
pub fn canonical_resource(server: &Url) -> Url {
    let mut url = server.clone();
    url.set_fragment(None);
    url.set_query(None);
    url
}

/// True when the metadata's `resource` identifies `server`: same origin, and its path is the
/// server's path or a parent of it on a segment boundary (one trailing `/` ignored).
pub fn resource_matches(resource: &Url, server: &Url) -> bool {
    if resource.origin() != server.origin() {
        return false;
    }
    let r = resource.path().trim_end_matches('/');
    let s = server.path().trim_end_matches('/');
    s == r || s.strip_prefix(r).is_some_and(|rest| rest.starts_with('/'))
}

/// Two issuer identifiers are the same (RFC 8414 §3.3 asks for identical strings; one
/// trailing `/` is tolerated, since URL serialisers add it to a bare origin).
pub fn same_issuer(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// GETs a JSON document. `Ok(None)` when the server has none there (404, 405, 410, or a
/// body that is not JSON, such as an HTML error page); `Err` on network failure.
pub async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &Url,
    allow_http: bool,
    what: &str,
) -> anyhow::Result<Option<T>> {
    check_url(url, allow_http, what)?;
    let response = http
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .timeout(METADATA_TIMEOUT)
        .send()
        .await
        .with_context(|| format!("cannot fetch the {what} `{}`", redact(url)))?;
    let status = response.status();
    if !status.is_success() {
        if status.is_client_error() {
            return Ok(None);
        }
        anyhow::bail!(
            "the {what} `{}` answered HTTP {}",
            redact(url),
            status.as_u16()
        );
    }
    let body = read_limited(response, MAX_METADATA_BYTES)
        .await
        .with_context(|| format!("cannot read the {what} `{}`", redact(url)))?;
    Ok(serde_json::from_slice(&body).ok())
}

/// Reads a response body of at most `limit` bytes.
pub async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> anyhow::Result<Vec<u8>> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        anyhow::ensure!(
            body.len() + chunk.len() <= limit,
            "the response is larger than {limit} bytes"
        );
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// What discovery found for one server.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The protected resource metadata (empty when the server publishes none).
    pub resource_metadata: ProtectedResource,
    /// The authorization server's metadata.
    pub auth_server: AuthServer,
    /// The `resource` parameter to send (RFC 8707).
    pub resource: Url,
}

/// Finds the authorization server of `server` from a challenge's `resource_metadata` (if
/// any), then the well-known URLs.
pub async fn discover(
    http: &reqwest::Client,
    server: &Url,
    resource_metadata: Option<&str>,
    allow_http: bool,
) -> anyhow::Result<Discovered> {
    let from_challenge =
        match resource_metadata {
            Some(text) => Some(Url::parse(text).with_context(|| {
                format!("the server's `resource_metadata` `{text}` is not a URL")
            })?),
            None => None,
        };
    let mut prm = None;
    for url in resource_metadata_urls(server, from_challenge.as_ref()) {
        if let Some(found) =
            get_json::<ProtectedResource>(http, &url, allow_http, "protected resource metadata")
                .await?
        {
            prm = Some(found);
            break;
        }
    }
    let resource = match prm.as_ref().and_then(|p| p.resource.as_deref()) {
        Some(text) => {
            let resource = Url::parse(text).with_context(|| {
                format!(
                    "the protected resource metadata names `resource` `{text}`, which is not a URL"
                )
            })?;
            anyhow::ensure!(
                resource_matches(&resource, server),
                "the protected resource metadata is for `{}`, not for `{}`: refused (RFC 9728 §3.3)\n  \
                 help: check the server URL",
                redact(&resource),
                redact(server)
            );
            canonical_resource(&resource)
        }
        None => canonical_resource(server),
    };
    // Without resource metadata (servers of the 2025-03-26 revision) the server's origin is
    // its own authorization server.
    let issuer_text = match prm.as_ref().and_then(|p| p.authorization_servers.first()) {
        Some(issuer) => issuer.clone(),
        None => server.origin().ascii_serialization(),
    };
    let issuer = Url::parse(&issuer_text)
        .with_context(|| format!("the authorization server `{issuer_text}` is not a URL"))?;
    let mut found = None;
    for url in auth_server_metadata_urls(&issuer) {
        if let Some(meta) =
            get_json::<AuthServer>(http, &url, allow_http, "authorization server metadata").await?
        {
            found = Some(meta);
            break;
        }
    }
    let Some(auth_server) = found else {
        anyhow::bail!(
            "no authorization server metadata found for `{}` (tried RFC 8414 and OpenID discovery)\n  \
             help: the server `{}` may not support OAuth; use `--header 'Authorization: Bearer ${{TOKEN}}'` instead",
            redact(&issuer),
            redact(server)
        );
    };
    anyhow::ensure!(
        same_issuer(&auth_server.issuer, issuer.as_str()),
        "the authorization server metadata at `{}` names issuer `{}`: refused (RFC 8414 §3.3)",
        redact(&issuer),
        auth_server.issuer
    );
    for (what, endpoint) in [
        (
            "authorization endpoint",
            Some(&auth_server.authorization_endpoint),
        ),
        ("token endpoint", Some(&auth_server.token_endpoint)),
        (
            "registration endpoint",
            auth_server.registration_endpoint.as_ref(),
        ),
        (
            "revocation endpoint",
            auth_server.revocation_endpoint.as_ref(),
        ),
    ] {
        if let Some(text) = endpoint {
            let url =
                Url::parse(text).with_context(|| format!("the {what} `{text}` is not a URL"))?;
            check_url(&url, allow_http, what)?;
        }
    }
    Ok(Discovered {
        resource_metadata: prm.unwrap_or_default(),
        auth_server,
        resource,
    })
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// A loopback HTTP/1.1 server answering GETs from `routes` (path → JSON body, where
    /// `BASE` stands for the server's own `http://127.0.0.1:PORT`; others 404), recording
    /// the paths asked for. Returns the base URL and the record.
    async fn serve(routes: &[(&str, &str)]) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let routes: HashMap<String, String> = routes
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.replace("BASE", &base)))
            .collect();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = s.read(&mut buf).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    head.extend_from_slice(&buf[..n]);
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let path = text.split(' ').nth(1).unwrap_or_default().to_owned();
                log.lock().unwrap().push(path.clone());
                let (status, body) = match routes.get(&path) {
                    Some(body) => ("200 OK", body.clone()),
                    None => ("404 Not Found", "not found".to_owned()),
                };
                let reply = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(reply.as_bytes()).await;
            }
        });
        (base, seen)
    }

    fn http() -> reqwest::Client {
        crate::remote::http::client(&crate::remote::http::NetOptions::default()).unwrap()
    }

    // Bodies in the shapes of RFC 9728 §3.2 and OpenID Connect Discovery 1.0 §4.2.
    const PRM: &str = r#"{"resource":"BASE/v1/mcp","authorization_servers":["BASE/tenant1"],"scopes_supported":["files:read"]}"#;
    const OIDC: &str = r#"{"issuer":"BASE/tenant1","authorization_endpoint":"BASE/tenant1/authorize","token_endpoint":"BASE/tenant1/token","code_challenge_methods_supported":["S256"]}"#;

    #[tokio::test]
    async fn discovery_walks_the_well_known_urls_in_order() {
        let (base, seen) = serve(&[
            ("/.well-known/oauth-protected-resource/v1/mcp", PRM),
            ("/tenant1/.well-known/openid-configuration", OIDC),
        ])
        .await;
        let server = url(&format!("{base}/v1/mcp"));
        let found = discover(&http(), &server, None, false).await.unwrap();
        assert_eq!(found.auth_server.issuer, format!("{base}/tenant1"));
        assert_eq!(found.resource.as_str(), format!("{base}/v1/mcp"));
        assert_eq!(
            found.resource_metadata.scopes_supported,
            Some(vec!["files:read".to_owned()])
        );
        assert_eq!(
            *seen.lock().unwrap(),
            [
                "/.well-known/oauth-protected-resource/v1/mcp",
                "/.well-known/oauth-authorization-server/tenant1",
                "/.well-known/openid-configuration/tenant1",
                "/tenant1/.well-known/openid-configuration",
            ]
        );
    }

    #[tokio::test]
    async fn metadata_for_another_resource_or_issuer_is_refused() {
        let (base, _) = serve(&[("/.well-known/oauth-protected-resource", PRM)]).await;
        let other = url(&format!("{base}/v2/mcp"));
        let err = discover(&http(), &other, None, false).await.unwrap_err();
        assert!(format!("{err:#}").contains("RFC 9728"), "{err:#}");

        let lying = r#"{"issuer":"https://evil.example","authorization_endpoint":"BASE/a","token_endpoint":"BASE/t"}"#;
        let (base, _) = serve(&[
            ("/.well-known/oauth-protected-resource/v1/mcp", PRM),
            ("/.well-known/oauth-authorization-server/tenant1", lying),
        ])
        .await;
        let err = discover(&http(), &url(&format!("{base}/v1/mcp")), None, false)
            .await
            .unwrap_err();
        assert!(format!("{err:#}").contains("RFC 8414"), "{err:#}");
    }

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn strings(urls: Vec<Url>) -> Vec<String> {
        urls.into_iter().map(String::from).collect()
    }

    #[test]
    fn resource_metadata_order() {
        let server = url("https://api.example.com/v1/mcp?x=1");
        assert_eq!(
            strings(resource_metadata_urls(&server, None)),
            [
                "https://api.example.com/.well-known/oauth-protected-resource/v1/mcp",
                "https://api.example.com/.well-known/oauth-protected-resource",
            ]
        );
        let named = url("https://meta.example.com/prm");
        assert_eq!(
            strings(resource_metadata_urls(
                &url("https://api.example.com/"),
                Some(&named)
            )),
            [
                "https://meta.example.com/prm",
                "https://api.example.com/.well-known/oauth-protected-resource",
            ]
        );
    }

    #[test]
    fn auth_server_metadata_order_is_path_aware() {
        // MCP 2025-11-25, basic/authorization, "Authorization Server Metadata Discovery".
        assert_eq!(
            strings(auth_server_metadata_urls(&url(
                "https://auth.example.com/tenant1"
            ))),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            strings(auth_server_metadata_urls(&url("https://auth.example.com/"))),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn resource_must_identify_the_server() {
        let server = url("https://api.example.com/v1/mcp");
        assert!(resource_matches(
            &url("https://api.example.com/v1/mcp"),
            &server
        ));
        assert!(resource_matches(
            &url("https://api.example.com/v1/mcp/"),
            &server
        ));
        assert!(resource_matches(&url("https://api.example.com/"), &server));
        assert!(resource_matches(
            &url("https://api.example.com/v1"),
            &server
        ));
        assert!(!resource_matches(
            &url("https://api.example.com/v1/mc"),
            &server
        ));
        assert!(!resource_matches(
            &url("https://api.example.com/v2/mcp"),
            &server
        ));
        assert!(!resource_matches(
            &url("https://evil.example.com/v1/mcp"),
            &server
        ));
        assert!(!resource_matches(
            &url("http://api.example.com/v1/mcp"),
            &server
        ));
        assert!(same_issuer("https://a.example/", "https://a.example"));
        assert!(!same_issuer("https://a.example/x", "https://a.example"));
    }
}
