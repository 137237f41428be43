//! A minimal scripted MCP client: speaks newline-delimited JSON-RPC to a child process
//! (`toolgate wrap …`) over pipes, answers server-initiated requests (elicitation through a
//! scripted human) and records notifications.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};

/// What happened while one request was in flight.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The request's id.
    pub id: i64,
    /// The JSON-RPC response: an object with `result` or `error`.
    pub response: Value,
    /// The `params` of every `elicitation/create` received meanwhile, with the answer given.
    pub prompts: Vec<(Value, Value)>,
}

impl Exchange {
    /// The `result` member, if the response is not an error.
    pub fn result(&self) -> Option<&Value> {
        self.response.get("result")
    }
}

/// A scripted MCP client connected to a child process.
#[derive(Debug)]
pub struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: Receiver<Value>,
    next_id: i64,
    /// Every notification method received so far, in order.
    pub notifications: Vec<String>,
}

impl Agent {
    /// Spawns `command` with piped stdin/stdout; stderr is whatever `command` configured.
    pub fn spawn(mut command: Command) -> anyhow::Result<Agent> {
        command.stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start `{:?}`", command.get_program()))?;
        let stdin = child.stdin.take().context("child has no stdin")?;
        let stdout = child.stdout.take().context("child has no stdout")?;
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.trim().is_empty() {
                    continue;
                }
                // A frame that is not JSON is a protocol fault; surface it as such.
                let frame = serde_json::from_str::<Value>(&line)
                    .unwrap_or_else(|_| json!({"toolgate-demo/unparseable": line}));
                if tx.send(frame).is_err() {
                    break;
                }
            }
        });
        Ok(Agent {
            child,
            stdin: Some(stdin),
            frames: rx,
            next_id: 1,
            notifications: Vec::new(),
        })
    }

    fn send(&mut self, frame: &Value) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("the connection is closed")?;
        let mut bytes = serde_json::to_vec(frame)?;
        bytes.push(b'\n');
        stdin
            .write_all(&bytes)
            .and_then(|()| stdin.flush())
            .context("the proxy closed its stdin")
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) -> anyhow::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    /// Sends a request and waits (at most `timeout`) for its response, answering
    /// `elicitation/create` requests with `human` meanwhile.
    pub fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
        human: &mut dyn FnMut(&Value) -> Value,
    ) -> anyhow::Result<Exchange> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + timeout;
        let mut prompts = Vec::new();
        loop {
            let frame = self.next_frame(deadline, method)?;
            if let Some(inner) = frame.get("method").and_then(Value::as_str) {
                let inner = inner.to_owned();
                match frame.get("id").cloned() {
                    Some(request_id) => {
                        let reply = if inner == "elicitation/create" {
                            let params = frame.get("params").cloned().unwrap_or(Value::Null);
                            let answer = human(&params);
                            prompts.push((params, answer.clone()));
                            json!({"jsonrpc": "2.0", "id": request_id, "result": answer})
                        } else if inner == "ping" {
                            json!({"jsonrpc": "2.0", "id": request_id, "result": {}})
                        } else {
                            json!({"jsonrpc": "2.0", "id": request_id,
                                   "error": {"code": -32601, "message": "not supported by the demo agent"}})
                        };
                        self.send(&reply)?;
                    }
                    None => self.notifications.push(inner),
                }
                continue;
            }
            if frame.get("id").and_then(Value::as_i64) == Some(id) {
                return Ok(Exchange {
                    id,
                    response: frame,
                    prompts,
                });
            }
            if frame.get("toolgate-demo/unparseable").is_some() {
                bail!("the proxy wrote a frame that is not JSON: {frame}");
            }
        }
    }

    fn next_frame(&mut self, deadline: Instant, waiting_for: &str) -> anyhow::Result<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.frames.recv_timeout(left) {
            Ok(frame) => Ok(frame),
            Err(RecvTimeoutError::Timeout) => Err(anyhow!(
                "no answer to `{waiting_for}` within {} s",
                left.as_secs()
            )),
            Err(RecvTimeoutError::Disconnected) => Err(anyhow!(
                "the proxy exited while `{waiting_for}` was pending"
            )),
        }
    }

    /// Waits (at most `timeout`) until a notification `method` has been received.
    pub fn wait_for_notification(&mut self, method: &str, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        while !self.notifications.iter().any(|m| m == method) {
            let frame = self.next_frame(deadline, method)?;
            if frame.get("id").is_none()
                && let Some(m) = frame.get("method").and_then(Value::as_str)
            {
                self.notifications.push(m.to_owned());
            }
        }
        Ok(())
    }

    /// Closes the proxy's stdin and waits (at most `timeout`) for it to exit.
    pub fn shutdown(mut self, timeout: Duration) -> anyhow::Result<std::process::ExitStatus> {
        drop(self.stdin.take());
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                return Ok(self.child.wait()?);
            }
            // Polling an exit status: there is no portable blocking wait with a timeout.
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
