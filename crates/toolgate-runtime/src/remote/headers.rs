//! `--header 'Name: value'` for remote servers: `${VAR}` in values is expanded from the
//! environment, so secrets stay out of argv and client configurations.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use toolgate_mcp::protocol;

/// Headers toolgate sets itself; `--header` may not override them.
const RESERVED: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    protocol::SESSION_ID_HEADER,
    protocol::PROTOCOL_VERSION_HEADER,
    protocol::METHOD_HEADER,
    protocol::NAME_HEADER,
    protocol::LAST_EVENT_ID_HEADER,
    "transfer-encoding",
    "connection",
];

/// Parses `Name: value` arguments, expanding `${VAR}` in values with `env`.
pub fn parse(args: &[String], env: impl Fn(&str) -> Option<String>) -> anyhow::Result<HeaderMap> {
    let mut map = HeaderMap::new();
    for arg in args {
        let Some((name, value)) = arg.split_once(':') else {
            anyhow::bail!(
                "invalid `--header`: it has no `:`\n  help: write it as `Name: value`, e.g. `Authorization: Bearer ${{TOKEN}}`"
            );
        };
        let name = name.trim();
        let lower = name.to_ascii_lowercase();
        if RESERVED.contains(&lower.as_str()) || lower.starts_with(protocol::PARAM_HEADER_PREFIX) {
            anyhow::bail!("`--header` `{name}` is set by toolgate itself and cannot be given");
        }
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            anyhow::anyhow!(
                "`--header` name `{}` is not a valid header name",
                name.escape_debug()
            )
        })?;
        let value =
            expand(value.trim(), &env).map_err(|e| anyhow::anyhow!("`--header` `{name}`: {e}"))?;
        let mut value = HeaderValue::from_str(&value).map_err(|_| {
            anyhow::anyhow!("`--header` `{name}`: the value has a character not allowed in a header (a newline or control character)")
        })?;
        value.set_sensitive(true);
        map.append(name, value);
    }
    Ok(map)
}

/// `toolgate init`'s escape for Claude Code, which expands `${…}` in `args` itself:
/// `${TOOLGATE_DOLLAR:-$}{VAR}` reaches toolgate as `${VAR}` through Claude Code's
/// `${VAR:-default}`; run by hand, it still means `${VAR}`.
const CLAUDE_CODE_DOLLAR: &str = "{TOOLGATE_DOLLAR:-$}";

/// Expands `${VAR}` (and `$$` to `$`, and `${TOOLGATE_DOLLAR:-$}{VAR}` as `${VAR}`); a missing variable is an error naming it, never an
/// empty string (a header `Authorization: Bearer ` would fail confusingly later).
pub fn expand(text: &str, env: &impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after
            .strip_prefix(CLAUDE_CODE_DOLLAR)
            .and_then(|t| t.strip_prefix('{'))
            .or_else(|| after.strip_prefix('{'))
        {
            let Some(end) = tail.find('}') else {
                return Err("`${` without a closing `}`".to_owned());
            };
            let var = &tail[..end];
            if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("`${{{var}}}` is not a variable name"));
            }
            match env(var) {
                Some(value) => out.push_str(&value),
                None => {
                    return Err(format!(
                        "environment variable `{var}` is not set\n  help: set it in the environment of `toolgate wrap` (the client configuration's `env`)"
                    ));
                }
            }
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "GH_TOKEN").then(|| "ghp_secret".to_owned())
    }

    #[test]
    fn variables_are_expanded_and_values_marked_sensitive() {
        let map = parse(
            &[
                "Authorization: Bearer ${GH_TOKEN}".to_owned(),
                "X-A: a$$b $x".to_owned(),
            ],
            env,
        )
        .unwrap();
        let auth = &map["authorization"];
        assert_eq!(auth, "Bearer ghp_secret");
        assert!(auth.is_sensitive());
        assert_eq!(&map["x-a"], "a$b $x");
        let escaped = parse(
            &["Authorization: ${TOOLGATE_DOLLAR:-$}{GH_TOKEN}".to_owned()],
            env,
        )
        .unwrap();
        assert_eq!(&escaped["authorization"], "ghp_secret");
    }

    #[test]
    fn a_missing_variable_is_named_and_the_value_never_shown() {
        let err = parse(&["Authorization: Bearer ${NOPE}".to_owned()], env)
            .unwrap_err()
            .to_string();
        assert!(err.contains("`NOPE` is not set"), "{err}");
        for bad in [
            "NoColon",
            "Mcp-Session-Id: x",
            "accept: y",
            "Mcp-Param-A: 1",
            "X: ${",
            "X: ${A-B}",
            "X: a\u{7}",
        ] {
            assert!(parse(&[bad.to_owned()], env).is_err(), "{bad}");
        }
    }
}
