//! toolgate's self-protection: built-in deny rules for toolgate's own files.
//!
//! A governed agent must not be able to switch toolgate off by editing what runs or
//! configures it: the policy in use, the audit logs, the pin and credential stores, the
//! broker's directory, the client files that run toolgate, toolgate's executables. The
//! binary knows where those are ([`Protected`] entries); the engine compiles each into an
//! ordinary deny rule ([`crate::rules::CompiledRule`], so a part that hides what it touches
//! and a recursive part meet it as they meet any deny rule with `resources`) and evaluates
//! them before, and regardless of, the user's rules: no allow rule opens them.

use crate::action::Operation;
use crate::rules::{CompiledRule, protected_rule};

/// The rule id every built-in protection decides with (in decisions and the audit).
pub const SELF_PROTECTION_RULE: &str = "toolgate-self-protection";

/// What a protected resource is to toolgate (named in the deny reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtectedKind {
    PolicyFile,
    AuditLog,
    PinStore,
    TrustedPolicies,
    CredentialStore,
    BrokerDirectory,
    ClientHooks,
    McpConfig,
    Transcript,
    Executable,
}

impl ProtectedKind {
    /// The words of the deny reason: "… is toolgate's own `label`".
    pub fn label(self) -> &'static str {
        match self {
            ProtectedKind::PolicyFile => "policy file",
            ProtectedKind::AuditLog => "audit log",
            ProtectedKind::PinStore => "pin store",
            ProtectedKind::TrustedPolicies => {
                "list of trusted policies (what `wrap` and `hook` use without --policy)"
            }
            ProtectedKind::CredentialStore => "OAuth token store",
            ProtectedKind::BrokerDirectory => "broker directory (its token answers approvals)",
            ProtectedKind::ClientHooks => "client settings that run its hooks",
            ProtectedKind::McpConfig => "MCP client configuration that runs `toolgate wrap`",
            ProtectedKind::Transcript => "client transcript (it vouches for what the user typed)",
            ProtectedKind::Executable => "executable",
        }
    }
}

/// One protected resource: glob patterns (already escaped: the binary builds them from real
/// paths with [`Protected::file`] and [`Protected::tree`]) and what is denied on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    pub kind: ProtectedKind,
    /// The path shown in the reason.
    pub shown: String,
    /// Absolute resource globs (literal separator, as rules' `resources`).
    pub globs: Vec<String>,
    /// Also deny reading it (a secret: the broker's token, OAuth tokens).
    pub no_read: bool,
}

impl Protected {
    /// A file at each of `paths` (its literal and canonical spellings).
    pub fn file(kind: ProtectedKind, paths: &[String]) -> Protected {
        Protected {
            kind,
            shown: paths.first().cloned().unwrap_or_default(),
            globs: dedup(paths.iter().map(|p| globset::escape(p)).collect()),
            no_read: false,
        }
    }

    /// A directory and everything beneath it, at each of `paths`.
    pub fn tree(kind: ProtectedKind, paths: &[String]) -> Protected {
        let mut globs = Vec::new();
        for p in paths {
            let e = globset::escape(p.trim_end_matches('/'));
            globs.push(format!("{e}/**"));
            globs.push(e);
        }
        Protected {
            kind,
            shown: paths.first().cloned().unwrap_or_default(),
            globs: dedup(globs),
            no_read: false,
        }
    }

    /// Files of this name anywhere (`**/.claude/settings.json`): a project's files wherever
    /// the project is (the agent's working directory may be below it).
    pub fn anywhere(kind: ProtectedKind, patterns: &[&str]) -> Protected {
        Protected {
            kind,
            shown: patterns
                .first()
                .map(|p| (*p).to_owned())
                .unwrap_or_default(),
            globs: patterns.iter().map(|p| (*p).to_owned()).collect(),
            no_read: false,
        }
    }

    /// Reading it is denied too.
    pub fn secret(mut self) -> Protected {
        self.no_read = true;
        self
    }

    /// The operations denied on it.
    pub fn operations(&self) -> Vec<Operation> {
        let mut ops = vec![Operation::FsWrite, Operation::FsDelete];
        if self.no_read {
            ops.push(Operation::FsRead);
        }
        ops
    }
}

/// `path` as a glob that matches only itself: for [`Protected::globs`] the binary builds
/// beyond [`Protected::file`] and [`Protected::tree`].
pub fn escape(path: &str) -> String {
    globset::escape(path)
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    v.retain(|x| !x.is_empty() && seen.insert(x.clone()));
    v
}

/// The compiled protections of an engine.
#[derive(Debug, Clone, Default)]
pub struct Protections {
    pub(crate) rules: Vec<(CompiledRule, Protected)>,
}

impl Protections {
    /// Compiles `list`; an entry whose globs do not compile is an `Err` naming it (the
    /// caller must not run without it).
    pub fn compile(list: Vec<Protected>) -> Result<Protections, String> {
        let mut rules = Vec::with_capacity(list.len());
        for p in list {
            if p.globs.is_empty() {
                continue;
            }
            let rule = protected_rule(SELF_PROTECTION_RULE, &p.operations(), &p.globs)
                .map_err(|e| format!("toolgate's own {} `{}`: {e}", p.kind.label(), p.shown))?;
            rules.push((rule, p));
        }
        Ok(Protections { rules })
    }

    /// Whether nothing is protected.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The protected entries.
    pub fn entries(&self) -> impl Iterator<Item = &Protected> {
        self.rules.iter().map(|(_, p)| p)
    }
}

/// The reason of a self-protection deny of `what` (a described part) by `p`.
pub fn reason(what: &str, p: &Protected, hidden: bool) -> String {
    let change = if p.no_read {
        "read or change"
    } else {
        "change"
    };
    if hidden {
        format!(
            "{what} hides what it touches, so it could {change} `{}`, toolgate's own {}: a governed agent may not {change} it (toolgate's self-protection). help: spell the paths out, or run it yourself, outside the agent",
            p.shown,
            p.kind.label()
        )
    } else {
        format!(
            "{what}: `{}` is toolgate's own {}: a governed agent may not {change} it (toolgate's self-protection). help: edit it yourself, outside the agent",
            p.shown,
            p.kind.label()
        )
    }
}
