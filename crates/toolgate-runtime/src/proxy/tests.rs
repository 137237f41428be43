//! The interception seam, exercised in-process against a real upstream process.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use toolgate_mcp::{RawValue, build, views::ToolsCallParams};

use super::handle::ProxyHandle;
use super::intercept::{Direction, Interceptor, Message, Verdict};
use super::lines::Line;
use super::relay::{ClientEvent, ClientInput, ClientOut, ClientSink, Relay, RelayConfig};

const LIMIT: Duration = Duration::from_secs(20);

#[derive(Default)]
struct TestInterceptor {
    release: Mutex<Option<oneshot::Receiver<()>>>,
    observed: Mutex<Vec<(u64, String)>>,
}

impl Interceptor for TestInterceptor {
    fn on_message(&self, m: &Message<'_>, proxy: &ProxyHandle) -> Verdict {
        let env = m.envelope;
        if let Some(tag) = m.answers {
            let text = String::from_utf8_lossy(m.raw).into_owned();
            self.observed.lock().unwrap().push((tag, text));
            return Verdict::Forward;
        }
        if m.direction != Direction::ClientToServer {
            return Verdict::Forward;
        }
        match env.method_str() {
            "tools/call" => {
                let params = ToolsCallParams::parse(env.params.unwrap()).unwrap();
                if params.name == "forbidden" {
                    return Verdict::Reply(build::tool_error_result(
                        env.id.unwrap(),
                        "denied by test",
                    ));
                }
                Verdict::Forward
            }
            "tools/list" => Verdict::Watch(77),
            "slow" => {
                let rx = self.release.lock().unwrap().take().unwrap();
                Verdict::Park(Box::pin(async move {
                    let _ = rx.await;
                    Verdict::Forward
                }))
            }
            "needs-approval" => {
                let proxy = proxy.clone();
                let id: Box<RawValue> = env.id.unwrap().to_owned();
                Verdict::Park(Box::pin(async move {
                    let params = RawValue::from_string(r#"{"message":"ok?"}"#.into()).unwrap();
                    match proxy
                        .request_client("elicitation/create", Some(&params))
                        .await
                    {
                        Ok(resp) if String::from_utf8_lossy(&resp).contains("accept") => {
                            Verdict::Forward
                        }
                        _ => Verdict::Reply(build::tool_error_result(&id, "not approved")),
                    }
                }))
            }
            "dropme" => Verdict::Drop,
            "parked-forever" => Verdict::Park(Box::pin(std::future::pending())),
            _ => Verdict::Forward,
        }
    }
}

struct Harness {
    to_relay: mpsc::Sender<ClientEvent>,
    from_relay: mpsc::Receiver<ClientOut>,
    relay: Relay,
    record: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Harness {
    fn start(interceptor: Arc<dyn Interceptor>) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("seen");
        let mut child = tokio::process::Command::new(toolgate_testkit::fake_upstream())
            .arg("--record")
            .arg(&record)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (to_relay, client_rx) = mpsc::channel(8);
        let (out_tx, from_relay) = mpsc::channel(8);
        let relay = Relay::start(
            &RelayConfig {
                max_message_bytes: 1 << 20,
                poll: Duration::from_micros(super::relay::DEFAULT_POLL_US),
            },
            interceptor,
            ClientInput::Queue(client_rx),
            ClientSink::Queue(out_tx),
            super::relay::UpstreamIo::Child(
                child.stdin.take().unwrap(),
                child.stdout.take().unwrap(),
            ),
        );
        // Not killed on drop: it exits when the relay (and its stdin) is dropped, and
        // tokio's orphan queue reaps it.
        drop(child);
        Harness {
            to_relay,
            from_relay,
            relay,
            record,
            _dir: dir,
        }
    }

    async fn send(&self, line: &str) {
        let mut frame = line.as_bytes().to_vec();
        frame.push(b'\n');
        self.to_relay
            .send(ClientEvent::Line(Line::Frame(frame)))
            .await
            .unwrap();
    }

    async fn recv(&mut self) -> Value {
        loop {
            let out = tokio::time::timeout(LIMIT, self.from_relay.recv())
                .await
                .expect("no frame from the relay in time")
                .expect("relay closed");
            match out {
                ClientOut::Frame(frame) => {
                    assert_eq!(frame.last(), Some(&b'\n'));
                    return serde_json::from_slice(&frame).unwrap();
                }
                ClientOut::Barrier(ack) => {
                    let _ = ack.send(());
                }
            }
        }
    }

    fn seen(&self) -> Vec<String> {
        toolgate_testkit::read_record(&self.record)
            .into_iter()
            .map(|l| String::from_utf8(l).unwrap())
            .collect()
    }
}

fn rt() -> tokio::runtime::Runtime {
    crate::rt::current_thread().unwrap()
}

#[test]
fn a_denied_call_is_answered_and_never_reaches_the_upstream() {
    rt().block_on(async {
        let mut h = Harness::start(Arc::new(TestInterceptor::default()));
        h.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"forbidden","arguments":{}}}"#).await;
        let reply = h.recv().await;
        assert_eq!(reply["id"], 1);
        assert_eq!(reply["result"]["isError"], true);
        assert_eq!(reply["result"]["content"][0]["text"], "denied by test");
        h.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fine","arguments":{}}}"#).await;
        assert_eq!(h.recv().await["result"]["method"], "tools/call");
        h.send(r#"{"jsonrpc":"2.0","id":3,"method":"dropme"}"#).await;
        let dropped = h.recv().await;
        assert_eq!(dropped["id"], 3);
        assert_eq!(dropped["error"]["code"], -32603);
        let seen = h.seen();
        assert_eq!(seen.len(), 1);
        assert!(seen[0].contains(r#""name":"fine""#));
    });
}

#[test]
fn a_parked_call_does_not_block_other_traffic() {
    rt().block_on(async {
        let (release, rx) = oneshot::channel();
        let icpt = TestInterceptor {
            release: Mutex::new(Some(rx)),
            ..TestInterceptor::default()
        };
        let mut h = Harness::start(Arc::new(icpt));
        h.send(r#"{"jsonrpc":"2.0","id":10,"method":"slow"}"#).await;
        h.send(r#"{"jsonrpc":"2.0","id":11,"method":"ping"}"#).await;
        assert_eq!(h.recv().await["id"], 11);
        release.send(()).unwrap();
        let reply = h.recv().await;
        assert_eq!(reply["id"], 10);
        assert_eq!(reply["result"]["method"], "slow");
    });
}

#[test]
fn responses_to_watched_requests_are_observed() {
    let icpt = Arc::new(TestInterceptor::default());
    rt().block_on(async {
        let mut h = Harness::start(icpt.clone());
        h.send(r#"{"jsonrpc":"2.0","id":"l","method":"tools/list"}"#)
            .await;
        assert_eq!(h.recv().await["id"], "l");
    });
    let observed = icpt.observed.lock().unwrap();
    assert_eq!(observed.len(), 1);
    assert_eq!(observed[0].0, 77);
    assert!(observed[0].1.contains(r#""tools":["#));
}

#[test]
fn the_proxy_can_ask_the_client_and_consumes_the_answer() {
    rt().block_on(async {
        let mut h = Harness::start(Arc::new(TestInterceptor::default()));
        h.send(r#"{"jsonrpc":"2.0","id":20,"method":"needs-approval"}"#)
            .await;
        let ask = h.recv().await;
        assert_eq!(ask["method"], "elicitation/create");
        let id = ask["id"].as_str().unwrap().to_owned();
        assert!(id.starts_with("toolgate-"));
        h.send(&format!(
            r#"{{"jsonrpc":"2.0","id":"{id}","result":{{"action":"accept","content":{{}}}}}}"#
        ))
        .await;
        let reply = h.recv().await;
        assert_eq!(reply["id"], 20);
        assert_eq!(reply["result"]["method"], "needs-approval");

        // Declined: the interceptor answers instead.
        h.send(r#"{"jsonrpc":"2.0","id":21,"method":"needs-approval"}"#)
            .await;
        let ask = h.recv().await;
        let id = ask["id"].as_str().unwrap().to_owned();
        h.send(&format!(
            r#"{{"jsonrpc":"2.0","id":"{id}","result":{{"action":"decline"}}}}"#
        ))
        .await;
        let reply = h.recv().await;
        assert_eq!(reply["id"], 21);
        assert_eq!(reply["result"]["isError"], true);

        let seen = h.seen();
        assert_eq!(seen.len(), 1, "{seen:#?}");
        assert!(seen.iter().all(|l| !l.contains("toolgate-")));
    });
}

#[test]
fn parked_and_outstanding_requests_are_answered_once_when_the_upstream_exits() {
    rt().block_on(async {
        let mut h = Harness::start(Arc::new(TestInterceptor::default()));
        h.send(r#"{"jsonrpc":"2.0","id":30,"method":"parked-forever"}"#)
            .await;
        h.send(r#"{"jsonrpc":"2.0","id":31,"method":"test/crash"}"#)
            .await;
        tokio::time::timeout(LIMIT, h.relay.upstream_done())
            .await
            .unwrap()
            .unwrap();
        h.relay.upstream_gone().await;
        let mut ids = [h.recv().await, h.recv().await];
        ids.sort_by_key(|v| v["id"].as_i64());
        assert_eq!(ids[0]["id"], 30);
        assert_eq!(ids[1]["id"], 31);
        assert!(ids.iter().all(|v| v["error"]["code"] == -32603));
        // Later requests are answered at once, not forwarded.
        h.send(r#"{"jsonrpc":"2.0","id":32,"method":"ping"}"#).await;
        let late = h.recv().await;
        assert_eq!(late["id"], 32);
        assert_eq!(late["error"]["code"], -32603);
    });
}
