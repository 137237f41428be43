//! `toolgate gateway`: MCP over Streamable HTTP for many agents, with the same enforcement
//! as `toolgate wrap`, in one or several replicas that share their state in a store.
//!
//! - `config.rs` (the model of `gateway.yaml`), `load.rs` (strict loading), `schema.rs`;
//! - `auth.rs`: who may connect (JWT from the organisation's authorization server, or
//!   static tokens) and reach which server;
//! - `server.rs`: the HTTP side; `session.rs`: one downstream session = an upstream of its
//!   own + the relay + the enforcer; `share.rs`: the session's share of the store;
//! - `sid.rs`: sealed session ids any replica can resume; `metrics.rs`.

mod approvals;
pub mod auth;
pub mod config;
pub mod load;
mod metrics;
pub mod schema;
mod server;
mod session;
mod share;
mod sid;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use toolgate_audit::AuditWriter;
use toolgate_store::{MemoryStore, Store};

use config::GatewayConfig;
use server::{Gateway, Loaded, ServerRuntime};

/// How long a shutdown waits for the calls in flight.
const DRAIN: Duration = Duration::from_secs(30);

/// Runs the gateway until SIGTERM or SIGINT; SIGHUP reloads the configuration and policies.
/// Its diagnostics go to the `tracing` subscriber the caller installed.
pub fn run(loaded: load::LoadedConfig, path: PathBuf) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(loaded.config, loaded.base_dir, path))
}

fn replica_id(config: &GatewayConfig) -> String {
    config.replica.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "gateway".to_owned());
        format!("{host}-{}", std::process::id())
    })
}

fn base_dir(path: &Path) -> PathBuf {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Compiles every server's policy. A policy that does not load is an error here: the
/// gateway does not start (or, on reload, keeps the old configuration).
fn build_loaded(
    config: GatewayConfig,
    dir: &Path,
    http: reqwest::Client,
) -> anyhow::Result<Loaded> {
    let mut servers = BTreeMap::new();
    for (name, server) in &config.servers {
        let workspace = match &server.workspace {
            Some(w) => dir.join(w),
            None => dir.to_path_buf(),
        };
        let policy = server.policy.as_ref().map(|p| dir.join(p));
        let engine = toolgate_runtime::enforce::setup::read_policy(policy.as_deref())
            .and_then(|source| {
                toolgate_runtime::enforce::setup::engine_from_source(
                    &source,
                    policy.as_deref(),
                    &workspace,
                    None,
                )
            })
            .map(Arc::new)
            .map_err(|e| anyhow::anyhow!("server `{name}`: {e}"))?;
        servers.insert(
            name.clone(),
            Arc::new(ServerRuntime {
                name: name.clone(),
                config: server.clone(),
                engine: Ok(engine),
                workspace,
            }),
        );
    }
    let auth = auth::Authenticator::new(&config, http)?;
    Ok(Loaded {
        config,
        servers,
        auth,
    })
}

async fn open_store(
    config: &GatewayConfig,
    session_ttl: Duration,
) -> anyhow::Result<Arc<dyn Store>> {
    match &config.store {
        None => Ok(Arc::new(MemoryStore::new(session_ttl))),
        Some(store) => store_from(store, session_ttl).await,
    }
}

async fn serve(config: GatewayConfig, dir: PathBuf, path: PathBuf) -> anyhow::Result<ExitCode> {
    let replica = replica_id(&config);
    let secret = load::secret_key(&config)?;
    let http = toolgate_runtime::remote::http::client(
        &toolgate_runtime::remote::http::NetOptions::default(),
    )?;
    let idle_timeout = config.idle_timeout();
    let max_sessions = config.max_sessions();
    let store = open_store(&config, Duration::from_secs(24 * 3600).max(idle_timeout)).await?;
    let audit_path = config
        .audit
        .as_ref()
        .map(|p| dir.join(p))
        .unwrap_or_else(|| dir.join(format!("toolgate-gateway-{replica}.jsonl")));
    let audit = AuditWriter::open(&audit_path).map(Arc::new).map_err(|e| {
        format!(
            "the audit log `{}` cannot be opened ({e}); toolgate denies calls it cannot record",
            audit_path.display()
        )
    });
    if let Err(why) = &audit {
        tracing::error!("{why}");
    }
    let listen = config.listen.clone();
    let tls = config.tls.clone();
    let loaded = build_loaded(config, &dir, http.clone())?;
    let gateway = Arc::new(Gateway::new(
        replica.clone(),
        secret,
        store,
        audit,
        loaded,
        idle_timeout,
        max_sessions,
        http.clone(),
    )?);
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on `{listen}`"))?;
    let addr = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    // The one line on stdout: where it listens (port 0 picks a free one).
    let _ = writeln!(
        std::io::stdout(),
        "listening on {scheme}://{addr} (replica {replica})"
    );
    let _ = std::io::stdout().flush();
    tracing::info!(%addr, replica = %replica, "gateway listening");

    // The reaper of idle sessions.
    let reaper = {
        let gw = Arc::clone(&gateway);
        tokio::spawn(async move {
            let every =
                (gw.idle_timeout / 4).clamp(Duration::from_millis(250), Duration::from_secs(30));
            loop {
                tokio::time::sleep(every).await;
                gw.reap();
            }
        })
    };
    // SIGHUP: reload; a bad file keeps the old configuration.
    let reloader = {
        let gw = Arc::clone(&gateway);
        let path = path.clone();
        let http = http.clone();
        tokio::spawn(async move {
            let Ok(mut hup) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            else {
                return;
            };
            while hup.recv().await.is_some() {
                match reload(&gw, &path, http.clone()) {
                    Ok(()) => tracing::info!("reloaded `{}`: new sessions use it", path.display()),
                    Err(e) => tracing::error!(
                        "the new `{}` was not loaded; the old one stays in force: {e:#}",
                        path.display()
                    ),
                }
            }
        })
    };

    let router = server::router(Arc::clone(&gateway));
    // SIGTERM or SIGINT: stop accepting, finish what is in flight (up to DRAIN), then end
    // every session (each upstream gets its grace period).
    let stopping = Arc::new(tokio::sync::Notify::new());
    let shutdown = {
        let gw = Arc::clone(&gateway);
        let stopping = Arc::clone(&stopping);
        async move {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(s) => s,
                    Err(_) => std::future::pending().await,
                };
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            tracing::info!("shutting down: finishing the calls in flight");
            gw.draining.store(true, std::sync::atomic::Ordering::SeqCst);
            stopping.notify_one();
        }
    };
    let drained = async {
        stopping.notified().await;
        tokio::time::sleep(DRAIN).await;
        tracing::warn!(
            "calls still in flight after {} s are cut off",
            DRAIN.as_secs()
        );
    };
    let serving = async {
        match tls {
            None => axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await
                .context("the HTTP server failed"),
            Some(tls) => {
                let acceptor = tls_acceptor(&dir.join(&tls.cert), &dir.join(&tls.key))?;
                serve_tls(listener, acceptor, router, shutdown).await;
                Ok(())
            }
        }
    };
    tokio::select! {
        served = serving => served?,
        () = drained => {}
    }
    reaper.abort();
    reloader.abort();
    let sessions = gateway.close_all();
    // Each session's upstream gets its grace period; bounded in all.
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        for s in sessions {
            while !s.ended() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    })
    .await;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}

fn reload(gw: &Gateway, path: &Path, http: reqwest::Client) -> anyhow::Result<()> {
    let loaded = load::load_config(path).map_err(|d| {
        anyhow::anyhow!(
            "{}",
            d.render_plain()
                .lines()
                .next()
                .unwrap_or("invalid configuration")
        )
    })?;
    let config = loaded.config;
    let old = gw.loaded();
    if config.listen != old.config.listen
        || config.store != old.config.store
        || config.secret != old.config.secret
    {
        tracing::warn!("`listen`, `store` and `secret` change only on a restart");
    }
    let loaded = build_loaded(config, &base_dir(path), http)?;
    *gw.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(loaded);
    Ok(())
}

async fn store_from(
    store: &config::StoreConfig,
    session_ttl: Duration,
) -> anyhow::Result<Arc<dyn Store>> {
    if let Some(path) = &store.path {
        let embedded = toolgate_store::EmbeddedStore::open(path, session_ttl)
            .map_err(|e| anyhow::anyhow!("{e}. help: check `store.path`"))?;
        return Ok(Arc::new(embedded));
    }
    let timeout = store.timeout();
    let url = store.url.as_deref().unwrap_or_default();
    let url =
        toolgate_runtime::remote::headers::expand(url, &|name: &str| std::env::var(name).ok())
            .map_err(|e| anyhow::anyhow!("`store.url`: {e}"))?;
    let namespace = store.namespace();
    let redis = toolgate_store::RedisStore::connect(&url, namespace, timeout, session_ttl)
        .await
        .map_err(|e| anyhow::anyhow!("{e}. help: start the store, or check `store.url`"))?;
    Ok(Arc::new(redis))
}

fn tls_acceptor(cert: &Path, key: &Path) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("cannot read the certificate `{}`", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("`{}` is not a PEM certificate chain", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("cannot read the private key `{}`", key.display()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .context("the certificate and key do not fit together")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

async fn serve_tls(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    router: axum::Router,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            a = listener.accept() => a,
        };
        let Ok((tcp, _)) = accepted else { continue };
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        let mut stop = stop_rx.clone();
        conns.spawn(async move {
            let Ok(Ok(tls)) =
                tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
            else {
                return;
            };
            let builder = Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = async { let _ = stop.wait_for(|s| *s).await; } => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(30), async {
        while conns.join_next().await.is_some() {}
    })
    .await;
}
