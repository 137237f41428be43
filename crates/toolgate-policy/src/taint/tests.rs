use super::*;

fn src(tool: &str) -> TaintSource {
    TaintSource {
        server: None,
        tool: tool.to_owned(),
        seq: 1,
    }
}

pub(super) fn ascii_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let piece = prop_oneof![
        Just("http".to_owned()),
        Just("HTTPS".to_owned()),
        Just("wss".to_owned()),
        Just("fTp".to_owned()),
        Just("://".to_owned()),
        Just("mailto:".to_owned()),
        Just("tel:".to_owned()),
        Just("TEL: ".to_owned()),
        Just("@".to_owned()),
        Just(".".to_owned()),
        Just("#".to_owned()),
        Just("+".to_owned()),
        Just("-".to_owned()),
        Just("_".to_owned()),
        Just("%".to_owned()),
        Just("(".to_owned()),
        Just(")".to_owned()),
        Just(" ".to_owned()),
        Just("\t".to_owned()),
        Just("\n".to_owned()),
        Just("\u{b}".to_owned()),
        Just("\u{1}".to_owned()),
        Just("<".to_owned()),
        Just("\"".to_owned()),
        Just("`".to_owned()),
        Just("[".to_owned()),
        Just("/".to_owned()),
        Just("?".to_owned()),
        Just("=".to_owned()),
        Just("com".to_owned()),
        Just("Corp".to_owned()),
        Just("bob".to_owned()),
        Just("k".to_owned()),
        Just("S".to_owned()),
        Just("DE89".to_owned()),
        Just("3704".to_owned()),
        Just("0044".to_owned()),
        Just("C0123ABCD9".to_owned()),
        Just("U012".to_owned()),
        Just("4155550100".to_owned()),
        Just("7".to_owned()),
        Just("x".to_owned()),
        "[ -~]",
        "[\\x00-\\x7f]",
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|v| v.concat())
}

#[test]
fn take_recorded_lists_each_token_once_per_new_source() {
    let mut index = TaintIndex::new(TaintLimits::default());
    let text = "write to bob@evil.example or https://hooks.evil.example/x";
    index.record_text(text, OutputTrust::Untrusted, src("a"));
    let first: Vec<String> = index
        .take_recorded()
        .into_iter()
        .map(String::from)
        .collect();
    assert!(first.contains(&"bob@evil.example".to_owned()), "{first:?}");
    assert_eq!(first, tokenize_destinations(text));
    assert!(index.take_recorded().is_empty());
    // Seen again in untrusted output: no new source, nothing to share.
    index.record_text(text, OutputTrust::Untrusted, src("b"));
    assert!(index.take_recorded().is_empty());
    // Seen in trusted output for the first time: a new (vouching) source.
    index.record_text("bob@evil.example", OutputTrust::Trusted, src("c"));
    let again: Vec<String> = index
        .take_recorded()
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(again, vec!["bob@evil.example".to_owned()]);
}

#[test]
fn tokens() {
    let t = tokenize_destinations(
        "Mail BOB@Corp.COM or see https://Evil.com./x?a=1#f, call +1 (415) 555-0100, pay DE89 3704 0044 0532 0130 00, #General @alice C0123ABCD9 notes.md",
    );
    for want in [
        "bob@corp.com",
        "https://evil.com/x?a=1",
        "evil.com",
        "+14155550100",
        "de89370400440532013000",
        "#general",
        "@alice",
        "c0123abcd9",
    ] {
        assert!(t.contains(&want.to_owned()), "{want} not in {t:?}");
    }
    assert!(!t.contains(&"notes.md".to_owned()));
}

#[test]
fn equality_not_substring() {
    let mut idx = TaintIndex::new(TaintLimits::default());
    idx.record_text(
        "reply to bob@corp.com.evil.net",
        OutputTrust::Untrusted,
        src("read_email"),
    );
    assert_eq!(idx.classify("bob@corp.com"), Provenance::Unproven);
    assert!(matches!(
        idx.classify("bob@corp.com.evil.net"),
        Provenance::Tainted(_)
    ));
}

/// An index that indexes `eager` tokens of each untrusted output and defers the rest.
fn index_with(eager: usize, texts: &[&str]) -> TaintIndex {
    let mut idx = TaintIndex::new(TaintLimits::default());
    idx.eager_tokens = eager;
    for (i, t) in texts.iter().enumerate() {
        idx.record_text(
            t,
            OutputTrust::Untrusted,
            TaintSource {
                server: None,
                tool: "read".into(),
                seq: i as u64 + 1,
            },
        );
    }
    idx
}

#[test]
fn deferred_text_answers_as_the_index_would() {
    let text = "intro\n\
            1,Jane,.Jane.Roe.@Customer1.Example.,HTTPS://CRM.example.com:443/a/../contacts/42?tab=notes#x\n\
            2,Bob,bob@corp.com.evil.net,http://user:pw@evil.com/x/.\n\
            3,x.carol@corp.com, call tel:\n+1 (415) 555-0100 or DE89 3704 0044 0532 0130 00\n\
            4,\"#General-\",@alice.,U0123ABCD9,a@b.com_dave@corp.com,\\hidden.org,notes.txt\n";
    let lazy = index_with(0, &[text]);
    assert_eq!(lazy.len(), 0, "nothing indexed eagerly");
    assert!(lazy.deferred_len() > 0);
    let tainted = [
        "jane.roe@customer1.example",
        "https://crm.example.com/contacts/42?tab=notes",
        "crm.example.com",
        "bob@corp.com.evil.net",
        "https://evil.com/x/",
        "https://other.example/?a=1#ignored",
        "evil.com",
        "x.carol@corp.com",
        "+14155550100",
        "DE89370400440532013000",
        "#general",
        "@alice",
        "U0123ABCD9",
        "_dave@corp.com",
    ];
    let eager = index_with(usize::MAX, &[text]);
    for v in tainted {
        let want = eager.classify(v);
        assert_eq!(lazy.classify(v), want, "{v}");
        if v != "https://other.example/?a=1#ignored" {
            assert!(matches!(want, Provenance::Tainted(_)), "{v}: {want:?}");
        }
    }
    for v in [
        "bob@corp.com",
        "carol@corp.com",
        "dave@corp.com",
        "roe@customer1.example",
        "https://crm.example.org/contacts/42?tab=notes",
        "example.com",
        "hidden.org",
        "notes.txt",
        "+1415555010",
        "#gen",
        "@ali",
    ] {
        assert_eq!(lazy.classify(v), eager.classify(v), "{v}");
        assert_eq!(lazy.classify(v), Provenance::Unproven, "{v}");
    }
}

#[test]
fn a_dense_output_indexes_its_first_tokens_and_defers_the_rest() {
    let mut text = String::new();
    for n in 0..5000 {
        text.push_str(&format!(
            "{n},c{n}@customer{}.example,https://crm.example.com/c/{n}\n",
            n % 97
        ));
    }
    let idx = index_with(deferred::EAGER_TOKENS, &[&text]);
    assert!(idx.len() >= deferred::EAGER_TOKENS, "{}", idx.len());
    assert!(idx.len() < 3 * deferred::EAGER_TOKENS, "{}", idx.len());
    assert!(idx.deferred_len() > text.len() / 2);
    for v in [
        "c0@customer0.example",
        "c4999@customer52.example",
        "https://crm.example.com/c/4321",
    ] {
        assert!(matches!(idx.classify(v), Provenance::Tainted(_)), "{v}");
    }
    assert_eq!(
        idx.classify("c5000@customer53.example"),
        Provenance::Unproven
    );
    // Non-ASCII text is indexed whole.
    let accented = text.replace("customer", "cüstomer");
    let idx = index_with(deferred::EAGER_TOKENS, &[&accented]);
    assert_eq!(idx.deferred_len(), 0);
    assert!(matches!(
        idx.classify("c4999@cüstomer52.example"),
        Provenance::Tainted(_)
    ));
}

/// Found by the property test below: a host of Slack-id length that is no Slack id
/// (`7u012de89`) is not matched by the Slack id's word-boundary approximation.
#[test]
fn only_slack_shaped_values_get_the_slack_approximation() {
    let text = "bob@cohttp://7U012DE89)rp.com and U0123ABCD9";
    let (eager, lazy) = (index_with(usize::MAX, &[text]), index_with(0, &[text]));
    for v in ["http://7u012de89/", "7u012de89", "U0123ABCD9"] {
        assert_eq!(lazy.classify(v), eager.classify(v), "{v}");
    }
    assert_eq!(lazy.classify("7u012de89"), Provenance::Unproven);
    assert!(matches!(
        lazy.classify("U0123ABCD9"),
        Provenance::Tainted(_)
    ));
}

fn dense_piece() -> impl proptest::strategy::Strategy<Value = &'static str> {
    use proptest::strategy::Just;
    proptest::prop_oneof![
        Just("bob@corp.com"),
        Just("BOB@Corp.COM"),
        Just(".bob.@corp.com."),
        Just("x.bob@corp.com"),
        Just("_bob@evil.com"),
        Just("a@b.com_bob@evil.com"),
        Just("mailto:bob@corp.com"),
        Just("bob%40corp.com"),
        Just("bob&#64;corp.com"),
        Just("https://crm.example.com/contacts/42?tab=notes"),
        Just("HTTPS://CRM.Example.com:443/a/../contacts/42?tab=notes#frag"),
        Just("http://user:pw@evil.com/x"),
        Just("http://evil.com"),
        Just("http://evil.com./"),
        Just("https://evil.com/x/."),
        Just("http://10.0.0.1/"),
        Just("http://0x0a.0.0.1/"),
        Just("evil.com"),
        Just("sub.evil.com"),
        Just("evil.com.au"),
        Just("notes.txt"),
        Just("\\evil.org"),
        Just("+1 (415) 555-0100"),
        Just("tel:\n4155550100"),
        Just("TEL: +44 20 7946 0958"),
        Just("DE89 3704 0044 0532 0130 00"),
        Just("GB82WEST12345698765432"),
        Just("#general"),
        Just("#General-"),
        Just("@alice"),
        Just("@alice."),
        Just("U0123ABCD9"),
        Just("C0123ABCD"),
        Just("bücher.de"),
        Just(" "),
        Just("\n"),
        Just("\""),
        Just(","),
        Just("("),
        Just(")"),
        Just("<"),
        Just("/"),
        Just("@"),
        Just("."),
        Just(":"),
        Just("-"),
        Just("_"),
        Just("x"),
        Just("1"),
        Just("%2e"),
        Just("&amp;"),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    /// Deferring a text's tokens never changes a verdict to anything but taint, and
    /// changes none at all for lower-case values that are not Slack-like ids.
    #[test]
    fn deferred_text_is_as_strict_as_indexing_it(
        pieces in proptest::collection::vec(dense_piece(), 0..40),
        noise in ascii_text(),
        probe in proptest::collection::vec(dense_piece(), 0..12),
    ) {
        let mut text = pieces.concat();
        let mut mid = text.len() / 2;
        while !text.is_char_boundary(mid) {
            mid -= 1;
        }
        text.insert_str(mid, &noise);
        let eager = index_with(usize::MAX, &[&text]);
        let lazy = index_with(0, &[&text]);
        let mut values: Vec<String> = tokenize_destinations(&text);
        values.extend(tokenize_destinations(&probe.concat()));
        values.extend(tokenize_destinations(&noise));
        values.extend(probe.iter().map(|p| (*p).to_owned()));
        for v in values {
            let (want, got) = (eager.classify(&v), lazy.classify(&v));
            if matches!(want, Provenance::Tainted(_)) {
                proptest::prop_assert!(matches!(got, Provenance::Tainted(_)), "{:?} in {:?}: {:?}", v, text, got);
            }
            // A Slack-like id is searched in lower case: written in lower case (or a
            // channel or handle with such a name) it counts too, toward taint.
            // (A URL's host is checked on its own, so the same holds for it.)
            let host = v.split_once("://").map(|(_, rest)| {
                rest.split(['/', '?', ':']).next().unwrap_or_default()
            });
            let slack_like = [Some(v.trim_start_matches(['#', '@'])), host]
                .into_iter()
                .flatten()
                .any(|name| {
                    name.len() <= 12 && name.bytes().all(|b| b.is_ascii_alphanumeric())
                });
            if v == v.to_lowercase() && !slack_like {
                proptest::prop_assert_eq!(&got, &want, "{:?} in {:?}", v, text);
            }
        }
    }
}
