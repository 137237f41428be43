//! The HTTP client every remote request goes through: rustls with the platform's roots
//! (plus `--ca-file`), HTTP/1.1 and h2 over one keep-alive pool, https only except on
//! loopback, and no redirect followed to another origin.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use url::{Host, Url};

/// Network options shared by the transport and the OAuth client.
#[derive(Debug, Clone, Default)]
pub struct NetOptions {
    /// Allow `http://` to hosts other than loopback.
    pub allow_http: bool,
    /// Extra PEM root certificates to trust, besides the platform's.
    pub ca_file: Option<PathBuf>,
}

/// How long a TCP and TLS connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// How many same-origin redirects are followed before giving up.
const MAX_REDIRECTS: usize = 5;

/// True for `localhost`, 127.0.0.0/8 and `[::1]`.
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(d)) => {
            d.eq_ignore_ascii_case("localhost") || d.to_ascii_lowercase().ends_with(".localhost")
        }
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Checks that `url` may be contacted: `https`, or `http` to loopback (or with
/// `--allow-http`). `what` names the URL in the message (`server URL`, `token endpoint`…).
pub fn check_url(url: &Url, allow_http: bool, what: &str) -> anyhow::Result<()> {
    match url.scheme() {
        "https" => Ok(()),
        "http" if allow_http || is_loopback(url) => Ok(()),
        "http" => anyhow::bail!(
            "{what} `{}` uses plain http to a host that is not loopback: refused\n  \
             help: use https, or pass `--allow-http` if the network between you and the server is trusted",
            redact(url)
        ),
        other => anyhow::bail!(
            "{what} `{}` has scheme `{other}`: only https (and http to loopback) is supported",
            redact(url)
        ),
    }
}

/// `url` without user information, query or fragment: what logs, errors and the audit
/// show, so credentials carried in a URL never leak.
pub fn redact(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// True when `a` and `b` have the same origin (scheme, host and port).
pub fn same_origin(a: &Url, b: &Url) -> bool {
    a.origin() == b.origin()
}

/// Builds the one client (connection pool) of a process.
pub fn client(opts: &NetOptions) -> anyhow::Result<reqwest::Client> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let extra = match &opts.ca_file {
        Some(path) => read_ca_file(path)?,
        None => Vec::new(),
    };
    let verifier =
        rustls_platform_verifier::Verifier::new_with_extra_roots(extra, Arc::clone(&provider))
            .context("cannot load the platform's root certificates")?;
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("cannot configure TLS")?
        .dangerous() // only to plug in the platform verifier, which verifies fully
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let redirects = reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first().cloned();
        match first {
            Some(first) if !same_origin(&first, attempt.url()) => attempt.stop(),
            _ if attempt.previous().len() > MAX_REDIRECTS => attempt.stop(),
            _ => attempt.follow(),
        }
    });
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(CONNECT_TIMEOUT)
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true)
        .redirect(redirects)
        .user_agent(concat!("toolgate/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("cannot build the HTTP client")
}

fn read_ca_file(path: &Path) -> anyhow::Result<Vec<rustls_pki_types::CertificateDer<'static>>> {
    use rustls_pki_types::pem::PemObject as _;
    let certs: Vec<_> = rustls_pki_types::CertificateDer::pem_file_iter(path)
        .with_context(|| format!("cannot read `--ca-file` `{}`", path.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("`--ca-file` `{}` is not valid PEM", path.display()))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "`--ca-file` `{}` holds no certificate\n  help: give a PEM file with one or more `BEGIN CERTIFICATE` blocks",
        path.display()
    );
    Ok(certs)
}

/// A reqwest error with its causes, without the URL (which may carry a query secret).
pub(crate) fn err_text(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    match err.url() {
        Some(url) => text.replace(url.as_str(), &redact(url)),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn plain_http_only_to_loopback() {
        for ok in [
            "https://example.com/mcp",
            "http://localhost:3000/mcp",
            "http://127.0.0.1/mcp",
            "http://127.8.9.10:1/mcp",
            "http://[::1]:80/mcp",
        ] {
            check_url(&url(ok), false, "server URL").unwrap();
        }
        for bad in [
            "http://example.com/mcp",
            "http://10.0.0.1/mcp",
            "ftp://localhost/",
        ] {
            let err = check_url(&url(bad), false, "server URL").unwrap_err();
            assert!(err.to_string().contains("refused") || err.to_string().contains("scheme"));
        }
        check_url(&url("http://example.com/mcp"), true, "server URL").unwrap();
    }

    #[test]
    fn redaction_drops_credentials_and_query() {
        assert_eq!(
            redact(&url("https://user:pw@example.com/mcp?key=secret#x")),
            "https://example.com/mcp"
        );
    }

    #[test]
    fn the_client_builds_with_platform_roots() {
        client(&NetOptions::default()).unwrap();
    }
}
