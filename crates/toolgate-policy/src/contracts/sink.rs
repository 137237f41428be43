//! The sink gate: deny-unless-trusted on every destination of an exfiltrating tool.
//!
//! Destination arguments are declared `sink_params` ∪ destination-named arguments (see
//! [`super::heuristics::is_destination_param`]) ∪ arguments whose schema says
//! `format: email|uri|…`; every value in them is a destination. Every other argument is
//! payload (titles, bodies, locations): only the values of a recognised destination shape in
//! it (an address, a URL, a host, a phone number, an IBAN), and destination-named keys at any
//! depth (`headers: {Bcc: …}`), are destinations. A declared sink argument that is absent
//! means the call names no destination there; it never makes every argument one. Lists and
//! nested objects are checked element by element. Each destination token is, in order:
//! trusted (a `trusted_destinations` glob) → pass; approved for the session → pass; vouched by
//! trusted output → pass; tainted (seen in untrusted output) → deny, or ask with
//! `on_tainted: ask`; unproven → ask. A destination the user typed in a prompt of the agent
//! session (a client hook recorded its digest: [`crate::session::prompt_digests`]) passes
//! before the taint index is asked, so an injection that repeats it does not block it.
//!
//! What leaves is checked too: a secret value read earlier (a fingerprint of
//! [`crate::secrets`]) in any argument denies, whatever the destination; a secret of a known
//! shape ([`crate::secret_shapes`]: a private key block, a cloud key, a provider token, a JWT,
//! a password in a URL) asks, even to a trusted destination, unless the user typed it in a
//! prompt of the session.
//!
//! Two more verdicts:
//! - **allowed by a rule**: a URL whose `net.request` part one of the user's own allow rules
//!   matches, by a rule that names its hosts (and, when it says so, the method), passes like
//!   a trusted destination (`allow net.request hosts: [api.example.com] methods: [GET]` makes
//!   `fetch {"url": "https://api.example.com/v1"}` pass the gate);
//! - **unusable**: a destination argument that is present but holds no usable destination
//!   (`null`, a boolean, an empty string, an empty object, or a list holding one of these)
//!   asks: what the server makes of it is unknown. A number is checked as its decimal text
//!   (unproven, so it asks, unless trusted, approved or vouched for). In payload such
//!   values are ignored.

use serde_json::Value;

use super::OnTainted;
use super::check::ResolvedTool;
use super::heuristics::is_destination_param;
use crate::decision::{Contract, ContractResult, Effect, SinkFinding, SinkVerdict};
use crate::normalize::ToolCall;
use crate::session::{SecretCheck, Session};
use crate::taint::{
    MAX_VERBATIM_SEARCHES_PER_CALL, Provenance, TaintIndex, TaintSource,
    canonical_destination_shaped, shaped_destinations_in,
};

/// Schema formats that make an argument a destination.
const DESTINATION_FORMATS: &[&str] = &[
    "email",
    "idn-email",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "hostname",
    "idn-hostname",
];

/// The most sink values checked per call; past it the call asks (fail closed).
const MAX_SINK_VALUES: usize = 1000;

fn schema_says_destination(definition: Option<&Value>, arg: &str) -> bool {
    let Some(prop) = definition
        .and_then(|d| d.get("inputSchema"))
        .and_then(|s| s.get("properties"))
        .and_then(|p| p.get(arg))
    else {
        return false;
    };
    let has_format = |v: &Value| {
        v.get("format")
            .and_then(Value::as_str)
            .is_some_and(|f| DESTINATION_FORMATS.contains(&f))
    };
    has_format(prop) || prop.get("items").is_some_and(has_format)
}

/// Which allow rule, if any, trusts a destination token (see the module docs).
pub(crate) type RuleTrust<'r> = &'r dyn Fn(&str) -> Option<String>;

struct Walk<'a, 'v> {
    resolved: &'a ResolvedTool<'a>,
    /// The base64 blobs of the arguments' strings, shared with the secret-value check.
    blobs: &'a crate::blob::Memo<'v>,
    session: &'a Session,
    rule_trust: Option<RuleTrust<'a>>,
    findings: Vec<SinkFinding>,
    overflow: bool,
    /// The values walked are destinations for sure (a sink argument or a destination-named
    /// key): one that holds no usable destination is a finding of its own.
    strict: bool,
    /// Searches of the verbatim window made so far (at most
    /// [`MAX_VERBATIM_SEARCHES_PER_CALL`]).
    searches: usize,
    /// The user named the repository `owner/repo` of this call's `owner` and `repo`
    /// arguments in a prompt: both halves are theirs.
    slug_vouched: bool,
}

impl<'v> Walk<'_, 'v> {
    fn value(&mut self, path: &str, v: &'v Value) {
        if self.overflow {
            return;
        }
        match v {
            Value::String(s) if s.trim().is_empty() => self.unusable(path, v),
            Value::String(s) => self.scalar(path, s),
            Value::Number(n) => self.scalar(path, &n.to_string()),
            Value::Bool(_) | Value::Null => self.unusable(path, v),
            Value::Object(map) if map.is_empty() => self.unusable(path, v),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.value(&format!("{path}[{i}]"), item);
                }
            }
            Value::Object(map) => {
                // Inside a sink, destination-named keys are the destinations; with none,
                // every value is.
                let named: Vec<&String> = map.keys().filter(|k| is_destination_param(k)).collect();
                for (k, item) in map {
                    if named.is_empty() || named.contains(&k) {
                        self.value(&format!("{path}.{k}"), item);
                    }
                }
            }
        }
    }

    /// Looks inside a payload argument for destination-named keys at any depth (checked as
    /// destination arguments) and, in its text, for values of a recognised destination shape.
    fn payload(&mut self, path: &str, v: &'v Value, depth: usize) {
        if self.overflow || depth > 32 {
            return;
        }
        match v {
            Value::String(s) => self.shaped(path, s),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.payload(&format!("{path}[{i}]"), item, depth + 1);
                }
            }
            Value::Object(map) => {
                for (k, item) in map {
                    let at = format!("{path}.{k}");
                    if is_destination_param(k) {
                        let strict = std::mem::replace(&mut self.strict, true);
                        self.value(&at, item);
                        self.strict = strict;
                    } else {
                        self.payload(&at, item, depth + 1);
                    }
                }
            }
            _ => {}
        }
    }

    /// The destinations of a recognised shape in payload text: addresses, URLs, hosts, phone
    /// numbers, IBANs, Slack ids. Channel and user names (`#general`, `@alice`) in prose are
    /// words, not destinations; text without any shape is payload only.
    fn shaped(&mut self, path: &str, raw: &'v str) {
        // The blobs of the whole string, moved to the text without its outer white space
        // (one that only the trimmed text holds is read as text: never fewer destinations).
        let text = raw.trim();
        let offset = raw.len() - raw.trim_start().len();
        let blobs: Vec<std::ops::Range<usize>> = self
            .blobs
            .blobs(raw)
            .into_iter()
            .filter(|b| b.start >= offset && b.end <= offset + text.len())
            .map(|b| b.start - offset..b.end - offset)
            .collect();
        self.tokens(path, raw, shaped_destinations_in(text, &blobs), true);
    }

    /// A value in a destination argument that names no destination.
    fn unusable(&mut self, path: &str, v: &Value) {
        if !self.strict {
            return;
        }
        if self.findings.len() >= MAX_SINK_VALUES {
            self.overflow = true;
            return;
        }
        let shown = match v {
            Value::String(_) => "\"\"".to_owned(),
            other => other.to_string(),
        };
        self.findings.push(SinkFinding {
            argument: path.to_owned(),
            value: shown.clone(),
            destination: shown,
            verdict: SinkVerdict::Unusable,
            source_server: None,
            source_tool: None,
            source_seq: None,
            trusted_by_rule: None,
        });
    }

    fn scalar(&mut self, path: &str, raw: &str) {
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            return;
        }
        let (mut tokens, shaped) = canonical_destination_shaped(trimmed);
        if tokens.is_empty() {
            tokens.push(trimmed.to_lowercase());
        }
        self.tokens(path, raw, tokens, shaped);
    }

    /// Judges each destination token of the value `raw` at `path`.
    fn tokens(&mut self, path: &str, raw: &str, tokens: Vec<String>, shaped: bool) {
        // The host that follows a URL token is judged with the URL (the taint index checks
        // a URL's host itself; a host never vouches for a URL), not as a destination of its own.
        let hosts: Vec<String> = tokens.iter().filter_map(|t| host_of(t)).collect();
        for token in tokens.iter().filter(|t| !hosts.contains(t)) {
            if self.findings.len() >= MAX_SINK_VALUES {
                self.overflow = true;
                return;
            }
            let trusted = self.trusted(token);
            let by_rule = if trusted {
                None
            } else {
                self.rule_trust.and_then(|f| f(token))
            };
            let (verdict, source) = if trusted {
                (SinkVerdict::Trusted, None)
            } else if by_rule.is_some() {
                (SinkVerdict::AllowedByRule, None)
            } else if self
                .session
                .destination_approved(&self.resolved.tool, token)
            {
                (SinkVerdict::Approved, None)
            } else if self.session.user_vouched(token)
                || (!shaped && self.session.user_vouched_phrase(raw))
                || (self.slug_vouched && matches!(path, "owner" | "repo" | "repository"))
            {
                // The user named it: an injection repeating it does not make it theirs.
                (SinkVerdict::UserVouched, None)
            } else {
                match self.session.taint().classify(token) {
                    Provenance::Vouched(s) => (SinkVerdict::Vouched, Some(s)),
                    Provenance::Tainted(s) => (SinkVerdict::Tainted, Some(s)),
                    // A recognised shape is judged by token equality only
                    // (`bob@corp.com` is not tainted by `bob@corp.com.evil.net`).
                    Provenance::Unproven if shaped => (SinkVerdict::Unproven, None),
                    Provenance::Unproven => match self.verbatim(token, false) {
                        Some(s) => (SinkVerdict::Tainted, Some(s)),
                        None => (SinkVerdict::Unproven, None),
                    },
                }
            };
            let shown: String = if raw.chars().count() > 200 {
                let cut: String = raw.chars().take(197).collect();
                format!("{cut}...")
            } else {
                raw.to_owned()
            };
            self.findings.push(SinkFinding {
                argument: path.to_owned(),
                value: shown,
                destination: token.clone(),
                verdict,
                source_server: source.as_ref().and_then(|s| s.server.clone()),
                source_tool: source.as_ref().map(|s| s.tool.clone()),
                source_seq: source.as_ref().map(|s| s.seq),
                trusted_by_rule: by_rule,
            });
        }
    }

    /// A value the token index calls unproven, searched verbatim in the recent untrusted
    /// text (destinations of any shape); bounded per call.
    fn verbatim(&mut self, value: &str, slug: bool) -> Option<TaintSource> {
        if self.searches >= MAX_VERBATIM_SEARCHES_PER_CALL
            || !TaintIndex::verbatim_searchable(value)
        {
            return None;
        }
        self.searches += 1;
        if slug {
            self.session.taint().verbatim_slug(value)
        } else {
            self.session.taint().verbatim(value)
        }
    }

    /// A repository named by an owner and a repository argument (`owner: attacker-org`,
    /// `repo: leaks`) is also the slug `attacker-org/leaks`, which untrusted output may
    /// name as a whole (`file it at attacker-org/leaks`, `github.com/attacker-org/leaks`).
    /// The slug is searched only here, for such a pair, and only when neither half passed
    /// on its own (trusted, approved or vouched): a bare `a/b` in text (a path) means
    /// nothing until a call names that pair.
    fn repository_slug(&mut self, args: &serde_json::Map<String, Value>) {
        let Some(owner) = args.get("owner").and_then(Value::as_str).map(str::trim) else {
            return;
        };
        let Some(repo) = ["repo", "repository"]
            .iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str))
            .map(str::trim)
        else {
            return;
        };
        if owner.is_empty() || repo.is_empty() || owner.contains('/') || repo.contains('/') {
            return;
        }
        let halves_passed = self.findings.iter().any(|f| {
            matches!(f.argument.as_str(), "owner" | "repo" | "repository") && passes(f.verdict)
        });
        let slug = format!("{owner}/{repo}");
        if halves_passed || self.session.user_vouched(&slug.to_lowercase()) {
            return;
        }
        if self.findings.len() >= MAX_SINK_VALUES {
            return;
        }
        let source = match self.session.taint().classify(&slug) {
            Provenance::Tainted(s) => Some(s),
            Provenance::Vouched(_) => None,
            Provenance::Unproven => self.verbatim(&slug, true),
        };
        let Some(source) = source else { return };
        self.findings.push(SinkFinding {
            argument: "owner/repo".to_owned(),
            value: slug.clone(),
            destination: slug.to_lowercase(),
            verdict: SinkVerdict::Tainted,
            source_server: source.server.clone(),
            source_tool: Some(source.tool.clone()),
            source_seq: Some(source.seq),
            trusted_by_rule: None,
        });
    }

    /// A repository of an owner that passed (trusted, approved, vouched or named by the
    /// user) is that owner's: `trusted_destinations: [my-org]` covers `my-org/any-repo`, and
    /// the signed-in user's own login (the github pack's `get_me`) covers their own
    /// repositories. Only the owner can create repositories under it, so no output can
    /// plant one there; what such a call carries is the payload check's to judge.
    fn repository_in_owner(&mut self) {
        let Some(owner) = self
            .findings
            .iter()
            .find(|f| f.argument == "owner" && passes(f.verdict))
            .cloned()
        else {
            return;
        };
        for f in &mut self.findings {
            if matches!(f.argument.as_str(), "repo" | "repository")
                && !passes(f.verdict)
                && f.verdict != SinkVerdict::Unusable
                && !f.value.contains('/')
            {
                f.verdict = owner.verdict;
                f.source_server.clone_from(&owner.source_server);
                f.source_tool.clone_from(&owner.source_tool);
                f.source_seq = owner.source_seq;
                f.trusted_by_rule.clone_from(&owner.trusted_by_rule);
            }
        }
    }

    fn trusted(&self, token: &str) -> bool {
        let Some(list) = &self.resolved.contract().trusted_destinations else {
            return false;
        };
        list.iter().any(|p| {
            self.resolved
                .contracts()
                .destination_matcher(p)
                .is_some_and(|m| m.is_match(token))
        })
    }
}

/// Whether a destination with this verdict passes on its own provenance (an allow rule's
/// pass is the rule's, not the destination's).
fn passes(v: SinkVerdict) -> bool {
    matches!(
        v,
        SinkVerdict::Trusted
            | SinkVerdict::Approved
            | SinkVerdict::Vouched
            | SinkVerdict::UserVouched
    )
}

/// Whether the user named the repository of an `owner` + `repo` (or `repository`) pair in a
/// prompt ([`crate::session::prompt_digests`] keeps slugs in lower case).
fn user_vouched_slug(session: &Session, args: &serde_json::Map<String, Value>) -> bool {
    let owner = args.get("owner").and_then(Value::as_str).map(str::trim);
    let repo = ["repo", "repository"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
        .map(str::trim);
    match (owner, repo) {
        (Some(o), Some(r)) if !o.is_empty() && !r.is_empty() => {
            session.user_vouched(&format!("{o}/{r}").to_lowercase())
        }
        _ => false,
    }
}

/// Why a call carrying a secret value is denied: the argument and where the value was read.
pub(crate) fn secret_reason(found: &crate::session::SecretFinding) -> String {
    let s = &found.source;
    format!(
        "`{}` carries a secret value read from {} (output #{} of `{}`): secrets never leave, whatever the destination",
        found.argument, s.what, s.seq, s.tool
    )
}

fn host_of(token: &str) -> Option<String> {
    if !token.contains("://") {
        return None;
    }
    url::Url::parse(token)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
}

/// Run the sink gate for one call of an exfiltrating tool.
pub(super) fn gate(
    resolved: &ResolvedTool<'_>,
    call: &ToolCall,
    definition: Option<&Value>,
    session: &Session,
    rule_trust: Option<RuleTrust<'_>>,
) -> ContractResult {
    let blobs = crate::blob::Memo::default();
    // What leaves: a secret value read earlier never does, whatever the destination.
    let unchecked = match session.secret_check_in(call.arguments, &blobs) {
        SecretCheck::Carried(found) => {
            return ContractResult::new(Contract::SinkGate, Effect::Deny, secret_reason(&found));
        }
        SecretCheck::Unchecked => Some(crate::session::unchecked_reason()),
        SecretCheck::Clean => None,
    };
    // A secret of a known shape (a token, a key, a password in a URL) asks whatever the
    // destination, unless the user typed it.
    let shape = shape_reason(session, call.arguments).or(unchecked);
    let declared: &[String] = resolved.contract().sink_params.as_deref().unwrap_or(&[]);
    let mut walk = Walk {
        resolved,
        blobs: &blobs,
        session,
        rule_trust,
        findings: Vec::new(),
        overflow: false,
        strict: false,
        searches: 0,
        slug_vouched: false,
    };
    if let Value::Object(args) = call.arguments {
        walk.slug_vouched = user_vouched_slug(session, args);
    }
    match call.arguments {
        Value::Object(args) => {
            for (k, v) in args {
                if declared.contains(k)
                    || is_destination_param(k)
                    || schema_says_destination(definition, k)
                {
                    walk.strict = true;
                    walk.value(k, v);
                } else {
                    walk.strict = false;
                    walk.payload(k, v, 0);
                }
            }
            walk.repository_in_owner();
            walk.repository_slug(args);
        }
        Value::Null => {}
        other => walk.payload("arguments", other, 0),
    }
    let on_tainted = resolved.contract().on_tainted.unwrap_or(OnTainted::Deny);
    // A destination from an `ask_fields` field of the output that tainted it: those fields.
    let asked_by = |f: &SinkFinding| {
        (f.verdict == SinkVerdict::Tainted)
            .then(|| session.asked_by_field(f.source_seq?, &f.destination))
            .flatten()
    };
    let effect_of = |f: &SinkFinding| match f.verdict {
        SinkVerdict::Tainted if asked_by(f).is_some() => Effect::Ask,
        SinkVerdict::Tainted => match on_tainted {
            OnTainted::Deny => Effect::Deny,
            OnTainted::Ask => Effect::Ask,
        },
        SinkVerdict::Unproven | SinkVerdict::Unusable => Effect::Ask,
        _ => Effect::Allow,
    };
    let mut effect = Effect::Allow;
    let mut worst: Option<&SinkFinding> = None;
    for f in &walk.findings {
        let e = effect_of(f);
        if e > effect || (worst.is_none() && e == effect) {
            effect = e;
            worst = Some(f);
        }
    }
    if walk.overflow {
        effect = effect.max(Effect::Ask);
    }
    // Lost session state: nothing the session knew can prove a destination (see
    // `Session::mark_state_lost`); only the policy's own trust and a taint still known count.
    let lost = session.state_lost().and_then(|why| {
        let f = walk.findings.iter().find(|f| {
            !matches!(
                f.verdict,
                SinkVerdict::Trusted | SinkVerdict::AllowedByRule | SinkVerdict::Tainted
            )
        })?;
        // A deny, or a tainted destination's own ask, keeps its reason.
        let tainted = worst.is_some_and(|w| w.verdict == SinkVerdict::Tainted);
        (effect < Effect::Deny && !tainted).then(|| {
            format!(
                "destination `{}` in `{}` cannot be proven: {why}",
                f.destination, f.argument
            )
        })
    });
    if lost.is_some() {
        effect = Effect::Ask;
    }
    let reason = match worst {
        _ if lost.is_some() => lost.unwrap_or_default(),
        _ if walk.overflow && effect == Effect::Ask => {
            format!("more than {MAX_SINK_VALUES} destination values in one call: a human must look")
        }
        Some(f) if effect != Effect::Allow => {
            let from = match (&f.source_tool, f.source_seq) {
                (Some(t), Some(seq)) => format!("output #{seq} of `{t}`"),
                _ => "tool output".to_owned(),
            };
            let asked = asked_by(f);
            match (f.verdict, asked) {
                (SinkVerdict::Tainted, Some(fields)) => format!(
                    "destination `{}` in `{}` is in an `ask_fields` field ({}) of {from}: someone outside can put a value there, so a human must confirm it",
                    f.destination,
                    f.argument,
                    fields
                        .iter()
                        .map(|x| format!("`{x}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                (SinkVerdict::Tainted, None) => {
                    // With `trusted_fields`: why this output's trust did not cover it.
                    let note = f
                        .source_seq
                        .and_then(|seq| session.output_note(seq, &f.destination))
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default();
                    // An ask shows where the value was seen, so a person can tell the
                    // sender of the mail being answered from an address in a web page.
                    let seen = (effect == Effect::Ask)
                        .then(|| {
                            let seq = f.source_seq?;
                            let taint = session.taint();
                            taint
                                .excerpt(&f.value, seq)
                                .or_else(|| taint.excerpt(&f.destination, seq))
                        })
                        .flatten()
                        .map(|e| format!("; seen there as: \"{e}\""))
                        .unwrap_or_default();
                    format!(
                        "destination `{}` in `{}` came from untrusted {from}{note}{seen}",
                        f.destination, f.argument
                    )
                }
                (SinkVerdict::Unusable, _) => format!(
                    "destination argument `{}` is present but holds no usable destination (`{}`): what the server makes of it is unknown",
                    f.argument, f.value
                ),
                _ => format!(
                    "destination `{}` in `{}` is not a trusted destination: approve it for this session or add it to `trusted_destinations`",
                    f.destination, f.argument
                ),
            }
        }
        _ if walk.findings.is_empty() => "the call names no destination".to_owned(),
        _ => {
            // Name up to three destinations and why each passed.
            let why = |f: &SinkFinding| match (f.verdict, &f.trusted_by_rule) {
                (SinkVerdict::Approved, _) => "approved for this session".to_owned(),
                (SinkVerdict::Vouched, _) => match (&f.source_tool, f.source_seq) {
                    (Some(t), Some(seq)) => {
                        format!("vouched for by trusted output #{seq} of `{t}`")
                    }
                    _ => "vouched for by trusted output".to_owned(),
                },
                (SinkVerdict::UserVouched, _) => {
                    "named by the user in a prompt of this session".to_owned()
                }
                (SinkVerdict::AllowedByRule, Some(id)) => {
                    format!("trusted by allow rule `{id}` (it matches its host and method)")
                }
                _ => "trusted".to_owned(),
            };
            let mut shown: Vec<String> = walk
                .findings
                .iter()
                .take(3)
                .map(|f| format!("`{}` is {}", f.destination, why(f)))
                .collect();
            let more = walk.findings.len().saturating_sub(3);
            if more > 0 {
                shown.push(format!("{more} more"));
            }
            format!("destination {}", shown.join(", "))
        }
    };
    let (effect, reason) = match shape {
        Some(shape) if effect < Effect::Ask => (Effect::Ask, shape),
        Some(shape) if effect == Effect::Ask => (effect, format!("{reason}; and {shape}")),
        _ => (effect, reason),
    };
    let mut result = ContractResult::new(Contract::SinkGate, effect, reason);
    result.sinks = walk.findings;
    result
}

/// Why a sink call carrying a secret of a known shape asks ([`crate::secret_shapes`]),
/// naming the shape and the argument and showing no more of the secret than its public
/// prefix: `None` when it carries none the user did not type in a prompt of the session.
pub(crate) fn shape_reason(session: &Session, arguments: &Value) -> Option<String> {
    use crate::secret_shapes::{ArgumentScan, MAX_SCANNED_BYTES, in_arguments};
    let vouched = |s: &str| session.user_vouched_phrase(s);
    match in_arguments(arguments, &vouched) {
        ArgumentScan::Clean => None,
        ArgumentScan::Found(f) => Some(format!(
            "{} ({}) in argument `{}` would leave: a secret of a known shape leaves only when the user typed it in a prompt (approve the call if it is meant to go)",
            f.shape.described(),
            f.shown,
            f.argument
        )),
        ArgumentScan::TooLarge => Some(format!(
            "the arguments are larger than {} MiB and were not all scanned for secrets: a human must look",
            MAX_SCANNED_BYTES >> 20
        )),
    }
}
