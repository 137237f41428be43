//! One `init` or `unwrap` run: find the files, plan the edits, show the diff,
//! confirm, write.
#![allow(clippy::print_stdout, reason = "this command's output is its stdout")]

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};

use toolgate_clients::discovery::{self, Client, Env, Location};
use toolgate_clients::document::{self, EntryReport, MapSpec, Outcome, WrapSettings};
use toolgate_clients::hooks::{self, HookClient, HookOutcome, HookScope, HookSettings};
use toolgate_clients::remote::Dialect;
use toolgate_clients::write::{self, ReadFile};

/// Which files and servers to work on, and how to confirm; shared by `init` and `unwrap`.
#[derive(Debug, Clone, clap::Args)]
pub struct Selection {
    /// The client whose configuration to edit [default: every client found]
    #[arg(long, value_enum, conflicts_with = "config")]
    pub client: Option<Client>,
    /// Edit this configuration file instead of looking for the clients' ones
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Only this server (repeatable) [default: every server]
    #[arg(long = "server", value_name = "NAME")]
    pub servers: Vec<String>,
    /// Show the changes and exit without writing anything
    #[arg(long)]
    pub dry_run: bool,
    /// Apply the changes without asking
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Toolgate's hooks in the client's settings (`toolgate hook <client>` for every hook
    /// event), not its MCP servers: `init` installs them, `unwrap` removes them
    #[arg(long, requires = "client", conflicts_with_all = ["config", "servers"])]
    pub hooks: bool,
    /// With `--hooks`: the user's settings or the project's (the current directory)
    #[arg(long, value_enum, requires = "hooks", default_value = "user")]
    pub scope: HookScope,
}

/// What to do to the selected servers.
#[derive(Debug, Clone)]
pub enum Action {
    /// Wrap them with toolgate.
    Init(WrapSettings),
    /// Restore them; `keep_backup`: keep the `.toolgate.bak` a restore leaves (by default
    /// removed once the restored file reads back as written).
    Unwrap { keep_backup: bool },
}

struct Plan {
    location: Location,
    file: ReadFile,
    new_text: String,
    entries: Vec<EntryReport>,
}

impl Plan {
    fn changed(&self) -> bool {
        self.new_text != self.file.text
    }
}

fn locations(selection: &Selection) -> anyhow::Result<Vec<Location>> {
    if let Some(path) = &selection.config {
        if !path.is_file() {
            bail!("`{}` is not a file", path.display());
        }
        return Ok(vec![Location {
            client: None,
            scope: "file",
            path: path.clone(),
            maps: MapSpec::Auto,
        }]);
    }
    let env = Env::from_process()?;
    let clients: Vec<Client> = match selection.client {
        Some(client) => vec![client],
        None => Client::ALL.to_vec(),
    };
    let found = discovery::discover(&clients, &env);
    if found.is_empty() {
        let looked: Vec<String> = clients
            .iter()
            .flat_map(|&c| discovery::locations(c, &env))
            .map(|l| format!("  {}", l.path.display()))
            .collect();
        bail!(
            "no MCP client configuration found; looked in:\n{}\nhelp: pass the file with `--config PATH`",
            looked.join("\n")
        );
    }
    Ok(found)
}

/// The project directory a configuration file belongs to: the current directory for a
/// client's project configuration; for `--config`, the directory holding `.mcp.json`, or
/// `.cursor/` / `.vscode/` holding `mcp.json`. `None`: a user configuration.
fn project_of(location: &Location) -> Option<PathBuf> {
    match location.scope {
        "project" => location.path.parent().and_then(|dir| {
            if [".cursor", ".vscode", ".qwen", ".gemini", ".codex"]
                .iter()
                .any(|d| dir.ends_with(d))
            {
                dir.parent().map(PathBuf::from)
            } else {
                Some(dir.to_path_buf())
            }
        }),
        "file" => {
            let name = location.path.file_name()?;
            let dir = location.path.parent()?;
            let dir = if dir.as_os_str().is_empty() {
                std::path::Path::new(".")
            } else {
                dir
            };
            if name == ".mcp.json" {
                Some(dir.to_path_buf())
            } else if name == "mcp.json" && (dir.ends_with(".cursor") || dir.ends_with(".vscode")) {
                dir.parent().map(PathBuf::from)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// A directory `init` may write as a workspace: it exists, and it is neither `$HOME` (nor a
/// directory above it) nor `/` (a server or hook whose `${workspace}` is the home directory may read every
/// dotfile an allow rule for the workspace covers). Its canonical path.
pub fn check_workspace(dir: &std::path::Path, origin: &str) -> anyhow::Result<String> {
    let real = match dir.canonicalize() {
        Ok(r) => r,
        Err(e) => bail!(
            "the workspace `{}` ({origin}) cannot be used: {e}\nhelp: name an existing project directory with `--workspace DIR`",
            dir.display()
        ),
    };
    if !real.is_dir() {
        bail!(
            "the workspace `{}` ({origin}) is not a directory\nhelp: name an existing project directory with `--workspace DIR`",
            dir.display()
        );
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .map(|h| h.canonicalize().unwrap_or(h));
    let what = if real == std::path::Path::new("/") {
        Some("the root directory `/`")
    } else if home.as_deref() == Some(real.as_path()) {
        Some("your home directory")
    } else if home.as_deref().is_some_and(|h| h.starts_with(&real)) {
        Some("a directory that holds your home directory")
    } else {
        None
    };
    if let Some(what) = what {
        bail!(
            "the workspace `{}` ({origin}) is {what}: the policy's `${{workspace}}` would cover every file there, your dotfiles and credentials included\nhelp: run `toolgate init` in the project directory, or name it with `--workspace DIR`",
            dir.display()
        );
    }
    real.into_os_string()
        .into_string()
        .map_err(|p| anyhow::anyhow!("`{}` is not valid UTF-8", PathBuf::from(p).display()))
}

fn plan(location: Location, selection: &Selection, action: &Action) -> anyhow::Result<Plan> {
    let file = write::read(&location.path)?;
    let select = (!selection.servers.is_empty()).then_some(selection.servers.as_slice());
    let shown = location.path.display().to_string();
    let edited = match action {
        Action::Init(settings) => {
            let workspace = match project_of(&location) {
                Some(project) => Some(check_workspace(
                    &project,
                    &format!("the project of `{shown}`"),
                )?),
                None => settings.workspace.clone(),
            };
            // Codex starts its servers without the user's environment: the proxy is told
            // where the broker is, as this process (and the client's hooks) find it.
            let broker_dir = (location.client == Some(Client::Codex))
                .then(|| toolgate_broker::Layout::for_user().dir)
                .and_then(|d| d.into_os_string().into_string().ok());
            let settings = WrapSettings {
                dialect: dialect_of(&location),
                workspace,
                broker_dir,
                ..settings.clone()
            };
            document::wrap(&file.text, &location.maps, select, &settings)
        }
        Action::Unwrap { .. } => document::unwrap(&file.text, &location.maps, select),
    }
    .with_context(|| format!("in `{shown}`"))?;
    // A project's own map (`projects.<dir>.mcpServers`) names its workspace: never `$HOME`
    // or `/` either.
    // (One that no longer exists is written as it is: `doctor` reports it.)
    for entry in &edited.entries {
        if let Some(w) = &entry.workspace
            && std::path::Path::new(w).exists()
        {
            check_workspace(
                std::path::Path::new(w),
                &format!("server `{}` in {} of `{shown}`", entry.name, entry.map),
            )?;
        }
    }
    Ok(Plan {
        location,
        file,
        new_text: edited.text,
        entries: edited.entries,
    })
}

/// How the client reading `location` expands `${…}` in `args`: by the client, or for
/// `--config`, by the file's name (`.mcp.json`, `.claude.json` are Claude Code's).
pub fn dialect_of(location: &Location) -> Dialect {
    let claude_code = match location.client {
        Some(client) => client == Client::ClaudeCode,
        None => location
            .path
            .file_name()
            .is_some_and(|n| n == ".mcp.json" || n == ".claude.json"),
    };
    if claude_code {
        Dialect::ClaudeCode
    } else {
        Dialect::Other
    }
}

fn describe(outcome: &Outcome) -> (&'static str, Option<&str>) {
    match outcome {
        Outcome::Wrapped => ("wrap", None),
        Outcome::Restored => ("restore", None),
        Outcome::AlreadyWrapped => ("keep", Some("already wrapped")),
        Outcome::NotWrapped => ("keep", Some("not wrapped by toolgate")),
        Outcome::Skipped(reason) => ("skip", Some(reason.as_str())),
    }
}

fn print_report(plan: &Plan) {
    let origin = match plan.location.client {
        Some(client) => format!("{}, {}", client.name(), plan.location.scope),
        None => plan.location.scope.to_owned(),
    };
    outln!("{} ({origin}):", plan.location.path.display());
    if plan.entries.is_empty() {
        outln!("  no servers");
    }
    for entry in &plan.entries {
        let (verb, reason) = describe(&entry.outcome);
        let reason = reason.map(|r| format!(": {r}")).unwrap_or_default();
        outln!("  {verb:<8} {} in {}{reason}", entry.name, entry.map);
    }
}

fn print_diff(plan: &Plan) {
    let shown = plan.location.path.display().to_string();
    let diff = similar::TextDiff::from_lines(plan.file.text.as_str(), plan.new_text.as_str());
    out!(
        "{}",
        diff.unified_diff().context_radius(3).header(&shown, &shown)
    );
}

fn confirm() -> anyhow::Result<bool> {
    out!("apply these changes? [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    let answer = answer.trim().to_ascii_lowercase();
    Ok(answer == "y" || answer == "yes")
}

/// Runs `init` or `unwrap`.
pub fn run(selection: &Selection, action: &Action) -> anyhow::Result<ExitCode> {
    if selection.hooks {
        return run_hooks(selection, action);
    }
    let plans = locations(selection)?
        .into_iter()
        .map(|location| plan(location, selection, action))
        .collect::<anyhow::Result<Vec<Plan>>>()?;

    let unknown: Vec<&String> = selection
        .servers
        .iter()
        .filter(|name| {
            !plans
                .iter()
                .any(|p| p.entries.iter().any(|e| &e.name == *name))
        })
        .collect();
    if !unknown.is_empty() {
        let names: Vec<String> = unknown.iter().map(|n| format!("`{n}`")).collect();
        let files: Vec<String> = plans
            .iter()
            .map(|p| format!("`{}`", p.location.path.display()))
            .collect();
        bail!(
            "no server named {} in {}",
            names.join(", "),
            files.join(", ")
        );
    }

    for plan in &plans {
        print_report(plan);
    }
    let changed: Vec<&Plan> = plans.iter().filter(|p| p.changed()).collect();
    if changed.is_empty() {
        outln!("nothing to change");
        return Ok(ExitCode::SUCCESS);
    }
    outln!();
    for plan in &changed {
        print_diff(plan);
    }
    if let Some(code) = confirmed(selection)? {
        return Ok(code);
    }
    for plan in &changed {
        write::replace(&plan.file, &plan.new_text)?;
        wrote(action, &plan.location.path, &plan.file, &plan.new_text)?;
    }
    if matches!(action, Action::Init(_)) {
        outln!("restart the client (or reload its MCP servers) to use toolgate");
    }
    Ok(ExitCode::SUCCESS)
}

/// After the diff: `Some(code)` to stop without writing (dry run, no terminal, declined).
fn confirmed(selection: &Selection) -> anyhow::Result<Option<ExitCode>> {
    if selection.dry_run {
        outln!("dry run: nothing was written");
        return Ok(Some(ExitCode::SUCCESS));
    }
    if !selection.yes {
        if !std::io::stdin().is_terminal() {
            eprintln!(
                "toolgate: not applying: stdin is not a terminal, so nothing was changed\nhelp: review the diff above, then run again with `--yes` to apply it"
            );
            return Ok(Some(ExitCode::from(1)));
        }
        if !confirm()? {
            outln!("nothing was changed");
            return Ok(Some(ExitCode::from(1)));
        }
    }
    Ok(None)
}

/// What the hook entries of `init` run: the hook executable, the policy and the workspace
/// (the project for project hooks; `--workspace` for the user's, which run for every
/// project).
fn hook_settings(
    selection: &Selection,
    env: &Env,
    w: &WrapSettings,
    path: &std::path::Path,
) -> anyhow::Result<HookSettings> {
    let workspace = match selection.scope {
        HookScope::Project => Some(check_workspace(
            &env.project,
            "the project of the hooks, the current directory",
        )?),
        HookScope::User => match &w.workspace {
            Some(w) => Some(w.clone()),
            None => bail!(
                "in `{}`: the user's hooks run for every project, so toolgate cannot tell their workspace\nhelp: name the directory the agent works in with `--workspace DIR`, or install the hooks in the project with `--scope project`",
                path.display()
            ),
        },
    };
    Ok(HookSettings {
        exe: hooks::hook_exe(&w.exe),
        policy: w.policy.clone(),
        workspace,
    })
}

/// `init --hooks` / `unwrap --hooks` for OpenCode: a plugin file of toolgate's own.
fn run_opencode(selection: &Selection, action: &Action) -> anyhow::Result<ExitCode> {
    use toolgate_clients::opencode;
    let env = Env::from_process()?;
    let path = opencode::path(selection.scope, &env);
    let existing = if path.exists() {
        Some(write::read(&path)?)
    } else {
        None
    };
    if let Some(f) = &existing
        && !opencode::is_ours(&f.text)
    {
        bail!(
            "`{}` is not the plugin toolgate writes (its first line is not toolgate's mark): left alone\nhelp: move your own plugin to another file name",
            path.display()
        );
    }
    let new_text = match action {
        Action::Init(w) => Some(opencode::plugin(&hook_settings(selection, &env, w, &path)?)),
        Action::Unwrap { .. } => None,
    };
    let old_text = existing.as_ref().map_or("", |f| f.text.as_str());
    outln!(
        "{} (opencode {} plugin){}:",
        path.display(),
        selection.scope.name(),
        match (&existing, action) {
            (Some(_), _) => "",
            (None, Action::Init(_)) => ", new file",
            (None, Action::Unwrap { .. }) => ", no such file",
        }
    );
    if new_text.as_deref() == existing.as_ref().map(|f| f.text.as_str()) {
        outln!("nothing to change");
        return Ok(ExitCode::SUCCESS);
    }
    let shown = path.display().to_string();
    let new_shown = new_text.clone().unwrap_or_default();
    let diff = similar::TextDiff::from_lines(old_text, new_shown.as_str());
    out!(
        "{}",
        diff.unified_diff().context_radius(3).header(&shown, &shown)
    );
    if let Some(code) = confirmed(selection)? {
        return Ok(code);
    }
    match (&new_text, &existing) {
        (Some(text), Some(f)) => {
            write::replace(f, text)?;
            outln!("wrote {}", path.display());
        }
        (Some(text), None) => {
            write::create(&path, text)?;
            outln!("wrote {} (new file)", path.display());
        }
        (None, Some(_)) => {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove `{}`", path.display()))?;
            outln!("removed {}", path.display());
        }
        (None, None) => {}
    }
    if new_text.is_some() {
        outln!(
            "OpenCode loads the plugin, which runs `toolgate hook opencode` for every tool call, from its next session on"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `init --hooks` / `unwrap --hooks`: one settings file of one client.
fn run_hooks(selection: &Selection, action: &Action) -> anyhow::Result<ExitCode> {
    if selection.client == Some(Client::OpenCode) {
        return run_opencode(selection, action);
    }
    if selection.client == Some(Client::Cline) {
        bail!(
            "Cline's hooks cannot block a call: Cline runs them, then carries out the call whatever they answer (cline 3.0.65), so toolgate installs none\nhelp: `toolgate init --client cline` wraps its MCP servers; its own tools (`execute_command`, `read_file`, `write_to_file`, `replace_in_file`, `browser_action`, `web_fetch`) stay unguarded"
        );
    }
    if selection.client == Some(Client::Vscode) {
        bail!(
            "VS Code's agent runs the hooks of Claude Code's settings files and of `.github/hooks/`: install those\nhelp: run `toolgate init --client claude-code --hooks` (or `--client copilot-cli --hooks`)"
        );
    }
    let Some(client) = selection.client.and_then(HookClient::of) else {
        bail!(
            "`--hooks` works with `--client` claude-code, cursor, qwen-code, gemini-cli, copilot-cli, codex, opencode or windsurf\nhelp: the other clients have no hooks toolgate installs; `toolgate init` wraps their MCP servers"
        );
    };
    let env = Env::from_process()?;
    let path = client.path(selection.scope, &env);
    let existing = if path.exists() {
        Some(write::read(&path)?)
    } else {
        None
    };
    let (new_text, events) = match (action, &existing) {
        (Action::Init(w), file) => {
            let settings = hook_settings(selection, &env, w, &path)?;
            match file {
                Some(f) => {
                    let edit = hooks::install(&f.text, client, &settings)
                        .with_context(|| format!("in `{}`", path.display()))?;
                    (edit.text, edit.events)
                }
                None => (
                    hooks::new_file(client, &settings),
                    client
                        .events()
                        .iter()
                        .map(|e| (*e, HookOutcome::Added))
                        .collect(),
                ),
            }
        }
        (Action::Unwrap { .. }, Some(f)) => {
            let edit = hooks::remove(&f.text, client)
                .with_context(|| format!("in `{}`", path.display()))?;
            (edit.text, edit.events)
        }
        (Action::Unwrap { .. }, None) => (
            String::new(),
            client
                .events()
                .iter()
                .map(|e| (*e, HookOutcome::Missing))
                .collect(),
        ),
    };
    // Copilot CLI's `toolgate.json` is a file of toolgate's own: what `unwrap` leaves of it
    // (`{"version": 1}`, or nothing at all) goes with it.
    let own_file_left_empty = client == HookClient::CopilotCli
        && matches!(action, Action::Unwrap { .. })
        && existing.is_some()
        && serde_json::from_str::<serde_json::Value>(&new_text)
            .ok()
            .and_then(|v| v.as_object().map(|o| o.keys().all(|k| k == "version")))
            .unwrap_or(false);
    let new_text = if own_file_left_empty {
        String::new()
    } else {
        new_text
    };
    let old_text = existing.as_ref().map_or("", |f| f.text.as_str());
    outln!(
        "{} ({} {} hooks){}:",
        path.display(),
        client.name(),
        selection.scope.name(),
        match (&existing, action) {
            (Some(_), _) => "",
            (None, Action::Init(_)) => ", new file",
            (None, Action::Unwrap { .. }) => ", no such file",
        }
    );
    for (event, outcome) in &events {
        let verb = match outcome {
            HookOutcome::Added => "add",
            HookOutcome::Updated => "update",
            HookOutcome::Kept => "keep",
            HookOutcome::Removed => "remove",
            HookOutcome::Missing => "absent",
        };
        outln!("  {verb:<8} {event}");
    }
    let changed = match &existing {
        Some(f) => new_text != f.text,
        None => matches!(action, Action::Init(_)),
    };
    let trusts = client == HookClient::Codex && matches!(action, Action::Init(_));
    if !changed {
        outln!("nothing to change");
        if trusts && !selection.dry_run {
            trust_codex_hooks(&env.project);
        }
        return Ok(ExitCode::SUCCESS);
    }
    outln!();
    let shown = path.display().to_string();
    let diff = similar::TextDiff::from_lines(old_text, new_text.as_str());
    out!(
        "{}",
        diff.unified_diff().context_radius(3).header(&shown, &shown)
    );
    if trusts {
        outln!(
            "then: trust toolgate's hooks in Codex, which runs a hook only once trusted (as Codex's `/hooks` review does, through `codex app-server`)"
        );
    }
    if let Some(code) = confirmed(selection)? {
        return Ok(code);
    }
    match &existing {
        Some(_) if own_file_left_empty => {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove `{}`", path.display()))?;
            outln!(
                "removed {} (toolgate's own file, nothing else in it)",
                path.display()
            );
        }
        Some(f) => {
            write::replace(f, &new_text)?;
            wrote(action, &path, f, &new_text)?;
        }
        None => {
            write::create(&path, &new_text)?;
            outln!("wrote {} (new file)", path.display());
        }
    }
    if trusts {
        trust_codex_hooks(&env.project);
    }
    if matches!(action, Action::Init(_)) {
        outln!(
            "the client runs `toolgate hook {}` for every event from its next session on",
            client.name()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Records Codex's trust in toolgate's hooks for `project` (Codex runs untrusted hooks not
/// at all, and says nothing), or says what to do when it cannot.
fn trust_codex_hooks(project: &std::path::Path) {
    use toolgate_clients::codex_trust;
    let ours = |c: &str| hooks::is_our_command(c, HookClient::Codex);
    let Some(codex) = codex_trust::find_codex() else {
        eprintln!(
            "warning: Codex runs a hook only once you trust it, and no `codex` is on PATH to record that\n  help: start Codex and trust toolgate's hooks in its `/hooks` review"
        );
        return;
    };
    match codex_trust::trust(&codex, project, ours) {
        Ok(n) => match codex_trust::list(&codex, project) {
            Ok(listed) if !listed.iter().any(|h| ours(&h.command)) => eprintln!(
                "warning: Codex does not load these hooks here: it reads a project's `.codex/` only once you trust the project\n  help: start Codex in `{}` and trust it, then run this command again",
                project.display()
            ),
            _ if n > 0 => outln!("trusted toolgate's {n} hooks in Codex"),
            _ => outln!("Codex already trusts toolgate's hooks"),
        },
        Err(e) => eprintln!(
            "warning: cannot record Codex's trust in toolgate's hooks: {e}\n  help: start Codex and trust them in its `/hooks` review"
        ),
    }
}

/// Says what was written to `path` (`file` as it was read, now `new_text`), and after a
/// restore removes the backup once the file reads back as written, unless it is to be kept:
/// a restore leaves nothing of toolgate behind (a backup may hold a credential `init` moved).
fn wrote(
    action: &Action,
    path: &std::path::Path,
    file: &ReadFile,
    new_text: &str,
) -> anyhow::Result<()> {
    let backup = write::backup_path(&file.real);
    match action {
        Action::Unwrap { keep_backup: false } => {
            if write::remove_backup_if_written(file, new_text)? {
                outln!("wrote {} (its backup removed)", path.display());
            } else {
                outln!(
                    "wrote {} (backup kept: the file does not read back as written: {})",
                    path.display(),
                    backup.display()
                );
            }
        }
        _ => outln!("wrote {} (backup: {})", path.display(), backup.display()),
    }
    Ok(())
}
