//! A shell tool's call → parts: what each command of its line reads, writes, deletes or runs.

use super::{
    ARGS_PARAMS, COMMAND_PARAMS, CWD_PARAMS, NormalizeContext, Scan, ToolCall, ToolMapping,
    args_object, commands, first_present, git, opaque, path, scan, shell,
};
use crate::action::{Beneath, Operation, Part};
use serde_json::Value;

pub(super) fn shell_parts(call: &ToolCall, m: &ToolMapping, ctx: &NormalizeContext) -> Vec<Part> {
    let Some(args) = args_object(call) else {
        return vec![opaque(Operation::ShellExec)];
    };
    // Working directory.
    let mut cwd: Option<String> = None;
    let mut cwd_bad = false;
    if let Some((_, v)) = first_present(args, m.cwd_param.as_ref(), CWD_PARAMS) {
        match v {
            Value::String(s) => match path::resolve_path_strict(s, ctx.workspace, ctx) {
                Ok(p) => cwd = Some(p),
                Err(_) => cwd_bad = true,
            },
            Value::Null => {}
            _ => cwd_bad = true,
        }
    }
    let command = first_present(args, m.command_param.as_ref(), COMMAND_PARAMS).map(|(_, v)| v);
    let extra = first_present(args, m.args_param.as_ref(), ARGS_PARAMS)
        .filter(|(name, _)| Some(name.as_str()) != m.command_param.as_deref())
        .map(|(_, v)| v);
    let extra_words: Option<Vec<String>> = match extra {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned))
            .collect(),
        Some(Value::String(s)) => match scan(s) {
            Scan::Simple(w) => Some(w),
            _ => None,
        },
        Some(_) => None,
    };

    let mut out = ShellOut::new(cwd, ctx);
    match (command, extra_words) {
        (Some(Value::String(cmd)), Some(extra_words)) => {
            if extra_words.is_empty() {
                out.command_string(cmd);
            } else {
                match scan(cmd) {
                    Scan::Simple(mut words) => {
                        let meta = extra_words.iter().any(|w| shell::has_shell_meta(w));
                        words.extend(extra_words.iter().cloned());
                        out.argv(&words, meta);
                        if meta {
                            out.joined_string(&format!("{cmd} {}", extra_words.join(" ")));
                        }
                    }
                    _ => out.joined_string(&format!("{cmd} {}", extra_words.join(" "))),
                }
            }
        }
        (Some(Value::Array(items)), Some(extra_words)) => {
            let words: Option<Vec<String>> = items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect();
            match words {
                Some(mut words) if !words.is_empty() => {
                    words.extend(extra_words);
                    let meta = words.iter().any(|w| shell::has_shell_meta(w));
                    out.argv(&words, meta);
                    if meta {
                        // If the server joins the array into a shell string, these run too.
                        out.joined_string(&words.join(" "));
                    }
                }
                _ => out.parts.push(opaque(Operation::ShellExec)),
            }
        }
        (None, Some(extra_words)) if !extra_words.is_empty() => {
            let meta = extra_words.iter().any(|w| shell::has_shell_meta(w));
            out.argv(&extra_words, meta);
        }
        (Some(Value::String(cmd)), None) => {
            // Args we cannot read: the command is not exact.
            out.command_string(cmd);
            for p in &mut out.parts {
                p.opaque = true;
            }
            out.parts.push(opaque(Operation::ShellExec));
        }
        _ => out.parts.push(opaque(Operation::ShellExec)),
    }
    let mut parts = out.parts;
    if parts.is_empty() {
        parts.push(opaque(Operation::ShellExec));
    }
    if cwd_bad {
        for p in &mut parts {
            p.opaque = true;
        }
        parts.push(Part::hidden(Operation::Unknown));
    }
    parts
}

pub(super) struct ShellOut<'c> {
    pub(super) parts: Vec<Part>,
    cwd: Option<String>,
    ctx: &'c NormalizeContext<'c>,
    /// Every directory the next command may run in (`None`: not known). A `cd` adds its
    /// target: whether it succeeded, and so which one later commands run in, is only known
    /// at run time.
    bases: Vec<Option<String>>,
    /// The segment being read is a line of a here-document's body.
    body: bool,
    /// Words resolved as paths so far (bounded: [`MAX_RESOLVED`]).
    resolved: usize,
    /// The executable of the known command whose file operands are being read: their parts
    /// carry it, so that a rule can say `executables: [mv]` for the files `mv` deletes.
    file_exe: Option<String>,
}

/// At most this many words of one call are resolved as paths; past it, what the rest name
/// is hidden (every deny rule of the operation treats it as matching).
const MAX_RESOLVED: usize = 512;

/// At most this many working directories are followed; beyond, relative paths are hidden.
const MAX_BASES: usize = 8;

/// Paths that name no resource: the process's own standard streams and the null device.
const NO_RESOURCE: &[&str] = &["/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"];

/// A word of a command that looks like a path: `/…`, `~…`, `./…`, `../…`, `.`, `..`, a
/// dotfile (`.env`), or anything with a `/` that is no URL.
fn looks_like_path(word: &str) -> bool {
    if word.is_empty() || word.contains("://") {
        return false;
    }
    word.starts_with(['/', '~'])
        || word == "."
        || word == ".."
        || word.starts_with("./")
        || word.starts_with("../")
        || (word.starts_with('.')
            && word
                .chars()
                .nth(1)
                .is_some_and(|c| c.is_alphanumeric() || c == '_'))
        || word.contains('/')
}

/// How one word of a command names files.
enum Named {
    /// Not a file (`-` is standard input, `/dev/null`).
    Nothing,
    /// What it names is only known at run time (a variable, braces, an unknown directory).
    Hidden,
    /// Canonical paths; `glob` when a glob was cut back to its directory (with a file-name
    /// filter when only the last component has one).
    Paths {
        paths: Vec<String>,
        glob: Option<Vec<String>>,
    },
}

impl<'c> ShellOut<'c> {
    pub(super) fn new(cwd: Option<String>, ctx: &'c NormalizeContext<'c>) -> Self {
        let base = cwd.clone().or_else(|| {
            Some(
                path::resolve_path(ctx.workspace, "/", ctx)
                    .unwrap_or_else(|_| ctx.workspace.to_owned()),
            )
        });
        ShellOut {
            parts: Vec::new(),
            cwd,
            ctx,
            bases: vec![base],
            body: false,
            resolved: 0,
            file_exe: None,
        }
    }

    /// A string made by joining words the way a server might: what it runs is a guess, so
    /// none of its parts is exact.
    fn joined_string(&mut self, cmd: &str) {
        let first = self.parts.len();
        self.command_string(cmd);
        for p in self.parts.get_mut(first..).unwrap_or_default() {
            p.opaque = true;
        }
    }

    pub(super) fn command_string(&mut self, cmd: &str) {
        let first = self.parts.len();
        let (scanned, hidden) = shell::scan_hiding(cmd);
        match scanned {
            Scan::Simple(words) => self.segment(&words, &[], true, false),
            Scan::Compound { .. } | Scan::Invalid => {
                let line = shell::parse_line(cmd);
                if line.segments.is_empty() {
                    self.parts.push(opaque(Operation::ShellExec));
                }
                for seg in &line.segments {
                    // A here-document's text is no command: only what a substitution in it
                    // runs is (the scanner cannot tell which words those are). Its words
                    // are not shown as paths; commands of the table in it still are.
                    self.body = seg.body;
                    self.segment(&seg.words, &seg.redirects, line.exact, !line.exact);
                }
                self.body = false;
                for r in &line.loose {
                    self.redirect(r, false, true);
                }
            }
        }
        if hidden {
            // A substitution, a variable as the command name or undecodable quoting: what
            // runs is not what the string says.
            if self.parts.len() == first {
                self.parts.push(Part::hidden(Operation::ShellExec));
            }
            for p in self.parts.get_mut(first..).unwrap_or_default() {
                p.opaque = true;
                if !p.operation.is_fs() {
                    p.hidden = true;
                }
            }
        }
    }

    /// An exact argv (exec form or a simple string). `inexact` forces opaque parts.
    pub(super) fn argv(&mut self, words: &[String], inexact: bool) {
        self.segment(words, &[], !inexact, inexact);
    }

    /// One simple command: its executions (wrappers looked through), the files each one
    /// touches, and the segment's redirections. `literal`: the words are exactly what the
    /// program receives (nothing expands at run time).
    fn segment(
        &mut self,
        words: &[String],
        redirects: &[shell::Redirect],
        literal: bool,
        inexact: bool,
    ) {
        let execs = shell::expand(words);
        let single = execs.len() == 1;
        if execs.is_empty() {
            self.parts.push(opaque(Operation::ShellExec));
        }
        let mut any_opaque = inexact || execs.is_empty();
        let mut wrapper_chdir = false;
        let mut fed = false;
        let mut in_find = false;
        for e in execs {
            let exact = single && !inexact && !e.wrapped && !e.inexact;
            let mut part = self.exec_part(&e.argv);
            if !exact {
                part.opaque = true;
            }
            if e.hidden {
                part.opaque = true;
                part.hidden = true;
            }
            let name = e
                .argv
                .first()
                .map(|w| shell::basename(w))
                .unwrap_or_default();
            let is_git = name == "git" || name == "git.exe";
            let reading = (!e.container && !is_git).then(|| commands::classify(&e.argv));
            // A known command is exact only when every option of it is understood, and when
            // it is the system's: `./ls` or `/tmp/x/cat` may be any program.
            let own_path = e.argv.first().is_some_and(|w| {
                let slashes = w.matches('/').count();
                let system = (w.starts_with("/bin/") && slashes == 2)
                    || (w.starts_with("/usr/bin/") && slashes == 3);
                slashes > 0 && !system
            });
            if let Some(r) = &reading
                && r.known
                && (!r.understood || own_path)
            {
                part.opaque = true;
            }
            let part_opaque = part.opaque;
            let repo = is_git.then(|| part.resources.first().cloned()).flatten();
            any_opaque |= part_opaque;
            self.parts.push(part);
            if e.container {
                fed |= matches!(name, "xargs" | "parallel");
                wrapper_chdir |= changes_directory(&e.argv);
                continue;
            }
            let literal = literal && !e.inexact && !e.hidden;
            let bases = if wrapper_chdir {
                vec![None]
            } else {
                self.bases.clone()
            };
            if is_git {
                if let Some(paths) = commands::git_clean_paths(&e.argv) {
                    let bases = vec![repo];
                    for w in paths {
                        self.file(Operation::FsDelete, &w, true, &[], literal, true, &bases);
                    }
                }
                continue;
            }
            let Some(r) = reading else {
                continue;
            };
            // `mv a b` moves a tree only when a source is a directory: with every source a
            // regular file now, the target is one file, not a tree.
            let files_moved = name == "mv"
                && r.files
                    .iter()
                    .filter(|f| f.op == Operation::FsDelete)
                    .all(|f| !f.recursive && self.names_regular_files(&f.word, literal, &bases))
                && r.files.iter().any(|f| f.op == Operation::FsDelete);
            for f in &r.files {
                if in_find && f.word.contains("{}") {
                    continue;
                }
                let recursive = f.recursive && !(files_moved && f.op == Operation::FsWrite);
                self.file_exe = (r.known && !own_path).then(|| name.to_owned());
                self.file(
                    f.op,
                    &f.word,
                    recursive,
                    &f.filters,
                    literal,
                    part_opaque,
                    &bases,
                );
            }
            self.file_exe = None;
            if r.known
                && own_path
                && let Some(program) = e.argv.first()
            {
                self.loose(program, literal, &bases);
            }
            for (k, w) in r.loose.iter().enumerate() {
                if in_find && w.contains("{}") {
                    continue;
                }
                // The command's own name is a file only when written as a path; then running
                // it reads it, exactly (what it does with its arguments is not known).
                if k == 0 && !r.known {
                    if w.contains('/') {
                        self.file(
                            Operation::FsRead,
                            w,
                            false,
                            &[],
                            literal,
                            part_opaque,
                            &bases,
                        );
                    }
                    continue;
                }
                self.loose(w, literal, &bases);
            }
            for op in &r.hidden_ops {
                self.parts.push(Part::hidden(*op));
            }
            if fed {
                // Operands come from standard input: which files is not known here.
                match r.operand_op {
                    Some(op) => self.parts.push(Part::hidden(op)),
                    None if !r.known => {
                        for op in [Operation::FsRead, Operation::FsWrite, Operation::FsDelete] {
                            self.parts.push(Part::hidden(op));
                        }
                    }
                    None => {}
                }
            }
            for red in &e.redirects {
                self.redirect(red, literal, true);
            }
            if let Some(ch) = &r.chdir {
                if *ch == commands::Chdir::Home {
                    // `cd` alone goes home: that is looking at it.
                    self.file(
                        Operation::FsRead,
                        "~",
                        false,
                        &[],
                        false,
                        part_opaque,
                        &bases,
                    );
                }
                self.chdir(ch, literal);
            }
            in_find |= name == "find"
                && e.argv
                    .iter()
                    .any(|w| matches!(w.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"));
        }
        for red in redirects {
            self.redirect(red, literal, any_opaque);
        }
    }

    /// What one word names, against one working directory.
    fn name(&mut self, word: &str, literal: bool, base: Option<&str>, recursive: bool) -> Named {
        if word.is_empty() || word == "-" || NO_RESOURCE.contains(&word) {
            return Named::Nothing;
        }
        self.resolved += 1;
        if self.resolved > MAX_RESOLVED {
            return Named::Hidden;
        }
        let mut raw = word.to_owned();
        let mut glob = None;
        if literal {
            if raw.starts_with('~') {
                // A quoted `~` is a file named so, not the home directory.
                raw = format!("./{raw}");
            }
        } else {
            if raw.contains(['$', '`'])
                || (raw.contains('{') && (raw.contains(',') || raw.contains("..")))
            {
                return Named::Hidden;
            }
            if raw.starts_with('~') && raw != "~" && !raw.starts_with("~/") {
                // `~user`: another home directory.
                return Named::Hidden;
            }
            if let Some(at) = raw.find(['*', '?', '[']) {
                // A glob: everything it can match lies beneath its literal directory.
                let head = raw.get(..at).unwrap_or_default();
                let dir = match head.rfind('/') {
                    Some(0) => "/".to_owned(),
                    Some(i) => head.get(..i).unwrap_or_default().to_owned(),
                    None => ".".to_owned(),
                };
                let last = raw.rsplit('/').next().unwrap_or_default();
                let only_last = !raw
                    .get(..raw.len() - last.len())
                    .unwrap_or_default()
                    .contains(['*', '?', '[']);
                glob = Some(if only_last && !recursive && !last.is_empty() {
                    vec![last.to_owned()]
                } else {
                    Vec::new()
                });
                raw = dir;
            }
        }
        let relative = !raw.starts_with('/') && !raw.starts_with('~');
        let base = match (relative, base) {
            (true, None) => return Named::Hidden,
            (_, b) => b.unwrap_or(self.ctx.workspace),
        };
        match path::resolve_path_all(&raw, base, self.ctx) {
            Ok(paths) => Named::Paths { paths, glob },
            Err(e) if e.hides() => Named::Hidden,
            Err(_) => Named::Nothing,
        }
    }

    /// A file operand of a known command.
    #[allow(
        clippy::too_many_arguments,
        reason = "one call site; a struct would only rename the arguments"
    )]
    fn file(
        &mut self,
        op: Operation,
        word: &str,
        recursive: bool,
        filters: &[String],
        literal: bool,
        opaque: bool,
        bases: &[Option<String>],
    ) {
        for base in bases {
            match self.name(word, literal, base.as_deref(), recursive) {
                Named::Nothing => {}
                Named::Hidden => self.parts.push(Part::hidden(op)),
                Named::Paths { paths, glob } => {
                    let beneath = match glob {
                        // A glob reached recursively: everything beneath its directory
                        // that the command's own filters let through.
                        Some(_) | None if recursive => Some(Beneath {
                            filters: filters.to_vec(),
                        }),
                        Some(names) => Some(Beneath { filters: names }),
                        None => None,
                    };
                    self.fs_part(op, paths, beneath, opaque);
                }
            }
        }
    }

    /// True when `word` names, from every base, only paths that are regular files now.
    fn names_regular_files(&mut self, word: &str, literal: bool, bases: &[Option<String>]) -> bool {
        bases.iter().all(
            |base| match self.name(word, literal, base.as_deref(), false) {
                Named::Paths { paths, glob: None } => {
                    !paths.is_empty() && paths.iter().all(|p| self.ctx.fs.is_regular_file(p))
                }
                _ => false,
            },
        )
    }

    /// A word whose role is not known: when it looks like a path (or names one that
    /// exists), deny rules see it as read, written and deleted; allow rules never vouch.
    fn loose(&mut self, word: &str, literal: bool, bases: &[Option<String>]) {
        if self.body {
            return;
        }
        let mut candidates = vec![word];
        if let Some((_, value)) = word.split_once('=') {
            // `--file=x`, `KEY=x`.
            candidates = vec![value];
        } else if word.starts_with('-') {
            return;
        }
        for w in candidates {
            let pathy = looks_like_path(w);
            for base in bases {
                let named = self.name(w, literal, base.as_deref(), false);
                let keep = match &named {
                    Named::Nothing => false,
                    Named::Hidden => pathy,
                    Named::Paths { paths, glob } => {
                        pathy || glob.is_some() || paths.iter().any(|p| self.ctx.fs.exists(p))
                    }
                };
                if !keep {
                    continue;
                }
                for op in [Operation::FsRead, Operation::FsWrite, Operation::FsDelete] {
                    match &named {
                        Named::Hidden => self.parts.push(Part::hidden(op)),
                        Named::Paths { paths, glob } => {
                            let beneath = glob.clone().map(|filters| Beneath { filters });
                            self.fs_part(op, paths.clone(), beneath, true);
                        }
                        Named::Nothing => {}
                    }
                }
            }
        }
    }

    fn redirect(&mut self, r: &shell::Redirect, literal: bool, opaque: bool) {
        let op = if r.write {
            Operation::FsWrite
        } else {
            Operation::FsRead
        };
        let bases = self.bases.clone();
        self.file(
            op,
            &r.target,
            false,
            &[],
            literal && !r.inexact,
            opaque,
            &bases,
        );
    }

    fn chdir(&mut self, ch: &commands::Chdir, literal: bool) {
        let mut next = self.bases.clone();
        for base in &self.bases.clone() {
            let to = match ch {
                commands::Chdir::Home => path::resolve_path(self.ctx.home, "/", self.ctx).ok(),
                commands::Chdir::Unknown => None,
                commands::Chdir::To(dir) => match self.name(dir, literal, base.as_deref(), false) {
                    Named::Paths { paths, glob: None } if paths.len() == 1 => {
                        paths.into_iter().next()
                    }
                    _ => None,
                },
            };
            if !next.contains(&to) {
                next.push(to);
            }
        }
        if next.len() > MAX_BASES {
            next.truncate(MAX_BASES);
            if !next.contains(&None) {
                next.push(None);
            }
        }
        self.bases = next;
    }

    /// Adds resources to the last part of the same kind, or a new part.
    fn fs_part(
        &mut self,
        op: Operation,
        paths: Vec<String>,
        beneath: Option<Beneath>,
        opaque: bool,
    ) {
        if let Some(last) = self.parts.last_mut()
            && last.operation == op
            && last.opaque == opaque
            && !last.hidden
            && last.beneath == beneath
            && last.executable == self.file_exe
        {
            for p in paths {
                if !last.resources.contains(&p) {
                    last.resources.push(p);
                }
            }
            return;
        }
        let mut part = Part::new(op);
        part.resources = paths;
        part.opaque = opaque;
        part.beneath = beneath;
        part.executable = self.file_exe.clone();
        self.parts.push(part);
    }

    fn exec_part(&self, argv: &[String]) -> Part {
        let exe = argv.first().map(|w| shell::basename(w).to_owned());
        let is_git = exe.as_deref().is_some_and(|e| e == "git" || e == "git.exe");
        let mut part = Part::new(Operation::ShellExec);
        part.argv = Some(argv.to_vec());
        part.executable = exe;
        if is_git {
            let class = git::classify_argv(argv);
            part.operation = class.operation;
            part.opaque = class.opaque;
            let base = self.cwd.clone().unwrap_or_else(|| {
                path::resolve_path(self.ctx.workspace, "/", self.ctx)
                    .unwrap_or_else(|_| self.ctx.workspace.to_owned())
            });
            let mut repo = Some(base.clone());
            for dir in &class.chdirs {
                repo = repo.and_then(|r| path::resolve_path_strict(dir, &r, self.ctx).ok());
            }
            match repo {
                Some(r) => {
                    if r != base {
                        // `-C` to elsewhere: not what the reader of the command sees.
                        if part.operation == Operation::GitRead {
                            part.operation = Operation::ShellExec;
                        }
                        part.opaque = true;
                    }
                    part.resources.push(r);
                }
                None => {
                    part.opaque = true;
                    part.operation = Operation::Unknown;
                }
            }
        } else if let Some(cwd) = &self.cwd {
            part.resources.push(cwd.clone());
        }
        part
    }
}

/// A wrapper that runs its command in another directory (`env -C DIR`, `sudo -D DIR`).
fn changes_directory(argv: &[String]) -> bool {
    let name = argv.first().map(|w| shell::basename(w)).unwrap_or_default();
    if !matches!(
        name,
        "env" | "sudo" | "doas" | "run0" | "systemd-run" | "nsenter" | "chroot" | "flock"
    ) {
        return false;
    }
    name == "chroot"
        || argv.iter().skip(1).any(|w| {
            matches!(
                w.as_str(),
                "-C" | "--chdir" | "-D" | "--working-directory" | "-w" | "--wd"
            ) || w.starts_with("--chdir=")
                || w.starts_with("--working-directory=")
                || (name == "env" && w.starts_with("-C"))
        })
}
