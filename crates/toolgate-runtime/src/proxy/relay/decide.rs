//! A frame's verdict carried out: forwarded, answered, parked; a parked request resolved
//! later; ids toolgate reserved and cancellations kept apart from the client's.

#[allow(unused_imports, reason = "the relay's imports, shared by its parts")]
use super::*;

/// Decides one classified message. Never holds the state lock across the interceptor call.
/// `raw` is the message's bytes, a part of `frame`.
pub(super) fn decide(
    shared: &Arc<RelayParts>,
    from: Direction,
    env: &Envelope<'_>,
    raw: &[u8],
    frame: &Bytes,
) -> Step {
    let message = Message {
        direction: from,
        envelope: env,
        raw,
        frame,
        answers: None,
    };
    match env.kind {
        Kind::Invalid(why) => match from {
            Direction::ClientToServer => {
                debug!("client sent an invalid message: {why}");
                let msg = format!("invalid request: {why}");
                Step::Done(Out::to_sender(
                    from,
                    build::error_response(env.reply_id(), INVALID_REQUEST, &msg),
                ))
            }
            Direction::ServerToClient => {
                warn!("upstream sent an invalid message, dropped: {why}");
                Step::Done(Out::Nothing)
            }
        },
        Kind::Request => request(shared, &message),
        Kind::Notification => {
            if env.method_str() == "notifications/cancelled" {
                mark_cancelled(shared, from, env.params);
            }
            simple(from, consult(shared, &message))
        }
        Kind::Response | Kind::ErrorResponse => match answered(shared, from, env, raw) {
            Ok(answers) => simple(from, consult(shared, &Message { answers, ..message })),
            Err(done) => done,
        },
    }
}

/// The interceptor's verdict on `message`, with a handle on this relay.
fn consult(shared: &Arc<RelayParts>, message: &Message<'_>) -> Verdict {
    let handle = ProxyHandle::new(Arc::clone(shared) as Arc<dyn Channels>);
    shared.interceptor.on_message(message, &handle)
}

/// A request: refused when its id cannot be told apart from another's, else decided by the
/// interceptor and, unless answered here, remembered as pending until its response.
fn request(shared: &Arc<RelayParts>, message: &Message<'_>) -> Step {
    let (from, env) = (message.direction, message.envelope);
    let Some(raw_id) = env.id else {
        return Step::Done(Out::Nothing);
    };
    let Some(key) = IdKey::from_raw(raw_id) else {
        return Step::Done(Out::Nothing);
    };
    if let Some(refusal) = refusal(shared, from, raw_id, &key) {
        return Step::Done(Out::to_sender(from, refusal));
    }
    let verdict = consult(shared, message);
    let raw_id_text: Box<str> = raw_id.get().into();
    let insert = |tag: Option<u64>, parked: bool| {
        shared.lock().pending(from).insert(
            key.clone(),
            Pending {
                raw_id: raw_id_text.clone(),
                tag,
                parked,
                cancelled: false,
            },
        );
    };
    match verdict {
        Verdict::Forward => {
            insert(None, false);
            Step::Forward
        }
        Verdict::Watch(tag) => {
            insert(Some(tag), false);
            Step::Forward
        }
        Verdict::Replace(bytes) => {
            insert(None, false);
            Step::ForwardBytes(bytes)
        }
        Verdict::ReplaceWatch(bytes, tag) => {
            insert(Some(tag), false);
            Step::ForwardBytes(bytes)
        }
        Verdict::Reply(bytes) => Step::Done(Out::to_sender(from, bytes)),
        Verdict::Withdraw => Step::Done(Out::Nothing),
        Verdict::Drop => Step::Done(Out::to_sender(
            from,
            build::error_response(Some(raw_id), INTERNAL_ERROR, "request dropped by toolgate"),
        )),
        Verdict::Park(fut) => {
            insert(None, true);
            Step::Park(fut, Some(key), Some(raw_id_text))
        }
    }
}

/// The error reply to a request the relay refuses before the interceptor sees it: the
/// upstream is gone, its id is in a space toolgate reserved, or it reuses a pending id.
fn refusal(
    shared: &Arc<RelayParts>,
    from: Direction,
    raw_id: &RawValue,
    key: &IdKey,
) -> Option<Vec<u8>> {
    let mut st = shared.lock();
    if from == Direction::ClientToServer && st.upstream_gone {
        return Some(build::error_response(
            Some(raw_id),
            INTERNAL_ERROR,
            shared.gone_message,
        ));
    }
    let invalid = |msg: &str| Some(build::error_response(Some(raw_id), INVALID_REQUEST, msg));
    if from == Direction::ServerToClient
        && key
            .as_str()
            .is_some_and(|s| s.starts_with(ORIGIN_ID_PREFIX))
    {
        warn!("upstream used an id reserved for toolgate: refused");
        return invalid(&format!(
            "invalid request: ids starting with `{ORIGIN_ID_PREFIX}` are reserved"
        ));
    }
    if reserved_client_id(shared, from, key) {
        warn!("client used an id reserved for toolgate: refused");
        return invalid(&format!(
            "invalid request: ids starting with `{}` are reserved",
            shared.origin_prefix
        ));
    }
    if st.pending(from).contains_key(key) {
        warn!("{} request reuses a pending id: refused", from.label());
        return invalid("invalid request: a request with this id is still pending");
    }
    None
}

/// For a response: the tag of the request it answers (`Ok`, then the interceptor sees it),
/// or the step that consumes it here (`Err`): an answer to one of toolgate's own requests,
/// or to no pending request.
fn answered(
    shared: &Arc<RelayParts>,
    from: Direction,
    env: &Envelope<'_>,
    raw: &[u8],
) -> Result<Option<u64>, Step> {
    let Some(key) = env.id.and_then(IdKey::from_raw) else {
        return Ok(None);
    };
    let mut st = shared.lock();
    if from == Direction::ClientToServer
        && let Some(id) = key.as_str()
        && id.starts_with(ORIGIN_ID_PREFIX)
    {
        match st.origin.remove(id) {
            Some(waiter) => {
                let _ = waiter.send(raw.to_vec());
            }
            None => debug!("client answered an unknown toolgate request: consumed"),
        }
        return Err(Step::Done(Out::Nothing));
    }
    if from == Direction::ServerToClient && own_server_response(shared, &mut st, &key, raw) {
        return Err(Step::Done(Out::Nothing));
    }
    let peer = match from {
        Direction::ClientToServer => Direction::ServerToClient,
        Direction::ServerToClient => Direction::ClientToServer,
    };
    match st.pending(peer).get(&key) {
        Some(p) if !p.parked => {
            let answers = p.tag;
            st.pending(peer).remove(&key);
            Ok(answers)
        }
        Some(_) | None => {
            warn!(
                "{} response to a request that is not pending: dropped",
                from.label()
            );
            Err(Step::Done(Out::Nothing))
        }
    }
}

/// A response from the upstream to a request toolgate sent itself
/// ([`ProxyHandle::request_server`]): handed to its waiter and consumed (true). Ids in this
/// relay's reserved space never belong to the client (its requests with such ids are
/// refused, see [`reserved_client_id`]), so a late answer is consumed too.
pub(super) fn own_server_response(
    shared: &RelayParts,
    st: &mut InFlight,
    key: &IdKey,
    raw: &[u8],
) -> bool {
    let Some(id) = key
        .as_str()
        .filter(|id| id.starts_with(&shared.origin_prefix))
    else {
        return false;
    };
    match st.server_origin.remove(id) {
        Some(waiter) => {
            let _ = waiter.send(raw.to_vec());
        }
        None => debug!("upstream answered a toolgate request no longer awaited: consumed"),
    }
    true
}

/// A client request whose id lies in this relay's reserved id space (its random prefix):
/// refused, so that toolgate's own requests to the upstream can never share an id with one
/// of the client's.
pub(super) fn reserved_client_id(shared: &RelayParts, from: Direction, key: &IdKey) -> bool {
    from == Direction::ClientToServer
        && key
            .as_str()
            .is_some_and(|s| s.starts_with(&shared.origin_prefix))
}

/// Notes that the sender of a pending request cancelled it. The request stays pending (a
/// late response is still relayed, as without toolgate), but the proxy will not answer it
/// itself when the other side exits.
pub(super) fn mark_cancelled(shared: &RelayParts, from: Direction, params: Option<&RawValue>) {
    let Some(params) = params else { return };
    let Ok(view) = toolgate_mcp::views::CancelledParams::parse(params) else {
        return;
    };
    let Some(key) = IdKey::from_raw(view.request_id) else {
        return;
    };
    if let Some(p) = shared.lock().pending(from).get_mut(&key) {
        p.cancelled = true;
    }
}

pub(super) fn simple(from: Direction, verdict: Verdict) -> Step {
    match verdict {
        Verdict::Forward | Verdict::Watch(_) => Step::Forward,
        Verdict::Replace(bytes) | Verdict::ReplaceWatch(bytes, _) => Step::ForwardBytes(bytes),
        Verdict::Reply(bytes) => Step::Done(Out::to_sender(from, bytes)),
        Verdict::Drop | Verdict::Withdraw => Step::Done(Out::Nothing),
        Verdict::Park(fut) => Step::Park(fut, None, None),
    }
}

pub(super) async fn resolve_parked(
    shared: Arc<RelayParts>,
    from: Direction,
    key: Option<IdKey>,
    raw_id: Option<Box<str>>,
    frame: Bytes,
    fut: Parked,
) {
    let mut verdict = fut.await;
    while let Verdict::Park(next) = verdict {
        verdict = next.await;
    }
    let out = match key {
        None => match verdict {
            Verdict::Forward | Verdict::Watch(_) => Out::to_peer(from, frame),
            Verdict::Replace(bytes) | Verdict::ReplaceWatch(bytes, _) => {
                Out::to_peer(from, with_newline(bytes))
            }
            Verdict::Reply(bytes) => Out::to_sender(from, bytes),
            Verdict::Drop | Verdict::Withdraw | Verdict::Park(_) => Out::Nothing,
        },
        Some(key) => {
            let mut st = shared.lock();
            let upstream_gone = st.upstream_gone;
            let map = st.pending(from);
            if !map.get(&key).is_some_and(|p| p.parked) {
                // Already answered (e.g. the upstream exited while this was parked).
                return;
            }
            let forward = |map: &mut HashMap<IdKey, Pending>, tag: Option<u64>| {
                if let Some(p) = map.get_mut(&key) {
                    p.parked = false;
                    p.tag = tag;
                }
            };
            let raw_id = raw_id
                .as_deref()
                .and_then(|r| RawValue::from_string(r.to_owned()).ok());
            match verdict {
                Verdict::Forward
                | Verdict::Watch(_)
                | Verdict::Replace(_)
                | Verdict::ReplaceWatch(..)
                    if from == Direction::ClientToServer && upstream_gone =>
                {
                    map.remove(&key);
                    Out::to_sender(
                        from,
                        build::error_response(
                            raw_id.as_deref(),
                            INTERNAL_ERROR,
                            shared.gone_message,
                        ),
                    )
                }
                Verdict::Forward => {
                    forward(map, None);
                    Out::to_peer(from, frame)
                }
                Verdict::Watch(tag) => {
                    forward(map, Some(tag));
                    Out::to_peer(from, frame)
                }
                Verdict::Replace(bytes) => {
                    forward(map, None);
                    Out::to_peer(from, with_newline(bytes))
                }
                Verdict::ReplaceWatch(bytes, tag) => {
                    forward(map, Some(tag));
                    Out::to_peer(from, with_newline(bytes))
                }
                Verdict::Reply(bytes) => {
                    map.remove(&key);
                    Out::to_sender(from, bytes)
                }
                Verdict::Withdraw => {
                    map.remove(&key);
                    Out::Nothing
                }
                Verdict::Drop | Verdict::Park(_) => {
                    map.remove(&key);
                    Out::to_sender(
                        from,
                        build::error_response(
                            raw_id.as_deref(),
                            INTERNAL_ERROR,
                            "request dropped by toolgate",
                        ),
                    )
                }
            }
        }
    };
    dispatch(&shared, out).await;
}
