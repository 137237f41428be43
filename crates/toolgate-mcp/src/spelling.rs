//! Names that other JSON-RPC stacks read as a name toolgate knows, though toolgate does not.
//!
//! toolgate compares member names and methods exactly, as JSON-RPC says. Some servers do
//! not: Go's `encoding/json` matches member names in any letter case (and folds `ſ` to `s`,
//! the Kelvin sign `K` to `k`), and a hand-written dispatcher may trim or lowercase the
//! method. A message that such a server reads as a `tools/call` must never pass toolgate
//! as something else, so these helpers find the names that only *resemble* one toolgate
//! knows.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// One character as Go's `bytes.EqualFold` folds it onto ASCII.
fn fold_char(c: char) -> char {
    match c {
        'ſ' => 's',
        '\u{212a}' => 'k',
        c => c.to_ascii_lowercase(),
    }
}

/// True when `candidate` equals the ASCII `name` in any letter case (`ſ` and `K`
/// included), exactly the same spelling included.
pub fn folds_to(candidate: &str, name: &str) -> bool {
    let mut chars = candidate.chars();
    for expected in name.chars() {
        if chars.next().map(fold_char) != Some(expected.to_ascii_lowercase()) {
            return false;
        }
    }
    chars.next().is_none()
}

/// Invisible formatting characters (Unicode `Cf`) a sloppy comparison may skip.
fn is_format(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{61c}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

/// True when `method` is not `name` but becomes it once whitespace, control and invisible
/// formatting characters are dropped and letter case is folded: `Tools/Call`,
/// `" tools/call"`, `"tools/call\u0000"`, `toolſ/call` all resemble `tools/call`.
pub fn resembles(method: &str, name: &str) -> bool {
    if method == name {
        return false;
    }
    // The common case: a plain ASCII method, compared without allocating.
    if method
        .bytes()
        .all(|b| b.is_ascii_graphic() && !b.is_ascii_uppercase())
    {
        return false;
    }
    let mut folded = method
        .chars()
        .filter(|&c| !c.is_whitespace() && !c.is_control() && !is_format(c))
        .flat_map(|c| match c {
            'ſ' => 's'.to_lowercase(),
            c => c.to_lowercase(),
        });
    let mut expected = name.chars().flat_map(char::to_lowercase);
    loop {
        match (folded.next(), expected.next()) {
            (None, None) => return true,
            (Some(a), Some(b)) if a == b => {}
            _ => return false,
        }
    }
}

/// A member of an object that makes it mean different things to different parsers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Ambiguity {
    /// The same member twice.
    #[error("member `{0}` appears more than once")]
    Duplicate(String),
    /// A member spelled like one of the names in another letter case.
    #[error("member `{found}` differs from `{name}` only in letter case")]
    Lookalike {
        /// The name as it appears.
        found: String,
        /// The name it resembles.
        name: &'static str,
    },
    /// Not an object at all.
    #[error("not a json object")]
    NotAnObject,
}

/// The first member of the object `raw` that repeats one of `names` or spells one of them
/// in another letter case (see [`folds_to`]); other members are skipped unread.
pub fn ambiguous_member(raw: &RawValue, names: &[&'static str]) -> Result<(), Ambiguity> {
    struct Check<'n>(&'n [&'static str]);
    impl<'de> de::DeserializeSeed<'de> for Check<'_> {
        type Value = Option<Ambiguity>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
    }
    impl<'de> Visitor<'de> for Check<'_> {
        type Value = Option<Ambiguity>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut seen: HashSet<&'static str> = HashSet::new();
            let mut found = None;
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                map.next_value::<IgnoredAny>()?;
                if found.is_some() {
                    continue;
                }
                let Some(&name) = self.0.iter().find(|n| folds_to(&key, n)) else {
                    continue;
                };
                if *key != *name {
                    found = Some(Ambiguity::Lookalike {
                        found: key.into_owned(),
                        name,
                    });
                } else if !seen.insert(name) {
                    found = Some(Ambiguity::Duplicate(name.to_owned()));
                }
            }
            Ok(found)
        }
    }
    let mut de = serde_json::Deserializer::from_str(raw.get());
    match de::DeserializeSeed::deserialize(Check(names), &mut de) {
        Ok(None) => Ok(()),
        Ok(Some(why)) => Err(why),
        Err(_) => Err(Ambiguity::NotAnObject),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_follows_go() {
        assert!(folds_to("method", "method"));
        assert!(folds_to("Method", "method"));
        assert!(folds_to("METHOD", "method"));
        assert!(folds_to("paramſ", "params"));
        assert!(folds_to("jſonrpc", "jsonrpc"));
        assert!(!folds_to("methods", "method"));
        assert!(!folds_to("metho", "method"));
        assert!(!folds_to("méthod", "method"));
        assert!(!folds_to("", "id"));
    }

    #[test]
    fn resemblance() {
        for odd in [
            "Tools/Call",
            "TOOLS/CALL",
            " tools/call",
            "tools/call ",
            "\ttools/call\n",
            "tools/call\u{0}",
            "tools/\u{200b}call",
            "tools/ call",
            "toolſ/call",
            "\u{feff}tools/call",
        ] {
            assert!(resembles(odd, "tools/call"), "{odd:?}");
        }
        for other in [
            "tools/call",
            "tools/list",
            "tools/calls",
            "ping",
            "",
            "tools/cal",
        ] {
            assert!(!resembles(other, "tools/call"), "{other:?}");
        }
        assert!(resembles("Prompts/Get", "prompts/get"));
        assert!(!resembles("notifications/initialized", "prompts/get"));
    }

    #[test]
    fn ambiguous_members() {
        let raw = |s: &str| RawValue::from_string(s.to_owned()).unwrap();
        let names = &["name", "arguments"];
        assert_eq!(
            ambiguous_member(&raw(r#"{"name":"a","arguments":{},"x":1,"X":2}"#), names),
            Ok(())
        );
        assert_eq!(
            ambiguous_member(&raw(r#"{"name":"a","Name":"b"}"#), names),
            Err(Ambiguity::Lookalike {
                found: "Name".into(),
                name: "name"
            })
        );
        assert_eq!(
            ambiguous_member(&raw(r#"{"name":"a","n\u0061me":"b"}"#), names),
            Err(Ambiguity::Duplicate("name".into()))
        );
        assert_eq!(
            ambiguous_member(&raw(r#"{"argumentſ":{}}"#), names),
            Err(Ambiguity::Lookalike {
                found: "argumentſ".into(),
                name: "arguments"
            })
        );
        assert_eq!(
            ambiguous_member(&raw("[1]"), names),
            Err(Ambiguity::NotAnObject)
        );
    }
}
