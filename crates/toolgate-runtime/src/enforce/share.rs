//! What one proxy shares with the other proxies of its agent session: the seam between the
//! enforcer and where the shared state lives (the local broker for `wrap`, the gateway's
//! store for `toolgate gateway`).
//!
//! The backend imports what others shared before it decides (`take_*`), and offers what it
//! saw (`share_*`). The state itself is the policy session's; this trait only moves it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use serde::{Deserialize, Serialize};

use crate::approval::question::MAX_FIELD;
use crate::proxy::StartFuture;

/// The shared side of one agent session.
pub trait SessionShare: Send + Sync + std::fmt::Debug {
    /// Called once before the relay carries anything: receive what the session's other
    /// proxies shared so far (bounded by `within`).
    fn join(&self, within: Duration) -> StartFuture<'_>;
    /// Called before each decision: a chance to (re)connect in the background.
    fn kick(&self) {}
    /// Taint tokens other proxies saw, not yet imported.
    fn take_tokens(&self) -> Vec<TaintToken>;
    /// Session approval keys other proxies recorded, not yet imported.
    fn take_approvals(&self) -> Vec<String>;
    /// Budget attempts other proxies counted (tool, time), not yet imported.
    fn take_attempts(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    /// Digests of destinations the user typed (client hooks), not yet imported.
    fn take_vouched(&self) -> Vec<[u8; 32]> {
        Vec::new()
    }
    /// The key those digests were made with (`toolgate_policy::VouchKey`), when it can be
    /// read; without it, a digest matches nothing.
    fn vouch_key(&self) -> Option<[u8; 32]> {
        None
    }
    /// The attempt counts of `tool` (this session's total, and within the budget window,
    /// this attempt included) when the shared state counted this attempt itself (atomically,
    /// across replicas); the local count is then not used.
    fn counted(&self, _tool: &str) -> Option<(u64, u64)> {
        None
    }
    /// Offers the destination tokens an output added.
    fn share_tokens(&self, tokens: Vec<TaintToken>);
    /// Offers the session's approval keys (all of them; known ones are skipped).
    fn share_approvals(&self, keys: Vec<String>);
    /// Offers one counted attempt of a budgeted tool.
    fn share_attempt(&self, _tool: &str, _at_ms: u64) {}
    /// The accepted tool definitions changed (pins shared by every session of a server).
    fn pins_accepted(&self, _pins: &BTreeMap<String, Value>) {}
    /// A listing of the server showed these tools changed (a rug pull): the agent session's
    /// other proxies must not trust their own listings until they list again.
    fn share_tools_changed(&self, _tools: &[String]) {}
    /// True once when another proxy of the session saw the server's tools change.
    fn take_tools_changed(&self) -> bool {
        false
    }
}

/// Taint tokens in one message.
pub const MAX_TOKENS_PER_MESSAGE: usize = 1024;
/// The longest taint token, in bytes.
pub const MAX_TOKEN_LEN: usize = 512;
/// One destination token seen in a tool output, shared with the other proxies of the same
/// agent session: the canonical token and where it was seen, never the output itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaintToken {
    pub token: String,
    /// `true` when the output was untrusted (the token taints), `false` when it vouches.
    pub untrusted: bool,
    pub server: Option<String>,
    pub tool: String,
    /// Set for the fingerprint of a secret value (`token` is then its hex digest,
    /// `toolgate_policy::secret_digest`): what the value was read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// For a secret's fingerprint: the value's length in bytes (the check hashes only tokens
    /// of the lengths it holds; without it, every candidate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_len: Option<usize>,
}

impl TaintToken {
    /// The shared form of the secret fingerprints a session recorded.
    pub fn secrets(new: Vec<toolgate_policy::NewSecret>) -> Vec<TaintToken> {
        new.into_iter()
            .map(|s| TaintToken {
                token: hex::encode(s.digest),
                untrusted: true,
                server: None,
                tool: s.source.tool,
                secret: Some(s.source.what),
                secret_len: Some(s.len),
            })
            .collect()
    }

    /// Takes a shared token into `session`: a secret fingerprint, or a destination token.
    pub fn import_into(&self, session: &mut toolgate_policy::Session) {
        if let Some(what) = &self.secret {
            if let Some(digest) = hex::decode(&self.token)
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok())
            {
                session.import_secret(
                    digest,
                    self.secret_len,
                    toolgate_policy::SecretSource {
                        tool: self.tool.clone(),
                        seq: 0,
                        what: what.clone(),
                    },
                );
            }
            return;
        }
        let trust = if self.untrusted {
            toolgate_policy::OutputTrust::Untrusted
        } else {
            toolgate_policy::OutputTrust::Trusted
        };
        let source = toolgate_policy::TaintSource {
            server: self.server.clone(),
            tool: self.tool.clone(),
            seq: 0,
        };
        session.taint_mut().record_text(&self.token, trust, source);
        // Received, not seen here: never shared back.
        drop(session.taint_mut().take_recorded());
    }
}

/// Size limits of a batch of taint tokens.
pub fn validate_tokens(tokens: &[TaintToken]) -> Result<(), String> {
    if tokens.len() > MAX_TOKENS_PER_MESSAGE {
        return Err(format!(
            "more than {MAX_TOKENS_PER_MESSAGE} taint tokens in one message"
        ));
    }
    for t in tokens {
        if t.token.is_empty() || t.token.len() > MAX_TOKEN_LEN {
            return Err(format!(
                "a taint token is empty or longer than {MAX_TOKEN_LEN} bytes"
            ));
        }
        if t.tool.len() > MAX_FIELD || t.server.as_ref().is_some_and(|s| s.len() > MAX_FIELD) {
            return Err(format!("a taint source is longer than {MAX_FIELD} bytes"));
        }
    }
    Ok(())
}

/// Approval keys in one message.
pub const MAX_APPROVALS_PER_MESSAGE: usize = 4;
/// Budget attempts in one message.
pub const MAX_ATTEMPTS_PER_MESSAGE: usize = 64;
/// The longest server or tool name in a shared attempt or approval, in bytes.
pub const MAX_NAME: usize = 256;

/// A session approval shared with the other proxies of the same agent session: the server
/// it was given on and toolgate's opaque key (the normalised action or destination and the
/// tool's definition fingerprint), never the call's arguments.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedApproval {
    pub server: Option<String>,
    pub key: String,
}

/// One counted attempt to call a tool, shared so budgets count across the proxies of an
/// agent session: server, tool and time only.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedAttempt {
    pub server: Option<String>,
    pub tool: String,
    /// Unix time in milliseconds.
    pub at_ms: u64,
}

/// Whether a shared server and tool name are within the size limits (a tool, when given,
/// is not empty).
pub fn name_ok(server: Option<&str>, tool: Option<&str>) -> bool {
    server.is_none_or(|s| s.len() <= MAX_NAME)
        && tool.is_none_or(|t| !t.is_empty() && t.len() <= MAX_NAME)
}

/// Size limits of a batch of shared approvals.
pub fn validate_approvals(approvals: &[SharedApproval]) -> Result<(), String> {
    if approvals.len() > MAX_APPROVALS_PER_MESSAGE {
        return Err(format!(
            "more than {MAX_APPROVALS_PER_MESSAGE} approvals in one message"
        ));
    }
    for a in approvals {
        if a.key.is_empty() || a.key.len() > MAX_FIELD || !name_ok(a.server.as_deref(), None) {
            return Err(format!(
                "an approval key is empty or longer than {MAX_FIELD} bytes, or its server name longer than {MAX_NAME}"
            ));
        }
    }
    Ok(())
}

/// Size limits of a batch of shared attempts.
pub fn validate_attempts(attempts: &[SharedAttempt]) -> Result<(), String> {
    if attempts.len() > MAX_ATTEMPTS_PER_MESSAGE {
        return Err(format!(
            "more than {MAX_ATTEMPTS_PER_MESSAGE} attempts in one message"
        ));
    }
    if attempts
        .iter()
        .any(|a| !name_ok(a.server.as_deref(), Some(&a.tool)))
    {
        return Err(format!(
            "an attempt names an empty tool, or a tool or server longer than {MAX_NAME} bytes"
        ));
    }
    Ok(())
}

/// The destination tokens output `seq` added to `index` (`recorded`, from
/// [`toolgate_policy::TaintIndex::take_recorded`]), with their trust and source: what
/// the session's other proxies need, and nothing of the output itself.
pub fn tokens_recorded(
    index: &toolgate_policy::TaintIndex,
    recorded: Vec<Box<str>>,
    seq: u64,
) -> Vec<TaintToken> {
    use toolgate_policy::Provenance;
    let mut out: Vec<TaintToken> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for token in recorded {
        if token.len() > MAX_TOKEN_LEN || !seen.insert(token.clone()) {
            continue;
        }
        let (untrusted, source) = match index.classify(&token) {
            Provenance::Tainted(s) => (true, s),
            Provenance::Vouched(s) => (false, s),
            Provenance::Unproven => continue,
        };
        if source.seq == seq {
            out.push(TaintToken {
                token: token.into_string(),
                untrusted,
                server: source.server,
                tool: source.tool,
                secret: None,
                secret_len: None,
            });
        }
        if out.len() >= 10 * MAX_TOKENS_PER_MESSAGE {
            return out;
        }
    }
    out
}
