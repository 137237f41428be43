//! Secret shapes: the text of a credential recognised by its form alone (a private key
//! block, a cloud access key, a provider token, a JWT, a password in a URL), wherever it came
//! from. The sink gate asks before one leaves (a fingerprinted secret *value*,
//! [`crate::Session::secret_check`], is denied instead), and `output: {redact: secrets}`
//! replaces them in a tool's result. Pure: no IO; every pattern is compiled once.
//!
//! # Source
//!
//! The patterns are adapted from the gitleaks rule set (<https://github.com/gitleaks/gitleaks>,
//! `config/gitleaks.toml` and `cmd/generate/config/rules/*.go`; MIT licence, copyright (c)
//! 2019 Zachary Rice), rewritten for the Rust `regex` crate (no look-around; `\w` spelled
//! as ASCII classes). The rules taken, by gitleaks id: `private-key`, `aws-access-token`,
//! `gcp-api-key`, `github-pat`, `github-oauth`, `github-app-token`, `github-refresh-token`,
//! `github-fine-grained-pat`, `gitlab-pat`, `slack-bot-token`, `slack-user-token`,
//! `slack-app-token`, `slack-legacy-token`, `slack-legacy-workspace-token`,
//! `slack-legacy-bot-token`, `slack-webhook-url`, `stripe-access-token`, `openai-api-key`,
//! `anthropic-api-key`, `anthropic-admin-api-key`, `jwt`, `npm-access-token`,
//! `huggingface-access-token`. A GCP service-account key is caught by `private-key` (its
//! `private_key` field is a PEM block, with its line breaks escaped as `\n`). Two rules are
//! toolgate's own: OpenAI project and service keys of any length (`sk-proj-…`, the gitleaks
//! rule wants the `T3BlbkFJ` marker at a fixed place) and a password in a URL
//! (`scheme://user:pass@host`, placeholders such as `$PASSWORD`, `<password>` or `***` left
//! out).

use std::sync::OnceLock;

use regex::Regex;
use regex_automata::meta::Regex as Pattern;
use regex_automata::util::captures::Captures;
use regex_automata::{Anchored, Input};
use serde_json::Value;

/// One kind of secret a shape rule recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    /// The rule's id (gitleaks' where the rule is theirs).
    pub id: &'static str,
    /// What it is, as a noun phrase without article (`GitHub token`): the redaction marker's.
    pub label: &'static str,
    /// The article the label takes in a sentence (`a`, `an`).
    pub article: &'static str,
    /// How many characters at the start of a match are the shape's public prefix (at most
    /// 6): what a reason may show of it.
    prefix: usize,
}

impl Shape {
    /// `a GitHub token`.
    pub fn described(&self) -> String {
        format!("{} {}", self.article, self.label)
    }
}

/// A rule: its shape and its pattern (group 1, when the pattern has one, is the secret; the
/// rest of the match is context such as the character after it).
struct Rule {
    shape: Shape,
    /// Text every match holds, as in gitleaks' rules: the pattern is run only on text that
    /// holds one of them. In the pattern's case; a pattern that ignores case (`(?i)`) is
    /// searched for in every ASCII case of them.
    keywords: &'static [&'static str],
    /// Where a match starts: `Some(n)`, `n` bytes before the keyword it holds (the pattern
    /// is then run anchored there, once for each keyword found, over a bounded span, so a
    /// keyword met by chance, as in an attachment's base64, costs one short match, not a
    /// pass over the text); `None`, anywhere before it (the whole text is searched when
    /// one of the rule's keywords occurs).
    lead: Option<usize>,
    pattern: &'static str,
    /// A match that is a placeholder, not a secret, for rules that need it.
    reject: Option<fn(&str) -> bool>,
}

/// What ends a token in gitleaks' rules (`(?:[\x60'"\s;]|\\[nr]|$)`).
macro_rules! end {
    () => {
        r#"(?:[`'"\s;]|\\[nr]|$)"#
    };
}

const fn shape(
    id: &'static str,
    article: &'static str,
    label: &'static str,
    prefix: usize,
) -> Shape {
    Shape {
        id,
        label,
        article,
        prefix,
    }
}

const RULES: &[Rule] = &[
    Rule {
        shape: shape("private-key", "a", "private key block", 5),
        lead: None,
        keywords: &["-----"],
        pattern: r"(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S]{64}[\s\S]*?KEY(?: BLOCK)?-----",
        reject: None,
    },
    Rule {
        shape: shape("aws-access-token", "an", "AWS access key ID", 4),
        lead: Some(0),
        keywords: &["A3T", "AKIA", "ASIA", "ABIA", "ACCA"],
        pattern: r"(?-u:\b)((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})(?-u:\b)",
        reject: None,
    },
    Rule {
        shape: shape("gcp-api-key", "a", "Google API key", 4),
        lead: Some(0),
        keywords: &["AIza"],
        pattern: concat!(r"(?-u:\b)(AIza[0-9A-Za-z_-]{35})", end!()),
        reject: None,
    },
    Rule {
        shape: shape("github-pat", "a", "GitHub token", 4),
        lead: Some(0),
        keywords: &["ghp_"],
        pattern: r"ghp_[0-9a-zA-Z]{36}",
        reject: None,
    },
    Rule {
        shape: shape("github-oauth", "a", "GitHub token", 4),
        lead: Some(0),
        keywords: &["gho_"],
        pattern: r"gho_[0-9a-zA-Z]{36}",
        reject: None,
    },
    Rule {
        shape: shape("github-app-token", "a", "GitHub token", 4),
        lead: Some(0),
        keywords: &["ghu_", "ghs_"],
        pattern: r"(?:ghu|ghs)_[0-9a-zA-Z]{36}",
        reject: None,
    },
    Rule {
        shape: shape("github-refresh-token", "a", "GitHub token", 4),
        lead: Some(0),
        keywords: &["ghr_"],
        pattern: r"ghr_[0-9a-zA-Z]{36}",
        reject: None,
    },
    Rule {
        shape: shape("github-fine-grained-pat", "a", "GitHub token", 6),
        lead: Some(0),
        keywords: &["github_pat_"],
        pattern: r"github_pat_[0-9A-Za-z_]{82}",
        reject: None,
    },
    Rule {
        shape: shape("gitlab-pat", "a", "GitLab token", 6),
        lead: Some(0),
        keywords: &["glpat-"],
        pattern: r"glpat-[0-9A-Za-z_-]{20}",
        reject: None,
    },
    Rule {
        shape: shape("slack-bot-token", "a", "Slack token", 5),
        lead: Some(0),
        keywords: &["xoxb-"],
        pattern: r"xoxb-[0-9]{10,13}-[0-9]{10,13}[a-zA-Z0-9-]*",
        reject: None,
    },
    Rule {
        shape: shape("slack-user-token", "a", "Slack token", 5),
        lead: Some(0),
        keywords: &["xoxp-", "xoxe-"],
        pattern: r"xox[pe](?:-[0-9]{10,13}){3}-[a-zA-Z0-9-]{28,34}",
        reject: None,
    },
    Rule {
        shape: shape("slack-app-token", "a", "Slack token", 5),
        lead: Some(0),
        keywords: &["xapp-"],
        pattern: r"(?i)xapp-[0-9]-[A-Z0-9]+-[0-9]+-[a-z0-9]+",
        reject: None,
    },
    Rule {
        shape: shape("slack-legacy-token", "a", "Slack token", 5),
        lead: Some(0),
        keywords: &["xoxo-", "xoxs-"],
        pattern: r"xox[os]-[0-9]+-[0-9]+-[0-9]+-[a-fA-F0-9]+",
        reject: None,
    },
    Rule {
        shape: shape("slack-legacy-workspace-token", "a", "Slack token", 5),
        lead: Some(0),
        keywords: &["xoxa-", "xoxr-"],
        pattern: r"xox[ar]-(?:[0-9]-)?[0-9a-zA-Z]{8,48}",
        reject: None,
    },
    Rule {
        shape: shape("slack-legacy-bot-token", "a", "Slack token", 5),
        lead: Some(0),
        keywords: &["xoxb-"],
        pattern: r"xoxb-[0-9]{8,14}-[a-zA-Z0-9]{18,26}",
        reject: None,
    },
    Rule {
        shape: shape("slack-webhook-url", "a", "Slack webhook URL", 6),
        lead: None,
        keywords: &["hooks.slack.com/"],
        pattern: r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}",
        reject: None,
    },
    Rule {
        shape: shape("stripe-access-token", "a", "Stripe key", 6),
        lead: Some(1),
        keywords: &["k_test_", "k_live_", "k_prod_"],
        pattern: concat!(
            r"(?-u:\b)((?:sk|rk)_(?:test|live|prod)_[a-zA-Z0-9]{10,99})",
            end!()
        ),
        reject: None,
    },
    Rule {
        shape: shape("openai-api-key", "an", "OpenAI API key", 3),
        lead: Some(23),
        keywords: &["T3BlbkFJ"],
        pattern: concat!(
            r"(?-u:\b)(sk-[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20})",
            end!()
        ),
        reject: None,
    },
    Rule {
        shape: shape("openai-project-key", "an", "OpenAI API key", 6),
        lead: Some(0),
        keywords: &["sk-proj-", "sk-svcacct-", "sk-admin-"],
        pattern: r"(?-u:\b)(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,})",
        reject: None,
    },
    Rule {
        shape: shape("anthropic-api-key", "an", "Anthropic API key", 6),
        lead: Some(0),
        keywords: &["sk-ant-api03-"],
        pattern: concat!(r"(?-u:\b)(sk-ant-api03-[a-zA-Z0-9_-]{93}AA)", end!()),
        reject: None,
    },
    Rule {
        shape: shape("anthropic-admin-api-key", "an", "Anthropic API key", 6),
        lead: Some(0),
        keywords: &["sk-ant-admin01-"],
        pattern: concat!(r"(?-u:\b)(sk-ant-admin01-[a-zA-Z0-9_-]{93}AA)", end!()),
        reject: None,
    },
    Rule {
        shape: shape("jwt", "a", "JWT", 3),
        lead: None,
        keywords: &[".ey"],
        pattern: concat!(
            r"(?-u:\b)(ey[a-zA-Z0-9]{17,}\.ey[a-zA-Z0-9/\\_-]{17,}\.(?:[a-zA-Z0-9/\\_-]{10,}={0,2})?)",
            end!()
        ),
        reject: None,
    },
    Rule {
        shape: shape("npm-access-token", "an", "npm token", 4),
        lead: Some(0),
        keywords: &["npm_"],
        pattern: concat!(r"(?i)(?-u:\b)(npm_[a-z0-9]{36})", end!()),
        reject: None,
    },
    Rule {
        shape: shape("huggingface-access-token", "a", "Hugging Face token", 3),
        lead: Some(0),
        keywords: &["hf_"],
        pattern: concat!(r"(?-u:\b)(hf_[a-zA-Z]{34})", end!()),
        reject: None,
    },
    Rule {
        shape: shape("url-password", "a", "password in a URL", 6),
        lead: None,
        keywords: &["://"],
        pattern: r#"(?-u:\b)([a-zA-Z][a-zA-Z0-9+.-]{1,31}://[^\s:/?#@'"<>\\]+:([^\s/?#@'"<>\\]+)@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)"#,
        reject: Some(placeholder_url),
    },
];

/// A URL whose password is a placeholder (`$PASSWORD`, `${DB_PASS}`, `<password>`,
/// `{password}`, `%s`, `***`, `xxx`, `password`), or empty.
fn placeholder_url(m: &str) -> bool {
    let Some(pass) = m
        .split_once("://")
        .and_then(|(_, rest)| rest.rsplit_once('@'))
        .and_then(|(userinfo, _)| userinfo.split_once(':'))
        .map(|(_, p)| p)
    else {
        return true;
    };
    let lower = pass.to_ascii_lowercase();
    pass.is_empty()
        || pass.starts_with(['$', '<', '{', '%', '['])
        || pass.chars().all(|c| matches!(c, '*' | 'x' | 'X' | '.'))
        || matches!(
            lower.as_str(),
            "password" | "pass" | "passwd" | "pwd" | "secret" | "changeme" | "your_password"
        )
}

/// One regex per rule, no `RegexSet` (a set searched at once thrashes the lazy DFA on dense
/// text such as base64: 90 ms for a 1 MiB attachment), behind one search for every rule's
/// keywords: a text is read once, and only the rules whose keywords it holds run their
/// pattern.
struct Compiled {
    each: Vec<Pattern>,
    /// Every keyword form, as one alternation of literals (searched with a vectorised
    /// prefilter; an `AhoCorasick` of them gives up its prefilter past a dozen keywords and
    /// reads a MiB in 3 ms instead of 0.1).
    keywords: Regex,
    /// For each keyword form, the rules (bits by index in [`RULES`]) it admits.
    admits: std::collections::HashMap<String, u32>,
}

/// The rules, compiled once. `None` only if a pattern does not compile, which the unit tests
/// rule out; then nothing is recognised rather than a panic in library code.
fn compiled() -> Option<&'static Compiled> {
    static COMPILED: OnceLock<Option<Compiled>> = OnceLock::new();
    COMPILED
        .get_or_init(|| {
            let each = RULES
                .iter()
                .map(|r| Pattern::new(r.pattern).ok())
                .collect::<Option<Vec<_>>>()?;
            let mut admits: std::collections::HashMap<String, u32> =
                std::collections::HashMap::new();
            for (i, rule) in RULES.iter().enumerate() {
                for k in rule.keywords.iter().flat_map(|k| keyword_forms(rule, k)) {
                    *admits.entry(k).or_insert(0) |= 1 << i;
                }
            }
            let mut words: Vec<String> = admits.keys().map(|k| regex::escape(k)).collect();
            words.sort();
            let keywords = Regex::new(&words.join("|")).ok()?;
            Some(Compiled {
                each,
                keywords,
                admits,
            })
        })
        .as_ref()
}

/// The forms of a rule's keyword the text is searched for: itself, or, when the rule's
/// pattern ignores case, each of its ASCII cases.
fn keyword_forms(rule: &Rule, keyword: &str) -> Vec<String> {
    let mut forms = vec![String::new()];
    let fold = rule.pattern.starts_with("(?i)");
    for c in keyword.chars() {
        let cases = if fold && c.is_ascii_alphabetic() {
            vec![c.to_ascii_lowercase(), c.to_ascii_uppercase()]
        } else {
            vec![c]
        };
        forms = forms
            .iter()
            .flat_map(|f| cases.iter().map(move |c| format!("{f}{c}")))
            .collect();
    }
    forms
}

/// One secret of a recognised shape in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeMatch<'a> {
    /// What it is.
    pub shape: &'static Shape,
    /// Where it starts in the text (a byte offset).
    pub start: usize,
    /// Where it ends in the text (a byte offset, exclusive).
    pub end: usize,
    /// The secret itself (never to be shown: see [`ShapeMatch::shown`]).
    pub secret: &'a str,
}

impl ShapeMatch<'_> {
    /// What a message may show of it: the shape's public prefix (at most 6 characters)
    /// and `…` (`ghp_…`).
    pub fn shown(&self) -> String {
        let prefix: String = self.secret.chars().take(self.shape.prefix.min(6)).collect();
        format!("{prefix}…")
    }
}

/// The secrets of a recognised shape in `text`, in order, none overlapping (of two that
/// overlap, the one that starts first, or the longer, is kept).
pub fn find(text: &str) -> Vec<ShapeMatch<'_>> {
    let Some(c) = compiled() else {
        return Vec::new();
    };
    let mut found: Vec<ShapeMatch<'_>> = Vec::new();
    // The rules to run over the whole text (`lead: None`) whose keywords occur.
    let mut whole: u32 = 0;
    // For each rule run at its keywords: where its last match ended (a keyword before that
    // is inside it: the matches of one rule do not overlap, as in a search of the text).
    let mut free = [0usize; RULES.len()];
    let mut caps: [Option<Captures>; RULES.len()] = std::array::from_fn(|_| None);
    // Every keyword that occurs is found: the search is leftmost and each one starts one
    // byte past the start of the last match, so a match never hides one that starts later
    // (and no keyword holds another, a unit test, so none hides one at the same place).
    let mut at = 0;
    while let Some(m) = c.keywords.find_at(text, at) {
        let admitted = c.admits.get(m.as_str()).copied().unwrap_or(ALL_RULES);
        for (i, (rule, re)) in RULES.iter().zip(&c.each).enumerate() {
            if admitted & (1 << i) == 0 {
                continue;
            }
            let Some(lead) = rule.lead else {
                whole |= 1 << i;
                continue;
            };
            let Some(start) = m.start().checked_sub(lead) else {
                continue;
            };
            if free.get(i).is_some_and(|&f| start < f) {
                continue;
            }
            let end = text.len().min(start + MAX_KEYED_MATCH);
            let input = Input::new(text).span(start..end).anchored(Anchored::Yes);
            // One set of captures per rule, made at its first keyword.
            let Some(caps) = caps.get_mut(i) else {
                continue;
            };
            let caps = caps.get_or_insert_with(|| re.create_captures());
            re.search_captures(&input, caps);
            if let Some(m) = shape_match(rule, text, caps)
                && let Some(f) = free.get_mut(i)
            {
                *f = m.end;
                found.push(m);
            }
        }
        // A keyword starts with an ASCII character: one byte on is a boundary.
        at = m.start() + 1;
    }
    found.extend(searched(c, text, whole));
    first_of_overlapping(found)
}

/// The matches of the rules of `rules` (bits by index in [`RULES`]), each searched for in
/// the whole text.
fn searched<'a>(c: &Compiled, text: &'a str, rules: u32) -> Vec<ShapeMatch<'a>> {
    let mut found = Vec::new();
    for (i, (rule, re)) in RULES.iter().zip(&c.each).enumerate() {
        if rules & (1 << i) == 0 || !re.is_match(text) {
            continue;
        }
        for caps in re.captures_iter(text) {
            found.extend(shape_match(rule, text, &caps));
        }
    }
    found
}

/// `found` in order, none overlapping (of two that overlap, the one that starts first, or
/// the longer, is kept).
fn first_of_overlapping(mut found: Vec<ShapeMatch<'_>>) -> Vec<ShapeMatch<'_>> {
    found.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let mut kept: Vec<ShapeMatch<'_>> = Vec::with_capacity(found.len());
    for m in found {
        if kept.last().is_none_or(|k| m.start >= k.end) {
            kept.push(m);
        }
    }
    kept
}

/// The longest match of a rule run at its keywords that is read whole: a longer one (an
/// OpenAI project key of more than 4 KiB) is found as its first 4 KiB.
const MAX_KEYED_MATCH: usize = 4096;

/// The secret of a match of `rule` (group 1, when the pattern has one; never an empty one,
/// or one the rule rejects as a placeholder).
fn shape_match<'a>(rule: &'static Rule, text: &'a str, caps: &Captures) -> Option<ShapeMatch<'a>> {
    let span = caps.get_group(1).or_else(|| caps.get_group(0))?;
    let secret = text.get(span.range())?;
    if secret.is_empty() || rule.reject.is_some_and(|reject| reject(secret)) {
        return None;
    }
    Some(ShapeMatch {
        shape: &rule.shape,
        start: span.start,
        end: span.end,
        secret,
    })
}

/// Every rule, as a set of bits ([`RULES`] has fewer than 32).
const ALL_RULES: u32 = (1 << RULES.len()) - 1;
const _: () = assert!(RULES.len() < 32);

/// The most bytes of one call's arguments scanned for shapes ([`in_arguments`]); a call with
/// more is not proven clean (the sink gate asks). A payload of 1 MiB is scanned in full.
pub const MAX_SCANNED_BYTES: usize = 4 << 20;
/// The most strings of one call's arguments scanned.
pub const MAX_SCANNED_STRINGS: usize = 65_536;

/// A secret shape in a call's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentShape {
    /// The shape.
    pub shape: &'static Shape,
    /// The argument (`body`, `headers.Authorization`, `items[2]`; `arguments` for a bare
    /// string).
    pub argument: String,
    /// What may be shown of the secret ([`ShapeMatch::shown`]).
    pub shown: String,
}

/// What scanning a call's arguments found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgumentScan {
    /// No secret shape (that `vouched` did not vouch for).
    Clean,
    /// The first secret shape found.
    Found(ArgumentShape),
    /// The arguments are larger than [`MAX_SCANNED_BYTES`] (or hold more than
    /// [`MAX_SCANNED_STRINGS`] strings) and held no shape in what was scanned.
    TooLarge,
}

/// Scans every string of `arguments` (each on its own: a shape never spans two) for a secret
/// shape, skipping one `vouched` says the user typed (it gets the secret and the word around
/// it, as they appear).
pub fn in_arguments(arguments: &Value, vouched: &dyn Fn(&str) -> bool) -> ArgumentScan {
    let mut strings = Vec::new();
    let mut overflow = false;
    strings_of(arguments, String::new(), &mut strings, &mut overflow, 0);
    let mut budget = MAX_SCANNED_BYTES;
    for (argument, s) in strings {
        if s.len() > budget {
            overflow = true;
        }
        let s = crate::command_sink::cut(s, budget);
        budget = budget.saturating_sub(s.len());
        for m in find(s) {
            if vouched(m.secret) || vouched(word_around(s, m.start, m.end)) {
                continue;
            }
            return ArgumentScan::Found(ArgumentShape {
                shape: m.shape,
                argument,
                shown: m.shown(),
            });
        }
    }
    if overflow {
        ArgumentScan::TooLarge
    } else {
        ArgumentScan::Clean
    }
}

/// The white-space delimited word of `s` that holds `start..end`.
fn word_around(s: &str, start: usize, end: usize) -> &str {
    let from = s
        .get(..start)
        .and_then(|h| h.rfind(char::is_whitespace))
        .map_or(0, |i| i + 1);
    let to = s
        .get(end..)
        .and_then(|t| t.find(char::is_whitespace))
        .map_or(s.len(), |i| end + i);
    s.get(from..to).unwrap_or_default()
}

/// The strings of `v` with their paths (`a.b[0]`), depth first, at most
/// [`MAX_SCANNED_STRINGS`] and 32 levels deep (`overflow` set when some were left out): what
/// the shape scan and the secret-value check (`Session::secret_check`) read of a call.
pub(crate) fn strings_of<'a>(
    v: &'a Value,
    at: String,
    out: &mut Vec<(String, &'a str)>,
    overflow: &mut bool,
    depth: usize,
) {
    let container = matches!(v, Value::Array(_) | Value::Object(_));
    if (container && depth > 32)
        || (matches!(v, Value::String(_)) && out.len() >= MAX_SCANNED_STRINGS)
    {
        *overflow = true;
        return;
    }
    match v {
        Value::String(s) => out.push((
            if at.is_empty() {
                "arguments".to_owned()
            } else {
                at
            },
            s,
        )),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                strings_of(item, format!("{at}[{i}]"), out, overflow, depth + 1);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let next = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                strings_of(item, next, out, overflow, depth + 1);
            }
        }
        _ => {}
    }
}

/// The most bytes of one tool result that redaction reads ([`redact_result`]); text past
/// it is left as it is.
pub const MAX_REDACTED_BYTES: usize = 16 << 20;

/// What redaction replaced: each shape's label and how many of it (never the values).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactions {
    /// `(label, count)`, in the order first met.
    pub counts: Vec<(&'static str, u64)>,
}

impl Redactions {
    fn add(&mut self, label: &'static str) {
        match self.counts.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => self.counts.push((label, 1)),
        }
    }

    /// Whether nothing was replaced.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

/// `text` with every secret shape replaced by `[REDACTED: <label>]`; `None` when it held
/// none.
pub fn redact_text(text: &str, redactions: &mut Redactions) -> Option<String> {
    let found = find(text);
    if found.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for m in found {
        out.push_str(text.get(at..m.start).unwrap_or_default());
        out.push_str("[REDACTED: ");
        out.push_str(m.shape.label);
        out.push(']');
        redactions.add(m.shape.label);
        at = m.end;
    }
    out.push_str(text.get(at..).unwrap_or_default());
    Some(out)
}

/// Redacts an MCP `tools/call` result in place: the `text` of every `content` item of type
/// `text`, and every string of `structuredContent` (at most 32 levels deep). Reads at most
/// [`MAX_REDACTED_BYTES`] of text. Returns what was replaced (empty: `result` is untouched).
pub fn redact_result(result: &mut Value) -> Redactions {
    let mut redactions = Redactions::default();
    let mut budget = MAX_REDACTED_BYTES;
    if let Some(items) = result.get_mut("content").and_then(Value::as_array_mut) {
        for item in items {
            if item.get("type").and_then(Value::as_str) != Some("text") {
                continue;
            }
            if let Some(Value::String(text)) = item.get_mut("text") {
                redact_string(text, &mut budget, &mut redactions);
            }
        }
    }
    if let Some(structured) = result.get_mut("structuredContent") {
        redact_value(structured, &mut budget, &mut redactions, 0);
    }
    redactions
}

fn redact_string(text: &mut String, budget: &mut usize, redactions: &mut Redactions) {
    if *budget == 0 {
        return;
    }
    *budget = budget.saturating_sub(text.len());
    if let Some(new) = redact_text(text, redactions) {
        *text = new;
    }
}

fn redact_value(v: &mut Value, budget: &mut usize, redactions: &mut Redactions, depth: usize) {
    if depth > 32 {
        return;
    }
    match v {
        Value::String(s) => redact_string(s, budget, redactions),
        Value::Array(items) => {
            for item in items {
                redact_value(item, budget, redactions, depth + 1);
            }
        }
        Value::Object(map) => {
            for item in map.values_mut() {
                redact_value(item, budget, redactions, depth + 1);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "tests: a failed expectation should stop the test with its message"
    )]

    use serde_json::json;

    use super::*;

    /// Obviously fake secrets of each shape, built at run time so no literal in the source
    /// looks like a real credential.
    fn fake(prefix: &str, body: &str, n: usize) -> String {
        format!(
            "{prefix}{}",
            body.repeat(n.div_ceil(body.len())).get(..n).unwrap()
        )
    }

    fn private_key() -> String {
        format!(
            "-----BEGIN RSA PRIVATE KEY-----\n{}\n{}\n-----END RSA PRIVATE KEY-----",
            fake("", "FAKEKEYDATA", 64),
            fake("", "NOTAREALKEY", 64)
        )
    }

    fn jwt() -> String {
        // {"alg":"HS256","typ":"JWT"} . {"sub":"fake-user-for-tests"} . signature
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJmYWtlLXVzZXItZm9yLXRlc3RzIn0.ZmFrZXNpZ25hdHVyZWZha2VzaWc"
            .to_owned()
    }

    /// `(rule id, secret)` for every rule.
    fn samples() -> Vec<(&'static str, String)> {
        vec![
            ("private-key", private_key()),
            ("aws-access-token", fake("AKIA", "FAKEEXAMPLE", 16)),
            ("gcp-api-key", fake("AIza", "FakeKeyForTests_", 35)),
            ("github-pat", fake("ghp_", "FakeToken0", 36)),
            ("github-oauth", fake("gho_", "FakeToken0", 36)),
            ("github-app-token", fake("ghs_", "FakeToken0", 36)),
            ("github-refresh-token", fake("ghr_", "FakeToken0", 36)),
            (
                "github-fine-grained-pat",
                fake("github_pat_", "Fake_Token0", 82),
            ),
            ("gitlab-pat", fake("glpat-", "FakeToken0", 20)),
            (
                "slack-bot-token",
                format!("xoxb-1234567890-1234567890-{}", fake("", "FakeTok", 24)),
            ),
            (
                "slack-user-token",
                format!(
                    "xoxp-1234567890-1234567890-1234567890-{}",
                    fake("", "faketok", 32)
                ),
            ),
            (
                "slack-legacy-bot-token",
                "xoxb-12345678-FakeTokenFakeToken0000".to_owned(),
            ),
            (
                "slack-app-token",
                "xapp-1-A0FAKE00-1234567890-fake0fake0fake".to_owned(),
            ),
            (
                "slack-legacy-token",
                "xoxs-1234-5678-9012-deadbeef00".to_owned(),
            ),
            (
                "slack-legacy-workspace-token",
                format!("xoxa-2-{}", fake("", "FakeTok", 24)),
            ),
            (
                "slack-webhook-url",
                format!(
                    "https://hooks.slack.com/services/{}",
                    fake("", "FAKEfake00", 44)
                ),
            ),
            ("stripe-access-token", fake("sk_live_", "FakeKey0", 24)),
            (
                "openai-api-key",
                format!(
                    "sk-{}T3BlbkFJ{}",
                    fake("", "Fake0", 20),
                    fake("", "Fake0", 20)
                ),
            ),
            ("openai-project-key", fake("sk-proj-", "Fake_Key-0", 120)),
            (
                "anthropic-api-key",
                format!("{}AA", fake("sk-ant-api03-", "Fake_Key-0", 93)),
            ),
            (
                "anthropic-admin-api-key",
                format!("{}AA", fake("sk-ant-admin01-", "Fake_Key-0", 93)),
            ),
            ("jwt", jwt()),
            ("npm-access-token", fake("npm_", "fake0", 36)),
            ("huggingface-access-token", fake("hf_", "FakeToken", 34)),
            (
                "url-password",
                "https://deploy:n0t-a-real-pw@db.example.com".to_owned(),
            ),
        ]
    }

    #[test]
    fn every_pattern_compiles() {
        assert!(compiled().is_some());
        for r in RULES {
            assert!(Regex::new(r.pattern).is_ok(), "{}", r.id());
            assert!(r.shape.prefix <= 6);
        }
    }

    impl Rule {
        fn id(&self) -> &'static str {
            self.shape.id
        }
    }

    #[test]
    fn every_shape_is_found_alone_and_in_prose() {
        let samples = samples();
        for r in RULES {
            assert!(
                samples.iter().any(|(id, _)| *id == r.id()),
                "no sample for {}",
                r.id()
            );
        }
        for (id, secret) in samples {
            let found = find(&secret);
            assert_eq!(found.len(), 1, "{id}: {found:?}");
            assert_eq!(found[0].shape.id, id, "{id}");
            assert_eq!(found[0].secret, secret, "{id}");
            let prose = format!("here it is: {secret}\nthanks");
            let found = find(&prose);
            assert_eq!(found.len(), 1, "{id} in prose: {found:?}");
            assert_eq!(found[0].secret, secret, "{id} in prose");
            let quoted = format!(r#"{{"token": "{secret}"}}"#);
            assert_eq!(find(&quoted).len(), 1, "{id} quoted");
        }
    }

    #[test]
    fn every_sample_holds_a_keyword_of_its_rule() {
        for (id, secret) in samples() {
            let rule = RULES.iter().find(|r| r.id() == id).unwrap();
            assert!(
                rule.keywords.iter().any(|k| secret.contains(k)),
                "{id}: no keyword in {secret}"
            );
        }
        let all: Vec<String> = RULES
            .iter()
            .flat_map(|r| r.keywords.iter().flat_map(|k| keyword_forms(r, k)))
            .collect();
        for a in &all {
            for b in &all {
                assert!(a == b || !a.contains(b.as_str()), "`{a}` holds `{b}`");
            }
        }
        assert_eq!(
            keyword_forms(&RULES[0], "ab-"),
            ["ab-", "aB-", "Ab-", "AB-"]
        );
        for r in RULES {
            assert!(!r.keywords.is_empty(), "{}", r.id());
        }
    }

    proptest::proptest! {
        /// The keyword search only skips rules that could not match, and a rule run at its
        /// keywords finds what a search of the whole text does: on text made of secrets,
        /// their near misses and noise, in any case, `find` finds what every rule's pattern
        /// run alone over the whole text finds.
        #[test]
        fn keywords_skip_only_rules_that_cannot_match(
            parts in proptest::collection::vec((0usize..64, proptest::bool::ANY, "[ a-zA-Z0-9_:/.@-]{0,8}"), 0..8)
        ) {
            let samples = samples();
            let mut text = String::new();
            for (pick, upper, noise) in parts {
                if let Some((_, secret)) = samples.get(pick) {
                    // A sample cut short, or in upper case: near misses.
                    let secret = if upper { secret.to_ascii_uppercase() } else { secret.clone() };
                    let cut = secret.len() - pick % 3;
                    text.push_str(secret.get(..cut).unwrap_or(&secret));
                }
                text.push_str(&noise);
            }
            let c = compiled().unwrap();
            proptest::prop_assert_eq!(find(&text), first_of_overlapping(searched(c, &text, ALL_RULES)));
        }
    }

    #[test]
    fn a_gcp_service_account_key_is_its_private_key() {
        let json = format!(
            r#"{{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n"}}"#,
            fake("", "FAKEKEY", 128)
        );
        let found = find(&json);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].shape.id, "private-key");
    }

    #[test]
    fn near_misses_do_not_match() {
        let misses = [
            "the quick brown fox jumps over the lazy dog",
            "please review the ghp_ prefix handling and the AKIA docs",
            // A UUID, a git SHA, a SHA-256.
            "123e4567-e89b-12d3-a456-426614174000",
            "9353b53c1f0e6a2b8d4e5f60718293a4b5c6d7e8",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            // Base64 of prose.
            "VGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZw==",
            "TG9yZW0gaXBzdW0gZG9sb3Igc2l0IGFtZXQsIGNvbnNlY3RldHVyIGFkaXBpc2Npbmc=",
            // Too short, wrong alphabet, wrong case.
            "ghp_short",
            "AKIA1234",
            "akiaabcdefghijklmnop",
            "sk-ant-api03-short",
            "sk_live_",
            "sk-proj-short",
            "eyJhbGciOiJIUzI1NiJ9",
            // URLs without a password, or with a placeholder.
            "https://user@example.com/path",
            "git@github.com:org/repo.git",
            "https://example.com:8443/api",
            "postgres://user:$DB_PASSWORD@localhost/db",
            "postgres://user:${PASSWORD}@localhost/db",
            "mysql://root:<password>@db.internal",
            "redis://default:****@cache",
            "postgres://user:password@localhost/db",
            // A private key header without a body.
            "-----BEGIN RSA PRIVATE KEY-----",
            "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",
        ];
        for m in misses {
            assert_eq!(find(m), Vec::new(), "{m}");
        }
        // A longer run of token characters is not a Stripe key's end.
        let long = fake("xsk_live_", "FakeKey0", 24);
        assert!(find(&long).is_empty(), "{long}");
    }

    #[test]
    fn shown_is_a_public_prefix() {
        for (id, secret) in samples() {
            let m = &find(&secret)[0];
            let shown = m.shown();
            assert!(shown.ends_with('…'), "{id}: {shown}");
            assert!(shown.chars().count() <= 7, "{id}: {shown}");
        }
        let gh = fake("ghp_", "FakeToken0", 36);
        assert_eq!(find(&gh)[0].shown(), "ghp_…");
    }

    #[test]
    fn arguments_name_the_argument_and_skip_what_the_user_vouched() {
        let gh = fake("ghp_", "FakeToken0", 36);
        let args = json!({"title": "hello", "body": format!("token: {gh}")});
        let ArgumentScan::Found(f) = in_arguments(&args, &|_| false) else {
            panic!("not found");
        };
        assert_eq!(f.argument, "body");
        assert_eq!(f.shape.label, "GitHub token");
        assert_eq!(f.shown, "ghp_…");
        assert_eq!(in_arguments(&args, &|s| s == gh), ArgumentScan::Clean);
        let nested = json!({"files": [{"content": gh}]});
        let ArgumentScan::Found(f) = in_arguments(&nested, &|_| false) else {
            panic!("not found");
        };
        assert_eq!(f.argument, "files[0].content");
    }

    #[test]
    fn a_mebibyte_is_scanned_in_full_and_more_than_the_cap_is_too_large() {
        let gh = fake("ghp_", "FakeToken0", 36);
        let mut big = "a ".repeat((1 << 20) / 2);
        big.push_str(&gh);
        let args = json!({ "body": big });
        assert!(matches!(
            in_arguments(&args, &|_| false),
            ArgumentScan::Found(_)
        ));
        let huge = json!({ "body": "a ".repeat(MAX_SCANNED_BYTES / 2 + 1) });
        assert_eq!(in_arguments(&huge, &|_| false), ArgumentScan::TooLarge);
    }

    #[test]
    fn redaction_replaces_text_and_structured_content_only() {
        let gh = fake("ghp_", "FakeToken0", 36);
        let aws = fake("AKIA", "FAKEEXAMPLE", 16);
        let mut result = json!({
            "content": [
                {"type": "text", "text": format!("a {gh} and {aws} and {gh}")},
                {"type": "image", "data": gh.clone(), "mimeType": "image/png"},
            ],
            "structuredContent": {"token": gh.clone(), "n": 3},
            "isError": false,
        });
        let r = redact_result(&mut result);
        assert_eq!(
            result["content"][0]["text"],
            "a [REDACTED: GitHub token] and [REDACTED: AWS access key ID] and [REDACTED: GitHub token]"
        );
        assert_eq!(result["content"][1]["data"], gh.as_str());
        assert_eq!(
            result["structuredContent"]["token"],
            "[REDACTED: GitHub token]"
        );
        assert_eq!(
            r.counts,
            vec![("GitHub token", 3), ("AWS access key ID", 1)]
        );
        let mut clean = json!({"content": [{"type": "text", "text": "nothing here"}]});
        let before = clean.clone();
        assert!(redact_result(&mut clean).is_empty());
        assert_eq!(clean, before);
    }
}
