//! `tools/call` and `resources/read`: decided before anything reaches the server; an allow
//! forwards the original bytes, a deny answers and is recorded after its answer.

#[allow(unused_imports, reason = "the enforcer's imports, shared by its parts")]
use super::*;

/// A request retried with toolgate's sealed `requestState`.
pub(super) struct Retried<'a> {
    pub(super) params: &'a Value,
    pub(super) method: &'a str,
    pub(super) retry: &'a approval::Retry,
}

impl Enforcer {
    pub(super) fn on_tools_call(
        &self,
        id: &RawValue,
        params: Option<&RawValue>,
        proxy: &ProxyHandle,
    ) -> Verdict {
        self.decide_tools_call(id, params, proxy, Listing::NotYet)
    }

    /// Decides a `tools/call`; `listing`: whether it already waited for a listing of the
    /// server's tools, and how that went.
    pub(super) fn decide_tools_call(
        &self,
        id: &RawValue,
        raw_params: Option<&RawValue>,
        proxy: &ProxyHandle,
        listing: Listing<'_>,
    ) -> Verdict {
        let started = Instant::now();
        let request_id = id.get().to_owned();
        let parsed: Option<Value> = raw_params.and_then(|p| serde_json::from_str(p.get()).ok());
        let Some(params) = parsed else {
            return self.deny_reply(
                id,
                "tools/call",
                "the request has no readable params",
                "error",
                None,
            );
        };
        let Some(tool) = params
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return self.deny_reply(id, "tools/call", "the request names no tool", "error", None);
        };
        let arguments = params
            .get("arguments")
            .cloned()
            .unwrap_or_else(|| json!({}));
        if !arguments.is_object() {
            return self.deny_reply(id, &tool, "`arguments` is not an object", "error", None);
        }
        // A 2026-07-28 client announces itself per request.
        if let Some(abilities) = ClientAbilities::from_request_meta(&params) {
            lock(&self.inner.state).client = abilities;
        }
        // Another proxy of the agent session saw the server's tools change (a gateway
        // replica): this session's listing is no longer trusted until it lists again.
        if lock(&self.inner.backend).tools_changed_elsewhere() {
            lock(&self.inner.state).tools_stale = true;
        }
        // A tool the session has not listed yet is decided on the server's definition:
        // the call waits (parked) for a listing, toolgate's own if none is under way.
        let listing_failed = match listing {
            Listing::NotYet => {
                if let Some(raw) = raw_params
                    && let Some(parked) = self.list_before_deciding(id, raw, &params, &tool, proxy)
                {
                    return parked;
                }
                None
            }
            Listing::Done => None,
            Listing::Failed(why) => Some(why),
        };
        let call = Call {
            server: self.server(),
            tool: &tool,
            arguments: &arguments,
        };
        let mut ruling = lock(&self.inner.backend).decide(&call, now_ms());
        if let Some(why) = listing_failed
            && ruling.effect != Effect::Deny
            && !lock(&self.inner.backend).listed(&tool)
        {
            ruling.effect = Effect::Ask;
            ruling.contract = "pinning".to_owned();
            ruling.rule = None;
            ruling.reason = format!(
                "`{tool}` is not pinned: toolgate could not list the server's tools to read its definition ({why})"
            );
            ruling.prompt = lock(&self.inner.backend).prompt(&call, &ruling);
            ruling.prompt.why = ruling.reason.clone();
        }
        if ruling.effect == Effect::Allow && lock(&self.inner.state).tools_stale {
            ruling.effect = Effect::Ask;
            ruling.contract = "pinning".to_owned();
            ruling.rule = None;
            ruling.reason = format!(
                "the server announced that its tools changed (`notifications/tools/list_changed`) and they were not listed again, so the definition of `{tool}` is unknown"
            );
            ruling.prompt = lock(&self.inner.backend).prompt(&call, &ruling);
            ruling.prompt.why = ruling.reason.clone();
        }
        let retry = approval::retry_of(&params);
        let on_allow = Watched::ToolCall {
            tool: tool.clone(),
            request_id: request_id.clone(),
            fingerprint: ruling.fingerprint.clone(),
            started,
            secret_file: ruling
                .decision
                .as_ref()
                .and_then(|d| toolgate_policy::secret_read(&d.action))
                .map(str::to_owned),
            redact: lock(&self.inner.backend).redacts_output(&tool),
        };
        match (ruling.effect, retry) {
            (Effect::Deny, _) => self.deny_as_it_arrives(id, request_id, tool, arguments, ruling),
            (Effect::Allow, retry) => {
                if let Err(why) = self.audit(self.inner.decision_event(
                    &request_id,
                    &call,
                    &ruling,
                    Effect::Allow,
                )) {
                    return self.deny_reply(id, &tool, &why, "audit", None);
                }
                match retry {
                    // toolgate's own retry fields never reach the server; its result is
                    // audited and taint-fed like any other.
                    Some(_) => self.forward_stripped(id, "tools/call", &params, on_allow),
                    None => Verdict::Watch(self.watch(on_allow)),
                }
            }
            (Effect::Ask, Some(retry)) => self.on_retry(
                id,
                &request_id,
                &call,
                &ruling,
                Retried {
                    params: &params,
                    method: "tools/call",
                    retry: &retry,
                },
                on_allow,
            ),
            (Effect::Ask, None) => self.ask(id, &request_id, &call, ruling, on_allow, proxy),
        }
    }

    /// Forwards a verified retry without toolgate's own fields, watching its response.
    pub(super) fn forward_stripped(
        &self,
        id: &RawValue,
        method: &str,
        params: &Value,
        on_allow: Watched,
    ) -> Verdict {
        let stripped = approval::strip_retry(params);
        let Some(params) = raw_value(&stripped) else {
            return Verdict::Reply(build::tool_error_result(
                id,
                "toolgate blocked this call: internal error",
            ));
        };
        // The id is echoed byte for byte (an id such as 18446744073709551615 stays exact).
        let frame = build::request_raw_id(id, method, Some(&params));
        Verdict::ReplaceWatch(frame, self.watch(on_allow))
    }

    /// A call the policy denies as it arrives: answered at once, its record built (the
    /// arguments' hash included) and written right after the answer is delivered ([`Interceptor::after_delivery`], before anything else
    /// is decided). Nothing waits for that record, because an audit failure cannot make a
    /// deny less of a deny: it is logged, and the next call that must be recorded is denied
    /// for it. A log that could not be opened at all is named in the answer, as always.
    pub(super) fn deny_as_it_arrives(
        &self,
        id: &RawValue,
        request_id: String,
        tool: String,
        arguments: Value,
        ruling: Ruling,
    ) -> Verdict {
        if self.inner.settings.audit_error.is_some() {
            let call = Call {
                server: self.server(),
                tool: &tool,
                arguments: &arguments,
            };
            return self.finish_deny(id, &request_id, &call, &ruling, None);
        }
        let reply = self.deny_reply(
            id,
            &tool,
            &ruling.reason,
            &ruling.contract,
            ruling.rule.as_deref(),
        );
        lock(&self.inner.deferred).push(Deferred::Denial(Denial {
            request_id,
            tool,
            arguments,
            ruling,
        }));
        reply
    }

    pub(super) fn finish_deny(
        &self,
        id: &RawValue,
        request_id: &str,
        call: &Call<'_>,
        ruling: &Ruling,
        extra: Option<&str>,
    ) -> Verdict {
        let mut ev = self
            .inner
            .decision_event(request_id, call, ruling, Effect::Deny);
        let reason = match extra {
            Some(x) => format!("{}; {x}", ruling.reason),
            None => ruling.reason.clone(),
        };
        ev.reason = Some(reason.clone());
        // An audit failure cannot make a deny less of a deny; it is reported in the text.
        let reason = match self.audit(ev) {
            Ok(()) => reason,
            Err(why) => format!("{reason} (and {why})"),
        };
        self.deny_reply(
            id,
            call.tool,
            &reason,
            &ruling.contract,
            ruling.rule.as_deref(),
        )
    }

    pub(super) fn on_resources_read(
        &self,
        id: &RawValue,
        params: Option<&RawValue>,
        proxy: &ProxyHandle,
    ) -> Verdict {
        let started = Instant::now();
        let request_id = id.get().to_owned();
        let params: Option<Value> = params.and_then(|p| serde_json::from_str(p.get()).ok());
        let uri = params
            .as_ref()
            .and_then(|p| p.get("uri").and_then(Value::as_str).map(str::to_owned));
        let (Some(params), Some(uri)) = (params, uri) else {
            return Verdict::Reply(build::error_response(
                Some(id),
                toolgate_mcp::INVALID_PARAMS,
                "resources/read needs a `uri`",
            ));
        };
        if let Some(abilities) = ClientAbilities::from_request_meta(&params) {
            lock(&self.inner.state).client = abilities;
        }
        let ruling = lock(&self.inner.backend).decide_resource(self.server(), &uri, now_ms());
        let args = json!({ "uri": uri });
        let call = Call {
            server: self.server(),
            tool: RESOURCES_READ,
            arguments: &args,
        };
        let on_allow = Watched::Resource {
            uri: uri.clone(),
            request_id: request_id.clone(),
            started,
        };
        let retry = approval::retry_of(&params);
        match (ruling.effect, retry) {
            (Effect::Deny, _) => {
                self.deny_as_it_arrives(id, request_id, RESOURCES_READ.to_owned(), args, ruling)
            }
            (Effect::Allow, retry) => {
                if let Err(why) = self.audit(self.inner.decision_event(
                    &request_id,
                    &call,
                    &ruling,
                    Effect::Allow,
                )) {
                    return self.deny_reply(id, RESOURCES_READ, &why, "audit", None);
                }
                match retry {
                    Some(_) => self.forward_stripped(id, RESOURCES_READ, &params, on_allow),
                    None => Verdict::Watch(self.watch(on_allow)),
                }
            }
            // A resource read that is asked about is asked through the same channels as
            // a tool call (elicitation, input_required, broker, terminal).
            (Effect::Ask, Some(retry)) => self.on_retry(
                id,
                &request_id,
                &call,
                &ruling,
                Retried {
                    params: &params,
                    method: RESOURCES_READ,
                    retry: &retry,
                },
                on_allow,
            ),
            (Effect::Ask, None) => self.ask(id, &request_id, &call, ruling, on_allow, proxy),
        }
    }

    /// A deny reply for a request, audited. If even the audit fails, the deny stands.
    pub(super) fn deny_reply(
        &self,
        id: &RawValue,
        tool: &str,
        reason: &str,
        contract: &str,
        rule: Option<&str>,
    ) -> Verdict {
        if tool == RESOURCES_READ {
            // Not a tool call: a JSON-RPC error is the only denial a client understands.
            let message = format!("toolgate blocked resources/read: {reason}");
            return Verdict::Reply(build::error_response(
                Some(id),
                toolgate_mcp::INVALID_REQUEST,
                &message,
            ));
        }
        let blocked = Blocked {
            tool,
            reason,
            contract,
            rule,
        };
        Verdict::Reply(blocked.response(id))
    }
}
