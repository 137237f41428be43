//! Asking a person about a call: the route (the client's elicitation or `input_required`,
//! the broker, the terminal), the question, and what the answer does.

#[allow(unused_imports, reason = "the enforcer's imports, shared by its parts")]
use super::*;

/// Asks the client with `elicitation/create`; a timeout or any failure is a deny.
pub(super) async fn ask_client(
    proxy: &ProxyHandle,
    request_id: &str,
    prompt: &Question,
    timeout: Duration,
) -> Answer {
    let Some(params) = raw_value(&elicitation_params(prompt)) else {
        return Answer::Deny("internal error building the prompt".to_owned());
    };
    match tokio::time::timeout(
        timeout,
        proxy.request_client_as(request_id, "elicitation/create", Some(&params)),
    )
    .await
    {
        Err(_) => Answer::Deny(format!("no answer within {} s", timeout.as_secs())),
        Ok(Err(e)) => Answer::Deny(format!("the approval channel is down: {e}")),
        Ok(Ok(frame)) => {
            let response: Value = serde_json::from_slice(&frame).unwrap_or(Value::Null);
            match response.get("result") {
                Some(result) => parse_elicitation_result(result),
                None => Answer::Deny(format!(
                    "the client could not ask: {}",
                    response
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("malformed response")
                )),
            }
        }
    }
}

impl Enforcer {
    pub(super) fn ask(
        &self,
        id: &RawValue,
        request_id: &str,
        call: &Call<'_>,
        ruling: Ruling,
        on_allow: Watched,
        proxy: &ProxyHandle,
    ) -> Verdict {
        let settings = &self.inner.settings;
        let client = lock(&self.inner.state).client;
        let broker = settings.broker.as_ref().filter(|b| b.available()).cloned();
        let tty = settings.tty.as_ref().filter(|t| t.available()).cloned();
        let route = match approval::choose_route(
            settings.approval,
            client,
            broker.is_some(),
            tty.is_some(),
        ) {
            Ok(route) => route,
            Err(no_way) => return self.finish_deny(id, request_id, call, &ruling, Some(&no_way)),
        };
        let mut asked = self
            .inner
            .decision_event(request_id, call, &ruling, Effect::Ask);
        asked.reason = Some(format!("{} (asking via {route:?})", ruling.reason));
        if let Err(why) = self.audit(asked) {
            return self.deny_reply(id, call.tool, &why, "audit", None);
        }
        if route == Route::InputRequired {
            let state = match self.inner.sealer.seal(
                &call_digest(call.server, call.tool, call.arguments),
                approval::INPUT_KEY,
                now_ms(),
                u64::try_from(settings.approval_timeout.as_millis()).unwrap_or(u64::MAX),
            ) {
                Ok(s) => s,
                Err(why) => {
                    return self.finish_deny(id, request_id, call, &ruling, Some(&why.to_string()));
                }
            };
            return Verdict::Reply(result_bytes(
                id,
                &input_required_result(&ruling.prompt, &state),
            ));
        }
        let Some(key) = IdKey::from_raw(id) else {
            return self.finish_deny(
                id,
                request_id,
                call,
                &ruling,
                Some("the request id is unusable"),
            );
        };
        let (cancel_tx, cancel_rx) = tokio::sync::oneshot::channel();
        lock(&self.inner.state)
            .parked
            .insert(key.clone(), cancel_tx);
        let this = self.clone();
        let proxy = proxy.clone();
        let id: Box<RawValue> = id.to_owned();
        let request_id = request_id.to_owned();
        let tool = call.tool.to_owned();
        let arguments = call.arguments.clone();
        let timeout = settings.approval_timeout;
        // The id of the `elicitation/create` toolgate sends, so it can be withdrawn.
        let elicitation_id = proxy.new_origin_id();
        let channel = match route {
            Route::Broker => broker,
            Route::Tty => tty,
            _ => None,
        };
        Verdict::Park(Box::pin(async move {
            let how = match route {
                Route::Broker => ApprovalHow::Broker,
                Route::Tty => ApprovalHow::Tty,
                _ => ApprovalHow::Client,
            };
            let asking = async {
                match &channel {
                    Some(chan) => {
                        tracing::debug!("asking on the {} channel", chan.name());
                        chan.ask(&ruling.prompt, timeout).await
                    }
                    None => ask_client(&proxy, &elicitation_id, &ruling.prompt, timeout).await,
                }
            };
            let outcome = tokio::select! {
                answer = asking => Some(answer),
                _ = cancel_rx => None,
            };
            lock(&this.inner.state).parked.remove(&key);
            if channel.is_none() {
                // A prompt nobody waits for any more (cancelled, timed out) is withdrawn from
                // the client; after an answer it is no longer outstanding and nothing is sent.
                let why = match &outcome {
                    None => "the call awaiting this approval was cancelled",
                    Some(_) => "toolgate no longer waits for this answer",
                };
                proxy.withdraw_client_request(&elicitation_id, why).await;
            }
            let call = Call {
                server: this.server(),
                tool: &tool,
                arguments: &arguments,
            };
            let Some(answer) = outcome else {
                let mut ev = this
                    .inner
                    .decision_event(&request_id, &call, &ruling, Effect::Deny);
                ev.kind = AuditKind::Cancelled;
                ev.reason =
                    Some("the client cancelled the call while it awaited approval".to_owned());
                let _ = this.audit(ev);
                // A cancelled request gets no response (MCP: the receiver stops processing
                // and sends nothing); the relay forgets it.
                return Verdict::Withdraw;
            };
            match this.conclude(&call, &ruling, &request_id, &answer, how) {
                Ok(()) => Verdict::Watch(this.watch(on_allow)),
                Err(why) => this.finish_deny(&id, &request_id, &call, &ruling, Some(&why)),
            }
        }))
    }

    /// Records the human's answer; `Ok` means forward, `Err(reason)` deny.
    pub(super) fn conclude(
        &self,
        call: &Call<'_>,
        ruling: &Ruling,
        request_id: &str,
        answer: &Answer,
        how: ApprovalHow,
    ) -> Result<(), String> {
        let scope = match answer {
            Answer::AllowOnce => Scope::Once,
            Answer::AllowSession => Scope::Session,
            Answer::Deny(why) => return Err(why.clone()),
        };
        lock(&self.inner.backend).approve(call, ruling, scope);
        *lock(&self.inner.last_listing) = None;
        if scope == Scope::Session && ruling.contract == "pinning" {
            self.persist_pins();
        }
        let mut ev = self
            .inner
            .decision_event(request_id, call, ruling, Effect::Allow);
        ev.kind = AuditKind::Approval;
        ev.approval = Some(Approval {
            how,
            scope: match scope {
                Scope::Once => ApprovalScope::Once,
                Scope::Session => ApprovalScope::Session,
            },
        });
        self.audit(ev)
    }
}
