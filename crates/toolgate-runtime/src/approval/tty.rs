//! Asking on the controlling terminal (`/dev/tty`), for `--approval tty`.
//!
//! The proxy's stdin/stdout belong to the MCP client, so the question goes to `/dev/tty`
//! directly. One question at a time; anything but `o`/`once` or `s`/`session` denies.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{Answer, AnswerFuture, ApprovalChannel, Question};

/// The terminal approval channel.
#[derive(Debug, Clone)]
pub struct TtyChannel {
    path: PathBuf,
    /// Serialises questions: two prompts never interleave on the terminal.
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl Default for TtyChannel {
    fn default() -> Self {
        TtyChannel::new(PathBuf::from("/dev/tty"))
    }
}

impl TtyChannel {
    /// A channel on `path` (a terminal device; tests use a pseudo-terminal or a FIFO).
    pub fn new(path: PathBuf) -> TtyChannel {
        TtyChannel {
            path,
            lock: Arc::new(tokio::sync::Mutex::new(())),
        }
    }
}

/// Reads one answer line: `o`/`once`, `s`/`session`; anything else (or nothing) denies.
pub fn parse_answer(line: &str) -> Answer {
    match line.trim().to_ascii_lowercase().as_str() {
        "o" | "once" | "y" | "yes" => Answer::AllowOnce,
        "s" | "session" => Answer::AllowSession,
        "" => Answer::Deny("no answer on the terminal".to_owned()),
        _ => Answer::Deny("the human denied it on the terminal".to_owned()),
    }
}

fn ask_blocking(path: &std::path::Path, prompt: &Question) -> Answer {
    // Two handles: the question is appended, the answer read from the reading handle.
    let opened = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|w| std::fs::File::open(path).map(|r| (w, r)));
    let (mut writer, reader) = match opened {
        Ok(pair) => pair,
        Err(err) => return Answer::Deny(format!("cannot open `{}`: {err}", path.display())),
    };
    let question = format!(
        "\n{}\nAllow [o]nce, allow for this [s]ession, or [d]eny? ",
        prompt.message()
    );
    if let Err(err) = writer
        .write_all(question.as_bytes())
        .and_then(|()| writer.flush())
    {
        return Answer::Deny(format!("cannot write to `{}`: {err}", path.display()));
    }
    let mut line = String::new();
    match BufReader::new(reader).read_line(&mut line) {
        Ok(0) => Answer::Deny("the terminal closed".to_owned()),
        Ok(_) => parse_answer(&line),
        Err(err) => Answer::Deny(format!("cannot read `{}`: {err}", path.display())),
    }
}

impl ApprovalChannel for TtyChannel {
    fn name(&self) -> &'static str {
        "tty"
    }

    fn available(&self) -> bool {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .is_ok()
    }

    fn ask<'a>(&'a self, prompt: &'a Question, timeout: Duration) -> AnswerFuture<'a> {
        Box::pin(async move {
            let guard = match tokio::time::timeout(timeout, self.lock.lock()).await {
                Ok(guard) => guard,
                Err(_) => return Answer::Deny("timed out waiting for the terminal".to_owned()),
            };
            let path = self.path.clone();
            let prompt = prompt.clone();
            let (tx, rx) = tokio::sync::oneshot::channel();
            // A blocking read on a terminal cannot be interrupted portably; the thread ends
            // when the human presses enter or the terminal closes.
            let spawned = std::thread::Builder::new()
                .name("toolgate-tty-approval".into())
                .spawn(move || {
                    let _ = tx.send(ask_blocking(&path, &prompt));
                });
            if let Err(err) = spawned {
                return Answer::Deny(format!("cannot ask on the terminal: {err}"));
            }
            let answer = match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) => Answer::Deny("the terminal prompt failed".to_owned()),
                Err(_) => Answer::Deny(format!(
                    "no answer on the terminal within {} s",
                    timeout.as_secs()
                )),
            };
            drop(guard);
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse() {
        assert_eq!(parse_answer("o\n"), Answer::AllowOnce);
        assert_eq!(parse_answer(" Session "), Answer::AllowSession);
        assert!(!parse_answer("d").allows());
        assert!(!parse_answer("").allows());
        assert!(!parse_answer("yolo").allows());
    }

    #[tokio::test]
    async fn missing_terminal_is_unavailable_and_denies() {
        let dir = tempfile::tempdir().unwrap();
        let chan = TtyChannel::new(dir.path().join("no-such-tty"));
        assert!(!chan.available());
        let answer = chan.ask(&Question::default(), Duration::from_secs(5)).await;
        assert!(!answer.allows());
    }

    #[tokio::test]
    async fn reads_the_answer_from_the_device() {
        // A regular file stands in for the terminal: the question is appended, the answer read
        // from the start. Good enough to prove the wiring; a pty is not needed.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tty");
        std::fs::write(&path, "s\n").unwrap();
        let chan = TtyChannel::new(path.clone());
        let prompt = Question {
            tool: "run_command".into(),
            what: "run `npm install`".into(),
            why: "no rule allows it".into(),
            ..Question::default()
        };
        let answer = chan.ask(&prompt, Duration::from_secs(5)).await;
        assert_eq!(answer, Answer::AllowSession);
    }
}
