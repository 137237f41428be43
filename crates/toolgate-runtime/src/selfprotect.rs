//! toolgate's self-protection, the side with IO: where toolgate's own files are (compiled
//! into the engine's built-in deny rules, `toolgate_policy::protect`), and the checks of a
//! shell command against the live system: a command that runs a toolgate executable (by
//! name, by path, or a copy of one, compared by content) and a command that signals a
//! toolgate process (the broker, a `wrap` proxy, a hook) are denied.
//!
//! Both `wrap` ([`crate::enforce::backend::EngineBackend`]) and the broker's hooks
//! ([`crate::enforce::backend::decide_on_disk`]) decide through [`guard`], so a wrapped
//! shell server and a client's own shell tool meet the same checks.

use std::collections::HashMap;
use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use toolgate_policy::protect::{Protected, ProtectedKind, Protections, SELF_PROTECTION_RULE};
use toolgate_policy::{
    Action, Contract, ContractResult, Effect, FsFacts as _, Operation, Part, lexical_normalize,
};

use crate::fsfacts::SoftFs;
use toolgate_clients::discovery::{Client, Env, Platform, locations};
use toolgate_clients::hooks::{HookClient, HookScope};

/// The spellings of `path` a rule must name: its absolute lexical form and its canonical one
/// (symlinks resolved, a missing tail appended), as the normaliser produces resources.
fn spellings(path: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    if let Some(lexical) = abs.to_str().and_then(lexical_normalize) {
        if let Some(canonical) = SoftFs.canonicalize(&lexical) {
            out.push(canonical);
        }
        out.push(lexical);
    }
    out.dedup();
    out
}

/// The executables of this toolgate: the running one and the `toolgate`/`toolgate-hook`
/// beside it.
fn executables() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(me) = std::env::current_exe() {
        for name in ["toolgate", "toolgate-hook"] {
            out.push(me.with_file_name(name));
        }
        out.push(me);
    }
    out
}

/// The file at `path` and whatever is kept beside it under its name (`NAME.*`: a lock,
/// rotations, temporary files).
fn with_siblings(kind: ProtectedKind, path: &Path) -> Protected {
    let paths = spellings(path);
    let mut p = Protected::file(kind, &paths);
    p.globs.extend(
        paths
            .iter()
            .map(|s| format!("{}.*", toolgate_policy::protect::escape(s))),
    );
    p
}

/// toolgate's own files for an engine of `policy` (none: the built-in starter) in
/// `workspace`, writing its audit to `audit` (none: the workspace's `.toolgate/`).
pub fn protected(policy: Option<&Path>, workspace: &Path, audit: Option<&Path>) -> Vec<Protected> {
    use ProtectedKind as K;
    let mut list = Vec::new();
    if let Some(policy) = policy {
        list.push(Protected::file(K::PolicyFile, &spellings(policy)));
    }
    let dot = workspace.join(".toolgate");
    list.push(Protected::tree(K::AuditLog, &spellings(&dot)));
    if let Some(audit) = audit {
        // With its lock and rotations (`audit.jsonl.lock`).
        list.push(with_siblings(K::AuditLog, audit));
    }
    if let Ok(dir) = crate::pins::default_dir() {
        list.push(Protected::tree(K::PinStore, &spellings(&dir)));
    }
    // Every trusted policy: what a `wrap` or `hook` would take from its directory without
    // --policy, whichever policy governs now.
    for trusted in crate::trust::trusted_paths() {
        list.push(Protected::file(K::PolicyFile, &spellings(&trusted)));
    }
    if let Some(file) = crate::trust::trust_file() {
        // With its lock and temporary files.
        list.push(with_siblings(K::TrustedPolicies, &file));
    }
    if let Ok(store) = crate::remote::oauth::store::Store::open_default()
        && let Some(dir) = store.file().parent()
    {
        list.push(Protected::tree(K::CredentialStore, &spellings(dir)).secret());
    }
    let broker = crate::paths::Layout::for_user();
    list.push(Protected::tree(K::BrokerDirectory, &spellings(&broker.dir)).secret());
    for exe in executables() {
        list.push(Protected::file(K::Executable, &spellings(&exe)));
    }
    let Some(home) = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
    else {
        return list;
    };
    let env = Env {
        home: home.clone(),
        xdg_config_home: std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute()),
        claude_config_dir: std::env::var_os("CLAUDE_CONFIG_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from),
        project: workspace.to_path_buf(),
        platform: Platform::current(),
    };
    // The client files that run toolgate: hook settings and MCP configurations.
    for client in HookClient::ALL {
        for scope in [HookScope::User, HookScope::Project] {
            list.push(Protected::file(
                K::ClientHooks,
                &spellings(&client.path(scope, &env)),
            ));
        }
    }
    list.push(Protected::file(
        K::ClientHooks,
        &spellings(&workspace.join(".claude/settings.local.json")),
    ));
    // The files that say whether a client runs hooks at all: Copilot CLI's and Gemini CLI's
    // lists of trusted folders (a project taken off them is one whose hooks no longer run),
    // Copilot CLI's settings, and Codex's configuration (its `[features] hooks` switch, its
    // trusted projects, and the trust of each hook).
    for file in [
        ".copilot/config.json",
        ".copilot/settings.json",
        ".gemini/trustedFolders.json",
        ".codex/config.toml",
        ".config/opencode/plugin/toolgate.js",
    ] {
        list.push(Protected::file(
            K::ClientHooks,
            &spellings(&home.join(file)),
        ));
    }
    for client in Client::ALL {
        for location in locations(client, &env) {
            list.push(Protected::file(K::McpConfig, &spellings(&location.path)));
        }
    }
    // A project's own files wherever the project is: the agent's working directory (the
    // workspace of a hook) may be below the project's root, where the client reads them.
    list.push(Protected::anywhere(
        K::ClientHooks,
        &[
            "**/.claude/settings.json",
            "**/.claude/settings.local.json",
            "**/.cursor/hooks.json",
            "**/.qwen/settings.json",
            "**/.gemini/settings.json",
            "**/.github/hooks/toolgate.json",
            "**/.codex/hooks.json",
            "**/.codex/config.toml",
            "**/.opencode/plugin/toolgate.js",
            "**/.windsurf/hooks.json",
        ],
    ));
    list.push(Protected::anywhere(
        K::McpConfig,
        &["**/.mcp.json", "**/.cursor/mcp.json", "**/.vscode/mcp.json"],
    ));
    list.push(Protected::anywhere(
        K::ClientHooks,
        &[
            "**/.claude",
            "**/.cursor",
            "**/.qwen",
            "**/.gemini",
            "**/.github/hooks",
            "**/.github",
            "**/.codex",
            "**/.opencode",
            "**/.opencode/plugin",
            "**/.windsurf",
        ],
    ));
    // Directories whose every file a client runs as code or as a hook at its next start
    // (an OpenCode plugin can rewrite a call's arguments after toolgate judged them; a
    // Copilot CLI hook file can add a hook of its own): nothing in them may be written.
    list.push(Protected::anywhere(
        K::ClientHooks,
        &[
            "**/.opencode/plugin/**",
            "**/.opencode/plugins/**",
            "**/.github/hooks/**",
        ],
    ));
    list.push(Protected::tree(
        K::ClientHooks,
        &[
            spellings(&home.join(".config/opencode/plugin")),
            spellings(&home.join(".config/opencode/plugins")),
            spellings(&home.join(".copilot/hooks")),
        ]
        .concat(),
    ));
    list.push(Protected::anywhere(
        K::AuditLog,
        &["**/.toolgate/**", "**/.toolgate"],
    ));
    // The directories holding them: renaming one away removes every file in it.
    let mut dirs = vec![
        workspace.join(".claude"),
        workspace.join(".cursor"),
        workspace.join(".vscode"),
        workspace.join(".qwen"),
        workspace.join(".gemini"),
        home.join(".cursor"),
        home.join(".qwen"),
        home.join(".gemini"),
        home.join(".copilot"),
        home.join(".copilot/hooks"),
        home.join(".codex"),
        home.join(".config/opencode"),
        home.join(".config/opencode/plugin"),
        home.join(".codeium"),
        home.join(".codeium/windsurf"),
    ];
    dirs.push(
        env.claude_config_dir
            .clone()
            .unwrap_or_else(|| home.join(".claude")),
    );
    for dir in dirs {
        list.push(Protected::file(K::ClientHooks, &spellings(&dir)));
    }
    // Claude Code's transcripts: a `UserPromptSubmit` vouches for a prompt only once the
    // prompt is found there (`broker::transcript`).
    let claude_dir = env
        .claude_config_dir
        .clone()
        .unwrap_or_else(|| home.join(".claude"));
    for dir in spellings(&claude_dir.join("projects")) {
        let e = toolgate_policy::protect::escape(&dir);
        list.push(Protected {
            kind: K::Transcript,
            shown: format!("{dir}/…/*.jsonl"),
            globs: vec![format!("{e}/**/*.jsonl"), format!("{e}/**/*.json"), e],
            no_read: false,
        });
    }
    // Codex's: `~/.codex/sessions/<yyyy>/<mm>/<dd>/rollout-*.jsonl`.
    for dir in spellings(&home.join(".codex/sessions")) {
        let e = toolgate_policy::protect::escape(&dir);
        list.push(Protected {
            kind: K::Transcript,
            shown: format!("{dir}/…/*.jsonl"),
            globs: vec![format!("{e}/**/*.jsonl"), format!("{e}/**"), e],
            no_read: false,
        });
    }
    // Qwen Code's: `~/.qwen/projects/<project>/chats/*.jsonl`.
    for dir in spellings(&home.join(".qwen/projects")) {
        let e = toolgate_policy::protect::escape(&dir);
        list.push(Protected {
            kind: K::Transcript,
            shown: format!("{dir}/…/*.jsonl"),
            globs: vec![format!("{e}/**/*.jsonl"), format!("{e}/*/chats"), e],
            no_read: false,
        });
    }
    // Copilot CLI's session logs: `~/.copilot/session-state/<session>/events.jsonl` (the
    // session directory too: one moved into place would bring its own log). The rest of a
    // session's directory (its plan, its checkpoints) is the agent's to write.
    for dir in spellings(&home.join(".copilot/session-state")) {
        let e = toolgate_policy::protect::escape(&dir);
        list.push(Protected {
            kind: K::Transcript,
            shown: format!("{dir}/…/events.jsonl"),
            globs: vec![format!("{e}/*/events.jsonl"), format!("{e}/*"), e],
            no_read: false,
        });
    }
    // OpenCode's database of every session's messages, with its write-ahead log.
    let opencode = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| home.join(".local/share"))
        .join("opencode");
    for dir in spellings(&opencode) {
        let e = toolgate_policy::protect::escape(&dir);
        list.push(Protected {
            kind: K::Transcript,
            shown: format!("{dir}/opencode.db"),
            globs: vec![
                format!("{e}/opencode.db"),
                format!("{e}/opencode.db-wal"),
                format!("{e}/opencode.db-shm"),
                e,
            ],
            no_read: false,
        });
    }
    // Gemini CLI's: `~/.gemini/tmp/<project>/chats/*.jsonl`. The rest of `~/.gemini/tmp` is
    // the agent's own scratch space (Gemini CLI tells the model so).
    for dir in spellings(&home.join(".gemini/tmp")) {
        let e = toolgate_policy::protect::escape(&dir);
        list.push(Protected {
            kind: K::Transcript,
            shown: format!("{dir}/…/chats/*.jsonl"),
            globs: vec![format!("{e}/**/*.jsonl"), format!("{e}/*/chats"), e],
            no_read: false,
        });
    }
    list
}

/// [`protected`] compiled; `Err` is a reason every call is denied with.
pub fn protections(
    policy: Option<&Path>,
    workspace: &Path,
    audit: Option<&Path>,
) -> Result<Protections, String> {
    Protections::compile(protected(policy, workspace, audit))
}

/// Applies the live checks to a decision: a command that runs or signals toolgate becomes
/// a deny of the self-protection. `cwd`: where relative paths of the command resolve.
/// Its reason wins over any other deny's: it is the most specific.
pub fn guard(decision: &mut toolgate_policy::Decision, cwd: &str) {
    if let Some(reason) = judge(&decision.action, cwd) {
        let mut result = ContractResult::new(Contract::Rule, Effect::Deny, reason.clone());
        result.rule = Some(SELF_PROTECTION_RULE.to_owned());
        decision.results.push(result);
        decision.matched_rules.push(SELF_PROTECTION_RULE.to_owned());
        decision.effect = Effect::Deny;
        decision.contract = Contract::Rule;
        decision.rule = Some(SELF_PROTECTION_RULE.to_owned());
        decision.reason = reason;
        decision.sinks.clear();
        decision.approved_by_session = None;
    }
}

/// Why the action runs or signals toolgate, if it does.
pub fn judge(action: &Action, cwd: &str) -> Option<String> {
    let shell: Vec<&Part> = action
        .parts
        .iter()
        .filter(|p| p.operation == Operation::ShellExec)
        .collect();
    if shell.is_empty() {
        return None;
    }
    let exes = Exes::get();
    for part in &shell {
        if let Some(why) = runs_toolgate(part, cwd, exes) {
            let what = toolgate_policy::describe_part(part);
            return Some(format!(
                "{what}: the agent may not run toolgate itself ({why}): it could forge hook events or answer approvals (toolgate's self-protection). help: run toolgate commands yourself, in a terminal"
            ));
        }
    }
    let mut table: Option<Vec<Proc>> = None;
    for part in &shell {
        let Some(exe) = part.executable.as_deref() else {
            continue;
        };
        let base = exe.rsplit('/').next().unwrap_or(exe);
        if !matches!(base, "kill" | "pkill" | "killall" | "skill") {
            continue;
        }
        let procs = table.get_or_insert_with(|| toolgate_processes(exes));
        if let Some(why) = signals_toolgate(base, part, procs) {
            let what = toolgate_policy::describe_part(part);
            return Some(format!(
                "{what}: the agent may not signal toolgate's own processes ({why}): stopping the broker would erase what the session saw (toolgate's self-protection). help: stop toolgate yourself, outside the agent"
            ));
        }
    }
    None
}

// --- Running toolgate ------------------------------------------------------------------

/// toolgate's executables, identified by file and by content.
struct Exes {
    names: Vec<String>,
    ids: Vec<(u64, u64)>,
    /// Path and size of each, for comparing a candidate of the same size by content.
    files: Vec<(PathBuf, u64)>,
}

/// Content comparisons already made: (dev, inode, mtime, size) → a copy of toolgate or not.
type FileKey = (u64, u64, i64, u64);
static SAME: OnceLock<Mutex<HashMap<FileKey, bool>>> = OnceLock::new();
const MAX_SAME: usize = 4096;

impl Exes {
    fn get() -> &'static Exes {
        static EXES: OnceLock<Exes> = OnceLock::new();
        EXES.get_or_init(|| {
            let mut names = vec!["toolgate".to_owned(), "toolgate-hook".to_owned()];
            let mut ids = Vec::new();
            let mut files = Vec::new();
            // The running executable as the kernel has it (it may since have been replaced
            // on disk), then the files beside it.
            let mut paths = vec![PathBuf::from("/proc/self/exe")];
            paths.extend(executables());
            for path in paths {
                if let Some(name) = path.file_name().and_then(|n| n.to_str())
                    && path != Path::new("/proc/self/exe")
                    && !names.iter().any(|n| n == name)
                {
                    names.push(name.to_owned());
                }
                if let Ok(m) = std::fs::metadata(&path)
                    && m.is_file()
                    && !ids.contains(&(m.dev(), m.ino()))
                {
                    ids.push((m.dev(), m.ino()));
                    files.push((path, m.len()));
                }
            }
            Exes { names, ids, files }
        })
    }

    /// Whether the file at `path` is one of toolgate's executables or a copy of one.
    fn is_toolgate_file(&self, path: &Path) -> bool {
        let Ok(m) = std::fs::metadata(path) else {
            return false;
        };
        if !m.is_file() {
            return false;
        }
        if self.ids.contains(&(m.dev(), m.ino())) {
            return true;
        }
        let same_size: Vec<&PathBuf> = self
            .files
            .iter()
            .filter(|(_, size)| *size == m.len())
            .map(|(p, _)| p)
            .collect();
        if same_size.is_empty() {
            return false;
        }
        let key = (m.dev(), m.ino(), m.mtime(), m.len());
        let cache = SAME.get_or_init(|| Mutex::new(HashMap::new()));
        if let Ok(c) = cache.lock()
            && let Some(known) = c.get(&key)
        {
            return *known;
        }
        let same = same_size.iter().any(|ours| same_content(path, ours));
        if let Ok(mut c) = cache.lock() {
            if c.len() >= MAX_SAME {
                c.clear();
            }
            c.insert(key, same);
        }
        same
    }
}

/// Whether two files hold the same bytes (read in chunks; an error is "not the same").
fn same_content(a: &Path, b: &Path) -> bool {
    let (Ok(mut fa), Ok(mut fb)) = (std::fs::File::open(a), std::fs::File::open(b)) else {
        return false;
    };
    let mut ba = vec![0u8; 1 << 20];
    let mut bb = vec![0u8; 1 << 20];
    loop {
        let Ok(na) = read_full(&mut fa, &mut ba) else {
            return false;
        };
        let Ok(nb) = read_full(&mut fb, &mut bb) else {
            return false;
        };
        if na != nb || ba.get(..na) != bb.get(..nb) {
            return false;
        }
        if na == 0 {
            return true;
        }
    }
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let Some(rest) = buf.get_mut(n..) else { break };
        match f.read(rest)? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Arguments of one command looked at.
const MAX_ARGS: usize = 256;

/// Why `part` runs (or copies) a toolgate executable, if it does.
fn runs_toolgate(part: &Part, cwd: &str, exes: &Exes) -> Option<String> {
    if let Some(exe) = part.executable.as_deref() {
        let base = exe.rsplit('/').next().unwrap_or(exe);
        if exes.names.iter().any(|n| n == base) {
            return Some(format!("`{base}`"));
        }
    }
    let argv = part.argv.as_ref()?;
    let mut words = argv.iter().take(MAX_ARGS);
    let first = words.next()?;
    if let Some(path) = resolve_command(first, cwd)
        && exes.is_toolgate_file(&path)
    {
        return Some(format!(
            "`{first}` is toolgate's executable, or a copy of it"
        ));
    }
    // A copy, link or rename of toolgate's executable (run later under another name), or
    // an interpreter or loader handed one.
    for word in words {
        let value = word.split_once('=').map_or(word.as_str(), |(_, v)| v);
        if value.is_empty() || value.starts_with('-') && !value.contains('/') {
            continue;
        }
        if let Some(path) = resolve_path(value, cwd)
            && exes.is_toolgate_file(&path)
        {
            return Some(format!("`{value}` is toolgate's executable"));
        }
    }
    None
}

/// The file a command word runs: a path (relative to `cwd`), else a search of `$PATH`.
fn resolve_command(word: &str, cwd: &str) -> Option<PathBuf> {
    if word.contains('/') {
        return resolve_path(word, cwd);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(word))
        .find(|p| p.is_file())
}

fn resolve_path(word: &str, cwd: &str) -> Option<PathBuf> {
    let expanded = if let Some(rest) = word.strip_prefix("~/") {
        PathBuf::from(std::env::var_os("HOME")?).join(rest)
    } else {
        Path::new(cwd).join(word)
    };
    Some(expanded)
}

// --- Signalling toolgate ---------------------------------------------------------------

/// A live process of toolgate.
#[derive(Debug, Clone)]
struct Proc {
    pid: i64,
    pgid: i64,
    comm: String,
    cmdline: String,
    exe_name: String,
}

/// Processes scanned at most.
const MAX_PROCS: usize = 65_536;

/// The toolgate processes of the process table now (by their executable: one of
/// toolgate's or a copy; or named like one).
fn toolgate_processes(exes: &Exes) -> Vec<Proc> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten().take(MAX_PROCS) {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i64>().ok()) else {
            continue;
        };
        let base = entry.path();
        let comm = std::fs::read_to_string(base.join("comm"))
            .unwrap_or_default()
            .trim_end()
            .to_owned();
        let link = std::fs::read_link(base.join("exe")).unwrap_or_default();
        let exe_name = link
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .trim_end_matches(" (deleted)")
                    .to_owned()
            })
            .unwrap_or_default();
        let ours = exes.names.iter().any(|n| *n == comm || *n == exe_name)
            || exes.is_toolgate_file(&base.join("exe"));
        if !ours {
            continue;
        }
        let cmdline = std::fs::read(base.join("cmdline"))
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .trim_end_matches('\0')
                    .replace('\0', " ")
            })
            .unwrap_or_default();
        let pgid = std::fs::read_to_string(base.join("stat"))
            .ok()
            .and_then(|s| {
                // `pid (comm) state ppid pgrp …`: comm may hold spaces and parentheses.
                let after = s.rsplit_once(')')?.1;
                after.split_whitespace().nth(2)?.parse().ok()
            })
            .unwrap_or(-1);
        out.push(Proc {
            pid,
            pgid,
            comm,
            cmdline,
            exe_name,
        });
    }
    out
}

/// Why a `kill`/`pkill`/`killall` part signals a toolgate process, if it may.
fn signals_toolgate(base: &str, part: &Part, procs: &[Proc]) -> Option<String> {
    if procs.is_empty() {
        return None;
    }
    let any = || {
        let p = procs.first()?;
        Some(format!(
            "its targets are not spelled out, and toolgate runs as pid {}",
            p.pid
        ))
    };
    // Targets hidden in a substitution, a variable, or read by `xargs`: any could be ours.
    let Some(argv) = part.argv.as_ref().filter(|_| !part.hidden) else {
        return any();
    };
    let args: Vec<&str> = argv.iter().skip(1).map(String::as_str).collect();
    match base {
        "kill" => kill_targets(&args, procs),
        "pkill" | "skill" => pkill_targets(&args, procs),
        _ => killall_targets(&args, procs),
    }
    .map(|hit| hit.unwrap_or_else(|| any().unwrap_or_default()))
}

/// `kill`'s targets: `Some(Some(why))` a toolgate process, `Some(None)` targets that could
/// be anything (all processes, a group not known, a word that is no pid), `None` no.
fn kill_targets(args: &[&str], procs: &[Proc]) -> Option<Option<String>> {
    let mut options = true;
    let mut first = true;
    let mut skip_value = false;
    let mut targets = Vec::new();
    for a in args {
        if skip_value {
            skip_value = false;
            continue;
        }
        if options && *a == "--" {
            options = false;
            continue;
        }
        if options && matches!(*a, "-l" | "-L" | "--list" | "--table") {
            // Lists signal names; signals nothing.
            return None;
        }
        if options && matches!(*a, "-s" | "-n" | "--signal") {
            skip_value = true;
            first = false;
            continue;
        }
        if options && first && a.starts_with('-') && a.len() > 1 {
            // The signal (`-9`, `-KILL`, `-SIGTERM`).
            first = false;
            continue;
        }
        first = false;
        if options && a.starts_with('-') && a.parse::<i64>().is_err() {
            // Another option (`-q value` of some kills): its value cannot be told apart.
            continue;
        }
        targets.push(*a);
    }
    if targets.is_empty() {
        // Nothing to signal (an error), or the targets come from elsewhere (`xargs kill`).
        return Some(None);
    }
    for t in targets {
        if t.starts_with('%') {
            // A job of the agent's own shell: none of toolgate's processes.
            continue;
        }
        let Ok(n) = t.parse::<i64>() else {
            return Some(None);
        };
        match n {
            n if n > 0 => {
                if let Some(p) = procs.iter().find(|p| p.pid == n) {
                    return Some(Some(format!("pid {n} is toolgate (`{}`)", p.comm)));
                }
            }
            -1 | 0 => return Some(None),
            n => {
                if let Some(p) = procs.iter().find(|p| p.pgid == -n) {
                    return Some(Some(format!(
                        "process group {} holds toolgate's pid {}",
                        -n, p.pid
                    )));
                }
            }
        }
    }
    None
}

/// `pkill PATTERN`: matched against each toolgate process's name (or, with `-f`, its
/// command line), as pkill matches.
fn pkill_targets(args: &[&str], procs: &[Proc]) -> Option<Option<String>> {
    const VALUED: &[&str] = &[
        "-u",
        "-U",
        "-g",
        "-G",
        "-P",
        "-s",
        "-t",
        "-F",
        "-q",
        "--signal",
        "--ns",
        "--nslist",
        "--euid",
        "--uid",
        "--group",
        "--pgroup",
        "--parent",
        "--session",
        "--terminal",
        "--pidfile",
        "-c",
        "--cgroup",
    ];
    let mut full = false;
    let mut exact = false;
    let mut icase = false;
    let (options, patterns) = options_and_operands(args, VALUED);
    for a in options {
        if a == "--full" {
            full = true;
        } else if a == "--exact" {
            exact = true;
        } else if a == "--ignore-case" {
            icase = true;
        } else if !a.starts_with("--") {
            let flags = a.trim_start_matches('-');
            full |= flags.contains('f');
            exact |= flags.contains('x');
            icase |= flags.contains('i');
        }
    }
    if patterns.is_empty() {
        // Selected by user, group, parent, …: toolgate's processes may be among them.
        return Some(None);
    }
    for pattern in patterns {
        let body = if exact {
            format!("^(?:{pattern})$")
        } else {
            pattern.to_owned()
        };
        let Ok(re) = regex::RegexBuilder::new(&body)
            .case_insensitive(icase)
            .size_limit(1 << 20)
            .build()
        else {
            return Some(None);
        };
        for p in procs {
            let subject = if full { &p.cmdline } else { &p.comm };
            if re.is_match(subject) {
                return Some(Some(format!(
                    "`{pattern}` matches toolgate's pid {}",
                    p.pid
                )));
            }
        }
    }
    None
}

/// The options of `args` (the values of those in `valued`, which take one, left out) and its
/// operands; `--` ends the options.
fn options_and_operands<'a>(args: &[&'a str], valued: &[&str]) -> (Vec<&'a str>, Vec<&'a str>) {
    let mut options = Vec::new();
    let mut operands = Vec::new();
    let mut in_options = true;
    let mut words = args.iter();
    while let Some(a) = words.next() {
        if in_options && *a == "--" {
            in_options = false;
        } else if in_options && a.starts_with('-') && a.len() > 1 {
            if valued.contains(a) {
                words.next();
            } else {
                options.push(*a);
            }
        } else {
            operands.push(*a);
        }
    }
    (options, operands)
}

/// `killall NAME`: a toolgate process's name or executable's name (`-r`: a regex).
fn killall_targets(args: &[&str], procs: &[Proc]) -> Option<Option<String>> {
    const VALUED: &[&str] = &[
        "-s",
        "--signal",
        "-u",
        "--user",
        "-o",
        "--older-than",
        "-y",
        "--younger-than",
        "-n",
        "--ns",
        "-Z",
        "--context",
    ];
    let mut regex = false;
    let mut icase = false;
    let (options, names) = options_and_operands(args, VALUED);
    for a in options {
        if a == "--regexp" {
            regex = true;
        } else if a == "--ignore-case" {
            icase = true;
        } else if !a.starts_with("--") {
            let flags = a.trim_start_matches('-');
            regex |= flags.contains('r');
            icase |= flags.contains('I');
        }
    }
    if names.is_empty() {
        return Some(None);
    }
    for name in names {
        let base = name.rsplit('/').next().unwrap_or(name);
        for p in procs {
            let hit = if regex {
                match regex::RegexBuilder::new(name)
                    .case_insensitive(icase)
                    .size_limit(1 << 20)
                    .build()
                {
                    Ok(re) => re.is_match(&p.comm) || re.is_match(&p.exe_name),
                    Err(_) => return Some(None),
                }
            } else if icase {
                base.eq_ignore_ascii_case(&p.comm) || base.eq_ignore_ascii_case(&p.exe_name)
            } else {
                base == p.comm || base == p.exe_name
            };
            if hit {
                return Some(Some(format!("`{name}` names toolgate's pid {}", p.pid)));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn procs() -> Vec<Proc> {
        vec![Proc {
            pid: 4242,
            pgid: 4240,
            comm: "toolgate".to_owned(),
            cmdline: "/opt/bin/toolgate broker --daemon".to_owned(),
            exe_name: "toolgate".to_owned(),
        }]
    }

    #[test]
    fn kill_targets_are_read_as_kill_reads_them() {
        let p = procs();
        let hit = |args: &[&str]| kill_targets(args, &p);
        assert!(matches!(hit(&["4242"]), Some(Some(_))));
        assert!(matches!(hit(&["-9", "4242"]), Some(Some(_))));
        assert!(matches!(hit(&["-s", "KILL", "4242"]), Some(Some(_))));
        assert!(matches!(hit(&["--", "-4240"]), Some(Some(_))));
        assert!(matches!(hit(&["-9", "-1"]), Some(None)));
        assert!(matches!(hit(&["0"]), Some(None)));
        assert!(matches!(hit(&["pids"]), Some(None)));
        assert!(matches!(hit(&[]), Some(None)));
        assert_eq!(hit(&["4243"]), None);
        assert_eq!(hit(&["-9", "-4241"]), None);
        assert_eq!(hit(&["-l"]), None);
        assert_eq!(hit(&["%1"]), None);
    }

    #[test]
    fn pkill_and_killall_patterns_match_names_and_command_lines() {
        let p = procs();
        assert!(matches!(pkill_targets(&["toolg"], &p), Some(Some(_))));
        assert!(matches!(pkill_targets(&["-9", "^tool"], &p), Some(Some(_))));
        assert_eq!(pkill_targets(&["broker"], &p), None);
        assert!(matches!(
            pkill_targets(&["-f", "broker"], &p),
            Some(Some(_))
        ));
        assert!(matches!(pkill_targets(&["-u", "me"], &p), Some(None)));
        assert!(matches!(pkill_targets(&["("], &p), Some(None)));
        assert_eq!(pkill_targets(&["-x", "toolg"], &p), None);
        assert!(matches!(killall_targets(&["toolgate"], &p), Some(Some(_))));
        assert!(matches!(
            killall_targets(&["-s", "KILL", "/x/toolgate"], &p),
            Some(Some(_))
        ));
        assert_eq!(killall_targets(&["node"], &p), None);
        assert!(matches!(
            killall_targets(&["-r", "tool.*"], &p),
            Some(Some(_))
        ));
    }

    #[test]
    fn a_copy_of_an_executable_is_found_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join("ours");
        std::fs::write(&ours, b"#!/bin/sh\necho toolgate\n").unwrap();
        let m = std::fs::metadata(&ours).unwrap();
        let exes = Exes {
            names: vec!["toolgate".to_owned()],
            ids: vec![(m.dev(), m.ino())],
            files: vec![(ours.clone(), m.len())],
        };
        let copy = dir.path().join("x");
        std::fs::copy(&ours, &copy).unwrap();
        let other = dir.path().join("y");
        std::fs::write(&other, b"#!/bin/sh\necho toolgatf\n").unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&ours, &link).unwrap();
        assert!(exes.is_toolgate_file(&ours));
        assert!(exes.is_toolgate_file(&copy));
        assert!(exes.is_toolgate_file(&link));
        assert!(!exes.is_toolgate_file(&other));
        let cwd = dir.path().to_str().unwrap();
        let mut part = Part::new(Operation::ShellExec);
        part.executable = Some("x".to_owned());
        part.argv = Some(vec!["./x".to_owned(), "claude-code".to_owned()]);
        assert!(runs_toolgate(&part, cwd, &exes).is_some());
        part.argv = Some(vec!["./y".to_owned()]);
        part.executable = Some("y".to_owned());
        assert!(runs_toolgate(&part, cwd, &exes).is_none());
        part.argv = Some(vec!["cp".to_owned(), "ours".to_owned(), "z".to_owned()]);
        part.executable = Some("cp".to_owned());
        assert!(runs_toolgate(&part, cwd, &exes).is_some());
        part.executable = Some("toolgate".to_owned());
        part.argv = None;
        assert!(runs_toolgate(&part, cwd, &exes).is_some());
    }
}
