//! Where each MCP client keeps its server configuration.
//!
//! Locations and key names, as documented by the clients (checked November 2026):
//! - Claude Desktop: `claude_desktop_config.json`, key `mcpServers`, in
//!   `~/Library/Application Support/Claude/` on macOS and `~/.config/Claude/` on
//!   Linux (modelcontextprotocol.io quickstart; Claude Desktop "Edit Config").
//! - Claude Code (code.claude.com/docs/en/mcp, "MCP installation scopes"): project
//!   scope in `.mcp.json` at the project root; user scope in `~/.claude.json`
//!   under `mcpServers`; local scope in `~/.claude.json` under
//!   `projects.<project path>.mcpServers`. `CLAUDE_CONFIG_DIR` moves `.claude.json`.
//! - Cursor (cursor.com/docs/mcp): `.cursor/mcp.json` in the project and
//!   `~/.cursor/mcp.json` globally, key `mcpServers`.
//! - VS Code (code.visualstudio.com/docs/copilot/reference/mcp-configuration):
//!   `.vscode/mcp.json` in the workspace and `mcp.json` in the user profile
//!   (`~/.config/Code/User/` on Linux, `~/Library/Application Support/Code/User/`
//!   on macOS), key `servers`, with an optional `inputs` array.
//! - Windsurf (docs.windsurf.com/windsurf/cascade/mcp):
//!   `~/.codeium/windsurf/mcp_config.json`, key `mcpServers`; remote entries use
//!   `serverUrl`.
//!
//! On Linux the Electron apps (Claude Desktop, VS Code) honour `XDG_CONFIG_HOME`.

use std::path::{Path, PathBuf};

use super::document::MapSpec;

/// The MCP clients toolgate knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    /// Claude Desktop (`claude_desktop_config.json`).
    ClaudeDesktop,
    /// Claude Code (`.mcp.json`, `~/.claude.json`).
    ClaudeCode,
    /// Cursor (`.cursor/mcp.json`, `~/.cursor/mcp.json`).
    Cursor,
    /// VS Code (`.vscode/mcp.json`, user `mcp.json`).
    Vscode,
    /// Windsurf (`~/.codeium/windsurf/mcp_config.json`).
    Windsurf,
    /// Qwen Code (`.qwen/settings.json`, `~/.qwen/settings.json`).
    QwenCode,
    /// Gemini CLI (`.gemini/settings.json`, `~/.gemini/settings.json`).
    GeminiCli,
    /// GitHub Copilot CLI (`~/.copilot/mcp-config.json`).
    CopilotCli,
    /// Codex (`[mcp_servers.*]` of `~/.codex/config.toml` and a project's
    /// `.codex/config.toml`).
    Codex,
    /// OpenCode (`mcp` of `opencode.json`, `~/.config/opencode/opencode.json`; its hooks
    /// are a plugin).
    #[value(name = "opencode")]
    OpenCode,
    /// Cline (`cline_mcp_settings.json` of the Cline CLI and of its VS Code extension; its
    /// hooks cannot block, so toolgate installs none).
    Cline,
}

impl Client {
    /// Every client, in the order they are searched.
    pub const ALL: [Client; 11] = [
        Client::ClaudeCode,
        Client::ClaudeDesktop,
        Client::Cursor,
        Client::Vscode,
        Client::Windsurf,
        Client::QwenCode,
        Client::GeminiCli,
        Client::CopilotCli,
        Client::Codex,
        Client::OpenCode,
        Client::Cline,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "claude-desktop",
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
            Client::Windsurf => "windsurf",
            Client::QwenCode => "qwen-code",
            Client::GeminiCli => "gemini-cli",
            Client::CopilotCli => "copilot-cli",
            Client::Codex => "codex",
            Client::OpenCode => "opencode",
            Client::Cline => "cline",
        }
    }
}

/// The operating-system conventions to resolve locations with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// macOS.
    MacOs,
    /// Linux and other Unix-likes following XDG.
    Linux,
}

impl Platform {
    /// The platform toolgate runs on.
    pub fn current() -> Self {
        if cfg!(target_os = "macos") {
            Platform::MacOs
        } else {
            Platform::Linux
        }
    }
}

/// The environment locations depend on.
#[derive(Debug, Clone)]
pub struct Env {
    /// `$HOME`.
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME` when set and absolute.
    pub xdg_config_home: Option<PathBuf>,
    /// `$CLAUDE_CONFIG_DIR` when set.
    pub claude_config_dir: Option<PathBuf>,
    /// The project directory (the current directory).
    pub project: PathBuf,
    /// The platform.
    pub platform: Platform,
}

impl Env {
    /// Reads the environment of this process.
    pub fn from_process() -> anyhow::Result<Self> {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .ok_or_else(|| {
                anyhow::anyhow!("`HOME` is not set\nhelp: pass the file with `--config PATH`")
            })?;
        let xdg_config_home = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute());
        let claude_config_dir = std::env::var_os("CLAUDE_CONFIG_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from);
        let project = std::env::current_dir()?;
        Ok(Env {
            home,
            xdg_config_home,
            claude_config_dir,
            project,
            platform: Platform::current(),
        })
    }

    fn config_home(&self) -> PathBuf {
        self.xdg_config_home
            .clone()
            .unwrap_or_else(|| self.home.join(".config"))
    }

    /// The per-user application data directory of an Electron app named `app`.
    fn app_dir(&self, app: &str) -> PathBuf {
        match self.platform {
            Platform::MacOs => self.home.join("Library/Application Support").join(app),
            Platform::Linux => self.config_home().join(app),
        }
    }
}

/// One configuration file a client reads, and where its servers are inside it.
#[derive(Debug, Clone)]
pub struct Location {
    /// The client, when known.
    pub client: Option<Client>,
    /// `project`, `user`, `project+user`, or `file` for `--config`.
    pub scope: &'static str,
    /// The file.
    pub path: PathBuf,
    /// The server maps inside it.
    pub maps: MapSpec,
}

fn servers_at(key: &str) -> MapSpec {
    MapSpec::Paths(vec![vec![key.to_owned()]])
}

/// Every location of `client`, existing or not, project scope first.
pub fn locations(client: Client, env: &Env) -> Vec<Location> {
    let project = &env.project;
    let loc = |scope, path: PathBuf, maps| Location {
        client: Some(client),
        scope,
        path,
        maps,
    };
    match client {
        Client::ClaudeDesktop => vec![loc(
            "user",
            env.app_dir("Claude").join("claude_desktop_config.json"),
            servers_at("mcpServers"),
        )],
        Client::ClaudeCode => {
            let dir = env
                .claude_config_dir
                .clone()
                .unwrap_or_else(|| env.home.clone());
            vec![
                loc(
                    "project",
                    project.join(".mcp.json"),
                    servers_at("mcpServers"),
                ),
                loc(
                    "user+local",
                    dir.join(".claude.json"),
                    MapSpec::Paths(vec![
                        vec!["mcpServers".to_owned()],
                        vec![
                            "projects".to_owned(),
                            project.to_string_lossy().into_owned(),
                            "mcpServers".to_owned(),
                        ],
                    ]),
                ),
            ]
        }
        Client::Cursor => vec![
            loc(
                "project",
                project.join(".cursor/mcp.json"),
                servers_at("mcpServers"),
            ),
            loc(
                "user",
                env.home.join(".cursor/mcp.json"),
                servers_at("mcpServers"),
            ),
        ],
        Client::Vscode => vec![
            loc(
                "project",
                project.join(".vscode/mcp.json"),
                servers_at("servers"),
            ),
            loc(
                "user",
                env.app_dir("Code").join("User/mcp.json"),
                servers_at("servers"),
            ),
        ],
        Client::Windsurf => vec![loc(
            "user",
            env.home.join(".codeium/windsurf/mcp_config.json"),
            servers_at("mcpServers"),
        )],
        Client::QwenCode => vec![
            loc(
                "project",
                project.join(".qwen/settings.json"),
                servers_at("mcpServers"),
            ),
            loc(
                "user",
                env.home.join(".qwen/settings.json"),
                servers_at("mcpServers"),
            ),
        ],
        Client::GeminiCli => vec![
            loc(
                "project",
                project.join(".gemini/settings.json"),
                servers_at("mcpServers"),
            ),
            loc(
                "user",
                env.home.join(".gemini/settings.json"),
                servers_at("mcpServers"),
            ),
        ],
        Client::CopilotCli => vec![loc(
            "user",
            env.home.join(".copilot/mcp-config.json"),
            servers_at("mcpServers"),
        )],
        // Codex keeps its servers in TOML (`[mcp_servers.<name>]`), which `init` does not
        // edit yet.
        Client::Codex => vec![
            loc(
                "project",
                project.join(".codex/config.toml"),
                MapSpec::CodexToml,
            ),
            loc(
                "user",
                env.home.join(".codex/config.toml"),
                MapSpec::CodexToml,
            ),
        ],
        Client::OpenCode => vec![
            loc("project", project.join("opencode.json"), servers_at("mcp")),
            loc("project", project.join("opencode.jsonc"), servers_at("mcp")),
            loc(
                "user",
                env.config_home().join("opencode/opencode.json"),
                servers_at("mcp"),
            ),
        ],
        Client::Cline => vec![
            loc(
                "user",
                env.home
                    .join(".cline/data/settings/cline_mcp_settings.json"),
                servers_at("mcpServers"),
            ),
            loc(
                "user",
                env.app_dir("Code").join(
                    "User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
                ),
                servers_at("mcpServers"),
            ),
        ],
    }
}

/// The existing configuration files of `clients`, without duplicates.
pub fn discover(clients: &[Client], env: &Env) -> Vec<Location> {
    let mut found: Vec<Location> = Vec::new();
    for &client in clients {
        for location in locations(client, env) {
            if !location.path.is_file() {
                continue;
            }
            let duplicate = found.iter().any(|f| same_file(&f.path, &location.path));
            if !duplicate {
                found.push(location);
            }
        }
    }
    found
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(platform: Platform) -> Env {
        Env {
            home: PathBuf::from("/h"),
            xdg_config_home: None,
            claude_config_dir: None,
            project: PathBuf::from("/p"),
            platform,
        }
    }

    #[test]
    fn desktop_paths_per_platform() {
        let mac = locations(Client::ClaudeDesktop, &env(Platform::MacOs));
        assert_eq!(
            mac[0].path,
            PathBuf::from("/h/Library/Application Support/Claude/claude_desktop_config.json")
        );
        let linux = locations(Client::ClaudeDesktop, &env(Platform::Linux));
        assert_eq!(
            linux[0].path,
            PathBuf::from("/h/.config/Claude/claude_desktop_config.json")
        );
        let mut xdg = env(Platform::Linux);
        xdg.xdg_config_home = Some(PathBuf::from("/x"));
        assert_eq!(
            locations(Client::Vscode, &xdg)[1].path,
            PathBuf::from("/x/Code/User/mcp.json")
        );
    }

    #[test]
    fn claude_code_scopes() {
        let l = locations(Client::ClaudeCode, &env(Platform::Linux));
        assert_eq!(l[0].path, PathBuf::from("/p/.mcp.json"));
        assert_eq!(l[1].path, PathBuf::from("/h/.claude.json"));
        assert_eq!(
            l[1].maps,
            MapSpec::Paths(vec![
                vec!["mcpServers".into()],
                vec!["projects".into(), "/p".into(), "mcpServers".into()]
            ])
        );
    }
}
