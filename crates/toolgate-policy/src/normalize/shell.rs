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

/// The basename of an executable word (`/bin/rm` is `rm`).
pub fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// One execution found inside a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exec {
    /// The argv actually executed, wrappers and env prefixes removed.
    pub argv: Vec<String>,
    /// True when wrappers, env prefixes or an inner shell were looked through, or when this
    /// execution is nested in another command (`find -exec`, `xargs`).
    pub wrapped: bool,
    /// True when a string was re-scanned (`sh -c`, `eval`) and was not simple.
    pub inexact: bool,
    /// True for a command whose job is to run another one (`sh -c`, `xargs`).
    pub container: bool,
    /// True when what runs is hidden: `eval`, a substitution or a variable in the command
    /// position of an inner string (see [`scan_hiding`]), or a variable as the command name.
    pub hidden: bool,
    /// Redirections of an inner string's command (`sh -c 'cat x > y'`).
    pub redirects: Vec<Redirect>,
}

const MAX_DEPTH: usize = 8;

fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Strips env prefixes and wrappers (`sudo`, `env`, `nohup`, `xargs`, `time`, `nice`,
/// `sh -c`, `bash -c`, `eval`, `busybox`, …) and returns the argv that actually runs. For an
/// inner shell string that is not one simple command, the first segment's argv.
pub fn look_through(argv: &[String]) -> Vec<String> {
    let execs = expand(argv);
    execs
        .iter()
        .find(|e| !e.container)
        .or_else(|| execs.first())
        .map(|e| e.argv.clone())
        .unwrap_or_default()
}

/// Every execution an argv leads to: the looked-through command first, then nested ones
/// (`sh -c 'a; b'` gives `a` and `b`; `find -exec rm` gives `find` and `rm`).
pub(crate) fn expand(argv: &[String]) -> Vec<Exec> {
    let mut out = Vec::new();
    expand_into(argv.to_vec(), false, false, false, 0, &mut out);
    out
}

fn expand_into(
    mut argv: Vec<String>,
    mut wrapped: bool,
    inexact: bool,
    hidden: bool,
    depth: usize,
    out: &mut Vec<Exec>,
) {
    if depth > MAX_DEPTH {
        out.push(Exec {
            argv,
            wrapped: true,
            inexact: true,
            container: false,
            hidden,
            redirects: Vec::new(),
        });
        return;
    }
    loop {
        // Env prefixes and reserved words.
        let mut skip = 0;
        while let Some(w) = argv.get(skip) {
            if is_assignment(w) || RESERVED.contains(&w.as_str()) {
                skip += 1;
            } else {
                break;
            }
        }
        if skip > 0 {
            argv.drain(..skip);
            wrapped = true;
        }
        let Some(first) = argv.first() else {
            return;
        };
        // A variable or substitution as the command name (also behind a wrapper: `sudo
        // $CMD`): what runs is not known. A quoted, literal `$` in a command name counts
        // too; no real command is named like that.
        let hidden = hidden || first.contains(['$', '`']);
        let name = basename(first);
        let rest: &[String] = argv.get(1..).unwrap_or_default();
        let next: Option<Vec<String>> = match name {
            "sudo" | "doas" | "run0" | "pkexec" => {
                if let Some(cmd) = option_value(rest, &["-c"], &[]) {
                    // Not sudo syntax, but harmless: treat as a shell string.
                    push_container(&argv, wrapped, inexact, hidden, out);
                    return rescan(&cmd, hidden, depth, out);
                }
                Some(skip_options(
                    rest,
                    &[
                        "-u",
                        "-g",
                        "-C",
                        "-D",
                        "-h",
                        "-p",
                        "-r",
                        "-t",
                        "-T",
                        "-U",
                        "-R",
                        "--user",
                        "--group",
                        "--chdir",
                        "--prompt",
                        "--role",
                        "--type",
                        "--other-user",
                        "--close-from",
                        "--host",
                        "--chroot",
                    ],
                ))
            }
            "su" | "runuser" | "sg" => {
                if let Some(cmd) = option_value(rest, &["-c", "--command"], &["--command="]) {
                    push_container(&argv, wrapped, inexact, hidden, out);
                    return rescan(&cmd, hidden, depth, out);
                }
                None
            }
            "env" => {
                if let Some(s) =
                    option_value(rest, &["-S", "--split-string"], &["--split-string=", "-S"])
                {
                    push_container(&argv, wrapped, inexact, hidden, out);
                    return rescan(&s, hidden, depth, out);
                }
                let mut r = skip_options(
                    rest,
                    &["-u", "--unset", "-C", "--chdir", "-P", "--argv0", "-a"],
                );
                while r.first().is_some_and(|w| is_assignment(w)) {
                    r.remove(0);
                }
                Some(r)
            }
            "nohup" | "setsid" | "unbuffer" | "catchsegv" | "caffeinate" | "command"
            | "builtin" | "exec" | "time" | "nice" | "ionice" | "stdbuf" | "chrt" | "firejail"
            | "proxychains" | "proxychains4" | "torsocks" | "tsocks" | "strace" | "ltrace"
            | "valgrind" | "systemd-run" | "unshare" | "nsenter" | "script" | "faketime"
            | "fakeroot" | "eatmydata" | "trickle" => {
                if name == "script"
                    && let Some(cmd) = option_value(rest, &["-c", "--command"], &["--command="])
                {
                    push_container(&argv, wrapped, inexact, hidden, out);
                    return rescan(&cmd, hidden, depth, out);
                }
                let with_arg: &[&str] = match name {
                    "nice" => &["-n", "--adjustment"],
                    "ionice" => &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
                    "stdbuf" => &["-i", "-o", "-e", "--input", "--output", "--error"],
                    "time" => &["-f", "-o", "--format", "--output"],
                    "exec" => &["-a"],
                    "strace" | "ltrace" => &[
                        "-o", "-e", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-O", "-P", "-S",
                        "-X",
                    ],
                    "systemd-run" => &[
                        "-p",
                        "-u",
                        "-E",
                        "--unit",
                        "--property",
                        "--setenv",
                        "--uid",
                        "--gid",
                        "--working-directory",
                        "-M",
                        "--machine",
                    ],
                    "nsenter" => &["-t", "--target"],
                    "faketime" => &["-f"],
                    _ => &[],
                };
                let mut r = skip_options(rest, with_arg);
                if name == "chrt" || name == "faketime" {
                    // chrt [options] PRIORITY cmd; faketime TIMESTAMP cmd
                    if !r.is_empty() {
                        r.remove(0);
                    }
                }
                Some(r)
            }
            "timeout" => {
                let mut r = skip_options(rest, &["-s", "-k", "--signal", "--kill-after"]);
                if !r.is_empty() {
                    r.remove(0); // duration
                }
                Some(r)
            }
            "taskset" => {
                let has_c = rest.iter().any(|w| w == "-c" || w == "--cpu-list");
                let mut r = skip_options(rest, &["-c", "--cpu-list"]);
                if !has_c && !r.is_empty() {
                    r.remove(0); // mask
                }
                Some(r)
            }
            "flock" => {
                if let Some(cmd) = option_value(rest, &["-c", "--command"], &["--command="]) {
                    push_container(&argv, wrapped, inexact, hidden, out);
                    return rescan(&cmd, hidden, depth, out);
                }
                let mut r = skip_options(rest, &["-w", "--timeout", "-E", "--conflict-exit-code"]);
                if !r.is_empty() {
                    r.remove(0); // lock file
                }
                Some(r)
            }
            "chroot" => {
                let mut r = skip_options(rest, &["--userspec", "--groups"]);
                if !r.is_empty() {
                    r.remove(0); // new root
                }
                if r.is_empty() {
                    // chroot DIR alone runs the user's shell.
                    r.push("sh".to_owned());
                }
                Some(r)
            }
            "xargs" | "parallel" => {
                out.push(Exec {
                    argv: argv.clone(),
                    wrapped,
                    inexact,
                    container: true,
                    hidden,
                    redirects: Vec::new(),
                });
                let r = skip_options(
                    rest,
                    &[
                        "-a",
                        "-d",
                        "-E",
                        "-I",
                        "-L",
                        "-n",
                        "-P",
                        "-s",
                        "--arg-file",
                        "--delimiter",
                        "--eof",
                        "--replace",
                        "--max-lines",
                        "--max-args",
                        "--max-procs",
                        "--max-chars",
                        "--process-slot-var",
                        "-j",
                        "--jobs",
                    ],
                );
                if r.is_empty() {
                    // xargs with no command runs echo.
                    return;
                }
                argv = r;
                wrapped = true;
                continue;
            }
            "watch" => {
                let r = skip_options(rest, &["-n", "--interval", "-d", "-q", "--equexit"]);
                push_container(&argv, wrapped, inexact, hidden, out);
                return rescan(&r.join(" "), hidden, depth, out);
            }
            "busybox" | "toybox" => Some(rest.to_vec()),
            "eval" => {
                push_container(&argv, wrapped, inexact, hidden, out);
                // What eval runs is built at run time.
                return rescan(&rest.join(" "), true, depth, out);
            }
            "cmd" | "cmd.exe" => {
                // `cmd /c STRING`: read the string with shell rules (close enough for deny rules).
                let pos = rest
                    .iter()
                    .position(|w| w.eq_ignore_ascii_case("/c") || w.eq_ignore_ascii_case("/k"));
                if let Some(pos) = pos {
                    out.push(Exec {
                        argv: argv.clone(),
                        wrapped,
                        inexact,
                        container: true,
                        hidden,
                        redirects: Vec::new(),
                    });
                    let cmd = rest.get(pos + 1..).unwrap_or_default().join(" ");
                    return rescan(&cmd, hidden, depth, out);
                }
                None
            }
            "powershell" | "powershell.exe" | "pwsh" | "pwsh.exe" => {
                let pos = rest.iter().position(|w| {
                    let l = w.to_ascii_lowercase();
                    l == "-c" || l == "-command" || l == "/c" || l == "/command"
                });
                if let Some(pos) = pos {
                    out.push(Exec {
                        argv: argv.clone(),
                        wrapped,
                        inexact,
                        container: true,
                        hidden,
                        redirects: Vec::new(),
                    });
                    let cmd = rest.get(pos + 1..).unwrap_or_default().join(" ");
                    return rescan(&cmd, hidden, depth, out);
                }
                None
            }
            "sh" | "bash" | "zsh" | "dash" | "ksh" | "mksh" | "ash" | "fish" | "csh" | "tcsh"
            | "yash" | "posh" | "rbash" => {
                if let Some(cmd) = shell_c_string(rest) {
                    out.push(Exec {
                        argv: argv.clone(),
                        wrapped,
                        inexact,
                        container: true,
                        hidden,
                        redirects: Vec::new(),
                    });
                    return rescan(&cmd, hidden, depth, out);
                }
                None
            }
            "find" => {
                let nested = find_exec_commands(rest);
                out.push(Exec {
                    argv: argv.clone(),
                    wrapped: wrapped || !nested.is_empty(),
                    inexact,
                    container: false,
                    hidden,
                    redirects: Vec::new(),
                });
                for cmd in nested {
                    expand_into(cmd, true, inexact, hidden, depth + 1, out);
                }
                return;
            }
            "fd" | "fdfind" => {
                let nested = after_option(rest, &["-x", "--exec", "-X", "--exec-batch"]);
                out.push(Exec {
                    argv: argv.clone(),
                    wrapped: wrapped || nested.is_some(),
                    inexact,
                    container: false,
                    hidden,
                    redirects: Vec::new(),
                });
                if let Some(cmd) = nested {
                    expand_into(cmd, true, inexact, hidden, depth + 1, out);
                }
                return;
            }
            _ => None,
        };
        match next {
            Some(r) if !r.is_empty() => {
                // The wrapper itself is an execution too: a deny rule on `sudo` must see
                // `sudo rm -rf /`, not only `rm`.
                push_container(&argv, wrapped, inexact, hidden, out);
                argv = r;
                wrapped = true;
            }
            _ => {
                out.push(Exec {
                    argv,
                    wrapped,
                    inexact,
                    container: false,
                    hidden,
                    redirects: Vec::new(),
                });
                return;
            }
        }
    }
}

/// Records a wrapper (`sudo`, `env`, `sh -c`, …) as an execution of its own, so that deny
/// rules on the wrapper's name see it; `look_through` skips it.
fn push_container(
    argv: &[String],
    wrapped: bool,
    inexact: bool,
    hidden: bool,
    out: &mut Vec<Exec>,
) {
    out.push(Exec {
        argv: argv.to_vec(),
        wrapped,
        inexact,
        container: true,
        hidden,
        redirects: Vec::new(),
    });
}

fn rescan(command: &str, hidden: bool, depth: usize, out: &mut Vec<Exec>) {
    let line = parse_line(command);
    let (scanned, hides) = scan_hiding(command);
    let hidden = hidden || hides;
    if !line.invalid && !matches!(scanned, Scan::Simple(_)) {
        // The inner string's commands, each with its redirections.
        if line.segments.is_empty() && (hidden || !line.loose.is_empty()) {
            out.push(Exec {
                argv: Vec::new(),
                wrapped: true,
                inexact: true,
                container: false,
                hidden,
                redirects: line.loose.clone(),
            });
        }
        for seg in line.segments {
            let first = out.len();
            expand_into(seg.words, true, true, hidden, depth + 1, out);
            if let Some(e) = out
                .get_mut(first..)
                .and_then(|es| es.iter_mut().find(|e| !e.container))
            {
                e.redirects = seg.redirects;
            } else if !seg.redirects.is_empty() {
                out.push(Exec {
                    argv: Vec::new(),
                    wrapped: true,
                    inexact: true,
                    container: false,
                    hidden,
                    redirects: seg.redirects,
                });
            }
        }
        return;
    }
    match scanned {
        Scan::Simple(argv) => expand_into(argv, true, false, hidden, depth + 1, out),
        Scan::Compound { segments } => {
            if segments.is_empty() && hidden {
                out.push(Exec {
                    argv: Vec::new(),
                    wrapped: true,
                    inexact: true,
                    container: false,
                    hidden,
                    redirects: Vec::new(),
                });
            }
            for seg in segments {
                expand_into(seg, true, true, hidden, depth + 1, out);
            }
        }
        Scan::Invalid => {
            for seg in best_effort_segments(command) {
                expand_into(seg, true, true, hidden, depth + 1, out);
            }
        }
    }
}

/// Skips leading options (a `--` ends them); options in `with_arg` consume the next word
/// unless written `--opt=value`. Returns the remaining words.
fn skip_options(words: &[String], with_arg: &[&str]) -> Vec<String> {
    let mut i = 0;
    while let Some(w) = words.get(i) {
        if w == "--" {
            i += 1;
            break;
        }
        if !w.starts_with('-') || w == "-" {
            break;
        }
        // Options only, since nice's `-5` style and `-n5` forms carry their value.
        if with_arg.contains(&w.as_str()) {
            i += 2;
        } else {
            i += 1;
        }
    }
    words.get(i..).unwrap_or_default().to_vec()
}

/// The value of `-c CMD` style options among leading options (also `--command=CMD`).
fn option_value(words: &[String], names: &[&str], prefixes: &[&str]) -> Option<String> {
    let mut i = 0;
    while let Some(w) = words.get(i) {
        if names.contains(&w.as_str()) {
            return words.get(i + 1).cloned();
        }
        for p in prefixes {
            if let Some(v) = w.strip_prefix(p)
                && !v.is_empty()
            {
                return Some(v.to_owned());
            }
        }
        i += 1;
    }
    None
}

/// For `sh -c STRING` (also clusters like `-lc`, `-ec`, `-o pipefail -c`): the string.
fn shell_c_string(words: &[String]) -> Option<String> {
    let mut i = 0;
    let mut want_c = false;
    while let Some(w) = words.get(i) {
        if w == "--" {
            i += 1;
            break;
        }
        if w == "-o" || w == "+o" || w == "-O" || w == "+O" || w == "--rcfile" || w == "--init-file"
        {
            i += 2;
            continue;
        }
        if let Some(flags) = w.strip_prefix('-').or_else(|| w.strip_prefix('+')) {
            if !w.starts_with("--") && flags.contains('c') {
                want_c = true;
            }
            i += 1;
            continue;
        }
        break;
    }
    if want_c { words.get(i).cloned() } else { None }
}

/// `find … -exec CMD … ;` (also `-execdir`, `-ok`, `-okdir`, ended by `;` or `+`).
fn find_exec_commands(words: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(w) = words.get(i) {
        if matches!(w.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let mut cmd = Vec::new();
            i += 1;
            while let Some(a) = words.get(i) {
                if a == ";" || a == "+" {
                    break;
                }
                cmd.push(a.clone());
                i += 1;
            }
            if !cmd.is_empty() {
                out.push(cmd);
            }
        }
        i += 1;
    }
    out
}

/// The words after the first of `names` (`fd -x rm`).
fn after_option(words: &[String], names: &[&str]) -> Option<Vec<String>> {
    let pos = words.iter().position(|w| names.contains(&w.as_str()))?;
    let rest = words.get(pos + 1..)?.to_vec();
    if rest.is_empty() { None } else { Some(rest) }
}

/// True when an exec-form argument holds characters a shell would interpret if the server
/// joined the array into a command string.
pub(crate) fn has_shell_meta(word: &str) -> bool {
    word.chars().any(|c| {
        matches!(
            c,
            ';' | '&' | '|' | '<' | '>' | '(' | ')' | '`' | '$' | '\n' | '\r' | '\'' | '"' | '\\'
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn simple_and_not() {
        assert_eq!(
            scan("ls -la 'a b' \"c d\" e\\ f"),
            Scan::Simple(v(&["ls", "-la", "a b", "c d", "e f"]))
        );
        assert_eq!(
            scan("git log HEAD~1"),
            Scan::Simple(v(&["git", "log", "HEAD~1"]))
        );
        assert_eq!(scan("echo ''"), Scan::Simple(v(&["echo", ""])));
        assert!(matches!(scan("ls; rm -rf /"), Scan::Compound { .. }));
        assert!(matches!(scan("ls *.rs"), Scan::Compound { .. }));
        assert!(matches!(scan("echo $HOME"), Scan::Compound { .. }));
        assert!(matches!(scan("cat ~/.ssh/id_rsa"), Scan::Compound { .. }));
        assert!(matches!(scan("echo {a,b}"), Scan::Compound { .. }));
        assert_eq!(scan("echo 'unterminated"), Scan::Invalid);
        assert_eq!(scan("echo \\"), Scan::Invalid);
        assert_eq!(scan("   "), Scan::Invalid);
    }

    #[test]
    fn looks_through_wrappers() {
        let cases: &[(&str, &str)] = &[
            ("sudo rm -rf /", "rm"),
            ("sudo -u root rm -rf /", "rm"),
            ("env FOO=1 /bin/rm x", "/bin/rm"),
            ("FOO=1 rm x", "rm"),
            ("nice -n 5 rm x", "rm"),
            ("nohup rm x", "rm"),
            ("time rm x", "rm"),
            ("command rm x", "rm"),
            ("exec rm x", "rm"),
            ("busybox rm x", "rm"),
            ("doas rm x", "rm"),
            ("timeout 5 rm x", "rm"),
            ("sh -c 'rm -rf /'", "rm"),
            ("bash -lc 'rm -rf /'", "rm"),
            ("xargs rm", "rm"),
            ("find . -exec rm {} \\;", "rm"),
            ("stdbuf -oL rm x", "rm"),
        ];
        for (cmd, want) in cases {
            let Scan::Simple(argv) = scan(cmd) else {
                panic!("{cmd}")
            };
            let execs = expand(&argv);
            assert!(
                execs
                    .iter()
                    .any(|e| e.argv.first().map(String::as_str) == Some(*want)),
                "{cmd}: {execs:?}"
            );
        }
        let Scan::Simple(argv) = scan("sh -c 'ls; rm -rf /'") else {
            panic!()
        };
        let names: Vec<String> = expand(&argv)
            .into_iter()
            .filter_map(|e| e.argv.first().cloned())
            .collect();
        assert_eq!(names, v(&["sh", "ls", "rm"]));
        assert_eq!(
            look_through(&v(&["sudo", "env", "A=1", "nice", "rm", "-rf", "/"])),
            v(&["rm", "-rf", "/"])
        );
        assert_eq!(
            look_through(&v(&["sh", "-c", "rm -rf /"])),
            v(&["rm", "-rf", "/"])
        );
    }
}
