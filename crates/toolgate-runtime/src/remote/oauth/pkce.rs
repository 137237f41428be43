//! PKCE (RFC 7636) with S256, and the random `state`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::Digest as _;

/// `bytes` random bytes, base64url without padding.
pub fn random_string(bytes: usize) -> anyhow::Result<String> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| anyhow::anyhow!("no randomness available: {e}"))?;
    Ok(URL_SAFE_NO_PAD.encode(buf))
}

/// A code verifier (43 characters, 256 bits) and its S256 challenge.
pub fn pair() -> anyhow::Result<(String, String)> {
    let verifier = random_string(32)?;
    let challenge = s256(&verifier);
    Ok((verifier, challenge))
}

/// `BASE64URL(SHA256(verifier))`.
pub fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()))
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests {
    use super::*;

    #[test]
    fn rfc7636_appendix_b() {
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let (v, c) = pair().unwrap();
        assert_eq!(v.len(), 43);
        assert_eq!(s256(&v), c);
        assert_ne!(pair().unwrap().0, v);
    }
}
