//! Taint indexing of a large tool result (target: a 1 MB result adds ≤ 2 ms through
//! `wrap`, taint indexing included). Three texts of 1 MiB each, indexed from a fresh index:
//! - `prose`: the text `bench_latency --suite large` sends (a report line repeated, one
//!   escape per line);
//! - `access_log`: a web server's log (IP addresses, versions, URLs, user agents);
//! - `dotted`: text dense with dotted words that are not hosts (versions, IPs, `a.b.c`,
//!   `obj.field`), the tokenizer's worst ordinary case;
//! - `crm_export`: destination-dense text (target ≤ 3 ms per MiB): every line a contact with
//!   its own e-mail address and URL, as a CRM export has;
//! - `mailing_list`: as dense, but 500 addresses and URLs repeated (a mailing list's
//!   archive, an access log's referrers).
//!
//! Run: `cargo bench -p toolgate-policy --bench taint_index`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark tool: a failed setup step aborts the run with a message"
)]

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolgate_policy::{OutputTrust, TaintIndex, TaintLimits, TaintSource};

mod common;
use common::texts;

fn result_of(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

fn source() -> TaintSource {
    TaintSource {
        server: Some("filesystem".into()),
        tool: "read_file".into(),
        seq: 1,
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("taint/1MiB");
    group.sample_size(20);
    for (name, text) in texts() {
        let result = result_of(&text);
        group.bench_function(format!("record_json/{name}"), |b| {
            b.iter_batched_ref(
                || TaintIndex::new(TaintLimits::default()),
                |index| index.record_json(black_box(&result), OutputTrust::Untrusted, source()),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
