//! Who is calling: authentication of downstream clients (JWT access tokens checked against
//! the issuer's JWKS, or static bearer tokens stored as SHA-256) and authorization (which
//! servers a principal may reach, who may answer approvals).
//!
//! Fail-closed: a JWKS that cannot be fetched, a token that does not parse, an unknown key
//! or algorithm is a 401, never an allow. Tokens are never logged or echoed.
//!
//! JWT signatures are checked by `jsonwebtoken` through a `ring` crypto provider installed
//! here (toolgate links ring already, through rustls).

mod jwt;

use std::collections::BTreeMap;
use std::str::FromStr as _;
use std::time::{Duration, Instant};

use jsonwebtoken::Algorithm;
use jsonwebtoken::jwk::Jwk;
use serde_json::{Value, json};
use sha2::Digest as _;
use subtle::ConstantTimeEq as _;

use super::config::{
    AuthConfig, DEFAULT_ALGORITHMS, DEFAULT_GROUPS_CLAIM, DEFAULT_USER_CLAIM, GatewayConfig,
    Principals, Source,
};

use jwt::install_crypto_provider;

/// Leeway for `exp` and `nbf`.
pub const CLOCK_LEEWAY: Duration = Duration::from_secs(30);
/// An unknown `kid` refetches the JWKS at most this often.
pub const JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// Keys are refreshed when older than this (on the next token that needs them).
pub const JWKS_MAX_AGE: Duration = Duration::from_secs(600);
/// Bound on one JWKS fetch.
pub const JWKS_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on a JWKS document's size.
const JWKS_MAX_BYTES: usize = 1 << 20;

/// An authenticated caller. A static-token user and a JWT user of the same name are
/// different principals: [`Principal::name`] and [`Principal::session_key`] say which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub user: String,
    pub groups: Vec<String>,
    /// Where the identity comes from.
    pub source: Source,
    /// The issuer of a JWT (`None` for a static token).
    pub issuer: Option<String>,
}

impl Principal {
    /// The qualified name, as `allow` and `approvers` write it: `token:ci-bot`,
    /// `jwt:alice@example.com`. The audit's `user`, and the name in messages.
    pub fn name(&self) -> String {
        format!("{}:{}", self.source.prefix(), self.user)
    }

    /// What sessions (sealed ids, agent sessions in the store) are bound to: the source,
    /// a JWT's issuer and the user, `\0`-separated (no name can forge another's key).
    pub fn session_key(&self) -> String {
        match &self.issuer {
            Some(iss) => format!("jwt\0{iss}\0{}", self.user),
            None => format!("{}\0{}", self.source.prefix(), self.user),
        }
    }
}

/// `allow` or `approvers` with each name resolved to its source
/// ([`AuthConfig::resolve`]).
#[derive(Debug, Clone, Default)]
struct Admits {
    users: Vec<(Source, String)>,
    groups: Vec<(Source, String)>,
}

impl Admits {
    fn new(p: &Principals, auth: &AuthConfig) -> Admits {
        let resolve = |names: &[String], group: bool| {
            names
                .iter()
                .map(|n| {
                    let r = auth.resolve(n, group);
                    (r.source, r.name)
                })
                .collect()
        };
        Admits {
            users: resolve(&p.users, false),
            groups: resolve(&p.groups, true),
        }
    }

    fn is_empty(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty()
    }

    fn admits(&self, principal: &Principal) -> bool {
        let source = principal.source;
        self.users
            .iter()
            .any(|(s, u)| *s == source && *u == principal.user)
            || self
                .groups
                .iter()
                .any(|(s, g)| *s == source && principal.groups.contains(g))
    }
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// 401: no or bad credentials. `error` is the RFC 6750 code: `invalid_request`
    /// (a malformed `Authorization` header), `invalid_token` (expired, wrong audience or
    /// issuer, bad signature, unknown key id, malformed, ...), `insufficient_scope` (a
    /// required scope is missing: RFC 6750 suggests 403 for it, see [`Denied::status`]),
    /// or empty when no credentials were presented (RFC 6750 §3.1: no error code then).
    /// `description` says exactly why, and never contains the token.
    Unauthenticated {
        error: &'static str,
        description: String,
    },
    /// 403: authenticated but not allowed to reach the server (or not an approver).
    Forbidden { description: String },
}

impl Denied {
    fn invalid_token(description: impl Into<String>) -> Denied {
        Denied::Unauthenticated {
            error: "invalid_token",
            description: description.into(),
        }
    }

    /// The HTTP status: 401, except 403 for `Forbidden` and `insufficient_scope` (which
    /// also carries a [`Authenticator::challenge`]).
    pub fn status(&self) -> u16 {
        match self {
            Denied::Unauthenticated { error, .. } if *error == "insufficient_scope" => 403,
            Denied::Unauthenticated { .. } => 401,
            Denied::Forbidden { .. } => 403,
        }
    }

    /// The reason, for logs and response bodies.
    pub fn description(&self) -> &str {
        match self {
            Denied::Unauthenticated { description, .. } | Denied::Forbidden { description } => {
                description
            }
        }
    }
}

struct StaticTokenEntry {
    sha256: [u8; 32],
    user: String,
    groups: Vec<String>,
}

struct JwtAuth {
    issuer: String,
    audience: String,
    /// `public_url`: with it, a server's own URL (`<public_url>/servers/<name>/mcp`, the
    /// resource its RFC 9728 metadata names) is an accepted audience at that server.
    public_url: String,
    jwks_url: String,
    user_claim: String,
    groups_claim: String,
    algorithms: Vec<Algorithm>,
    scopes: Vec<String>,
    http: reqwest::Client,
    cache: std::sync::Mutex<JwksCache>,
    /// Held while fetching, so that concurrent misses fetch once.
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct JwksCache {
    keys: Vec<Jwk>,
    /// When the keys were last fetched successfully.
    fetched: Option<Instant>,
    /// When a fetch was last attempted (successful or not).
    attempted: Option<Instant>,
    /// Why the last fetch failed (cleared by a successful one).
    last_error: Option<String>,
}

impl JwksCache {
    fn may_fetch(&self) -> bool {
        self.attempted
            .is_none_or(|t| t.elapsed() >= JWKS_REFETCH_INTERVAL)
    }

    /// `found` if the keys are recent enough to use, else the reason from `no_key`.
    fn answer(
        &self,
        found: Result<Option<Jwk>, String>,
        no_key: impl FnOnce() -> Denied,
    ) -> Result<Jwk, Denied> {
        let usable = self.fetched.is_some_and(|t| t.elapsed() < JWKS_MAX_AGE * 6);
        match found {
            Ok(Some(k)) if usable => Ok(k),
            Err(why) if usable => Err(Denied::invalid_token(why)),
            _ => Err(no_key()),
        }
    }
}

/// Checks credentials and access; built once from the configuration, shared by sessions.
pub struct Authenticator {
    jwt: Option<JwtAuth>,
    tokens: Vec<StaticTokenEntry>,
    /// Server name → who may reach it (`None`: every authenticated principal).
    allow: BTreeMap<String, Option<Admits>>,
    approvers: Admits,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("jwt", &self.jwt.as_ref().map(|j| &j.issuer))
            .field("tokens", &self.tokens.len())
            .field("servers", &self.allow.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Builds the authenticator. `http` fetches the JWKS (its own timeouts apply too; each
    /// fetch is bounded by [`JWKS_TIMEOUT`]). The configuration should come from
    /// `load::load_config`; values that do not parse are errors here as well.
    pub fn new(config: &GatewayConfig, http: reqwest::Client) -> anyhow::Result<Authenticator> {
        install_crypto_provider();
        let jwt = match &config.auth.jwt {
            None => None,
            Some(j) => {
                let names: Vec<String> = match &j.algorithms {
                    Some(a) => a.clone(),
                    None => DEFAULT_ALGORITHMS.iter().map(|s| (*s).to_owned()).collect(),
                };
                let mut algorithms = Vec::new();
                for name in &names {
                    let alg = Algorithm::from_str(name)
                        .ok()
                        .filter(|a| a.family() != jsonwebtoken::AlgorithmFamily::Hmac)
                        .ok_or_else(|| {
                            anyhow::anyhow!("`auth.jwt.algorithms`: `{name}` cannot be used")
                        })?;
                    algorithms.push(alg);
                }
                if algorithms.is_empty() {
                    anyhow::bail!("`auth.jwt.algorithms` is empty");
                }
                Some(JwtAuth {
                    issuer: j.issuer.clone(),
                    audience: config.audience().to_owned(),
                    public_url: config.public_url.trim_end_matches('/').to_owned(),
                    jwks_url: j.jwks_url.clone(),
                    user_claim: j
                        .user_claim
                        .clone()
                        .unwrap_or_else(|| DEFAULT_USER_CLAIM.to_owned()),
                    groups_claim: j
                        .groups_claim
                        .clone()
                        .unwrap_or_else(|| DEFAULT_GROUPS_CLAIM.to_owned()),
                    algorithms,
                    scopes: j.scopes.clone(),
                    http,
                    cache: std::sync::Mutex::new(JwksCache::default()),
                    fetching: tokio::sync::Mutex::new(()),
                })
            }
        };
        let mut tokens = Vec::new();
        for t in &config.auth.tokens {
            let bytes = hex::decode(t.sha256.trim())
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok())
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "`auth.tokens`: the hash of user `{}` is not 64 hexadecimal digits",
                        t.user
                    )
                })?;
            tokens.push(StaticTokenEntry {
                sha256: bytes,
                user: t.user.clone(),
                groups: t.groups.clone(),
            });
        }
        if jwt.is_none() && tokens.is_empty() {
            anyhow::bail!("`auth` needs `jwt`, `tokens` or both");
        }
        Ok(Authenticator {
            jwt,
            tokens,
            allow: config
                .servers
                .iter()
                .map(|(name, s)| {
                    let admits = s.allow.as_ref().map(|a| Admits::new(a, &config.auth));
                    (name.clone(), admits)
                })
                .collect(),
            approvers: Admits::new(&config.auth.approvers, &config.auth),
        })
    }

    /// The `Authorization` header value, if any → the principal (401 cases). `server`: the
    /// server the request is for, whose URL (the resource its RFC 9728 metadata names) a
    /// JWT may carry as its audience besides the configured one (RFC 8707).
    pub async fn authenticate(
        &self,
        authorization: Option<&str>,
        server: Option<&str>,
    ) -> Result<Principal, Denied> {
        let Some(header) = authorization else {
            return Err(Denied::Unauthenticated {
                error: "",
                description: "no bearer token: send `Authorization: Bearer <token>`".to_owned(),
            });
        };
        let token = bearer_token(header)?;
        if let Some(p) = self.static_token(token) {
            return Ok(p);
        }
        match &self.jwt {
            Some(jwt) if token.split('.').count() == 3 => jwt.authenticate(token, server).await,
            Some(_) => Err(Denied::invalid_token(
                "the token is neither a JWT nor a configured static token",
            )),
            None => Err(Denied::invalid_token("unknown token")),
        }
    }

    /// The principal of a static token: its SHA-256 compared in constant time with every
    /// configured hash (no early exit).
    fn static_token(&self, token: &str) -> Option<Principal> {
        let digest: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        let mut found: Option<&StaticTokenEntry> = None;
        for entry in &self.tokens {
            let equal: bool = entry.sha256.ct_eq(&digest).into();
            if equal && found.is_none() {
                found = Some(entry);
            }
        }
        found.map(|e| Principal {
            user: e.user.clone(),
            groups: e.groups.clone(),
            source: Source::Token,
            issuer: None,
        })
    }

    /// May `principal` reach server `server`? (`servers.<name>.allow`; absent: everyone
    /// authenticated.)
    pub fn may_reach(&self, principal: &Principal, server: &str) -> Result<(), Denied> {
        match self.allow.get(server) {
            None => Err(Denied::Forbidden {
                description: format!("there is no server `{server}`"),
            }),
            Some(None) => Ok(()),
            Some(Some(allow)) if allow.admits(principal) => Ok(()),
            Some(Some(_)) => Err(Denied::Forbidden {
                description: format!(
                    "user `{}` may not reach server `{server}`: neither the user nor one of their groups is in its `allow` list",
                    principal.name()
                ),
            }),
        }
    }

    /// May `principal` answer approvals? (`auth.approvers`; empty: nobody.)
    pub fn may_approve(&self, principal: &Principal) -> Result<(), Denied> {
        if self.approvers.admits(principal) {
            Ok(())
        } else if self.approvers.is_empty() {
            Err(Denied::Forbidden {
                description: "no approvers are configured (`auth.approvers`)".to_owned(),
            })
        } else {
            Err(Denied::Forbidden {
                description: format!("user `{}` is not an approver", principal.name()),
            })
        }
    }

    /// The `WWW-Authenticate` value of a 401 (or of an `insufficient_scope` 403):
    /// `Bearer resource_metadata="<url>", error="...", error_description="..."` (RFC 6750
    /// §3, RFC 9728 §5.1), plus `scope="..."` when `auth.jwt.scopes` is set. No error when
    /// no credentials were presented. The description is reduced to the characters RFC 6750
    /// allows there (printable ASCII without `"` and `\`).
    pub fn challenge(&self, denied: &Denied, resource_metadata_url: &str) -> String {
        let mut out = format!(
            "Bearer resource_metadata=\"{}\"",
            quoted(resource_metadata_url)
        );
        if let Denied::Unauthenticated { error, description } = denied
            && !error.is_empty()
        {
            out.push_str(&format!(
                ", error=\"{error}\", error_description=\"{}\"",
                description_chars(description)
            ));
        }
        if let Some(jwt) = &self.jwt
            && !jwt.scopes.is_empty()
        {
            out.push_str(&format!(", scope=\"{}\"", quoted(&jwt.scopes.join(" "))));
        }
        out
    }

    /// RFC 9728 protected resource metadata for `resource` (a server's full URL,
    /// `public_url` + `/servers/<name>/mcp`).
    pub fn metadata(&self, resource: &str) -> Value {
        let name = resource
            .rsplit_once("/servers/")
            .map(|(_, rest)| rest.trim_end_matches("/mcp"))
            .filter(|n| !n.is_empty());
        let resource_name = match name {
            Some(n) => format!("toolgate gateway: {n}"),
            None => "toolgate gateway".to_owned(),
        };
        let mut doc = serde_json::Map::new();
        doc.insert("resource".to_owned(), json!(resource));
        if let Some(jwt) = &self.jwt {
            doc.insert("authorization_servers".to_owned(), json!([jwt.issuer]));
            if !jwt.scopes.is_empty() {
                doc.insert("scopes_supported".to_owned(), json!(jwt.scopes));
            }
        }
        doc.insert("bearer_methods_supported".to_owned(), json!(["header"]));
        doc.insert("resource_name".to_owned(), json!(resource_name));
        Value::Object(doc)
    }
}

/// The token of `Bearer <token>` (scheme case-insensitive; RFC 6750 b64token syntax).
fn bearer_token(header: &str) -> Result<&str, Denied> {
    let malformed = |why: &str| Denied::Unauthenticated {
        error: "invalid_request",
        description: format!(
            "the Authorization header {why}: send `Authorization: Bearer <token>`"
        ),
    };
    let header = header.trim();
    let Some((scheme, token)) = header.split_once(' ') else {
        return Err(malformed("is not a bearer token"));
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(malformed("uses another scheme than Bearer"));
    }
    let token = token.trim_start_matches(' ');
    if token.is_empty() {
        return Err(malformed("has an empty token"));
    }
    let b64token = token
        .trim_end_matches('=')
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b));
    if !b64token {
        return Err(malformed(
            "holds a token with characters a bearer token cannot have",
        ));
    }
    Ok(token)
}

/// A value inside a quoted-string: `\` and `"` escaped.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// RFC 6750's `error_description` characters: %x20-21 / %x23-5B / %x5D-7E.
fn description_chars(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '"' => '\'',
            '\\' => '/',
            ' '..='~' => c,
            _ => '?',
        })
        .collect()
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests;
