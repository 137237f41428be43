//! Heuristics for tools that no pack or `tools:` entry describes, and the word lists that
//! name destination-bearing arguments.
//!
//! Everything here is **token based**: a name is split into lower-case words at `_`, `-`,
//! `.`, spaces, digits and camelCase boundaries (`sendEmail` → `send`, `email`;
//! `HTTPRequest` → `http`, `request`), and words are compared whole. `confirm_order` has no
//! `rm`, `input` has no `put`, `todo` has no `to`.
//!
//! Word lists (documented in `docs/policy.md` too):
//! - [`EXFIL_VERBS`]: a tool whose name contains one of these words is exfiltrating.
//! - [`EXFIL_AMBIGUOUS`]: words that are verbs or nouns (`email`, `message`, `post`, …). They
//!   mark a tool exfiltrating unless a read verb ([`READ_VERBS`]) comes before them:
//!   `post_message` and `slack_post_message` send, `get_message` and `read_email` do not.
//! - [`DESTRUCTIVE_VERBS`]: a tool whose name contains one of these words gets
//!   [`DEFAULT_DESTRUCTIVE_BUDGET`] unless its entry sets a budget.
//! - [`DESTINATION_WORDS`]: an argument whose name contains one of these words is a sink of an
//!   exfiltrating tool, unless its name also contains a content word ([`CONTENT_WORDS`]:
//!   `email_body` is content, `email` and `reply_to` are destinations).

/// Verbs that always mark a tool as exfiltrating.
pub const EXFIL_VERBS: &[&str] = &[
    "send",
    "forward",
    "publish",
    "upload",
    "invite",
    "notify",
    "transfer",
    "pay",
    "tweet",
    "retweet",
    "reply",
    "broadcast",
    "dm",
    "sms",
    "webhook",
    "wire",
    "payout",
    "mail",
    "email",
    "message",
    "post",
    "share",
    "comment",
    "submit",
    "push",
];

/// Words that are verbs or nouns: exfiltrating unless a read verb comes first.
pub const EXFIL_AMBIGUOUS: &[&str] = &[
    "mail", "email", "message", "post", "share", "comment", "submit", "push", "reply",
];

/// Verbs that turn a following ambiguous word into a noun (`get_message`, `delete_email`,
/// `archive_email`). `create` and `add` are not among them: `create_post` and `add_comment`
/// publish.
pub const READ_VERBS: &[&str] = &[
    "get",
    "list",
    "read",
    "search",
    "fetch",
    "find",
    "query",
    "show",
    "view",
    "describe",
    "download",
    "count",
    "lookup",
    "retrieve",
    "load",
    "open",
    "check",
    "watch",
    "summarize",
    "delete",
    "remove",
    "trash",
    "archive",
    "mark",
    "label",
    "move",
    "copy",
    "star",
    "modify",
    "update",
    "edit",
    "parse",
    "validate",
    "translate",
    "format",
    "batch",
];

/// Verbs of destructive tools (default budget).
pub const DESTRUCTIVE_VERBS: &[&str] = &[
    "delete",
    "remove",
    "drop",
    "destroy",
    "purge",
    "rm",
    "rmdir",
    "erase",
    "wipe",
    "truncate",
    "unlink",
    "kill",
    "terminate",
    "revoke",
    "shred",
];

/// The budget of a destructive tool that no entry describes: at most this many calls ...
pub const DEFAULT_DESTRUCTIVE_BUDGET_MAX: u64 = 10;
/// ... per this window.
pub const DEFAULT_DESTRUCTIVE_BUDGET_PER: &str = "10m";

/// Words that make an argument name a destination of an exfiltrating tool.
pub const DESTINATION_WORDS: &[&str] = &[
    "to",
    "cc",
    "bcc",
    "recipient",
    "recipients",
    "email",
    "emails",
    "mail",
    "address",
    "addresses",
    "addr",
    "url",
    "urls",
    "uri",
    "uris",
    "endpoint",
    "webhook",
    "host",
    "hostname",
    "domain",
    "channel",
    "channels",
    "user",
    "users",
    "username",
    "handle",
    "iban",
    "account",
    "phone",
    "mobile",
    "target",
    "destination",
    "dest",
    "share",
    "invitee",
    "invitees",
    "attendee",
    "attendees",
    "member",
    "members",
    "assignee",
    "assignees",
    "reviewer",
    "reviewers",
    "participant",
    "participants",
    "receiver",
    "receivers",
    "payee",
    "beneficiary",
    "wallet",
    "chat",
    "room",
    "conversation",
    "repo",
    "remote",
];

/// Words that make an argument content even if it also names a destination word.
pub const CONTENT_WORDS: &[&str] = &[
    "body",
    "subject",
    "text",
    "content",
    "message",
    "title",
    "html",
    "markdown",
    "note",
    "description",
    "summary",
    "caption",
    "attachment",
    "attachments",
];

/// Split a tool or argument name into lower-case words (snake, kebab, camel and Pascal case,
/// acronyms, digits).
pub fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let prev = i.checked_sub(1).and_then(|j| chars.get(j)).copied();
        let next = chars.get(i + 1).copied();
        let boundary = match prev {
            Some(p) if p.is_alphanumeric() => {
                (p.is_lowercase() && c.is_uppercase())
                    || (p.is_uppercase()
                        && c.is_uppercase()
                        && next.is_some_and(|n| n.is_lowercase()))
                    || (p.is_ascii_digit() != c.is_ascii_digit())
            }
            _ => false,
        };
        if boundary && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// True when the tool name marks an exfiltrating tool (see the module docs).
pub fn is_exfiltrating_name(tool: &str) -> bool {
    let ws = words(tool);
    let mut read_seen = false;
    for w in &ws {
        let w = w.as_str();
        if READ_VERBS.contains(&w) {
            read_seen = true;
            continue;
        }
        if EXFIL_AMBIGUOUS.contains(&w) {
            if !read_seen {
                return true;
            }
            continue;
        }
        if EXFIL_VERBS.contains(&w) {
            return true;
        }
    }
    false
}

/// True when the tool name marks a destructive tool.
pub fn is_destructive_name(tool: &str) -> bool {
    words(tool)
        .iter()
        .any(|w| DESTRUCTIVE_VERBS.contains(&w.as_str()))
}

/// True when an argument name names a destination (see the module docs).
pub fn is_destination_param(arg: &str) -> bool {
    let ws = words(arg);
    let destination = ws.iter().any(|w| DESTINATION_WORDS.contains(&w.as_str()));
    let content = ws.iter().any(|w| CONTENT_WORDS.contains(&w.as_str()));
    destination && !content
}

/// Strong recipient words: a tool with no entry whose schema has such an argument is treated
/// as exfiltrating even when its name says nothing.
pub const RECIPIENT_WORDS: &[&str] = &[
    "to",
    "cc",
    "bcc",
    "recipient",
    "recipients",
    "webhook",
    "iban",
    "payee",
    "beneficiary",
    "invitee",
    "invitees",
];

/// True when an argument name is a strong recipient name (`to`, `cc`, `recipients`, …).
pub fn is_recipient_param(arg: &str) -> bool {
    let ws = words(arg);
    ws.iter().any(|w| RECIPIENT_WORDS.contains(&w.as_str()))
        && !ws.iter().any(|w| CONTENT_WORDS.contains(&w.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_snake_camel_acronyms_digits() {
        assert_eq!(words("send_email"), ["send", "email"]);
        assert_eq!(words("sendEmail"), ["send", "email"]);
        assert_eq!(words("HTTPRequest"), ["http", "request"]);
        assert_eq!(words("user-ID2x"), ["user", "id", "2", "x"]);
        assert_eq!(words("slack.post_message"), ["slack", "post", "message"]);
        assert!(words("").is_empty());
    }

    #[test]
    fn exfil_names_are_token_based() {
        for yes in [
            "send_email",
            "sendEmail",
            "post_message",
            "slack_post_message",
            "reply_to_thread",
            "forward_email",
            "share_file",
            "upload",
            "invite_user",
            "email_user",
            "create_and_send_invoice",
        ] {
            assert!(is_exfiltrating_name(yes), "{yes}");
        }
        for no in [
            "read_email",
            "get_message",
            "list_messages",
            "search_emails",
            "confirm_order",
            "input",
            "sender_stats",
            "delete_email",
            "archive_message",
            "postpone",
            "read_file",
            "git_status",
        ] {
            assert!(!is_exfiltrating_name(no), "{no}");
        }
    }

    #[test]
    fn destructive_names_are_token_based() {
        assert!(is_destructive_name("delete_file"));
        assert!(is_destructive_name("rm"));
        assert!(is_destructive_name("dropTable"));
        assert!(!is_destructive_name("confirm_order"));
        assert!(!is_destructive_name("firmware"));
        assert!(!is_destructive_name("dropdown_options"));
    }

    #[test]
    fn destination_params() {
        for yes in [
            "to",
            "cc",
            "recipients",
            "channel_id",
            "userId",
            "webhookUrl",
            "share_with",
            "phone",
            "reply_to",
        ] {
            assert!(is_destination_param(yes), "{yes}");
        }
        for no in [
            "todo",
            "body",
            "email_body",
            "subject",
            "text",
            "tomorrow",
            "content",
        ] {
            assert!(!is_destination_param(no), "{no}");
        }
    }
}
