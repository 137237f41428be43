//! Integrity-protected `requestState` for 2026-07-28 `input_required` round trips.
//!
//! toolgate hands a client an opaque `requestState` when it needs a human's answer; the
//! client sends it back on the retry. The state is sealed with HMAC-SHA-256 under a random
//! key that lives only in this process, binds the exact call it was issued for (a digest of
//! the server, tool and canonical arguments), carries an expiry, and a nonce so one answer
//! can be used only once.
//!
//! Token format: `tg1.<hex payload JSON>.<hex HMAC-SHA-256(payload)>`.

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

const PREFIX: &str = "tg1";

/// Why a `requestState` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("the request state is not one toolgate issued (malformed)")]
    Malformed,
    #[error("the request state was altered or issued by another process (bad seal)")]
    BadSeal,
    #[error("the request state expired; ask again")]
    Expired,
    #[error("the request state was issued for a different call")]
    WrongCall,
    #[error("the request state was already used")]
    Replayed,
    #[error("cannot seed the approval key from the operating system: {0}")]
    NoRandomness(String),
}

/// What a sealed state says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedState {
    /// Format version.
    pub v: u32,
    /// The digest of the call this state was issued for (see [`call_digest`]).
    pub call: String,
    /// The `inputRequests` key whose answer is expected.
    pub input: String,
    /// Issued and expiry times, milliseconds since the Unix epoch.
    pub issued_ms: u64,
    pub expires_ms: u64,
    /// Unique per state; used once.
    pub nonce: String,
}

/// A per-process sealing key.
pub struct Sealer {
    key: [u8; 32],
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer { key: <redacted> }")
    }
}

impl Sealer {
    /// A sealer with a fresh random key from the operating system.
    pub fn random() -> Result<Sealer, SealError> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| SealError::NoRandomness(e.to_string()))?;
        Ok(Sealer { key })
    }

    /// A sealer with a fixed key: the gateway's, shared by its replicas through their
    /// configuration, so that a state sealed by one replica opens on any other.
    pub fn with_key(key: [u8; 32]) -> Sealer {
        Sealer { key }
    }

    fn mac(&self) -> Result<HmacSha256, SealError> {
        // HMAC accepts keys of any length; never fall back to another key.
        <HmacSha256 as KeyInit>::new_from_slice(&self.key).map_err(|_| SealError::BadSeal)
    }

    /// Seals a state for the call `call_digest`, expecting an answer under `input`.
    pub fn seal(
        &self,
        call_digest: &str,
        input: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<String, SealError> {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| SealError::NoRandomness(e.to_string()))?;
        let state = SealedState {
            v: 1,
            call: call_digest.to_owned(),
            input: input.to_owned(),
            issued_ms: now_ms,
            expires_ms: now_ms.saturating_add(ttl_ms),
            nonce: hex::encode(nonce),
        };
        let payload = serde_json::to_vec(&state).map_err(|_| SealError::Malformed)?;
        let mut mac = self.mac()?;
        mac.update(&payload);
        let tag = mac.finalize().into_bytes();
        Ok(format!(
            "{PREFIX}.{}.{}",
            hex::encode(&payload),
            hex::encode(tag)
        ))
    }

    /// Verifies a token's seal and expiry, and that it was issued for `call_digest`.
    /// Replay protection is the caller's (see [`NonceLedger`]).
    pub fn open(
        &self,
        token: &str,
        call_digest: &str,
        now_ms: u64,
    ) -> Result<SealedState, SealError> {
        let mut pieces = token.split('.');
        let (Some(PREFIX), Some(payload_hex), Some(tag_hex), None) =
            (pieces.next(), pieces.next(), pieces.next(), pieces.next())
        else {
            return Err(SealError::Malformed);
        };
        let payload = hex::decode(payload_hex).map_err(|_| SealError::Malformed)?;
        let tag = hex::decode(tag_hex).map_err(|_| SealError::Malformed)?;
        let mut mac = self.mac()?;
        mac.update(&payload);
        // Constant-time comparison.
        mac.verify_slice(&tag).map_err(|_| SealError::BadSeal)?;
        let state: SealedState =
            serde_json::from_slice(&payload).map_err(|_| SealError::Malformed)?;
        if state.v != 1 {
            return Err(SealError::Malformed);
        }
        if now_ms >= state.expires_ms {
            return Err(SealError::Expired);
        }
        if state.call != call_digest {
            return Err(SealError::WrongCall);
        }
        Ok(state)
    }
}

impl Sealer {
    /// The nonce and expiry of a state this key sealed (the call it is bound to is not
    /// checked): what the gateway redeems in its store, so that a state is used once across
    /// every replica. `None` for a state this key did not seal.
    pub fn nonce_of(&self, token: &str) -> Option<(String, u64)> {
        let mut pieces = token.split('.');
        let (Some(PREFIX), Some(payload_hex), Some(tag_hex), None) =
            (pieces.next(), pieces.next(), pieces.next(), pieces.next())
        else {
            return None;
        };
        let payload = hex::decode(payload_hex).ok()?;
        let tag = hex::decode(tag_hex).ok()?;
        let mut mac = self.mac().ok()?;
        mac.update(&payload);
        mac.verify_slice(&tag).ok()?;
        let state: SealedState = serde_json::from_slice(&payload).ok()?;
        Some((state.nonce, state.expires_ms))
    }
}

/// True when `token` claims to be a state toolgate issued (its `tg1.` prefix). Only such a
/// state is toolgate's to verify; any other `requestState` belongs to the upstream server's
/// own multi-round-trip flow and passes untouched.
pub fn claims_toolgate(token: &str) -> bool {
    token
        .strip_prefix(PREFIX)
        .is_some_and(|rest| rest.starts_with('.'))
}

/// Remembers the nonces of states already used, until they expire. Bounded.
#[derive(Debug, Default)]
pub struct NonceLedger {
    used: std::collections::BTreeMap<String, u64>,
}

impl NonceLedger {
    /// The most nonces remembered; older ones are dropped first (their states expire anyway).
    pub const MAX: usize = 4096;

    /// Marks `state` used; `Err(Replayed)` when it already was.
    pub fn redeem(&mut self, state: &SealedState, now_ms: u64) -> Result<(), SealError> {
        self.used.retain(|_, expires| *expires > now_ms);
        if self.used.contains_key(&state.nonce) {
            return Err(SealError::Replayed);
        }
        if self.used.len() >= Self::MAX
            && let Some(oldest) = self
                .used
                .iter()
                .min_by_key(|(_, e)| **e)
                .map(|(k, _)| k.clone())
        {
            self.used.remove(&oldest);
        }
        self.used.insert(state.nonce.clone(), state.expires_ms);
        Ok(())
    }
}

/// The digest a sealed state binds: SHA-256 over the server, the tool and the RFC 8785
/// canonical hash of the arguments (the `args_sha256` of the call's audit record).
pub fn call_digest(server: Option<&str>, tool: &str, arguments: &serde_json::Value) -> String {
    let mut hasher = Sha256::new();
    for piece in [server.unwrap_or("").as_bytes(), tool.as_bytes()] {
        hasher.update((piece.len() as u64).to_be_bytes());
        hasher.update(piece);
    }
    // A parsed value always has a canonical form; should that ever fail, no state is
    // bound to the arguments' digest, and every such call gets a digest of its own.
    match toolgate_audit::canonical_sha256(arguments) {
        Ok(args) => hasher.update(args.as_bytes()),
        Err(_) => {
            let mut nonce = [0u8; 32];
            let _ = getrandom::fill(&mut nonce);
            hasher.update(b"no canonical form");
            hasher.update(nonce);
        }
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: u64 = 1_800_000_000_000;

    fn sealer() -> Sealer {
        Sealer::with_key([7u8; 32])
    }

    fn digest() -> String {
        call_digest(
            Some("mail"),
            "send_email",
            &json!({"to": "a@b.example", "body": "x"}),
        )
    }

    #[test]
    fn round_trip() {
        let s = sealer();
        let token = s.seal(&digest(), "approval", NOW, 60_000).unwrap();
        let state = s.open(&token, &digest(), NOW + 1).unwrap();
        assert_eq!(state.input, "approval");
        assert_eq!(state.call, digest());
    }

    #[test]
    fn digest_is_canonical_and_binds_every_part() {
        let a = call_digest(Some("s"), "t", &json!({"x": 1, "y": [1, 2]}));
        let b = call_digest(Some("s"), "t", &json!({"y": [1, 2], "x": 1}));
        assert_eq!(a, b, "key order must not matter");
        assert_ne!(
            a,
            call_digest(Some("s"), "t", &json!({"x": 2, "y": [1, 2]}))
        );
        assert_ne!(
            a,
            call_digest(Some("s"), "u", &json!({"x": 1, "y": [1, 2]}))
        );
        assert_ne!(a, call_digest(None, "t", &json!({"x": 1, "y": [1, 2]})));
        // Length-prefixing keeps ("ab","c") apart from ("a","bc").
        assert_ne!(
            call_digest(Some("ab"), "c", &json!({})),
            call_digest(Some("a"), "bc", &json!({}))
        );
    }

    #[test]
    fn tampered_payload_is_refused() {
        let s = sealer();
        let token = s.seal(&digest(), "approval", NOW, 60_000).unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        // Re-encode a payload with a later expiry, keep the old tag.
        let mut state: SealedState =
            serde_json::from_slice(&hex::decode(parts[1]).unwrap()).unwrap();
        state.expires_ms += 10_000_000;
        let forged = format!(
            "tg1.{}.{}",
            hex::encode(serde_json::to_vec(&state).unwrap()),
            parts[2]
        );
        assert_eq!(s.open(&forged, &digest(), NOW), Err(SealError::BadSeal));
    }

    #[test]
    fn flipped_tag_bit_is_refused() {
        let s = sealer();
        let token = s.seal(&digest(), "approval", NOW, 60_000).unwrap();
        let mut bytes = token.into_bytes();
        let last = bytes.len() - 1;
        bytes[last] = if bytes[last] == b'0' { b'1' } else { b'0' };
        let token = String::from_utf8(bytes).unwrap();
        assert_eq!(s.open(&token, &digest(), NOW), Err(SealError::BadSeal));
    }

    #[test]
    fn another_processes_key_is_refused() {
        let token = sealer().seal(&digest(), "approval", NOW, 60_000).unwrap();
        let other = Sealer::random().unwrap();
        assert_eq!(other.open(&token, &digest(), NOW), Err(SealError::BadSeal));
    }

    #[test]
    fn state_for_another_call_is_refused() {
        let s = sealer();
        let token = s.seal(&digest(), "approval", NOW, 60_000).unwrap();
        let other = call_digest(Some("mail"), "send_email", &json!({"to": "evil@x.example"}));
        assert_eq!(s.open(&token, &other, NOW), Err(SealError::WrongCall));
    }

    #[test]
    fn expired_state_is_refused() {
        let s = sealer();
        let token = s.seal(&digest(), "approval", NOW, 1_000).unwrap();
        assert_eq!(
            s.open(&token, &digest(), NOW + 1_000),
            Err(SealError::Expired)
        );
    }

    #[test]
    fn malformed_tokens_are_refused() {
        let s = sealer();
        for bad in [
            "",
            "tg1",
            "tg2.00.00",
            "tg1.zz.00",
            "tg1.00.00.00",
            "opaque",
        ] {
            assert_eq!(
                s.open(bad, &digest(), NOW),
                Err(SealError::Malformed),
                "{bad}"
            );
        }
        // Well-formed hex without a valid tag fails the seal check first.
        for bad in ["tg1..", "tg1.00.00"] {
            assert_eq!(
                s.open(bad, &digest(), NOW),
                Err(SealError::BadSeal),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_state_is_used_once() {
        let s = sealer();
        let token = s.seal(&digest(), "approval", NOW, 60_000).unwrap();
        let state = s.open(&token, &digest(), NOW).unwrap();
        let mut ledger = NonceLedger::default();
        ledger.redeem(&state, NOW).unwrap();
        assert_eq!(ledger.redeem(&state, NOW), Err(SealError::Replayed));
    }

    #[test]
    fn ledger_stays_bounded() {
        let s = sealer();
        let mut ledger = NonceLedger::default();
        for _ in 0..NonceLedger::MAX + 10 {
            let token = s.seal(&digest(), "approval", NOW, 60_000).unwrap();
            let state = s.open(&token, &digest(), NOW).unwrap();
            ledger.redeem(&state, NOW).unwrap();
        }
        assert!(ledger.used.len() <= NonceLedger::MAX);
    }
}
