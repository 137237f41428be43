//! A client hook's event at the broker: decided with the policy it keeps compiled and the
//! agent session's state, recorded, and what it teaches the session shared.

#[allow(unused_imports, reason = "the daemon's imports, shared by its parts")]
use super::*;

/// Reads a hook's one event and decides it: a verdict, or an error that the hook turns into
/// a deny.
pub(super) async fn hook_conn(
    shared: &Arc<Daemon>,
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    session: String,
) -> FromBroker {
    let line = match tokio::time::timeout(
        HOOK_TIMEOUT,
        proto::read_line_within(reader, proto::MAX_HOOK_LINE),
    )
    .await
    {
        Ok(Ok(Some(line))) => line,
        Ok(Ok(None)) => return error(ErrorCode::Invalid, "the hook sent no event"),
        Ok(Err(e)) => return error(ErrorCode::Invalid, e.to_string()),
        Err(_) => {
            return error(
                ErrorCode::Invalid,
                format!("the hook sent no event within {} s", HOOK_TIMEOUT.as_secs()),
            );
        }
    };
    let (policy, workspace, audit, event) = match serde_json::from_slice::<ToBroker>(&line) {
        Ok(ToBroker::Hook {
            policy,
            workspace,
            audit,
            event,
        }) => (policy, workspace, audit, event),
        Ok(_) => return error(ErrorCode::Invalid, "a hook may only send `hook`"),
        Err(e) => return error(ErrorCode::Invalid, format!("invalid hook event: {e}")),
    };
    if let Err(why) = event.validate() {
        return error(ErrorCode::Invalid, why);
    }
    let absolute = |p: &str| p.len() <= proto::MAX_PATH && p.starts_with('/');
    if !absolute(&workspace)
        || policy.as_deref().is_some_and(|p| !absolute(p))
        || audit.as_deref().is_some_and(|p| !absolute(p))
    {
        return error(
            ErrorCode::Invalid,
            format!(
                "the workspace and the policy must be absolute paths of at most {} bytes",
                proto::MAX_PATH
            ),
        );
    }
    let audit = match audit {
        Some(path) => std::path::PathBuf::from(path),
        None => paths::default_audit(std::path::Path::new(&workspace)),
    };
    let (decision, reason) = shared.lock().hook(
        &session,
        policy.as_deref().map(std::path::Path::new),
        std::path::Path::new(&workspace),
        &audit,
        event,
    );
    FromBroker::Verdict { decision, reason }
}

impl BrokerState {
    /// Decides (or records) one hook event of the agent session `key`.
    pub(super) fn hook(
        &mut self,
        key: &str,
        policy: Option<&std::path::Path>,
        workspace: &std::path::Path,
        audit: &std::path::Path,
        event: HookEvent,
    ) -> (HookEffect, String) {
        // An MCP tool of a server that a proxy of this session wraps is decided once, there;
        // its output is indexed there too (and shared with this session).
        let (HookEvent::Before {
            server: Some(server),
            tool,
            ..
        }
        | HookEvent::After {
            server: Some(server),
            tool,
            ..
        }) = &event
        else {
            return self.hook_decide(key, policy, workspace, audit, event);
        };
        if self.conns.values().any(|c| {
            c.role == Role::Proxy
                && c.session.as_deref() == Some(key)
                && c.server.as_deref() == Some(server.as_str())
        }) {
            // A prompt that waited for its transcript is confirmed by this event too: in a
            // session whose tools are all wrapped servers' it would otherwise never vouch.
            self.confirm_prompts(key);
            return (
                HookEffect::Abstain,
                format!(
                    "`{tool}` of `{server}` is decided by the `toolgate wrap` proxy of `{server}` in this session"
                ),
            );
        }
        self.hook_decide(key, policy, workspace, audit, event)
    }

    /// [`BrokerState::hook`] for an event no proxy of the session takes care of.
    pub(super) fn hook_decide(
        &mut self,
        key: &str,
        policy: Option<&std::path::Path>,
        workspace: &std::path::Path,
        audit: &std::path::Path,
        event: HookEvent,
    ) -> (HookEffect, String) {
        let engine = match self.policies.get(policy, workspace, audit) {
            Ok(engine) => engine,
            Err(reason) => return (HookEffect::Deny, reason),
        };
        let starts = matches!(event, HookEvent::SessionStart {});
        let vouch_key = self.vouch_key;
        let shared = self.session_named(key.to_owned());
        // A session whose client predates the store: a `SessionStart` says it is new; any
        // other event, that it ran before and what the store held of it is gone.
        let settled = (shared.standing == Standing::Suspect).then(|| {
            if starts {
                shared.standing = Standing::Whole;
                Saved::Started {}
            } else {
                tracing::warn!("agent session `{key}` ran before the broker's store was created: its state was lost, its sinks ask");
                shared.standing = Standing::Lost;
                Saved::Lost {}
            }
        });
        if shared.hook.is_none() {
            // The first hook of the session: it starts from what the proxies shared so far
            // (and, in a broker that started again, from what the store kept).
            let mut hook = HookSession::new(&engine, vouch_key);
            for t in shared.tokens.iter() {
                hook.import_token(t);
            }
            for d in shared.vouched.iter() {
                if let Some(d) = decode_digest(d) {
                    hook.import_digest(d);
                }
            }
            for (tool, at_ms) in &shared.hook_attempts {
                hook.import_attempt(tool, *at_ms);
            }
            shared.hook = Some(hook);
        }
        if shared.standing == Standing::Lost
            && let Some(hook) = shared.hook.as_mut()
        {
            hook.mark_state_lost(STATE_LOST);
        }
        if let Some(settled) = settled
            && let Err(why) = self.save(key, &[settled], &[])
        {
            return (HookEffect::Deny, why);
        }
        let Some(hook) = self
            .sessions
            .get_mut(key)
            .and_then(|shared| shared.hook.as_mut())
        else {
            return (
                HookEffect::Deny,
                "internal error: the agent session has no hook state".to_owned(),
            );
        };
        // Prompts that wait for their transcript: confirmed by any later event.
        if hook.has_pending() && !matches!(event, HookEvent::Prompt { .. }) {
            self.confirm_prompts(key);
        }
        self.hook_event(key, &engine, audit, event)
    }

    /// Vouches for the destinations of the session's prompts that waited for their
    /// transcript and are in it now, and shares them with the session's proxies.
    fn confirm_prompts(&mut self, key: &str) {
        let Some(hook) = self
            .sessions
            .get_mut(key)
            .and_then(|shared| shared.hook.as_mut())
            .filter(|hook| hook.has_pending())
        else {
            return;
        };
        let fresh: Vec<String> = hook.confirm(now_ms()).iter().map(hex::encode).collect();
        if !fresh.is_empty() {
            self.share_digests(key, fresh);
        }
    }

    /// [`BrokerState::hook_decide`] once the session's hook state exists.
    pub(super) fn hook_event(
        &mut self,
        key: &str,
        engine: &Arc<toolgate_policy::Engine>,
        audit: &std::path::Path,
        event: HookEvent,
    ) -> (HookEffect, String) {
        let engine = engine.as_ref();
        let Some(hook) = self.sessions.get_mut(key).and_then(|s| s.hook.as_mut()) else {
            return (
                HookEffect::Deny,
                "internal error: the agent session has no hook state".to_owned(),
            );
        };
        match event {
            HookEvent::Before {
                server,
                tool,
                arguments,
                output,
            } => {
                let counted_before = hook.calls(&tool);
                let now = now_ms();
                let mut ruling = hook.decide(engine, server.as_deref(), &tool, &arguments, now);
                // A counted budget attempt is written before the verdict goes out.
                let attempt = (hook.calls(&tool) > counted_before).then(|| Saved::Attempt {
                    pid: 0,
                    hook: true,
                    attempt: SharedAttempt {
                        server: server.clone(),
                        tool: tool.clone(),
                        at_ms: now,
                    },
                });
                let mut tokens = Vec::new();
                if let Some(output) = output.filter(|_| ruling.decision != HookEffect::Deny) {
                    tokens =
                        hook.record(engine, server.as_deref(), &tool, &output, Some(&arguments));
                }
                // No record, no call: a decision that cannot be written is a deny.
                ruling.event.session = Some(key.to_owned());
                if let Err(reason) = self.audits.record(audit, &ruling.event) {
                    return (HookEffect::Deny, reason);
                }
                if let Some(attempt) = attempt {
                    let shared = self.session_named(key.to_owned());
                    if let Saved::Attempt { attempt, .. } = &attempt {
                        shared
                            .hook_attempts
                            .push_back((attempt.tool.clone(), attempt.at_ms));
                        while shared.hook_attempts.len() > MAX_SESSION_ATTEMPTS {
                            shared.hook_attempts.pop_front();
                        }
                    }
                    if let Err(why) = self.save(key, &[attempt], &[]) {
                        return (HookEffect::Deny, why);
                    }
                }
                // What the call's output taints must outlive the broker, or the call waits.
                if let Err(why) = self.share_from_hook(key, tokens) {
                    return (HookEffect::Deny, why);
                }
                (ruling.decision, ruling.reason)
            }
            HookEvent::After {
                server,
                tool,
                output,
                arguments,
            } => {
                let tokens = hook.record(
                    engine,
                    server.as_deref(),
                    &tool,
                    &output,
                    arguments.as_ref(),
                );
                let n = tokens.len();
                // The output was delivered already: nothing to withhold; a restart would miss it.
                if let Err(why) = self.share_from_hook(key, tokens) {
                    tracing::error!("{why}");
                }
                (
                    HookEffect::Abstain,
                    format!("the output of `{tool}` was indexed ({n} new destinations)"),
                )
            }
            HookEvent::Prompt { text, transcript } => {
                let (fresh, waiting) = hook.vouch(&text, transcript.as_deref(), now_ms());
                drop(text);
                let fresh: Vec<String> = fresh.iter().map(hex::encode).collect();
                let n = fresh.len();
                self.share_digests(key, fresh);
                let reason = match waiting {
                    Ok(false) => {
                        format!("{n} destinations the user typed are vouched for in this session")
                    }
                    Ok(true) => "the prompt's destinations are vouched for once the prompt is in the client's transcript".to_owned(),
                    Err(why) => format!("the prompt vouches for nothing: {why}"),
                };
                (HookEffect::Abstain, reason)
            }
            HookEvent::SessionStart {} => {
                (HookEffect::Abstain, "joined the agent session".to_owned())
            }
        }
    }
}
