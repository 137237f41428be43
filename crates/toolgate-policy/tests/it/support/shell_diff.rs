//! Differential testing of the shell scanner against bash itself, shared by the
//! `shell_differential` test and the `shell_differential` fuzz target.
//!
//! A grammar (driven by a byte string, so proptest and libFuzzer can both drive it) builds
//! command lines from quoting, escapes, ANSI-C quoting, globs, assignments, redirections,
//! wrappers, substitutions, compound forms and comments. toolgate normalises each line; bash
//! runs it. When toolgate reports exact (not opaque) parts, the line is a simple command or
//! an exact compound, and every argv bash executed must be one of them. Every executable bash reached must be one toolgate reports, unless
//! the action hides what it touches.
//!
//! Nothing real ever runs: bash runs restricted (`-r`: no `/` in command names, no output
//! redirection, no `exec`, no `cd`, no changes to `PATH`, no `enable`, no `command -p`), with
//! an empty environment whose `PATH` is a directory of stubs only, in an empty directory,
//! with stdin from /dev/null, under `timeout -s KILL`. Each stub is a bash script that appends
//! its name and arguments (NUL-separated) to a file of its own and does nothing else. The
//! grammar only names stubs and the harmless builtins `echo`, `true`, `command`, `eval` and
//! the `time` keyword (never `kill`, `enable`, `source`, `trap`, `read`, `exec`, `cd`,
//! `builtin`, `ulimit`, functions or loops). Only lines that reached a stub are compared.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::json;
use toolgate_policy::{LexicalFs, NormalizeContext, ToolCall, normalize};

/// Names that exist only as recording stubs.
pub const STUBS: &[&str] = &[
    "rm", "ls", "cat", "git", "npm", "curl", "sudo", "env", "nohup", "nice", "timeout", "xargs",
    "sh", "bash", "find", "touch", "wc", "grep", "base64", "id",
];

/// A deterministic reader of grammar choices from bytes (zero when they run out).
pub struct Choices<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Choices<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Choices { bytes, pos: 0 }
    }

    fn next(&mut self, n: usize) -> usize {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        usize::from(b) % n.max(1)
    }

    /// Like `next`, but a zero byte (also the end of the input) picks the last choice,
    /// which is always the plain one: short inputs give plain commands.
    fn alt(&mut self, n: usize) -> usize {
        let n = n.max(1);
        (self.next(n) + n - 1) % n
    }

    fn pick<'s>(&mut self, items: &[&'s str]) -> &'s str {
        items.get(self.next(items.len())).copied().unwrap_or("")
    }
}

/// ANSI-C escapes for one ASCII character, chosen by `c`.
fn ansi_c_escape(ch: char, c: &mut Choices) -> String {
    let v = u32::from(ch);
    match c.next(6) {
        0 => format!("\\x{v:02x}"),
        1 => format!("\\{v:03o}"),
        2 => format!("\\u{v:04x}"),
        3 => format!("\\U{v:08X}"),
        4 if ch.is_ascii_lowercase() => format!("\\c{ch}"),
        _ => ch.to_string(),
    }
}

/// A command name: a stub or a builtin, plain or written with quoting.
fn command_name(c: &mut Choices) -> String {
    let name = if c.alt(6) == 0 {
        c.pick(&["echo", "true", "command", "eval"]).to_owned()
    } else {
        c.pick(STUBS).to_owned()
    };
    match c.alt(8) {
        0 => format!("'{name}'"),
        1 => format!("\"{name}\""),
        2 => format!("\\{name}"),
        3 => {
            let body: String = name.chars().map(|ch| ansi_c_escape(ch, c)).collect();
            format!("$'{body}'")
        }
        4 => {
            let (a, b) = name.split_at(1);
            format!("{a}'{b}'")
        }
        _ => name,
    }
}

/// One word of arguments: quoting, escapes, globs, expansions.
fn word(c: &mut Choices, depth: usize) -> String {
    let atoms = 1 + c.next(3);
    let mut out = String::new();
    for _ in 0..atoms {
        // Two in three atoms are quoting only (exact), one in three may expand at run time.
        let pick = if c.alt(3) == 0 {
            c.next(22)
        } else {
            [0, 1, 2, 3, 4, 5, 12, 13, 15, 16, 17, 19]
                .get(c.alt(12))
                .copied()
                .unwrap_or(19)
        };
        let atom = match pick {
            0 => "'a b'".to_owned(),
            1 => "\"x  y\"".to_owned(),
            2 => "\"q\\\"\\\\\\$z\"".to_owned(),
            3 => "a\\ b".to_owned(),
            4 => "\\'".to_owned(),
            5 => {
                let esc = c.pick(&[
                    "\\n",
                    "\\t",
                    "\\x41",
                    "\\101",
                    "\\u0042",
                    "\\U00000043",
                    "\\cA",
                    "\\e",
                    "\\a",
                    "\\\\",
                    "\\'",
                    "\\\"",
                    "\\?",
                    "\\q",
                    "\\x",
                    "\\xff",
                    "\\0",
                    "\\u00e9",
                ]);
                format!("$'p{esc}s'")
            }
            6 => c.pick(&["*", "*.rs", "?", "[ab]", "x*y"]).to_owned(),
            7 => c.pick(&["~", "~/x", "a~b", "x=~"]).to_owned(),
            8 => c
                .pick(&["$HOME", "${X}", "$1", "$#", "\"$X\"", "$", "${#X}"])
                .to_owned(),
            9 => c.pick(&["{a,b}", "{}", "{x}", "a{1..2}"]).to_owned(),
            10 if depth < 2 => format!("$({})", simple(c, depth + 1)),
            11 if depth < 2 => format!("`{}`", simple(c, depth + 1)),
            12 => c.pick(&["-rf", "-la", "--", "-", "-n", "5"]).to_owned(),
            13 => c
                .pick(&["/", ".", "..", "/etc/passwd", "a/b.txt"])
                .to_owned(),
            14 => c
                .pick(&["!", "x!", "=", "a=b", "%", "@", ",", ":"])
                .to_owned(),
            15 => "\"\"".to_owned(),
            16 => "''".to_owned(),
            17 => c.pick(&["\"'\"", "'\"'", "\"a'b\"", "\"`\""]).to_owned(),
            18 => "$\"t\"".to_owned(),
            _ => c
                .pick(&["a", "b", "x.txt", "HEAD", "status", "origin", "main"])
                .to_owned(),
        };
        out.push_str(&atom);
    }
    out
}

/// A simple command: assignments, a name (maybe behind wrappers), words, redirections.
fn simple(c: &mut Choices, depth: usize) -> String {
    let mut parts: Vec<String> = Vec::new();
    for _ in 0..c.next(4).saturating_sub(2) {
        parts.push(c.pick(&["A=1", "B='x y'", "C=$X", "D=~"]).to_owned());
    }
    match c.alt(10) {
        0 => parts.push(
            c.pick(&[
                "sudo",
                "nohup",
                "env",
                "command",
                "time",
                "nice -n 5",
                "timeout 5",
                "env A=1",
                "xargs",
            ])
            .to_owned(),
        ),
        1 if depth < 2 => {
            let shell = c.pick(&["sh", "bash"]);
            let inner = simple(c, depth + 1).replace('\'', "'\\''");
            parts.push(format!("{shell} -c '{inner}'"));
            return parts.join(" ");
        }
        2 if depth < 2 => {
            parts.push("eval".to_owned());
        }
        3 => parts.push(c.pick(&["$CMD", "${CMD}", "\"$CMD\""]).to_owned()),
        _ => {}
    }
    parts.push(command_name(c));
    for _ in 0..c.next(4) {
        parts.push(word(c, depth));
    }
    match c.alt(8) {
        0 => parts.push(
            c.pick(&["< x", "> out", "2>&1", ">> log", "<<< here"])
                .to_owned(),
        ),
        1 if depth < 2 => parts.push(format!("<({})", simple(c, depth + 1))),
        _ => {}
    }
    parts.join(" ")
}

/// A command line: simple commands joined by operators, grouped, commented.
pub fn command_line(bytes: &[u8]) -> String {
    let mut c = Choices::new(bytes);
    let mut out = simple(&mut c, 0);
    for _ in 0..c.next(4).saturating_sub(2) {
        let op = c.pick(&[" && ", " || ", "; ", " | ", "\n", " & "]);
        let next = simple(&mut c, 0);
        out = match c.next(5) {
            0 => format!("( {out} ){op}{next}"),
            1 => format!("{{ {out}; }}{op}{next}"),
            _ => format!("{out}{op}{next}"),
        };
    }
    if c.alt(6) == 0 {
        out.push_str(c.pick(&[" # rm -rf /", " #x", "#y"]));
    }
    out
}

/// The stub directory, the log directory and an empty working directory.
pub struct Harness {
    root: PathBuf,
    stubs: PathBuf,
    log: PathBuf,
    work: PathBuf,
    bash: PathBuf,
    timeout: PathBuf,
    runs: std::cell::Cell<u64>,
    compared: std::cell::Cell<u64>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// What toolgate made of a line.
pub struct Reading {
    /// The argv of each exact (non-opaque) part.
    pub exact: Vec<Vec<String>>,
    /// Every executable toolgate reports.
    pub executables: Vec<String>,
    /// Whether some part hides what it touches.
    pub hidden: bool,
    /// The executables of opaque parts.
    pub opaque_executables: Vec<String>,
}

pub fn read(line: &str) -> Reading {
    let args = json!({ "command": line });
    let ctx = NormalizeContext {
        workspace: "/w",
        home: "/home/u",
        fs: &LexicalFs,
    };
    let call = ToolCall {
        server: None,
        tool: "run_command",
        arguments: &args,
        definition: None,
    };
    let action = normalize(&call, None, &ctx);
    Reading {
        exact: action
            .parts
            .iter()
            .filter(|p| !p.opaque)
            .filter_map(|p| p.argv.clone())
            .collect(),
        executables: action
            .parts
            .iter()
            .filter_map(|p| p.executable.clone())
            .collect(),
        hidden: action.parts.iter().any(|p| p.hidden),
        opaque_executables: action
            .parts
            .iter()
            .filter(|p| p.opaque)
            .filter_map(|p| p.executable.clone())
            .collect(),
    }
}

impl Harness {
    /// `None` when bash or `timeout` is missing (the test is skipped).
    pub fn new() -> Option<Harness> {
        let bash = ["/bin/bash", "/usr/bin/bash"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())?;
        // Absolute: a program name is looked up in the child's `PATH`, which is the stubs.
        let timeout = ["/usr/bin/timeout", "/bin/timeout"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())?;
        let root = std::env::temp_dir().join(format!(
            "toolgate-shell-diff-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        let stubs = root.join("stubs");
        let log = root.join("log");
        let work = root.join("work");
        for d in [&stubs, &log, &work] {
            std::fs::create_dir_all(d).ok()?;
        }
        for name in STUBS {
            let path = stubs.join(name);
            // The name is baked in: a command name has no `/` in restricted bash, so argv[0]
            // is the word bash looked up, which is this file's name.
            // Each line gets a log directory of its own (`STUB_LOG`), so a stub a line left
            // running in the background (`&`, `<(…)`) cannot write into the next line's.
            let script = format!(
                "#!{}\nprintf '%s\\0' {name} \"$@\" > \"$STUB_LOG/$$\"\n",
                bash.display()
            );
            std::fs::write(&path, script).ok()?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).ok()?;
        }
        Some(Harness {
            root,
            stubs,
            log,
            work,
            bash,
            timeout,
            runs: std::cell::Cell::new(0),
            compared: std::cell::Cell::new(0),
        })
    }

    /// Runs `line` in restricted bash; returns the argv of every stub it reached.
    pub fn run(&self, line: &str) -> Vec<Vec<String>> {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        let log = self.log.join(n.to_string());
        if std::fs::create_dir(&log).is_err() {
            return Vec::new();
        }
        let _ = Command::new(&self.timeout)
            .args(["-s", "KILL", "10"])
            .arg(&self.bash)
            .args(["-r", "-c", line])
            .env_clear()
            .env("PATH", &self.stubs)
            .env("STUB_LOG", &log)
            .current_dir(&self.work)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&log).into_iter().flatten().flatten() {
            let Ok(bytes) = std::fs::read(entry.path()) else {
                continue;
            };
            let argv: Vec<String> = bytes
                .split(|b| *b == 0)
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            // The record ends with a NUL: drop the empty tail.
            let argv = match argv.split_last() {
                Some((last, rest)) if last.is_empty() => rest.to_vec(),
                _ => argv,
            };
            // An empty record: a stub the line left running in the background (`&`) has
            // not written yet.
            if argv.is_empty() {
                continue;
            }
            out.push(argv);
        }
        out
    }

    /// The property for one line: `Err` says how toolgate and bash disagree.
    pub fn check(&self, line: &str) -> Result<(), String> {
        let reading = read(line);
        let ran = self.run(line);
        if ran.is_empty() {
            // bash reached no stub (a builtin, an error, a restricted operation).
            return Ok(());
        }
        if !reading.exact.is_empty() {
            self.compared.set(self.compared.get() + 1);
        }
        // An exact part is one command of an exact line (a simple command, or an exact
        // compound, where a wrapped command is still opaque): every command bash ran is one
        // of the exact ones, argv for argv, or one an opaque part names.
        if !reading.exact.is_empty() {
            for argv in &ran {
                let name = argv.first().cloned().unwrap_or_default();
                if !reading.exact.contains(argv) && !reading.opaque_executables.contains(&name) {
                    return Err(format!(
                        "{line:?}: toolgate's exact argvs {:?}, bash ran {argv:?}",
                        reading.exact
                    ));
                }
            }
        }
        if !reading.hidden {
            for argv in &ran {
                let name = argv.first().cloned().unwrap_or_default();
                if !reading.executables.contains(&name) {
                    return Err(format!(
                        "{line:?}: bash ran `{name}` ({argv:?}), toolgate saw only {:?}",
                        reading.executables
                    ));
                }
            }
        }
        Ok(())
    }

    /// How many lines had an exact part and reached a stub (were really compared).
    pub fn compared(&self) -> u64 {
        self.compared.get()
    }

    /// Where the stubs are (for a test that wants to look).
    pub fn stubs(&self) -> &Path {
        &self.stubs
    }
}
