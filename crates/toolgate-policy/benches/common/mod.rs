//! The texts the taint benchmarks index: 1 MiB each of prose, a web server's access log,
//! text dense with dotted words, a CRM export (every line its own address and URL) and a
//! mailing list (500 addresses, repeated). Shared by `taint_index` and `sink_check`.

pub const MIB: usize = 1 << 20;

pub fn repeat_lines(line: impl Fn(usize) -> String) -> String {
    let mut text = String::with_capacity(MIB + 512);
    let mut n = 0;
    while text.len() < MIB {
        text.push_str(&line(n));
        n += 1;
    }
    text
}

pub fn texts() -> [(&'static str, String); 5] {
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
