//! Messages that could reach the server without a verdict (a notification, another spelling
//! of an intercepted method, an ambiguous member) are refused, and a call that cannot be
//! understood is denied.

#[allow(unused_imports, reason = "the enforcer's imports, shared by its parts")]
use super::*;

/// The `params` members of an intercepted method that must be unambiguous: each at most
/// once, and none also spelled in another letter case (Go's `encoding/json` would read
/// `Name` as `name`).
pub(super) fn params_read_by(method: &str) -> &'static [&'static str] {
    match method {
        "tools/call" => &[
            "name",
            "arguments",
            "_meta",
            "requestState",
            "inputResponses",
        ],
        RESOURCES_READ => &["uri", "_meta", "requestState", "inputResponses"],
        "prompts/get" => &["name", "arguments", "_meta"],
        _ => &[],
    }
}

/// A method as the messages and the log show it: escaped, so an invisible or control
/// character in it is seen.
pub(super) fn shown(method: &str) -> String {
    method.escape_debug().to_string()
}

impl Enforcer {
    /// Refuses a client message that a lenient server could run as an intercepted method
    /// without toolgate's verdict: an intercepted method without an id, the same method
    /// spelled otherwise, or its params with a member twice or in another letter case.
    /// `None`: nothing to refuse.
    pub(super) fn refuse_unjudged(&self, env: &toolgate_mcp::Envelope<'_>) -> Option<Verdict> {
        let method = env.method_str();
        let (reason, help) = if let Some(&like) = INTERCEPTED
            .iter()
            .find(|m| toolgate_mcp::spelling::resembles(method, m))
        {
            (
                format!(
                    "method `{}` is not `{like}`; toolgate never forwards a method that differs from one it judges only in letter case, whitespace or invisible characters",
                    shown(method)
                ),
                format!("send `{like}` exactly"),
            )
        } else if !INTERCEPTED.contains(&method) {
            return None;
        } else if env.kind == Kind::Notification {
            (
                format!(
                    "a `{method}` without an id is never forwarded: toolgate decides each such request and answers it, and a notification cannot be answered"
                ),
                "give the request an id".to_owned(),
            )
        } else {
            let names = params_read_by(method);
            let ambiguity = env
                .params
                .filter(|_| !names.is_empty())
                .and_then(|p| toolgate_mcp::spelling::ambiguous_member(p, names).err())
                .filter(|a| !matches!(a, toolgate_mcp::spelling::Ambiguity::NotAnObject))?;
            (
                format!(
                    "the params of this `{method}` are ambiguous: {ambiguity}; servers disagree on which one counts"
                ),
                "send each member once, spelled exactly".to_owned(),
            )
        };
        tracing::warn!("client message refused: {reason}");
        let mut ev = Event::new(AuditKind::Decision);
        ev.request_id = env.reply_id().map(|id| id.get().to_owned());
        ev.tool = Some(method.to_owned());
        ev.effect = Some(Effect::Deny.as_str().to_owned());
        ev.contract = Some("protocol".to_owned());
        ev.reason = Some(reason.clone());
        if let Some(params) = env
            .params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
        {
            ev.args_sha256 = Some(canonical_sha256(&params));
        }
        if let Err(why) = self.audit(ev) {
            tracing::warn!("the refusal above was not audited: {why}");
        }
        Some(match (env.kind, env.reply_id()) {
            (Kind::Request, Some(id)) => Verdict::Reply(build::error_response(
                Some(id),
                toolgate_mcp::INVALID_REQUEST,
                &format!("invalid request: {reason}; help: {help}"),
            )),
            // A notification gets no reply; a request without a usable id cannot get one.
            _ => Verdict::Drop,
        })
    }

    /// Denies a `tools/call` that cannot be decided because what it must be decided on is
    /// unavailable (the gateway's store): the reply, and its record written first.
    pub fn deny_undecidable(
        &self,
        id: &RawValue,
        params: Option<&RawValue>,
        contract: &str,
        reason: &str,
    ) -> Vec<u8> {
        let parsed: Value = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let tool = parsed
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("tools/call");
        let arguments = parsed
            .get("arguments")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let call = Call {
            server: self.server(),
            tool,
            arguments: &arguments,
        };
        let mut ruling = Ruling::error(tool, reason);
        ruling.contract = contract.to_owned();
        match self.finish_deny(id, id.get(), &call, &ruling, None) {
            Verdict::Reply(bytes) => bytes,
            _ => build::tool_error_result(id, &format!("toolgate blocked this call: {reason}")),
        }
    }
}
