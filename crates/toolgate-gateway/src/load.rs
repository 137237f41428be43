//! Strict loading of `gateway.yaml`, like a policy file: serde-saphyr (duplicate keys
//! rejected), unknown keys and wrong types (a quoted number too) refused, then semantic
//! checks. Every finding is located (`file:line:column`, a snippet, a `help:` line).
//!
//! Relative paths in the file are relative to the file's directory; the loaded
//! configuration holds them resolved to absolute paths.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr as _;

use anyhow::{Context as _, bail};
use serde_saphyr::Error as YamlError;
use toolgate_policy::diag::{Diagnostic, Diagnostics, Pos, SourceMap, did_you_mean, pos_at};
use toolgate_policy::{Engine, Vars};

use super::config::{GatewayConfig, JWT_ALGORITHMS, ServerConfig, parse_duration};

/// A configuration that loaded: checked, with its paths resolved.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: GatewayConfig,
    /// The directory relative paths were resolved against (the file's directory).
    pub base_dir: PathBuf,
    /// Warnings only (a configuration with errors does not load). Policies' own warnings
    /// are summarised here as one warning per policy.
    pub warnings: Diagnostics,
}

/// Reads, parses and checks the configuration at `path`. Diagnostics name the file as
/// `path` was given.
pub fn load_config(path: &Path) -> Result<LoadedConfig, Diagnostics> {
    let name = path.display().to_string();
    let source = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => {
            let mut diags = Diagnostics::new(&name, "");
            diags.push(
                Diagnostic::error(format!("cannot read the configuration `{name}`: {e}"))
                    .with_help("give the path of a gateway.yaml with `--config`"),
            );
            return Err(diags);
        }
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Absolute, so that resolved paths do not depend on a later working directory.
    let base_dir = std::path::absolute(&parent).unwrap_or(parent);
    load_config_str(&source, &name, &base_dir)
}

/// [`load_config`] on text: `name` is shown in diagnostics, `base_dir` resolves relative
/// paths.
pub fn load_config_str(
    source: &str,
    name: &str,
    base_dir: &Path,
) -> Result<LoadedConfig, Diagnostics> {
    let mut diags = Diagnostics::new(name, source);
    if source
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        diags.push(
            Diagnostic::error("the configuration file is empty")
                .with_help("start from docs/gateway.example.yaml"),
        );
        return Err(diags);
    }
    let mut config: GatewayConfig =
        match serde_saphyr::from_str_with_options(source, toolgate_policy::yaml::yaml_options()) {
            Ok(c) => c,
            Err(err) => {
                diags.push(yaml_error(source, &err));
                return Err(diags);
            }
        };
    let map = SourceMap::lazy(source);
    let mut c = Checker {
        map: &map,
        diags: &mut diags,
        base_dir,
    };
    c.check(&mut config);
    diags.sort();
    if diags.has_errors() {
        return Err(diags);
    }
    Ok(LoadedConfig {
        config,
        base_dir: base_dir.to_path_buf(),
        warnings: diags,
    })
}

/// A serde-saphyr error as a diagnostic: the policy loader's, with this file's help for
/// missing fields.
fn yaml_error(source: &str, err: &YamlError) -> Diagnostic {
    if let YamlError::SerdeMissingField { field, .. } = err.without_snippet() {
        let pos = err
            .location()
            .and_then(|l| pos_at(source, l.line() as usize, l.column() as usize));
        let help = match *field {
            "version" => "add `version: 1` at the top of the file",
            "listen" => "add the address to listen on, e.g. `listen: 0.0.0.0:8443`",
            "public_url" => {
                "add the gateway's public URL, e.g. `public_url: https://mcp.example.com`"
            }
            "secret" => {
                "add `secret: {file: /etc/toolgate/gateway.key}` or `secret: {env: TOOLGATE_GATEWAY_KEY}`"
            }
            "auth" => "add `auth:` with `jwt:` or `tokens:`",
            "servers" => "add `servers:` with at least one server",
            "url" => "add `url: redis://host:6379`",
            "cert" | "key" => "`tls:` needs both `cert:` and `key:` (PEM files)",
            "issuer" => "add the `iss` of the tokens, e.g. `issuer: https://login.example.com`",
            "jwks_url" => "add the URL of the issuer's JWKS document",
            "user" => "name the token's user, e.g. `user: ci-bot`",
            "sha256" => "add the token's hash (`toolgate gateway hash-token` prints it)",
            _ => "",
        };
        let d = Diagnostic::error(format!("missing field `{field}`"));
        if *field == "version" {
            let line = source
                .lines()
                .position(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
                .map_or(1, |i| i + 1);
            return d
                .at(pos_at(source, line, 1))
                .with_label("the configuration starts here")
                .with_help(help);
        }
        let d = d.with_label("in this mapping").at(pos);
        return if help.is_empty() {
            d.with_help(format!("add `{field}`"))
        } else {
            d.with_help(help)
        };
    }
    toolgate_policy::yaml::yaml_error(source, err)
}

struct Checker<'a> {
    map: &'a SourceMap,
    diags: &'a mut Diagnostics,
    base_dir: &'a Path,
}

/// Is `host` (of a URL) a loopback name or address?
pub fn is_loopback_host(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(a) => a.is_loopback(),
        url::Host::Ipv6(a) => a.is_loopback(),
    }
}

/// Server names: `[A-Za-z0-9_-]{1,64}`.
pub fn valid_server_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Checker<'_> {
    fn pos(&self, path: &[&str]) -> Option<Pos> {
        self.map.value(path)
    }

    fn error(&mut self, path: &[&str], message: impl Into<String>, help: impl Into<String>) {
        let pos = self.pos(path).or_else(|| self.map.key(path));
        let help = help.into();
        let mut d = Diagnostic::error(message).at(pos);
        if !help.is_empty() {
            d = d.with_help(help);
        }
        self.diags.push(d);
    }

    fn error_at_key(&mut self, path: &[&str], message: impl Into<String>, help: impl Into<String>) {
        let pos = self.map.key(path).or_else(|| self.pos(path));
        self.diags
            .push(Diagnostic::error(message).at(pos).with_help(help));
    }

    fn warning(&mut self, path: &[&str], message: impl Into<String>, help: impl Into<String>) {
        let pos = self.pos(path).or_else(|| self.map.key(path));
        self.diags
            .push(Diagnostic::warning(message).at(pos).with_help(help));
    }

    /// An absolute http(s) URL. `https_unless_loopback`: plain http only for a loopback host.
    fn url(&mut self, path: &[&str], text: &str, https_unless_loopback: bool) -> Option<url::Url> {
        let url = match url::Url::parse(text) {
            Ok(u) => u,
            Err(e) => {
                self.error(
                    path,
                    format!("`{text}` is not an absolute URL: {e}"),
                    "write an absolute URL, e.g. `https://mcp.example.com`",
                );
                return None;
            }
        };
        if !matches!(url.scheme(), "http" | "https") {
            self.error(
                path,
                format!("`{text}` is not an http(s) URL"),
                "write an `https://` URL",
            );
            return None;
        }
        let Some(host) = url.host() else {
            self.error(
                path,
                format!("`{text}` has no host"),
                "write an `https://host/...` URL",
            );
            return None;
        };
        if https_unless_loopback && url.scheme() == "http" && !is_loopback_host(&host) {
            self.error(
                path,
                format!("`{text}` uses plain http on a host that is not loopback"),
                "use `https://`: bearer tokens must not cross a network in the clear (http is allowed for localhost, 127.0.0.1 and ::1)",
            );
            return None;
        }
        if !url.username().is_empty() || url.password().is_some() {
            self.error(
                path,
                format!("`{text}` contains credentials"),
                "remove the `user:password@` part",
            );
            return None;
        }
        Some(url)
    }

    fn duration(&mut self, path: &[&str], text: Option<&str>) {
        if let Some(t) = text
            && let Err(e) = parse_duration(t)
        {
            self.error(
                path,
                e,
                "write a duration such as `500ms`, `30s`, `30m` or `1h`",
            );
        }
    }

    fn check(&mut self, config: &mut GatewayConfig) {
        if config.version != 1 {
            self.error(
                &["version"],
                format!("unsupported configuration version `{}`", config.version),
                "write `version: 1`",
            );
        }
        if let Err(e) = SocketAddr::from_str(config.listen.trim()) {
            self.error(
                &["listen"],
                format!("`listen: {}` is not an address and port: {e}", config.listen),
                "write an IP address and a port, e.g. `0.0.0.0:8443`, `127.0.0.1:8080` or `[::]:8443`",
            );
        }
        if let Some(tls) = &mut config.tls {
            for (key, p) in [("cert", &mut tls.cert), ("key", &mut tls.key)] {
                *p = resolve_path(self.base_dir, p);
                if !p.is_file() {
                    let shown = p.display().to_string();
                    self.error(
                        &["tls", key],
                        format!("the TLS {key} file `{shown}` does not exist"),
                        "give a PEM file (relative paths are relative to this file's directory)",
                    );
                }
            }
        }
        let public = config.public_url.clone();
        if let Some(url) = self.url(&["public_url"], &public, true) {
            if url.query().is_some() || url.fragment().is_some() {
                self.error(
                    &["public_url"],
                    format!("`{public}` has a query or a fragment"),
                    "write the base URL only, e.g. `https://mcp.example.com`",
                );
            }
            config.public_url = public.trim_end_matches('/').to_owned();
        }
        if let Some(replica) = &config.replica
            && (replica.is_empty()
                || replica.len() > 64
                || !replica
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')))
        {
            self.error(
                &["replica"],
                format!("invalid replica id `{replica}`"),
                "use 1 to 64 letters, digits, `.`, `_` or `-` (it names the audit file)",
            );
        }
        match (&mut config.secret.file, &config.secret.env) {
            (Some(_), Some(_)) | (None, None) => self.error_at_key(
                &["secret"],
                "`secret` needs exactly one of `file` and `env`",
                "write `secret: {file: /etc/toolgate/gateway.key}` or `secret: {env: TOOLGATE_GATEWAY_KEY}`",
            ),
            (Some(file), None) => *file = resolve_path(self.base_dir, file),
            (None, Some(env)) => {
                if env.is_empty() || env.contains('=') || env.contains('\0') {
                    self.error(
                        &["secret", "env"],
                        format!("invalid environment variable name `{env}`"),
                        "write a variable name such as `TOOLGATE_GATEWAY_KEY`",
                    );
                }
            }
        }
        if let Some(audit) = &mut config.audit {
            *audit = resolve_path(self.base_dir, audit);
        }
        if let Some(store) = &mut config.store {
            match (&store.url, &mut store.path) {
                (Some(_), Some(_)) | (None, None) => self.error_at_key(
                    &["store"],
                    "`store` needs exactly one of `url` and `path`",
                    "write `store: {url: redis://host:6379}` (shared by replicas) or `store: {path: state/gateway.redb}` (one replica)",
                ),
                (None, Some(path)) => *path = resolve_path(self.base_dir, path),
                (Some(url), None) => {
                    let url = url.clone();
                    match url::Url::parse(&url) {
                        Ok(u)
                            if matches!(u.scheme(), "redis" | "rediss") && u.host().is_some() => {}
                        _ => self.error(
                            &["store", "url"],
                            format!("`{}` is not a redis URL", redact_password(&url)),
                            "write `redis://host:6379` or `rediss://host:6380` (TLS); a password may be `${VAR}`",
                        ),
                    }
                }
            }
            if let Some(ns) = &store.namespace
                && (ns.is_empty() || ns.chars().any(|c| c.is_whitespace() || c.is_control()))
            {
                self.error(
                    &["store", "namespace"],
                    format!("invalid namespace `{ns}`"),
                    "use a short name without spaces, e.g. `toolgate-prod`",
                );
            }
            let timeout = store.timeout.clone();
            self.duration(&["store", "timeout"], timeout.as_deref());
        }
        let idle = config.sessions.idle_timeout.clone();
        self.duration(&["sessions", "idle_timeout"], idle.as_deref());
        if config.sessions.max == Some(0) {
            self.error(
                &["sessions", "max"],
                "`sessions.max: 0` admits no session",
                "remove it for the default (10000), or choose a positive number",
            );
        }
        self.check_auth(config);
        if let Some(m) = &config.metrics
            && !is_hex64(&m.token_sha256)
        {
            self.error(
                &["metrics", "token_sha256"],
                "`token_sha256` is not 64 hexadecimal digits",
                "write the SHA-256 of the token in hex: `toolgate gateway hash-token` prints it",
            );
        }
        self.check_servers(config);
        self.check_names(config);
    }

    /// The names of `allow` and `approvers`: each must say (or make clear) which source it
    /// means (`token:` or `jwt:`), and name someone that source can authenticate.
    fn check_names(&mut self, config: &GatewayConfig) {
        let auth = &config.auth;
        let mut lists: Vec<(Vec<String>, String, &super::config::Principals)> = vec![(
            vec!["auth".into(), "approvers".into()],
            "`auth.approvers`".into(),
            &auth.approvers,
        )];
        for (name, server) in &config.servers {
            if let Some(allow) = &server.allow {
                lists.push((
                    vec!["servers".into(), name.clone(), "allow".into()],
                    format!("`allow` of server `{name}`"),
                    allow,
                ));
            }
        }
        for (path, shown, principals) in lists {
            for (key, names, group) in [
                ("users", &principals.users, false),
                ("groups", &principals.groups, true),
            ] {
                for (i, written) in names.iter().enumerate() {
                    let idx = i.to_string();
                    let mut at: Vec<&str> = path.iter().map(String::as_str).collect();
                    at.push(key);
                    at.push(idx.as_str());
                    self.check_name(&at, &shown, auth, written, group);
                }
            }
        }
    }

    fn check_name(
        &mut self,
        at: &[&str],
        shown: &str,
        auth: &super::config::AuthConfig,
        written: &str,
        group: bool,
    ) {
        use super::config::Source;
        let what = if group { "group" } else { "user" };
        let r = auth.resolve(written, group);
        if r.name.is_empty() {
            self.error(
                at,
                format!("`{written}` in {shown} names no {what}"),
                format!("write `token:NAME` for a static token's {what}, `jwt:NAME` for a JWT's"),
            );
            return;
        }
        if r.ambiguous {
            self.warning(
                at,
                format!(
                    "the {what} `{written}` in {shown} could mean a static token's {what} or a JWT's; it is read as `token:{written}`"
                ),
                format!(
                    "write `token:{written}` for the static token's {what}, or `jwt:{written}` for the {what} the issuer's tokens name"
                ),
            );
            return;
        }
        match r.source {
            Source::Token if !auth.token_defines(&r.name, group) => {
                let help = if auth.jwt.is_some() && r.bare {
                    format!("add a token for it under `auth.tokens`, or write `jwt:{written}`")
                } else {
                    "add a token for it under `auth.tokens`, or remove the name".to_owned()
                };
                self.warning(
                    at,
                    format!(
                        "no static token has the {what} `{}` ({shown}): the name admits nobody",
                        r.name
                    ),
                    help,
                );
            }
            Source::Jwt if auth.jwt.is_none() => self.warning(
                at,
                format!("`{written}` in {shown} names a JWT {what}, but `auth.jwt` is not configured: it admits nobody"),
                "configure `auth.jwt`, or name a static token's user with `token:NAME`",
            ),
            _ => {}
        }
    }

    fn check_auth(&mut self, config: &GatewayConfig) {
        let auth = &config.auth;
        if auth.jwt.is_none() && auth.tokens.is_empty() {
            self.error_at_key(
                &["auth"],
                "`auth` allows nobody: it needs `jwt`, `tokens` or both",
                "configure your authorization server under `auth.jwt`, or add static tokens under `auth.tokens`",
            );
        }
        if let Some(jwt) = &auth.jwt {
            self.url(&["auth", "jwt", "issuer"], &jwt.issuer, false);
            self.url(&["auth", "jwt", "jwks_url"], &jwt.jwks_url, true);
            if let Some(aud) = &jwt.audience
                && aud.trim().is_empty()
            {
                self.error(
                    &["auth", "jwt", "audience"],
                    "the audience is empty",
                    "remove it to use `public_url`, or write the `aud` your tokens carry",
                );
            }
            for (key, v) in [
                ("user_claim", &jwt.user_claim),
                ("groups_claim", &jwt.groups_claim),
            ] {
                if v.as_deref().is_some_and(|c| c.trim().is_empty()) {
                    self.error(
                        &["auth", "jwt", key],
                        format!("`{key}` is empty"),
                        "name a claim, or remove the key for its default",
                    );
                }
            }
            if let Some(algs) = &jwt.algorithms {
                if algs.is_empty() {
                    self.error(
                        &["auth", "jwt", "algorithms"],
                        "no signature algorithm is accepted",
                        "remove `algorithms` for the default (RS256, ES256, EdDSA), or list some",
                    );
                }
                for (i, alg) in algs.iter().enumerate() {
                    if JWT_ALGORITHMS.contains(&alg.as_str()) {
                        continue;
                    }
                    let idx = i.to_string();
                    let path = ["auth", "jwt", "algorithms", idx.as_str()];
                    if alg.starts_with("HS") || alg.eq_ignore_ascii_case("none") {
                        self.error(
                            &path,
                            format!("algorithm `{alg}` cannot be used with a JWKS"),
                            format!(
                                "tokens are checked with the issuer's public keys; use one of {}",
                                JWT_ALGORITHMS.join(", ")
                            ),
                        );
                    } else {
                        let help = match did_you_mean(alg, JWT_ALGORITHMS.iter().copied()) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => format!("known algorithms: {}", JWT_ALGORITHMS.join(", ")),
                        };
                        self.error(&path, format!("unknown algorithm `{alg}`"), help);
                    }
                }
            }
            for (i, scope) in jwt.scopes.iter().enumerate() {
                if scope.is_empty() || scope.contains(char::is_whitespace) || scope.contains('"') {
                    let idx = i.to_string();
                    self.error(
                        &["auth", "jwt", "scopes", idx.as_str()],
                        format!("invalid scope `{scope}`"),
                        "a scope is one word without spaces or quotes, e.g. `mcp:tools`",
                    );
                }
            }
        }
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (i, token) in auth.tokens.iter().enumerate() {
            let idx = i.to_string();
            if token.user.trim().is_empty() {
                self.error(
                    &["auth", "tokens", idx.as_str(), "user"],
                    "the token's user is empty",
                    "name the user, e.g. `ci-bot`",
                );
            }
            if !is_hex64(&token.sha256) {
                self.error(
                    &["auth", "tokens", idx.as_str(), "sha256"],
                    "`sha256` is not 64 hexadecimal digits",
                    "write the SHA-256 of the token in hex: `toolgate gateway hash-token` prints it",
                );
                continue;
            }
            let lower = token.sha256.to_ascii_lowercase();
            if let Some(first) = seen.get(&lower) {
                let first = first.to_string();
                let d = Diagnostic::error("the same token hash is listed twice")
                    .at(self.pos(&["auth", "tokens", idx.as_str(), "sha256"]))
                    .with_label("listed again here")
                    .with_related(
                        self.pos(&["auth", "tokens", first.as_str(), "sha256"]),
                        "first listed here",
                    )
                    .with_help("each token must be unique, so that it names one user");
                self.diags.push(d);
            } else {
                seen.insert(lower, i);
            }
        }
    }

    fn check_servers(&mut self, config: &mut GatewayConfig) {
        if config.servers.is_empty() {
            self.error_at_key(
                &["servers"],
                "no servers are configured",
                "add a server, e.g. `servers: {files: {command: [mcp-server-filesystem, /srv/data]}}`",
            );
        }
        let base = self.base_dir.to_path_buf();
        let names: Vec<String> = config.servers.keys().cloned().collect();
        for name in names {
            let Some(server) = config.servers.get_mut(&name) else {
                continue;
            };
            let n = name.as_str();
            if !valid_server_name(n) {
                self.error_at_key(
                    &["servers", n],
                    format!("invalid server name `{n}`"),
                    "use 1 to 64 letters, digits, `_` or `-`: the name is part of the URL `/servers/<name>/mcp`",
                );
            }
            self.check_server(n, server, &base);
        }
    }

    fn check_server(&mut self, n: &str, server: &mut ServerConfig, base: &Path) {
        match (&server.command, &server.url) {
            (Some(_), Some(_)) | (None, None) => self.error_at_key(
                &["servers", n],
                format!("server `{n}` needs exactly one of `command` and `url`"),
                "a local server: `command: [program, args...]`; a remote one: `url: https://...`",
            ),
            (Some(cmd), None) => {
                if cmd.first().is_none_or(|p| p.trim().is_empty()) {
                    self.error(
                        &["servers", n, "command"],
                        format!("server `{n}` has an empty command"),
                        "write the program and its arguments, e.g. `[mcp-server-filesystem, /srv/data]`",
                    );
                }
                if !server.headers.is_empty() {
                    self.error_at_key(
                        &["servers", n, "headers"],
                        "`headers` applies to a remote server (`url`) only",
                        "remove `headers`, or pass credentials to a local server with `env`",
                    );
                }
            }
            (None, Some(url)) => {
                let url = url.clone();
                self.url(&["servers", n, "url"], &url, false);
                if !server.env.is_empty() {
                    self.error_at_key(
                        &["servers", n, "env"],
                        "`env` applies to a local server (`command`) only",
                        "remove `env`, or send credentials to a remote server with `headers`",
                    );
                }
                if server.workspace.is_some() {
                    self.error_at_key(
                        &["servers", n, "workspace"],
                        "`workspace` applies to a local server (`command`) only",
                        "remove `workspace`",
                    );
                }
            }
        }
        for key in server.headers.keys() {
            if key.is_empty()
                || !key
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
            {
                self.error_at_key(
                    &["servers", n, "headers", key.as_str()],
                    format!("invalid header name `{key}`"),
                    "use a header name such as `Authorization` or `X-Api-Key`",
                );
            }
        }
        if let Some(ws) = &mut server.workspace {
            *ws = resolve_path(base, ws);
            if !ws.is_dir() {
                let shown = ws.display().to_string();
                self.error(
                    &["servers", n, "workspace"],
                    format!("the workspace `{shown}` is not a directory"),
                    "give an existing directory (relative paths are relative to this file's directory)",
                );
            }
        }
        if let Some(allow) = &server.allow
            && allow.users.is_empty()
            && allow.groups.is_empty()
        {
            self.warning(
                &["servers", n, "allow"],
                format!("`allow` of server `{n}` lists nobody: no one can reach it"),
                "list `users` or `groups`, or remove `allow` to admit every authenticated user",
            );
        }
        if let Some(policy) = &mut server.policy {
            let given = policy.display().to_string();
            *policy = resolve_path(base, policy);
            let path = policy.clone();
            self.check_policy(n, &given, &path);
        }
    }

    /// The policy at `path` exists, loads and compiles.
    fn check_policy(&mut self, server: &str, given: &str, path: &Path) {
        let at = ["servers", server, "policy"];
        let shown = path.display().to_string();
        let source = match std::fs::read_to_string(path) {
            Ok(s) => s,
            Err(e) => {
                self.error(
                    &at,
                    format!("the policy `{given}` cannot be read ({shown}: {e})"),
                    "relative paths are relative to this file's directory; `toolgate policy init --policy PATH` writes a starter policy",
                );
                return;
            }
        };
        let check_cmd = format!("run `toolgate policy check --policy {shown}`");
        match toolgate_policy::load(&source, &shown) {
            Err(d) => {
                let first = d
                    .items
                    .iter()
                    .find(|i| i.severity == toolgate_policy::diag::Severity::Error)
                    .map(|i| match i.pos {
                        Some(p) => format!("{}:{}:{}: {}", shown, p.line, p.column, i.message),
                        None => i.message.clone(),
                    })
                    .unwrap_or_else(|| "invalid policy".to_owned());
                let more = d.errors().saturating_sub(1);
                let more = if more > 0 {
                    format!(
                        " (and {more} more error{})",
                        if more == 1 { "" } else { "s" }
                    )
                } else {
                    String::new()
                };
                self.error(
                    &at,
                    format!("the policy `{given}` does not load: {first}{more}"),
                    check_cmd,
                );
            }
            Ok(loaded) => {
                let warnings = loaded.warnings.warnings();
                if let Err(d) = Engine::new(loaded.policy, Vars::placeholder()) {
                    let first = d
                        .items
                        .first()
                        .map_or_else(|| "invalid policy".to_owned(), |i| i.message.clone());
                    self.error(
                        &at,
                        format!("the policy `{given}` does not compile: {first}"),
                        check_cmd,
                    );
                } else if warnings > 0 {
                    self.warning(
                        &at,
                        format!(
                            "the policy `{given}` has {warnings} warning{}",
                            if warnings == 1 { "" } else { "s" }
                        ),
                        check_cmd,
                    );
                }
            }
        }
    }
}

fn resolve_path(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// A redis URL for messages: its password replaced by `***`.
pub fn redact_password(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            if u.set_password(Some("***")).is_ok() {
                u.to_string()
            } else {
                "<the URL>".to_owned()
            }
        }
        Ok(_) => url.to_owned(),
        // Not parsed: it may still hold a password; show only its scheme-like prefix.
        Err(_) => match url.find('@') {
            Some(_) => "<a URL with credentials>".to_owned(),
            None => url.to_owned(),
        },
    }
}

/// The sealing key named by `secret`: read from the file or the environment variable,
/// hex or base64 (standard or URL-safe, padded or not), at least 32 bytes. Exactly 32
/// bytes are used as they are; a longer key is reduced with SHA-256.
pub fn secret_key(config: &GatewayConfig) -> anyhow::Result<[u8; 32]> {
    let (text, origin) = match (&config.secret.file, &config.secret.env) {
        (Some(file), None) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the secret file `{}`", file.display()))?;
            (text, format!("the secret file `{}`", file.display()))
        }
        (None, Some(env)) => match std::env::var(env) {
            Ok(v) => (v, format!("the environment variable `{env}`")),
            Err(std::env::VarError::NotPresent) => bail!(
                "the environment variable `{env}` (secret.env) is not set. help: set it to a key of at least 32 random bytes in hex, e.g. `openssl rand -hex 32`"
            ),
            Err(std::env::VarError::NotUnicode(_)) => {
                bail!("the environment variable `{env}` (secret.env) is not valid UTF-8")
            }
        },
        _ => bail!("`secret` needs exactly one of `file` and `env`"),
    };
    key_from_text(&text).map_err(|e| anyhow::anyhow!("{origin}: {e}"))
}

/// [`secret_key`]'s decoding of the key text.
pub fn key_from_text(text: &str) -> Result<[u8; 32], String> {
    use base64::Engine as _;
    let t = text.trim();
    if t.is_empty() {
        return Err("the key is empty. help: write at least 32 random bytes in hex, e.g. the output of `openssl rand -hex 32`".to_owned());
    }
    let bytes = if t.len().is_multiple_of(2) && t.bytes().all(|b| b.is_ascii_hexdigit()) {
        hex::decode(t).map_err(|e| e.to_string())?
    } else {
        let engines = [
            base64::engine::general_purpose::STANDARD,
            base64::engine::general_purpose::STANDARD_NO_PAD,
            base64::engine::general_purpose::URL_SAFE,
            base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ];
        engines
            .iter()
            .find_map(|e| e.decode(t).ok())
            .ok_or_else(|| "the key is neither hex nor base64. help: write at least 32 random bytes in hex, e.g. the output of `openssl rand -hex 32`".to_owned())?
    };
    if bytes.len() < 32 {
        return Err(format!(
            "the key is {} bytes long; at least 32 are needed. help: generate one with `openssl rand -hex 32`",
            bytes.len()
        ));
    }
    if let Ok(key) = <[u8; 32]>::try_from(bytes.as_slice()) {
        return Ok(key);
    }
    use sha2::Digest as _;
    Ok(sha2::Sha256::digest(&bytes).into())
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
