//! A scripted local mock of a coding agent's model API, so that the real agent CLI runs
//! offline: turn n (counted by the tool results in the conversation) answers with the n-th
//! scripted tool call, and once the script is done with a text that echoes the last tool
//! result. Every request is logged: the log proves what the model saw.
//!
//! Speaks the Anthropic Messages API as Claude Code uses it (always `stream: true`: SSE
//! `message_start`, `content_block_start/delta/stop` with `input_json_delta` for a
//! `tool_use`, `message_delta` with the `stop_reason`, `message_stop`), and OpenAI's Chat
//! Completions as Qwen Code uses it (`stream: true`: `chat.completion.chunk` events with a
//! `tool_calls` delta, then one with the `finish_reason`, then `[DONE]`; or one
//! `chat.completion`), and Gemini's `generateContent` as Gemini CLI uses it
//! (`/v1beta/models/<model>:streamGenerateContent?alt=sse`, one SSE event with a
//! `functionCall` part; tool results come back as `functionResponse` parts), and OpenAI's
//! Responses API as Codex uses it (`/v1/responses`, SSE `response.created`,
//! `response.output_item.done` with a `function_call` item, `response.completed`; tool
//! results come back as `function_call_output` input items). A request
//! without `tools` (a side request such as a title) gets the text answer. Loopback only.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    reason = "test code: a mock that cannot start fails the test; JSON indexing of what the agent sent yields null where it is missing"
)]

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// One scripted tool call: the tool's name and its input.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub name: String,
    pub input: Value,
}

pub fn call(name: &str, input: Value) -> ToolCall {
    ToolCall {
        name: name.to_owned(),
        input,
    }
}

#[derive(Clone)]
struct Shared {
    script: Arc<Vec<ToolCall>>,
    log: Arc<Mutex<Vec<Value>>>,
}

/// A running mock; stops when dropped.
pub struct MockModel {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    log: Arc<Mutex<Vec<Value>>>,
    _served: toolgate_testkit::http::Served,
}

impl MockModel {
    /// An Anthropic Messages API answering with `script`.
    pub fn anthropic(script: Vec<ToolCall>) -> MockModel {
        MockModel::serve(script, |shared| {
            Router::new()
                .route("/v1/messages", post(messages))
                .route("/v1/messages/count_tokens", post(count_tokens))
                .with_state(shared)
        })
    }

    /// An OpenAI Chat Completions API (`<url>/v1/chat/completions`) answering with
    /// `script`.
    pub fn openai_chat(script: Vec<ToolCall>) -> MockModel {
        MockModel::serve(script, |shared| {
            Router::new()
                .route("/v1/chat/completions", post(chat_completions))
                .with_state(shared)
        })
    }

    /// OpenAI's Responses API (`<url>/v1/responses`, streaming) answering with `script`.
    pub fn openai_responses(script: Vec<ToolCall>) -> MockModel {
        MockModel::serve(script, |shared| {
            Router::new()
                .route("/v1/responses", post(responses))
                .with_state(shared)
        })
    }

    /// Gemini's API (`<url>/v1beta/models/<model>:generateContent` and
    /// `:streamGenerateContent`) answering with `script`.
    pub fn gemini(script: Vec<ToolCall>) -> MockModel {
        MockModel::serve(script, |shared| {
            Router::new()
                .route("/v1beta/models/{call}", post(generate_content))
                .with_state(shared)
        })
    }

    fn serve(script: Vec<ToolCall>, app: impl FnOnce(Shared) -> Router) -> MockModel {
        let shared = Shared {
            script: Arc::new(script),
            log: Arc::new(Mutex::new(Vec::new())),
        };
        let log = shared.log.clone();
        let served = toolgate_testkit::http::Served::start(move |_| app(shared));
        MockModel {
            url: format!("http://{}", served.addr),
            log,
            _served: served,
        }
    }

    /// Every request body, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.log.lock().unwrap().clone()
    }

    /// Whether any request the model got holds `needle` (in any string of it).
    pub fn saw(&self, needle: &str) -> bool {
        self.requests()
            .iter()
            .any(|r| r.to_string().contains(needle))
    }

    /// The tool results the agent sent back, in order (their text).
    pub fn tool_results(&self) -> Vec<String> {
        let Some(last) = self
            .requests()
            .into_iter()
            .rfind(|r| r.get("tools").is_some())
        else {
            return Vec::new();
        };
        tool_results(&last)
            .iter()
            .map(|b| match &b["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect()
    }
}

/// The tool results of a conversation: Anthropic `tool_result` blocks, OpenAI messages
/// of role `tool` (each with its `content`), Gemini `functionResponse` parts (their
/// `response` as the `content`), or Responses API `function_call_output` items (their
/// `output`).
fn tool_results(body: &Value) -> Vec<Value> {
    let responses: Vec<Value> = body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| json!({"content": i["output"]}))
        .collect();
    if !responses.is_empty() {
        return responses;
    }
    let gemini: Vec<Value> = body["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["parts"].as_array())
        .flatten()
        .filter(|p| p.get("functionResponse").is_some())
        .map(|p| json!({"content": p["functionResponse"]["response"]}))
        .collect();
    if !gemini.is_empty() {
        return gemini;
    }
    let messages = body["messages"].as_array().into_iter().flatten();
    let openai: Vec<Value> = messages
        .clone()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect();
    if !openai.is_empty() {
        return openai;
    }
    messages
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .cloned()
        .collect()
}

async fn count_tokens() -> impl IntoResponse {
    axum::Json(json!({"input_tokens": 1}))
}

async fn messages(State(s): State<Shared>, body: axum::Json<Value>) -> Response {
    let body = body.0;
    s.log.lock().unwrap().push(body.clone());
    let results = tool_results(&body);
    let turn = results.len();
    let model = body["model"].as_str().unwrap_or("mock").to_owned();
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_{turn}"), "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
    )];
    let scripted = body
        .get("tools")
        .is_some()
        .then(|| s.script.get(turn))
        .flatten();
    let (block, delta, stop) = match scripted {
        Some(call) => (
            json!({"type": "tool_use", "id": format!("toolu_{turn}"), "name": call.name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": call.input.to_string()}),
            "tool_use",
        ),
        None => {
            let last = results.last().map(|r| r["content"].to_string());
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": format!("done: {}", last.unwrap_or_default())}),
                "end_turn",
            )
        }
    };
    events.push((
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
    ));
    events.push((
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
    ));
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 1}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    let sse: String = events
        .iter()
        .map(|(e, d)| format!("event: {e}\ndata: {d}\n\n"))
        .collect();
    ([(header::CONTENT_TYPE, "text/event-stream")], sse).into_response()
}

async fn chat_completions(State(s): State<Shared>, body: axum::Json<Value>) -> Response {
    let body = body.0;
    s.log.lock().unwrap().push(body.clone());
    let results = tool_results(&body);
    let turn = results.len();
    let model = body["model"].as_str().unwrap_or("mock").to_owned();
    let scripted = body
        .get("tools")
        .is_some()
        .then(|| s.script.get(turn))
        .flatten();
    let (message, finish) = match scripted {
        Some(call) => (
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                "id": format!("call_{turn}"), "type": "function",
                "function": {"name": call.name, "arguments": call.input.to_string()}}]}),
            "tool_calls",
        ),
        None => {
            let last = results.last().map(|r| r["content"].to_string());
            (
                json!({"role": "assistant", "content": format!("done: {}", last.unwrap_or_default())}),
                "stop",
            )
        }
    };
    let usage = json!({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2});
    if body["stream"] != true {
        return axum::Json(json!({"id": "c", "object": "chat.completion", "created": 0,
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage}))
        .into_response();
    }
    let chunk = |delta: Value, finish: Value, usage: Option<&Value>| {
        let mut c = json!({"id": "c", "object": "chat.completion.chunk", "created": 0,
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        if let Some(u) = usage {
            c["usage"] = u.clone();
        }
        format!("data: {c}\n\n")
    };
    let sse = format!(
        "{}{}data: [DONE]\n\n",
        chunk(message, Value::Null, None),
        chunk(json!({}), json!(finish), Some(&usage))
    );
    ([(header::CONTENT_TYPE, "text/event-stream")], sse).into_response()
}

async fn generate_content(
    State(s): State<Shared>,
    axum::extract::Path(call): axum::extract::Path<String>,
    body: axum::Json<Value>,
) -> Response {
    let body = body.0;
    s.log.lock().unwrap().push(body.clone());
    let results = tool_results(&body);
    let turn = results.len();
    let scripted = body
        .get("tools")
        .is_some()
        .then(|| s.script.get(turn))
        .flatten();
    let part = match scripted {
        Some(call) => json!({"functionCall": {"name": call.name, "args": call.input}}),
        None => {
            let last = results.last().map(|r| r["content"].to_string());
            json!({"text": format!("done: {}", last.unwrap_or_default())})
        }
    };
    let answer = json!({"candidates": [{"content": {"role": "model", "parts": [part]},
        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}});
    if call.ends_with(":streamGenerateContent") {
        let sse = format!("data: {answer}\r\n\r\n");
        ([(header::CONTENT_TYPE, "text/event-stream")], sse).into_response()
    } else {
        axum::Json(answer).into_response()
    }
}

async fn responses(State(s): State<Shared>, body: axum::Json<Value>) -> Response {
    let body = body.0;
    s.log.lock().unwrap().push(body.clone());
    let results = tool_results(&body);
    let turn = results.len();
    let scripted = body
        .get("tools")
        .is_some()
        .then(|| s.script.get(turn))
        .flatten();
    let item = match scripted {
        // `namespace.name`: a tool of a namespace (Codex puts each MCP server's tools in
        // one, `mcp__<server>`).
        Some(call) => {
            let mut item = json!({"type": "function_call", "id": format!("fc_{turn}"),
                "call_id": format!("call_{turn}"), "name": call.name,
                "arguments": call.input.to_string()});
            if let Some((namespace, name)) = call.name.split_once('.') {
                item["namespace"] = json!(namespace);
                item["name"] = json!(name);
            }
            item
        }
        None => {
            let last = results.last().map(|r| r["content"].to_string());
            json!({"type": "message", "id": format!("msg_{turn}"), "role": "assistant",
                "content": [{"type": "output_text",
                    "text": format!("done: {}", last.unwrap_or_default())}]})
        }
    };
    let id = format!("resp_{turn}");
    let usage = json!({"input_tokens": 1, "output_tokens": 1, "total_tokens": 2});
    let events = [
        (
            "response.created",
            json!({"type": "response.created", "response": {"id": id}}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        ),
        (
            "response.completed",
            json!({"type": "response.completed", "response": {"id": id, "usage": usage}}),
        ),
    ];
    let sse: String = events
        .iter()
        .map(|(e, d)| format!("event: {e}\ndata: {d}\n\n"))
        .collect();
    ([(header::CONTENT_TYPE, "text/event-stream")], sse).into_response()
}
