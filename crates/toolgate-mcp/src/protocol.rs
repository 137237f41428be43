//! The MCP protocol revisions toolgate knows, and the HTTP header names of the Streamable
//! HTTP transport, in one place: every part of toolgate that offers, accepts or compares a
//! revision, or reads or writes one of these headers, takes it from here.
//!
//! Revisions are dates (`YYYY-MM-DD`), so they also order correctly as strings; the
//! specification compares them that way, and so does toolgate (e.g. "this revision or
//! later" is `version >= STATELESS`).

/// Revision 2024-11-05: the legacy HTTP+SSE transport.
pub const V2024_11_05: &str = "2024-11-05";
/// Revision 2025-03-26: Streamable HTTP.
pub const V2025_03_26: &str = "2025-03-26";
/// Revision 2025-06-18: elicitation (form mode), `MCP-Protocol-Version` on every request.
pub const V2025_06_18: &str = "2025-06-18";
/// Revision 2025-11-25: URL elicitation; the newest revision with sessions.
pub const V2025_11_25: &str = "2025-11-25";
/// Revision 2026-07-28: stateless requests (no session; each request carries its revision
/// and capabilities in `_meta`).
pub const V2026_07_28: &str = "2026-07-28";

/// Every revision toolgate knows, oldest first.
pub const REVISIONS: &[&str] = &[
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
];

/// The newest revision (the last of [`REVISIONS`]).
pub const LATEST: &str = V2026_07_28;

/// The first revision without sessions: its requests carry `Mcp-Method` and `Mcp-Name`,
/// and their revision and client capabilities in `_meta`, instead of relying on an
/// `initialize` and a session.
pub const STATELESS: &str = V2026_07_28;

/// The revisions that begin with `initialize` and keep a session (those before
/// [`STATELESS`]), oldest first.
pub const WITH_SESSIONS: &[&str] = REVISIONS.split_at(REVISIONS.len() - 1).0;

/// `Mcp-Session-Id` (header names are given in lower case, as `http` stores them).
pub const SESSION_ID_HEADER: &str = "mcp-session-id";
/// `MCP-Protocol-Version`.
pub const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
/// `Last-Event-ID`: resumes an SSE stream after the event it names.
pub const LAST_EVENT_ID_HEADER: &str = "last-event-id";
/// `Mcp-Method` (from [`STATELESS`] on).
pub const METHOD_HEADER: &str = "mcp-method";
/// `Mcp-Name` (from [`STATELESS`] on).
pub const NAME_HEADER: &str = "mcp-name";
/// The prefix of `Mcp-Param-*`, the tool arguments a server asks to see as headers (from
/// [`STATELESS`] on).
pub const PARAM_HEADER_PREFIX: &str = "mcp-param-";

/// Whether `version` is one of [`REVISIONS`].
pub fn is_known_revision(version: &str) -> bool {
    REVISIONS.contains(&version)
}

/// Whether `version` is [`STATELESS`] or later (compared as dates, like the specification
/// does; an unknown later date counts).
pub fn is_stateless(version: &str) -> bool {
    version >= STATELESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_are_dates_in_order() {
        assert!(REVISIONS.windows(2).all(|w| w[0] < w[1]));
        assert!(REVISIONS.iter().all(|r| r.len() == 10));
        assert_eq!(REVISIONS.last(), Some(&LATEST));
    }

    #[test]
    fn with_sessions_is_everything_before_stateless() {
        assert!(WITH_SESSIONS.iter().all(|r| !is_stateless(r)));
        assert_eq!(WITH_SESSIONS.len() + 1, REVISIONS.len());
        assert!(is_stateless(STATELESS) && is_stateless("2027-01-01"));
        assert!(is_known_revision("2025-06-18") && !is_known_revision("2025-06-19"));
    }
}
