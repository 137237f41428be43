//! `toolgate approvals --gateway URL`: the gateway's pending approvals, as the broker's
//! messages, so that every mode of `toolgate approvals` (terminal, `--plain`, `--json`,
//! `--id`) works the same against either. The queue is long-polled (`GET /approvals?wait=…`)
//! and a decision is a `POST /approvals/<id>`; the first approver to answer wins.

use std::collections::VecDeque;
use std::time::Duration;

use anyhow::Context as _;

use toolgate_broker::proto::{Choice, FromBroker, Pending, ToBroker, Withdrawal};

/// How long one poll may wait for a change at the gateway.
const POLL: Duration = Duration::from_secs(25);

/// A connection to a gateway's approvals.
pub struct GatewayLink {
    http: reqwest::Client,
    base: url::Url,
    token: String,
    known: Vec<Pending>,
    outbox: VecDeque<FromBroker>,
}

impl std::fmt::Debug for GatewayLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayLink")
            .field("base", &toolgate_runtime::remote::http::redact(&self.base))
            .finish_non_exhaustive()
    }
}

impl GatewayLink {
    /// Connects to the gateway at `url` with the approver's bearer `token`: the current
    /// queue is the first message.
    pub async fn connect(
        url: &str,
        token: String,
        ca_file: Option<std::path::PathBuf>,
    ) -> anyhow::Result<GatewayLink> {
        let mut base = url::Url::parse(url).with_context(|| format!("`{url}` is not a URL"))?;
        toolgate_runtime::remote::http::check_url(&base, false, "gateway URL")?;
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let http =
            toolgate_runtime::remote::http::client(&toolgate_runtime::remote::http::NetOptions {
                allow_http: false,
                ca_file,
            })?;
        let mut link = GatewayLink {
            http,
            base,
            token,
            known: Vec::new(),
            outbox: VecDeque::new(),
        };
        let pending = link.list(None).await?;
        link.known = pending.clone();
        link.outbox.push_back(FromBroker::Snapshot { pending });
        Ok(link)
    }

    fn endpoint(&self, path: &str) -> anyhow::Result<url::Url> {
        self.base
            .join(path)
            .context("cannot build the approvals URL")
    }

    async fn list(&self, wait: Option<Duration>) -> anyhow::Result<Vec<Pending>> {
        let mut url = self.endpoint("approvals")?;
        if let Some(wait) = wait {
            let known: Vec<String> = self.known.iter().map(|p| p.id.to_string()).collect();
            url.query_pairs_mut()
                .append_pair("wait", &wait.as_secs().to_string())
                .append_pair("known", &known.join(","));
        }
        let response = self
            .http
            .get(url)
            .bearer_auth(&self.token)
            .timeout(wait.unwrap_or_default() + Duration::from_secs(15))
            .send()
            .await
            .context("the gateway cannot be reached")?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            anyhow::bail!("the gateway refused ({status}): {}", error_of(&text));
        }
        serde_json::from_str(&text).context("the gateway's queue is not readable")
    }

    /// The next event: the first queue, then what changed at each poll.
    pub async fn recv(&mut self) -> anyhow::Result<Option<FromBroker>> {
        loop {
            if let Some(m) = self.outbox.pop_front() {
                return Ok(Some(m));
            }
            let now = self.list(Some(POLL)).await?;
            for p in &now {
                if !self.known.iter().any(|k| k.id == p.id) {
                    self.outbox
                        .push_back(FromBroker::Added { request: p.clone() });
                }
            }
            for k in &self.known {
                if !now.iter().any(|p| p.id == k.id) {
                    self.outbox.push_back(FromBroker::Withdrawn {
                        id: k.id,
                        why: Withdrawal::Settled,
                    });
                }
            }
            self.known = now;
        }
    }

    /// Sends a decision; its result is the next event.
    pub async fn send(&mut self, message: &ToBroker) -> anyhow::Result<()> {
        let ToBroker::Decide { id, decision } = message else {
            return Ok(());
        };
        let (accepted, message) = self.decide(*id, *decision).await?;
        self.outbox.push_back(FromBroker::DecideResult {
            id: *id,
            accepted,
            message,
        });
        Ok(())
    }

    async fn decide(&self, id: u64, decision: Choice) -> anyhow::Result<(bool, String)> {
        let response = self
            .http
            .post(self.endpoint(&format!("approvals/{id}"))?)
            .bearer_auth(&self.token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(serde_json::json!({ "decision": decision.cli_name() }).to_string())
            .timeout(Duration::from_secs(15))
            .send()
            .await
            .context("the gateway cannot be reached")?;
        let status = response.status();
        let body: serde_json::Value =
            serde_json::from_str(&response.text().await.unwrap_or_default()).unwrap_or_default();
        let field = |name: &str| body.get(name).and_then(serde_json::Value::as_str);
        let message = field("message")
            .or_else(|| field("error"))
            .unwrap_or("no answer")
            .to_owned();
        if status.is_success() || status == reqwest::StatusCode::CONFLICT {
            return Ok((status.is_success(), message));
        }
        anyhow::bail!("the gateway refused ({status}): {message}")
    }
}

fn error_of(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
        .unwrap_or_else(|| text.chars().take(200).collect())
}
