//! Bounded newline-delimited framing, blocking (client stdin) and async (upstream stdout).
//!
//! A line longer than the limit is never buffered whole: its first bytes are kept (to
//! recover an id for the error reply) and the rest is discarded up to the next newline.

use std::io::{self, BufRead};

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use super::pipes::PipeGrowth;

/// How many bytes of an oversize line are kept to recover its id.
pub const OVERSIZE_PREFIX: usize = 4096;

/// One framed input.
#[derive(Debug)]
pub enum Line {
    /// A complete line, newline included (one is added if the stream ended without one).
    Frame(Vec<u8>),
    /// A line longer than the limit: its first bytes and its total length (without newline).
    Oversize {
        /// Up to [`OVERSIZE_PREFIX`] bytes from the start of the line.
        prefix: Vec<u8>,
        /// The full length of the line, newline excluded.
        len: u64,
    },
}

/// The state of one line being assembled.
#[derive(Debug)]
struct Assembler {
    max: usize,
    buf: Vec<u8>,
    oversize_len: Option<u64>,
    /// The length of the last line that spanned several reads: the next such line starts
    /// with that much room, so a run of large messages is not copied again each time its
    /// buffer doubles. (Untouched room costs address space, not memory.)
    spanning: usize,
    /// The line being assembled spans several reads.
    spans: bool,
}

impl Assembler {
    fn new(max: usize) -> Self {
        Assembler {
            max,
            buf: Vec::new(),
            oversize_len: None,
            spanning: 0,
            spans: false,
        }
    }

    /// Feeds available bytes; returns how many were used and a line if one was completed.
    fn feed(&mut self, avail: &[u8]) -> (usize, Option<Line>) {
        let (chunk, used, done) = match memchr::memchr(b'\n', avail) {
            Some(i) => (avail.get(..i).unwrap_or_default(), i + 1, true),
            None => (avail, avail.len(), false),
        };
        if !done && !self.spans {
            self.spans = true;
            if self.buf.is_empty() && self.oversize_len.is_none() {
                // The start of a line that goes on in the next read (+1 for its newline).
                let room = self.spanning.min(self.max).max(chunk.len()) + 1;
                self.buf.reserve_exact(room);
            }
        }
        self.push(chunk);
        if done {
            (used, Some(self.finish()))
        } else {
            (used, None)
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        if let Some(len) = &mut self.oversize_len {
            *len += chunk.len() as u64;
            return;
        }
        if self.buf.len() + chunk.len() > self.max {
            let total = (self.buf.len() + chunk.len()) as u64;
            let keep = OVERSIZE_PREFIX
                .saturating_sub(self.buf.len())
                .min(chunk.len());
            self.buf.truncate(OVERSIZE_PREFIX);
            self.buf
                .extend_from_slice(chunk.get(..keep).unwrap_or_default());
            self.buf.shrink_to(OVERSIZE_PREFIX);
            self.oversize_len = Some(total);
        } else {
            self.buf.extend_from_slice(chunk);
        }
    }

    fn finish(&mut self) -> Line {
        let buf = std::mem::take(&mut self.buf);
        if std::mem::take(&mut self.spans) && self.oversize_len.is_none() {
            self.spanning = buf.len();
        }
        match self.oversize_len.take() {
            Some(len) => Line::Oversize { prefix: buf, len },
            None => {
                let mut frame = buf;
                frame.push(b'\n');
                Line::Frame(frame)
            }
        }
    }

    /// End of stream: a pending partial line is delivered as a line.
    fn eof(&mut self) -> Option<Line> {
        if self.buf.is_empty() && self.oversize_len.is_none() {
            None
        } else {
            Some(self.finish())
        }
    }
}

/// Reads bounded lines from a blocking reader.
#[derive(Debug)]
pub struct SyncLines<R> {
    reader: R,
    asm: Assembler,
}

impl<R: BufRead> SyncLines<R> {
    /// Wraps `reader`; lines longer than `max` bytes are reported as oversize.
    pub fn new(reader: R, max: usize) -> Self {
        SyncLines {
            reader,
            asm: Assembler::new(max),
        }
    }

    /// The next line, or `None` at end of stream.
    pub fn next_line(&mut self) -> io::Result<Option<Line>> {
        loop {
            let avail = match self.reader.fill_buf() {
                Ok(avail) => avail,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            };
            if avail.is_empty() {
                return Ok(self.asm.eof());
            }
            let (used, line) = self.asm.feed(avail);
            self.reader.consume(used);
            if line.is_some() {
                return Ok(line);
            }
        }
    }
}

/// Reads bounded lines from an async reader.
#[derive(Debug)]
pub struct AsyncLines<R> {
    reader: R,
    asm: Assembler,
    /// The pipe read from, grown to the lines it carries.
    growth: PipeGrowth,
}

impl<R: AsyncBufRead + Unpin> AsyncLines<R> {
    /// Wraps `reader`; lines longer than `max` bytes are reported as oversize.
    pub fn new(reader: R, max: usize) -> Self {
        AsyncLines {
            reader,
            asm: Assembler::new(max),
            growth: PipeGrowth::none(),
        }
    }

    /// Grows the pipe behind `reader` when a line does not fit its buffer (see
    /// [`super::pipes`]).
    pub(crate) fn growing(mut self, growth: PipeGrowth) -> Self {
        self.growth = growth;
        self
    }

    /// The next line, or `None` at end of stream.
    pub async fn next_line(&mut self) -> io::Result<Option<Line>> {
        loop {
            let avail = match self.reader.fill_buf().await {
                Ok(avail) => avail,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            };
            if avail.is_empty() {
                return Ok(self.asm.eof());
            }
            let (used, line) = self.asm.feed(avail);
            self.reader.consume(used);
            if let Some(line) = line {
                if let Line::Frame(frame) = &line {
                    self.growth.fit(frame.len());
                }
                return Ok(Some(line));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8], max: usize, cap: usize) -> Vec<Line> {
        let reader = io::BufReader::with_capacity(cap, input);
        let mut lines = SyncLines::new(reader, max);
        let mut out = Vec::new();
        while let Some(line) = lines.next_line().unwrap() {
            out.push(line);
        }
        out
    }

    #[test]
    fn splits_lines_across_buffer_boundaries() {
        for cap in [1, 2, 3, 7, 64] {
            let out = all(b"ab\n\ncde\nf", 10, cap);
            let frames: Vec<&[u8]> = out
                .iter()
                .map(|l| match l {
                    Line::Frame(f) => f.as_slice(),
                    Line::Oversize { .. } => panic!("oversize"),
                })
                .collect();
            assert_eq!(
                frames,
                vec![&b"ab\n"[..], b"\n", b"cde\n", b"f\n"],
                "cap {cap}"
            );
        }
    }

    #[test]
    fn a_line_spanning_reads_starts_with_the_room_the_last_one_needed() {
        let mut asm = Assembler::new(1 << 20);
        let big = vec![b'x'; 10_000];
        for _ in 0..3 {
            let mut fed = 0;
            let mut line = None;
            while line.is_none() {
                let end = (fed + 4096).min(big.len());
                let chunk = if end == big.len() {
                    [&big[fed..end], b"\n"].concat()
                } else {
                    big[fed..end].to_vec()
                };
                let (used, done) = asm.feed(&chunk);
                assert_eq!(used, chunk.len());
                fed = end;
                line = done;
            }
            match line {
                Some(Line::Frame(f)) => assert_eq!(f.len(), 10_001),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(asm.spanning, 10_000);
        // The next spanning line is reserved that much at once.
        let (_, line) = asm.feed(&big[..4096]);
        assert!(line.is_none());
        assert!(asm.buf.capacity() >= 10_001, "{}", asm.buf.capacity());
        // A line within one read changes nothing.
        let mut asm = Assembler::new(100);
        asm.feed(b"short\n");
        assert_eq!(asm.spanning, 0);
    }

    #[test]
    fn oversize_lines_are_cut_and_reading_continues() {
        let mut input = Vec::new();
        input.extend_from_slice(b"{\"id\":1,");
        input.extend(std::iter::repeat_n(b'x', 10_000));
        input.extend_from_slice(b"\nok\n");
        for cap in [5, 4096, 20_000] {
            let out = all(&input, 100, cap);
            assert_eq!(out.len(), 2);
            match &out[0] {
                Line::Oversize { prefix, len } => {
                    assert_eq!(*len, 10_008);
                    assert!(prefix.starts_with(b"{\"id\":1,"));
                    assert!(prefix.len() <= OVERSIZE_PREFIX);
                }
                Line::Frame(_) => panic!("not oversize"),
            }
            assert!(matches!(&out[1], Line::Frame(f) if f == b"ok\n"));
        }
        // Exactly at the limit is fine.
        let out = all(b"12345\n", 5, 2);
        assert!(matches!(&out[0], Line::Frame(f) if f == b"12345\n"));
        let out = all(b"123456\n", 5, 2);
        assert!(matches!(&out[0], Line::Oversize { len: 6, .. }));
    }
}
