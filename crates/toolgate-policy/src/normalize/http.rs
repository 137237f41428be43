//! HTTP adapter: URLs through a real URL parser (the WHATWG one of the `url` crate).

use url::{Host, Url};

use crate::action::Network;

/// Why a URL was not accepted. Every error makes the part an opaque `unknown`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("`{0}` is not a valid absolute url: {1}")]
    Parse(String, String),
    #[error("url scheme `{0}` is not supported")]
    UnsupportedScheme(String),
    #[error("url `{0}` has no host")]
    NoHost(String),
    /// Parsers disagree on such URLs (`\`, whitespace or control characters, several `@`):
    /// the server might read another host than the one checked.
    #[error("url `{0}` is ambiguous: {1}")]
    Ambiguous(String, &'static str),
}

/// The schemes a `net.request` part may carry.
const SCHEMES: &[&str] = &["http", "https", "ws", "wss", "ftp"];

/// Parses and canonicalises a URL: lower-case scheme and host, userinfo stripped (it never
/// names the host: `https://good.com@evil.com` is `evil.com`), IDN as punycode, IPv4 in any
/// numeric form as dotted quad, trailing dots removed, fragment dropped. `method` is
/// upper-cased; empty means `GET`.
pub fn normalize_url(raw: &str, method: &str) -> Result<Network, UrlError> {
    let trimmed = raw.trim_matches(|c: char| c.is_ascii_whitespace() || c.is_ascii_control());
    if trimmed.contains('\\') {
        return Err(UrlError::Ambiguous(
            raw.to_owned(),
            "it contains a backslash",
        ));
    }
    if trimmed.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(UrlError::Ambiguous(
            raw.to_owned(),
            "it contains whitespace or control characters",
        ));
    }
    if let Some((_, after_scheme)) = trimmed.split_once("://") {
        let authority = after_scheme
            .split(['/', '?', '#'])
            .next()
            .unwrap_or_default();
        if authority.matches('@').count() > 1 {
            return Err(UrlError::Ambiguous(
                raw.to_owned(),
                "its authority has several `@`",
            ));
        }
    }
    let mut url =
        Url::parse(trimmed).map_err(|e| UrlError::Parse(raw.to_owned(), e.to_string()))?;
    let scheme = url.scheme().to_owned();
    if !SCHEMES.contains(&scheme.as_str()) {
        return Err(UrlError::UnsupportedScheme(scheme));
    }
    let host = host_of(&url, raw)?;
    if host.ends_with('.') {
        // `a.com.` → `a.com`; the new host is parsed again (`21.` can become an IPv4 address),
        // and the host reported is what the URL now names.
        let stripped = host.trim_end_matches('.');
        if stripped.is_empty() || url.set_host(Some(stripped)).is_err() {
            return Err(UrlError::NoHost(raw.to_owned()));
        }
    }
    let host = host_of(&url, raw)?;
    if host.ends_with('.') || host.is_empty() {
        return Err(UrlError::NoHost(raw.to_owned()));
    }
    // Credentials are not part of the destination.
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_fragment(None);
    let method = method.trim();
    let method = if method.is_empty() {
        "GET".to_owned()
    } else {
        method.to_ascii_uppercase()
    };
    Ok(Network {
        url: url.to_string(),
        scheme,
        port: url.port_or_known_default(),
        host,
        method,
    })
}

fn host_of(url: &Url, raw: &str) -> Result<String, UrlError> {
    match url.host() {
        Some(Host::Domain(d)) => Ok(d.to_ascii_lowercase()),
        Some(Host::Ipv4(ip)) => Ok(ip.to_string()),
        Some(Host::Ipv6(ip)) => Ok(format!("[{ip}]")),
        None => Err(UrlError::NoHost(raw.to_owned())),
    }
}

/// True when a string looks like it is meant as an absolute URL with an authority
/// (`http://…`, `HTTPS://…`, `wss://…`), so it is evaluated even in an argument whose name
/// says nothing.
pub(crate) fn looks_like_url(s: &str) -> bool {
    let t = s.trim_start();
    let Some((scheme, _)) = t.split_once(':') else {
        return false;
    };
    let lower = scheme.to_ascii_lowercase();
    SCHEMES.contains(&lower.as_str())
        && t.get(scheme.len()..).is_some_and(|r| {
            r.starts_with("://") || r.starts_with(":\\\\") || r.starts_with(":/\\")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        let cases: &[(&str, &str)] = &[
            ("https://good.com@evil.com/x", "evil.com"),
            ("http://2130706433/", "127.0.0.1"),
            ("http://0x7f.1/", "127.0.0.1"),
            ("http://017700000001/", "127.0.0.1"),
            ("https://EXAMPLE.com./", "example.com"),
            ("https://bücher.de/", "xn--bcher-kva.de"),
            ("https://ev%69l.com/", "evil.com"),
            ("http://[::1]:8080/", "[::1]"),
        ];
        for (raw, host) in cases {
            let n = normalize_url(raw, "").unwrap();
            assert_eq!(n.host, *host, "{raw}");
            assert_eq!(n.method, "GET");
        }
        assert!(normalize_url("https://good.com\\@evil.com", "get").is_err());
        assert!(normalize_url("file:///etc/passwd", "get").is_err());
        assert!(normalize_url("//evil.com/x", "get").is_err());
        assert_eq!(
            normalize_url("https://a.com./p#frag", "post").unwrap().url,
            "https://a.com/p"
        );
        assert_eq!(
            normalize_url("https://a.com/", "post").unwrap().method,
            "POST"
        );
    }
}
