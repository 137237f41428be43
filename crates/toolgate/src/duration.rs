//! Durations on the command line (`--timeout 90s`), shared by `toolgate` and `toolgate-hook`.

use std::time::Duration;

/// Parses `90`, `90s`, `1500ms`, `2m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("invalid duration `{s}` (expected e.g. `120s`, `2m`, `1500ms`)"))?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(n)),
        "ms" => Ok(Duration::from_millis(n)),
        "m" => Ok(Duration::from_secs(n.saturating_mul(60))),
        _ => Err(format!(
            "invalid duration unit in `{s}` (expected `ms`, `s` or `m`)"
        )),
    }
}
