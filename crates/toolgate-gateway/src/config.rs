//! `gateway.yaml`: the gateway's configuration (model). Strict loading, located errors and
//! the JSON Schema live beside it (`load`, `schema`).
//!
//! The JSON Schema is derived from these types: a field's doc comment is its description
//! there, and the `schemars` attributes add what the types do not say (patterns, non-empty
//! lists, which keys go together); `schema` holds the patterns.
//!
//! A configuration returned by `load::load_config` is checked and normalised: relative
//! paths (`tls`, `secret.file`, `audit`, `workspace`, `policy`) are absolute, resolved
//! against the directory of the configuration file, and `public_url` has no trailing `/`.
//! The accessors below give the defaults of optional fields.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;

// What the Rust types do not say of a field, for the schema (`#[schemars]` below) and the
// loader.

/// The pattern of server names.
pub const SERVER_NAME_PATTERN: &str = "^[A-Za-z0-9_-]{1,64}$";

/// An `http://` or `https://` URL with a host (the loader also wants https off loopback).
pub(crate) const HTTP_URL_PATTERN: &str = r"^[hH][tT][tT][pP][sS]?://[^/?#\s]+";
/// `listen`: an IP address (IPv6 in brackets) and a port.
pub(crate) const LISTEN_PATTERN: &str = r"^(\[[0-9A-Fa-f:.]+\]|[0-9.]+):[0-9]{1,5}$";
/// `replica`.
pub(crate) const REPLICA_PATTERN: &str = "^[A-Za-z0-9_.-]{1,64}$";
/// `store.url`: `redis://` or `rediss://`.
pub(crate) const REDIS_URL_PATTERN: &str = r"^[rR][eE][dD][iI][sS][sS]?://[^\s]+";
/// A duration such as `500ms`, `30m` or `1h 30m`.
pub(crate) const DURATION_PATTERN: &str = r"^\s*[0-9]+\s*[a-zµ]+(\s*[0-9]+\s*[a-zµ]+)*\s*$";
/// A scope: no whitespace, no `"`.
pub(crate) const SCOPE_PATTERN: &str = r#"^[^\s"]+$"#;
/// An HTTP header name (an RFC 9110 token).
pub(crate) const HEADER_NAME_PATTERN: &str = "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$";
/// `auth.tokens[].sha256`.
pub(crate) const SHA256_PATTERN: &str = "^[0-9a-fA-F]{64}$";
/// `store.namespace`.
pub(crate) const NO_WHITESPACE_PATTERN: &str = r"^\S+$";
/// The program of a `command`.
pub(crate) const NOT_BLANK_PATTERN: &str = r"\S";

/// The signature algorithms `auth.jwt.algorithms` may list (asymmetric only: the keys
/// come from a public JWKS).
pub const JWT_ALGORITHMS: [&str; 9] = [
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

/// `version`: the one format version there is.
pub(crate) fn version_one(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"const": 1})
}

/// The configuration of `toolgate gateway`: the whole `gateway.yaml`.
#[derive(Debug, Clone, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "toolgate gateway configuration")]
pub struct GatewayConfig {
    /// Always 1 (a plain number: `"1"` is a string and does not load).
    #[serde(deserialize_with = "toolgate_policy::yaml::whole_u32")]
    #[schemars(schema_with = "version_one")]
    pub version: u32,
    /// IP address and port to listen on, e.g. `0.0.0.0:8443` (port 0: any free port, printed
    /// at start).
    #[schemars(pattern(LISTEN_PATTERN))]
    pub listen: String,
    /// TLS from PEM files; absent: plain HTTP (behind a TLS-terminating load balancer).
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    pub tls: Option<TlsConfig>,
    /// The gateway's public base URL, e.g. `https://mcp.example.com` (https unless loopback;
    /// no query or fragment): the OAuth resource identifier (the JWT audience unless
    /// `auth.jwt.audience` says otherwise) and the base of the server URLs and of the RFC 9728
    /// metadata URLs.
    #[schemars(pattern(HTTP_URL_PATTERN))]
    pub public_url: String,
    /// This replica's id in the audit log and metrics (default: `<hostname>-<pid>`).
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(pattern(REPLICA_PATTERN))]
    pub replica: Option<String>,
    /// The key (≥ 32 bytes, hex or base64 in a file or an environment variable) that seals
    /// session ids and approval states so that any replica can open them. Every replica
    /// must have the same key. Never stored in the store.
    pub secret: SecretSource,
    /// The audit log of this replica (default: `./toolgate-gateway-<replica>.jsonl`).
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(length(min = 1))]
    pub audit: Option<PathBuf>,
    /// The shared store (`redis://` or `rediss://` URL), or a file for one replica's state
    /// (`path`); absent: state in memory (one replica only, gone when it stops).
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    pub store: Option<StoreConfig>,
    /// Who may connect and how they authenticate: `jwt`, `tokens` or both.
    pub auth: AuthConfig,
    /// Sessions: how long an idle session lives, how many a replica holds.
    #[serde(default)]
    pub sessions: SessionsConfig,
    /// `GET /metrics`: open to whoever reaches the listen address unless `token_sha256`
    /// names the bearer token it requires.
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    pub metrics: Option<MetricsConfig>,
    /// The upstream servers, by name: each is served at `/servers/<name>/mcp`.
    #[schemars(extend(
        "minProperties" = 1,
        "propertyNames" = {"pattern": SERVER_NAME_PATTERN}
    ))]
    pub servers: BTreeMap<String, ServerConfig>,
}

/// Who may read `GET /metrics`.
#[derive(Debug, Clone, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Hex SHA-256 of the bearer token `GET /metrics` requires (`toolgate gateway
    /// hash-token` prints it); a scraper sends `Authorization: Bearer <token>`.
    #[schemars(pattern(SHA256_PATTERN))]
    pub token_sha256: String,
}

/// PEM files: the certificate chain and its private key.
#[derive(Debug, Clone, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct TlsConfig {
    /// Certificate chain (PEM).
    #[schemars(length(min = 1))]
    pub cert: PathBuf,
    /// Private key (PEM).
    #[schemars(length(min = 1))]
    pub key: PathBuf,
}

/// Where a secret comes from: a file or an environment variable (never inline), exactly one.
#[derive(Debug, Clone, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline, extend("minProperties" = 1, "maxProperties" = 1))]
pub struct SecretSource {
    /// A file holding the key.
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(length(min = 1))]
    pub file: Option<PathBuf>,
    /// An environment variable holding the key.
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(length(min = 1))]
    pub env: Option<String>,
}

/// The state store: exactly one of `url` and `path`.
#[derive(Debug, Clone, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    inline,
    extend("oneOf" = [{"required": ["url"]}, {"required": ["path"]}])
)]
pub struct StoreConfig {
    /// `redis://[user:password@]host:port[/db]` or `rediss://…` (a password may be
    /// `${VAR}`, expanded from the environment). Exactly one of `url` and `path`.
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(pattern(REDIS_URL_PATTERN))]
    pub url: Option<String>,
    /// A file holding one replica's state (an embedded store: it survives a restart; one
    /// process at a time), relative to the configuration file.
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(length(min = 1))]
    pub path: Option<PathBuf>,
    /// The prefix of every key (default: `toolgate`): one per deployment.
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(pattern(NO_WHITESPACE_PATTERN))]
    pub namespace: Option<String>,
    /// How long one store operation may take before it counts as a failure (default: 500ms).
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(pattern(DURATION_PATTERN))]
    pub timeout: Option<String>,
}

/// Who may connect and how they authenticate: `jwt`, `tokens` (at least one) or both.
#[derive(Debug, Clone, Deserialize, PartialEq, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    inline,
    extend("anyOf" = [
        {"required": ["jwt"]},
        {"required": ["tokens"], "properties": {"tokens": {"minItems": 1}}}
    ])
)]
pub struct AuthConfig {
    /// JWT access tokens from the organisation's authorization server.
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    pub jwt: Option<JwtConfig>,
    /// Static bearer tokens, stored as SHA-256 (hex) of the token.
    #[serde(default)]
    pub tokens: Vec<StaticToken>,
    /// Users and groups that may answer approvals (`toolgate approvals --gateway URL`).
    #[serde(default)]
    pub approvers: Principals,
}

/// JWT access tokens from the organisation's authorization server, checked against its
/// JWKS.
#[derive(Debug, Clone, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "jwt")]
pub struct JwtConfig {
    /// The `iss` every token must carry; also announced as the authorization server in the
    /// RFC 9728 metadata.
    #[schemars(pattern(HTTP_URL_PATTERN))]
    pub issuer: String,
    /// The issuer's JWKS document, where the signing keys are (https, or http on loopback).
    #[schemars(pattern(HTTP_URL_PATTERN))]
    pub jwks_url: String,
    /// The `aud` every token must contain (default: `public_url`); a token whose `aud` is the
    /// URL of the server it calls (the resource of its RFC 9728 metadata) is accepted there
    /// too.
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(length(min = 1))]
    pub audience: Option<String>,
    /// The claim that names the user (default: `sub`).
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(length(min = 1))]
    pub user_claim: Option<String>,
    /// The claim that lists the user's groups: an array of strings, or one string (default:
    /// `groups`).
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(length(min = 1))]
    pub groups_claim: Option<String>,
    /// Accepted signature algorithms (default: RS256, ES256, EdDSA).
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(
        length(min = 1),
        extend("items" = {"type": "string", "enum": JWT_ALGORITHMS})
    )]
    pub algorithms: Option<Vec<String>>,
    /// Scopes announced in the metadata and required of every token, in `scope` or `scp`
    /// (default: none).
    #[serde(default)]
    #[schemars(inner(pattern(SCOPE_PATTERN)))]
    pub scopes: Vec<String>,
}

/// A static bearer token, known by its hash.
#[derive(Debug, Clone, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "token")]
pub struct StaticToken {
    /// The user this token authenticates.
    #[schemars(length(min = 1))]
    pub user: String,
    /// Hex SHA-256 of the token (`toolgate gateway hash-token` prints it).
    #[schemars(pattern(SHA256_PATTERN))]
    pub sha256: String,
    /// Groups of the token's user, named `token:GROUP` in `allow` and `approvers`.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// Where an identity comes from: the two never name the same principal, even when their
/// names are equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// A static bearer token of `auth.tokens`.
    Token,
    /// A JWT from `auth.jwt.issuer`.
    Jwt,
}

impl Source {
    /// The prefix of qualified names: `token` or `jwt`.
    pub fn prefix(self) -> &'static str {
        match self {
            Source::Token => "token",
            Source::Jwt => "jwt",
        }
    }
}

/// A name of `allow` or `approvers`, as [`AuthConfig::resolve`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameRef {
    pub source: Source,
    /// The name without its prefix.
    pub name: String,
    /// Written without a prefix.
    pub bare: bool,
    /// Bare, and both sources could mean it (a static token defines it and JWTs are
    /// accepted): `gateway check` warns.
    pub ambiguous: bool,
}

/// A set of users and groups. Each name says which source it comes from: `token:ci-bot`
/// (a static token's `user` or one of its `groups`), `jwt:alice@example.com` (the value of
/// the user or groups claim of a token from `auth.jwt.issuer`). A bare name is read as
/// [`AuthConfig::resolve`] says.
#[derive(Debug, Clone, Deserialize, PartialEq, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct Principals {
    /// Users: `token:NAME` (a static token's `user`), `jwt:NAME` (the JWT's user claim); a
    /// bare name is a static token's user when one has it, else a JWT's.
    #[serde(default)]
    pub users: Vec<String>,
    /// Groups: `token:NAME` (in a static token's `groups`), `jwt:NAME` (in the JWT's groups
    /// claim); a bare name is a static token's group when one has it, else a JWT's.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// Sessions: how long an idle session lives, how many a replica holds.
#[derive(Debug, Clone, Deserialize, PartialEq, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct SessionsConfig {
    /// An idle session ends after this long (default: 30m).
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(pattern(DURATION_PATTERN))]
    pub idle_timeout: Option<String>,
    /// At most this many sessions per replica (default: 10000).
    #[serde(default, deserialize_with = "toolgate_policy::yaml::whole_usize_opt")]
    #[schemars(range(min = 1))]
    pub max: Option<usize>,
}

/// An upstream server: exactly one of `command` (local, stdio; one child per session) and
/// `url` (remote, Streamable HTTP).
#[derive(Debug, Clone, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    rename = "server",
    extend("oneOf" = [
        {
            "required": ["command"],
            "not": {"anyOf": [{"required": ["url"]}, {"required": ["headers"]}]}
        },
        {
            "required": ["url"],
            "not": {"anyOf": [
                {"required": ["command"]},
                {"required": ["env"]},
                {"required": ["workspace"]}
            ]}
        }
    ])
)]
pub struct ServerConfig {
    /// A stdio server: the command and its arguments (one child per session).
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(
        length(min = 1),
        extend("prefixItems" = [{"type": "string", "pattern": NOT_BLANK_PATTERN}])
    )]
    pub command: Option<Vec<String>>,
    /// The stdio server's working directory, also the policy's `${workspace}` (relative: to
    /// this file's directory).
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(length(min = 1))]
    pub workspace: Option<PathBuf>,
    /// Extra environment of the stdio server (values may use `${VAR}`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// A remote server's MCP endpoint (Streamable HTTP).
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(pattern(HTTP_URL_PATTERN))]
    pub url: Option<String>,
    /// Headers sent to the remote server (values may use `${VAR}`): the gateway's own
    /// credentials. The client's token is never passed upstream.
    #[serde(default)]
    #[schemars(extend("propertyNames" = {"pattern": HEADER_NAME_PATTERN}))]
    pub headers: BTreeMap<String, String>,
    /// The policy file (relative: to this file's directory); default: the built-in starter
    /// policy.
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    #[schemars(length(min = 1))]
    pub policy: Option<PathBuf>,
    /// Who may reach this server; absent: every authenticated user.
    #[serde(default, deserialize_with = "toolgate_policy::yaml::present")]
    pub allow: Option<Principals>,
}

/// The default of `store.namespace`.
pub const DEFAULT_NAMESPACE: &str = "toolgate";
/// The default of `store.timeout`.
pub const DEFAULT_STORE_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);
/// The default of `sessions.idle_timeout`.
pub const DEFAULT_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);
/// The default of `sessions.max`.
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;
/// The default of `auth.jwt.user_claim`.
pub const DEFAULT_USER_CLAIM: &str = "sub";
/// The default of `auth.jwt.groups_claim`.
pub const DEFAULT_GROUPS_CLAIM: &str = "groups";
/// The default of `auth.jwt.algorithms`.
pub const DEFAULT_ALGORITHMS: [&str; 3] = ["RS256", "ES256", "EdDSA"];

/// A duration as written in the file (`500ms`, `30s`, `30m`, `1h`): toolgate's one grammar
/// ([`toolgate_policy::contracts::parse_duration`], humantime's), longer than zero.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let d = toolgate_policy::contracts::parse_duration(text)
        .map_err(|e| format!("invalid duration `{text}`: {e}"))?;
    if d.is_zero() {
        return Err(format!(
            "invalid duration `{text}`: it must be longer than zero"
        ));
    }
    Ok(d)
}

impl GatewayConfig {
    /// `sessions.idle_timeout` or its default (a loaded configuration's value parses).
    pub fn idle_timeout(&self) -> std::time::Duration {
        self.sessions
            .idle_timeout
            .as_deref()
            .and_then(|t| parse_duration(t).ok())
            .unwrap_or(DEFAULT_IDLE_TIMEOUT)
    }

    /// `sessions.max` or its default.
    pub fn max_sessions(&self) -> usize {
        self.sessions.max.unwrap_or(DEFAULT_MAX_SESSIONS)
    }

    /// The JWT audience: `auth.jwt.audience`, or `public_url`.
    pub fn audience(&self) -> &str {
        self.auth
            .jwt
            .as_ref()
            .and_then(|j| j.audience.as_deref())
            .unwrap_or(&self.public_url)
    }

    /// The URL at which server `name` is served: `public_url` + `/servers/<name>/mcp`.
    pub fn server_url(&self, name: &str) -> String {
        format!(
            "{}/servers/{name}/mcp",
            self.public_url.trim_end_matches('/')
        )
    }
}

impl AuthConfig {
    /// How a name of `allow` or `approvers` (a user, or with `group` a group) is read:
    /// `token:NAME` and `jwt:NAME` name that source's principal. A bare name means the
    /// static-token principal when a token defines it (a token's `user`, or one of its
    /// `groups`), else the JWT principal when JWTs are accepted, else the static-token
    /// one (which then names nobody). So a JWT whose claim happens to equal a static
    /// token's user never passes as that user.
    pub fn resolve(&self, written: &str, group: bool) -> NameRef {
        for source in [Source::Token, Source::Jwt] {
            if let Some(name) = written
                .strip_prefix(source.prefix())
                .and_then(|r| r.strip_prefix(':'))
            {
                return NameRef {
                    source,
                    name: name.to_owned(),
                    bare: false,
                    ambiguous: false,
                };
            }
        }
        let by_token = self.token_defines(written, group);
        let source = if by_token || self.jwt.is_none() {
            Source::Token
        } else {
            Source::Jwt
        };
        NameRef {
            source,
            name: written.to_owned(),
            bare: true,
            ambiguous: by_token && self.jwt.is_some(),
        }
    }

    /// Does a static token have this user (or, with `group`, this group)?
    pub fn token_defines(&self, name: &str, group: bool) -> bool {
        self.tokens.iter().any(|t| {
            if group {
                t.groups.iter().any(|g| g == name)
            } else {
                t.user == name
            }
        })
    }
}

impl StoreConfig {
    /// `namespace` or its default.
    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE)
    }

    /// `timeout` or its default (a loaded configuration's value parses).
    pub fn timeout(&self) -> std::time::Duration {
        self.timeout
            .as_deref()
            .and_then(|t| parse_duration(t).ok())
            .unwrap_or(DEFAULT_STORE_TIMEOUT)
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod duration_tests {
    use std::time::Duration;

    use super::parse_duration;

    /// What the file accepts (humantime, longer than zero), with which value; anything else
    /// is refused.
    #[test]
    fn file_grammar_table() {
        let accepted: &[(&str, Duration)] = &[
            ("500ms", Duration::from_millis(500)),
            ("30s", Duration::from_secs(30)),
            ("30m", Duration::from_secs(1800)),
            ("1h", Duration::from_secs(3600)),
            ("1h 30m", Duration::from_secs(5400)),
            ("1h30m", Duration::from_secs(5400)),
            (" 10m ", Duration::from_secs(600)),
            ("2min", Duration::from_secs(120)),
            ("2 min", Duration::from_secs(120)),
            ("1.5s", Duration::from_millis(1500)),
            ("1d", Duration::from_secs(86_400)),
            ("1ns", Duration::from_nanos(1)),
            ("5us", Duration::from_micros(5)),
        ];
        for (text, want) in accepted {
            assert_eq!(parse_duration(text), Ok(*want), "{text:?}");
        }
        let refused = [
            "",
            " ",
            "0",
            "0s",
            "0ms",
            "10",
            "soon",
            "-1s",
            "+1s",
            "1 parsec",
            "5S",
            "s",
            "18446744073709551616s",
        ];
        for text in refused {
            assert!(parse_duration(text).is_err(), "{text:?} was accepted");
        }
        assert_eq!(
            parse_duration("0s").unwrap_err(),
            "invalid duration `0s`: it must be longer than zero"
        );
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .starts_with("invalid duration `soon`: ")
        );
    }
}
