//! Borrowed views of the MCP params and results the enforcement layer reads.
//!
//! Each view deserialises only the members it names, borrowing from the frame; unknown
//! members are ignored, duplicate members are an error (fail closed: two parsers must
//! never disagree on what a message says).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// A view could not be read from the given JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed `{what}`: {detail}")]
pub struct ViewError {
    /// Which view failed (e.g. `tools/call params`).
    pub what: &'static str,
    /// The parser's explanation.
    pub detail: String,
}

fn view<'a, T: Deserialize<'a>>(what: &'static str, raw: &'a RawValue) -> Result<T, ViewError> {
    serde_json::from_str(raw.get()).map_err(|err| ViewError {
        what,
        detail: err.to_string(),
    })
}

/// The `_meta` key holding the protocol version on 2026-07-28 requests.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key holding the client capabilities on 2026-07-28 requests.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The `_meta` key holding the client info on 2026-07-28 requests.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

/// `tools/call` params.
#[derive(Debug, Clone)]
pub struct ToolsCallParams<'a> {
    /// The tool name.
    pub name: Cow<'a, str>,
    /// The raw `arguments`, if present.
    pub arguments: Option<&'a RawValue>,
    /// The raw `_meta`, if present.
    pub meta: Option<&'a RawValue>,
}

/// `tools/call` params: the shape the parser actually uses (unknown members ignored).
#[derive(Deserialize)]
struct ToolsCallParamsLoose<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<&'a RawValue>,
}

impl<'a> ToolsCallParams<'a> {
    /// Reads `tools/call` params. `arguments` must be an object when present.
    pub fn parse(params: &'a RawValue) -> Result<Self, ViewError> {
        let loose: ToolsCallParamsLoose<'a> = view("tools/call params", params)?;
        if let Some(args) = loose.arguments
            && !args.get().starts_with('{')
        {
            return Err(ViewError {
                what: "tools/call params",
                detail: "`arguments` is not an object".into(),
            });
        }
        Ok(ToolsCallParams {
            name: loose.name,
            arguments: loose.arguments,
            meta: loose.meta,
        })
    }
}

/// `initialize` params (protocol revisions up to 2025-11-25).
#[derive(Debug, Clone, Deserialize)]
pub struct InitializeParams<'a> {
    /// The protocol version the client asks for.
    #[serde(borrow, rename = "protocolVersion")]
    pub protocol_version: Cow<'a, str>,
    /// The raw client capabilities.
    #[serde(borrow, default)]
    pub capabilities: Option<&'a RawValue>,
    /// The raw client info.
    #[serde(borrow, default, rename = "clientInfo")]
    pub client_info: Option<&'a RawValue>,
}

impl<'a> InitializeParams<'a> {
    /// Reads `initialize` params.
    pub fn parse(params: &'a RawValue) -> Result<Self, ViewError> {
        view("initialize params", params)
    }

    /// The client capabilities (empty when absent).
    pub fn client_capabilities(&self) -> Result<ClientCapabilities<'a>, ViewError> {
        match self.capabilities {
            Some(raw) => ClientCapabilities::parse(raw),
            None => Ok(ClientCapabilities::default()),
        }
    }
}

/// Client capabilities, as sent in `initialize` or in a 2026-07-28 request's `_meta`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ClientCapabilities<'a> {
    /// Raw `elicitation` capability.
    #[serde(borrow, default)]
    pub elicitation: Option<&'a RawValue>,
    /// Raw `sampling` capability.
    #[serde(borrow, default)]
    pub sampling: Option<&'a RawValue>,
    /// Raw `roots` capability.
    #[serde(borrow, default)]
    pub roots: Option<&'a RawValue>,
    /// Raw `extensions`.
    #[serde(borrow, default)]
    pub extensions: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ElicitationModes<'a> {
    #[serde(borrow, default)]
    form: Option<&'a RawValue>,
    #[serde(borrow, default)]
    url: Option<&'a RawValue>,
}

impl<'a> ClientCapabilities<'a> {
    /// Reads client capabilities from a raw object.
    pub fn parse(raw: &'a RawValue) -> Result<Self, ViewError> {
        view("client capabilities", raw)
    }

    /// True if the client can answer form-mode `elicitation/create` requests.
    ///
    /// An empty `elicitation: {}` means form mode (2025-06-18 and later).
    pub fn elicitation_form(&self) -> bool {
        self.elicitation_modes()
            .is_some_and(|(form, url)| form || !url)
    }

    /// True if the client declared URL-mode elicitation.
    pub fn elicitation_url(&self) -> bool {
        self.elicitation_modes().is_some_and(|(_, url)| url)
    }

    fn elicitation_modes(&self) -> Option<(bool, bool)> {
        let raw = self.elicitation?;
        if !raw.get().starts_with('{') {
            return None;
        }
        let modes: ElicitationModes<'_> = serde_json::from_str(raw.get()).ok()?;
        let on = |m: Option<&RawValue>| m.is_some_and(|v| v.get() != "null" && v.get() != "false");
        Some((on(modes.form), on(modes.url)))
    }
}

/// Any request's params, reduced to `_meta`.
#[derive(Deserialize)]
struct MetaOnly<'a> {
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<&'a RawValue>,
}

/// The per-request `_meta` of a 2026-07-28 (stateless) request.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RequestMeta<'a> {
    /// `io.modelcontextprotocol/protocolVersion`.
    #[serde(borrow, default, rename = "io.modelcontextprotocol/protocolVersion")]
    pub protocol_version: Option<Cow<'a, str>>,
    /// Raw `io.modelcontextprotocol/clientCapabilities`.
    #[serde(borrow, default, rename = "io.modelcontextprotocol/clientCapabilities")]
    pub client_capabilities: Option<&'a RawValue>,
    /// Raw `io.modelcontextprotocol/clientInfo`.
    #[serde(borrow, default, rename = "io.modelcontextprotocol/clientInfo")]
    pub client_info: Option<&'a RawValue>,
    /// Raw `progressToken`.
    #[serde(borrow, default, rename = "progressToken")]
    pub progress_token: Option<&'a RawValue>,
}

impl<'a> RequestMeta<'a> {
    /// Reads the `_meta` of any request's params; `Ok(None)` when there is no `_meta`.
    pub fn from_params(params: &'a RawValue) -> Result<Option<Self>, ViewError> {
        let only: MetaOnly<'a> = view("request params", params)?;
        only.meta.map(|m| view("request _meta", m)).transpose()
    }

    /// The client capabilities declared in this request.
    pub fn capabilities(&self) -> Result<ClientCapabilities<'a>, ViewError> {
        match self.client_capabilities {
            Some(raw) => ClientCapabilities::parse(raw),
            None => Ok(ClientCapabilities::default()),
        }
    }
}

/// A `tools/list` result.
#[derive(Debug, Clone, Deserialize)]
pub struct ToolsListResult<'a> {
    /// Each tool, raw.
    #[serde(borrow)]
    pub tools: Vec<&'a RawValue>,
    /// The pagination cursor, if any.
    #[serde(borrow, default, rename = "nextCursor")]
    pub next_cursor: Option<Cow<'a, str>>,
}

impl<'a> ToolsListResult<'a> {
    /// Reads a `tools/list` result.
    pub fn parse(result: &'a RawValue) -> Result<Self, ViewError> {
        view("tools/list result", result)
    }
}

/// One tool definition from `tools/list`, reduced to what policy needs.
#[derive(Debug, Clone, Deserialize)]
pub struct ToolView<'a> {
    /// The tool name.
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    /// The description, if any.
    #[serde(borrow, default)]
    pub description: Option<Cow<'a, str>>,
    /// Raw `inputSchema`.
    #[serde(borrow, default, rename = "inputSchema")]
    pub input_schema: Option<&'a RawValue>,
    /// Raw `outputSchema`.
    #[serde(borrow, default, rename = "outputSchema")]
    pub output_schema: Option<&'a RawValue>,
    /// Raw `annotations` (hints: untrusted).
    #[serde(borrow, default)]
    pub annotations: Option<&'a RawValue>,
}

impl<'a> ToolView<'a> {
    /// Reads one tool definition.
    pub fn parse(tool: &'a RawValue) -> Result<Self, ViewError> {
        view("tool definition", tool)
    }
}

/// `notifications/cancelled` params.
#[derive(Debug, Clone, Deserialize)]
pub struct CancelledParams<'a> {
    /// The raw id of the request being cancelled.
    #[serde(borrow, rename = "requestId")]
    pub request_id: &'a RawValue,
    /// The reason, if any.
    #[serde(borrow, default)]
    pub reason: Option<Cow<'a, str>>,
}

impl<'a> CancelledParams<'a> {
    /// Reads `notifications/cancelled` params.
    pub fn parse(params: &'a RawValue) -> Result<Self, ViewError> {
        view("notifications/cancelled params", params)
    }
}

#[derive(Deserialize)]
struct ResultTypeOnly<'a> {
    #[serde(borrow, default, rename = "resultType")]
    result_type: Option<Cow<'a, str>>,
}

/// The `resultType` of a result (2026-07-28: `complete` or `input_required`), if present.
pub fn result_type(result: &RawValue) -> Result<Option<Cow<'_, str>>, ViewError> {
    let only: ResultTypeOnly<'_> = view("result", result)?;
    Ok(only.result_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> &'static RawValue {
        Box::leak(RawValue::from_string(s.to_owned()).unwrap())
    }

    #[test]
    fn tools_call() {
        let p = raw(
            r#"{"name":"read_file","arguments":{"path":"/x"},"_meta":{"progressToken":1},"task":{}}"#,
        );
        let v = ToolsCallParams::parse(p).unwrap();
        assert_eq!(v.name, "read_file");
        assert!(matches!(v.name, Cow::Borrowed(_)));
        assert_eq!(v.arguments.unwrap().get(), r#"{"path":"/x"}"#);
        assert_eq!(v.meta.unwrap().get(), r#"{"progressToken":1}"#);

        assert!(ToolsCallParams::parse(raw(r#"{"arguments":{}}"#)).is_err());
        assert!(ToolsCallParams::parse(raw(r#"{"name":"a","arguments":[1]}"#)).is_err());
        assert!(ToolsCallParams::parse(raw(r#"{"name":"a","name":"b"}"#)).is_err());
        assert!(ToolsCallParams::parse(raw(r#"{"name":5}"#)).is_err());
        let esc = ToolsCallParams::parse(raw(r#"{"name":"r\u0065ad"}"#)).unwrap();
        assert_eq!(esc.name, "read");
        assert!(esc.arguments.is_none());
    }

    #[test]
    fn initialize_and_capabilities() {
        let p = raw(
            r#"{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{},"roots":{"listChanged":true}},"clientInfo":{"name":"c","version":"1"}}"#,
        );
        let v = InitializeParams::parse(p).unwrap();
        assert_eq!(v.protocol_version, "2025-11-25");
        let caps = v.client_capabilities().unwrap();
        assert!(caps.elicitation_form());
        assert!(!caps.elicitation_url());
        assert!(caps.roots.is_some());

        let url_only = ClientCapabilities::parse(raw(r#"{"elicitation":{"url":{}}}"#)).unwrap();
        assert!(!url_only.elicitation_form());
        assert!(url_only.elicitation_url());
        let both =
            ClientCapabilities::parse(raw(r#"{"elicitation":{"form":{},"url":{}}}"#)).unwrap();
        assert!(both.elicitation_form() && both.elicitation_url());
        let none = ClientCapabilities::parse(raw(r#"{}"#)).unwrap();
        assert!(!none.elicitation_form());
        let weird = ClientCapabilities::parse(raw(r#"{"elicitation":true}"#)).unwrap();
        assert!(!weird.elicitation_form());
    }

    #[test]
    fn stateless_meta() {
        let p = raw(
            r#"{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"progressToken":"t"}}"#,
        );
        let meta = RequestMeta::from_params(p).unwrap().unwrap();
        assert_eq!(meta.protocol_version.as_deref(), Some("2026-07-28"));
        assert!(meta.capabilities().unwrap().elicitation_form());
        assert_eq!(meta.progress_token.unwrap().get(), r#""t""#);
        assert!(
            RequestMeta::from_params(raw(r#"{"name":"x"}"#))
                .unwrap()
                .is_none()
        );
        assert!(RequestMeta::from_params(raw(r#"{"_meta":5}"#)).is_err());
    }

    #[test]
    fn tools_list_cancelled_result_type() {
        let r = raw(
            r#"{"tools":[{"name":"a","inputSchema":{"type":"object"}},{"name":"b","annotations":{"readOnlyHint":true}}],"nextCursor":"c2"}"#,
        );
        let v = ToolsListResult::parse(r).unwrap();
        assert_eq!(v.tools.len(), 2);
        assert_eq!(v.next_cursor.as_deref(), Some("c2"));
        let t = ToolView::parse(v.tools[1]).unwrap();
        assert_eq!(t.name, "b");
        assert!(t.annotations.is_some());

        let c = CancelledParams::parse(raw(
            r#"{"requestId":"18446744073709551615x","reason":"user"}"#,
        ))
        .unwrap();
        assert_eq!(c.request_id.get(), r#""18446744073709551615x""#);
        assert!(CancelledParams::parse(raw(r#"{}"#)).is_err());

        let ir = raw(r#"{"resultType":"input_required","inputRequests":{},"requestState":"abc"}"#);
        assert_eq!(result_type(ir).unwrap().as_deref(), Some("input_required"));
        assert!(result_type(raw("{}")).unwrap().is_none());
    }
}
