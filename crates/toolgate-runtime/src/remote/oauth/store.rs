//! The credential store: one entry per (server URL, issuer) in `credentials.json` under
//! `$TOOLGATE_CREDENTIALS_DIR`, else `$XDG_DATA_HOME/toolgate/credentials`, else
//! `~/.local/share/toolgate/credentials` (no version in the path, so an upgrade keeps it).
//! The directory is 0700, the file 0600, written through a temporary file and a rename.
//!
//! Locks (`flock`): `credentials.lock` guards each read-modify-write of the file (held for
//! milliseconds); `<server>.lock` is held by whoever runs a browser flow or a refresh for one
//! server, so several proxies run one flow and a rotating refresh token is used once.
//!
//! Secrets are [`Secret`]s: their `Debug` is `<redacted>`; they reach only this file and the
//! authorization server.

use std::fs::{DirBuilder, File};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::fsutil::{self, LockError};

/// Environment variable that overrides the credentials directory.
pub const CREDENTIALS_DIR_ENV: &str = "TOOLGATE_CREDENTIALS_DIR";

const FORMAT_VERSION: u32 = 1;

/// A token or client secret: serialised as is, never shown by `Debug`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: String) -> Self {
        Secret(value)
    }

    /// The value, for the one request that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How the client identity was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    /// `--client-id` (secret, if any, from the environment, never stored).
    PreRegistered,
    /// RFC 7591 dynamic registration.
    Dynamic,
    /// A client ID metadata document URL.
    MetadataDocument,
}

/// The client toolgate is at one authorization server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientInfo {
    /// The client identifier.
    pub client_id: String,
    /// A secret the authorization server issued at registration (not a pre-registered one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<Secret>,
    /// How it was obtained.
    pub kind: ClientKind,
    /// The redirect URI it was registered with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    /// A secret is sent with HTTP Basic (`client_secret_basic`), not as form fields.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret_basic: bool,
}

/// Tokens from the token endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tokens {
    /// The access token.
    pub access_token: Secret,
    /// The refresh token, if one was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<Secret>,
    /// Absolute expiry (Unix seconds), if the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// When they were obtained (Unix seconds).
    pub obtained_at: u64,
    /// The granted scopes (space-separated), as the server reported them or as requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl Tokens {
    /// The `Authorization` header value.
    pub fn header(&self) -> String {
        format!("Bearer {}", self.access_token.expose())
    }

    /// True when the access token expires within the refresh margin: a minute, or half
    /// its lifetime for short-lived tokens.
    pub fn expiring(&self, now: u64) -> bool {
        let Some(expires_at) = self.expires_at else {
            return false;
        };
        let lifetime = expires_at.saturating_sub(self.obtained_at);
        let margin = (lifetime / 2).min(60);
        now.saturating_add(margin) >= expires_at
    }

    /// True when the access token has expired.
    pub fn expired(&self, now: u64) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }

    /// The granted scopes as a set.
    pub fn scopes(&self) -> std::collections::BTreeSet<String> {
        self.scope
            .as_deref()
            .unwrap_or_default()
            .split_ascii_whitespace()
            .map(str::to_owned)
            .collect()
    }
}

/// The credentials of one server at one issuer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The MCP server URL.
    pub server: String,
    /// The authorization server's issuer identifier.
    pub issuer: String,
    /// The client identity at that issuer.
    pub client: ClientInfo,
    /// The token endpoint (so a refresh needs no discovery).
    pub token_endpoint: String,
    /// The revocation endpoint, if advertised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
    /// The `resource` parameter used, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The tokens; `None` once they were refused (the client is kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    /// Last change (Unix seconds).
    pub updated_at: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File_ {
    version: u32,
    #[serde(default)]
    entries: Vec<Entry>,
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// The credential store of this user.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// A held per-server lock; released on drop.
#[derive(Debug)]
pub struct ServerLock {
    _file: File,
}

impl Store {
    /// The store in `dir`.
    pub fn at(dir: PathBuf) -> Self {
        Store { dir }
    }

    /// The store in this user's data directory (see the module docs).
    pub fn open_default() -> anyhow::Result<Self> {
        let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(dir) = non_empty(CREDENTIALS_DIR_ENV) {
            return Ok(Store::at(PathBuf::from(dir)));
        }
        if let Some(data) = non_empty("XDG_DATA_HOME").map(PathBuf::from)
            && data.is_absolute()
        {
            return Ok(Store::at(data.join("toolgate").join("credentials")));
        }
        if let Some(home) = non_empty("HOME") {
            return Ok(Store::at(
                PathBuf::from(home).join(".local/share/toolgate/credentials"),
            ));
        }
        anyhow::bail!(
            "cannot find a directory for credentials: neither `{CREDENTIALS_DIR_ENV}`, `XDG_DATA_HOME` nor `HOME` is set\n  \
             help: set `{CREDENTIALS_DIR_ENV}` to a directory"
        )
    }

    /// The credentials file.
    pub fn file(&self) -> PathBuf {
        self.dir.join("credentials.json")
    }

    fn create_dir(&self) -> anyhow::Result<()> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .with_context(|| {
                format!(
                    "cannot create the credentials directory `{}`",
                    self.dir.display()
                )
            })
    }

    /// The path of the lock file `name`, in the directory (created if missing).
    fn lock_path(&self, name: &str) -> anyhow::Result<PathBuf> {
        self.create_dir()?;
        Ok(self.dir.join(name))
    }

    /// Every entry (an absent file is an empty store).
    pub fn load(&self) -> anyhow::Result<Vec<Entry>> {
        let path = self.file();
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot read the credentials `{}`", path.display()));
            }
        };
        // The error of a damaged file never quotes its content (it holds tokens).
        let file: File_ = serde_json::from_slice(&bytes).map_err(|e| {
            anyhow::anyhow!(
                "the credentials file `{}` is damaged (line {}, column {})\n  \
                 help: delete it and run `toolgate auth login URL` again",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        anyhow::ensure!(
            file.version == FORMAT_VERSION,
            "the credentials file `{}` has format version {}, this toolgate reads {FORMAT_VERSION}\n  \
             help: use a newer toolgate, or delete the file and log in again",
            path.display(),
            file.version
        );
        Ok(file.entries)
    }

    /// The entry of `server`: at `issuer` when given, else the most recently updated one.
    pub fn find(&self, server: &str, issuer: Option<&str>) -> anyhow::Result<Option<Entry>> {
        Ok(self
            .load()?
            .into_iter()
            .filter(|e| e.server == server)
            .filter(|e| issuer.is_none_or(|i| super::metadata::same_issuer(&e.issuer, i)))
            .max_by_key(|e| e.updated_at))
    }

    /// Read-modify-write under `credentials.lock`; `f`'s entries replace the file's.
    pub fn modify<T>(&self, f: impl FnOnce(&mut Vec<Entry>) -> T) -> anyhow::Result<T> {
        let path = self.lock_path("credentials.lock")?;
        let _lock = fsutil::lock(&path).map_err(|e| match e {
            LockError::Open(e) => cannot_open_lock(e, &path),
            LockError::Lock(e) => anyhow::Error::new(e).context("cannot lock the credentials file"),
        })?;
        let mut entries = self.load()?;
        let out = f(&mut entries);
        self.save(&entries)?;
        Ok(out)
    }

    /// Replaces the entry of (`entry.server`, `entry.issuer`).
    pub fn put(&self, entry: Entry) -> anyhow::Result<()> {
        self.modify(|entries| {
            entries.retain(|e| {
                !(e.server == entry.server
                    && super::metadata::same_issuer(&e.issuer, &entry.issuer))
            });
            entries.push(entry);
        })
    }

    fn save(&self, entries: &[Entry]) -> anyhow::Result<()> {
        self.create_dir()?;
        let file = File_ {
            version: FORMAT_VERSION,
            entries: entries.to_vec(),
        };
        let mut bytes = serde_json::to_vec_pretty(&file).context("cannot encode credentials")?;
        bytes.push(b'\n');
        let path = self.file();
        let tmp = self
            .dir
            .join(format!(".credentials.{}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        fsutil::write_private(&tmp, &path, &bytes)
            .map_err(std::io::Error::from)
            .with_context(|| format!("cannot write the credentials `{}`", path.display()))
    }

    /// Takes the lock of `server` (a browser flow or a refresh), waiting at most `limit`.
    pub async fn lock_server(&self, server: &str, limit: Duration) -> anyhow::Result<ServerLock> {
        let digest = sha2::Sha256::digest(server.as_bytes());
        let name = format!("{}.lock", hex::encode(digest.get(..12).unwrap_or_default()));
        let path = self.lock_path(&name)?;
        match fsutil::lock_within(&path, limit).await {
            Ok(Some(file)) => Ok(ServerLock { _file: file }),
            Ok(None) => anyhow::bail!(
                "another toolgate held the authorization of `{server}` for longer than {limit:?}"
            ),
            Err(LockError::Open(e)) => Err(cannot_open_lock(e, &path)),
            Err(LockError::Lock(e)) => Err(anyhow::anyhow!(
                "cannot lock the credentials of `{server}`: {e}"
            )),
        }
    }
}

fn cannot_open_lock(e: std::io::Error, path: &Path) -> anyhow::Error {
    anyhow::Error::new(e).context(format!("cannot open the lock file `{}`", path.display()))
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn entry(server: &str, issuer: &str, token: &str, updated_at: u64) -> Entry {
        Entry {
            server: server.to_owned(),
            issuer: issuer.to_owned(),
            client: ClientInfo {
                client_id: "c".to_owned(),
                client_secret: Some(Secret::new("client-secret-value".to_owned())),
                kind: ClientKind::Dynamic,
                redirect_uri: None,
                secret_basic: false,
            },
            token_endpoint: "https://as.example/token".to_owned(),
            revocation_endpoint: None,
            resource: None,
            tokens: Some(Tokens {
                access_token: Secret::new(token.to_owned()),
                refresh_token: Some(Secret::new("refresh-secret-value".to_owned())),
                expires_at: Some(1000),
                obtained_at: 0,
                scope: Some("a b".to_owned()),
            }),
            updated_at,
        }
    }

    #[test]
    fn entries_per_server_and_issuer_in_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().join("creds"));
        assert!(store.load().unwrap().is_empty());
        store
            .put(entry("https://s/mcp", "https://as1", "t1", 1))
            .unwrap();
        store
            .put(entry("https://s/mcp", "https://as2", "t2", 2))
            .unwrap();
        store
            .put(entry("https://s/mcp", "https://as1/", "t3", 3))
            .unwrap();
        let all = store.load().unwrap();
        assert_eq!(all.len(), 2);
        let latest = store.find("https://s/mcp", None).unwrap().unwrap();
        assert_eq!(latest.tokens.unwrap().access_token.expose(), "t3");
        let at2 = store
            .find("https://s/mcp", Some("https://as2"))
            .unwrap()
            .unwrap();
        assert_eq!(at2.tokens.unwrap().access_token.expose(), "t2");
        assert!(store.find("https://other/mcp", None).unwrap().is_none());
        let mode = std::fs::metadata(store.file())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(dir.path().join("creds"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
    }

    #[test]
    fn debug_never_shows_secrets() {
        let shown = format!(
            "{:?}",
            entry("https://s/mcp", "https://as", "access-secret-value", 1)
        );
        for secret in [
            "access-secret-value",
            "refresh-secret-value",
            "client-secret-value",
        ] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn a_damaged_file_is_named_without_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().to_path_buf());
        std::fs::write(
            store.file(),
            b"{\"version\":1,\"entries\":[{\"server\":\"tok-secret\"",
        )
        .unwrap();
        let err = format!("{:#}", store.load().unwrap_err());
        assert!(
            err.contains("damaged") && !err.contains("tok-secret"),
            "{err}"
        );
    }

    #[test]
    fn expiry_margin() {
        let t = |obtained_at, expires_at| Tokens {
            access_token: Secret::new(String::new()),
            refresh_token: None,
            expires_at: Some(expires_at),
            obtained_at,
            scope: None,
        };
        // An hour-long token: refreshed in its last minute.
        assert!(!t(0, 3600).expiring(3539));
        assert!(t(0, 3600).expiring(3540));
        // A 10 s token: in its second half.
        assert!(!t(0, 10).expiring(4));
        assert!(t(0, 10).expiring(5));
        assert!(t(0, 10).expired(10));
    }

    #[tokio::test]
    async fn the_server_lock_excludes_and_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().to_path_buf());
        let held = store
            .lock_server("https://s/mcp", Duration::from_secs(5))
            .await
            .unwrap();
        let err = store
            .lock_server("https://s/mcp", Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("longer than"), "{err}");
        // Another server is not blocked.
        store
            .lock_server("https://t/mcp", Duration::from_secs(5))
            .await
            .unwrap();
        drop(held);
        store
            .lock_server("https://s/mcp", Duration::from_secs(5))
            .await
            .unwrap();
    }
}
