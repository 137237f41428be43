//! Writing audit logs with a valid hash chain and chosen times, for report tests and the
//! report benchmark (the real writer stamps the current time).

use std::io::Write;
use std::path::Path;

use serde_json::{Map, Value, json};

/// Writes a log at `path`: a header, then one record per `(time, event)` (an event is a
/// JSON object of the audit `Event`'s members), chained like `AuditWriter` chains them.
pub fn write_log(path: &Path, events: impl IntoIterator<Item = (String, Value)>) {
    let file = std::fs::File::create(path).unwrap();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut prev = toolgate_audit::genesis_hash();
    let mut line = Vec::with_capacity(1024);
    let header = json!({"kind": "header", "format": toolgate_audit::FORMAT, "chain": "0123456789abcdef0123456789abcdef"});
    let first = ("2026-01-01T00:00:00.000Z".to_owned(), header);
    for (seq, (time, event)) in std::iter::once(first).chain(events).enumerate() {
        let mut m = Map::new();
        m.insert("seq".to_owned(), json!(seq));
        m.insert("prev".to_owned(), json!(prev));
        m.insert("time".to_owned(), json!(time));
        if let Value::Object(e) = event {
            m.extend(e);
        }
        line.clear();
        serde_json::to_writer(&mut line, &Value::Object(m)).unwrap();
        prev = toolgate_audit::line_hash(&line);
        line.push(b'\n');
        out.write_all(&line).unwrap();
    }
    out.flush().unwrap();
}

/// `n` realistic records over 30 days: decisions (mostly allow), asks with their approvals
/// or denials, results, denied network calls; deterministic.
pub fn synthetic_events(n: u64) -> impl Iterator<Item = (String, Value)> {
    let tools = [
        "read_file",
        "write_file",
        "fetch",
        "run_command",
        "send_email",
        "list_directory",
        "search_files",
        "create_issue",
        "post_message",
        "git_status",
    ];
    let mut i = 0u64;
    let mut pending: Option<(String, String)> = None;
    std::iter::from_fn(move || {
        if i >= n {
            return None;
        }
        let ms = i * (30 * 86_400_000 / n.max(1));
        let (day, rest) = (ms / 86_400_000, ms % 86_400_000);
        let time = format!(
            "2026-03-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            1 + day,
            rest / 3_600_000,
            rest / 60_000 % 60,
            rest / 1000 % 60,
            rest % 1000
        );
        let session = format!("s{}", i / 1000);
        let rid = format!("{}", i);
        let tool = tools[(i % 10) as usize];
        let ev = if let Some((s, r)) = pending.take() {
            if i.is_multiple_of(3) {
                json!({"kind":"decision","session":s,"request_id":r,"server":"bench","tool":tool,"effect":"deny","contract":"default","reason":"asked; the human declined","net":{"host":"api.example.com","method":"POST"}})
            } else {
                json!({"kind":"approval","session":s,"request_id":r,"server":"bench","tool":tool,"effect":"allow","contract":"default","approval":{"how":"broker","scope":"once"}})
            }
        } else {
            match i % 10 {
                0..=4 => {
                    json!({"kind":"decision","session":session,"request_id":rid,"server":"bench","tool":tool,"fingerprint":"0f".repeat(32),"operations":["fs.read"],"resources":["/home/u/project/src/lib.rs"],"effect":"allow","contract":"rule","rule":"allow-workspace-read","reason":"`fs.read` of `/home/u/project/src/lib.rs` matches allow rule `allow-workspace-read`","args_sha256":"ab".repeat(32),"latency_us":120})
                }
                5 | 6 => {
                    json!({"kind":"result","session":session,"request_id":rid,"server":"bench","tool":tool,"result_sha256":"cd".repeat(32),"isError":false})
                }
                7 => {
                    json!({"kind":"decision","session":session,"request_id":rid,"server":"bench","tool":tool,"operations":["net.request"],"net":{"host":format!("h{}.example.net", i % 50),"method":"GET"},"effect":"deny","contract":"sink_gate","reason":"destination `x` came from untrusted output","args_sha256":"ab".repeat(32)})
                }
                _ => {
                    pending = Some((session.clone(), rid.clone()));
                    json!({"kind":"decision","session":session,"request_id":rid,"server":"bench","tool":tool,"operations":["shell.exec"],"executable":"/usr/bin/make","effect":"ask","contract":"default","reason":"no rule matched; the default is ask (asking via Broker)","args_sha256":"ab".repeat(32)})
                }
            }
        };
        i += 1;
        Some((time, ev))
    })
}
