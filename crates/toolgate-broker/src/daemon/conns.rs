//! One connection to the broker: `hello`, its role, and the messages of proxies (questions,
//! shared state), approvers (the queue, choices) and `status`.

#[allow(unused_imports, reason = "the daemon's imports, shared by its parts")]
use super::*;

pub(super) async fn serve_conn(shared: Arc<Daemon>, mut stream: UnixStream) {
    // Only our own user: checked before a single byte is read.
    match stream.peer_cred() {
        Ok(cred) if paths::peer_allowed(cred.uid(), shared.me) => {}
        Ok(cred) => {
            tracing::warn!(
                "refused a connection from uid {} (the broker serves uid {})",
                cred.uid(),
                shared.me
            );
            return;
        }
        Err(e) => {
            tracing::warn!("refused a connection whose peer cannot be identified: {e}");
            return;
        }
    }
    if shared.lock().conns.len() >= MAX_CONNECTIONS {
        send_now(&mut stream, &error(ErrorCode::Busy, "too many connections")).await;
        return;
    }
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, proto::read_line(&mut reader)).await {
        Ok(Ok(Some(line))) => line,
        _ => return,
    };
    match proto::hello_version(&hello) {
        Some(v) if v == u64::from(VERSION) => {}
        Some(v) => {
            reject(
                &mut write,
                error(
                    ErrorCode::Incompatible,
                    format!("this broker speaks protocol {VERSION}, the peer {v}"),
                ),
            )
            .await;
            return;
        }
        None => {
            reject(
                &mut write,
                error(ErrorCode::Invalid, "the first message must be `hello`"),
            )
            .await;
            return;
        }
    }
    let (role, pid, server, session, known) = match serde_json::from_slice::<ToBroker>(&hello) {
        Ok(ToBroker::Hello {
            token,
            role,
            pid,
            server,
            session,
            known,
            ..
        }) => {
            let given = hex::decode(token.as_bytes()).unwrap_or_default();
            if !paths::token_matches(&given, &shared.token) {
                reject(&mut write, error(ErrorCode::Unauthenticated, "wrong token")).await;
                return;
            }
            (role, pid, server, session, known)
        }
        Ok(_) | Err(_) => {
            reject(&mut write, error(ErrorCode::Invalid, "malformed `hello`")).await;
            return;
        }
    };
    if role == Role::Hook && session.as_deref().is_none_or(str::is_empty) {
        reject(
            &mut write,
            error(ErrorCode::Invalid, "a hook must name its agent session"),
        )
        .await;
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<FromBroker>();
    let writer = tokio::spawn(async move {
        while let Some(message) = rx.recv().await {
            if write.write_all(&proto::line(&message)).await.is_err() {
                break;
            }
            let _ = write.flush().await;
        }
    });
    let _ = tx.send(FromBroker::Welcome {
        version: VERSION,
        broker_pid: std::process::id(),
    });
    let conn_id = {
        let mut st = shared.lock();
        st.next_conn = st.next_conn.wrapping_add(1);
        let id = st.next_conn;
        match role {
            Role::Status => {
                let _ = tx.send(FromBroker::Status {
                    version: VERSION,
                    pid: std::process::id(),
                    proxies: st.count(Role::Proxy),
                    approvers: st.count(Role::Approver),
                    pending: st.pending.len(),
                    // Those with anything shared (a proxy that joined, or a session resumed
                    // from the store, may have nothing yet).
                    sessions: st.sessions.values().filter(|s| s.shares()).count(),
                    shared_tokens: st.sessions.values().map(|s| s.tokens.len()).sum(),
                });
            }
            Role::Approver => {
                // Registered and given the snapshot under one lock: no event is missed.
                let _ = tx.send(FromBroker::Snapshot {
                    pending: st.pending.values().map(|e| e.view.clone()).collect(),
                });
            }
            Role::Proxy => {
                // A session this broker has not met yet is resumed from the store first.
                if let Some(key) = session.clone() {
                    st.session_named(key.clone());
                    if known {
                        st.proxy_knows(&key);
                    }
                }
                // What the session's other proxies saw before this one connected.
                let known: Vec<TaintToken> = session
                    .as_ref()
                    .and_then(|k| st.sessions.get(k))
                    .map(|s| s.tokens.iter().cloned().collect())
                    .unwrap_or_default();
                for chunk in known.chunks(proto::MAX_TOKENS_PER_MESSAGE) {
                    let _ = tx.send(FromBroker::Taint {
                        tokens: chunk.to_vec(),
                    });
                }
                if let Some(shared) = session.as_ref().and_then(|k| st.sessions.get(k)) {
                    let approvals: Vec<SharedApproval> = shared.approvals.iter().cloned().collect();
                    for chunk in approvals.chunks(proto::MAX_APPROVALS_PER_MESSAGE) {
                        let _ = tx.send(FromBroker::Approvals {
                            approvals: chunk.to_vec(),
                        });
                    }
                    let attempts: Vec<SharedAttempt> = shared
                        .attempts
                        .iter()
                        .filter(|(from, _)| *from != pid)
                        .map(|(_, a)| a.clone())
                        .collect();
                    for chunk in attempts.chunks(proto::MAX_ATTEMPTS_PER_MESSAGE) {
                        let _ = tx.send(FromBroker::Attempts {
                            attempts: chunk.to_vec(),
                        });
                    }
                }
                if let Some(shared) = session.as_ref().and_then(|k| st.sessions.get(k)) {
                    let digests: Vec<String> = shared.vouched.iter().cloned().collect();
                    for chunk in digests.chunks(proto::MAX_DIGESTS_PER_MESSAGE) {
                        let _ = tx.send(FromBroker::Vouched {
                            digests: chunk.to_vec(),
                        });
                    }
                }
                // Sent under the same lock: nothing shared later comes before it.
                let _ = tx.send(FromBroker::Synced {});
            }
            Role::Hook => {}
        }
        if !matches!(role, Role::Status | Role::Hook) {
            st.conns.insert(
                id,
                Conn {
                    role,
                    pid,
                    server,
                    session: session.clone(),
                    tx: tx.clone(),
                },
            );
        }
        id
    };
    if role == Role::Status {
        drop(tx);
        let _ = writer.await;
        return;
    }
    if role == Role::Hook {
        let verdict = hook_conn(&shared, &mut reader, session.unwrap_or_default(), pid).await;
        let _ = tx.send(verdict);
        drop(tx);
        let _ = writer.await;
        return;
    }
    loop {
        let line = match proto::read_line(&mut reader).await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                let _ = tx.send(error(ErrorCode::Invalid, e.to_string()));
                break;
            }
        };
        let message = match serde_json::from_slice::<ToBroker>(&line) {
            Ok(m) => m,
            Err(e) => {
                let _ = tx.send(error(ErrorCode::Invalid, format!("invalid message: {e}")));
                break;
            }
        };
        if let Err(why) = handle(&shared, conn_id, role, message) {
            let _ = tx.send(error(ErrorCode::Invalid, why));
            break;
        }
    }
    // Gone: its questions are withdrawn.
    {
        let mut st = shared.lock();
        st.conns.remove(&conn_id);
        st.last_active = Some(std::time::Instant::now());
        let mine: Vec<u64> = st
            .pending
            .iter()
            .filter(|(_, e)| e.asker.proxy().is_some_and(|(conn, _)| conn == conn_id))
            .map(|(id, _)| *id)
            .collect();
        for id in mine {
            st.withdraw(id, Withdrawal::ProxyGone, "the proxy went away");
        }
    }
    drop(tx);
    let _ = writer.await;
}

/// Handles one message; `Err` is a protocol violation that closes the connection.
pub(super) fn handle(
    shared: &Arc<Daemon>,
    conn_id: u64,
    role: Role,
    message: ToBroker,
) -> Result<(), String> {
    match (role, message) {
        (
            Role::Proxy,
            ToBroker::Ask {
                id,
                question,
                timeout_ms,
            },
        ) => ask(shared, conn_id, id, question, timeout_ms),
        (Role::Proxy, ToBroker::Withdraw { id, why }) => {
            let mut st = shared.lock();
            let found = st
                .pending
                .iter()
                .find(|(_, e)| e.asker.proxy() == Some((conn_id, id)))
                .map(|(k, _)| *k);
            if let Some(key) = found {
                let why = if why == Withdrawal::Expired {
                    Withdrawal::Expired
                } else {
                    Withdrawal::Cancelled
                };
                st.withdraw(key, why, "withdrawn by the proxy");
            }
            Ok(())
        }
        (Role::Proxy, ToBroker::Taint { tokens }) => {
            proto::validate_tokens(&tokens)?;
            shared.lock().share(conn_id, tokens);
            Ok(())
        }
        (Role::Proxy, ToBroker::Approvals { approvals }) => {
            proto::validate_approvals(&approvals)?;
            shared.lock().share_approvals(conn_id, approvals);
            Ok(())
        }
        (Role::Proxy, ToBroker::Attempts { attempts }) => {
            proto::validate_attempts(&attempts)?;
            shared.lock().share_attempts(conn_id, attempts);
            Ok(())
        }
        (Role::Approver, ToBroker::Decide { id, decision }) => {
            let mut st = shared.lock();
            let by = st
                .conns
                .get(&conn_id)
                .map(|c| format!("approver pid {}", c.pid))
                .unwrap_or_else(|| "an approver".to_owned());
            let result = match st.pending.remove(&id) {
                Some(entry) => {
                    match entry.asker {
                        Asker::Proxy { conn, local } => {
                            if let Some(proxy) = st.conns.get(&conn) {
                                let reason = match decision {
                                    Choice::Deny => {
                                        format!("denied in `toolgate approvals` ({by})")
                                    }
                                    _ => format!("allowed in `toolgate approvals` ({by})"),
                                };
                                let _ = proxy.tx.send(FromBroker::Answer {
                                    id: local,
                                    decision,
                                    reason,
                                });
                            }
                        }
                        Asker::Hook(held) => st.answer_held(*held, decision),
                    }
                    st.broadcast(&FromBroker::Resolved {
                        id,
                        decision,
                        by: by.clone(),
                    });
                    FromBroker::DecideResult {
                        id,
                        accepted: true,
                        message: format!("request {id}: {}", decision.cli_name()),
                    }
                }
                None => FromBroker::DecideResult {
                    id,
                    accepted: false,
                    message: format!(
                        "request {id} is not pending (already decided, withdrawn or expired)"
                    ),
                },
            };
            if let Some(me) = st.conns.get(&conn_id) {
                let _ = me.tx.send(result);
            }
            Ok(())
        }
        (role, other) => Err(format!(
            "a {role:?} connection may not send `{}`",
            serde_json::to_value(&other)
                .ok()
                .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
                .unwrap_or_default()
        )),
    }
}

pub(super) fn ask(
    shared: &Arc<Daemon>,
    conn_id: u64,
    local: u64,
    question: Question,
    timeout_ms: u64,
) -> Result<(), String> {
    question.validate()?;
    let timeout_ms = timeout_ms.clamp(1, MAX_TIMEOUT_MS);
    let id = {
        let mut st = shared.lock();
        let mine = st
            .pending
            .values()
            .filter(|e| e.asker.proxy().is_some_and(|(conn, _)| conn == conn_id))
            .count();
        if mine >= MAX_PENDING_PER_PROXY {
            return Err(format!(
                "more than {MAX_PENDING_PER_PROXY} questions pending from one proxy"
            ));
        }
        if st
            .pending
            .values()
            .any(|e| e.asker.proxy() == Some((conn_id, local)))
        {
            return Err(format!("question {local} is already pending"));
        }
        let (session, pid) = st
            .conns
            .get(&conn_id)
            .map(|c| (c.session.clone(), c.pid))
            .unwrap_or_default();
        let asker = Asker::Proxy {
            conn: conn_id,
            local,
        };
        st.enqueue(question, session, pid, timeout_ms, asker)
    };
    let shared = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(timeout_ms)).await;
        let secs = timeout_ms / 1000;
        shared.lock().withdraw(
            id,
            Withdrawal::Expired,
            &format!("no decision in `toolgate approvals` within {secs} s"),
        );
    });
    Ok(())
}

pub(super) async fn reject(write: &mut tokio::net::unix::OwnedWriteHalf, message: FromBroker) {
    let _ = write.write_all(&proto::line(&message)).await;
    let _ = write.flush().await;
}

pub(super) async fn send_now(stream: &mut UnixStream, message: &FromBroker) {
    let _ = stream.write_all(&proto::line(message)).await;
    let _ = stream.flush().await;
}

pub(super) fn error(code: ErrorCode, message: impl Into<String>) -> FromBroker {
    FromBroker::Error {
        code,
        message: message.into(),
        version: VERSION,
    }
}
