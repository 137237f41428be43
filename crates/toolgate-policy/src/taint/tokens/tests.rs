use super::super::tests::ascii_text;
use super::*;

const ALL: [(&str, &TokenRegex); 8] = [
    ("url", &URL_RE),
    ("email", &EMAIL_RE),
    ("domain", &DOMAIN_RE),
    ("phone", &PHONE_RE),
    ("iban", &IBAN_RE),
    ("channel", &CHANNEL_RE),
    ("slack id", &SLACK_ID_RE),
    ("handle", &HANDLE_RE),
];

/// Every (start, end) of every group of every match, in order.
fn spans(re: &Regex, text: &str) -> Vec<Option<(usize, usize)>> {
    re.captures_iter(text)
        .flat_map(|c| {
            c.iter()
                .map(|m| m.map(|m| (m.start(), m.end())))
                .collect::<Vec<_>>()
        })
        .collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

    /// On ASCII text the ASCII form of each token regex finds exactly what the Unicode
    /// form finds: the same matches and groups at the same offsets.
    #[test]
    fn ascii_forms_match_like_unicode_forms(text in ascii_text()) {
        proptest::prop_assume!(text.is_ascii());
        for (name, re) in ALL {
            let a = re.get(true).unwrap();
            let u = re.get(false).unwrap();
            proptest::prop_assert_eq!(spans(a, &text), spans(u, &text), "{} on {:?}", name, text);
        }
    }
}

/// The domain-shape test as first written (every label in order, then the last one's
/// letters): the oracle for the faster form.
fn is_domain_shape_by_labels(domain: &str) -> bool {
    let mut labels = domain.split('.').peekable();
    let mut ok = true;
    while let Some(label) = labels.next() {
        let len = label.chars().count();
        ok &= (1..=63).contains(&len) && !label.starts_with('-') && !label.ends_with('-');
        if labels.peek().is_none() {
            ok &= len >= 2 && label.chars().all(char::is_alphabetic);
        }
    }
    ok
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

    #[test]
    fn domain_shape_is_the_per_label_definition(
        domain in "(([a-z0-9\\-]{0,3}|[a-zé1]{60,66}|ß|xn--ü)\\.){0,4}([a-z0-9\\-]{0,3}|[a-zé]{60,66}|ü|中文)"
    ) {
        proptest::prop_assert_eq!(
            is_domain_shape(&domain),
            is_domain_shape_by_labels(&domain),
            "{:?}",
            domain
        );
    }
}

fn find_spans(re: &Regex, text: &str) -> Vec<Span> {
    re.find_iter(text).map(|m| (m.start(), m.end())).collect()
}

/// The scanners against the ASCII regexes they stand in for.
fn check_scanners(text: &str) -> Result<(), proptest::test_runner::TestCaseError> {
    fn re(r: &'static TokenRegex) -> &'static Regex {
        r.get(true).unwrap()
    }
    proptest::prop_assert_eq!(
        scan::urls(text),
        find_spans(re(&URL_RE), text),
        "urls in {:?}",
        text
    );
    proptest::prop_assert_eq!(
        scan::domains(text),
        find_spans(re(&DOMAIN_RE), text),
        "domains in {:?}",
        text
    );
    proptest::prop_assert_eq!(
        scan::phones(text, re(&PHONE_RE)),
        find_spans(re(&PHONE_RE), text),
        "phones in {:?}",
        text
    );
    proptest::prop_assert_eq!(
        scan::ibans(text, re(&IBAN_RE)),
        find_spans(re(&IBAN_RE), text),
        "ibans in {:?}",
        text
    );
    proptest::prop_assert_eq!(
        scan::slack_ids(text),
        find_spans(re(&SLACK_ID_RE), text),
        "slack ids in {:?}",
        text
    );
    for (sigil, r) in [(b'#', &CHANNEL_RE), (b'@', &HANDLE_RE)] {
        let want: Vec<(usize, usize, usize)> = re(r)
            .captures_iter(text)
            .map(|c| {
                let (all, name) = (c.get(0).unwrap(), c.get(1).unwrap());
                (all.start(), name.start(), name.end())
            })
            .collect();
        proptest::prop_assert_eq!(
            scan::sigil_names(text.as_bytes(), sigil),
            want,
            "{} names in {:?}",
            char::from(sigil),
            text
        );
    }
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

    /// On ASCII text each scanner finds exactly the matches of the regex it replaces.
    #[test]
    fn scanners_match_like_the_regexes(text in ascii_text()) {
        proptest::prop_assume!(text.is_ascii());
        check_scanners(&text)?;
    }

    /// The same on text built from the pieces that make long and adjacent matches.
    #[test]
    fn scanners_match_like_the_regexes_on_dense_text(
        pieces in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::strategy::Just("DE89 3704 0044 0532 0130 00"),
                proptest::strategy::Just("GB82WEST12345698765432"),
                proptest::strategy::Just("ab12"),
                proptest::strategy::Just("CDEF"),
                proptest::strategy::Just("1"),
                proptest::strategy::Just("tel:"),
                proptest::strategy::Just("TeL:\n\t "),
                proptest::strategy::Just("+"),
                proptest::strategy::Just("+1 (415) 555-0100"),
                proptest::strategy::Just("0123456789"),
                proptest::strategy::Just(" "),
                proptest::strategy::Just("."),
                proptest::strategy::Just(".."),
                proptest::strategy::Just("a-b"),
                proptest::strategy::Just("https://"),
                proptest::strategy::Just("ws://"),
                proptest::strategy::Just("://"),
                proptest::strategy::Just("x"),
                proptest::strategy::Just("_"),
                proptest::strategy::Just("\""),
                proptest::strategy::Just("C0123ABCD"),
                proptest::strategy::Just("W0123ABCDEFG"),
                proptest::strategy::Just("GET"),
                proptest::strategy::Just("U"),
                proptest::strategy::Just("D9"),
                proptest::strategy::Just("Z"),
                proptest::strategy::Just("q"),
            ],
            0..40,
        )
    ) {
        check_scanners(&pieces.concat())?;
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

    /// The same where the generated text straddles the end of a scanner's block or
    /// segment (the dots of 8 KiB are listed at a time, blocks are 32 and 128 bytes): a
    /// long run of one filler piece first, then generated text around the boundary.
    #[test]
    fn scanners_match_like_the_regexes_across_blocks(
        fill in proptest::prop_oneof![
            proptest::strategy::Just("a"),
            proptest::strategy::Just("a."),
            proptest::strategy::Just("."),
            proptest::strategy::Just(" "),
            proptest::strategy::Just("7"),
            proptest::strategy::Just("x+"),
            proptest::strategy::Just("W "),
            proptest::strategy::Just("D"),
        ],
        before in 8140..8200_usize,
        text in ascii_text(),
    ) {
        proptest::prop_assume!(text.is_ascii());
        let mut long = fill.repeat(before / fill.len());
        long.push_str(&text);
        long.push_str(&fill.repeat(40));
        check_scanners(&long)?;
    }
}

#[test]
fn scanners_on_the_benchmark_prose() {
    let line = "The quarterly report covers revenue, churn and the hiring plan for the next two quarters; see /srv/reports/q3/summary.md for the tables.\n";
    let mut text = "Reply to alice@example.com, https://example.org/x?y=1 +44 20 7946 0958 DE89370400440532013000\n".to_owned();
    for _ in 0..50 {
        text.push_str(line);
    }
    check_scanners(&text).unwrap();
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

    /// The URL fast path gives exactly what the URL parser gives, whenever it answers.
    #[test]
    fn simple_url_is_normalize_url(
        pieces in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::strategy::Just("http://"),
                proptest::strategy::Just("HTTPS://"),
                proptest::strategy::Just("wS://"),
                proptest::strategy::Just("ftp://"),
                proptest::strategy::Just("gopher://"),
                proptest::strategy::Just("Crm"),
                proptest::strategy::Just("example"),
                proptest::strategy::Just(".com"),
                proptest::strategy::Just(".Org"),
                proptest::strategy::Just(".1"),
                proptest::strategy::Just("0x7f"),
                proptest::strategy::Just("xn--"),
                proptest::strategy::Just("XN--"),
                proptest::strategy::Just("-"),
                proptest::strategy::Just("."),
                proptest::strategy::Just(".."),
                proptest::strategy::Just("/"),
                proptest::strategy::Just("//"),
                proptest::strategy::Just("?"),
                proptest::strategy::Just("#"),
                proptest::strategy::Just("%2e"),
                proptest::strategy::Just("%41"),
                proptest::strategy::Just(":"),
                proptest::strategy::Just(":80"),
                proptest::strategy::Just("@"),
                proptest::strategy::Just("'"),
                proptest::strategy::Just("&"),
                proptest::strategy::Just("="),
                proptest::strategy::Just("~!$()*+,;"),
                proptest::strategy::Just("a"),
                proptest::strategy::Just("7"),
                proptest::strategy::Just("é"),
                proptest::strategy::Just("\\"),
                proptest::strategy::Just(" "),
            ],
            0..16,
        )
    ) {
        let raw = pieces.concat();
        if let Some((url, host)) = simple_url(&raw) {
            let net = normalize_url(&raw, "");
            proptest::prop_assert!(net.is_ok(), "{:?}: {:?}", raw, net);
            let net = net.unwrap();
            proptest::prop_assert_eq!(&url, &net.url, "{:?}", raw);
            proptest::prop_assert_eq!(&host, &net.host, "{:?}", raw);
        }
    }
}

#[test]
fn simple_url_takes_the_plain_forms() {
    for (raw, url, host) in [
        (
            "https://CRM.Example.com/contacts/7?tab=notes",
            "https://crm.example.com/contacts/7?tab=notes",
            "crm.example.com",
        ),
        ("HTTP://a-b.example", "http://a-b.example/", "a-b.example"),
        ("wss://x.example?q=1", "wss://x.example/?q=1", "x.example"),
    ] {
        assert_eq!(
            simple_url(raw),
            Some((url.to_owned(), host.to_owned())),
            "{raw}"
        );
        let net = normalize_url(raw, "").unwrap();
        assert_eq!((net.url.as_str(), net.host.as_str()), (url, host));
    }
    for raw in [
        "https://u:p@a.example/",
        "https://a.example:8443/",
        "https://a.example/x#f",
        "https://a.example/%41",
        "https://a.example/a/../b",
        "https://10.0.0.1/",
        "https://xn--bcher-kva.example/",
        "https://bücher.example/",
        "https://a.example/it's",
    ] {
        assert_eq!(simple_url(raw), None, "{raw}");
    }
}

#[test]
fn every_token_regex_compiles_in_both_forms() {
    for (name, re) in ALL {
        assert!(re.get(true).is_some(), "{name} (ascii)");
        assert!(re.get(false).is_some(), "{name} (unicode)");
    }
}

#[test]
fn iban_checksum() {
    assert!(iban_valid("DE89370400440532013000"));
    assert!(iban_valid("GB82WEST12345698765432"));
    assert!(!iban_valid("DE89370400440532013001"));
}

#[test]
fn an_iban_is_in_one_case_and_of_an_iban_country() {
    let ibans = |text: &str| -> Vec<String> {
        tokenize(text)
            .into_iter()
            .map(|t| t.text)
            .filter(|t| !t.contains(['.', '@', '/', ':']))
            .collect()
    };
    assert_eq!(
        ibans("pay GB82WEST12345698765432 today"),
        ["gb82west12345698765432"]
    );
    assert_eq!(
        ibans("pay gb82 west 1234 5698 7654 32 today"),
        ["gb82west12345698765432"]
    );
    // A run of base64 that passes the checksum by chance is not one.
    assert!(ibans("+Ic72jrLkFd9QWCkA0a6RFGnOwGARM5J+IMOz").is_empty());
    // Nor is a valid checksum under a country code that issues no IBANs (`ZZ`).
    assert!(!iban_valid("ZZ80539007547034"));
    assert!(iban_valid("XK46539007547034"));
}
