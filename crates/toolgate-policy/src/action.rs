//! The normalised form of a tool call: an [`Action`] made of one or more [`Part`]s.
//!
//! Normalisation (see `normalize`) turns a raw MCP `tools/call` into an action; rules and
//! contracts are evaluated against actions, never against raw arguments.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A semantic operation. Anything the adapters cannot prove is `unknown`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[schemars(inline)]
pub enum Operation {
    #[serde(rename = "fs.read")]
    FsRead,
    #[serde(rename = "fs.write")]
    FsWrite,
    #[serde(rename = "fs.delete")]
    FsDelete,
    #[serde(rename = "shell.exec")]
    ShellExec,
    #[serde(rename = "git.read")]
    GitRead,
    #[serde(rename = "git.write")]
    GitWrite,
    #[serde(rename = "git.remote")]
    GitRemote,
    #[serde(rename = "net.request")]
    NetRequest,
    #[serde(rename = "unknown")]
    Unknown,
}

impl Operation {
    /// Every operation, in documentation order.
    pub const ALL: [Operation; 9] = [
        Operation::FsRead,
        Operation::FsWrite,
        Operation::FsDelete,
        Operation::ShellExec,
        Operation::GitRead,
        Operation::GitWrite,
        Operation::GitRemote,
        Operation::NetRequest,
        Operation::Unknown,
    ];

    /// The name used in policy files, e.g. `fs.read`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::FsRead => "fs.read",
            Operation::FsWrite => "fs.write",
            Operation::FsDelete => "fs.delete",
            Operation::ShellExec => "shell.exec",
            Operation::GitRead => "git.read",
            Operation::GitWrite => "git.write",
            Operation::GitRemote => "git.remote",
            Operation::NetRequest => "net.request",
            Operation::Unknown => "unknown",
        }
    }

    /// True for operations whose resources are filesystem paths.
    pub fn is_fs(self) -> bool {
        matches!(
            self,
            Operation::FsRead | Operation::FsWrite | Operation::FsDelete
        )
    }

    /// True for git operations.
    pub fn is_git(self) -> bool {
        matches!(
            self,
            Operation::GitRead | Operation::GitWrite | Operation::GitRemote
        )
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for an operation name that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown operation `{0}`")]
pub struct UnknownOperation(pub String);

impl FromStr for Operation {
    type Err = UnknownOperation;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Operation::ALL
            .into_iter()
            .find(|op| op.as_str() == s)
            .ok_or_else(|| UnknownOperation(s.to_owned()))
    }
}

/// The network facts of a `net.request` part. Hosts come from a real URL parser.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Network {
    /// The normalised URL (as serialised by the `url` crate).
    pub url: String,
    /// Lower-case scheme, e.g. `https`.
    pub scheme: String,
    /// Lower-case ASCII host (IDN as punycode, IPv4 in dotted form, no trailing dot, no userinfo).
    pub host: String,
    /// The explicit or default port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Upper-case HTTP method; `GET` when the call does not say.
    pub method: String,
}

/// One resource-bearing piece of an action. The verdict of an action is its most
/// restrictive part's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Part {
    pub operation: Operation,
    /// Canonical absolute paths (symlinks resolved) for fs and git parts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// The exact argv of a simple command; absent for a compound or unparseable one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// The executable's basename (`/bin/rm` is `rm`), after looking through env prefixes
    /// and wrappers such as `sudo`, `env` or `sh -c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// True when this part could not be understood exactly (a compound shell string, a
    /// shell segment, an unparseable value). Allow rules never match an opaque part; deny
    /// rules still see its executable and resources.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub opaque: bool,
    /// True when the part hides what it touches: a command substitution, `eval`, a variable
    /// in the command position, quoting that cannot be decoded, or a path that cannot be
    /// resolved (NUL, too long, another process's `/proc` links, …). Always opaque too. It
    /// never takes `default: allow` (it asks), and every deny rule whose other constraints
    /// hold treats its resources as matching (they could be anything).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
    /// For a part that reaches into directories (a recursive search, copy or delete, a
    /// `Grep`/`Glob` of a directory): its resources are directories, and it touches what
    /// lies beneath them, narrowed by [`Beneath::filters`]. Deny rules meet every path
    /// their pattern can match under such a directory; allow rules must cover the whole tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beneath: Option<Beneath>,
}

/// What a recursive part touches beneath its directories (see [`Part::beneath`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Beneath {
    /// Globs on file names (`*.rs`, `*.{js,ts}`) a file must match to be touched; empty:
    /// every file. A filter narrows the part only where it provably excludes a pattern.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<String>,
}

impl Part {
    /// A part with just an operation.
    pub fn new(operation: Operation) -> Self {
        Part {
            operation,
            resources: Vec::new(),
            argv: None,
            executable: None,
            network: None,
            opaque: false,
            hidden: false,
            beneath: None,
        }
    }

    /// An opaque part that hides what it touches (see [`Part::hidden`]).
    pub fn hidden(operation: Operation) -> Self {
        let mut p = Part::new(operation);
        p.opaque = true;
        p.hidden = true;
        p
    }
}

/// A normalised tool call.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Action {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    pub tool: String,
    pub parts: Vec<Part>,
}
