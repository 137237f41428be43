//! JWT access tokens: the header and key checks, the JWKS fetch and cache, and the `ring`
//! verifiers `jsonwebtoken` checks signatures with.

use super::{
    CLOCK_LEEWAY, Denied, JWKS_MAX_AGE, JWKS_MAX_BYTES, JWKS_TIMEOUT, JwksCache, JwtAuth, Principal,
};
use crate::config::Source;
use base64::Engine as _;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;
use std::str::FromStr as _;
use std::time::Instant;

/// The JOSE header fields needed before the signature is checked.
struct RawHeader {
    alg: String,
    kid: Option<String>,
}

fn raw_header(token: &str) -> Result<RawHeader, Denied> {
    let first = token.split('.').next().unwrap_or("");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(first)
        .map_err(|_| Denied::invalid_token("malformed token: the header is not base64url"))?;
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|_| Denied::invalid_token("malformed token: the header is not JSON"))?;
    let alg = v
        .get("alg")
        .and_then(Value::as_str)
        .ok_or_else(|| Denied::invalid_token("malformed token: the header has no `alg`"))?;
    let kid = match v.get("kid") {
        None | Some(Value::Null) => None,
        Some(Value::String(k)) => Some(k.clone()),
        Some(_) => {
            return Err(Denied::invalid_token(
                "malformed token: `kid` is not a string",
            ));
        }
    };
    Ok(RawHeader {
        alg: alg.to_owned(),
        kid,
    })
}

/// The claims of a token whose signature checked (for error messages).
fn claims_unverified(token: &str) -> Value {
    let part = token.split('.').nth(1).unwrap_or("");
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null)
}

/// A claim for a message: a string as is, anything else as JSON, shortened.
fn shown(v: Option<&Value>) -> String {
    let s = match v {
        None => return "(none)".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    if s.chars().count() > 100 {
        format!("{}…", s.chars().take(100).collect::<String>())
    } else {
        s
    }
}

/// Does the key suit `alg`? (Family, curve, and the key's own `alg` and `use` if set.)
fn key_fits(jwk: &Jwk, alg: Algorithm) -> bool {
    if let Some(PublicKeyUse::Encryption) = jwk.common.public_key_use {
        return false;
    }
    if let Some(ka) = jwk.common.key_algorithm {
        let same = matches!(
            (ka, alg),
            (KeyAlgorithm::RS256, Algorithm::RS256)
                | (KeyAlgorithm::RS384, Algorithm::RS384)
                | (KeyAlgorithm::RS512, Algorithm::RS512)
                | (KeyAlgorithm::PS256, Algorithm::PS256)
                | (KeyAlgorithm::PS384, Algorithm::PS384)
                | (KeyAlgorithm::PS512, Algorithm::PS512)
                | (KeyAlgorithm::ES256, Algorithm::ES256)
                | (KeyAlgorithm::ES384, Algorithm::ES384)
                | (KeyAlgorithm::EdDSA, Algorithm::EdDSA)
        );
        if !same {
            return false;
        }
    }
    match (&jwk.algorithm, alg) {
        (
            AlgorithmParameters::RSA(_),
            Algorithm::RS256
            | Algorithm::RS384
            | Algorithm::RS512
            | Algorithm::PS256
            | Algorithm::PS384
            | Algorithm::PS512,
        ) => true,
        (AlgorithmParameters::EllipticCurve(p), Algorithm::ES256) => p.curve == EllipticCurve::P256,
        (AlgorithmParameters::EllipticCurve(p), Algorithm::ES384) => p.curve == EllipticCurve::P384,
        (AlgorithmParameters::OctetKeyPair(p), Algorithm::EdDSA) => {
            p.curve == EllipticCurve::Ed25519
        }
        _ => false,
    }
}

impl JwtAuth {
    /// The audiences a token may carry at `server`: the configured one, and the server's
    /// own URL.
    fn audiences(&self, server: Option<&str>) -> Vec<String> {
        let mut out = vec![self.audience.clone()];
        if let Some(name) = server {
            let resource = format!("{}/servers/{name}/mcp", self.public_url);
            if resource != self.audience {
                out.push(resource);
            }
        }
        out
    }

    pub(super) async fn authenticate(
        &self,
        token: &str,
        server: Option<&str>,
    ) -> Result<Principal, Denied> {
        let header = raw_header(token)?;
        if header.alg.eq_ignore_ascii_case("none") {
            return Err(Denied::invalid_token("the token is unsigned (`alg: none`)"));
        }
        let accepted = || {
            self.algorithms
                .iter()
                .map(|a| format!("{a:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let alg = Algorithm::from_str(&header.alg)
            .ok()
            .filter(|a| self.algorithms.contains(a))
            .ok_or_else(|| {
                Denied::invalid_token(format!(
                    "algorithm `{}` is not accepted (accepted: {})",
                    shown(Some(&Value::String(header.alg.clone()))),
                    accepted()
                ))
            })?;
        let jwk = self.key_for(header.kid.as_deref(), alg).await?;
        let key = DecodingKey::from_jwk(&jwk)
            .map_err(|e| Denied::invalid_token(format!("the issuer's key cannot be used: {e}")))?;
        let mut validation = Validation::new(alg);
        validation.algorithms = vec![alg];
        validation.leeway = CLOCK_LEEWAY.as_secs();
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.set_issuer(&[self.issuer.as_str()]);
        let audiences = self.audiences(server);
        validation.set_audience(&audiences);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<Value>(token, &key, &validation)
            .map_err(|e| self.describe(e.kind(), token, &audiences))?;
        let claims = data.claims;
        let user = match claims.get(&self.user_claim) {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => {
                return Err(Denied::invalid_token(format!(
                    "the token has no `{}` claim naming the user",
                    self.user_claim
                )));
            }
        };
        let groups = match claims.get(&self.groups_claim) {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        if !self.scopes.is_empty() {
            let mut granted: Vec<&str> = Vec::new();
            for claim in ["scope", "scp"] {
                match claims.get(claim) {
                    Some(Value::String(s)) => granted.extend(s.split_whitespace()),
                    Some(Value::Array(items)) => {
                        granted.extend(items.iter().filter_map(Value::as_str));
                    }
                    _ => {}
                }
            }
            let missing: Vec<&str> = self
                .scopes
                .iter()
                .map(String::as_str)
                .filter(|s| !granted.contains(s))
                .collect();
            if !missing.is_empty() {
                return Err(Denied::Unauthenticated {
                    error: "insufficient_scope",
                    description: format!(
                        "the token lacks the scope{} `{}`",
                        if missing.len() == 1 { "" } else { "s" },
                        missing.join("`, `")
                    ),
                });
            }
        }
        Ok(Principal {
            user,
            groups,
            source: Source::Jwt,
            issuer: Some(self.issuer.clone()),
        })
    }

    /// A precise reason for a failed `decode`.
    fn describe(&self, kind: &ErrorKind, token: &str, audiences: &[String]) -> Denied {
        let claims = || claims_unverified(token);
        Denied::invalid_token(match kind {
            ErrorKind::ExpiredSignature => {
                format!("the token expired (`exp` {})", shown(claims().get("exp")))
            }
            ErrorKind::ImmatureSignature => format!(
                "the token is not valid yet (`nbf` {})",
                shown(claims().get("nbf"))
            ),
            ErrorKind::InvalidAudience => format!(
                "wrong audience `{}` (expected `{}`)",
                shown(claims().get("aud")),
                audiences.join("` or `")
            ),
            ErrorKind::InvalidIssuer => format!(
                "wrong issuer `{}` (expected `{}`)",
                shown(claims().get("iss")),
                self.issuer
            ),
            ErrorKind::InvalidSignature => "bad signature".to_owned(),
            ErrorKind::MissingRequiredClaim(c) => format!("the token has no `{c}` claim"),
            ErrorKind::InvalidClaimFormat(c) => format!("the token's `{c}` claim is malformed"),
            ErrorKind::InvalidAlgorithm => "the algorithm does not match the key".to_owned(),
            ErrorKind::InvalidToken
            | ErrorKind::Base64(_)
            | ErrorKind::Json(_)
            | ErrorKind::Utf8(_) => "malformed token".to_owned(),
            other => format!("the token cannot be verified: {other:?}"),
        })
    }

    /// The key for `kid` (or the only suitable key when the token names none), fetching
    /// the JWKS when the cache is older than [`JWKS_MAX_AGE`] or lacks the key, at most
    /// once per [`JWKS_REFETCH_INTERVAL`]. Keys fetched less than six times
    /// [`JWKS_MAX_AGE`] ago still serve while refreshing fails.
    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<Jwk, Denied> {
        {
            let cache = self.lock_cache();
            let found = select(&cache.keys, kid, alg);
            let fresh = cache.fetched.is_some_and(|t| t.elapsed() < JWKS_MAX_AGE);
            if fresh && let Ok(Some(k)) = found {
                return Ok(k);
            }
            if !cache.may_fetch() {
                return cache.answer(found, || self.no_key(kid, alg, &cache));
            }
        }
        // One fetch at a time; a concurrent one may have done the work meanwhile.
        let _guard = self.fetching.lock().await;
        if self.lock_cache().may_fetch() {
            let result = self.fetch().await;
            let mut cache = self.lock_cache();
            cache.attempted = Some(Instant::now());
            match result {
                Ok(keys) => {
                    cache.keys = keys;
                    cache.fetched = Some(Instant::now());
                    cache.last_error = None;
                }
                Err(e) => {
                    tracing::warn!(jwks_url = %self.jwks_url, "cannot fetch the JWKS: {e}");
                    cache.last_error = Some(e);
                }
            }
        }
        let cache = self.lock_cache();
        let found = select(&cache.keys, kid, alg);
        cache.answer(found, || self.no_key(kid, alg, &cache))
    }

    fn no_key(&self, kid: Option<&str>, alg: Algorithm, cache: &JwksCache) -> Denied {
        if let Some(e) = &cache.last_error {
            return Denied::invalid_token(format!(
                "the issuer's signing keys cannot be fetched from `{}`: {e}",
                self.jwks_url
            ));
        }
        match kid {
            Some(k) => Denied::invalid_token(format!(
                "unknown key id `{}` (for {alg:?})",
                shown(Some(&Value::String(k.to_owned())))
            )),
            None => Denied::invalid_token(format!(
                "the token names no key (`kid`) and the issuer has no single {alg:?} key"
            )),
        }
    }

    pub(super) fn lock_cache(&self) -> std::sync::MutexGuard<'_, JwksCache> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// GETs and parses the JWKS; keys that do not parse are skipped.
    async fn fetch(&self) -> Result<Vec<Jwk>, String> {
        let fetch = async {
            let resp = self
                .http
                .get(&self.jwks_url)
                .header("accept", "application/json")
                .send()
                .await
                .map_err(|e| without_url(&e))?;
            if !resp.status().is_success() {
                return Err(format!("HTTP status {}", resp.status()));
            }
            if resp
                .content_length()
                .is_some_and(|n| n > JWKS_MAX_BYTES as u64)
            {
                return Err("the document is too large".to_owned());
            }
            let body = resp.bytes().await.map_err(|e| without_url(&e))?;
            if body.len() > JWKS_MAX_BYTES {
                return Err("the document is too large".to_owned());
            }
            Ok(body)
        };
        let body = tokio::time::timeout(JWKS_TIMEOUT, fetch)
            .await
            .map_err(|_| format!("no answer within {}s", JWKS_TIMEOUT.as_secs()))??;
        let doc: Value =
            serde_json::from_slice(&body).map_err(|e| format!("not a JSON document: {e}"))?;
        let keys = doc
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| "not a JWKS (no `keys` array)".to_owned())?;
        Ok(keys
            .iter()
            .filter_map(|k| serde_json::from_value::<Jwk>(k.clone()).ok())
            .collect())
    }
}

fn without_url(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    if e.is_timeout() {
        msg = "timed out".to_owned();
    } else if e.is_connect() {
        msg = "cannot connect".to_owned();
    }
    msg
}

/// The key named `kid` if it suits `alg` (`Err` when it exists but does not suit); with
/// no `kid`, the only key that suits `alg`.
fn select(keys: &[Jwk], kid: Option<&str>, alg: Algorithm) -> Result<Option<Jwk>, String> {
    match kid {
        Some(kid) => {
            let named: Vec<&Jwk> = keys
                .iter()
                .filter(|k| k.common.key_id.as_deref() == Some(kid))
                .collect();
            match named.iter().find(|k| key_fits(k, alg)) {
                Some(k) => Ok(Some((*k).clone())),
                None if named.is_empty() => Ok(None),
                None => Err(format!(
                    "the key `{}` is not a {alg:?} key",
                    shown(Some(&Value::String(kid.to_owned())))
                )),
            }
        }
        None => {
            let mut fitting = keys.iter().filter(|k| key_fits(k, alg));
            match (fitting.next(), fitting.next()) {
                (Some(k), None) => Ok(Some(k.clone())),
                _ => Ok(None),
            }
        }
    }
}

/// Installs the `ring` provider as `jsonwebtoken`'s process-wide crypto (once).
pub(super) fn install_crypto_provider() {
    // Err: a provider is installed already (ours, by an earlier call).
    let _ = jsonwebtoken::crypto::CryptoProvider::install_default(&ring_provider::PROVIDER);
}

/// `jsonwebtoken` verifiers backed by `ring` (verification only: the gateway signs nothing).
mod ring_provider {
    use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
    use jsonwebtoken::errors::{ErrorKind, Result};
    use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind, EncodingKey};
    use ring::signature::{self as sig, RsaPublicKeyComponents, UnparsedPublicKey};

    pub(super) static PROVIDER: CryptoProvider = CryptoProvider {
        signer_factory: new_signer,
        verifier_factory: new_verifier,
        key_utils: KeyUtils::new_unimplemented(),
    };

    fn new_signer(_: &Algorithm, _: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
        Err(ErrorKind::Signing("the gateway does not sign tokens".to_owned()).into())
    }

    struct Verifier {
        alg: Algorithm,
        key: DecodingKey,
    }

    fn new_verifier(alg: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
        let family = match alg {
            Algorithm::RS256
            | Algorithm::RS384
            | Algorithm::RS512
            | Algorithm::PS256
            | Algorithm::PS384
            | Algorithm::PS512 => AlgorithmFamily::Rsa,
            Algorithm::ES256 | Algorithm::ES384 => AlgorithmFamily::Ec,
            Algorithm::EdDSA => AlgorithmFamily::Ed,
            // Symmetric algorithms (HS*) are never accepted: the keys are public.
            _ => {
                return Err(ErrorKind::InvalidAlgorithm.into());
            }
        };
        if key.family() != family {
            return Err(ErrorKind::InvalidKeyFormat.into());
        }
        Ok(Box::new(Verifier {
            alg: *alg,
            key: key.clone(),
        }))
    }

    impl jsonwebtoken::signature::Verifier<Vec<u8>> for Verifier {
        fn verify(
            &self,
            msg: &[u8],
            signature: &Vec<u8>,
        ) -> std::result::Result<(), jsonwebtoken::signature::Error> {
            let bad = |_| jsonwebtoken::signature::Error::new();
            let rsa: Option<&'static sig::RsaParameters> = match self.alg {
                Algorithm::RS256 => Some(&sig::RSA_PKCS1_2048_8192_SHA256),
                Algorithm::RS384 => Some(&sig::RSA_PKCS1_2048_8192_SHA384),
                Algorithm::RS512 => Some(&sig::RSA_PKCS1_2048_8192_SHA512),
                Algorithm::PS256 => Some(&sig::RSA_PSS_2048_8192_SHA256),
                Algorithm::PS384 => Some(&sig::RSA_PSS_2048_8192_SHA384),
                Algorithm::PS512 => Some(&sig::RSA_PSS_2048_8192_SHA512),
                _ => None,
            };
            if let Some(params) = rsa {
                return match self.key.kind() {
                    DecodingKeyKind::RsaModulusExponent { n, e } => {
                        RsaPublicKeyComponents { n, e }.verify(params, msg, signature)
                    }
                    DecodingKeyKind::SecretOrDer(der) => {
                        UnparsedPublicKey::new(params, der).verify(msg, signature)
                    }
                }
                .map_err(bad);
            }
            let other: &'static dyn sig::VerificationAlgorithm = match self.alg {
                Algorithm::ES256 => &sig::ECDSA_P256_SHA256_FIXED,
                Algorithm::ES384 => &sig::ECDSA_P384_SHA384_FIXED,
                Algorithm::EdDSA => &sig::ED25519,
                _ => return Err(jsonwebtoken::signature::Error::new()),
            };
            let bytes = self
                .key
                .try_get_as_bytes()
                .map_err(|_| jsonwebtoken::signature::Error::new())?;
            UnparsedPublicKey::new(other, bytes)
                .verify(msg, signature)
                .map_err(bad)
        }
    }

    impl JwtVerifier for Verifier {
        fn algorithm(&self) -> Algorithm {
            self.alg
        }
    }
}
