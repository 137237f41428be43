//! Asking a human: through the client (`elicitation/create`, or a 2026-07-28 `input_required`
//! result with a sealed `requestState`), through a local broker, or on `/dev/tty`. When there
//! is no way to ask, the answer is deny, with a reason that says how to enable approvals.

pub mod question;
pub mod seal;
pub mod tty;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::{Value, json};

pub use question::Question;

/// The form field carrying the human's choice.
pub const DECISION_FIELD: &str = "decision";
/// Allow this one call.
pub const CHOICE_ALLOW_ONCE: &str = "allow_once";
/// Allow this exact action (same normalised action, same tool definition) for the session.
pub const CHOICE_ALLOW_SESSION: &str = "allow_session";
/// Deny the call.
pub const CHOICE_DENY: &str = "deny";
/// The `_meta` key under which toolgate describes its own verdicts in results it writes.
pub const META_DECISION: &str = "dev.toolgate/decision";
/// The `inputRequests` key toolgate uses for its approval question.
pub const INPUT_KEY: &str = "toolgate.approval";

/// The human's answer (or its absence).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    AllowOnce,
    AllowSession,
    /// Denied by the human, or no valid answer; the reason says which.
    Deny(String),
}

#[cfg(test)]
impl Answer {
    pub fn allows(&self) -> bool {
        matches!(self, Answer::AllowOnce | Answer::AllowSession)
    }
}

/// `elicitation/create` params (form mode) for a prompt: a single required choice.
pub fn elicitation_params(prompt: &Question) -> Value {
    json!({
        "message": prompt.message(),
        "requestedSchema": {
            "type": "object",
            "properties": {
                DECISION_FIELD: {
                    "type": "string",
                    "title": "Decision",
                    "description": "Allow this call once, allow this exact action for the rest of the session, or deny it.",
                    "enum": [CHOICE_ALLOW_ONCE, CHOICE_ALLOW_SESSION, CHOICE_DENY],
                    "enumNames": ["Allow once", "Allow for this session", "Deny"]
                }
            },
            "required": [DECISION_FIELD]
        }
    })
}

/// Reads an elicitation result (`{action, content}`) as an answer. Anything but an explicit
/// allow is a deny.
pub fn parse_elicitation_result(result: &Value) -> Answer {
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => match result
            .get("content")
            .and_then(|c| c.get(DECISION_FIELD))
            .and_then(Value::as_str)
        {
            Some(CHOICE_ALLOW_ONCE) => Answer::AllowOnce,
            Some(CHOICE_ALLOW_SESSION) => Answer::AllowSession,
            Some(CHOICE_DENY) => Answer::Deny("the human denied it".to_owned()),
            Some(other) => Answer::Deny(format!("unrecognised answer `{other}`")),
            None => Answer::Deny("the answer carried no decision".to_owned()),
        },
        Some("decline") => Answer::Deny("the human declined".to_owned()),
        Some("cancel") => Answer::Deny("the human dismissed the prompt".to_owned()),
        _ => Answer::Deny("the client sent a malformed elicitation result".to_owned()),
    }
}

/// A 2026-07-28 `input_required` result asking the prompt, with a sealed `requestState`.
pub fn input_required_result(prompt: &Question, request_state: &str) -> Value {
    json!({
        "resultType": "input_required",
        "inputRequests": {
            INPUT_KEY: {"method": "elicitation/create", "params": elicitation_params(prompt)}
        },
        "requestState": request_state
    })
}

/// The pieces of a retried request that answer an `input_required` result.
#[derive(Debug, Clone, PartialEq)]
pub struct Retry {
    pub request_state: String,
    /// The answer under our key, if any.
    pub response: Option<Value>,
}

/// Extracts toolgate's `requestState` / `inputResponses` from a request's params, if
/// present. A `requestState` that does not claim to be toolgate's (see
/// [`seal::claims_toolgate`]) is the upstream server's own: `None`, the request is decided
/// and forwarded like any other.
pub fn retry_of(params: &Value) -> Option<Retry> {
    let request_state = params.get("requestState")?.as_str()?;
    if !seal::claims_toolgate(request_state) {
        return None;
    }
    let request_state = request_state.to_owned();
    let response = params
        .get("inputResponses")
        .and_then(|r| r.get(INPUT_KEY))
        .cloned();
    Some(Retry {
        request_state,
        response,
    })
}

/// The params to forward upstream once a retry has been verified: the original call
/// without toolgate's own `requestState` / `inputResponses`.
pub fn strip_retry(params: &Value) -> Value {
    let mut params = params.clone();
    if let Some(map) = params.as_object_mut() {
        map.remove("requestState");
        map.remove("inputResponses");
    }
    params
}

/// The `--approval` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// The client if it can ask, else the broker if one runs. Never the terminal (that needs
    /// `--approval tty`).
    #[default]
    Auto,
    Client,
    Broker,
    Tty,
    None,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Mode::Auto),
            "client" => Ok(Mode::Client),
            "broker" => Ok(Mode::Broker),
            "tty" => Ok(Mode::Tty),
            "none" => Ok(Mode::None),
            other => Err(format!(
                "unknown approval mode `{other}` (expected auto, client, broker, tty or none)"
            )),
        }
    }
}

/// What the client can do, from `initialize` or a 2026-07-28 request's `_meta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientAbilities {
    /// Declared the `elicitation` capability (form mode).
    pub elicitation: bool,
    /// Speaks 2026-07-28 or later: understands `input_required` results.
    pub input_required: bool,
}

impl ClientAbilities {
    /// From `initialize` params.
    pub fn from_initialize(params: &Value) -> ClientAbilities {
        let version = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let elicitation = params
            .pointer("/capabilities/elicitation")
            .is_some_and(elicitation_supports_form);
        ClientAbilities {
            elicitation,
            input_required: is_mrtr_version(version),
        }
    }

    /// From a 2026-07-28 request's `params._meta` (no handshake in that revision).
    pub fn from_request_meta(params: &Value) -> Option<ClientAbilities> {
        let meta = params.get("_meta")?;
        let version = meta
            .get("io.modelcontextprotocol/protocolVersion")?
            .as_str()?;
        let elicitation = meta
            .get("io.modelcontextprotocol/clientCapabilities")
            .and_then(|c| c.get("elicitation"))
            .is_some_and(elicitation_supports_form);
        Some(ClientAbilities {
            elicitation,
            input_required: is_mrtr_version(version) && elicitation,
        })
    }
}

/// `elicitation: {}` means form mode (2025-06-18); later revisions list modes.
fn elicitation_supports_form(cap: &Value) -> bool {
    match cap.as_object() {
        Some(map) => map.is_empty() || map.contains_key("form"),
        None => false,
    }
}

fn is_mrtr_version(version: &str) -> bool {
    // Revisions are dates; compare as strings like the specification does.
    version.len() == 10 && toolgate_mcp::protocol::is_stateless(version)
}

/// Where a question goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `elicitation/create` to the client.
    Elicitation,
    /// An `input_required` result to a 2026-07-28 client.
    InputRequired,
    Broker,
    Tty,
}

/// Chooses how to ask, or explains why asking is impossible (which means deny).
pub fn choose_route(
    mode: Mode,
    client: ClientAbilities,
    broker_available: bool,
    tty_available: bool,
) -> Result<Route, String> {
    let from_client = if client.input_required {
        Some(Route::InputRequired)
    } else if client.elicitation {
        Some(Route::Elicitation)
    } else {
        None
    };
    let route = match mode {
        Mode::None => None,
        Mode::Client => from_client,
        Mode::Broker => broker_available.then_some(Route::Broker),
        Mode::Tty => tty_available.then_some(Route::Tty),
        // Never the terminal unless asked for: a client that launched toolgate from its
        // own terminal UI owns that terminal, and a prompt there would fight it for input.
        Mode::Auto => from_client.or(broker_available.then_some(Route::Broker)),
    };
    route.ok_or_else(|| no_route_reason(mode, client, broker_available))
}

fn no_route_reason(mode: Mode, client: ClientAbilities, broker_available: bool) -> String {
    let why = match mode {
        Mode::None => "approvals are turned off (`--approval none`)".to_owned(),
        Mode::Client => {
            "the client declared no `elicitation` capability (`--approval client`)".to_owned()
        }
        Mode::Broker => "no approval broker is running (`--approval broker`)".to_owned(),
        Mode::Tty => "there is no terminal to ask on (`--approval tty`)".to_owned(),
        Mode::Auto => {
            let mut missing = Vec::new();
            if !client.elicitation && !client.input_required {
                missing.push("the client cannot ask (no `elicitation` capability)");
            }
            if !broker_available {
                missing.push("no approval broker is running (`toolgate broker`)");
            }
            missing.join(", ")
        }
    };
    format!(
        "no way to ask a human: {why}. help: use a client that supports elicitation, run an approval \
         broker or start `toolgate wrap --approval tty` from a terminal, or allow this action in the policy"
    )
}

/// A boxed future, so approval channels can be trait objects.
pub type AnswerFuture<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// A local approval channel outside the client (the broker, or the terminal). The broker
/// arrives in a later issue; it implements this trait.
pub trait ApprovalChannel: Send + Sync {
    /// A short name for audit records, e.g. `tty` or `broker`.
    fn name(&self) -> &'static str;
    /// True when the channel can take a question right now.
    fn available(&self) -> bool;
    /// Asks; must resolve within `timeout` (a timeout is a deny).
    fn ask<'a>(&'a self, prompt: &'a Question, timeout: Duration) -> AnswerFuture<'a>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt() -> Question {
        Question {
            server: Some("mail".into()),
            tool: "send_email".into(),
            what: "send_email to bob@partner.example".into(),
            why: "`bob@partner.example` is not a trusted recipient".into(),
            provenance: Some("typed by the agent; no tool output contained it".into()),
            changes: None,
        }
    }

    #[test]
    fn elicitation_offers_three_choices_and_says_what_where_why() {
        let p = elicitation_params(&prompt());
        let message = p["message"].as_str().unwrap();
        assert!(message.contains("send_email to bob@partner.example"));
        assert!(message.contains("on mail"));
        assert!(message.contains("not a trusted recipient"));
        assert!(message.contains("Where the value came from"));
        assert_eq!(
            p["requestedSchema"]["properties"][DECISION_FIELD]["enum"],
            json!(["allow_once", "allow_session", "deny"])
        );
        assert_eq!(p["requestedSchema"]["required"], json!([DECISION_FIELD]));
    }

    #[test]
    fn only_an_explicit_allow_allows() {
        let accept = |c: &str| json!({"action": "accept", "content": {DECISION_FIELD: c}});
        assert_eq!(
            parse_elicitation_result(&accept("allow_once")),
            Answer::AllowOnce
        );
        assert_eq!(
            parse_elicitation_result(&accept("allow_session")),
            Answer::AllowSession
        );
        for denied in [
            accept("deny"),
            accept("ALLOW_ONCE"),
            json!({"action": "accept"}),
            json!({"action": "accept", "content": {DECISION_FIELD: true}}),
            json!({"action": "decline"}),
            json!({"action": "cancel"}),
            json!({}),
            json!("allow_once"),
        ] {
            assert!(!parse_elicitation_result(&denied).allows(), "{denied}");
        }
    }

    #[test]
    fn input_required_round_trip_shapes() {
        let r = input_required_result(&prompt(), "tg1.aa.bb");
        assert_eq!(r["resultType"], "input_required");
        assert_eq!(
            r["inputRequests"][INPUT_KEY]["method"],
            "elicitation/create"
        );
        assert_eq!(r["requestState"], "tg1.aa.bb");
        let retry = json!({
            "name": "send_email",
            "arguments": {"to": "x"},
            "requestState": "tg1.aa.bb",
            "inputResponses": {INPUT_KEY: {"action": "accept", "content": {DECISION_FIELD: "allow_once"}}}
        });
        let parsed = retry_of(&retry).unwrap();
        assert_eq!(parsed.request_state, "tg1.aa.bb");
        assert_eq!(
            parse_elicitation_result(parsed.response.as_ref().unwrap()),
            Answer::AllowOnce
        );
        assert_eq!(
            strip_retry(&retry),
            json!({"name": "send_email", "arguments": {"to": "x"}})
        );
        assert!(retry_of(&json!({"name": "x"})).is_none());
        // The upstream's own multi-round-trip state is not toolgate's retry.
        for foreign in ["server-state-1", "tg1", "tg1x.aa.bb", ""] {
            let server_retry = json!({
                "name": "x",
                "requestState": foreign,
                "inputResponses": {"github_login": {"action": "accept"}}
            });
            assert!(retry_of(&server_retry).is_none(), "{foreign}");
        }
        assert!(retry_of(&json!({"name": "x", "requestState": "tg1.zz"})).is_some());
    }

    #[test]
    fn abilities_from_initialize_and_meta() {
        let legacy = ClientAbilities::from_initialize(&json!({
            "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}
        }));
        assert!(legacy.elicitation && !legacy.input_required);
        let url_only = ClientAbilities::from_initialize(&json!({
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"url": {}}}
        }));
        assert!(!url_only.elicitation);
        let none = ClientAbilities::from_initialize(&json!({"protocolVersion": "2025-06-18"}));
        assert_eq!(none, ClientAbilities::default());
        let mrtr = ClientAbilities::from_request_meta(&json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}
        }}))
        .unwrap();
        assert!(mrtr.input_required);
    }

    #[test]
    fn routes_and_no_route_reasons() {
        let can = ClientAbilities {
            elicitation: true,
            input_required: false,
        };
        let cannot = ClientAbilities::default();
        assert_eq!(
            choose_route(Mode::Auto, can, true, true),
            Ok(Route::Elicitation)
        );
        assert_eq!(
            choose_route(Mode::Auto, cannot, true, true),
            Ok(Route::Broker)
        );
        // Auto never takes over the terminal.
        assert!(choose_route(Mode::Auto, cannot, false, true).is_err());
        assert_eq!(choose_route(Mode::Tty, can, true, true), Ok(Route::Tty));
        let err = choose_route(Mode::Auto, cannot, false, false).unwrap_err();
        assert!(err.contains("no way to ask a human"), "{err}");
        assert!(err.contains("help:"), "{err}");
        assert!(err.contains("--approval tty"), "{err}");
        let err = choose_route(Mode::None, can, true, true).unwrap_err();
        assert!(err.contains("--approval none"), "{err}");
        let err = choose_route(Mode::Client, cannot, true, true).unwrap_err();
        assert!(err.contains("elicitation"), "{err}");
    }

    #[test]
    fn mode_parses() {
        assert_eq!("tty".parse::<Mode>(), Ok(Mode::Tty));
        assert!("always".parse::<Mode>().is_err());
    }
}
