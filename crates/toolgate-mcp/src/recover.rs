//! Best-effort recovery of the `id` from the prefix of a line too long to parse.

use serde_json::value::RawValue;

use crate::id::{IdKind, id_kind};

/// Finds the top-level `"id"` member in the prefix of an (oversize, truncated) frame and
/// returns its raw JSON text, if it is a complete string or number within the prefix.
///
/// Pure and bounded by the prefix length; never panics. Used to address an error reply
/// to a request that was too large to read.
pub fn recover_id(prefix: &[u8]) -> Option<Box<RawValue>> {
    let mut s = Scanner { b: prefix, i: 0 };
    s.ws();
    s.eat(b'{')?;
    loop {
        s.ws();
        let key_start = s.i;
        s.string()?;
        let key = prefix.get(key_start..s.i)?;
        s.ws();
        s.eat(b':')?;
        s.ws();
        let value_start = s.i;
        s.value()?;
        if key == b"\"id\"" {
            let text = std::str::from_utf8(prefix.get(value_start..s.i)?).ok()?;
            let raw = RawValue::from_string(text.to_owned()).ok()?;
            return match id_kind(&raw) {
                IdKind::String | IdKind::Number => Some(raw),
                IdKind::Null | IdKind::Other => None,
            };
        }
        s.ws();
        match s.next()? {
            b',' => continue,
            _ => return None,
        }
    }
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.i += 1;
        }
    }

    /// Skips a string (the opening quote must be next).
    fn string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            match self.next()? {
                b'"' => return Some(()),
                b'\\' => {
                    self.next()?;
                }
                _ => {}
            }
        }
    }

    /// Skips one value of any type, tracking nesting and strings.
    fn value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string(),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => self.string()?,
                        b'{' | b'[' => {
                            depth += 1;
                            self.i += 1;
                        }
                        b'}' | b']' => {
                            depth = depth.checked_sub(1)?;
                            self.i += 1;
                            if depth == 0 {
                                return Some(());
                            }
                        }
                        _ => self.i += 1,
                    }
                }
            }
            _ => {
                let start = self.i;
                while matches!(self.peek(), Some(c) if !matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'))
                {
                    self.i += 1;
                }
                // A scalar cut off by the end of the prefix is incomplete.
                if self.i == start || self.peek().is_none() {
                    return None;
                }
                Some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(s: &str) -> Option<String> {
        recover_id(s.as_bytes()).map(|r| r.get().to_owned())
    }

    #[test]
    fn finds_id_before_the_cut() {
        assert_eq!(
            rec(r#"{"jsonrpc":"2.0","id":42,"method":"x","params":{"a":"#),
            Some("42".into())
        );
        assert_eq!(
            rec(r#"{"params":{"id":1,"x":[1,{"y":"}"}]},"id":"abc","#),
            Some(r#""abc""#.into())
        );
        assert_eq!(rec(r#" { "id" : "a\"b" "#), Some(r#""a\"b""#.into()));
    }

    #[test]
    fn gives_up_when_incomplete_or_absent() {
        assert_eq!(rec(r#"{"jsonrpc":"2.0","method":"x","params":{"a":"#), None);
        assert_eq!(rec(r#"{"id":12"#), None);
        assert_eq!(rec(r#"{"id":"ab"#), None);
        assert_eq!(rec(r#"{"id":null,"#), None);
        assert_eq!(rec(r#"{"id":true,"#), None);
        assert_eq!(rec(r#"[{"id":1}"#), None);
        assert_eq!(rec(""), None);
        assert_eq!(rec("\u{ff}"), None);
    }
}
