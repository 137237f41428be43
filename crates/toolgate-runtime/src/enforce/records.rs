//! The audit records the enforcer writes: a decision before anything is forwarded, a result
//! right after it is delivered, a denial's after its answer (deferred records).

#[allow(unused_imports, reason = "the enforcer's imports, shared by its parts")]
use super::*;

/// A record kept off the latency path.
pub(super) enum Deferred {
    /// A result's (its hash is computed when it is written; large results go to the
    /// [`recorder`] thread instead), or any record already built.
    Record {
        event: Event,
        result: Option<ResultText>,
    },
    /// A denial's, built when it is written: the client has its answer by then.
    Denial(Denial),
}

/// What the record of a denied call is built from.
pub(super) struct Denial {
    pub(super) request_id: String,
    pub(super) tool: String,
    pub(super) arguments: Value,
    pub(super) ruling: Ruling,
}

/// A result's JSON text, exactly as the server sent it: shared by its audit record and the
/// taint index, both done after the result is delivered (nothing parses it before).
#[derive(Clone)]
pub(super) struct ResultText {
    /// A part of the frame it came in (not a copy).
    pub(super) text: Bytes,
    /// A `tools/call` result: its record's `isError` is read from the text.
    pub(super) tool_call: bool,
}

/// The `isError` of a `tools/call` result's JSON text: its (last) top-level `isError` if
/// that is a boolean, else false. Other members are skipped, not built.
pub(super) fn is_error_of(result: &[u8]) -> bool {
    pub(super) struct Flag(Option<bool>);
    impl<'de> serde::Deserialize<'de> for Flag {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Flag, D::Error> {
            struct Members;
            impl<'de> serde::de::Visitor<'de> for Members {
                type Value = Flag;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a result object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Flag, A::Error> {
                    let mut flag = None;
                    while let Some(name) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                        if name == "isError" {
                            flag = map.next_value::<Value>()?.as_bool();
                        } else {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                    Ok(Flag(flag))
                }
            }
            d.deserialize_map(Members)
        }
    }
    serde_json::from_slice::<Flag>(result)
        .ok()
        .and_then(|f| f.0)
        .unwrap_or(false)
}

/// Completes a result record off the latency path: the canonical SHA-256 of the result,
/// computed from the JSON text the server sent (no value tree; the same hash as
/// [`canonical_sha256`] of its value), the `isError` of a `tools/call` result, and with
/// `--audit-raw` the result itself.
pub(super) fn add_result(event: &mut Event, result: &ResultText, keep_raw: bool) {
    let ResultText {
        text: result,
        tool_call,
    } = result;
    if *tool_call {
        event.is_error = Some(is_error_of(result));
    }
    event.result_sha256 = Some(
        toolgate_audit::canonical_sha256_of_json(result)
            .unwrap_or_else(|_| hex::encode(Sha256::digest(b""))),
    );
    if keep_raw {
        event.raw = Some(toolgate_audit::Raw {
            arguments: None,
            result: serde_json::from_slice(result).ok(),
        });
    }
}

pub(super) fn result_bytes(id: &RawValue, result: &Value) -> Vec<u8> {
    match raw_value(result) {
        Some(raw) => build::result_response(id, &raw),
        None => build::tool_error_result(id, "toolgate blocked this call: internal error"),
    }
}

impl Enforcement {
    /// Fills in what every record of this proxy carries: the session and the server.
    pub(super) fn stamp(&self, event: &mut Event) {
        event.session = Some(self.settings.session_id.clone());
        if event.user.is_none() {
            event.user = self.settings.user.clone();
        }
        if event.replica.is_none() {
            event.replica = self.settings.replica.clone();
        }
        if let Some(observe) = &self.settings.observer {
            observe(event);
        }
        if event.server.is_none() {
            event.server = self.settings.server.clone();
        }
        if event.upstream.is_none() {
            event.upstream = self.settings.upstream.clone();
        }
    }

    /// Writes one audit record; `Err` means the call must be denied.
    pub(super) fn write_event(&self, mut event: Event) -> Result<(), String> {
        if let Some(why) = &self.settings.audit_error {
            return Err(why.clone());
        }
        let Some(writer) = &self.settings.audit else {
            return Ok(());
        };
        self.stamp(&mut event);
        writer.append(&event).map(|_| ()).map_err(|e| {
            format!("the audit log cannot be written ({e}); toolgate denies calls it cannot record")
        })
    }

    /// Writes several records in one append; `Err` means none of them was written.
    pub(super) fn write_events(&self, events: &mut [Event]) -> Result<(), String> {
        if let Some(why) = &self.settings.audit_error {
            return Err(why.clone());
        }
        let Some(writer) = &self.settings.audit else {
            return Ok(());
        };
        for event in events.iter_mut() {
            self.stamp(event);
        }
        writer.append_all(events).map(|_| ()).map_err(|e| {
            format!("the audit log cannot be written ({e}); toolgate denies calls it cannot record")
        })
    }

    /// The record of a decision (`reason` is the ruling's).
    pub(super) fn decision_event(
        &self,
        request_id: &str,
        call: &Call<'_>,
        ruling: &Ruling,
        effect: Effect,
    ) -> Event {
        let mut e = event::decision_event(
            call.tool,
            call.arguments,
            ruling.decision.as_ref().map(|d| &d.action),
            effect,
            &ruling.contract,
            ruling.rule.clone(),
            &ruling.reason,
        );
        e.request_id = Some(request_id.to_owned());
        e.fingerprint = ruling.fingerprint.clone();
        if self.settings.audit_raw {
            e.raw = Some(toolgate_audit::Raw {
                arguments: Some(call.arguments.clone()),
                result: None,
            });
        }
        e
    }

    /// Writes the deferred records, oldest first, in one append.
    pub(super) fn write_deferred(&self) {
        let pending = std::mem::take(&mut *lock(&self.deferred));
        if pending.is_empty() || self.settings.audit.is_none() {
            return;
        }
        let mut events: Vec<Event> = pending
            .into_iter()
            .map(|deferred| match deferred {
                Deferred::Record { mut event, result } => {
                    if let Some(result) = &result {
                        add_result(&mut event, result, self.settings.audit_raw);
                    }
                    event
                }
                Deferred::Denial(denial) => {
                    let Denial {
                        request_id,
                        tool,
                        arguments,
                        ruling,
                    } = denial;
                    let call = Call {
                        server: self.settings.server.as_deref(),
                        tool: &tool,
                        arguments: &arguments,
                    };
                    self.decision_event(&request_id, &call, &ruling, Effect::Deny)
                }
            })
            .collect();
        if let Err(why) = self.write_events(&mut events) {
            for event in &events {
                tracing::warn!(
                    "{} `{}` (request {}) reached the client but was not audited: {why}",
                    match event.kind {
                        AuditKind::Decision => "the denial of",
                        _ => "the result of",
                    },
                    event.tool.as_deref().unwrap_or("?"),
                    event.request_id.as_deref().unwrap_or("?")
                );
            }
        }
    }
}

impl Enforcer {
    /// Writes one audit record (after any deferred ones, so the log keeps the order of
    /// events); `Err` means the call must be denied.
    pub(super) fn audit(&self, event: Event) -> Result<(), String> {
        self.inner.write_deferred();
        self.inner.write_event(event)
    }

    /// Writes several records at once (one lock, one write): e.g. the pins of a listing.
    pub(super) fn audit_all(&self, mut events: Vec<Event>) -> Result<(), String> {
        if events.is_empty() {
            return Ok(());
        }
        self.inner.write_deferred();
        self.inner.write_events(&mut events)
    }

    /// Queues a record; written by [`Interceptor::after_delivery`] (or before any later
    /// record, whichever comes first).
    pub(super) fn defer(&self, event: Event, result: Option<ResultText>) {
        lock(&self.inner.deferred).push(Deferred::Record { event, result });
    }

    /// Starts the record of a result (its JSON text as the server sent it): a large one
    /// goes to the recorder thread at once (it hashes while the result is delivered and
    /// indexed), a small one is written after delivery.
    pub(super) fn record_result(&self, mut event: Event, result: ResultText) {
        let large = result.text.len() >= recorder::LARGE_RESULT;
        let settings = &self.inner.settings;
        if let Some(writer) = &settings.audit
            && large
            && settings.audit_error.is_none()
        {
            self.inner.stamp(&mut event);
            let job = Box::new(recorder::Job {
                event,
                result,
                raw: settings.audit_raw,
                writer: Arc::clone(writer),
            });
            match self.inner.recorder.submit(job) {
                Ok(()) => return,
                // No thread, or its queue is full: written after delivery like any other.
                Err(job) => {
                    let recorder::Job { event, result, .. } = *job;
                    self.defer(event, Some(result));
                    return;
                }
            }
        }
        self.defer(event, Some(result));
    }
}
