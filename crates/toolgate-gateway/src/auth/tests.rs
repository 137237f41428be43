use super::*;
use base64::Engine as _;
use serde_json::json;
use toolgate_testkit::jwt::{ES256_KID, TestIssuer, now, signing_input};

const AUD: &str = "https://mcp.example.com";
/// SHA-256 of `s3cret-token`.
const TOKEN: &str = "s3cret-token";

fn token_hash() -> String {
    hex::encode(sha2::Sha256::digest(TOKEN.as_bytes()))
}

fn config(issuer: &TestIssuer, jwt_extra: &str) -> GatewayConfig {
    let yaml = format!(
        "version: 1
listen: 127.0.0.1:0
public_url: {AUD}
secret: {{env: X}}
auth:
  jwt:
    issuer: {iss}
    jwks_url: {jwks}
{jwt_extra}
  tokens:
    - {{user: ci, sha256: {hash}, groups: [bots]}}
  approvers: {{groups: [admins]}}
servers:
  open: {{command: [a]}}
  closed: {{command: [a], allow: {{groups: [eng], users: [carol]}}}}
",
        iss = issuer.issuer(),
        jwks = issuer.jwks_url(),
        hash = token_hash(),
    );
    super::super::load::load_config_str(&yaml, "g.yaml", std::path::Path::new("/"))
        .unwrap_or_else(|d| panic!("{}", d.render_plain()))
        .config
}

impl Authenticator {
    /// [`Authenticator::authenticate`] for no particular server.
    async fn authenticate_for(&self, header: Option<&str>) -> Result<Principal, Denied> {
        self.authenticate(header, None).await
    }
}

fn authenticator(issuer: &TestIssuer, jwt_extra: &str) -> Authenticator {
    let http = toolgate_runtime::remote::http::client(&Default::default()).unwrap();
    Authenticator::new(&config(issuer, jwt_extra), http).unwrap()
}

async fn denied(auth: &Authenticator, token: &str) -> (&'static str, String) {
    match auth
        .authenticate_for(Some(&format!("Bearer {token}")))
        .await
    {
        Err(Denied::Unauthenticated { error, description }) => (error, description),
        other => panic!("expected a 401, got {other:?}"),
    }
}

#[tokio::test]
async fn a_valid_token_gives_the_principal_and_its_groups() {
    let issuer = TestIssuer::start();
    let auth = authenticator(&issuer, "");
    let mut claims = issuer.claims("alice", AUD);
    claims["groups"] = json!(["eng", 7, "ops"]);
    let p = auth
        .authenticate_for(Some(&format!("Bearer {}", issuer.token(claims))))
        .await
        .unwrap();
    assert_eq!(
        p,
        Principal {
            user: "alice".to_owned(),
            groups: vec!["eng".to_owned(), "ops".to_owned()],
            source: Source::Jwt,
            issuer: Some(issuer.issuer().to_owned()),
        }
    );
    // EdDSA, groups as one string, `aud` as an array, scheme in lower case.
    let mut claims = issuer.claims("bob", AUD);
    claims["aud"] = json!(["other", AUD]);
    claims["groups"] = json!("eng");
    let p = auth
        .authenticate_for(Some(&format!("bearer {}", issuer.token_eddsa(claims))))
        .await
        .unwrap();
    assert_eq!((p.user.as_str(), p.groups), ("bob", vec!["eng".to_owned()]));
    // The keys were fetched once.
    assert_eq!(issuer.jwks_fetches(), 1);
}

#[tokio::test]
async fn bad_tokens_are_refused_with_the_reason() {
    let issuer = TestIssuer::start();
    let auth = authenticator(&issuer, "");
    let base = || issuer.claims("alice", AUD);
    let mut expired = base();
    expired["exp"] = json!(now() - 120);
    let mut future = base();
    future["nbf"] = json!(now() + 600);
    let mut no_exp = base();
    no_exp.as_object_mut().unwrap().remove("exp");
    let mut no_sub = base();
    no_sub.as_object_mut().unwrap().remove("sub");
    // A string `exp` is not a number of seconds (no type confusion).
    let mut exp_string = base();
    exp_string["exp"] = json!((now() + 600).to_string());
    let mut wrong_aud = base();
    wrong_aud["aud"] = json!("https://elsewhere.example.com");
    let mut wrong_iss = base();
    wrong_iss["iss"] = json!("https://evil.example.com");
    let none = format!(
        "{}.",
        signing_input(&json!({"alg": "none", "typ": "JWT"}), &base())
    );
    // Algorithm confusion: HS256 keyed with the public key.
    let hs_header = json!({"alg": "HS256", "typ": "JWT", "kid": ES256_KID});
    let input = signing_input(&hs_header, &base());
    let secret = serde_json::to_vec(&issuer.public_jwk()).unwrap();
    let mac = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret),
        input.as_bytes(),
    );
    let hs256 = format!(
        "{input}.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.as_ref())
    );
    let cases: Vec<(String, &str)> = vec![
        (issuer.token(expired), "the token expired"),
        (issuer.token(future), "the token is not valid yet"),
        (issuer.token(no_exp), "the token has no `exp` claim"),
        (issuer.token(exp_string), "`exp`"),
        (
            issuer.token(no_sub),
            "the token has no `sub` claim naming the user",
        ),
        (
            issuer.token(wrong_aud),
            "wrong audience `https://elsewhere.example.com` (expected `https://mcp.example.com`)",
        ),
        (
            issuer.token(wrong_iss),
            "wrong issuer `https://evil.example.com`",
        ),
        (issuer.token_signed_by_other_key(base()), "bad signature"),
        (
            issuer.token_with_header(json!({"alg": "ES256", "kid": "nope"}), base()),
            "unknown key id `nope`",
        ),
        (none, "the token is unsigned (`alg: none`)"),
        (hs256, "algorithm `HS256` is not accepted"),
        // ES384 is not in the default list.
        (
            issuer.token_with_header(json!({"alg": "ES384", "kid": ES256_KID}), base()),
            "algorithm `ES384` is not accepted",
        ),
        ("a.b.c".to_owned(), "malformed token"),
        (
            "not-a-jwt".to_owned(),
            "neither a JWT nor a configured static token",
        ),
    ];
    for (token, want) in cases {
        let (error, description) = denied(&auth, &token).await;
        assert_eq!(error, "invalid_token", "{want}");
        assert!(description.contains(want), "{description} !~ {want}");
        assert!(!description.contains(&token), "the token is echoed");
    }
}

#[tokio::test]
async fn an_unknown_kid_refetches_at_most_once_per_interval() {
    let issuer = TestIssuer::start();
    let auth = authenticator(&issuer, "");
    let ok = issuer.token(issuer.claims("alice", AUD));
    auth.authenticate_for(Some(&format!("Bearer {ok}")))
        .await
        .unwrap();
    assert_eq!(issuer.jwks_fetches(), 1);
    // A rotated-in key is unknown to the cache: one refetch finds it.
    let key = issuer.rotate_in("k2");
    let rotated = issuer.token_with_key(&key, "k2", issuer.claims("alice", AUD));
    let _ = auth
        .authenticate_for(Some(&format!("Bearer {rotated}")))
        .await;
    // The first fetch was under 30 s ago: no refetch yet, so the key is unknown.
    assert_eq!(issuer.jwks_fetches(), 1);
    let (_, d) = denied(&auth, &rotated).await;
    assert!(d.contains("unknown key id `k2`"), "{d}");
    // Past the interval (simulated), the unknown kid triggers one fetch.
    auth.jwt.as_ref().unwrap().lock_cache().attempted =
        Some(Instant::now() - JWKS_REFETCH_INTERVAL);
    let p = auth
        .authenticate_for(Some(&format!("Bearer {rotated}")))
        .await
        .unwrap();
    assert_eq!(p.user, "alice");
    assert_eq!(issuer.jwks_fetches(), 2);
    let (_, d) = denied(
        &auth,
        &issuer.token_with_header(
            json!({"alg": "ES256", "kid": "k3"}),
            issuer.claims("a", AUD),
        ),
    )
    .await;
    assert!(d.contains("unknown key id `k3`"), "{d}");
    assert_eq!(issuer.jwks_fetches(), 2);
}

#[tokio::test]
async fn a_jwks_that_cannot_be_fetched_is_a_401() {
    let issuer = TestIssuer::start();
    issuer.set_available(false);
    let auth = authenticator(&issuer, "");
    let (error, d) = denied(&auth, &issuer.token(issuer.claims("alice", AUD))).await;
    assert_eq!(error, "invalid_token");
    assert!(
        d.contains("signing keys cannot be fetched") && d.contains("503"),
        "{d}"
    );
}

#[tokio::test]
async fn static_tokens_and_header_shapes() {
    let issuer = TestIssuer::start();
    let auth = authenticator(&issuer, "");
    let p = auth
        .authenticate_for(Some(&format!("Bearer {TOKEN}")))
        .await
        .unwrap();
    assert_eq!(
        p,
        Principal {
            user: "ci".to_owned(),
            groups: vec!["bots".to_owned()],
            source: Source::Token,
            issuer: None,
        }
    );
    let (error, _) = denied(&auth, "s3cret-tokeN").await;
    assert_eq!(error, "invalid_token");
    match auth.authenticate_for(None).await {
        Err(Denied::Unauthenticated { error: "", .. }) => {}
        other => panic!("{other:?}"),
    }
    for header in [
        "Basic YWxhZGRpbjpvcGVuc2VzYW1l",
        "Bearer",
        "Bearer a\"b",
        "Token",
    ] {
        match auth.authenticate_for(Some(header)).await {
            Err(Denied::Unauthenticated {
                error: "invalid_request",
                ..
            }) => {}
            other => panic!("{header}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn reach_and_approve() {
    let issuer = TestIssuer::start();
    let auth = authenticator(&issuer, "");
    let p = |user: &str, groups: &[&str]| Principal {
        user: user.to_owned(),
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        source: Source::Jwt,
        issuer: Some(issuer.issuer().to_owned()),
    };
    assert_eq!(auth.may_reach(&p("x", &[]), "open"), Ok(()));
    assert_eq!(auth.may_reach(&p("x", &["eng"]), "closed"), Ok(()));
    assert_eq!(auth.may_reach(&p("carol", &[]), "closed"), Ok(()));
    let d = auth.may_reach(&p("x", &["ops"]), "closed").unwrap_err();
    assert!(
        matches!(&d, Denied::Forbidden { description } if description.contains("user `jwt:x` may not reach server `closed`")),
        "{d:?}"
    );
    assert_eq!(d.status(), 403);
    assert!(auth.may_reach(&p("x", &[]), "missing").is_err());
    assert_eq!(auth.may_approve(&p("x", &["admins"])), Ok(()));
    assert!(matches!(
        auth.may_approve(&p("x", &["eng"])),
        Err(Denied::Forbidden { .. })
    ));
}

#[tokio::test]
async fn a_jwt_never_passes_as_the_static_token_user_of_the_same_name() {
    let issuer = TestIssuer::start();
    let yaml = format!(
        "version: 1
listen: 127.0.0.1:0
public_url: {AUD}
secret: {{env: X}}
auth:
  jwt: {{issuer: {iss}, jwks_url: {jwks}}}
  tokens:
    - {{user: ci-bot, sha256: {hash}, groups: [bots]}}
  approvers: {{users: [ci-bot]}}
servers:
  bare: {{command: [a], allow: {{users: [ci-bot]}}}}
  token: {{command: [a], allow: {{users: [token:ci-bot]}}}}
  jwt: {{command: [a], allow: {{users: [jwt:ci-bot]}}}}
  bots: {{command: [a], allow: {{groups: [bots]}}}}
  jwtbots: {{command: [a], allow: {{groups: [jwt:bots]}}}}
",
        iss = issuer.issuer(),
        jwks = issuer.jwks_url(),
        hash = token_hash(),
    );
    let loaded = super::super::load::load_config_str(&yaml, "g.yaml", std::path::Path::new("/"))
        .unwrap_or_else(|d| panic!("{}", d.render_plain()));
    let http = toolgate_runtime::remote::http::client(&Default::default()).unwrap();
    let auth = Authenticator::new(&loaded.config, http).unwrap();
    let by_token = auth
        .authenticate_for(Some(&format!("Bearer {TOKEN}")))
        .await
        .unwrap();
    let mut claims = issuer.claims("ci-bot", AUD);
    claims["groups"] = json!(["bots"]);
    let by_jwt = auth
        .authenticate_for(Some(&format!("Bearer {}", issuer.token(claims))))
        .await
        .unwrap();
    assert_eq!(by_token.user, by_jwt.user);
    assert_eq!(
        (by_token.name().as_str(), by_jwt.name().as_str()),
        ("token:ci-bot", "jwt:ci-bot")
    );
    assert_ne!(by_token.session_key(), by_jwt.session_key());
    for (server, token_may, jwt_may) in [
        ("bare", true, false),
        ("token", true, false),
        ("jwt", false, true),
        ("bots", true, false),
        ("jwtbots", false, true),
    ] {
        assert_eq!(
            auth.may_reach(&by_token, server).is_ok(),
            token_may,
            "{server}"
        );
        assert_eq!(auth.may_reach(&by_jwt, server).is_ok(), jwt_may, "{server}");
    }
    assert_eq!(auth.may_approve(&by_token), Ok(()));
    let d = auth.may_approve(&by_jwt).unwrap_err();
    assert_eq!(d.description(), "user `jwt:ci-bot` is not an approver");
}

#[tokio::test]
async fn a_token_for_the_advertised_resource_is_accepted_at_that_server_only() {
    let issuer = TestIssuer::start();
    let auth = authenticator(&issuer, "");
    let resource = "https://mcp.example.com/servers/open/mcp";
    let token = issuer.token(issuer.claims("alice", resource));
    let header = format!("Bearer {token}");
    let p = auth
        .authenticate(Some(&header), Some("open"))
        .await
        .unwrap();
    assert_eq!(p.name(), "jwt:alice");
    // Not at another server, nor where no server is named (approvals).
    for server in [Some("closed"), None] {
        match auth.authenticate(Some(&header), server).await {
            Err(Denied::Unauthenticated { error, description }) => {
                assert_eq!(error, "invalid_token");
                assert!(description.contains("wrong audience"), "{description}");
            }
            other => panic!("{server:?}: {other:?}"),
        }
    }
    // The configured audience still works everywhere.
    let token = issuer.token(issuer.claims("alice", AUD));
    let header = format!("Bearer {token}");
    for server in [Some("closed"), Some("open"), None] {
        assert!(auth.authenticate(Some(&header), server).await.is_ok());
    }
}

#[tokio::test]
async fn required_scopes() {
    let issuer = TestIssuer::start();
    let auth = authenticator(&issuer, "    scopes: [mcp, \"tools:call\"]");
    let mut claims = issuer.claims("alice", AUD);
    claims["scope"] = json!("openid mcp");
    let (error, d) = denied(&auth, &issuer.token(claims.clone())).await;
    assert_eq!(error, "insufficient_scope");
    assert!(d.contains("lacks the scope `tools:call`"), "{d}");
    claims["scp"] = json!(["tools:call"]);
    assert!(
        auth.authenticate_for(Some(&format!("Bearer {}", issuer.token(claims))))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn the_challenge_and_the_metadata() {
    let issuer = TestIssuer::start();
    let auth = authenticator(&issuer, "    scopes: [mcp]");
    let meta = "https://mcp.example.com/.well-known/oauth-protected-resource/servers/open/mcp";
    let d = Denied::Unauthenticated {
        error: "invalid_token",
        description: "wrong audience `\"x\"` \\ é".to_owned(),
    };
    assert_eq!(
        auth.challenge(&d, meta),
        format!(
            "Bearer resource_metadata=\"{meta}\", error=\"invalid_token\", error_description=\"wrong audience `'x'` / ?\", scope=\"mcp\""
        )
    );
    let none = Denied::Unauthenticated {
        error: "",
        description: "no bearer token".to_owned(),
    };
    assert_eq!(
        auth.challenge(&none, meta),
        format!("Bearer resource_metadata=\"{meta}\", scope=\"mcp\"")
    );
    let resource = "https://mcp.example.com/servers/open/mcp";
    assert_eq!(
        auth.metadata(resource),
        json!({
            "resource": resource,
            "authorization_servers": [issuer.issuer()],
            "bearer_methods_supported": ["header"],
            "scopes_supported": ["mcp"],
            "resource_name": "toolgate gateway: open",
        })
    );
}
