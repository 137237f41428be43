//! A client hook's event at the broker: decided with the policy it keeps compiled and the
//! agent session's state, recorded, and what it teaches the session shared.

#[allow(unused_imports, reason = "the daemon's imports, shared by its parts")]
use super::*;
use crate::hooks::PolicyAt;

/// Reads a hook's one event and decides it: a verdict, or an error that the hook turns into
/// a deny.
pub(super) async fn hook_conn(
    shared: &Arc<Daemon>,
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    session: String,
    pid: u32,
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
    let (policy, policy_sha256, workspace, audit, event, hold_ms) =
        match serde_json::from_slice::<ToBroker>(&line) {
            Ok(ToBroker::Hook {
                policy,
                policy_sha256,
                workspace,
                audit,
                event,
                hold_ms,
            }) => (policy, policy_sha256, workspace, audit, event, hold_ms),
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
    let verdict = shared.lock().hook(
        &session,
        policy.as_deref().map(|path| PolicyAt {
            path: std::path::Path::new(path),
            sha256: policy_sha256.as_deref(),
        }),
        std::path::Path::new(&workspace),
        &audit,
        event,
    );
    let (decision, reason) = match (verdict.decision, verdict.held, hold_ms) {
        (HookEffect::Ask, Some(held), Some(wait_ms)) => {
            hold(shared, session, pid, held, audit, &verdict.reason, wait_ms).await
        }
        (decision, _, _) => (decision, verdict.reason),
    };
    FromBroker::Verdict {
        decision,
        reason: shortened(reason),
    }
}

/// The longest reason sent to a hook: one that quotes a huge command is cut (the verdict's
/// line must stay within the protocol's bound, or the hook would deny with "no answer").
const MAX_REASON: usize = 16 * 1024;

fn shortened(mut reason: String) -> String {
    if reason.len() > MAX_REASON {
        let mut cut = MAX_REASON;
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        reason.truncate(cut);
        reason.push_str(" … (cut)");
    }
    reason
}

/// A hook's verdict at the broker; for an ask, what answering it grants.
pub(super) struct HookVerdict {
    pub(super) decision: HookEffect,
    pub(super) reason: String,
    pub(super) held: Option<Box<Held>>,
}

impl From<(HookEffect, String)> for HookVerdict {
    fn from((decision, reason): (HookEffect, String)) -> HookVerdict {
        HookVerdict {
            decision,
            reason,
            held: None,
        }
    }
}

/// How long an ask a client cannot show stays in `toolgate approvals`.
pub(super) const HELD_MS: u64 = 10 * 60 * 1000;
/// Asks held at once per agent session, and in all.
const MAX_HELD_PER_SESSION: usize = 32;
const MAX_HELD: usize = 128;
/// The largest call (its arguments as JSON) held for `toolgate approvals`.
const MAX_HELD_ARGUMENTS: usize = 256 * 1024;
/// A wait shorter than this is not worth a person's attention: the ask is only held.
const MIN_WAIT_MS: u64 = 500;

/// An ask of a client that cannot ask (`hold_ms`): put in `toolgate approvals`, where a person
/// may answer it while the hook waits (up to `wait_ms`, when anyone watches the queue) or
/// later (for [`HELD_MS`]), which then allows the same call when the agent makes it again.
/// The verdict: allow or deny when answered in time; otherwise still ask, with the reason
/// saying where it waits (the client's adapter turns that into its deny).
async fn hold(
    shared: &Arc<Daemon>,
    session: String,
    pid: u32,
    held: Box<Held>,
    audit: std::path::PathBuf,
    reason: &str,
    wait_ms: u64,
) -> (HookEffect, String) {
    let (tx, mut rx) = tokio::sync::oneshot::channel::<Choice>();
    let (id, watched) = {
        let mut st = shared.lock();
        match st.hold(session, pid, held, audit, tx) {
            Ok((id, fresh)) => {
                if fresh {
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(HELD_MS)).await;
                        shared.lock().withdraw(
                            id,
                            Withdrawal::Expired,
                            "no decision in `toolgate approvals` in time",
                        );
                    });
                }
                (id, st.count(Role::Approver) > 0)
            }
            Err(why) => return (HookEffect::Ask, format!("{why}; {reason}")),
        }
    };
    let mut answer = None;
    if watched && wait_ms >= MIN_WAIT_MS {
        let wait = Duration::from_millis(wait_ms.min(MAX_TIMEOUT_MS));
        if let Ok(Ok(choice)) = tokio::time::timeout(wait, &mut rx).await {
            answer = Some(choice);
        }
    }
    // An answer that came as the wait ended is still this call's (else it becomes a grant
    // for the next such call: `Decide` sees this end closed).
    rx.close();
    if let Some(choice) = answer.or_else(|| rx.try_recv().ok()) {
        return match choice {
            Choice::Deny => (
                HookEffect::Deny,
                format!("denied in `toolgate approvals`: {reason}"),
            ),
            Choice::AllowOnce => (
                HookEffect::Allow,
                format!("allowed once in `toolgate approvals`; without that: {reason}"),
            ),
            Choice::AllowSession => (
                HookEffect::Allow,
                format!("allowed for this session in `toolgate approvals`; without that: {reason}"),
            ),
        };
    }
    let minutes = HELD_MS / 60_000;
    (
        HookEffect::Ask,
        format!("{reason}; it waits in `toolgate approvals` as request {id} for {minutes} min"),
    )
}

impl BrokerState {
    /// Puts a hook's ask in the queue (`session`'s hook `pid` waits with `waiter`), or finds
    /// the same call's ask already there. Returns its id, and whether it is new.
    fn hold(
        &mut self,
        session: String,
        pid: u32,
        held: Box<Held>,
        audit: std::path::PathBuf,
        waiter: tokio::sync::oneshot::Sender<Choice>,
    ) -> Result<(u64, bool), String> {
        let (mut mine, mut all) = (0, 0);
        for (id, entry) in &mut self.pending {
            if let Asker::Hook(h) = &mut entry.asker {
                all += 1;
                if h.session != session {
                    continue;
                }
                if h.held.call == held.call {
                    h.waiter = Some(waiter);
                    return Ok((*id, false));
                }
                mine += 1;
            }
        }
        if mine >= MAX_HELD_PER_SESSION || all >= MAX_HELD {
            return Err(format!(
                "{} asks wait in `toolgate approvals` already: answer those first",
                if mine >= MAX_HELD_PER_SESSION {
                    mine
                } else {
                    all
                }
            ));
        }
        if held.argument_bytes() > MAX_HELD_ARGUMENTS {
            return Err(format!(
                "a call whose arguments pass {} KiB is not kept for `toolgate approvals`",
                MAX_HELD_ARGUMENTS / 1024
            ));
        }
        let question = toolgate_runtime::approval::question::question_of(&held.question);
        question.validate()?;
        let asker = Asker::Hook(Box::new(HeldAsk {
            session: session.clone(),
            held,
            audit,
            waiter: Some(waiter),
        }));
        let id = self.enqueue(question, Some(session), pid, HELD_MS, asker);
        Ok((id, true))
    }

    /// A person's answer to a held ask: to the hook if it still waits; else (and for "allow
    /// for this session" always) a grant to the agent session's hooks. Recorded in the
    /// session's audit log as the ask's approval.
    pub(super) fn answer_held(&mut self, ask: HeldAsk, decision: Choice) {
        let HeldAsk {
            session,
            held,
            audit,
            waiter,
        } = ask;
        let live = waiter.is_some_and(|w| w.send(decision).is_ok());
        let grants = decision == Choice::AllowSession || (decision == Choice::AllowOnce && !live);
        if grants
            && let Some(hook) = self
                .sessions
                .get_mut(&session)
                .and_then(|s| s.hook.as_mut())
        {
            hook.grant(&held, decision);
        }
        let mut event = held.event.clone();
        event.kind = toolgate_audit::Kind::Approval;
        event.session = Some(session);
        let scope = match decision {
            Choice::AllowOnce => Some(toolgate_audit::ApprovalScope::Once),
            Choice::AllowSession => Some(toolgate_audit::ApprovalScope::Session),
            Choice::Deny => None,
        };
        event.effect = Some(if scope.is_some() { "allow" } else { "deny" }.to_owned());
        event.approval = scope.map(|scope| toolgate_audit::Approval {
            how: toolgate_audit::ApprovalHow::Broker,
            scope,
        });
        if let Err(why) = self.audits.record(&audit, &event) {
            tracing::error!("{why}");
        }
    }

    /// Decides (or records) one hook event of the agent session `key`.
    pub(super) fn hook(
        &mut self,
        key: &str,
        policy: Option<PolicyAt<'_>>,
        workspace: &std::path::Path,
        audit: &std::path::Path,
        event: HookEvent,
    ) -> HookVerdict {
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
            )
            .into();
        }
        self.hook_decide(key, policy, workspace, audit, event)
    }

    /// [`BrokerState::hook`] for an event no proxy of the session takes care of.
    pub(super) fn hook_decide(
        &mut self,
        key: &str,
        policy: Option<PolicyAt<'_>>,
        workspace: &std::path::Path,
        audit: &std::path::Path,
        event: HookEvent,
    ) -> HookVerdict {
        let engine = match self.policies.get(policy, workspace, audit) {
            Ok(engine) => engine,
            Err(reason) => return (HookEffect::Deny, reason).into(),
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
            return (HookEffect::Deny, why).into();
        }
        let Some(hook) = self
            .sessions
            .get_mut(key)
            .and_then(|shared| shared.hook.as_mut())
        else {
            return (
                HookEffect::Deny,
                "internal error: the agent session has no hook state".to_owned(),
            )
                .into();
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
    ) -> HookVerdict {
        let engine = engine.as_ref();
        let Some(hook) = self.sessions.get_mut(key).and_then(|s| s.hook.as_mut()) else {
            return (
                HookEffect::Deny,
                "internal error: the agent session has no hook state".to_owned(),
            )
                .into();
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
                    return (HookEffect::Deny, reason).into();
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
                        return (HookEffect::Deny, why).into();
                    }
                }
                // What the call's output taints must outlive the broker, or the call waits.
                if let Err(why) = self.share_from_hook(key, tokens) {
                    return (HookEffect::Deny, why).into();
                }
                HookVerdict {
                    decision: ruling.decision,
                    reason: ruling.reason,
                    held: ruling.held,
                }
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
                    .into()
            }
            HookEvent::Prompt {
                text,
                transcript,
                conversation,
            } => {
                let (fresh, waiting) = hook.vouch(
                    &text,
                    transcript.as_deref(),
                    conversation.as_deref(),
                    now_ms(),
                );
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
                (HookEffect::Abstain, reason).into()
            }
            HookEvent::SessionStart {} => {
                (HookEffect::Abstain, "joined the agent session".to_owned()).into()
            }
        }
    }
}
