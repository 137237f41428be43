//! `gateway.yaml`: the gateway's configuration (model). Strict loading, located errors and
//! the JSON Schema live beside it (`load`, `schema`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// Always 1.
    pub version: u32,
    /// `host:port` to listen on, e.g. `0.0.0.0:8443` (port 0: any free port, printed at start).
    pub listen: String,
    /// TLS from PEM files; absent: plain HTTP (behind a TLS-terminating load balancer).
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// The gateway's public base URL, e.g. `https://mcp.example.com`: the OAuth resource
    /// identifier (the JWT audience unless `auth.jwt.audience` says otherwise) and the base of
    /// the RFC 9728 metadata URLs.
    pub public_url: String,
    /// This replica's id in the audit log and metrics [default: `<hostname>-<pid>`].
    #[serde(default)]
    pub replica: Option<String>,
    /// The key (≥ 32 bytes, hex or base64 in a file or an environment variable) that seals
    /// session ids and approval states so that any replica can open them. Every replica
    /// must have the same key. Never stored in the store.
    pub secret: SecretSource,
    /// The audit log of this replica [default: `./toolgate-gateway-<replica>.jsonl`].
    #[serde(default)]
    pub audit: Option<PathBuf>,
    /// The shared store (`redis://` or `rediss://` URL); absent: state in memory (one
    /// replica only).
    #[serde(default)]
    pub store: Option<StoreConfig>,
    /// Who may connect, and how they authenticate.
    pub auth: AuthConfig,
    /// Sessions: how long an idle session lives, how many a replica holds.
    #[serde(default)]
    pub sessions: SessionsConfig,
    /// The upstream servers, by name: each is served at `/servers/<name>/mcp`.
    pub servers: BTreeMap<String, ServerConfig>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Where a secret comes from: a file or an environment variable (never inline).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SecretSource {
    #[serde(default)]
    pub file: Option<PathBuf>,
    #[serde(default)]
    pub env: Option<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `redis://[user:password@]host:port[/db]` or `rediss://…` (a password may be
    /// `${VAR}`, expanded from the environment).
    pub url: String,
    /// The prefix of every key [default: `toolgate`]: one per deployment.
    #[serde(default)]
    pub namespace: Option<String>,
    /// How long one store operation may take before it counts as a failure [default: 500ms].
    #[serde(default)]
    pub timeout: Option<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// JWT access tokens from the organisation's authorization server.
    #[serde(default)]
    pub jwt: Option<JwtConfig>,
    /// Static bearer tokens, stored as SHA-256 (hex) of the token.
    #[serde(default)]
    pub tokens: Vec<StaticToken>,
    /// Users and groups that may answer approvals (`toolgate approvals --gateway URL`).
    #[serde(default)]
    pub approvers: Principals,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// The `iss` every token must carry; also announced as the authorization server in the
    /// RFC 9728 metadata.
    pub issuer: String,
    /// Where the signing keys are (a JWKS document).
    pub jwks_url: String,
    /// The `aud` every token must contain [default: `public_url`].
    #[serde(default)]
    pub audience: Option<String>,
    /// The claim that names the user [default: `sub`].
    #[serde(default)]
    pub user_claim: Option<String>,
    /// The claim that lists the user's groups (an array of strings, or one string)
    /// [default: `groups`].
    #[serde(default)]
    pub groups_claim: Option<String>,
    /// Accepted signature algorithms [default: RS256, ES256, EdDSA].
    #[serde(default)]
    pub algorithms: Option<Vec<String>>,
    /// Scopes announced in the metadata and required of every token [default: none].
    #[serde(default)]
    pub scopes: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StaticToken {
    pub user: String,
    /// Hex SHA-256 of the token (`toolgate gateway hash-token` prints it).
    pub sha256: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

/// A set of users and groups.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Principals {
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct SessionsConfig {
    /// An idle session ends after this long [default: 30m].
    #[serde(default)]
    pub idle_timeout: Option<String>,
    /// At most this many sessions per replica [default: 10000].
    #[serde(default)]
    pub max: Option<usize>,
}

/// One upstream server: exactly one of `command` and `url`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// A stdio server: the command and its arguments (one child per session).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// The stdio server's working directory, also the policy's `${workspace}`.
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    /// Extra environment of the stdio server (values may use `${VAR}`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// A remote server's URL (Streamable HTTP).
    #[serde(default)]
    pub url: Option<String>,
    /// Headers sent to the remote server (values may use `${VAR}`): the gateway's own
    /// credentials. The client's token is never passed upstream.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The policy file [default: the built-in starter policy].
    #[serde(default)]
    pub policy: Option<PathBuf>,
    /// Who may reach this server; absent: every authenticated user.
    #[serde(default)]
    pub allow: Option<Principals>,
}
