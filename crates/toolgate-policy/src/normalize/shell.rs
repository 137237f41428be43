//! Shell adapter: a conservative, quoting-aware scanner and the look-through of wrappers.
//!
//! The scanner does not try to be a shell. It answers one question exactly — "is this string
//! one simple command whose argv is known before it runs?" — and otherwise gives best-effort
//! segments so deny rules still see every executable.
//!
//! A string is [`Scan::Simple`] only when it has none of the following outside quotes:
//! `;` `&` `|` `<` `>` `(` `)` a backtick, a newline, a `#` starting a word (comment), and
//! nothing that changes argv at run time: no `$` anywhere outside single quotes (`$VAR`,
//! `$(…)`, `${…}`, `$'…'`), no unquoted glob character (`*` `?` `[`), no unquoted `{…}`
//! (brace expansion; the literal word `{}` is fine), no unquoted `~` at the start of a word
//! or after `=` / `:` (tilde expansion), no `!` starting a word. Such strings are
//! [`Scan::Compound`] (a single segment when only an expansion was found): not exact, so
//! allow rules never match them. An unbalanced quote or a trailing backslash is
//! [`Scan::Invalid`].

mod wrappers;

pub use wrappers::{basename, look_through};
pub(crate) use wrappers::{expand, has_shell_meta};

/// The verdict of [`scan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scan {
    /// Exactly one simple command with a known argv.
    Simple(Vec<String>),
    /// Anything else that parses: operators, substitutions, expansions. Segments are the
    /// best-effort words of each command (split at every operator and substitution).
    Compound { segments: Vec<Vec<String>> },
    /// Unbalanced quotes, trailing backslash, or an empty command.
    Invalid,
}

#[derive(Debug, Default)]
struct Scanner {
    segments: Vec<Vec<String>>,
    words: Vec<String>,
    word: String,
    in_word: bool,
    word_brace: bool,
    compound: bool,
    inexact: bool,
    /// Something hides what runs: a command or process substitution, a variable in the
    /// command position, quoting that cannot be decoded.
    hidden: bool,
    /// The word being read expands at run time (a variable, a glob, `~`, braces).
    word_inexact: bool,
    /// The word being read had a quote in it (`"2">x` is no file descriptor).
    word_quoted: bool,
    /// The segment being read has a word that expands at run time.
    seg_inexact: bool,
    /// Redirections of the segment being read.
    seg_redirects: Vec<Redirect>,
    /// What each segment in `segments` knows beyond its words.
    seg_info: Vec<SegInfo>,
    /// Redirections of a segment without words (`> file`).
    loose_redirects: Vec<Redirect>,
    /// A redirection operator waits for its target word.
    pending: Option<Pending>,
    /// Delimiters of here-documents whose bodies start at the next line.
    heredocs: Vec<String>,
    /// The delimiter of the here-document whose body is being read.
    body: Option<String>,
    /// Something other than `|`, `&&`, `||`, `;`, a newline and file redirections joins or
    /// shapes the commands: `&`, `( )`, `{ }` as a group, a here-document, a comment, a
    /// line continuation, a syntax error.
    bad_ops: bool,
}

/// A file redirection (`< f`, `> f`, `>> f`, `2> f`, `&> f`, `<> f`, `>& f`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redirect {
    /// Whether the shell opens the target for writing (else reading).
    pub write: bool,
    /// The decoded target word.
    pub target: String,
    /// The target word expands at run time.
    pub inexact: bool,
}

/// What a segment of a command line carries besides its words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SegInfo {
    /// A word of the segment expands at run time.
    pub inexact: bool,
    pub redirects: Vec<Redirect>,
    /// A line of a here-document's body (text, scanned for what its substitutions run).
    pub body: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Read,
    Write,
    ReadWrite,
    /// `>&`, `<&`: a file descriptor (`2>&1`, `>&-`), or a file when the word is not one.
    Dup {
        write: bool,
    },
    /// A here-string: the word is no file.
    Data,
    /// A here-document's delimiter.
    Heredoc,
}

impl Scanner {
    /// True while the word being read is the command name of its segment (only
    /// assignments and reserved words before it, and it is not an assignment itself).
    fn at_command_position(&self) -> bool {
        self.words
            .iter()
            .all(|w| is_assignment(w) || RESERVED.contains(&w.as_str()))
            && !(self.word.contains('=') && is_assignment(&self.word))
    }

    /// A `$` expansion (variable, parameter, arithmetic) in the current word.
    fn expansion(&mut self) {
        self.mark_inexact();
        if self.at_command_position() {
            self.hidden = true;
        }
    }

    fn mark_inexact(&mut self) {
        self.inexact = true;
        self.word_inexact = true;
    }

    fn end_word(&mut self) {
        if self.in_word {
            if self.word_brace && self.word != "{}" {
                self.mark_inexact();
            }
            let word = std::mem::take(&mut self.word);
            match self.pending.take() {
                None => {
                    self.seg_inexact |= self.word_inexact;
                    self.words.push(word);
                }
                Some(p) => self.redirect(p, word),
            }
        }
        self.in_word = false;
        self.word_brace = false;
        self.word_inexact = false;
        self.word_quoted = false;
    }

    fn redirect(&mut self, pending: Pending, target: String) {
        let inexact = self.word_inexact;
        let mut add = |write: bool, target: String| {
            self.seg_redirects.push(Redirect {
                write,
                target,
                inexact,
            });
        };
        match pending {
            Pending::Read => add(false, target),
            Pending::Write => add(true, target),
            Pending::ReadWrite => {
                add(false, target.clone());
                add(true, target);
            }
            Pending::Dup { write } => {
                let digits = target.strip_suffix('-').unwrap_or(&target);
                if inexact || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    add(write, target);
                }
            }
            Pending::Data => {}
            Pending::Heredoc => self.heredocs.push(target),
        }
    }

    fn end_segment(&mut self) {
        self.end_word();
        if self.pending.take().is_some() {
            // A redirection without its target: a syntax error.
            self.bad_ops = true;
        }
        let redirects = std::mem::take(&mut self.seg_redirects);
        let inexact = std::mem::take(&mut self.seg_inexact);
        let body = self.body.is_some();
        if body && self.words.len() == 1 && self.words.first() == self.body.as_ref() {
            // The delimiter line ends this body; the next here-document's may follow.
            self.body = (!self.heredocs.is_empty()).then(|| self.heredocs.remove(0));
        }
        if !self.words.is_empty() {
            self.segments.push(std::mem::take(&mut self.words));
            self.seg_info.push(SegInfo {
                inexact,
                redirects,
                body,
            });
        } else {
            self.loose_redirects.extend(redirects);
        }
    }

    /// An operator other than `|`, `&&`, `||`, `;` and a newline.
    fn other_operator(&mut self) {
        self.bad_ops = true;
        self.operator();
    }

    fn push(&mut self, c: char) {
        self.word.push(c);
        self.in_word = true;
    }

    fn operator(&mut self) {
        self.compound = true;
        self.end_segment();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Single,
    Double,
}

struct Detailed {
    segments: Vec<Vec<String>>,
    seg_info: Vec<SegInfo>,
    loose_redirects: Vec<Redirect>,
    bad_ops: bool,
    compound: bool,
    inexact: bool,
    hidden: bool,
    invalid: bool,
}

/// Reserved words a command name may follow.
const RESERVED: &[&str] = &[
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "do",
    "done",
    "while",
    "until",
    "!",
    "{",
    "}",
    "coproc",
    "noglob",
    "nocorrect",
    "-",
];

/// Why an ANSI-C quoted string (`$'…'`) could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AnsiC {
    /// No closing quote.
    Unterminated,
    /// A byte that is not UTF-8 on its own (`\xff`, `\377`), a NUL (bash cuts the word
    /// there), or a character outside ASCII whose encoding depends on the locale.
    Undecodable,
}

/// Decodes the body of `$'…'` (after the opening quote, up to and including the closing
/// one) the way bash does: `\a \b \e \E \f \n \r \t \v \\ \' \" \?`, `\NNN`
/// (octal, one to three digits), `\xHH` (one or two hex digits), `\uHHHH`, `\UHHHHHHHH`,
/// `\cX` (control-X); any other escape stays as written, backslash included.
fn decode_ansi_c(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<String, AnsiC> {
    let mut out = String::new();
    let mut undecodable = false;
    // A decoded byte or code point: ASCII other than NUL, else undecodable.
    let byte = |out: &mut String, v: u32| -> bool {
        match char::from_u32(v) {
            Some(c) if v != 0 && v < 0x80 => {
                out.push(c);
                true
            }
            _ => false,
        }
    };
    loop {
        let Some(c) = chars.next() else {
            return Err(AnsiC::Unterminated);
        };
        match c {
            '\'' => break,
            '\\' => {
                let Some(e) = chars.next() else {
                    return Err(AnsiC::Unterminated);
                };
                match e {
                    'a' => out.push('\u{7}'),
                    'b' => out.push('\u{8}'),
                    'e' | 'E' => out.push('\u{1b}'),
                    'f' => out.push('\u{c}'),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'v' => out.push('\u{b}'),
                    '\\' | '\'' | '"' | '?' => out.push(e),
                    '0'..='7' => {
                        let mut v = e.to_digit(8).unwrap_or(0);
                        for _ in 0..2 {
                            match chars.peek().and_then(|d| d.to_digit(8)) {
                                Some(d) => {
                                    v = v * 8 + d;
                                    chars.next();
                                }
                                None => break,
                            }
                        }
                        undecodable |= !byte(&mut out, v & 0xff);
                    }
                    'x' | 'u' | 'U' => {
                        let max = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let mut v: u32 = 0;
                        let mut n = 0;
                        while n < max {
                            match chars.peek().and_then(|d| d.to_digit(16)) {
                                Some(d) => {
                                    v = v.wrapping_mul(16).wrapping_add(d);
                                    chars.next();
                                    n += 1;
                                }
                                None => break,
                            }
                        }
                        if n == 0 {
                            out.push('\\');
                            out.push(e);
                        } else {
                            undecodable |= !byte(&mut out, v);
                        }
                    }
                    'c' => match chars.next() {
                        Some('?') => out.push('\u{7f}'),
                        Some(x) if x.is_ascii() && x != '\\' && x != '\'' => {
                            undecodable |=
                                !byte(&mut out, u32::from(x.to_ascii_uppercase()) & 0x1f);
                        }
                        Some('\'') | None => return Err(AnsiC::Unterminated),
                        Some(_) => undecodable = true,
                    },
                    other => {
                        out.push('\\');
                        out.push(other);
                    }
                }
            }
            other => out.push(other),
        }
    }
    if undecodable {
        Err(AnsiC::Undecodable)
    } else {
        Ok(out)
    }
}

fn scan_detailed(command: &str) -> Detailed {
    let mut s = Scanner::default();
    let mut quote = Quote::None;
    let mut invalid = false;
    // Command substitutions opened inside double quotes: the closing delimiter (`)` or a
    // backtick) and the depth of nested parentheses; closing one returns to the quotes.
    let mut frames: Vec<(char, usize)> = Vec::new();
    let mut chars = command.chars().peekable();
    let mut prev: Option<char> = None;
    while let Some(c) = chars.next() {
        let was = prev;
        prev = Some(c);
        let prev = was;
        match quote {
            Quote::Single => {
                if c == '\'' {
                    quote = Quote::None;
                } else {
                    s.push(c);
                }
            }
            Quote::Double => match c {
                '"' => quote = Quote::None,
                '\\' => match chars.next() {
                    Some(n @ ('$' | '`' | '"' | '\\')) => s.push(n),
                    Some('\n') => {}
                    Some(n) => {
                        s.push('\\');
                        s.push(n);
                    }
                    None => invalid = true,
                },
                '`' => {
                    frames.push(('`', 0));
                    quote = Quote::None;
                    s.hidden = true;
                    s.other_operator();
                }
                '$' => {
                    if chars.peek() == Some(&'(') {
                        chars.next();
                        frames.push((')', 0));
                        quote = Quote::None;
                        s.hidden = true;
                        s.other_operator();
                    } else {
                        s.expansion();
                        s.push(c);
                    }
                }
                _ => s.push(c),
            },
            Quote::None => match c {
                ' ' | '\t' => s.end_word(),
                '(' => {
                    if let Some((')', depth)) = frames.last_mut() {
                        *depth += 1;
                    }
                    if matches!(prev, Some('<' | '>')) {
                        // Process substitution `<(…)`, `>(…)`: a command whose output (a
                        // path) becomes an argument.
                        s.hidden = true;
                    }
                    s.other_operator();
                }
                ')' => {
                    match frames.last_mut() {
                        Some((')', 0)) => {
                            frames.pop();
                            quote = Quote::Double;
                        }
                        Some((')', depth)) => *depth -= 1,
                        _ => {}
                    }
                    s.other_operator();
                }
                '`' => {
                    if let Some(('`', _)) = frames.last() {
                        frames.pop();
                        quote = Quote::Double;
                    }
                    s.hidden = true;
                    s.other_operator();
                }
                '\n' => {
                    s.operator();
                    if s.body.is_none() && !s.heredocs.is_empty() {
                        // The lines that follow are a here-document's body.
                        s.body = Some(s.heredocs.remove(0));
                    }
                }
                ';' => s.operator(),
                '\r' => s.other_operator(),
                '|' => {
                    // `|`, `||`, `|&`.
                    if matches!(chars.peek(), Some('|' | '&')) {
                        chars.next();
                    }
                    s.operator();
                }
                '&' => match chars.peek() {
                    Some('&') => {
                        chars.next();
                        s.operator();
                    }
                    Some('>') => {
                        // `&>FILE`, `&>>FILE`: stdout and stderr to a file.
                        chars.next();
                        if chars.peek() == Some(&'>') {
                            chars.next();
                        }
                        s.compound = true;
                        s.end_word();
                        s.pending = Some(Pending::Write);
                    }
                    _ => s.other_operator(),
                },
                '<' | '>' => {
                    // Redirection: not simple; the target is no word of the command.
                    s.compound = true;
                    let fd = s.in_word
                        && !s.word_quoted
                        && !s.word.is_empty()
                        && s.word.bytes().all(|b| b.is_ascii_digit());
                    if fd {
                        s.word.clear();
                        s.in_word = false;
                        s.word_brace = false;
                        s.word_inexact = false;
                    } else if s.in_word && s.word_brace && s.word.starts_with('{') {
                        // `{name}>file`: a descriptor allocated into a variable.
                        s.bad_ops = true;
                        s.end_word();
                    } else {
                        s.end_word();
                    }
                    if s.pending.is_some() {
                        s.bad_ops = true;
                    }
                    let pending = match (c, chars.peek().copied()) {
                        (_, Some('(')) => None,
                        ('>', Some('>')) => {
                            chars.next();
                            Some(Pending::Write)
                        }
                        ('>', Some('|')) => {
                            chars.next();
                            Some(Pending::Write)
                        }
                        ('>', Some('&')) => {
                            chars.next();
                            Some(Pending::Dup { write: true })
                        }
                        ('>', _) => Some(Pending::Write),
                        ('<', Some('<')) => {
                            chars.next();
                            if chars.peek() == Some(&'<') {
                                chars.next();
                                Some(Pending::Data)
                            } else {
                                // A here-document: its body lines are text (only their
                                // substitutions run); they are still scanned, so that deny
                                // rules see every command a substitution may run.
                                s.bad_ops = true;
                                if chars.peek() == Some(&'-') {
                                    chars.next();
                                }
                                Some(Pending::Heredoc)
                            }
                        }
                        ('<', Some('>')) => {
                            chars.next();
                            Some(Pending::ReadWrite)
                        }
                        ('<', Some('&')) => {
                            chars.next();
                            Some(Pending::Dup { write: false })
                        }
                        _ => Some(Pending::Read),
                    };
                    s.pending = pending;
                }
                '\\' => match chars.next() {
                    Some('\n') => s.other_operator(),
                    Some(n) => {
                        s.word_quoted = true;
                        s.push(n);
                    }
                    None => invalid = true,
                },
                '\'' => {
                    quote = Quote::Single;
                    s.in_word = true;
                    s.word_quoted = true;
                }
                '"' => {
                    quote = Quote::Double;
                    s.in_word = true;
                    s.word_quoted = true;
                }
                '$' => match chars.peek() {
                    Some('(') => {
                        chars.next();
                        if let Some((')', depth)) = frames.last_mut() {
                            *depth += 1;
                        }
                        s.hidden = true;
                        s.other_operator();
                    }
                    Some('\'') => {
                        chars.next();
                        s.in_word = true;
                        s.word_quoted = true;
                        match decode_ansi_c(&mut chars) {
                            Ok(text) => s.word.push_str(&text),
                            Err(AnsiC::Unterminated) => invalid = true,
                            Err(AnsiC::Undecodable) => {
                                s.mark_inexact();
                                s.hidden = true;
                                s.word.push('$');
                            }
                        }
                    }
                    Some('"') => {
                        // `$"…"`: translated by the locale's message catalogue.
                        s.mark_inexact();
                        s.hidden = true;
                        s.in_word = true;
                    }
                    _ => {
                        s.expansion();
                        s.push(c);
                    }
                },
                '*' | '?' | '[' => {
                    s.mark_inexact();
                    s.push(c);
                }
                '{' | '}' => {
                    s.word_brace = true;
                    s.push(c);
                }
                '#' if !s.in_word => {
                    // A comment: the shell ignores the rest, we keep scanning (deny rules
                    // see more, never less).
                    s.compound = true;
                    s.bad_ops = true;
                    s.end_segment();
                }
                '!' if !s.in_word => {
                    s.mark_inexact();
                    s.push(c);
                }
                '~' if !s.in_word || s.word.ends_with('=') || s.word.ends_with(':') => {
                    s.mark_inexact();
                    s.push(c);
                }
                _ => s.push(c),
            },
        }
    }
    if quote != Quote::None || !frames.is_empty() {
        invalid = true;
    }
    s.end_segment();
    Detailed {
        seg_info: s.seg_info,
        loose_redirects: s.loose_redirects,
        bad_ops: s.bad_ops,
        compound: s.compound,
        inexact: s.inexact,
        hidden: s.hidden,
        invalid,
        segments: s.segments,
    }
}

/// Scans a shell command string. See the module documentation for what counts as simple.
pub fn scan(command: &str) -> Scan {
    scan_hiding(command).0
}

/// [`scan`], and whether the string hides what it runs: a command or process substitution
/// (`$(…)`, a backtick, `<(…)`), a variable in the command position (`$X args`), or quoting
/// that cannot be decoded (`$'\xff'`, `$"…"`). Such a string is never [`Scan::Simple`].
pub fn scan_hiding(command: &str) -> (Scan, bool) {
    let d = scan_detailed(command);
    let hidden = d.hidden;
    (scan_verdict(d), hidden)
}

fn scan_verdict(d: Detailed) -> Scan {
    if d.invalid {
        return Scan::Invalid;
    }
    if d.segments.is_empty() {
        return if d.compound || d.inexact {
            Scan::Compound {
                segments: Vec::new(),
            }
        } else {
            Scan::Invalid
        };
    }
    if d.compound || d.inexact || d.segments.len() != 1 {
        return Scan::Compound {
            segments: d.segments,
        };
    }
    match d.segments.into_iter().next() {
        Some(argv) => Scan::Simple(argv),
        None => Scan::Invalid,
    }
}

/// One command line read for what it touches: its segments with their redirections, and
/// whether it is an *exact compound*.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Line {
    pub segments: Vec<Segment>,
    /// Redirections outside any command (`> file` alone truncates it).
    pub loose: Vec<Redirect>,
    /// Only simple commands joined by `|`, `&&`, `||`, `;` or a newline, with file
    /// redirections; no word expands at run time, nothing hides what runs, no reserved word
    /// starts a command. Each segment's argv is then exactly what bash runs.
    pub exact: bool,
    /// What runs is hidden (see [`scan_hiding`]).
    pub hidden: bool,
    /// The string does not parse; `segments` are best effort.
    pub invalid: bool,
}

/// One simple command of a [`Line`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Segment {
    pub words: Vec<String>,
    /// A word expands at run time (a variable, a glob, `~`, braces).
    pub inexact: bool,
    pub redirects: Vec<Redirect>,
    /// A line of a here-document's body.
    pub body: bool,
}

/// Words that start a shell construct, not a command.
const CONSTRUCTS: &[&str] = &[
    "for", "case", "esac", "select", "function", "in", "[[", "]]", "((", "))", "time", "declare",
    "typeset", "local", "readonly", "export", "alias", "trap", "let",
];

/// Reads a command line for what it touches (see [`Line`]).
pub(crate) fn parse_line(command: &str) -> Line {
    let d = scan_detailed(command);
    if d.invalid {
        let segments = best_effort_segments(command)
            .into_iter()
            .map(|words| Segment {
                words,
                inexact: true,
                redirects: Vec::new(),
                body: false,
            })
            .collect();
        return Line {
            segments,
            loose: d.loose_redirects,
            exact: false,
            hidden: d.hidden,
            invalid: true,
        };
    }
    let segments: Vec<Segment> = d
        .segments
        .into_iter()
        .zip(d.seg_info.into_iter().chain(std::iter::repeat(SegInfo {
            inexact: true,
            redirects: Vec::new(),
            body: false,
        })))
        .map(|(words, info)| Segment {
            words,
            inexact: info.inexact,
            redirects: info.redirects,
            body: info.body,
        })
        .collect();
    let exact = !d.hidden
        && !d.bad_ops
        && !d.inexact
        && !segments.is_empty()
        && d.loose_redirects.is_empty()
        && segments.iter().all(|seg| {
            !seg.inexact
                && seg.redirects.iter().all(|r| !r.inexact)
                && seg.words.first().is_some_and(|w| {
                    !RESERVED.contains(&w.as_str()) && !CONSTRUCTS.contains(&w.as_str())
                })
        });
    Line {
        segments,
        loose: d.loose_redirects,
        exact,
        hidden: d.hidden,
        invalid: false,
    }
}

/// Every word a command line passes to a program, decoded as bash decodes it (quotes
/// removed, escapes and ANSI-C quoting `$'…'` resolved): the words of every segment, of every
/// command nested in wrappers and inner shells (`sh -c '…'`, `find -exec`), and every
/// redirection target. Destination checks (taint, provenance) read these as well as the raw
/// text: `https://evil"".example`, `ev''il`, `evil.exampl\e` and `$'\x65'` spellings all
/// decode to the word bash passes on.
pub fn decoded_words(command: &str) -> Vec<String> {
    let line = parse_line(command);
    let mut out: Vec<String> = Vec::new();
    let add = |w: &str, out: &mut Vec<String>| {
        if !w.is_empty() && !out.iter().any(|o| o == w) {
            out.push(w.to_owned());
        }
    };
    for r in &line.loose {
        add(&r.target, &mut out);
    }
    for seg in &line.segments {
        for w in &seg.words {
            add(w, &mut out);
        }
        for r in &seg.redirects {
            add(&r.target, &mut out);
        }
        for e in expand(&seg.words) {
            for w in &e.argv {
                add(w, &mut out);
            }
            for r in &e.redirects {
                add(&r.target, &mut out);
            }
        }
    }
    out
}

/// Best-effort segments of any string, also of an invalid one (an unbalanced quote is closed
/// at the end). Used so that deny rules see executables even in strings the shell rejects.
pub(crate) fn best_effort_segments(command: &str) -> Vec<Vec<String>> {
    let d = scan_detailed(command);
    if !d.invalid {
        return d.segments;
    }
    // Retry with quotes treated as ordinary characters, and with the trailing quote closed.
    let mut out = d.segments;
    let unquoted: String = command
        .chars()
        .map(|c| {
            if matches!(c, '\'' | '"' | '\\') {
                ' '
            } else {
                c
            }
        })
        .collect();
    out.extend(scan_detailed(&unquoted).segments);
    out
}

fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests;
