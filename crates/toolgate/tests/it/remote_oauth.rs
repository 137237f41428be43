//! OAuth for remote MCP servers against a real authorization server: the TypeScript SDK's
//! MCP server, bearer middleware and authorization server router, with a provider that
//! rotates refresh tokens and revokes (`tests/oauth/server.mjs`), and a scripted user agent
//! standing in for the browser (`tests/oauth/browser.mjs`, run through `TOOLGATE_BROWSER`).
//! Everything goes through the real `toolgate auth` binary. Skips (with a message) when
//! `node` is absent, like the other npm-backed tests.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stderr,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; prints what it ran for the person reading the test output"
)]

use crate::common;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The bound of every `toolgate` run and every wait on the server.
const LIMIT: Duration = Duration::from_secs(60);

/// The test server, killed on drop.
struct AuthServer {
    child: Child,
    port: u16,
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl AuthServer {
    fn start(envs: &[(&str, &str)]) -> Option<AuthServer> {
        let (node, _) = common::node_and("@modelcontextprotocol/sdk/package.json")?;
        let script = common::repo_root().join("tests/oauth/server.mjs");
        let mut child = Command::new(node)
            .arg(&script)
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the OAuth test server");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(LIMIT)
            .expect("the OAuth test server did not report its port");
        let port = serde_json::from_str::<Value>(&line)
            .unwrap_or_else(|e| panic!("bad first line `{line}`: {e}"))["port"]
            .as_u64()
            .unwrap();
        Some(AuthServer {
            child,
            port: u16::try_from(port).unwrap(),
        })
    }

    fn mcp_url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// A request to the server's test controls (plain HTTP/1.1, bounded).
    fn control(&self, method: &str, path: &str) -> Value {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{method} {path}: {head}");
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
    }

    /// POSTs JSON to the server (plain HTTP/1.1, bounded); returns the status and body.
    fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        let body = body.to_string();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    fn stats(&self) -> Value {
        self.control("GET", "/test/stats")
    }
}

/// A user's private state: credentials directory, the scripted browser and its log.
struct User {
    dir: tempfile::TempDir,
}

impl User {
    fn new() -> User {
        let dir = tempfile::Builder::new()
            .prefix("toolgate-oauth-")
            .tempdir()
            .unwrap();
        let (node, _) = common::node_and("@modelcontextprotocol/sdk/package.json").unwrap();
        let browser = dir.path().join("browser");
        std::fs::write(
            &browser,
            format!(
                "#!/bin/sh\nexec '{}' '{}' \"$@\"\n",
                node.display(),
                common::repo_root()
                    .join("tests/oauth/browser.mjs")
                    .display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).unwrap();
        User { dir }
    }

    fn creds_dir(&self) -> PathBuf {
        self.dir.path().join("creds")
    }

    fn creds_file(&self) -> PathBuf {
        self.creds_dir().join("credentials.json")
    }

    fn toolgate(&self, args: &[&str], extra_env: &[(&str, &str)]) -> assert_cmd::Command {
        let mut cmd = assert_cmd::Command::new(common::toolgate_bin());
        cmd.args(args)
            .env("TOOLGATE_CREDENTIALS_DIR", self.creds_dir())
            .env("TOOLGATE_BROWSER", self.dir.path().join("browser"))
            .env("OAUTH_BROWSER_LOG", self.dir.path().join("browser.log"))
            .env("TOOLGATE_LOG", "warn")
            .env_remove("XDG_DATA_HOME")
            .envs(extra_env.iter().copied())
            .timeout(LIMIT);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.toolgate(args, &[]).output().unwrap()
    }

    /// Each run of the scripted browser, in order.
    fn browser_runs(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("browser.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn store(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.creds_file()).unwrap()).unwrap()
    }

    /// Moves the stored token near the end of an hour-long life, as if time had passed.
    fn age_token(&self, remaining: i64) {
        let mut store = self.store();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let tokens = &mut store["entries"][0]["tokens"];
        tokens["expires_at"] = (now + remaining).into();
        tokens["obtained_at"] = (now + remaining - 3600).into();
        std::fs::write(self.creds_file(), serde_json::to_vec(&store).unwrap()).unwrap();
    }
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_ok(out: &Output, what: &str) -> (String, String) {
    let (stdout, stderr) = text(out);
    assert!(
        out.status.success(),
        "{what} failed ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

fn login(user: &User, server: &AuthServer, extra: &[&str]) -> (String, String) {
    let url = server.mcp_url();
    let mut args = vec!["auth", "login", url.as_str(), "--auth-timeout", "45s"];
    args.extend_from_slice(extra);
    assert_ok(&user.run(&args), "auth login")
}

fn access_token(user: &User) -> String {
    user.store()["entries"][0]["tokens"]["access_token"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn refresh_token(user: &User) -> String {
    user.store()["entries"][0]["tokens"]["refresh_token"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn login_refresh_status_and_logout_end_to_end() {
    let Some(server) = AuthServer::start(&[]) else {
        return;
    };
    let user = User::new();
    let url = server.mcp_url();
    let (stdout, stderr) = login(&user, &server, &[]);
    assert!(stdout.contains(&format!("logged in to {url}")), "{stdout}");
    // The URL is always printed for headless use.
    assert!(stderr.contains("/authorize?response_type=code"), "{stderr}");

    // Discovery (401 → RFC 9728 → RFC 8414), registration, PKCE and `resource` on both requests.
    let stats = server.stats();
    assert_eq!(stats["registrations"], 1, "{stats}");
    assert_eq!(stats["authorizations"], 1, "{stats}");
    assert_eq!(stats["codeExchanges"], 1, "{stats}");
    // Scopes from the protected resource metadata, not a hard-coded set.
    assert_eq!(
        stats["authorizeRequests"][0]["scopes"],
        serde_json::json!(["mcp:read", "mcp:write"])
    );
    assert_eq!(stats["authorizeRequests"][0]["resource"], url.as_str());
    assert_eq!(stats["tokenResources"][0], url.as_str());
    let runs = user.browser_runs();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["callback"], 200, "{runs:?}");
    let auth_url = runs[0]["url"].as_str().unwrap();
    assert!(
        auth_url.contains("code_challenge_method=S256"),
        "{auth_url}"
    );

    // A private file; `status` shows everything but the token.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(user.creds_file())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let first = access_token(&user);
    let first_refresh = refresh_token(&user);
    let (status, _) = assert_ok(&user.run(&["auth", "status"]), "auth status");
    assert!(status.contains(&server.issuer()), "{status}");
    assert!(status.contains("mcp:read mcp:write"), "{status}");
    assert!(status.contains("refreshable: yes"), "{status}");
    assert!(status.contains("dynamic registration"), "{status}");
    assert!(
        !status.contains(&first) && !status.contains(&first_refresh),
        "{status}"
    );

    // A fresh token is used as is.
    assert_ok(
        &user.run(&["auth", "status", &url, "--check"]),
        "status --check",
    );
    assert_eq!(server.stats()["refreshes"], 0);

    // Near its stored expiry it is refreshed ahead of time (before any 401): the refresh
    // token rotates, no browser runs.
    user.age_token(30);
    let (checked, _) = assert_ok(
        &user.run(&["auth", "status", &url, "--check"]),
        "status --check",
    );
    assert!(
        checked.contains("accepts the stored credentials"),
        "{checked}"
    );
    let stats = server.stats();
    assert_eq!(stats["refreshes"], 1, "{stats}");
    assert_eq!(stats["authorizations"], 1, "{stats}");
    assert_eq!(stats["tokenResources"][1], url.as_str(), "{stats}");
    assert_ne!(access_token(&user), first);
    assert_ne!(refresh_token(&user), first_refresh);
    assert_eq!(user.browser_runs().len(), 1);

    // Logout revokes both tokens at the revocation endpoint and forgets the entry.
    let (out, _) = assert_ok(&user.run(&["auth", "logout", &url]), "auth logout");
    assert!(
        out.contains("revoked the refresh token and access token"),
        "{out}"
    );
    assert_eq!(
        server.stats()["revocations"],
        serde_json::json!(["refresh_token", "access_token"])
    );
    assert_eq!(user.store()["entries"], serde_json::json!([]));
    let after = user.run(&["auth", "status", &url]);
    assert_eq!(after.status.code(), Some(1));
    assert!(
        text(&after)
            .0
            .contains(&format!("toolgate auth login {url}"))
    );
}

#[test]
fn a_revoked_refresh_token_says_to_log_in_again() {
    let Some(server) = AuthServer::start(&[]) else {
        return;
    };
    let user = User::new();
    let url = server.mcp_url();
    login(&user, &server, &[]);
    let token = access_token(&user);
    server.control("POST", "/test/revoke-refresh-tokens");
    user.age_token(-10);
    let out = user.run(&["auth", "status", &url, "--check"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("invalid_grant"), "{stderr}");
    assert!(
        stderr.contains(&format!("help: run `toolgate auth login {url}`")),
        "{stderr}"
    );
    assert!(!stderr.contains(&token), "{stderr}");
    assert_eq!(server.stats()["refreshesRefused"], 1);
    // Non-interactive: no browser was opened.
    assert_eq!(user.browser_runs().len(), 1);
    // The refused tokens are dropped; the registration is kept.
    let entry = &user.store()["entries"][0];
    assert!(entry.get("tokens").is_none(), "{entry}");
    assert!(entry["client"]["client_id"].is_string());
    // Logging in again works (and reuses the registration).
    login(&user, &server, &[]);
    assert_eq!(server.stats()["registrations"], 1);
}

#[test]
fn a_wrong_state_is_refused_and_the_wait_goes_on() {
    let Some(server) = AuthServer::start(&[("OAUTH_ISS", "1")]) else {
        return;
    };
    let user = User::new();
    let url = server.mcp_url();
    // A forged response first: answered with an error page, the real one still completes.
    let out = user
        .toolgate(
            &["auth", "login", &url, "--auth-timeout", "45s"],
            &[("OAUTH_BROWSER_FORGE", "1")],
        )
        .output()
        .unwrap();
    assert_ok(&out, "auth login with a forged callback first");
    let runs = user.browser_runs();
    assert_eq!(runs[0]["forged"], 400, "{runs:?}");
    assert_eq!(runs[0]["callback"], 200, "{runs:?}");
    assert_eq!(server.stats()["codeExchanges"], 1);

    // An authorization server that answers with a wrong state: never accepted; the flow
    // ends at `--auth-timeout` with a message naming the login command.
    let other = User::new();
    server.control("POST", "/test/mode?authorize=wrong-state");
    let out = other.run(&["auth", "login", &url, "--auth-timeout", "3s"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("did not complete within 3s"), "{stderr}");
    assert!(
        stderr.contains(&format!("toolgate auth login {url}")),
        "{stderr}"
    );
    assert_eq!(other.browser_runs()[0]["callback"], 400);
    assert_eq!(server.stats()["codeExchanges"], 1);
    assert!(!other.creds_file().exists() || other.store()["entries"][0].get("tokens").is_none());
}

#[test]
fn a_refused_authorization_ends_the_wait_with_its_error() {
    let Some(server) = AuthServer::start(&[]) else {
        return;
    };
    let user = User::new();
    server.control("POST", "/test/mode?authorize=deny");
    let out = user.run(&["auth", "login", &server.mcp_url(), "--auth-timeout", "45s"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("refused the authorization: `access_denied` (the user said no)"),
        "{stderr}"
    );
}

#[test]
fn two_concurrent_logins_run_one_browser_flow() {
    let Some(server) = AuthServer::start(&[]) else {
        return;
    };
    let user = User::new();
    let url = server.mcp_url();
    let outputs: Vec<Output> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|_| s.spawn(|| user.run(&["auth", "login", &url, "--auth-timeout", "45s"])))
            .collect();
        runs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for out in &outputs {
        assert_ok(out, "a concurrent auth login");
    }
    let stats = server.stats();
    assert_eq!(stats["authorizations"], 1, "{stats}");
    assert_eq!(stats["registrations"], 1, "{stats}");
    assert_eq!(user.browser_runs().len(), 1);
}

/// The lock file `toolgate` takes for one server's flows and refreshes.
fn server_lock_path(user: &User, url: &str) -> PathBuf {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(url.as_bytes());
    user.creds_dir()
        .join(format!("{}.lock", hex::encode(&digest[..12])))
}

/// Waits (bounded) until `n` processes are blocked on the `flock` of `path` (/proc/locks
/// lists each waiter with `->`).
fn wait_for_lock_waiters(path: &std::path::Path, n: usize) {
    use std::os::unix::fs::MetadataExt as _;
    let suffix = format!(":{} ", std::fs::metadata(path).unwrap().ino());
    let deadline = std::time::Instant::now() + LIMIT;
    loop {
        let locks = std::fs::read_to_string("/proc/locks").unwrap();
        let waiting = locks
            .lines()
            .filter(|l| l.contains("->") && l.contains(&suffix))
            .count();
        if waiting >= n {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "only {waiting} of {n} processes reached the lock:\n{locks}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn concurrent_refreshes_use_a_rotating_refresh_token_once() {
    let Some(server) = AuthServer::start(&[]) else {
        return;
    };
    if !std::path::Path::new("/proc/locks").exists() {
        eprintln!("skipped: no /proc/locks to see processes waiting for the lock");
        return;
    }
    let user = User::new();
    let url = server.mcp_url();
    login(&user, &server, &[]);
    user.age_token(20);
    // Hold the server's lock until all three have read the expiring token and wait for it,
    // so they really race for one rotating refresh token.
    let lock_path = server_lock_path(&user, &url);
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let children: Vec<std::process::Child> = (0..3)
        .map(|_| {
            let mut cmd = std::process::Command::new(common::toolgate_bin());
            cmd.args(["auth", "status", &url, "--check", "--auth-timeout", "45s"])
                .env("TOOLGATE_CREDENTIALS_DIR", user.creds_dir())
                .env("TOOLGATE_BROWSER", "/bin/false")
                .env_remove("XDG_DATA_HOME")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    wait_for_lock_waiters(&lock_path, 3);
    drop(lock);
    let outputs: Vec<Output> = std::thread::scope(|s| {
        let waits: Vec<_> = children
            .into_iter()
            .map(|child| s.spawn(move || child.wait_with_output().unwrap()))
            .collect();
        waits.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for out in &outputs {
        assert_ok(out, "a concurrent status --check");
    }
    let stats = server.stats();
    // One refresh; the others adopted its result instead of spending the rotated token.
    assert_eq!(stats["refreshes"], 1, "{stats}");
    assert_eq!(stats["refreshesRefused"], 0, "{stats}");
}

#[test]
fn insufficient_scope_steps_up_with_a_limit() {
    let Some(server) = AuthServer::start(&[]) else {
        return;
    };
    let user = User::new();
    let url = server.mcp_url();
    login(&user, &server, &["--scope", "mcp:read"]);
    assert_eq!(user.store()["entries"][0]["tokens"]["scope"], "mcp:read");

    server.control("POST", "/test/require?scope=mcp:write");
    let (stdout, _) = login(&user, &server, &[]);
    assert!(stdout.contains("mcp:read mcp:write"), "{stdout}");
    let stats = server.stats();
    assert_eq!(stats["authorizations"], 2, "{stats}");
    assert_eq!(
        stats["authorizeRequests"][1]["scopes"],
        serde_json::json!(["mcp:read", "mcp:write"])
    );

    // A scope the authorization server never grants: one step-up, then a clear refusal.
    server.control("POST", "/test/require?scope=mcp:admin");
    let out = user.run(&["auth", "login", &url, "--auth-timeout", "45s"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("still answers `insufficient_scope`"),
        "{stderr}"
    );
    assert_eq!(server.stats()["authorizations"], 3);
}

#[test]
fn a_forgotten_client_is_registered_again() {
    let Some(server) = AuthServer::start(&[]) else {
        return;
    };
    let user = User::new();
    let url = server.mcp_url();
    login(&user, &server, &[]);
    let first_client = user.store()["entries"][0]["client"]["client_id"].clone();
    server.control("POST", "/test/forget-clients");
    user.age_token(-10);
    let out = user.run(&["auth", "login", &url, "--auth-timeout", "45s"]);
    let (_, stderr) = assert_ok(&out, "auth login after the client was forgotten");
    assert!(stderr.contains("invalid_client"), "{stderr}");
    let stats = server.stats();
    assert_eq!(stats["registrations"], 2, "{stats}");
    assert_ne!(
        user.store()["entries"][0]["client"]["client_id"],
        first_client
    );
}

#[test]
fn a_missing_client_secret_variable_is_named() {
    let user = User::new();
    let out = user
        .toolgate(
            &[
                "auth",
                "login",
                "http://127.0.0.1:9/mcp",
                "--client-id",
                "app",
                "--client-secret-env",
                "TOOLGATE_TEST_NO_SUCH_SECRET",
            ],
            &[],
        )
        .env_remove("TOOLGATE_TEST_NO_SUCH_SECRET")
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("`TOOLGATE_TEST_NO_SUCH_SECRET` is not set"),
        "{stderr}"
    );
}

#[test]
fn a_pre_registered_confidential_client_keeps_its_secret_out_of_the_store() {
    let Some(server) = AuthServer::start(&[]) else {
        return;
    };
    // Registered ahead of time, as an administrator would (RFC 7591, a confidential client).
    let (status, client) = server.post_json(
        "/register",
        &serde_json::json!({
            "client_name": "pre-registered test client",
            "redirect_uris": ["http://127.0.0.1:1/callback"],
            "token_endpoint_auth_method": "client_secret_post",
            "grant_types": ["authorization_code", "refresh_token"],
        }),
    );
    assert_eq!(status, 201, "{client}");
    let id = client["client_id"].as_str().unwrap();
    let secret = client["client_secret"].as_str().unwrap();
    let user = User::new();
    let url = server.mcp_url();
    let flags = [
        "--client-id",
        id,
        "--client-secret-env",
        "TEST_CLIENT_SECRET",
    ];
    let with_secret = [("TEST_CLIENT_SECRET", secret)];
    let mut args = vec!["auth", "login", url.as_str()];
    args.extend_from_slice(&flags);
    assert_ok(
        &user.toolgate(&args, &with_secret).output().unwrap(),
        "auth login --client-id",
    );
    let stats = server.stats();
    assert_eq!(
        stats["registrations"], 1,
        "no dynamic registration: {stats}"
    );
    let stored = std::fs::read_to_string(user.creds_file()).unwrap();
    assert!(!stored.contains(secret), "the client secret was stored");
    assert_eq!(
        user.store()["entries"][0]["client"]["kind"],
        "pre_registered"
    );

    // The refresh authenticates with the secret from the environment.
    user.age_token(10);
    let mut args = vec!["auth", "status", url.as_str(), "--check"];
    args.extend_from_slice(&flags);
    assert_ok(
        &user.toolgate(&args, &with_secret).output().unwrap(),
        "status --check --client-id",
    );
    assert_eq!(server.stats()["refreshes"], 1);
}

#[test]
fn a_token_the_server_refuses_right_after_issue_is_not_a_loop() {
    let Some(server) = AuthServer::start(&[]) else {
        return;
    };
    let user = User::new();
    // Without `resource` the authorization server issues a token the MCP server (which
    // checks the audience) refuses: one flow, then a clear error, not another browser trip.
    let out = user.run(&[
        "auth",
        "login",
        &server.mcp_url(),
        "--no-resource-parameter",
        "--auth-timeout",
        "45s",
    ]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("refused the token its authorization server has just issued"),
        "{stderr}"
    );
    let stats = server.stats();
    assert_eq!(stats["authorizations"], 1, "{stats}");
    assert_eq!(
        stats["authorizeRequests"][0]["resource"],
        Value::Null,
        "{stats}"
    );
    assert_eq!(stats["tokenResources"][0], Value::Null, "{stats}");
}

#[test]
fn without_resource_metadata_in_the_challenge_the_well_known_url_is_used() {
    let Some(server) = AuthServer::start(&[("OAUTH_NO_RESOURCE_METADATA_PARAM", "1")]) else {
        return;
    };
    let user = User::new();
    // A port that was free a moment ago, for `--callback-port`.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    login(&user, &server, &["--callback-port", &port]);
    let stats = server.stats();
    assert_eq!(stats["codeExchanges"], 1, "{stats}");
    assert_eq!(
        stats["authorizeRequests"][0]["scopes"],
        serde_json::json!(["mcp:read", "mcp:write"])
    );
    let runs = user.browser_runs();
    let redirect = format!("redirect_uri=http%3A%2F%2F127.0.0.1%3A{port}%2Fcallback");
    assert!(
        runs[0]["url"].as_str().unwrap().contains(&redirect),
        "{runs:?}"
    );
}

#[test]
fn a_registration_the_server_forgot_is_not_reused_after_a_timeout() {
    let Some(server) = AuthServer::start(&[]) else {
        return;
    };
    let user = User::new();
    let url = server.mcp_url();
    login(&user, &server, &[]);
    // The tokens are refused (so the next login needs the browser) and the authorization
    // server forgets the registration: its authorize page shows an error and never
    // redirects, so that login can only time out.
    server.control("POST", "/test/revoke-refresh-tokens");
    user.age_token(-10);
    let out = user.run(&["auth", "status", &url, "--check"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out).1);
    server.control("POST", "/test/forget-clients");
    let out = user.run(&["auth", "login", &url, "--auth-timeout", "3s"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("did not complete within 3s"), "{stderr}");
    assert_eq!(
        user.browser_runs()[1]["stopped"],
        400,
        "{:?}",
        user.browser_runs()
    );
    assert_eq!(server.stats()["registrations"], 1);
    // The next login registers again and succeeds.
    login(&user, &server, &[]);
    assert_eq!(server.stats()["registrations"], 2);
}

#[test]
fn a_client_id_metadata_document_is_used_where_supported() {
    let document = "https://client.example/toolgate.json";
    let Some(server) = AuthServer::start(&[("OAUTH_CIMD", "1")]) else {
        return;
    };
    let user = User::new();
    login(&user, &server, &["--client-metadata-url", document]);
    let stats = server.stats();
    assert_eq!(stats["registrations"], 0, "{stats}");
    assert_eq!(stats["metadataDocumentClients"][0], document, "{stats}");
    let client = &user.store()["entries"][0]["client"];
    assert_eq!(client["client_id"], document);
    assert_eq!(client["kind"], "metadata_document");

    // An authorization server without support: dynamic registration, with a warning.
    let Some(plain) = AuthServer::start(&[]) else {
        return;
    };
    let other = User::new();
    let (_, stderr) = login(&other, &plain, &["--client-metadata-url", document]);
    assert!(
        stderr.contains("does not support client ID metadata documents"),
        "{stderr}"
    );
    assert_eq!(plain.stats()["registrations"], 1);
}

// --- through `toolgate wrap --url` ------------------------------------------------------

/// `toolgate wrap --url` for `server`, as `user`, with an allow-all policy.
fn wrap(user: &User, server: &AuthServer, extra: &[&str]) -> toolgate_testkit::Peer {
    let policy = user.dir.path().join("policy.yaml");
    std::fs::write(&policy, "version: 1\ndefault: allow\npacks: []\n").unwrap();
    let url = server.mcp_url();
    let mut cmd = Command::new(common::toolgate_bin());
    cmd.args([
        "wrap",
        "--server",
        "oauth-test",
        "--approval",
        "none",
        "--policy",
    ])
    .arg(&policy)
    .arg("--audit")
    .arg(user.dir.path().join("audit.jsonl"))
    .args(["--url", &url])
    .args(extra)
    .env("HOME", user.dir.path())
    .env("TOOLGATE_PINS_DIR", user.dir.path().join("pins"))
    .env("TOOLGATE_BROKER_DIR", user.dir.path().join("broker"))
    .env("TOOLGATE_CREDENTIALS_DIR", user.creds_dir())
    .env("TOOLGATE_BROWSER", user.dir.path().join("browser"))
    .env("OAUTH_BROWSER_LOG", user.dir.path().join("browser.log"))
    .env_remove("XDG_DATA_HOME");
    toolgate_testkit::Peer::spawn(cmd, false)
}

fn request(peer: &mut toolgate_testkit::Peer, id: i64, method: &str, params: Value) -> Value {
    let frame = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    peer.send(frame.to_string());
    loop {
        let m = peer.recv_json();
        if m["id"] == id && m.get("method").is_none() {
            return m;
        }
    }
}

fn initialize(peer: &mut toolgate_testkit::Peer) -> Value {
    let r = request(
        peer,
        0,
        "initialize",
        serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "oauth-wrap-test", "version": "0"}}),
    );
    peer.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    r
}

#[test]
fn wrap_logs_in_at_the_first_initialize_and_answers_it_once_authorized() {
    let Some(server) = AuthServer::start(&[]) else {
        return;
    };
    let user = User::new();
    let mut peer = wrap(&user, &server, &["--auth-timeout", "45s"]);
    let init = initialize(&mut peer);
    assert_eq!(
        init["result"]["serverInfo"]["name"], "oauth-test-server",
        "{init}"
    );
    let who = request(
        &mut peer,
        1,
        "tools/call",
        serde_json::json!({"name": "whoami", "arguments": {}}),
    );
    assert!(
        who["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .starts_with("client "),
        "{who}"
    );
    let stats = server.stats();
    assert_eq!(stats["authorizations"], 1, "{stats}");
    assert_eq!(user.browser_runs().len(), 1);
    // The token is in the store, never in the audit.
    let token = access_token(&user);
    let audit = std::fs::read_to_string(user.dir.path().join("audit.jsonl")).unwrap();
    assert!(!audit.contains(&token), "the access token is in the audit");
}

#[test]
fn wrap_refreshes_a_token_that_expires_in_the_middle_of_a_session() {
    // Tokens live 2 s: a session of several seconds outlives a few of them.
    let Some(server) = AuthServer::start(&[("OAUTH_TOKEN_TTL", "2")]) else {
        return;
    };
    let user = User::new();
    login(&user, &server, &[]);
    let mut peer = wrap(&user, &server, &["--auth-timeout", "45s"]);
    let init = initialize(&mut peer);
    assert!(init.get("result").is_some(), "{init}");
    // Calls until the server has seen a refresh (bounded), then a few more: every one of them
    // is answered, before, across and after the expiry.
    let deadline = std::time::Instant::now() + LIMIT;
    let mut id = 1;
    let mut after_refresh = 0;
    while after_refresh < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "no token refresh within {LIMIT:?}: {}",
            server.stats()
        );
        if server.stats()["refreshes"].as_u64().unwrap_or(0) >= 1 {
            after_refresh += 1;
        }
        let who = request(
            &mut peer,
            id,
            "tools/call",
            serde_json::json!({"name": "whoami", "arguments": {}}),
        );
        assert!(
            who.get("result").is_some() && who["result"]["isError"] != true,
            "call {id}: {who}"
        );
        id += 1;
    }
    let stats = server.stats();
    assert!(stats["refreshes"].as_u64().unwrap_or(0) >= 1, "{stats}");
    // Refreshed, never a second browser login.
    assert_eq!(stats["authorizations"], 1, "{stats}");
}

#[test]
fn wrap_answers_initialize_with_an_error_when_authorization_times_out() {
    let Some(server) = AuthServer::start(&[]) else {
        return;
    };
    // The authorization server answers the callback with a wrong `state`: the login never
    // completes.
    server.control("POST", "/test/mode?authorize=wrong-state");
    let user = User::new();
    let mut peer = wrap(&user, &server, &["--auth-timeout", "3s"]);
    let init = initialize(&mut peer);
    let message = init["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("toolgate auth login"), "{init}");
    assert!(
        !user.creds_file().exists()
            || user.store()["entries"]
                .as_array()
                .is_none_or(|e| e.iter().all(|x| x.get("tokens").is_none())),
        "no credentials may be stored"
    );
}

#[test]
fn doctor_probes_with_the_stored_login() {
    let Some(server) = AuthServer::start(&[]) else {
        return;
    };
    let user = User::new();
    let project = user.dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let url = server.mcp_url();
    std::fs::write(
        project.join(".mcp.json"),
        format!(r#"{{"mcpServers": {{"linear": {{"type": "http", "url": "{url}"}}}}}}"#),
    )
    .unwrap();
    let doctor = |user: &User| {
        let out = user
            .toolgate(&["doctor"], &[])
            .env("HOME", user.dir.path())
            .env("XDG_CONFIG_HOME", user.dir.path().join(".config"))
            .current_dir(&project)
            .write_stdin("")
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        let all = format!("{stdout}{stderr}");
        let line = all
            .lines()
            .find(|l| l.contains("remote server `linear`"))
            .unwrap_or_else(|| panic!("no line for the server:\n{all}"))
            .to_owned();
        (all, line)
    };
    // Before the login: the probe is refused and says how to log in.
    let (_, line) = doctor(&user);
    assert!(line.contains("toolgate auth login"), "{line}");
    login(&user, &server, &[]);
    let (all, line) = doctor(&user);
    assert!(
        line.starts_with("PASS") && line.contains("authorized"),
        "{line}"
    );
    assert!(
        !all.contains(&access_token(&user)),
        "the token was printed:\n{all}"
    );
}
