//! The broker's wire protocol: one JSON object per line, versioned, strictly validated.
//!
//! A connection starts with `hello` (protocol version, the token, a role); the broker answers
//! `welcome` or `error` and closes. A proxy of an agent session then receives what the
//! session's other proxies shared so far (`taint`, `approvals`, `attempts`) and `synced` after
//! it, and later what they share as they go. Proxies send `ask` / `withdraw` and receive `answer`;
//! approvers receive a `snapshot` of the queue followed by `added` / `resolved` / `withdrawn`
//! events and send `decide`; a `status` connection receives one `status` message. A `hook`
//! connection (`toolgate hook <client>`, one per hook event) sends one `hook` message and
//! receives one `verdict`; the broker decides it with the policy it keeps compiled and the
//! agent session's state.
//!
//! Requests carry toolgate's normalised description of an action and the reason it is asked
//! about, never the call's raw arguments.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncReadExt as _};

pub use toolgate_runtime::approval::question::{Choice, MAX_FIELD, Pending, Question, Withdrawal};
pub use toolgate_runtime::enforce::share::{
    MAX_APPROVALS_PER_MESSAGE, MAX_ATTEMPTS_PER_MESSAGE, MAX_NAME, MAX_TOKEN_LEN,
    MAX_TOKENS_PER_MESSAGE, SharedApproval, SharedAttempt, TaintToken, name_ok, validate_approvals,
    validate_attempts, validate_tokens,
};

/// The protocol version this build speaks (2: `synced`; 3: the `hook` role, `vouched`;
/// 4: `known` in `hello`).
pub const VERSION: u32 = 4;
/// The longest accepted line, in bytes.
pub const MAX_LINE: usize = 64 * 1024;
/// The longest time a request may wait at the broker.
pub const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;
/// Pending requests one proxy may have at once.
pub const MAX_PENDING_PER_PROXY: usize = 256;
/// The longest `hook` message, in bytes (a tool's output or a prompt of up to 4 MiB, as JSON).
pub const MAX_HOOK_LINE: usize = 9 * 1024 * 1024;
/// The longest path (policy, workspace) in a `hook` message, in bytes.
pub const MAX_PATH: usize = 4096;
/// Prompt digests in one `vouched` message.
pub const MAX_DIGESTS_PER_MESSAGE: usize = 1024;

/// Who is connecting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A `toolgate wrap` proxy asking questions.
    Proxy,
    /// A `toolgate approvals` terminal answering them.
    Approver,
    /// `toolgate status`: one status message, then the connection closes.
    Status,
    /// `toolgate hook <client>`: one hook event, one verdict, then the connection closes.
    Hook,
}

/// One event a client hook reports (see `toolgate hook`). Tool names and arguments are the
/// client's, with an MCP tool's server split off (`mcp__mail__send_email` → server `mail`,
/// tool `send_email`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum HookEvent {
    /// A tool is about to run: decide it.
    Before {
        server: Option<String>,
        tool: String,
        arguments: serde_json::Value,
        /// What the call returns, when the client sends it with the question (Cursor's
        /// `beforeReadFile` carries the file's content): indexed unless the call is denied.
        #[serde(default)]
        output: Option<serde_json::Value>,
    },
    /// A tool ran: its output feeds the session's taint index (never stored as such).
    After {
        server: Option<String>,
        tool: String,
        output: serde_json::Value,
        /// The call's arguments, when the client gives them: a read of a secret file makes
        /// the output's secret values unable to leave.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<serde_json::Value>,
    },
    /// The user submitted a prompt: the destinations in it are vouched for in the session,
    /// once the prompt is found as a user message in the client's own transcript
    /// (`transcript`, Claude Code's `transcript_path`; none: vouches for nothing). The broker
    /// keeps only digests (of the prompt and of its tokens), never the text.
    Prompt {
        text: String,
        #[serde(default)]
        transcript: Option<String>,
        /// The client's own session in a transcript that holds many (OpenCode's database).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conversation: Option<String>,
    },
    /// The agent session started or resumed.
    SessionStart {},
}

impl HookEvent {
    /// Size limits of names (texts and values are bounded by [`MAX_HOOK_LINE`]).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            HookEvent::Before { server, tool, .. } | HookEvent::After { server, tool, .. } => {
                if name_ok(server.as_deref(), Some(tool)) {
                    Ok(())
                } else {
                    Err(format!(
                        "a hook event names an empty tool, or a tool or server longer than {MAX_NAME} bytes"
                    ))
                }
            }
            HookEvent::Prompt {
                transcript: Some(t),
                ..
            } if t.len() > MAX_PATH || !t.starts_with('/') => Err(format!(
                "a hook event's transcript must be an absolute path of at most {MAX_PATH} bytes"
            )),
            HookEvent::Prompt {
                conversation: Some(c),
                ..
            } if c.is_empty()
                || c.len() > MAX_NAME
                || !c
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
            {
                Err(format!(
                    "a hook event's conversation must be a name of at most {MAX_NAME} letters, digits, `_` and `-`"
                ))
            }
            HookEvent::Prompt { .. } | HookEvent::SessionStart {} => Ok(()),
        }
    }
}

/// The broker's verdict on a hook event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEffect {
    Allow,
    Ask,
    Deny,
    /// No opinion: an event that decides nothing (a tool's output, a prompt), or an MCP tool
    /// whose server a `toolgate wrap` proxy of the same session decides itself.
    Abstain,
}

/// Messages to the broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToBroker {
    Hello {
        version: u32,
        /// The token from the broker's token file, hex.
        token: String,
        role: Role,
        pid: u32,
        #[serde(default)]
        server: Option<String>,
        #[serde(default)]
        session: Option<String>,
        /// A proxy that shared or received state of its session before this connection (it
        /// connects again, to a broker that started again): the session must be in the
        /// broker's store, or what the broker knew of it was lost.
        #[serde(default)]
        known: bool,
    },
    /// A proxy asks; `id` is the proxy's own id for the question.
    Ask {
        id: u64,
        question: Question,
        timeout_ms: u64,
    },
    /// A proxy withdraws its question `id`.
    Withdraw { id: u64, why: Withdrawal },
    /// An approver decides request `id` (the broker's id).
    Decide { id: u64, decision: Choice },
    /// A proxy shares destination tokens it saw with its session.
    Taint { tokens: Vec<TaintToken> },
    /// A proxy shares session approvals a human gave through it.
    Approvals { approvals: Vec<SharedApproval> },
    /// A proxy shares attempts to call budgeted tools.
    Attempts { attempts: Vec<SharedAttempt> },
    /// A hook reports one event. `policy` is an absolute path (none: the starter policy),
    /// `workspace` the absolute directory the agent works in.
    Hook {
        policy: Option<String>,
        /// The hex SHA-256 the policy's content must have: a `./toolgate.yaml` the hook took
        /// without `--policy` because that content is trusted (`toolgate policy trust`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy_sha256: Option<String>,
        workspace: String,
        /// The audit log (absolute; none: `<workspace>/.toolgate/audit.jsonl`, as `wrap`).
        #[serde(default)]
        audit: Option<String>,
        event: HookEvent,
        /// The client cannot ask: an ask waits in `toolgate approvals`, the hook for up to
        /// this many milliseconds (none: the client asks itself).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hold_ms: Option<u64>,
    },
}

/// Error codes in `error` messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    Incompatible,
    Unauthenticated,
    Invalid,
    Busy,
}

/// Messages from the broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromBroker {
    Welcome {
        version: u32,
        broker_pid: u32,
    },
    Error {
        code: ErrorCode,
        message: String,
        /// The broker's protocol version.
        version: u32,
    },
    /// The decision on a proxy's question `id` (the proxy's id).
    Answer {
        id: u64,
        decision: Choice,
        reason: String,
    },
    Snapshot {
        pending: Vec<Pending>,
    },
    Added {
        request: Pending,
    },
    Resolved {
        id: u64,
        decision: Choice,
        by: String,
    },
    Withdrawn {
        id: u64,
        why: Withdrawal,
    },
    DecideResult {
        id: u64,
        accepted: bool,
        message: String,
    },
    Status {
        version: u32,
        pid: u32,
        proxies: usize,
        approvers: usize,
        pending: usize,
        /// Agent sessions with shared state, and the taint tokens they hold.
        sessions: usize,
        shared_tokens: usize,
    },
    /// Destination tokens seen by other proxies of the same session.
    Taint {
        tokens: Vec<TaintToken>,
    },
    /// Session approvals given through other proxies of the same session.
    Approvals {
        approvals: Vec<SharedApproval>,
    },
    /// Attempts to call budgeted tools through other proxies of the same session.
    Attempts {
        attempts: Vec<SharedAttempt>,
    },
    /// To a proxy, once, right after `welcome` and its session's state at that moment: all
    /// that the session's other proxies shared before it connected has been sent.
    Synced {},
    /// SHA-256 digests (hex) of destinations the user typed in a prompt of the session.
    Vouched {
        digests: Vec<String>,
    },
    /// The answer to a `hook` message.
    Verdict {
        decision: HookEffect,
        reason: String,
    },
}

/// Size limits of a batch of prompt digests: at most [`MAX_DIGESTS_PER_MESSAGE`], each 64
/// hex digits.
pub fn validate_digests(digests: &[String]) -> Result<(), String> {
    if digests.len() > MAX_DIGESTS_PER_MESSAGE {
        return Err(format!(
            "more than {MAX_DIGESTS_PER_MESSAGE} digests in one message"
        ));
    }
    if digests
        .iter()
        .any(|d| d.len() != 64 || !d.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err("a digest is not 64 hex digits".to_owned());
    }
    Ok(())
}

/// Reads one line of at most [`MAX_LINE`] bytes (without the newline). `Ok(None)` at end of
/// stream; an over-long line is an error.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
) -> std::io::Result<Option<Vec<u8>>> {
    read_line_within(reader, MAX_LINE).await
}

/// [`read_line`] with another bound (a `hook` message: [`MAX_HOOK_LINE`]).
pub async fn read_line_within<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let n = (&mut *reader)
        .take(limit)
        .read_until(b'\n', &mut buf)
        .await?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if buf.len() > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a message is longer than {max} bytes"),
        ));
    }
    Ok(Some(buf))
}

/// Serialises a message as one line.
pub fn line<T: Serialize>(message: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(message).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// The `version` of a hello, read leniently so an incompatible peer gets a clear answer.
pub fn hello_version(bytes: &[u8]) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if v.get("type")?.as_str()? != "hello" {
        return None;
    }
    v.get("version")?.as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_and_types_are_refused() {
        let ok = json!({"type":"decide","id":3,"decision":"allow_once"});
        assert_eq!(
            serde_json::from_value::<ToBroker>(ok).unwrap(),
            ToBroker::Decide {
                id: 3,
                decision: Choice::AllowOnce
            }
        );
        for bad in [
            json!({"type":"decide","id":3,"decision":"allow_once","extra":1}),
            json!({"type":"decide","id":-1,"decision":"allow_once"}),
            json!({"type":"decide","id":3,"decision":"ALLOW"}),
            json!({"type":"nope"}),
            json!({"type":"ask","id":1,"timeout_ms":5,"question":{"tool":"t","what":"w","why":"y","server":null,"provenance":null,"changes":null,"arguments":{}}}),
        ] {
            assert!(
                serde_json::from_value::<ToBroker>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn pending_round_trips() {
        let p = Pending {
            id: 7,
            question: Question {
                server: Some("mail".into()),
                tool: "send_email".into(),
                what: "send_email to `x@y`".into(),
                why: "untrusted".into(),
                provenance: None,
                changes: None,
            },
            session: Some("s".into()),
            proxy_pid: 1,
            created_ms: 2,
            expires_ms: 3,
        };
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["question"]["tool"], "send_email");
        assert_eq!(serde_json::from_value::<Pending>(v).unwrap(), p);
    }

    #[test]
    fn field_limits() {
        let mut q = Question {
            server: None,
            tool: "t".into(),
            what: "w".into(),
            why: "y".into(),
            provenance: None,
            changes: None,
        };
        assert!(q.validate().is_ok());
        q.why = "x".repeat(MAX_FIELD + 1);
        assert!(q.validate().unwrap_err().contains("why"));
    }

    #[test]
    fn shared_approvals_and_attempts_are_bounded_and_strict() {
        let ok = json!({"type":"attempts","attempts":[{"server":"mail","tool":"send","at_ms":5}]});
        let Ok(ToBroker::Attempts { attempts }) = serde_json::from_value::<ToBroker>(ok) else {
            panic!("attempts did not parse");
        };
        assert!(validate_attempts(&attempts).is_ok());
        let extra = json!({"type":"attempts","attempts":[{"server":null,"tool":"t","at_ms":1,"arguments":{}}]});
        assert!(serde_json::from_value::<ToBroker>(extra).is_err());
        let extra =
            json!({"type":"approvals","approvals":[{"server":null,"key":"k","arguments":{}}]});
        assert!(serde_json::from_value::<ToBroker>(extra).is_err());

        let attempt = |tool: &str| SharedAttempt {
            server: None,
            tool: tool.into(),
            at_ms: 0,
        };
        assert!(validate_attempts(&[attempt("")]).is_err());
        assert!(validate_attempts(&[attempt(&"t".repeat(MAX_NAME + 1))]).is_err());
        assert!(validate_attempts(&vec![attempt("t"); MAX_ATTEMPTS_PER_MESSAGE + 1]).is_err());
        let approval = |key: &str| SharedApproval {
            server: Some("mail".into()),
            key: key.into(),
        };
        assert!(validate_approvals(&[approval("k")]).is_ok());
        assert!(validate_approvals(&[approval("")]).is_err());
        assert!(validate_approvals(&[approval(&"k".repeat(MAX_FIELD + 1))]).is_err());
        assert!(validate_approvals(&vec![approval("k"); MAX_APPROVALS_PER_MESSAGE + 1]).is_err());
        // The largest valid messages fit in a line.
        let big = ToBroker::Approvals {
            approvals: vec![approval(&"k".repeat(MAX_FIELD)); MAX_APPROVALS_PER_MESSAGE],
        };
        assert!(line(&big).len() <= MAX_LINE);
        let big = ToBroker::Attempts {
            attempts: vec![
                SharedAttempt {
                    server: Some("s".repeat(MAX_NAME)),
                    tool: "t".repeat(MAX_NAME),
                    at_ms: u64::MAX,
                };
                MAX_ATTEMPTS_PER_MESSAGE
            ],
        };
        assert!(line(&big).len() <= MAX_LINE);
    }

    #[test]
    fn hook_messages_are_strict() {
        let ok = json!({"type":"hook","policy":null,"workspace":"/w","event":{"event":"before","server":"mail","tool":"send_email","arguments":{"to":"a@b.c"}}});
        let Ok(ToBroker::Hook { event, .. }) = serde_json::from_value::<ToBroker>(ok) else {
            panic!("hook did not parse");
        };
        assert!(event.validate().is_ok());
        for bad in [
            json!({"type":"hook","policy":null,"workspace":"/w","event":{"event":"before","server":null,"tool":"t","arguments":{},"extra":1}}),
            json!({"type":"hook","policy":null,"workspace":"/w","event":{"event":"later"}}),
            json!({"type":"hook","policy":null,"workspace":"/w","extra":1,"event":{"event":"session_start"}}),
            json!({"type":"hook","policy":null,"event":{"event":"prompt","text":"x"}}),
        ] {
            assert!(
                serde_json::from_value::<ToBroker>(bad.clone()).is_err(),
                "{bad}"
            );
        }
        let long = HookEvent::Before {
            server: None,
            tool: "t".repeat(MAX_NAME + 1),
            arguments: json!({}),
            output: None,
        };
        assert!(long.validate().is_err());
        assert!(validate_digests(&["ab".repeat(32)]).is_ok());
        assert!(validate_digests(&["xy".repeat(32)]).is_err());
        assert!(validate_digests(&["ab".to_owned()]).is_err());
    }

    #[tokio::test]
    async fn lines_are_bounded() {
        let mut input: &[u8] = b"{\"a\":1}\nrest";
        let mut reader = tokio::io::BufReader::new(&mut input);
        assert_eq!(read_line(&mut reader).await.unwrap().unwrap(), b"{\"a\":1}");
        assert_eq!(read_line(&mut reader).await.unwrap().unwrap(), b"rest");
        assert!(read_line(&mut reader).await.unwrap().is_none());
        let long = vec![b'x'; MAX_LINE + 10];
        let mut slice: &[u8] = &long;
        let mut reader = tokio::io::BufReader::new(&mut slice);
        assert!(read_line(&mut reader).await.is_err());
        assert_eq!(hello_version(br#"{"type":"hello","version":9}"#), Some(9));
    }
}
