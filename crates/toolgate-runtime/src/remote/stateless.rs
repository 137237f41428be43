//! What the stateless revision (2026-07-28 on) adds to each request: `Mcp-Method` and
//! `Mcp-Name`, derived from the body sent, and the `Mcp-Param-*` headers that mirror the
//! tool arguments a server's `tools/list` marked with `x-mcp-header`.

use reqwest::header::{self, HeaderMap, HeaderValue};
use toolgate_mcp::protocol::{self, METHOD_HEADER, NAME_HEADER, PROTOCOL_VERSION_HEADER};

use super::exchange::{Inner, Mirrored, Outgoing};

impl Inner {
    /// `Mcp-Method` and `Mcp-Name` for stateless revisions, derived from the body sent.
    pub(super) fn stateless_headers(&self, out: &Outgoing, headers: &mut HeaderMap) {
        let version = self
            .lock()
            .version
            .clone()
            .or_else(|| out.meta_version.clone());
        let Some(version) = version.filter(|v| protocol::is_stateless(v)) else {
            return;
        };
        if version.len() == 10
            && !headers.contains_key(PROTOCOL_VERSION_HEADER)
            && let Ok(value) = HeaderValue::from_str(&version)
        {
            headers.insert(PROTOCOL_VERSION_HEADER, value);
        }
        if let Some(method) = out.method.as_deref() {
            headers.insert(METHOD_HEADER, header_text(method));
        }
        let named = matches!(
            out.method.as_deref(),
            Some("tools/call" | "prompts/get" | "resources/read")
        );
        if named && let Some(name) = out.name.as_deref() {
            headers.insert(NAME_HEADER, header_text(name));
        }
        if out.method.as_deref() == Some("tools/call") {
            self.param_headers_of(out, headers);
        }
    }

    /// Learns, from a `tools/list` answer of a stateless-era server, which arguments of
    /// each tool are mirrored in `Mcp-Param-*` headers (`x-mcp-header`).
    pub(super) fn observe_answer(&self, out: &Outgoing, answer: &[u8]) {
        if out.method.as_deref() != Some("tools/list") || !self.is_stateless_era(out) {
            return;
        }
        #[derive(serde::Deserialize)]
        struct Answer {
            result: Option<Listing>,
        }
        #[derive(serde::Deserialize)]
        struct Listing {
            #[serde(default)]
            tools: Vec<Tool>,
        }
        #[derive(serde::Deserialize)]
        struct Tool {
            name: String,
            #[serde(rename = "inputSchema")]
            input_schema: Option<serde_json::Value>,
        }
        let Ok(Answer {
            result: Some(listing),
        }) = serde_json::from_slice::<Answer>(answer)
        else {
            return;
        };
        let mut learned = self.param_headers.lock().unwrap_or_else(|p| p.into_inner());
        for tool in listing.tools {
            let mut params = Vec::new();
            if let Some(schema) = &tool.input_schema {
                mirrored_params(schema, &mut Vec::new(), &mut params);
            }
            if params.is_empty() {
                learned.remove(&tool.name);
            } else {
                learned.insert(tool.name, params);
            }
        }
    }

    fn is_stateless_era(&self, out: &Outgoing) -> bool {
        self.lock()
            .version
            .clone()
            .or_else(|| out.meta_version.clone())
            .is_some_and(|v| protocol::is_stateless(&v))
    }

    /// `Mcp-Param-*` for a `tools/call`, from the arguments in the body sent.
    fn param_headers_of(&self, out: &Outgoing, headers: &mut HeaderMap) {
        let Some(tool) = out.name.as_deref() else {
            return;
        };
        let params = {
            let learned = self.param_headers.lock().unwrap_or_else(|p| p.into_inner());
            match learned.get(tool) {
                Some(params) => params.clone(),
                None => return,
            }
        };
        #[derive(serde::Deserialize)]
        struct Call {
            params: Option<CallParams>,
        }
        #[derive(serde::Deserialize)]
        struct CallParams {
            arguments: Option<serde_json::Value>,
        }
        let Ok(Call {
            params: Some(CallParams {
                arguments: Some(arguments),
            }),
        }) = serde_json::from_slice::<Call>(&out.body)
        else {
            return;
        };
        for (path, token) in params {
            let value = path.iter().try_fold(&arguments, |node, key| node.get(key));
            let rendered = match value {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(serde_json::Value::Bool(b)) => b.to_string(),
                Some(serde_json::Value::Number(n)) => n.to_string(),
                _ => continue,
            };
            if let Ok(name) = header::HeaderName::from_bytes(
                format!("{}{token}", protocol::PARAM_HEADER_PREFIX).as_bytes(),
            ) {
                headers.insert(name, header_text(&rendered));
            }
        }
    }
}

/// Collects the properties of `schema` (reached through `properties` only) that carry an
/// `x-mcp-header` token: (argument path, token).
fn mirrored_params(schema: &serde_json::Value, path: &mut Vec<String>, out: &mut Vec<Mirrored>) {
    let Some(properties) = schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
    else {
        return;
    };
    for (name, property) in properties {
        path.push(name.clone());
        if let Some(token) = property
            .get("x-mcp-header")
            .and_then(serde_json::Value::as_str)
            && !token.is_empty()
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            out.push((path.clone(), token.to_owned()));
        }
        if path.len() < 16 {
            mirrored_params(property, path, out);
        }
        path.pop();
    }
}

/// A header value for a name or method: ASCII as is, anything else as `=?base64?…?=`.
fn header_text(text: &str) -> HeaderValue {
    let plain = text.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !text.starts_with(' ')
        && !text.ends_with(' ')
        && !text.starts_with("=?");
    let encoded = if plain {
        text.to_owned()
    } else {
        use base64::Engine as _;
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(text)
        )
    };
    HeaderValue::from_str(&encoded).unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_ascii_names_are_base64_encoded() {
        assert_eq!(header_text("read_file"), "read_file");
        assert_eq!(header_text("ünï"), "=?base64?w7xuw68=?=");
        assert_eq!(header_text(" x"), "=?base64?IHg=?=");
    }
}
