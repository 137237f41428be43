//! A test authorization server: signing keys made at start (ES256 and EdDSA, nothing
//! committed), its JWKS served on loopback, and tokens signed on demand.
//!
//! Blocking-friendly: the server runs on its own thread and runtime, so sync tests and
//! async tests alike can use it. Dropping the [`TestIssuer`] stops it.
//!
//! ```no_run
//! use toolgate_testkit::jwt::TestIssuer;
//! let issuer = TestIssuer::start();
//! let claims = issuer.claims("alice", "https://mcp.example.com");
//! let token = issuer.token(claims);
//! // gateway.yaml: auth.jwt.issuer = issuer.issuer(), auth.jwt.jwks_url = issuer.jwks_url()
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair};
use serde_json::{Value, json};

/// The key id of the ES256 key (the one [`TestIssuer::token`] uses).
pub const ES256_KID: &str = "test-es256";
/// The key id of the Ed25519 key ([`TestIssuer::token_eddsa`]).
pub const EDDSA_KID: &str = "test-eddsa";

struct Shared {
    jwks: Mutex<Value>,
    available: AtomicBool,
    fetches: AtomicUsize,
}

/// A running test authorization server.
pub struct TestIssuer {
    addr: SocketAddr,
    es256: EcdsaKeyPair,
    eddsa: Ed25519KeyPair,
    /// Another ES256 key, never published: signs tokens that must fail.
    other: EcdsaKeyPair,
    shared: Arc<Shared>,
    /// The JWKS and metadata server (stops when dropped).
    _served: crate::http::Served,
}

fn es256_key(rng: &SystemRandom) -> EcdsaKeyPair {
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, rng).unwrap();
    EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), rng).unwrap()
}

/// The public JWK of an ES256 key.
fn es256_jwk(key: &EcdsaKeyPair, kid: &str) -> Value {
    let point = key.public_key().as_ref();
    // Uncompressed: 0x04 || x (32) || y (32).
    json!({
        "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": kid,
        "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..65]),
    })
}

async fn serve_jwks(State(shared): State<Arc<Shared>>) -> Response {
    shared.fetches.fetch_add(1, Ordering::SeqCst);
    if !shared.available.load(Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "keys unavailable").into_response();
    }
    let body = shared.jwks.lock().unwrap().clone();
    axum::Json(body).into_response()
}

impl TestIssuer {
    /// Generates the keys and starts serving `GET /jwks` and
    /// `GET /.well-known/oauth-authorization-server` on 127.0.0.1 (a free port).
    pub fn start() -> TestIssuer {
        let rng = SystemRandom::new();
        let es256 = es256_key(&rng);
        let other = es256_key(&rng);
        let ed_pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let eddsa = Ed25519KeyPair::from_pkcs8(ed_pkcs8.as_ref()).unwrap();
        let jwks = json!({"keys": [
            es256_jwk(&es256, ES256_KID),
            {"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": EDDSA_KID,
             "x": B64.encode(eddsa.public_key().as_ref())},
        ]});
        let shared = Arc::new(Shared {
            jwks: Mutex::new(jwks),
            available: AtomicBool::new(true),
            fetches: AtomicUsize::new(0),
        });
        let state = shared.clone();
        let served = crate::http::Served::start(move |addr| {
            let issuer = format!("http://{addr}");
            let metadata = json!({
                "issuer": issuer,
                "jwks_uri": format!("{issuer}/jwks"),
                "response_types_supported": ["code"],
            });
            Router::new()
                .route("/jwks", get(serve_jwks))
                .route(
                    "/.well-known/oauth-authorization-server",
                    get(move || async move { axum::Json(metadata) }),
                )
                .with_state(state)
        });
        let addr = served.addr;
        TestIssuer {
            addr,
            es256,
            eddsa,
            other,
            shared,
            _served: served,
        }
    }

    /// The issuer identifier (`iss`): `http://127.0.0.1:<port>`.
    pub fn issuer(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Where the JWKS is served.
    pub fn jwks_url(&self) -> String {
        format!("{}/jwks", self.issuer())
    }

    /// Typical claims: `iss` (this issuer), `sub`, `aud`, `iat`, `exp` in ten minutes.
    pub fn claims(&self, sub: &str, audience: &str) -> Value {
        let now = now();
        json!({"iss": self.issuer(), "sub": sub, "aud": audience, "iat": now, "exp": now + 600})
    }

    /// `claims` signed with the published ES256 key (`kid` set).
    pub fn token(&self, claims: Value) -> String {
        self.token_with_header(
            json!({"alg": "ES256", "typ": "JWT", "kid": ES256_KID}),
            claims,
        )
    }

    /// `claims` signed with the published Ed25519 key (`alg: EdDSA`, `kid` set).
    pub fn token_eddsa(&self, claims: Value) -> String {
        let header = json!({"alg": "EdDSA", "typ": "JWT", "kid": EDDSA_KID});
        let input = signing_input(&header, &claims);
        let sig = self.eddsa.sign(input.as_bytes());
        format!("{input}.{}", B64.encode(sig.as_ref()))
    }

    /// `claims` signed by a key that is not published, under the published key's `kid`:
    /// a bad signature.
    pub fn token_signed_by_other_key(&self, claims: Value) -> String {
        let header = json!({"alg": "ES256", "typ": "JWT", "kid": ES256_KID});
        sign_es256(&self.other, &header, &claims)
    }

    /// `claims` under any `header`, signed with the published ES256 key (whatever `alg`
    /// the header says): for tokens with an unknown `kid`, a wrong `alg`, no `kid`.
    pub fn token_with_header(&self, header: Value, claims: Value) -> String {
        sign_es256(&self.es256, &header, &claims)
    }

    /// The published ES256 key as a JWK.
    pub fn public_jwk(&self) -> Value {
        es256_jwk(&self.es256, ES256_KID)
    }

    /// Replaces the published key set (e.g. to simulate a rotation).
    pub fn set_jwks(&self, jwks: Value) {
        *self.shared.jwks.lock().unwrap() = jwks;
    }

    /// Adds a freshly generated ES256 key under `kid` to the published set and returns it:
    /// sign tokens with it through [`TestIssuer::token_with_key`].
    pub fn rotate_in(&self, kid: &str) -> EcdsaKeyPair {
        let rng = SystemRandom::new();
        let key = es256_key(&rng);
        let jwk = es256_jwk(&key, kid);
        let mut jwks = self.shared.jwks.lock().unwrap();
        jwks["keys"].as_array_mut().unwrap().push(jwk);
        key
    }

    /// `claims` signed with `key` under `kid` (ES256).
    pub fn token_with_key(&self, key: &EcdsaKeyPair, kid: &str, claims: Value) -> String {
        sign_es256(
            key,
            &json!({"alg": "ES256", "typ": "JWT", "kid": kid}),
            &claims,
        )
    }

    /// `false`: `GET /jwks` answers 503 (a failing authorization server).
    pub fn set_available(&self, available: bool) {
        self.shared.available.store(available, Ordering::SeqCst);
    }

    /// How many times the JWKS was requested.
    pub fn jwks_fetches(&self) -> usize {
        self.shared.fetches.load(Ordering::SeqCst)
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `base64url(header).base64url(claims)`.
pub fn signing_input(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}",
        B64.encode(serde_json::to_vec(header).unwrap()),
        B64.encode(serde_json::to_vec(claims).unwrap())
    )
}

fn sign_es256(key: &EcdsaKeyPair, header: &Value, claims: &Value) -> String {
    let input = signing_input(header, claims);
    let sig = key.sign(&SystemRandom::new(), input.as_bytes()).unwrap();
    format!("{input}.{}", B64.encode(sig.as_ref()))
}
