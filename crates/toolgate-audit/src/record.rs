//! The audit record: what one line of the log says.
//!
//! A caller (the proxy) fills an [`Event`]; the [`crate::AuditWriter`] stamps it with
//! `seq`, `prev` and `time` and writes it as one [`Record`] line. Every field is a plain
//! string, number or list so the audit does not depend on the policy engine's types.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Format identifier written into the header record of every log.
pub const FORMAT: &str = "toolgate-audit/1";

/// What a record is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The first line of every log: format and chain id, nothing else.
    Header,
    /// A verdict on a call (allow, deny or ask) before anything reaches the server.
    Decision,
    /// The server's result for a forwarded call.
    Result,
    /// The client cancelled a call (for example a parked call awaiting approval).
    Cancelled,
    /// A human (or the client on their behalf) answered an approval request.
    Approval,
    /// A tool definition was pinned for the first time, or changed since its pin.
    Pin,
    /// A session started or ended.
    Session,
    /// A kind written by a newer toolgate; kept readable, never written by this version.
    #[serde(other)]
    Other,
}

impl Kind {
    /// The lowercase name used in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Header => "header",
            Kind::Decision => "decision",
            Kind::Result => "result",
            Kind::Cancelled => "cancelled",
            Kind::Approval => "approval",
            Kind::Pin => "pin",
            Kind::Session => "session",
            Kind::Other => "other",
        }
    }
}

/// How an approval was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalHow {
    /// `elicitation/create` sent to the client.
    Client,
    /// An `input_required` result answered on the client's retry.
    InputRequired,
    /// The local approval broker.
    Broker,
    /// A prompt on `/dev/tty`.
    Tty,
}

/// How long an approval lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalScope {
    /// This one call only.
    Once,
    /// The same normalised action for the rest of the session.
    Session,
}

/// An approval attached to a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The channel that produced the answer.
    pub how: ApprovalHow,
    /// Whether it covers this call or the whole session.
    pub scope: ApprovalScope,
}

/// A network destination: host and method only. Never a path or a query string; the
/// writer strips anything that looks like one (see [`sanitize_host`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Net {
    /// Host name or IP literal, optionally with `:port`.
    pub host: String,
    /// Request method, e.g. `GET`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

/// Raw arguments and result, present only when the user opted in with `--audit-raw`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Raw {
    /// The call's `arguments` exactly as received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// The server's `result` exactly as received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
}

/// One kind of secret replaced in a result, and how many times.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redaction {
    /// What it was (`GitHub token`, `private key block`).
    pub shape: String,
    /// How many were replaced.
    pub count: u64,
}

/// What the caller records. Empty fields are omitted from the line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// What this record is about.
    pub kind: Kind,
    /// The proxy session that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The JSON-RPC request id as its raw JSON text (`7`, `"abc"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Server name (`--server`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// A remote server's URL (`wrap --url`), without credentials, query or fragment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// The authenticated user the call was made for (`toolgate gateway`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The gateway replica that wrote the record (`toolgate gateway`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// Tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Fingerprint of the tool's definition at the time of the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Normalised operations, e.g. `fs.read`, `exec`, `net.request`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<String>,
    /// Resources touched (paths, addresses), as normalised by the policy engine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Executable of a command (`argv[0]`, resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
    /// Network destination: host and method only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<Net>,
    /// `allow`, `deny` or `ask` (for a decision); the final effect after approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
    /// The contract that decided, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
    /// The rule that decided, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Human-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How the call was approved, when it was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// Hex SHA-256 of the RFC 8785 canonical JSON of the call's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_sha256: Option<String>,
    /// Hex SHA-256 of the RFC 8785 canonical JSON of the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_sha256: Option<String>,
    /// The result's `isError`.
    #[serde(default, rename = "isError", skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Secrets of a known shape replaced in the result before the client saw it
    /// (`output: {redact: secrets}`): which shapes and how many, never the values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<Redaction>,
    /// Time from receiving the request to sending the reply, in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<u64>,
    /// Raw arguments/result, only with `--audit-raw`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Raw>,
    /// Header only: the log format, [`FORMAT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Header only: the chain id, random per log file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
}

impl Event {
    /// An empty event of the given kind; fill the fields you know.
    pub fn new(kind: Kind) -> Self {
        Event {
            kind,
            session: None,
            request_id: None,
            server: None,
            upstream: None,
            user: None,
            replica: None,
            tool: None,
            fingerprint: None,
            operations: Vec::new(),
            resources: Vec::new(),
            executable: None,
            net: None,
            effect: None,
            contract: None,
            rule: None,
            reason: None,
            approval: None,
            args_sha256: None,
            result_sha256: None,
            is_error: None,
            redactions: Vec::new(),
            latency_us: None,
            raw: None,
            format: None,
            chain: None,
        }
    }
}

/// One line of the log: chain fields, time, then the event's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Position in the chain; the header is 0, then 1, 2, 3…
    pub seq: u64,
    /// Hex SHA-256 of the previous line's exact bytes (without its newline); for the
    /// header, of [`crate::GENESIS`].
    pub prev: String,
    /// RFC 3339 UTC time with millisecond precision, stamped by the writer.
    pub time: String,
    /// Everything else.
    #[serde(flatten)]
    pub event: Event,
}

/// Reduces a network destination to `host[:port]`: drops a scheme, user info, path,
/// query and fragment, so a URL with a token in it never reaches the log.
pub fn sanitize_host(input: &str) -> String {
    let rest = match input.find("://") {
        Some(i) => input.get(i + 3..).unwrap_or(""),
        None => input,
    };
    let authority = rest.split(['/', '?', '#', '\\']).next().unwrap_or("");
    let host = match authority.rfind('@') {
        Some(i) => authority.get(i + 1..).unwrap_or(""),
        None => authority,
    };
    host.chars()
        .filter(|c| !c.is_whitespace() && !c.is_control())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_host_keeps_only_host_and_port() {
        assert_eq!(sanitize_host("example.com"), "example.com");
        assert_eq!(sanitize_host("example.com:8443"), "example.com:8443");
        assert_eq!(
            sanitize_host("https://user:pw@api.example.com/v1/x?token=SECRET#f"),
            "api.example.com"
        );
        assert_eq!(
            sanitize_host("api.example.com/path?key=1"),
            "api.example.com"
        );
        assert_eq!(sanitize_host("[::1]:80"), "[::1]:80");
    }

    #[test]
    fn empty_fields_are_omitted_and_is_error_is_camel_case() {
        let mut e = Event::new(Kind::Result);
        e.is_error = Some(true);
        let s = serde_json::to_string(&e).unwrap();
        assert_eq!(s, r#"{"kind":"result","isError":true}"#);
    }

    #[test]
    fn unknown_kind_reads_as_other() {
        let e: Event = serde_json::from_str(r#"{"kind":"from_the_future"}"#).unwrap();
        assert_eq!(e.kind, Kind::Other);
    }
}
