//! Audit figures for `toolgate report`: one streaming pass over the log.
//!
//! Each line is read into a borrowed view of the few members the report needs (no value
//! tree, no copies of fields it does not count); memory is bounded by the number of
//! distinct tools, days, hosts and suggestion keys, never by the number of records. The
//! figures never hold an argument value: raw arguments and reasons are skipped (only a
//! reason's kind, "timed out" or "tainted", is looked at), and the resources of asks only
//! as far as a suggestion needs them: the paths a person approved, at most
//! [`MAX_APPROVED_PATHS`] per suggestion, shown only in the rule suggested for them.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// At most this many asks are followed at once to see how they end; older ones beyond
/// it are counted as `unknown` (a log of asks nobody answered cannot grow memory).
const MAX_OPEN_ASKS: usize = 20_000;
/// At most this many distinct suggestion keys are counted.
const MAX_SUGGESTION_KEYS: usize = 20_000;
/// At most this many paths of approved asks are kept per suggestion key; past it, no rule is
/// suggested for the key.
pub const MAX_APPROVED_PATHS: usize = 64;
/// At most this many paths of one ask are kept (one with more counts as too many).
const MAX_ASK_PATHS: usize = 8;
/// At most this many distinct tools, hosts and days are counted; the rest go to `(other)`.
const MAX_KEYS: usize = 20_000;

/// Counts per effect.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EffectCounts {
    pub allow: u64,
    pub ask: u64,
    pub deny: u64,
}

impl EffectCounts {
    fn add(&mut self, effect: &str) {
        match effect {
            "allow" => self.allow += 1,
            "ask" => self.ask += 1,
            _ => self.deny += 1,
        }
    }

    /// Every decision counted.
    pub fn total(&self) -> u64 {
        self.allow + self.ask + self.deny
    }
}

/// How asks ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AskOutcomes {
    /// Approved for this call only.
    pub allowed_once: u64,
    /// Approved for the rest of the session.
    pub allowed_session: u64,
    /// Refused by the human (or no way to ask).
    pub denied: u64,
    /// Nobody answered in time.
    pub timed_out: u64,
    /// The client cancelled the call while it waited.
    pub cancelled: u64,
    /// No outcome in the log (still waiting when the log ends, or the proxy stopped).
    pub unknown: u64,
}

/// The chain check, as `toolgate audit verify` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainVerdict {
    pub intact: bool,
    /// Records verified before the problem (all of them when intact).
    pub verified_records: u64,
    /// The located problem, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_hash: Option<String>,
}

/// A group of approved asks that a policy line could allow (see the report's suggestions).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct AskKey {
    pub server: Option<String>,
    pub tool: String,
    /// The operation of the call (the first one when it had several).
    pub operation: Option<String>,
    /// `rule`, `default`, `sink_gate`, …: what asked.
    pub contract: Option<String>,
    /// The rule that asked.
    pub rule: Option<String>,
    /// The executable's base name, for shell calls.
    pub executable: Option<String>,
    /// The destination host, for network calls and sends.
    pub host: Option<String>,
}

/// Counts of one [`AskKey`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AskTally {
    /// Asks of this key that a human approved.
    pub approved: u64,
    /// Asks of this key that were refused or timed out.
    pub refused: u64,
    /// Asks of this key whose destination came from untrusted output (never suggested).
    pub tainted: u64,
    /// The paths of the approved asks (at most [`MAX_APPROVED_PATHS`]).
    pub resources: std::collections::BTreeSet<String>,
    /// More paths were approved than are kept.
    pub resources_overflow: bool,
}

/// Everything the report says about the audit log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditFigures {
    /// The log's path as given.
    pub path: String,
    /// `--since` / `--until` as applied (canonical UTC), if given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Records in the window (header excluded).
    pub records: u64,
    /// Lines that are not readable records.
    pub unreadable: u64,
    pub first_time: Option<String>,
    pub last_time: Option<String>,
    /// Decisions by effect (the effect each call was first given).
    pub decisions: EffectCounts,
    /// Decisions per tool, by effect.
    pub by_tool: BTreeMap<String, EffectCounts>,
    /// Decisions per deciding contract (`rule`, `default`, `sink_gate`, `pinning`, …).
    pub by_contract: BTreeMap<String, u64>,
    /// Decisions per day (UTC), by effect.
    pub by_day: BTreeMap<String, EffectCounts>,
    pub ask_outcomes: AskOutcomes,
    /// Denied calls per destination host, most first (at most 10).
    pub top_denied_hosts: Vec<(String, u64)>,
    /// Tool definitions that changed while pinned, per tool.
    pub definition_changes: BTreeMap<String, u64>,
    pub chain: ChainVerdict,
    /// Approved asks by what they were about (for suggestions); not printed as such.
    #[serde(skip)]
    pub asks: Vec<(AskKey, AskTally)>,
}

#[derive(Deserialize)]
struct LiteNet<'a> {
    #[serde(borrow)]
    host: Cow<'a, str>,
}

#[derive(Deserialize, Clone, Copy)]
struct LiteApproval {
    scope: toolgate_audit::ApprovalScope,
}

/// The members of a record the report reads; everything else is skipped.
#[derive(Deserialize)]
struct Lite<'a> {
    #[serde(borrow)]
    time: Cow<'a, str>,
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    session: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    request_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    server: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    operations: Vec<Cow<'a, str>>,
    #[serde(default, borrow)]
    resources: Vec<Cow<'a, str>>,
    #[serde(default, borrow)]
    executable: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    net: Option<LiteNet<'a>>,
    #[serde(default, borrow)]
    effect: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    contract: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    rule: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reason: Option<Cow<'a, str>>,
    #[serde(default)]
    approval: Option<LiteApproval>,
}

struct OpenAsk {
    key: Option<AskKey>,
    tainted: bool,
    /// The ask's paths; `None` when it had more than [`MAX_ASK_PATHS`].
    resources: Option<Vec<String>>,
}

fn bump(map: &mut BTreeMap<String, u64>, key: &str) {
    if let Some(n) = map.get_mut(key) {
        *n += 1;
    } else if map.len() < MAX_KEYS {
        map.insert(key.to_owned(), 1);
    } else {
        *map.entry("(other)".to_owned()).or_default() += 1;
    }
}

fn bump_effect(map: &mut BTreeMap<String, EffectCounts>, key: &str, effect: &str) {
    if let Some(n) = map.get_mut(key) {
        n.add(effect);
    } else if map.len() < MAX_KEYS {
        map.entry(key.to_owned()).or_default().add(effect);
    } else {
        map.entry("(other)".to_owned()).or_default().add(effect);
    }
}

fn base_name(exe: &str) -> &str {
    exe.rsplit('/').next().unwrap_or(exe)
}

/// Reads the log at `path` once and computes the figures of records with
/// `since <= time <= until` (canonical UTC bounds); the chain is verified over the whole log.
pub fn figures(
    path: &Path,
    since: Option<&str>,
    until: Option<&str>,
) -> anyhow::Result<AuditFigures> {
    // The chain is verified by a second reader on another thread, at the same time: each
    // pass is one sequential read with a fixed buffer, so memory stays bounded either way.
    let (counted, verified) = std::thread::scope(|scope| {
        let verifier = scope.spawn(|| toolgate_audit::verify_path(path));
        let counted = count(path, since, until);
        (counted, verifier.join())
    });
    let mut f = counted?;
    let v = verified
        .map_err(|_| anyhow::anyhow!("the audit verifier stopped unexpectedly"))?
        .with_context(|| format!("cannot verify audit log `{}`", path.display()))?;
    f.chain = ChainVerdict {
        intact: v.is_intact(),
        verified_records: v.records,
        problem: v.problem.as_ref().map(ToString::to_string),
        last_hash: v.last_hash.clone(),
    };
    Ok(f)
}

fn count(path: &Path, since: Option<&str>, until: Option<&str>) -> anyhow::Result<AuditFigures> {
    let file =
        File::open(path).with_context(|| format!("cannot open audit log `{}`", path.display()))?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut f = AuditFigures {
        path: path.display().to_string(),
        since: since.map(str::to_owned),
        until: until.map(str::to_owned),
        records: 0,
        unreadable: 0,
        first_time: None,
        last_time: None,
        decisions: EffectCounts::default(),
        by_tool: BTreeMap::new(),
        by_contract: BTreeMap::new(),
        by_day: BTreeMap::new(),
        ask_outcomes: AskOutcomes::default(),
        top_denied_hosts: Vec::new(),
        definition_changes: BTreeMap::new(),
        chain: ChainVerdict {
            intact: true,
            verified_records: 0,
            problem: None,
            last_hash: None,
        },
        asks: Vec::new(),
    };
    let mut denied_hosts: BTreeMap<String, u64> = BTreeMap::new();
    let mut open: HashMap<(String, String), OpenAsk> = HashMap::new();
    let mut tallies: HashMap<AskKey, AskTally> = HashMap::new();
    let mut buf = Vec::with_capacity(4096);
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("cannot read audit log `{}`", path.display()))?;
        if n == 0 {
            break;
        }
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        if line.is_empty() {
            continue;
        }
        let Ok(r) = serde_json::from_slice::<Lite<'_>>(line) else {
            f.unreadable += 1;
            continue;
        };
        if r.kind == "header" {
            continue;
        }
        if since.is_some_and(|s| *r.time < *s) || until.is_some_and(|u| *r.time > *u) {
            continue;
        }
        f.records += 1;
        if f.first_time.is_none() {
            f.first_time = Some(r.time.to_string());
        }
        match &f.last_time {
            Some(t) if t.as_str() >= &*r.time => {}
            _ => f.last_time = Some(r.time.to_string()),
        }
        let ask_id = match (&r.session, &r.request_id) {
            (s, Some(id)) => Some((s.as_deref().unwrap_or("").to_owned(), id.to_string())),
            _ => None,
        };
        match &*r.kind {
            "decision" => {
                let effect = r.effect.as_deref().unwrap_or("deny");
                // A deny that ends an ask is the ask's outcome, not a new decision.
                if effect != "ask"
                    && let Some(id) = &ask_id
                    && let Some(ask) = open.remove(id)
                {
                    let reason = r.reason.as_deref().unwrap_or("");
                    if reason.contains("no answer within")
                        || reason.contains("timed out")
                        || reason.contains("no answer on the terminal")
                    {
                        f.ask_outcomes.timed_out += 1;
                    } else {
                        f.ask_outcomes.denied += 1;
                    }
                    if let Some(key) = ask.key
                        && let Some(t) = tallies.get_mut(&key)
                    {
                        t.refused += 1;
                    }
                    count_denied_host(&mut denied_hosts, &r);
                    continue;
                }
                f.decisions.add(effect);
                let tool = r.tool.as_deref().unwrap_or("(none)");
                bump_effect(&mut f.by_tool, tool, effect);
                bump(
                    &mut f.by_contract,
                    r.contract.as_deref().unwrap_or("(none)"),
                );
                if let Some(day) = r.time.get(..10) {
                    bump_effect(&mut f.by_day, day, effect);
                }
                if effect == "deny" {
                    count_denied_host(&mut denied_hosts, &r);
                }
                if effect == "ask"
                    && let Some(id) = ask_id
                {
                    if open.len() >= MAX_OPEN_ASKS {
                        // Forget the asks the log never resolved rather than grow.
                        f.ask_outcomes.unknown += open.len() as u64;
                        open.clear();
                    }
                    let tainted = r
                        .reason
                        .as_deref()
                        .is_some_and(|x| x.contains("came from untrusted"));
                    let key = AskKey {
                        server: r.server.as_deref().map(str::to_owned),
                        tool: tool.to_owned(),
                        operation: r.operations.first().map(|o| o.to_string()),
                        contract: r.contract.as_deref().map(str::to_owned),
                        rule: r.rule.as_deref().map(str::to_owned),
                        executable: r.executable.as_deref().map(|e| base_name(e).to_owned()),
                        host: r.net.as_ref().map(|n| n.host.to_string()),
                    };
                    let key = if tallies.contains_key(&key) || tallies.len() < MAX_SUGGESTION_KEYS {
                        let t = tallies.entry(key.clone()).or_default();
                        if tainted {
                            t.tainted += 1;
                        }
                        Some(key)
                    } else {
                        None
                    };
                    let resources = (r.resources.len() <= MAX_ASK_PATHS)
                        .then(|| r.resources.iter().map(|p| p.to_string()).collect());
                    open.insert(
                        id,
                        OpenAsk {
                            key,
                            tainted,
                            resources,
                        },
                    );
                }
            }
            "approval" => {
                let Some(id) = ask_id else { continue };
                let Some(ask) = open.remove(&id) else {
                    continue;
                };
                match r.approval.map(|a| a.scope) {
                    Some(toolgate_audit::ApprovalScope::Session) => {
                        f.ask_outcomes.allowed_session += 1;
                    }
                    _ => f.ask_outcomes.allowed_once += 1,
                }
                if let Some(key) = ask.key
                    && let Some(t) = tallies.get_mut(&key)
                    && !ask.tainted
                {
                    t.approved += 1;
                    match ask.resources {
                        Some(paths) => {
                            for p in paths {
                                if t.resources.len() >= MAX_APPROVED_PATHS {
                                    t.resources_overflow = true;
                                    break;
                                }
                                t.resources.insert(p);
                            }
                        }
                        None => t.resources_overflow = true,
                    }
                }
            }
            "cancelled" => {
                if let Some(id) = ask_id
                    && open.remove(&id).is_some()
                {
                    f.ask_outcomes.cancelled += 1;
                }
            }
            "pin"
                if r.reason
                    .as_deref()
                    .is_some_and(|x| x.starts_with("definition changed")) =>
            {
                bump(
                    &mut f.definition_changes,
                    r.tool.as_deref().unwrap_or("(none)"),
                );
            }
            _ => {}
        }
    }
    f.ask_outcomes.unknown += open.len() as u64;
    let mut hosts: Vec<(String, u64)> = denied_hosts.into_iter().collect();
    hosts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    hosts.truncate(10);
    f.top_denied_hosts = hosts;
    let mut asks: Vec<(AskKey, AskTally)> = tallies.into_iter().collect();
    asks.sort_by(|a, b| a.0.cmp(&b.0));
    f.asks = asks;
    Ok(f)
}

fn count_denied_host(hosts: &mut BTreeMap<String, u64>, r: &Lite<'_>) {
    if let Some(net) = &r.net {
        bump(hosts, &net.host);
    }
}

// ----- time bounds -----------------------------------------------------------------------

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn num(s: &str, range: std::ops::RangeInclusive<i64>) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|n| range.contains(n))
}

/// Parses `--since`/`--until`: a date (`2026-03-01`) or an RFC 3339 time
/// (`2026-03-01T12:00:00Z`, `…+02:00`, fractional seconds allowed) into the audit log's
/// own form (`YYYY-MM-DDTHH:MM:SS.mmmZ`, UTC), which compares as text. A date as `until`
/// means the end of that day.
pub fn parse_bound(text: &str, end_of_day: bool) -> Result<String, String> {
    let bad = || {
        format!(
            "`{text}` is not a date or an RFC 3339 time\n  help: e.g. `2026-03-01` or `2026-03-01T12:00:00Z`"
        )
    };
    let t = text.trim();
    let (date, rest) = match t.get(..10) {
        Some(d) => (d, t.get(10..).unwrap_or("")),
        None => return Err(bad()),
    };
    let mut dp = date.split('-');
    let (Some(y), Some(m), Some(d), None) = (dp.next(), dp.next(), dp.next(), dp.next()) else {
        return Err(bad());
    };
    let (y, m, d) = (
        num(y, 0..=9999).ok_or_else(bad)?,
        num(m, 1..=12).ok_or_else(bad)?,
        num(d, 1..=31).ok_or_else(bad)?,
    );
    let days = days_from_civil(y, m, d);
    if civil_from_days(days) != (y, m, d) {
        return Err(bad());
    }
    let mut ms: i64 = if rest.is_empty() {
        if end_of_day { 86_400_000 - 1 } else { 0 }
    } else {
        let rest = rest.strip_prefix(['T', 't', ' ']).ok_or_else(bad)?;
        let (hh, mm, ss) = (
            rest.get(0..2)
                .and_then(|x| num(x, 0..=23))
                .ok_or_else(bad)?,
            rest.get(3..5)
                .and_then(|x| num(x, 0..=59))
                .ok_or_else(bad)?,
            rest.get(6..8)
                .and_then(|x| num(x, 0..=60))
                .ok_or_else(bad)?,
        );
        if rest.get(2..3) != Some(":") || rest.get(5..6) != Some(":") {
            return Err(bad());
        }
        let mut tail = rest.get(8..).unwrap_or("");
        let mut frac_ms = 0i64;
        if let Some(f) = tail.strip_prefix('.') {
            let digits = f.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(bad());
            }
            let (fd, after) = f.split_at(digits);
            let padded: String = fd.chars().chain("000".chars()).take(3).collect();
            frac_ms = num(&padded, 0..=999).ok_or_else(bad)?;
            tail = after;
        }
        let offset_min = match tail {
            "Z" | "z" => 0,
            _ => {
                let sign = match tail.get(..1) {
                    Some("+") => 1,
                    Some("-") => -1,
                    _ => return Err(bad()),
                };
                if tail.len() != 6 || tail.get(3..4) != Some(":") {
                    return Err(bad());
                }
                let oh = tail
                    .get(1..3)
                    .and_then(|x| num(x, 0..=23))
                    .ok_or_else(bad)?;
                let om = tail
                    .get(4..6)
                    .and_then(|x| num(x, 0..=59))
                    .ok_or_else(bad)?;
                sign * (oh * 60 + om)
            }
        };
        ((hh * 60 + mm - offset_min) * 60 + ss.min(59)) * 1000 + frac_ms
    };
    let mut days = days;
    days += ms.div_euclid(86_400_000);
    ms = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return Err(bad());
    }
    Ok(format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    ))
}

#[cfg(test)]
mod tests {
    use super::parse_bound;

    #[test]
    fn bounds_are_normalised_to_the_logs_form() {
        assert_eq!(
            parse_bound("2026-03-01", false).unwrap(),
            "2026-03-01T00:00:00.000Z"
        );
        assert_eq!(
            parse_bound("2026-03-01", true).unwrap(),
            "2026-03-01T23:59:59.999Z"
        );
        assert_eq!(
            parse_bound("2026-03-01T01:30:00+02:00", false).unwrap(),
            "2026-02-28T23:30:00.000Z"
        );
        assert_eq!(
            parse_bound("2026-12-31T23:59:59.5Z", false).unwrap(),
            "2026-12-31T23:59:59.500Z"
        );
        for bad in [
            "2026-02-30",
            "yesterday",
            "2026-03-01T25:00:00Z",
            "2026-03-01T10:00:00",
        ] {
            assert!(parse_bound(bad, false).is_err(), "{bad}");
        }
    }
}
