//! The policy side of enforcement: one session's engine, contracts and state behind a small
//! trait, so the interceptor stays about protocol and the policy crate stays pure.

use serde_json::Value;
use toolgate_policy::{
    Action, CallFacts, Contract, Decision, Effect, Engine, FsFacts, NormalizeContext, Operation,
    Part, PinState, Session, SessionLimits, SinkVerdict, TaintLimits, ToolCall, Vars, combine,
    normalize_url,
};

use crate::approval::Question;

/// One call to decide.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub server: Option<&'a str>,
    pub tool: &'a str,
    pub arguments: &'a Value,
}

/// A verdict with what the reply, the prompt and the audit need.
#[derive(Debug, Clone)]
pub struct Ruling {
    pub effect: Effect,
    pub contract: String,
    pub rule: Option<String>,
    pub reason: String,
    /// What to ask when `effect` is ask. An allow carries only the tool and the reason
    /// (see [`Backend::prompt`] for one that becomes an ask).
    pub prompt: Question,
    /// The engine's decision (absent when the decision path itself failed).
    pub decision: Option<Decision>,
    /// The tool's definition fingerprint at decision time.
    pub fingerprint: Option<String>,
}

impl Ruling {
    /// A deny produced by toolgate itself (an error on the decision path, a malformed call).
    pub fn error(tool: &str, reason: impl Into<String>) -> Ruling {
        let reason = reason.into();
        Ruling {
            effect: Effect::Deny,
            contract: "error".to_owned(),
            rule: None,
            prompt: Question::of_deny(None, tool, &reason),
            reason,
            decision: None,
            fingerprint: None,
        }
    }
}

/// What a `tools/list` page changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinChanges {
    pub added: Vec<String>,
    pub changed: Vec<(String, Vec<String>)>,
}

/// How long an approval lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Once,
    Session,
}

/// The policy operations the interceptor needs.
pub trait Backend: Send {
    /// Decides a `tools/call`. Never fails: an internal error is a deny.
    fn decide(&mut self, call: &Call<'_>, now_ms: u64) -> Ruling;
    /// Decides a `resources/read` of `uri` (file:// as fs.read, http(s):// as net.request).
    fn decide_resource(&mut self, server: Option<&str>, uri: &str, now_ms: u64) -> Ruling;
    /// Pins a `tools/list` listing. `complete` is false for a page followed by more: tools
    /// not (yet) seen are then kept as they are rather than treated as removed.
    fn pin_tools(&mut self, tools: Vec<Value>, complete: bool) -> PinChanges;
    /// Feeds a result (of a tool call, resource read or prompt) into the taint index;
    /// `secret_file`: the secret file the call read, whose values are fingerprinted.
    fn record_output(
        &mut self,
        server: Option<&str>,
        tool: &str,
        result: &Value,
        secret_file: Option<&str>,
    );
    /// Remembers a human's approval of an asked call.
    fn approve(&mut self, call: &Call<'_>, ruling: &Ruling, scope: Scope);
    /// The accepted tool definitions, to persist for the next run (pending changes excluded).
    fn pins_to_persist(&self) -> std::collections::BTreeMap<String, Value>;
    /// The full prompt of a ruling that was not an ask when decided (an allow that becomes
    /// one); for a ruling without a decision, the one it has.
    fn prompt(&self, call: &Call<'_>, ruling: &Ruling) -> Question {
        let _ = call;
        ruling.prompt.clone()
    }
    /// True when the policy forbids `tool` outright (its resolved contract has
    /// `max_calls: 0`): `tools/list` hides it from the client.
    fn forbidden_outright(&mut self, _tool: &str) -> bool {
        false
    }
    /// False while the server has not listed `tool` in this session (its definition is not
    /// pinned, changed or removed: nothing is known of it). A call to such a tool waits for
    /// a listing before it is decided.
    fn listed(&self, _tool: &str) -> bool {
        true
    }
    /// Whether `tool`'s contract has a budget: `None` without one, else `Some(window)` with
    /// the windowed budget's `(max, per_ms)` if any (what the gateway's store counts).
    fn budget_of(&mut self, _tool: &str) -> Option<Option<(u64, u64)>> {
        None
    }
    /// True when the policy redacts secrets of a known shape in `tool`'s results before the
    /// client sees them (`output: {redact: secrets}`, `redact_output: secrets`).
    fn redacts_output(&mut self, _tool: &str) -> bool {
        false
    }
    /// True once when another proxy of the agent session saw the server's tools change
    /// since this session last listed them.
    fn tools_changed_elsewhere(&mut self) -> bool {
        false
    }
}

/// The real filesystem, the same resolver `toolgate policy explain` uses (symlinks of the
/// existing prefix resolved, dangling links followed, the missing tail appended), so `wrap`,
/// `serve` and `explain` always agree on a path.
pub use crate::fsfacts::SoftFs as RealFs;

/// `f` with `call` as a [`ToolCall`] and the real filesystem as its [`NormalizeContext`].
fn on_disk<T>(
    engine: &Engine,
    call: (Option<&str>, &str, &Value),
    f: impl FnOnce(&ToolCall<'_>, &NormalizeContext<'_>) -> T,
) -> T {
    let (server, tool, arguments) = call;
    let vars = engine.vars();
    let ctx = NormalizeContext {
        workspace: &vars.workspace,
        home: &vars.home,
        fs: &RealFs,
    };
    let call = ToolCall {
        server,
        tool,
        arguments,
        definition: None,
    };
    f(&call, &ctx)
}

/// Decides a call (no tool definition of its own) on the real filesystem, with the
/// engine's workspace and home: what a hook and `serve`'s `check_verdict` ask. `builtin`:
/// the call is a client's own built-in tool (a hook event without a server).
pub fn decide_on_disk(
    engine: &Engine,
    session: &mut Session,
    call: (Option<&str>, &str, &Value),
    now_ms: u64,
    builtin: bool,
) -> Decision {
    let mut decision = on_disk(engine, call, |call, ctx| {
        engine.decide_as(call, session, ctx, now_ms, builtin)
    });
    crate::selfprotect::guard(&mut decision, &engine.vars().workspace);
    decision
}

/// The action of a call as [`decide_on_disk`] normalises it (the real filesystem), without
/// deciding it: what a hook's after-event read.
pub fn action_on_disk(
    engine: &Engine,
    session: &mut Session,
    call: (Option<&str>, &str, &Value),
) -> toolgate_policy::Action {
    on_disk(engine, call, |call, ctx| {
        engine.action_of(call, session, ctx)
    })
}

/// The real backend: the compiled policy and one session's state.
#[derive(Debug)]
pub struct EngineBackend {
    /// Shared by the sessions of a gateway (one compiled policy per server).
    engine: std::sync::Arc<Engine>,
    session: Session,
    vars: Vars,
    /// The agent session shared with other proxies (the broker, the gateway's store), if any.
    shared: Option<std::sync::Arc<dyn super::share::SessionShare>>,
    /// When the broker link was last woken to (re)connect.
    last_kick: Option<std::time::Instant>,
}

/// How often a decision may wake the broker link to (re)connect. Waking it on every call
/// cost each allowed call a task switch and a failed `stat` of the broker directory when no
/// broker runs; tokens to share wake it on their own (`BrokerChannel::share`).
const KICK_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

impl EngineBackend {
    /// Builds a backend over a compiled engine (whose `${workspace}`/`${home}` are canonical
    /// absolute paths) and the pins persisted by an earlier run.
    pub fn new(
        engine: impl Into<std::sync::Arc<Engine>>,
        taint: TaintLimits,
        persisted_pins: Vec<(String, Value)>,
    ) -> EngineBackend {
        let engine: std::sync::Arc<Engine> = engine.into();
        let vars = engine.vars().clone();
        let mut session = Session::new(SessionLimits::new(taint));
        session.load_persisted_pins(persisted_pins);
        EngineBackend {
            engine,
            session,
            vars,
            shared: None,
            last_kick: None,
        }
    }

    /// Shares this session's taint tokens, approvals and budget attempts with the other
    /// proxies of the same agent session (see [`super::share::SessionShare`]).
    pub fn with_shared(mut self, channel: std::sync::Arc<dyn super::share::SessionShare>) -> Self {
        self.shared = Some(channel);
        self
    }

    /// Feeds what the session's other proxies saw into the local taint index.
    fn import_shared(&mut self) {
        let Some(shared) = &self.shared else { return };
        let now = std::time::Instant::now();
        if self
            .last_kick
            .is_none_or(|last| now.saturating_duration_since(last) >= KICK_EVERY)
        {
            self.last_kick = Some(now);
            shared.kick();
        }
        for t in shared.take_tokens() {
            t.import_into(&mut self.session);
        }
        // Received, not recorded here: never shared back.
        drop(self.session.taint_mut().take_recorded());
        // Session approvals and budget attempts of the same server (see `broker::client`).
        for key in shared.take_approvals() {
            self.session.import_approval(&key);
        }
        for (tool, at_ms) in shared.take_attempts() {
            self.session.import_attempt(&tool, at_ms);
        }
        // Destinations the user typed in a prompt (client hooks of the same agent session),
        // digests under the broker's key.
        let vouched = shared.take_vouched();
        if !vouched.is_empty()
            && let Some(key) = shared.vouch_key()
        {
            self.session
                .set_vouch_key(toolgate_policy::VouchKey::new(key));
        }
        for digest in vouched {
            self.session.vouch_user_digest(digest);
        }
    }

    /// Shares a counted attempt of a budgeted tool with the session's other proxies: the
    /// decision has a budget result exactly when the tool's contract has a budget and the
    /// check reached it (no second contract lookup).
    fn share_attempt(&self, decision: &Decision, tool: &str, now_ms: u64) {
        let Some(shared) = &self.shared else { return };
        if decision
            .results
            .iter()
            .any(|r| r.contract == Contract::Budget)
        {
            shared.share_attempt(tool, now_ms);
        }
    }

    fn ruling(&self, decision: Decision, tool: &str, arguments: &Value) -> Ruling {
        let fingerprint = self.session.fingerprint_of(tool).map(str::to_owned);
        // Only an ask is shown to a person; an allow that becomes one (when the tools
        // changed) gets its prompt then (`Backend::prompt`), and a deny's text is its reason.
        let prompt = if decision.effect == Effect::Ask {
            prompt_for(&self.session, &decision, tool, arguments)
        } else {
            Question::of_deny(decision.action.server.clone(), tool, &decision.reason)
        };
        Ruling {
            effect: decision.effect,
            contract: decision.contract.as_str().to_owned(),
            rule: decision.rule.clone(),
            reason: decision.reason.clone(),
            prompt,
            fingerprint,
            decision: Some(decision),
        }
    }
}

impl Backend for EngineBackend {
    fn pins_to_persist(&self) -> std::collections::BTreeMap<String, Value> {
        self.session.pins_to_persist()
    }

    fn prompt(&self, call: &Call<'_>, ruling: &Ruling) -> Question {
        match &ruling.decision {
            Some(decision) => prompt_for(&self.session, decision, call.tool, call.arguments),
            None => ruling.prompt.clone(),
        }
    }

    fn listed(&self, tool: &str) -> bool {
        !matches!(self.session.pin_state(tool), PinState::Unlisted)
    }

    fn forbidden_outright(&mut self, tool: &str) -> bool {
        // The same contract a call is decided under (the pinned definition's), which the
        // session keeps until the pins change: a listing repeats its tools.
        self.engine
            .contracts()
            .lookup_in(tool, &mut self.session, None)
            .contract()
            .max_calls
            == Some(0)
    }

    fn decide(&mut self, call: &Call<'_>, now_ms: u64) -> Ruling {
        self.import_shared();
        let fs = RealFs;
        let ctx = NormalizeContext {
            workspace: &self.vars.workspace,
            home: &self.vars.home,
            fs: &fs,
        };
        let tool_call = ToolCall {
            server: call.server,
            tool: call.tool,
            arguments: call.arguments,
            definition: None,
        };
        if let Some((total, in_window)) = self.shared.as_ref().and_then(|s| s.counted(call.tool)) {
            self.session.count_externally(call.tool, total, in_window);
        }
        let mut decision = self
            .engine
            .decide(&tool_call, &mut self.session, &ctx, now_ms);
        crate::selfprotect::guard(&mut decision, &self.vars.workspace);
        self.share_attempt(&decision, call.tool, now_ms);
        self.ruling(decision, call.tool, call.arguments)
    }

    fn decide_resource(&mut self, server: Option<&str>, uri: &str, _now_ms: u64) -> Ruling {
        const TOOL: &str = "resources/read";
        let part = resource_part(uri, &RealFs);
        let action = Action {
            server: server.map(str::to_owned),
            tool: TOOL.to_owned(),
            parts: vec![part],
        };
        let facts = CallFacts {
            server,
            tool: TOOL,
            annotations: None,
            builtin: false,
        };
        let rules = self.engine.decide_rules(&action, &facts);
        let decision = combine(action, &rules, Vec::new());
        let args = serde_json::json!({ "uri": uri });
        self.ruling(decision, TOOL, &args)
    }

    fn pin_tools(&mut self, mut tools: Vec<Value>, complete: bool) -> PinChanges {
        self.import_shared();
        let report = if complete {
            let report = self.session.pin_tools_owned(tools);
            self.session.listing_complete();
            report
        } else {
            let listed: std::collections::HashSet<String> = tools
                .iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str))
                .map(str::to_owned)
                .collect();
            tools.extend(
                self.session
                    .pins_to_persist()
                    .into_iter()
                    .filter(|(name, _)| !listed.contains(name.as_str()))
                    .map(|(_, def)| def),
            );
            self.session.pin_tools_owned(tools)
        };
        if !report.changed.is_empty()
            && let Some(shared) = &self.shared
        {
            let tools: Vec<String> = report.changed.iter().map(|(t, _)| t.clone()).collect();
            shared.share_tools_changed(&tools);
        }
        PinChanges {
            added: report.added,
            changed: report.changed,
        }
    }

    fn redacts_output(&mut self, tool: &str) -> bool {
        self.engine.redacts_output(tool, &mut self.session)
    }

    fn record_output(
        &mut self,
        server: Option<&str>,
        tool: &str,
        result: &Value,
        secret_file: Option<&str>,
    ) {
        self.import_shared();
        let recorded = self.engine.contracts().record_output_from(
            &mut self.session,
            server,
            tool,
            result,
            secret_file,
        );
        if let Some(note) = recorded.note(tool) {
            tracing::warn!("{note}");
        }
        let seq = recorded.seq;
        // What this output added, for the session's other proxies: taken from the index
        // (the output is not tokenized a second time), and always taken so it never piles up.
        let recorded = self.session.taint_mut().take_recorded();
        let secrets = self.session.take_new_secrets();
        if let Some(shared) = &self.shared {
            let mut tokens = super::share::tokens_recorded(self.session.taint(), recorded, seq);
            tokens.extend(super::share::TaintToken::secrets(secrets));
            shared.share_tokens(tokens);
        }
    }

    fn approve(&mut self, call: &Call<'_>, ruling: &Ruling, scope: Scope) {
        if scope != Scope::Session {
            return;
        }
        let Some(decision) = &ruling.decision else {
            return;
        };
        if matches!(self.session.pin_state(call.tool), PinState::Changed { .. }) {
            self.session.approve_pin(call.tool);
        }
        if !decision.sinks.is_empty() {
            self.session.approve_sinks(call.tool, &decision.sinks, true);
        }
        self.session.approve(&decision.action, Some(call.arguments));
        if let Some(shared) = &self.shared {
            shared.share_approvals(self.session.export_approvals());
        }
    }

    fn tools_changed_elsewhere(&mut self) -> bool {
        self.shared.as_ref().is_some_and(|s| s.take_tools_changed())
    }

    fn budget_of(&mut self, tool: &str) -> Option<Option<(u64, u64)>> {
        let contracts = self.engine.contracts();
        let resolved = contracts.lookup_in(tool, &mut self.session, None);
        let c = resolved.contract();
        if c.max_calls.is_none() && c.budget.is_none() {
            return None;
        }
        Some(
            c.budget
                .as_ref()
                .map(|b| (b.max, contracts.window_ms(&b.per))),
        )
    }
}

/// The action part of a `resources/read`: `file://` is fs.read of the canonical path,
/// `http(s)://` a GET; anything else is an opaque unknown part (the policy decides).
pub fn resource_part(uri: &str, fs: &dyn FsFacts) -> Part {
    let lower = uri.to_ascii_lowercase();
    if lower.starts_with("file://") {
        let mut part = Part::new(Operation::FsRead);
        let path = url::Url::parse(uri)
            .ok()
            .filter(|u| {
                u.host_str()
                    .is_none_or(|h| h.is_empty() || h == "localhost")
            })
            .and_then(|u| u.to_file_path().ok())
            .and_then(|p| p.to_str().map(str::to_owned));
        match path.and_then(|p| fs.canonicalize(&p)) {
            Some(canonical) => part.resources.push(canonical),
            None => {
                part.operation = Operation::Unknown;
                part.opaque = true;
                part.resources.push(uri.to_owned());
            }
        }
        return part;
    }
    if lower.starts_with("http://") || lower.starts_with("https://") {
        let mut part = Part::new(Operation::NetRequest);
        match normalize_url(uri, "GET") {
            Ok(net) => part.network = Some(net),
            Err(_) => {
                part.operation = Operation::Unknown;
                part.opaque = true;
            }
        }
        return part;
    }
    let mut part = Part::new(Operation::Unknown);
    part.opaque = true;
    part
}

/// The approval prompt for an ask: what, where, why, and where a sink value came from.
pub fn prompt_for(
    session: &Session,
    decision: &Decision,
    tool: &str,
    arguments: &Value,
) -> Question {
    let all_unknown = decision
        .action
        .parts
        .iter()
        .all(|p| p.operation == Operation::Unknown);
    let what = if !decision.sinks.is_empty() {
        let dests: Vec<String> = decision
            .sinks
            .iter()
            .take(3)
            .map(|s| format!("`{}`", s.value))
            .collect();
        format!("{tool} to {}", dests.join(", "))
    } else if all_unknown {
        let mut args = serde_json::to_string(arguments).unwrap_or_default();
        if args.len() > 120 {
            let cut = (0..=117)
                .rev()
                .find(|i| args.is_char_boundary(*i))
                .unwrap_or(0);
            args.truncate(cut);
            args.push_str("...");
        }
        format!("{tool} {args}")
    } else {
        let described: Vec<String> = decision
            .action
            .parts
            .iter()
            .take(3)
            .map(toolgate_policy::describe_part)
            .collect();
        format!("{tool}: {}", described.join("; "))
    };
    let provenance = decision
        .sinks
        .iter()
        .filter(|s| s.verdict != SinkVerdict::Trusted)
        .map(|s| {
            let from = match (&s.source_tool, s.verdict) {
                (Some(t), SinkVerdict::Tainted) => format!("seen in untrusted output of `{t}`"),
                (Some(t), _) => format!("seen in output of `{t}`"),
                (None, _) => "typed by the agent; no tool output contained it".to_owned(),
            };
            format!(
                "`{}` = `{}` ({}; {from})",
                s.argument,
                s.value,
                s.verdict.as_str()
            )
        })
        .collect::<Vec<_>>();
    let changes = match session.pin_state(tool) {
        PinState::Changed {
            changes,
            since_last_session,
            ..
        } if decision.contract == Contract::Pinning || !changes.is_empty() => Some(format!(
            "the tool's definition changed{}: {}",
            if since_last_session {
                " since the last run"
            } else {
                " during this session"
            },
            changes.join(", ")
        )),
        _ => None,
    };
    Question {
        server: decision.action.server.clone(),
        tool: tool.to_owned(),
        what,
        why: decision.reason.clone(),
        provenance: (!provenance.is_empty()).then(|| provenance.join("; ")),
        changes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_fs_resolves_symlinks_and_appends_missing_tail() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir(base.join("secret")).unwrap();
        std::os::unix::fs::symlink(base.join("secret"), base.join("link")).unwrap();
        let got = RealFs
            .canonicalize(&format!("{}/link/missing/file", base.display()))
            .unwrap();
        assert_eq!(got, format!("{}/secret/missing/file", base.display()));
        assert_eq!(RealFs.canonicalize("relative"), None);
    }

    #[test]
    fn resource_uris_become_parts() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let p = resource_part(&format!("file://{}/a%20b", base.display()), &RealFs);
        assert_eq!(p.operation, Operation::FsRead);
        assert_eq!(p.resources, vec![format!("{}/a b", base.display())]);
        let p = resource_part("https://Example.com/x?q=1", &RealFs);
        assert_eq!(p.operation, Operation::NetRequest);
        assert_eq!(p.network.unwrap().host, "example.com");
        let p = resource_part("memo://notes", &RealFs);
        assert_eq!(p.operation, Operation::Unknown);
        assert!(p.opaque);
        let p = resource_part("file://evil.example/etc/passwd", &RealFs);
        assert_eq!(p.operation, Operation::Unknown);
    }
}
