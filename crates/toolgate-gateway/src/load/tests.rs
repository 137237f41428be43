//! Tests of loading `gateway.yaml`: what loads, and where each finding is located.

use super::*;

const GOOD: &str = "version: 1
listen: 127.0.0.1:0
public_url: https://mcp.example.com/
secret: {env: TG_TEST_KEY}
auth:
  tokens:
    - user: ci
      sha256: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae
servers:
  files:
    command: [mcp-server, /srv]
";

fn load(s: &str) -> Result<LoadedConfig, Diagnostics> {
    load_config_str(s, "gateway.yaml", Path::new("/nonexistent-base"))
}

fn first_error(s: &str) -> (String, usize, usize) {
    let d = load(s).expect_err("should not load");
    let e = d
        .items
        .iter()
        .find(|i| i.severity == toolgate_policy::diag::Severity::Error)
        .unwrap();
    let p = e.pos.unwrap_or(Pos {
        line: 0,
        column: 0,
        offset: 0,
        len: 0,
    });
    (e.message.clone(), p.line, p.column)
}

#[test]
fn good_config_loads_and_normalises() {
    let l = load(GOOD).unwrap();
    assert_eq!(l.config.public_url, "https://mcp.example.com");
    assert_eq!(
        l.config.server_url("files"),
        "https://mcp.example.com/servers/files/mcp"
    );
    assert!(l.warnings.items.is_empty());
    assert_eq!(
        l.config.idle_timeout(),
        super::super::config::DEFAULT_IDLE_TIMEOUT
    );
}

#[test]
fn located_errors() {
    let cases: &[(&str, &str, &str, usize, usize)] = &[
        (
            "version: 1\n",
            "version: 2\n",
            "unsupported configuration version `2`",
            1,
            10,
        ),
        (
            "version: 1\n",
            "version: \"1\"\n",
            "wrong type: expected a whole number",
            1,
            10,
        ),
        (
            "listen: 127.0.0.1:0",
            "listen: localhost",
            "is not an address and port",
            2,
            9,
        ),
        (
            "https://mcp.example.com/",
            "http://mcp.example.com",
            "plain http",
            3,
            13,
        ),
        (
            "https://mcp.example.com/",
            "https://mcp.example.com/?a=b",
            "query or a fragment",
            3,
            13,
        ),
        (
            "{env: TG_TEST_KEY}",
            "{env: A, file: b}",
            "exactly one of `file` and `env`",
            4,
            1,
        ),
        (
            "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
            "abc",
            "not 64 hexadecimal",
            8,
            15,
        ),
        (
            "  files:\n",
            "  bad name:\n",
            "invalid server name `bad name`",
            10,
            3,
        ),
        (
            "command: [mcp-server, /srv]",
            "command: []",
            "empty command",
            11,
            14,
        ),
        (
            "command: [mcp-server, /srv]",
            "url: https://x.example.com/mcp\n    command: [a]",
            "exactly one of `command` and `url`",
            10,
            3,
        ),
        (
            "command: [mcp-server, /srv]",
            "url: https://x.example.com/mcp\n    env: {A: b}",
            "`env` applies to a local server",
            12,
            5,
        ),
        (
            "command: [mcp-server, /srv]",
            "command: [a]\n    headers: {A: b}",
            "`headers` applies to a remote server",
            12,
            5,
        ),
        (
            "command: [mcp-server, /srv]",
            "command: [a]\n    polcy: x.yaml",
            "unknown field `polcy`",
            12,
            5,
        ),
        (
            "command: [mcp-server, /srv]",
            "command: [a]\n    policy: missing.yaml",
            "the policy `missing.yaml` cannot be read",
            12,
            13,
        ),
        (
            "auth:\n  tokens:",
            "auth:\n  jwt: {issuer: https://i.example.com, jwks_url: https://i.example.com/jwks, algorithms: [HS256]}\n  tokens:",
            "algorithm `HS256` cannot be used with a JWKS",
            6,
            91,
        ),
        (
            "auth:\n  tokens:",
            "store: {url: http://r:6379}\nauth:\n  tokens:",
            "is not a redis URL",
            5,
            14,
        ),
        (
            "auth:\n  tokens:",
            "sessions: {idle_timeout: soon}\nauth:\n  tokens:",
            "invalid duration `soon`",
            5,
            26,
        ),
        (
            "auth:\n  tokens:",
            "sessions: {max: \"5\"}\nauth:\n  tokens:",
            "wrong type: expected a whole number",
            5,
            17,
        ),
        (
            "listen: 127.0.0.1:0\n",
            "listen: 127.0.0.1:0\nlisten: 127.0.0.1:1\n",
            "duplicate key `listen`",
            3,
            1,
        ),
    ];
    for (from, to, want, line, col) in cases {
        let src = GOOD.replacen(from, to, 1);
        assert_ne!(src, GOOD, "{from}");
        let (msg, l, c) = first_error(&src);
        assert!(msg.contains(want), "{to}: {msg}");
        assert_eq!((l, c), (*line, *col), "{to}: {msg}");
    }
}

#[test]
fn duplicate_token_hashes_are_located() {
    let src = GOOD.replace(
        "servers:",
        "    - user: other\n      sha256: 2C26B46B68FFC68FF99B453C1D30413413422D706483BFA0F98A5E886266E7AE\nservers:",
    );
    let (msg, l, c) = first_error(&src);
    assert!(msg.contains("listed twice"), "{msg}");
    assert_eq!((l, c), (10, 15));
}

#[test]
fn auth_needs_a_method() {
    let src = GOOD.replace(
        "  tokens:\n    - user: ci\n      sha256: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae\n",
        "  approvers: {users: [a]}\n",
    );
    let (msg, l, _) = first_error(&src);
    assert!(msg.contains("allows nobody"), "{msg}");
    assert_eq!(l, 5);
}

#[test]
fn names_in_allow_and_approvers_say_their_source() {
    let jwt = "  jwt: {issuer: https://i.example.com, jwks_url: https://i.example.com/jwks}\n";
    let src = GOOD
        .replace("auth:\n", &format!("auth:\n{jwt}"))
        .replace(
            "      sha256: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae\n",
            "      sha256: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae\n      groups: [bots]\n  approvers: {users: [ci, token:ci, jwt:ci, alice], groups: [bots, token:nobody]}\n",
        )
        .replace("/srv]", "/srv]\n    allow: {users: [ci]}");
    let l = load(&src).unwrap_or_else(|d| panic!("{}", d.render_plain()));
    let shown: Vec<(String, usize, usize, String)> = l
        .warnings
        .items
        .iter()
        .map(|w| {
            let p = w.pos.unwrap();
            (
                w.message.clone(),
                p.line,
                p.column,
                w.help.clone().unwrap_or_default(),
            )
        })
        .collect();
    let ambiguous = |at: &str, what: &str, name: &str| {
        format!(
            "the {what} `{name}` in {at} could mean a static token's {what} or a JWT's; it is read as `token:{name}`"
        )
    };
    assert_eq!(
        shown,
        vec![
            (
                ambiguous("`auth.approvers`", "user", "ci"),
                11,
                23,
                "write `token:ci` for the static token's user, or `jwt:ci` for the user the issuer's tokens name".to_owned()
            ),
            (
                ambiguous("`auth.approvers`", "group", "bots"),
                11,
                62,
                "write `token:bots` for the static token's group, or `jwt:bots` for the group the issuer's tokens name".to_owned()
            ),
            (
                "no static token has the group `nobody` (`auth.approvers`): the name admits nobody".to_owned(),
                11,
                68,
                "add a token for it under `auth.tokens`, or remove the name".to_owned()
            ),
            (
                ambiguous("`allow` of server `files`", "user", "ci"),
                15,
                21,
                "write `token:ci` for the static token's user, or `jwt:ci` for the user the issuer's tokens name".to_owned()
            ),
        ]
    );
    // Without JWTs, a bare name is a token's, and says so only when no token has it.
    let src = GOOD.replace("/srv]", "/srv]\n    allow: {users: [ci, jwt:x, y]}");
    let l = load(&src).unwrap();
    let messages: Vec<&str> = l
        .warnings
        .items
        .iter()
        .map(|w| w.message.as_str())
        .collect();
    assert_eq!(
        messages,
        vec![
            "`jwt:x` in `allow` of server `files` names a JWT user, but `auth.jwt` is not configured: it admits nobody",
            "no static token has the user `y` (`allow` of server `files`): the name admits nobody",
        ]
    );
    let (msg, l, c) =
        first_error(&GOOD.replace("/srv]", "/srv]\n    allow: {users: [\"token:\"]}"));
    assert_eq!(
        (msg.as_str(), l, c),
        (
            "`token:` in `allow` of server `files` names no user",
            12,
            21
        )
    );
}

#[test]
fn policy_paths_resolve_against_the_config_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.yaml"), "version: 1\n").unwrap();
    std::fs::write(dir.path().join("bad.yaml"), "version: 1\nrules: 3\n").unwrap();
    let src = GOOD.replace("/srv]", "/srv]\n    policy: p.yaml");
    let l = load_config_str(&src, "g.yaml", dir.path()).unwrap();
    assert_eq!(
        l.config.servers["files"].policy.as_deref(),
        Some(dir.path().join("p.yaml").as_path())
    );
    let src = GOOD.replace("/srv]", "/srv]\n    policy: bad.yaml");
    let d = load_config_str(&src, "g.yaml", dir.path()).unwrap_err();
    let e = &d.items[0];
    assert!(
        e.message.contains("the policy `bad.yaml` does not load"),
        "{}",
        e.message
    );
    assert_eq!(e.pos.unwrap().line, 12);
}

#[test]
fn keys_decode_from_hex_and_base64() {
    let hex32 = "00".repeat(32);
    assert_eq!(key_from_text(&hex32).unwrap(), [0u8; 32]);
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    assert_eq!(key_from_text(&format!("{b64}\n")).unwrap(), [7u8; 32]);
    let long = "01".repeat(48);
    let k = key_from_text(&long).unwrap();
    use sha2::Digest as _;
    let want: [u8; 32] = sha2::Sha256::digest([1u8; 48]).into();
    assert_eq!(k, want);
    assert!(key_from_text("abcd").unwrap_err().contains("2 bytes long"));
    assert!(key_from_text("").unwrap_err().contains("empty"));
    assert!(
        key_from_text("not a key!")
            .unwrap_err()
            .contains("neither hex nor base64")
    );
}

#[test]
fn secret_key_reads_a_file_and_names_a_missing_variable() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("k");
    std::fs::write(&file, "11".repeat(32)).unwrap();
    let mut c = load(GOOD).unwrap().config;
    c.secret.env = None;
    c.secret.file = Some(file);
    assert_eq!(secret_key(&c).unwrap(), [0x11; 32]);
    c.secret.file = None;
    c.secret.env = Some("TG_SURELY_UNSET_VARIABLE_4711".to_owned());
    let e = secret_key(&c).unwrap_err().to_string();
    assert!(
        e.contains("`TG_SURELY_UNSET_VARIABLE_4711` (secret.env) is not set"),
        "{e}"
    );
}

#[test]
fn a_key_without_a_value_is_an_error_not_an_absent_key() {
    // `allow:` whose list was commented out would open the server to every user.
    let (message, line, _) = first_error(&format!("{GOOD}    allow:\n      # users: [ci]\n"));
    assert!(message.contains("no value"), "{message}");
    assert_eq!(line, GOOD.lines().count() + 1, "{message}");
    for key in ["  idle_timeout:", "  max:"] {
        // (`max` is a strict whole number, which null is not either.)
        let (message, _, _) = first_error(&format!("{GOOD}sessions:\n{key}\n"));
        assert!(
            message.contains("no value") || message.contains("expected a whole number"),
            "{key}: {message}"
        );
    }
}
