//! Parity with the real `@modelcontextprotocol/server-everything` (stdio), driven by rmcp.
//!
//! Each test runs one feature scenario twice — against the server directly and through
//! `toolgate wrap --` — and asserts that the client observed the same transcript: results,
//! notifications, server-initiated requests (answered by the client through the proxy) and
//! the raw frames it received, step by step (within a step, sorted; only timestamps in
//! server-everything's dynamic resources are normalised). The direct run is also checked
//! for the feature's expected behaviour, so a test cannot pass with two empty transcripts.
//!
//! Every session declares roots, sampling and elicitation, so server-everything registers
//! its conditional tools and, 350 ms after `initialized`, asks the client for `roots/list`
//! and logs the outcome: each session first waits for that sync (the roots round trip).
//!
//! Needs `npm ci --prefix tests` (run by `scripts/test`).
#![allow(
    deprecated,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "a test fails by panicking, so unwrap, expect, panic and indexing are its assertions; some rmcp client items the harness drives are deprecated upstream"
)]

use crate::common;

use common::{
    ClientAnswers, Route, ServerCmd, Session, assert_parity, call, events_of, model, result_of,
    text_of,
};
use rmcp::model::ClientRequest;
use rmcp::service::PeerRequestOptions;
use serde_json::json;

/// Starts a session, waits for server-everything's initial roots sync (`roots/list` from
/// the server, then an info log "Roots updated: 1 root(s)"; by then the conditional tools
/// are registered) and lists the tools, as a client does before calling them.
async fn start(route: Route, server: &ServerCmd) -> anyhow::Result<Session> {
    let mut session = Session::start(route, server, ClientAnswers::default()).await?;
    session
        .expect_events(
            "initial roots sync",
            &[("request roots/list", 1), ("notifications/message", 1)],
        )
        .await?;
    let peer = session.client.peer().clone();
    session.step("tools/list", peer.list_tools(None)).await?;
    Ok(session)
}

fn everything() -> Option<ServerCmd> {
    common::everything_server()
}

#[tokio::test]
async fn tools_list_and_calls() {
    let Some(server) = everything() else { return };
    let scenario = |route| {
        let server = server.clone();
        async move {
            let mut s = start(route, &server).await?;
            let peer = s.client.peer().clone();
            s.step(
                "echo",
                peer.call_tool(call("echo", json!({ "message": "héllo ✓ \"quoted\"\n" }))),
            )
            .await?;
            s.step(
                "get-sum",
                peer.call_tool(call("get-sum", json!({ "a": 1e3, "b": -0.25 }))),
            )
            .await?;
            s.step(
                "get-tiny-image",
                peer.call_tool(call("get-tiny-image", json!({}))),
            )
            .await?;
            s.step(
                "get-structured-content",
                peer.call_tool(call(
                    "get-structured-content",
                    json!({ "location": "New York" }),
                )),
            )
            .await?;
            s.step(
                "get-annotated-message",
                peer.call_tool(call(
                    "get-annotated-message",
                    json!({ "messageType": "error", "includeImage": true }),
                )),
            )
            .await?;
            s.step(
                "get-resource-links",
                peer.call_tool(call("get-resource-links", json!({ "count": 3 }))),
            )
            .await?;
            // (A call to a tool the server does not list is not part of parity: toolgate's
            // pinning asks about it by design.)
            s.step(
                "invalid arguments",
                peer.call_tool(call("get-sum", json!({ "a": "x" }))),
            )
            .await?;
            s.finish().await
        }
    };
    assert_parity(&server, scenario, |t| {
        let tools = result_of(t, "tools/list")["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        for expected in [
            "echo",
            "get-sum",
            "trigger-sampling-request",
            "trigger-elicitation-request",
            "get-roots-list",
        ] {
            assert!(
                names.contains(&expected),
                "tools/list lacks `{expected}`: {names:?}"
            );
        }
        assert!(text_of(result_of(t, "echo")).contains("héllo ✓ \"quoted\"\n"));
        assert!(text_of(result_of(t, "get-sum")).contains("999.75"));
        assert!(result_of(t, "get-structured-content")["structuredContent"].is_object());
        assert!(
            result_of(t, "get-tiny-image")["content"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["type"] == "image")
        );
        // The registration of conditional tools after `initialized` was announced.
        assert!(!events_of(t, "notifications/tools/list_changed").is_empty());
    })
    .await;
}

#[tokio::test]
async fn prompts_list_get_and_complete() {
    let Some(server) = everything() else { return };
    let scenario = |route| {
        let server = server.clone();
        async move {
            let mut s = start(route, &server).await?;
            let peer = s.client.peer().clone();
            s.step("prompts/list", peer.list_prompts(None)).await?;
            s.step(
                "simple-prompt",
                peer.get_prompt(model(json!({ "name": "simple-prompt" }))),
            )
            .await?;
            s.step(
                "args-prompt",
                peer.get_prompt(model(json!({
                    "name": "args-prompt",
                    "arguments": { "city": "Kyōto", "state": "京都府" }
                }))),
            )
            .await?;
            s.step(
                "resource-prompt",
                peer.get_prompt(model(json!({
                    "name": "resource-prompt",
                    "arguments": { "resourceType": "Text", "resourceId": "2" }
                }))),
            )
            .await?;
            s.step(
                "completion/complete",
                peer.complete(model(json!({
                    "ref": { "type": "ref/prompt", "name": "completable-prompt" },
                    "argument": { "name": "department", "value": "E" }
                }))),
            )
            .await?;
            s.step(
                "unknown prompt",
                peer.get_prompt(model(json!({ "name": "nope" }))),
            )
            .await?;
            s.finish().await
        }
    };
    assert_parity(&server, scenario, |t| {
        let prompts = result_of(t, "prompts/list")["prompts"].as_array().unwrap();
        assert!(prompts.iter().any(|p| p["name"] == "args-prompt"));
        let args = serde_json::to_string(result_of(t, "args-prompt")).unwrap();
        assert!(args.contains("Kyōto") && args.contains("京都府"), "{args}");
        let completions = &result_of(t, "completion/complete")["completion"]["values"];
        assert!(
            completions.as_array().is_some_and(|v| !v.is_empty()),
            "{completions}"
        );
        assert!(result_of(t, "unknown prompt").get("client_error").is_some());
    })
    .await;
}

#[tokio::test]
async fn resources_list_read_templates_subscribe_and_updates() {
    let Some(server) = everything() else { return };
    let uri = "demo://resource/dynamic/text/1";
    let scenario = |route| {
        let server = server.clone();
        async move {
            let mut s = start(route, &server).await?;
            let peer = s.client.peer().clone();
            s.step("resources/list", peer.list_resources(None)).await?;
            s.step(
                "resources/templates/list",
                peer.list_resource_templates(None),
            )
            .await?;
            s.step(
                "read dynamic text",
                peer.read_resource(model(json!({ "uri": uri }))),
            )
            .await?;
            s.step(
                "read dynamic blob",
                peer.read_resource(model(json!({ "uri": "demo://resource/dynamic/blob/2" }))),
            )
            .await?;
            s.step(
                "read static document",
                peer.read_resource(model(
                    json!({ "uri": "demo://resource/static/document/features.md" }),
                )),
            )
            .await?;
            // The server acknowledges a subscription with an info log before answering.
            s.step(
                "resources/subscribe",
                peer.subscribe(model(json!({ "uri": uri }))),
            )
            .await?;
            s.expect_events(
                "subscribe acknowledgement log",
                &[("notifications/message", 1)],
            )
            .await?;
            // Turning updates on sends one `notifications/resources/updated` immediately.
            s.step(
                "start updates",
                peer.call_tool(call("toggle-subscriber-updates", json!({}))),
            )
            .await?;
            s.expect_events(
                "resource updated",
                &[("notifications/resources/updated", 1)],
            )
            .await?;
            s.step(
                "stop updates",
                peer.call_tool(call("toggle-subscriber-updates", json!({}))),
            )
            .await?;
            s.step(
                "resources/unsubscribe",
                peer.unsubscribe(model(json!({ "uri": uri }))),
            )
            .await?;
            s.expect_events(
                "unsubscribe acknowledgement log",
                &[("notifications/message", 1)],
            )
            .await?;
            s.finish().await
        }
    };
    assert_parity(&server, scenario, |t| {
        assert!(
            result_of(t, "resources/list")["resources"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
        );
        assert!(
            result_of(t, "resources/templates/list")["resourceTemplates"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
        );
        let text = &result_of(t, "read dynamic text")["contents"][0]["text"];
        assert_eq!(
            text,
            "Resource 1: This is a plaintext resource created at <time>"
        );
        let updated = events_of(t, "notifications/resources/updated");
        assert_eq!(updated.len(), 1, "{updated:?}");
        assert_eq!(updated[0]["params"]["uri"], uri);
        let logs = events_of(t, "notifications/message");
        assert!(
            logs.iter().any(|l| l["params"]["data"]
                .as_str()
                .is_some_and(|d| d.contains("Subscribe Resource request"))),
            "{logs:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn progress_notifications_for_a_long_running_tool() {
    let Some(server) = everything() else { return };
    let scenario = |route| {
        let server = server.clone();
        async move {
            let mut s = start(route, &server).await?;
            let peer = s.client.peer().clone();
            // rmcp attaches a progressToken to every request; the tool reports each step.
            s.step(
                "trigger-long-running-operation",
                peer.call_tool(call(
                    "trigger-long-running-operation",
                    json!({ "duration": 0.6, "steps": 3 }),
                )),
            )
            .await?;
            s.expect_events("3 progress notifications", &[("notifications/progress", 3)])
                .await?;
            s.finish().await
        }
    };
    assert_parity(&server, scenario, |t| {
        let progress = events_of(t, "notifications/progress");
        let steps: Vec<f64> = progress
            .iter()
            .filter_map(|p| p["params"]["progress"].as_f64())
            .collect();
        assert_eq!(steps, vec![1.0, 2.0, 3.0], "{progress:?}");
        assert!(text_of(result_of(t, "trigger-long-running-operation")).contains("Steps: 3"));
    })
    .await;
}

#[tokio::test]
async fn logging_set_level_filters_messages() {
    let Some(server) = everything() else { return };
    let scenario = |route| {
        let server = server.clone();
        async move {
            let mut s = start(route, &server).await?;
            let peer = s.client.peer().clone();
            s.step(
                "logging/setLevel debug",
                peer.set_level(model(json!({ "level": "debug" }))),
            )
            .await?;
            s.step(
                "subscribe a",
                peer.subscribe(model(json!({ "uri": "demo://resource/dynamic/text/1" }))),
            )
            .await?;
            s.expect_events("info log for subscribe a", &[("notifications/message", 1)])
                .await?;
            // At `error`, the server must drop its info-level acknowledgement.
            s.step(
                "logging/setLevel error",
                peer.set_level(model(json!({ "level": "error" }))),
            )
            .await?;
            s.step(
                "subscribe b",
                peer.subscribe(model(json!({ "uri": "demo://resource/dynamic/text/2" }))),
            )
            .await?;
            s.step(
                "logging/setLevel info",
                peer.set_level(model(json!({ "level": "info" }))),
            )
            .await?;
            s.step(
                "unsubscribe a",
                peer.unsubscribe(model(json!({ "uri": "demo://resource/dynamic/text/1" }))),
            )
            .await?;
            s.expect_events(
                "info log for unsubscribe a",
                &[("notifications/message", 1)],
            )
            .await?;
            s.finish().await
        }
    };
    assert_parity(&server, scenario, |t| {
        let logs: Vec<String> = events_of(t, "notifications/message")
            .iter()
            .map(|l| l["params"]["data"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert!(
            logs.iter()
                .any(|l| l.contains("dynamic/text/1") && l.contains("Subscribe")),
            "{logs:?}"
        );
        assert!(
            !logs.iter().any(|l| l.contains("dynamic/text/2")),
            "filtered log leaked: {logs:?}"
        );
        assert!(logs.iter().any(|l| l.contains("Unsubscribe")), "{logs:?}");
    })
    .await;
}

#[tokio::test]
async fn sampling_round_trip() {
    let Some(server) = everything() else { return };
    let scenario = |route| {
        let server = server.clone();
        async move {
            let mut s = start(route, &server).await?;
            let peer = s.client.peer().clone();
            s.step(
                "trigger-sampling-request",
                peer.call_tool(call(
                    "trigger-sampling-request",
                    json!({ "prompt": "say hi", "maxTokens": 20 }),
                )),
            )
            .await?;
            s.finish().await
        }
    };
    assert_parity(&server, scenario, |t| {
        let requests = events_of(t, "request sampling/createMessage");
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert_eq!(requests[0]["params"]["maxTokens"], 20);
        let text = text_of(result_of(t, "trigger-sampling-request"));
        assert!(
            text.contains("a canned completion from the toolgate test client"),
            "{text}"
        );
    })
    .await;
}

#[tokio::test]
async fn elicitation_round_trip() {
    let Some(server) = everything() else { return };
    let scenario = |route| {
        let server = server.clone();
        async move {
            let mut s = start(route, &server).await?;
            let peer = s.client.peer().clone();
            s.step(
                "trigger-elicitation-request",
                peer.call_tool(call("trigger-elicitation-request", json!({}))),
            )
            .await?;
            s.finish().await
        }
    };
    assert_parity(&server, scenario, |t| {
        let requests = events_of(t, "request elicitation/create");
        assert_eq!(requests.len(), 1, "{requests:?}");
        let text = text_of(result_of(t, "trigger-elicitation-request"));
        assert!(
            text.contains("Name: Ada Lovelace") && text.contains("Favorite Integer: 7"),
            "{text}"
        );
    })
    .await;
}

#[tokio::test]
async fn roots_list_and_list_changed() {
    let Some(server) = everything() else { return };
    let scenario = |route| {
        let server = server.clone();
        async move {
            let mut s = start(route, &server).await?;
            let peer = s.client.peer().clone();
            s.step(
                "get-roots-list (1 root)",
                peer.call_tool(call("get-roots-list", json!({}))),
            )
            .await?;
            // The server re-requests roots when told they changed, then logs the new count.
            peer.notify_roots_list_changed().await?;
            s.note("notifications/roots/list_changed");
            s.expect_events(
                "roots/list again + log",
                &[("request roots/list", 1), ("notifications/message", 1)],
            )
            .await?;
            s.step(
                "get-roots-list (2 roots)",
                peer.call_tool(call("get-roots-list", json!({}))),
            )
            .await?;
            s.finish().await
        }
    };
    assert_parity(&server, scenario, |t| {
        assert_eq!(events_of(t, "request roots/list").len(), 2);
        let first = text_of(result_of(t, "get-roots-list (1 root)"));
        assert!(
            first.contains("(1 total)") && first.contains("file:///tmp/toolgate-root-a"),
            "{first}"
        );
        let second = text_of(result_of(t, "get-roots-list (2 roots)"));
        assert!(
            second.contains("(2 total)") && second.contains("file:///tmp/toolgate-root-b"),
            "{second}"
        );
    })
    .await;
}

#[tokio::test]
async fn cancellation_of_a_long_call() {
    let Some(server) = everything() else { return };
    let scenario = |route| {
        let server = server.clone();
        async move {
            let mut s = start(route, &server).await?;
            let peer = s.client.peer().clone();
            let request = ClientRequest::CallToolRequest(model(json!({
                "method": "tools/call",
                "params": { "name": "trigger-long-running-operation", "arguments": { "duration": 1.5, "steps": 3 } }
            })));
            let handle = peer
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await?;
            let cancelled_id = serde_json::to_value(&handle.id)?;
            s.expect_events("first progress", &[("notifications/progress", 1)])
                .await?;
            handle
                .cancel(Some("test cancels the call".to_owned()))
                .await?;
            s.note("notifications/cancelled");
            // The tool does not stop early, but the server must not answer a cancelled request.
            s.expect_events("remaining progress", &[("notifications/progress", 2)])
                .await?;
            s.step(
                "echo after cancel",
                peer.call_tool(call("echo", json!({ "message": "still alive" }))),
            )
            .await?;
            let answered = s.frames.snapshot().iter().any(|frame| {
                frame.get("id") == Some(&cancelled_id)
                    && (frame.get("result").is_some() || frame.get("error").is_some())
            });
            let mut transcript = s.finish().await?;
            transcript.push(json!({ "cancelled_request_answered": answered }));
            Ok(transcript)
        }
    };
    assert_parity(&server, scenario, |t| {
        assert_eq!(events_of(t, "notifications/progress").len(), 3);
        assert!(text_of(result_of(t, "echo after cancel")).contains("still alive"));
        assert_eq!(t.last().unwrap()["cancelled_request_answered"], false);
    })
    .await;
}
