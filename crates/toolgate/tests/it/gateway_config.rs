//! `toolgate gateway check|hash-token|schema` end to end: the documented example, located
//! errors for each kind of bad file, token hashing, the published schema.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn toolgate() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("toolgate"));
    cmd.current_dir(repo_root());
    cmd.timeout(std::time::Duration::from_secs(60));
    cmd.env_remove("TOOLGATE_GATEWAY_KEY");
    cmd
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(cmd: &mut Command) -> Out {
    let out = cmd.output().unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn check(path: &Path) -> Out {
    run(toolgate().args(["gateway", "check", "--config"]).arg(path))
}

const GOOD: &str = "version: 1
listen: 127.0.0.1:0
public_url: http://127.0.0.1:8080
secret: {file: key.hex}
auth:
  tokens:
    - user: ci
      sha256: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae
servers:
  files:
    command: [mcp-server, /srv]
    policy: policy.yaml
";

/// A directory with `gateway.yaml` (`text`), a valid `policy.yaml` and `key.hex`.
fn dir_with(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), "version: 1\n").unwrap();
    std::fs::write(dir.path().join("key.hex"), "ab".repeat(32)).unwrap();
    let path = dir.path().join("gateway.yaml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

#[test]
fn a_good_file_checks_with_a_summary() {
    let (_dir, path) = dir_with(GOOD);
    let out = check(&path);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout.trim(),
        "gateway configuration is valid: 1 server: files (local); auth: 1 static token; store: in memory (one replica)"
    );
    assert_eq!(out.stderr, "");
}

#[test]
fn the_documented_example_checks() {
    // The example reads its key from TOOLGATE_GATEWAY_KEY: unset here, a warning.
    let out = check(Path::new("docs/gateway.example.yaml"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with(
            "gateway configuration is valid: 2 servers: files (local), tickets (remote); auth: jwt from https://login.example.com, 1 static token; store: rediss://toolgate:***@redis.internal:6380/0 (namespace toolgate-prod); 1 warning"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr
            .contains("the environment variable `TOOLGATE_GATEWAY_KEY` (secret.env) is not set"),
        "{}",
        out.stderr
    );
    // With the key, no warning.
    let out = run(toolgate()
        .args(["gateway", "check", "--config", "docs/gateway.example.yaml"])
        .env("TOOLGATE_GATEWAY_KEY", "cd".repeat(32)));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("warning"), "{}", out.stdout);
    assert_eq!(out.stderr, "");
}

/// Each kind of bad file: the message, the `--> file:line:column` and a `help:`.
#[test]
fn bad_files_are_located() {
    let cases: &[(&str, &str, &str, &str)] = &[
        // (replace, with, message, line:column)
        (
            "version: 1",
            "version: 3",
            "unsupported configuration version `3`",
            "1:10",
        ),
        (
            "version: 1",
            "version: \"1\"",
            "wrong type: expected a whole number",
            "1:10",
        ),
        (
            "listen: 127.0.0.1:0",
            "listen: nowhere",
            "`listen: nowhere` is not an address and port",
            "2:9",
        ),
        (
            "listen: 127.0.0.1:0",
            "listne: 127.0.0.1:0",
            "unknown field `listne`",
            "2:1",
        ),
        (
            "listen: 127.0.0.1:0\n",
            "listen: 127.0.0.1:0\nlisten: 127.0.0.1:1\n",
            "duplicate key `listen`",
            "3:1",
        ),
        (
            "http://127.0.0.1:8080",
            "http://mcp.example.com",
            "uses plain http on a host that is not loopback",
            "3:13",
        ),
        (
            "{file: key.hex}",
            "{}",
            "`secret` needs exactly one of `file` and `env`",
            "4:1",
        ),
        (
            "sha256: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
            "sha256: 2c26",
            "`sha256` is not 64 hexadecimal digits",
            "8:15",
        ),
        (
            "  files:",
            "  fi/les:",
            "invalid server name `fi/les`",
            "10:3",
        ),
        (
            "command: [mcp-server, /srv]",
            "url: ftp://x",
            "`ftp://x` is not an http(s) URL",
            "11:10",
        ),
        (
            "policy: policy.yaml",
            "policy: nope.yaml",
            "the policy `nope.yaml` cannot be read",
            "12:13",
        ),
        (
            "servers:",
            "store: {url: \"redis://u:pw@r:1\", timeout: 5 parsecs}\nservers:",
            "invalid duration `5 parsecs`",
            "9:43",
        ),
        (
            "servers:",
            "store: {url: \"memcache://u:pw@r:1\"}\nservers:",
            "`memcache://u:***@r:1` is not a redis URL",
            "9:14",
        ),
        (
            "servers:",
            "store: {url: \"redis://r:1\", path: state.redb}\nservers:",
            "`store` needs exactly one of `url` and `path`",
            "9:1",
        ),
        (
            "servers:",
            "store: {namespace: x}\nservers:",
            "`store` needs exactly one of `url` and `path`",
            "9:1",
        ),
    ];
    for (from, to, message, at) in cases {
        let text = GOOD.replacen(from, to, 1);
        assert_ne!(text, GOOD, "{from}");
        let (_dir, path) = dir_with(&text);
        let out = check(&path);
        assert_eq!(out.code, 1, "{to}: {}", out.stderr);
        assert!(
            out.stderr
                .lines()
                .any(|l| l.starts_with("error: ") && l.contains(message)),
            "{to}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains(&format!("--> {}:{at}", path.display())),
            "{to}: {}",
            out.stderr
        );
        assert!(out.stderr.contains("help:"), "{to}: {}", out.stderr);
        assert!(
            out.stderr
                .contains("gateway configuration is invalid: 1 error"),
            "{to}: {}",
            out.stderr
        );
        assert_eq!(out.stdout, "", "{to}");
    }
}

#[test]
fn a_policy_that_does_not_load_is_located_at_its_reference() {
    let (dir, path) = dir_with(GOOD);
    std::fs::write(
        dir.path().join("policy.yaml"),
        "version: 1\nrules:\n  - id: x\n",
    )
    .unwrap();
    let out = check(&path);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("error: the policy `policy.yaml` does not load: ")
            && out.stderr.contains("missing field `effect`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains(&format!("--> {}:12:13", path.display()))
    );
    assert!(out.stderr.contains("toolgate policy check --policy"));
}

#[test]
fn a_missing_file_and_a_missing_config_flag() {
    let out = check(Path::new("/nonexistent/gateway.yaml"));
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("cannot read the configuration `/nonexistent/gateway.yaml`")
    );
    let out = run(toolgate().arg("gateway"));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("needs `--config PATH`"),
        "{}",
        out.stderr
    );
}

#[test]
fn running_with_a_bad_key_fails_before_serving() {
    let (dir, path) = dir_with(GOOD);
    std::fs::write(dir.path().join("key.hex"), "abcd").unwrap();
    let out = run(toolgate().args(["gateway", "--config"]).arg(&path));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("key.hex`: the key is 2 bytes long; at least 32 are needed"),
        "{}",
        out.stderr
    );
}

#[test]
fn hash_token_prints_the_sha256() {
    // SHA-256 of "foo".
    let foo = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";
    for input in ["foo", "foo\n", "foo\r\n"] {
        let out = run(toolgate()
            .args(["gateway", "hash-token"])
            .write_stdin(input));
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(out.stdout, format!("{foo}\n"));
        assert!(!out.stderr.contains("foo\n") && !out.stdout.contains("foo\n"));
    }
    for bad in ["", "\n", "two words", "a\nb"] {
        let out = run(toolgate().args(["gateway", "hash-token"]).write_stdin(bad));
        assert_eq!(out.code, 1, "{bad:?}");
        assert_eq!(out.stdout, "");
    }
}

#[test]
fn schema_is_json_and_matches_the_published_file() {
    let out = toolgate().args(["gateway", "schema"]).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["title"], "toolgate gateway configuration");
    let published = std::fs::read_to_string(repo_root().join("docs/gateway.schema.json")).unwrap();
    let published: serde_json::Value = serde_json::from_str(&published).unwrap();
    assert_eq!(
        v, published,
        "docs/gateway.schema.json is stale: regenerate it with `toolgate gateway schema > docs/gateway.schema.json`"
    );
}

#[test]
fn a_store_file_is_one_replicas_state_beside_the_configuration() {
    let (dir, path) =
        dir_with(&GOOD.replacen("servers:", "store: {path: state/gw.redb}\nservers:", 1));
    let out = check(&path);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let file = dir.path().join("state/gw.redb");
    assert!(
        out.stdout.contains(&format!(
            "store: the file `{}` (one replica)",
            file.display()
        )),
        "{}",
        out.stdout
    );
    // `check` creates nothing.
    assert!(!file.exists());
}

#[test]
fn relative_paths_are_relative_to_the_configuration_file() {
    // Run from the parent directory with a relative --config: `policy.yaml` and `key.hex`
    // are found beside the file, not in the working directory.
    let (dir, _path) = dir_with(GOOD);
    let parent = dir.path().parent().unwrap();
    let name = dir.path().file_name().unwrap();
    let out = run(toolgate()
        .current_dir(parent)
        .args(["gateway", "check", "--config"])
        .arg(Path::new(name).join("gateway.yaml")));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stderr, "");
}

/// A bare name in `allow` that a static token has, while JWTs are accepted too: a located
/// warning that says how it is read and how to say which one is meant. Qualified, no warning.
#[test]
fn a_bare_name_both_sources_could_mean_is_a_located_warning() {
    let with_jwt = GOOD.replace(
        "auth:\n",
        "auth:\n  jwt: {issuer: https://i.example.com, jwks_url: https://i.example.com/jwks}\n",
    );
    let (_dir, path) = dir_with(&format!("{with_jwt}    allow: {{users: [ci]}}\n"));
    let out = check(&path);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("; 1 warning"), "{}", out.stdout);
    let want = format!(
        "warning: the user `ci` in `allow` of server `files` could mean a static token's user or a JWT's; it is read as `token:ci`\n  --> {}:14:21\n",
        path.display()
    );
    assert!(out.stderr.starts_with(&want), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("help: write `token:ci` for the static token's user, or `jwt:ci`"),
        "{}",
        out.stderr
    );
    let (_dir, path) = dir_with(&format!(
        "{with_jwt}    allow: {{users: [token:ci, jwt:ci]}}\n"
    ));
    let out = check(&path);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("warning"), "{}", out.stdout);
    assert_eq!(out.stderr, "");
}
