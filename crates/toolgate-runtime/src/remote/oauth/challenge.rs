//! `WWW-Authenticate` (RFC 9110 §11.6.1): one header may hold several challenges, each a
//! scheme followed by a token68 or by comma-separated `name=value` parameters whose values
//! are tokens or quoted strings. The Bearer parameters MCP uses are `resource_metadata`
//! (RFC 9728 §5.1), `scope` and `error` (RFC 6750 §3).

/// One challenge: its scheme and parameters (names lower-cased, values unquoted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The auth scheme as sent (`Bearer`, `Basic`, …).
    pub scheme: String,
    /// A token68 credential, if the challenge carries one instead of parameters.
    pub token68: Option<String>,
    /// `name=value` parameters in order; names lower-cased.
    pub params: Vec<(String, String)>,
}

impl Challenge {
    /// The first parameter named `name` (case-insensitive).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What a Bearer challenge tells an MCP client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bearer {
    /// The protected resource metadata URL (RFC 9728 §5.1).
    pub resource_metadata: Option<String>,
    /// The scopes the request needs (space-separated).
    pub scope: Option<String>,
    /// `invalid_token`, `insufficient_scope`, …
    pub error: Option<String>,
    /// The server's human-readable explanation.
    pub error_description: Option<String>,
}

/// The first Bearer challenge of a header, if any.
pub fn bearer(header: &str) -> Option<Bearer> {
    let challenge = parse(header)
        .into_iter()
        .find(|c| c.scheme.eq_ignore_ascii_case("bearer"))?;
    let get = |name: &str| challenge.param(name).map(str::to_owned);
    Some(Bearer {
        resource_metadata: get("resource_metadata"),
        scope: get("scope"),
        error: get("error"),
        error_description: get("error_description"),
    })
}

/// Every challenge of a `WWW-Authenticate` value. Total: malformed parts are skipped.
pub fn parse(header: &str) -> Vec<Challenge> {
    let mut p = Parser {
        s: header.as_bytes(),
        i: 0,
    };
    let mut out = Vec::new();
    loop {
        p.skip(|b| b == b',' || is_ws(b));
        if p.at_end() {
            break;
        }
        let scheme = p.word();
        if scheme.is_empty() {
            // Not a token where a scheme must start: skip one byte and carry on.
            p.i += 1;
            continue;
        }
        let mut challenge = Challenge {
            scheme,
            token68: None,
            params: Vec::new(),
        };
        p.skip(is_ws);
        // Parameters (or a token68) until the next scheme.
        loop {
            p.skip(|b| is_ws(b) || b == b',');
            let start = p.i;
            let name = p.word();
            if name.is_empty() {
                if p.at_end() {
                    break;
                }
                p.i += 1;
                continue;
            }
            p.skip(is_ws);
            if p.peek() == Some(b'=') {
                let eq = p.i;
                p.i += 1;
                p.skip(is_ws);
                match p.peek() {
                    Some(b'"') => {
                        let value = p.quoted();
                        challenge.params.push((name.to_ascii_lowercase(), value));
                    }
                    Some(b) if is_tchar(b) => {
                        let value = p.word();
                        challenge.params.push((name.to_ascii_lowercase(), value));
                    }
                    _ => {
                        // `name=` followed by nothing or more `=`: a token68 such as `abc==`.
                        p.i = eq;
                        p.skip(|b| b == b'=');
                        let end = p.i;
                        challenge.token68 = Some(
                            String::from_utf8_lossy(p.s.get(start..end).unwrap_or_default())
                                .into_owned(),
                        );
                    }
                }
            } else if challenge.params.is_empty()
                && challenge.token68.is_none()
                && start_follows_scheme(&p, start)
                && (p.at_end() || p.peek() == Some(b','))
            {
                // A token68 right after the scheme (`Basic dXNlcg`), ended by `,` or the end.
                challenge.token68 = Some(name);
            } else {
                // A word not followed by `=`: the next challenge's scheme.
                p.i = start;
                break;
            }
        }
        out.push(challenge);
    }
    out
}

/// True when only whitespace separates the scheme from `start` (no comma in between).
fn start_follows_scheme(p: &Parser<'_>, start: usize) -> bool {
    let before = p.s.get(..start).unwrap_or_default();
    let trimmed = before
        .iter()
        .rposition(|b| !is_ws(*b))
        .and_then(|i| before.get(i));
    trimmed.is_some_and(|b| *b != b',')
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn at_end(&self) -> bool {
        self.i >= self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip(&mut self, f: impl Fn(u8) -> bool) {
        while self.peek().is_some_and(&f) {
            self.i += 1;
        }
    }

    /// A token (RFC 9110 `tchar`s, plus `/` so that a token68 reads whole).
    fn word(&mut self) -> String {
        let start = self.i;
        self.skip(|b| is_tchar(b) || b == b'/');
        String::from_utf8_lossy(self.s.get(start..self.i).unwrap_or_default()).into_owned()
    }

    /// A quoted string starting at `"`, with `\` escapes; an unterminated one runs to the end.
    fn quoted(&mut self) -> String {
        let mut out = Vec::new();
        self.i += 1;
        while let Some(b) = self.peek() {
            self.i += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    if let Some(next) = self.peek() {
                        out.push(next);
                        self.i += 1;
                    }
                }
                _ => out.push(b),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

fn is_ws(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests {
    use super::*;

    #[test]
    fn bearer_with_quoted_parameters() {
        // The shape of RFC 9728 §5.1's example and of the TypeScript SDK's `requireBearerAuth`.
        let b = bearer(
            r#"Bearer error="invalid_token", error_description="Missing Authorization header", resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/mcp""#,
        )
        .unwrap();
        assert_eq!(b.error.as_deref(), Some("invalid_token"));
        assert_eq!(
            b.resource_metadata.as_deref(),
            Some("https://api.example.com/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(b.scope, None);
    }

    #[test]
    fn several_challenges_and_token_values() {
        let all = parse(
            r#"Basic realm="a, b", Bearer realm=example,scope="files:read files:write" , error=insufficient_scope, DPoP algs="ES256""#,
        );
        assert_eq!(all.len(), 3, "{all:?}");
        assert_eq!(all[0].scheme, "Basic");
        assert_eq!(all[0].param("realm"), Some("a, b"));
        assert_eq!(all[1].param("SCOPE"), Some("files:read files:write"));
        assert_eq!(all[1].param("error"), Some("insufficient_scope"));
        assert_eq!(all[2].scheme, "DPoP");
        let b = bearer("Basic realm=x, bearer scope=\"a\"").unwrap();
        assert_eq!(b.scope.as_deref(), Some("a"));
    }

    #[test]
    fn escapes_token68_and_garbage() {
        let all = parse(r#"Negotiate dXNlcjpwYXNz==, Bearer error_description="say \"hi\"\\""#);
        assert_eq!(all[0].token68.as_deref(), Some("dXNlcjpwYXNz=="));
        assert_eq!(all[1].param("error_description"), Some(r#"say "hi"\"#));
        let bare = parse("Bearer");
        assert_eq!(bare.len(), 1);
        assert!(bare[0].params.is_empty());
        assert!(bearer("Basic realm=x").is_none());
        // Totality: odd bytes never panic and never loop.
        for s in [
            "",
            ",,,",
            "=",
            "Bearer =",
            "Bearer a=\"unterminated",
            "Bearer a=,b",
            "\"",
            "Bearer ,=,",
        ] {
            let _ = parse(s);
        }
    }
}
