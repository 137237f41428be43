//! Durations on the command line (`--timeout 90s`), shared by `toolgate` and `toolgate-hook`.

use std::time::Duration;

/// Parses `90`, `90s`, `1500ms`, `2m`.
///
/// A thin wrapper over toolgate's one grammar ([`toolgate_policy::contracts::parse_duration`],
/// humantime's), narrower on purpose: the command line has always taken a bare number as
/// seconds (humantime wants a unit) and only the units `ms`, `s` and `m`, so a script that
/// worked keeps working and `5h` stays a typo rather than five hours of waiting.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let invalid = || format!("invalid duration `{s}` (expected e.g. `120s`, `2m`, `1500ms`)");
    let n: u64 = digits.parse().map_err(|_| invalid())?;
    match unit {
        "" => Ok(Duration::from_secs(n)),
        // Past what humantime counts (it adds nanoseconds and seconds up in `u64`), the
        // command line keeps the values it always gave: such milliseconds as they are, such
        // minutes saturated. Nobody waits that long, but a script that passed one still works.
        "ms" if n > u64::MAX / 1_000_000 => Ok(Duration::from_millis(n)),
        "m" if n > u64::MAX / 60 => Ok(Duration::from_secs(u64::MAX)),
        "ms" | "s" | "m" => toolgate_policy::contracts::parse_duration(s).map_err(|_| invalid()),
        _ => Err(format!(
            "invalid duration unit in `{s}` (expected `ms`, `s` or `m`)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("120s"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5h").is_err());
    }

    /// What the command line accepts, and with which value; anything else is refused.
    #[test]
    fn command_line_grammar_table() {
        let max = u64::MAX;
        let accepted: &[(&str, Duration)] = &[
            ("90", Duration::from_secs(90)),
            ("0", Duration::ZERO),
            ("007", Duration::from_secs(7)),
            ("120s", Duration::from_secs(120)),
            ("0s", Duration::ZERO),
            ("007s", Duration::from_secs(7)),
            ("2m", Duration::from_secs(120)),
            ("0m", Duration::ZERO),
            ("1500ms", Duration::from_millis(1500)),
            ("0ms", Duration::ZERO),
            (" 90s ", Duration::from_secs(90)),
            ("\t2m\n", Duration::from_secs(120)),
            ("18446744073709551615", Duration::from_secs(max)),
            ("18446744073709551615s", Duration::from_secs(max)),
            (
                "18446744073709ms",
                Duration::from_millis(18_446_744_073_709),
            ),
            (
                "18446744073710ms",
                Duration::from_millis(18_446_744_073_710),
            ),
            ("18446744073709551615ms", Duration::from_millis(max)),
            (
                "307445734561825860m",
                Duration::from_secs(307_445_734_561_825_860 * 60),
            ),
            // Minutes past what seconds can count saturate.
            ("307445734561825861m", Duration::from_secs(max)),
            ("18446744073709551615m", Duration::from_secs(max)),
        ];
        for (text, want) in accepted {
            assert_eq!(parse_duration(text), Ok(*want), "{text:?}");
        }
        let refused = [
            "",
            " ",
            "s",
            "ms",
            "m",
            "soon",
            "5h",
            "1h",
            "2min",
            "2mins",
            "5sec",
            "1d",
            "1.5s",
            "1.5",
            "90 s",
            "9 0",
            "+5s",
            "-5s",
            "-5",
            "5S",
            "5M",
            "5Ms",
            "1m30s",
            "1m 30s",
            "18446744073709551616",
            "18446744073709551616s",
            "99999999999999999999m",
            "5us",
            "5ns",
            "١٢s",
        ];
        for text in refused {
            assert!(parse_duration(text).is_err(), "{text:?} was accepted");
        }
    }
}
