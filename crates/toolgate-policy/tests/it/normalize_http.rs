//! HTTP adapter: every URL-bearing argument, hosts from a real URL parser.

use serde_json::{Value, json};
use toolgate_policy::{
    Action, LexicalFs, NormalizeContext, Operation, ToolCall, ToolMapping, normalize, normalize_url,
};

fn run_with(tool: &str, args: Value, mapping: Option<ToolMapping>) -> Action {
    let ctx = NormalizeContext {
        workspace: "/w",
        home: "/home/u",
        fs: &LexicalFs,
    };
    let call = ToolCall {
        server: None,
        tool,
        arguments: &args,
        definition: None,
    };
    normalize(&call, mapping.as_ref(), &ctx)
}

fn run(tool: &str, args: Value) -> Action {
    run_with(tool, args, None)
}

/// `(host, method)` of net parts, `None` for an unknown part.
fn nets(a: &Action) -> Vec<Option<(String, String)>> {
    a.parts
        .iter()
        .map(|p| {
            if p.operation == Operation::NetRequest {
                let n = p.network.as_ref().unwrap();
                Some((n.host.clone(), n.method.clone()))
            } else {
                assert_eq!(p.operation, Operation::Unknown);
                assert!(p.opaque);
                None
            }
        })
        .collect()
}

fn net(host: &str, method: &str) -> Option<(String, String)> {
    Some((host.to_owned(), method.to_owned()))
}

#[test]
fn hosts_come_from_a_real_parser() {
    let cases: &[(&str, &str)] = &[
        ("https://example.com/a", "example.com"),
        ("https://good.com@evil.com/", "evil.com"),
        ("https://good.com:pw@evil.com/", "evil.com"),
        ("https://EVIL.com./x", "evil.com"),
        ("https://evil.com../x", "evil.com"),
        ("http://2130706433/", "127.0.0.1"),
        ("http://0x7f.1/", "127.0.0.1"),
        ("http://0x7f000001/", "127.0.0.1"),
        ("http://017700000001/", "127.0.0.1"),
        ("http://127.1/", "127.0.0.1"),
        ("https://bücher.example/", "xn--bcher-kva.example"),
        ("https://ＥＶＩＬ．com/", "evil.com"),
        ("https://ev%69l.com/", "evil.com"),
        ("http://[0:0::1]/", "[::1]"),
        ("  https://example.com/  ", "example.com"),
        // Found by fuzzing: stripping the dots makes the host an IPv4 address; report that.
        ("Http:21../x", "0.0.0.21"),
    ];
    for (raw, host) in cases {
        let a = run("fetch", json!({ "url": raw }));
        assert_eq!(nets(&a), [net(host, "GET")], "{raw}");
    }
    let n = normalize_url("https://u:p@Example.COM.:443/a?b#c", "post").unwrap();
    assert_eq!(n.url, "https://example.com/a?b");
    assert_eq!(n.port, Some(443));
    assert_eq!(n.scheme, "https");
    assert_eq!(n.method, "POST");
}

#[test]
fn every_url_argument_is_evaluated() {
    let a = run(
        "fetch",
        json!({"url": "https://ok.com", "redirect_url": "https://evil.com/cb"}),
    );
    assert_eq!(nets(&a), [net("ok.com", "GET"), net("evil.com", "GET")]);
    let a = run(
        "fetch",
        json!({"url": "https://ok.com", "redirectUrl": "https://evil.com/cb"}),
    );
    assert_eq!(nets(&a), [net("ok.com", "GET"), net("evil.com", "GET")]);
    let a = run(
        "http_request",
        json!({"endpoint": "https://ok.com", "options": {"headers": {"Referer": "HTTPS://evil.com/x"}}, "method": "post"}),
    );
    assert_eq!(nets(&a), [net("ok.com", "POST"), net("evil.com", "POST")]);
    let a = run(
        "fetch_url",
        json!({"urls": ["https://a.com", "https://b.com"]}),
    );
    assert_eq!(nets(&a), [net("a.com", "GET"), net("b.com", "GET")]);
    let a = run(
        "web_fetch",
        json!({"uri": "https://a.com", "callback": "https://hook.evil.com"}),
    );
    assert_eq!(nets(&a), [net("a.com", "GET"), net("hook.evil.com", "GET")]);
    // Declared URL params from a contract, plus strings that parse as URLs anywhere.
    let m = ToolMapping {
        operation: Some(Operation::NetRequest),
        url_params: vec!["target".to_owned()],
        ..ToolMapping::default()
    };
    let a = run_with(
        "ping_site",
        json!({"target": "http://2130706433/", "note": "also https://evil.com"}),
        Some(m.clone()),
    );
    assert_eq!(nets(&a)[0], net("127.0.0.1", "GET"));
    let a = run_with(
        "ping_site",
        json!({"target": "http://a.com", "n": "https://evil.com/x"}),
        Some(m),
    );
    assert_eq!(nets(&a), [net("a.com", "GET"), net("evil.com", "GET")]);
}

#[test]
fn unparseable_urls_are_unknown() {
    for args in [
        json!({"url": "not a url"}),
        json!({"url": "//evil.com/x"}),
        json!({"url": "evil.com/x"}),
        json!({"url": "file:///etc/passwd"}),
        json!({"url": "javascript:alert(1)"}),
        json!({"url": "https://good.com\\@evil.com/"}),
        json!({"url": "https://a@b@evil.com/"}),
        json!({"url": "https://good.com\t.evil.com/"}),
        json!({"url": "http://"}),
        json!({"url": 42}),
        json!({}),
        json!("https://example.com"),
    ] {
        let a = run("fetch", args.clone());
        assert!(
            a.parts
                .iter()
                .any(|p| p.operation == Operation::Unknown && p.opaque),
            "{args}: {a:#?}"
        );
    }
    // One bad URL next to a good one still leaves an unknown part: all must pass.
    let a = run(
        "fetch",
        json!({"url": "https://ok.com", "redirect_url": "::bad"}),
    );
    assert_eq!(nets(&a), [net("ok.com", "GET"), None]);
    // A non-string method: the part is not exact.
    let a = run(
        "http_request",
        json!({"url": "https://ok.com", "method": ["GET"]}),
    );
    assert!(a.parts.iter().all(|p| p.opaque));
}

#[test]
fn http_tool_names() {
    for tool in [
        "fetch",
        "http_request",
        "request",
        "get_url",
        "download",
        "fetch_url",
        "curl",
        "http_get",
        "web_fetch",
        "browser_navigate",
        "playwright_navigate",
        "fetchUrl",
    ] {
        let a = run(tool, json!({"url": "https://a.com"}));
        assert_eq!(nets(&a), [net("a.com", "GET")], "{tool}");
    }
    // Not http tools: one unknown part (their URLs are left to contracts and the sink gate).
    for tool in [
        "create_pull_request",
        "send_email",
        "prefetch_cache_stats_x",
    ] {
        let a = run(tool, json!({"url": "https://a.com"}));
        assert_eq!(a.parts.len(), 1, "{tool}");
        assert_eq!(a.parts[0].operation, Operation::Unknown, "{tool}");
    }
}
