//! Approvals through the gateway's approvers: a question is put into the store's pending
//! set (so every replica lists it), approvers list and answer them over HTTP (`GET
//! /approvals`, `POST /approvals/<id>`, what `toolgate approvals --gateway URL` uses), and
//! the first answer wins. The asking session waits for it on whichever replica it runs.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toolgate_store::Store;

use toolgate_runtime::approval::question::{Choice, Pending, question_of};
use toolgate_runtime::approval::{Answer, AnswerFuture, ApprovalChannel, Question};

use toolgate_runtime::clock::now_ms;

/// An answer as the store keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recorded {
    pub decision: Choice,
    /// The approver who gave it.
    pub by: String,
}

/// Asks the gateway's approvers.
#[derive(Debug)]
pub struct GatewayApprovals {
    pub store: Arc<dyn Store>,
    /// The agent session the calls belong to (shown to approvers: `user / session`).
    pub session: String,
}

/// A fresh id approvers type (at most 2^53, exact in JSON everywhere).
fn new_id() -> u64 {
    let mut raw = [0u8; 8];
    let _ = getrandom::fill(&mut raw);
    (u64::from_le_bytes(raw) & ((1 << 53) - 1)).max(1)
}

impl ApprovalChannel for GatewayApprovals {
    fn name(&self) -> &'static str {
        "gateway approvers"
    }

    fn available(&self) -> bool {
        true
    }

    fn ask<'a>(&'a self, prompt: &'a Question, timeout: Duration) -> AnswerFuture<'a> {
        Box::pin(async move {
            let id = new_id();
            let created = now_ms();
            let pending = Pending {
                id,
                question: question_of(prompt),
                session: Some(self.session.clone()),
                proxy_pid: 0,
                created_ms: created,
                expires_ms: created
                    .saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
            };
            let Ok(json) = serde_json::to_string(&pending) else {
                return Answer::Deny("internal error building the question".to_owned());
            };
            let key = id.to_string();
            let ttl = u64::try_from(timeout.as_millis())
                .unwrap_or(u64::MAX)
                .saturating_add(60_000);
            if let Err(e) = self.store.put_pending(&key, &json, ttl).await {
                return Answer::Deny(format!(
                    "the question could not be put to the approvers: {e}"
                ));
            }
            let answer = self.store.wait_answer(&key, timeout).await;
            let _ = self.store.remove_pending(&key).await;
            match answer {
                Ok(Some(text)) => match serde_json::from_str::<Recorded>(&text) {
                    Ok(Recorded {
                        decision: Choice::AllowOnce,
                        ..
                    }) => Answer::AllowOnce,
                    Ok(Recorded {
                        decision: Choice::AllowSession,
                        ..
                    }) => Answer::AllowSession,
                    Ok(Recorded {
                        decision: Choice::Deny,
                        by,
                    }) => Answer::Deny(format!("the approver `{by}` denied it")),
                    Err(_) => Answer::Deny("the store holds an unreadable answer".to_owned()),
                },
                Ok(None) => Answer::Deny(format!(
                    "no approver answered within {} s (`toolgate approvals --gateway URL`)",
                    timeout.as_secs()
                )),
                Err(e) => Answer::Deny(format!("the answer could not be read: {e}")),
            }
        })
    }
}
