//! Session ids any replica can resume: what a session needs to be re-established (its
//! server, user, agent session and the client's `initialize` parameters), sealed with the
//! key the replicas share through their configuration (ChaCha20-Poly1305). The store never
//! holds the key, and a client can neither read nor forge an id.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The prefix of every sealed id (its format's version).
const PREFIX: &str = "tg1.";

/// What a sealed session id holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session's own id (random, hex): the key of the session on every replica.
    pub id: String,
    pub server: String,
    /// The principal's qualified name (`token:ci-bot`, `jwt:alice`): the audit's `user`.
    pub user: String,
    /// What the session is bound to: `Principal::session_key` (source, JWT issuer, user).
    /// A request from any other principal does not resume it. Absent in an id sealed by an
    /// older gateway, which then matches no one (the client initializes anew).
    #[serde(default)]
    pub principal: String,
    /// The agent session whose state the session shares (the store's key).
    pub agent: String,
    /// The client's `initialize` params (JSON text), replayed to a fresh upstream when
    /// another replica resumes the session.
    pub init: String,
    /// When the session was opened (ms since the epoch).
    pub created_ms: u64,
}

/// Seals and opens session ids.
pub struct IdSealer {
    key: LessSafeKey,
}

impl std::fmt::Debug for IdSealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdSealer { key: <redacted> }")
    }
}

/// A key for one purpose, derived from the gateway's secret.
pub fn derive(secret: &[u8; 32], purpose: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"toolgate gateway key\0");
    h.update(purpose.as_bytes());
    h.update([0]);
    h.update(secret);
    h.finalize().into()
}

impl IdSealer {
    pub fn new(secret: &[u8; 32]) -> anyhow::Result<IdSealer> {
        let key = UnboundKey::new(&CHACHA20_POLY1305, &derive(secret, "session id"))
            .map_err(|_| anyhow::anyhow!("the session id key is unusable"))?;
        Ok(IdSealer {
            key: LessSafeKey::new(key),
        })
    }

    /// The sealed id of `info`.
    pub fn seal(&self, info: &SessionInfo) -> anyhow::Result<String> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce)
            .map_err(|e| anyhow::anyhow!("no randomness from the operating system: {e}"))?;
        let mut data = serde_json::to_vec(info)?;
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(PREFIX.as_bytes()),
                &mut data,
            )
            .map_err(|_| anyhow::anyhow!("sealing the session id failed"))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(out)))
    }

    /// The session a sealed id names; `Err` says why it is not one of ours.
    pub fn open(&self, sealed: &str) -> Result<SessionInfo, &'static str> {
        let body = sealed
            .strip_prefix(PREFIX)
            .ok_or("not a session id of this gateway")?;
        let raw = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| "not a session id of this gateway")?;
        if raw.len() < NONCE_LEN {
            return Err("not a session id of this gateway");
        }
        let (nonce, sealed) = raw.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| "malformed session id")?;
        let mut data = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(PREFIX.as_bytes()), &mut data)
            .map_err(|_| "the session id was not issued by this gateway (or its key changed)")?;
        serde_json::from_slice(plain).map_err(|_| "malformed session id")
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        reason = "tests: a failed expectation should stop the test with its message"
    )]
    use super::*;

    fn info() -> SessionInfo {
        SessionInfo {
            id: "00ff".into(),
            server: "fs".into(),
            user: "token:alice".into(),
            principal: "token\0alice".into(),
            agent: "alice/x".into(),
            init: r#"{"protocolVersion":"2025-06-18"}"#.into(),
            created_ms: 1,
        }
    }

    #[test]
    fn ids_open_with_the_same_key_only_and_resist_tampering() {
        let a = IdSealer::new(&[7; 32]).unwrap();
        let b = IdSealer::new(&[7; 32]).unwrap();
        let other = IdSealer::new(&[8; 32]).unwrap();
        let id = a.seal(&info()).unwrap();
        assert!(id.is_ascii() && !id.contains(['=', '+', '/']), "{id}");
        assert_eq!(b.open(&id).unwrap(), info(), "another replica opens it");
        assert!(other.open(&id).is_err(), "another key does not");
        let mut bytes = id.clone().into_bytes();
        let last = bytes.len() - 1;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        assert!(a.open(std::str::from_utf8(&bytes).unwrap()).is_err());
        assert!(a.open("tg1.").is_err());
        assert!(a.open("abc").is_err());
        assert_ne!(a.seal(&info()).unwrap(), id, "a fresh nonce every time");
    }
}
