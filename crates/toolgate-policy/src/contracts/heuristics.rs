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
//!   a budget of [`DEFAULT_DESTRUCTIVE_BUDGET_MAX`] calls per [`DEFAULT_DESTRUCTIVE_BUDGET_PER`]
//!   unless its entry sets one.
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
/// acronyms, digits). The heuristics use [`each_word`], which allocates no vector.
#[cfg(test)]
pub fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    each_word(name, |w| {
        out.push(w.to_owned());
        true
    });
    out
}

/// Calls `f` with each word of `name` as `words` splits it, in order, until `f` returns
/// false. One reused buffer instead of a `String` per word: the heuristics run on every
/// call (tool name, argument and schema property names).
fn each_word(name: &str, mut f: impl FnMut(&str) -> bool) {
    let mut cur = String::new();
    let mut prev: Option<char> = None;
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                if !f(&cur) {
                    return;
                }
                cur.clear();
            }
            prev = Some(c);
            continue;
        }
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
            if !f(&cur) {
                return;
            }
            cur.clear();
        }
        cur.extend(c.to_lowercase());
        prev = Some(c);
    }
    if !cur.is_empty() {
        f(&cur);
    }
}

/// True when the tool name marks an exfiltrating tool (see the module docs).
pub fn is_exfiltrating_name(tool: &str) -> bool {
    name_marks(tool).0
}

/// `(exfiltrating, destructive)`: [`is_exfiltrating_name`] and [`is_destructive_name`] in
/// one pass over the words.
pub fn name_marks(tool: &str) -> (bool, bool) {
    let mut read_seen = false;
    let mut exfiltrating = false;
    let mut destructive = false;
    each_word(tool, |w| {
        destructive |= DESTRUCTIVE_VERBS.contains(&w);
        if !exfiltrating {
            if READ_VERBS.contains(&w) {
                read_seen = true;
            } else if EXFIL_AMBIGUOUS.contains(&w) {
                exfiltrating = !read_seen;
            } else if EXFIL_VERBS.contains(&w) {
                exfiltrating = true;
            }
        }
        true
    });
    (exfiltrating, destructive)
}

/// True when the tool name marks a destructive tool.
pub fn is_destructive_name(tool: &str) -> bool {
    name_marks(tool).1
}

/// True when an argument name names a destination (see the module docs).
pub fn is_destination_param(arg: &str) -> bool {
    let (mut destination, mut content) = (false, false);
    each_word(arg, |w| {
        destination |= DESTINATION_WORDS.contains(&w);
        content |= CONTENT_WORDS.contains(&w);
        !content
    });
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
    let (mut recipient, mut content) = (false, false);
    each_word(arg, |w| {
        recipient |= RECIPIENT_WORDS.contains(&w);
        content |= CONTENT_WORDS.contains(&w);
        !content
    });
    recipient && !content
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
