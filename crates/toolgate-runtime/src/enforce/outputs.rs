//! What comes back: results of `tools/call`, `resources/read` and `prompts/get`, delivered
//! first and then fed to the taint index. A `tools/call` result of a tool whose policy redacts
//! its output has its secrets of a known shape replaced before it is delivered.

#[allow(unused_imports, reason = "the enforcer's imports, shared by its parts")]
use super::*;

/// How a result feeds the taint index.
#[derive(Debug, Clone, Copy)]
pub(super) enum TaintAs {
    ToolResult,
    Resource,
    Prompt,
}

/// A result whose tokens go into the taint index before anything else is decided (see
/// [`Enforcement::feed_taint`]).
pub(super) struct TaintLater {
    pub(super) tool: String,
    pub(super) kind: TaintAs,
    /// The secret file the call read, if any.
    pub(super) secret_file: Option<String>,
    /// The result's JSON text.
    pub(super) result: Bytes,
}

/// A `resources/read` result shaped as a tool result (embedded resources), so the taint
/// index reads its text the way it reads tool output.
pub(super) fn resource_as_tool_result(result: &Value) -> Value {
    let items: Vec<Value> = result
        .get("contents")
        .and_then(Value::as_array)
        .map(|contents| {
            contents
                .iter()
                .map(|c| json!({"type": "resource", "resource": c}))
                .collect()
        })
        .unwrap_or_default();
    json!({ "content": items })
}

/// A `prompts/get` result shaped as a tool result: every message's content item.
pub(super) fn prompt_as_tool_result(result: &Value) -> Value {
    let mut items: Vec<Value> = result
        .get("messages")
        .and_then(Value::as_array)
        .map(|messages| {
            messages
                .iter()
                .filter_map(|m| m.get("content").cloned())
                .collect()
        })
        .unwrap_or_default();
    if let Some(description) = result.get("description").and_then(Value::as_str) {
        items.push(json!({"type": "text", "text": description}));
    }
    json!({ "content": items })
}

/// A `tools/call` response whose result had secrets of a known shape replaced.
pub(super) struct Redacted {
    /// The response to deliver instead (the same `id`).
    pub(super) frame: Vec<u8>,
    /// Its result's JSON text.
    pub(super) result: Bytes,
    /// Which shapes were replaced, how many of each.
    pub(super) redactions: Vec<toolgate_audit::Redaction>,
}

/// The response with `id` to deliver instead of the result `text`, with its secrets of a known
/// shape replaced ([`toolgate_policy::secret_shapes::redact_result`]); `None` when it had
/// none (or is not a JSON object): then the frame is forwarded as it came.
pub(super) fn redacted_response(id: &RawValue, text: &[u8]) -> Option<Redacted> {
    let mut result: Value = serde_json::from_slice(text).ok()?;
    if !result.is_object() {
        return None;
    }
    let found = toolgate_policy::secret_shapes::redact_result(&mut result);
    if found.is_empty() {
        return None;
    }
    let raw = raw_value(&result)?;
    let frame = build::result_response(id, &raw);
    let redactions = found
        .counts
        .into_iter()
        .map(|(shape, count)| toolgate_audit::Redaction {
            shape: shape.to_owned(),
            count,
        })
        .collect();
    Some(Redacted {
        frame,
        result: Bytes::copy_from_slice(raw.get().as_bytes()),
        redactions,
    })
}

impl Enforcement {
    /// Feeds the results received so far into the taint index, oldest first.
    ///
    /// A result is indexed right after it is delivered, off its own latency path, and in
    /// any case before toolgate decides anything the client sends after it: the relay runs
    /// on one thread and calls [`Interceptor::after_delivery`] before it reads the next
    /// frame, and [`Enforcer::on_client_message`] feeds whatever is still pending first.
    pub(super) fn feed_taint(&self) {
        let pending = std::mem::take(&mut *lock(&self.pending_taint));
        if pending.is_empty() {
            return;
        }
        let server = self.settings.server.as_deref();
        let mut backend = lock(&self.backend);
        for TaintLater {
            tool,
            kind,
            secret_file,
            result,
        } in pending
        {
            // The text is JSON (its frame was parsed), but a value serde_json cannot hold
            // (a number like `1e400`) must not keep the output out of the taint index:
            // then every token of the whole text is recorded, as for a text result.
            let (result, kind) = match serde_json::from_slice::<Value>(&result) {
                Ok(value) => (value, kind),
                Err(_) => (
                    Value::String(String::from_utf8_lossy(&result).into_owned()),
                    TaintAs::ToolResult,
                ),
            };
            match kind {
                TaintAs::ToolResult => {
                    backend.record_output(server, &tool, &result, secret_file.as_deref());
                }
                TaintAs::Resource => {
                    backend.record_output(server, &tool, &resource_as_tool_result(&result), None);
                }
                TaintAs::Prompt => {
                    backend.record_output(server, &tool, &prompt_as_tool_result(&result), None);
                }
            }
        }
    }
}

impl Enforcer {
    /// Queues a result for the taint index (see [`Enforcement::feed_taint`]).
    pub(super) fn taint_later(
        &self,
        tool: String,
        kind: TaintAs,
        result: Bytes,
        secret_file: Option<String>,
    ) {
        lock(&self.inner.pending_taint).push(TaintLater {
            tool,
            kind,
            secret_file,
            result,
        });
    }

    pub(super) fn watch(&self, w: Watched) -> u64 {
        let mut st = lock(&self.inner.state);
        st.next_tag = st.next_tag.wrapping_add(1);
        let tag = st.next_tag;
        st.watched.insert(tag, w);
        tag
    }

    pub(super) fn on_response(&self, tag: u64, message: &Message<'_>) -> Verdict {
        let Some(watched) = lock(&self.inner.state).watched.remove(&tag) else {
            return Verdict::Forward;
        };
        if let Watched::ToolsList { first } = watched {
            let verdict = match message.envelope.result {
                Some(result) => self.on_tools_list(first, result, message.raw),
                None => Verdict::Forward,
            };
            self.listing_ended(false);
            return verdict;
        }
        let Some(result_raw) = message.envelope.result else {
            // An error response: nothing to learn; audit tool-call errors.
            if let Watched::ToolCall {
                tool,
                request_id,
                fingerprint,
                started,
                ..
            } = watched
            {
                let mut ev = Event::new(AuditKind::Result);
                ev.request_id = Some(request_id);
                ev.tool = Some(tool);
                ev.fingerprint = fingerprint;
                ev.is_error = Some(true);
                ev.latency_us = Some(micros(started));
                self.defer(ev, None);
            }
            return Verdict::Forward;
        };
        // Nothing reads the result before it is delivered: its record (hash, `isError`)
        // and its taint are computed from the text afterwards, which stays where it came
        // (in the frame, shared, not copied).
        let text = part_of(message.frame, result_raw.get().as_bytes());
        match watched {
            // Handled above.
            Watched::ToolsList { .. } => Verdict::Forward,
            Watched::ToolCall {
                tool,
                request_id,
                fingerprint,
                started,
                secret_file,
                redact,
            } => {
                let mut ev = Event::new(AuditKind::Result);
                ev.request_id = Some(request_id);
                ev.tool = Some(tool.clone());
                ev.fingerprint = fingerprint;
                ev.latency_us = Some(micros(started));
                // Only a result that had a secret replaced is re-serialised; every other
                // frame passes byte for byte.
                let redacted = if redact {
                    message
                        .envelope
                        .id
                        .and_then(|id| redacted_response(id, &text))
                } else {
                    None
                };
                let (verdict, delivered) = match redacted {
                    Some(r) => {
                        ev.redactions = r.redactions;
                        (Verdict::Replace(r.frame), r.result)
                    }
                    None => (Verdict::Forward, text.clone()),
                };
                // A large result's record is hashed while the result is delivered and
                // taint-indexed. The record is of what the client received; the taint index
                // reads what the server sent.
                self.record_result(
                    ev,
                    ResultText {
                        text: delivered,
                        tool_call: true,
                    },
                );
                self.taint_later(tool, TaintAs::ToolResult, text, secret_file);
                verdict
            }
            Watched::Resource {
                uri,
                request_id,
                started,
            } => {
                let mut ev = Event::new(AuditKind::Result);
                ev.request_id = Some(request_id);
                ev.tool = Some("resources/read".to_owned());
                ev.resources = vec![uri];
                ev.latency_us = Some(micros(started));
                self.record_result(
                    ev,
                    ResultText {
                        text: text.clone(),
                        tool_call: false,
                    },
                );
                self.taint_later("resources/read".to_owned(), TaintAs::Resource, text, None);
                Verdict::Forward
            }
            Watched::Prompt { name } => {
                self.taint_later(format!("prompts/get:{name}"), TaintAs::Prompt, text, None);
                Verdict::Forward
            }
        }
    }
}
