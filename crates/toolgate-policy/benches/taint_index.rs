//! Taint indexing of a large tool result (issue 4: a 1 MB result adds ≤ 2 ms including
//! taint indexing). Three texts of 1 MiB each, indexed from a fresh index:
//! - `prose`: the text `bench_latency --suite large` sends (a report line repeated, one
//!   escape per line);
//! - `access_log`: a web server's log (IP addresses, versions, URLs, user agents);
//! - `dotted`: text dense with dotted words that are not hosts (versions, IPs, `a.b.c`,
//!   `obj.field`), the tokenizer's worst ordinary case;
//! - `crm_export`: destination-dense text (issue 21, section 4): every line a contact with
//!   its own e-mail address and URL, as a CRM export has;
//! - `mailing_list`: as dense, but 500 addresses and URLs repeated (a mailing list's
//!   archive, an access log's referrers).
//!
//! Run: `cargo bench -p toolgate-policy --bench taint_index`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolgate_policy::taint::{OutputTrust, TaintIndex, TaintLimits, TaintSource};

const MIB: usize = 1 << 20;

fn repeat_lines(line: impl Fn(usize) -> String) -> String {
    let mut text = String::with_capacity(MIB + 512);
    let mut n = 0;
    while text.len() < MIB {
        text.push_str(&line(n));
        n += 1;
    }
    text
}

fn texts() -> [(&'static str, String); 5] {
    let prose = repeat_lines(|_| {
        "The quarterly report covers revenue, churn and the hiring plan for the next two \
         quarters; see /srv/reports/q3/summary.md for the tables.\n"
            .to_owned()
    });
    let access_log = repeat_lines(|n| {
        format!(
            "10.0.{}.{} - - [01/Dec/2026:10:{:02}:{:02} +0000] \"GET /api/v1.2/items?id={n} \
             HTTP/1.1\" 200 {} \"https://shop.example.com/cart\" \"Mozilla/5.0 (X11; Linux \
             x86_64) AppleWebKit/537.36 Chrome/120.0.6099.71 Safari/537.36\"\n",
            n % 7,
            n % 251,
            n / 60 % 60,
            n % 60,
            100 + n % 900
        )
    });
    let dotted = repeat_lines(|_| {
        "v1.2.3 at 10.0.0.1, a.b.c.d e.f g.h 3.14 2.71 x.y.z obj.field.sub node.js\n".to_owned()
    });
    let crm_export = repeat_lines(|n| {
        format!(
            "{n},Jane Roe {n},jane.roe{n}@customer{}.example,https://crm.example.com/contacts/{n}?tab=notes,active\n",
            n % 97
        )
    });
    let mailing_list = repeat_lines(|n| {
        let k = n % 500;
        format!(
            "From: Member {k} <member{k}@lists{}.example> Archived-At: https://lists.example.org/archive/{k}\n",
            k % 13
        )
    });
    [
        ("prose", prose),
        ("access_log", access_log),
        ("dotted", dotted),
        ("crm_export", crm_export),
        ("mailing_list", mailing_list),
    ]
}

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
