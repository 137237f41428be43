//! The `toolgate approvals` terminal: a state machine fed by broker messages and keys, and
//! a pure rendering of that state. Neither needs a terminal, so both are tested without one.

use std::collections::VecDeque;

use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, List, ListItem, ListState, Paragraph, Wrap};

use toolgate_broker::proto::{Choice, FromBroker, Pending};

/// How many past events the terminal keeps.
const LOG_LINES: usize = 50;

/// A key, already mapped from the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Up,
    Down,
    AllowOnce,
    AllowSession,
    Deny,
    Quit,
}

impl Key {
    /// `o` allow once, `s` allow for the session, `d` deny, arrows / `j` `k` move, `q` quits.
    pub fn from_char(c: char) -> Option<Key> {
        match c {
            'o' | 'O' => Some(Key::AllowOnce),
            's' | 'S' => Some(Key::AllowSession),
            'd' | 'D' => Some(Key::Deny),
            'k' => Some(Key::Up),
            'j' => Some(Key::Down),
            'q' | 'Q' => Some(Key::Quit),
            _ => None,
        }
    }
}

/// What the state machine asks its driver to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Nothing,
    /// Send this decision to the broker.
    Decide(u64, Choice),
    Quit,
}

/// The terminal's state.
#[derive(Debug, Clone, Default)]
pub struct Ui {
    /// The live queue, oldest first.
    pub queue: Vec<Pending>,
    /// The index of the highlighted request.
    pub selected: usize,
    /// What happened, newest last.
    pub log: VecDeque<String>,
    /// Set when the broker connection is gone.
    pub disconnected: Option<String>,
}

/// Replaces control characters so nothing from a request can drive the terminal.
pub fn safe(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn title(p: &Pending) -> String {
    let server = p.question.server.as_deref().unwrap_or("?");
    safe(&format!("#{} {server}/{}", p.id, p.question.tool))
}

impl Ui {
    fn note(&mut self, line: String) {
        self.log.push_back(safe(&line));
        while self.log.len() > LOG_LINES {
            self.log.pop_front();
        }
    }

    fn remove(&mut self, id: u64) -> Option<Pending> {
        let at = self.queue.iter().position(|p| p.id == id)?;
        let gone = self.queue.remove(at);
        if self.selected >= self.queue.len() {
            self.selected = self.queue.len().saturating_sub(1);
        }
        Some(gone)
    }

    /// The highlighted request.
    pub fn current(&self) -> Option<&Pending> {
        self.queue.get(self.selected)
    }

    /// Applies a message from the broker.
    pub fn on_broker(&mut self, message: FromBroker) {
        match message {
            FromBroker::Snapshot { pending } => {
                let n = pending.len();
                self.queue = pending;
                self.selected = 0;
                self.note(format!("connected: {n} pending"));
            }
            FromBroker::Added { request } => {
                self.note(format!("{} arrived", title(&request)));
                if !self.queue.iter().any(|p| p.id == request.id) {
                    self.queue.push(request);
                }
            }
            FromBroker::Resolved { id, decision, by } => {
                let name = self.remove(id).map_or(format!("#{id}"), |p| title(&p));
                self.note(format!("{name} resolved: {} by {by}", decision.cli_name()));
            }
            FromBroker::Withdrawn { id, why } => {
                let name = self.remove(id).map_or(format!("#{id}"), |p| title(&p));
                self.note(format!("{name} withdrawn: {}", why.describe()));
            }
            FromBroker::DecideResult {
                accepted: false,
                message,
                ..
            } => self.note(message),
            FromBroker::Error { message, .. } => self.note(format!("broker error: {message}")),
            _ => {}
        }
    }

    /// Applies a key.
    pub fn on_key(&mut self, key: Key) -> Command {
        let decide = |ui: &Ui, d: Choice| match ui.current() {
            Some(p) => Command::Decide(p.id, d),
            None => Command::Nothing,
        };
        match key {
            Key::Up => {
                self.selected = self.selected.saturating_sub(1);
                Command::Nothing
            }
            Key::Down => {
                if self.selected.saturating_add(1) < self.queue.len() {
                    self.selected = self.selected.saturating_add(1);
                }
                Command::Nothing
            }
            Key::AllowOnce => decide(self, Choice::AllowOnce),
            Key::AllowSession => decide(self, Choice::AllowSession),
            Key::Deny => decide(self, Choice::Deny),
            Key::Quit => Command::Quit,
        }
    }

    /// The broker went away.
    pub fn on_disconnect(&mut self, why: String) {
        self.note(format!("disconnected: {why}"));
        self.queue.clear();
        self.selected = 0;
        self.disconnected = Some(why);
    }
}

/// The detail lines of a request (also used by `--plain`).
pub fn detail_lines(p: &Pending, now_ms: u64) -> Vec<(String, String)> {
    let q = &p.question;
    let mut out = vec![
        (
            "Server".to_owned(),
            q.server.clone().unwrap_or_else(|| "(unnamed)".to_owned()),
        ),
        ("Tool".to_owned(), q.tool.clone()),
        ("Action".to_owned(), q.what.clone()),
        ("Why".to_owned(), q.why.clone()),
    ];
    if let Some(v) = &q.provenance {
        out.push(("Came from".to_owned(), v.clone()));
    }
    if let Some(v) = &q.changes {
        out.push(("Changed".to_owned(), v.clone()));
    }
    if let Some(s) = &p.session {
        out.push(("Session".to_owned(), s.clone()));
    }
    out.push(("Proxy pid".to_owned(), p.proxy_pid.to_string()));
    let left = p.expires_ms.saturating_sub(now_ms) / 1000;
    out.push(("Expires in".to_owned(), format!("{left} s")));
    out.into_iter().map(|(k, v)| (k, safe(&v))).collect()
}

/// Draws the state: the queue, the highlighted request, the event log and the keys.
pub fn render(ui: &Ui, frame: &mut Frame<'_>, now_ms: u64) {
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Percentage(25),
            Constraint::Min(11),
            Constraint::Length(5),
            Constraint::Length(1),
        ])
        .split(frame.area());
    let (Some(top), Some(middle), Some(bottom), Some(help)) =
        (rows.first(), rows.get(1), rows.get(2), rows.get(3))
    else {
        return;
    };
    let items: Vec<ListItem<'_>> = ui
        .queue
        .iter()
        .map(|p| ListItem::new(format!("{}  {}", title(p), safe(&p.question.what))))
        .collect();
    let queue_title = match &ui.disconnected {
        Some(_) => " Pending approvals (broker disconnected) ".to_owned(),
        None => format!(" Pending approvals ({}) ", ui.queue.len()),
    };
    let list = List::new(items)
        .block(Block::default().borders(Borders::ALL).title(queue_title))
        .highlight_style(Style::default().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ");
    let mut state = ListState::default();
    if !ui.queue.is_empty() {
        state.select(Some(ui.selected));
    }
    frame.render_stateful_widget(list, *top, &mut state);

    let detail: Vec<Line<'_>> = match ui.current() {
        Some(p) => detail_lines(p, now_ms)
            .into_iter()
            .map(|(k, v)| {
                Line::from(vec![
                    Span::styled(
                        format!("{k:<11}"),
                        Style::default().add_modifier(Modifier::BOLD),
                    ),
                    Span::raw(v),
                ])
            })
            .collect(),
        None => vec![Line::from(match &ui.disconnected {
            Some(why) => format!("The broker is gone: {}", safe(why)),
            None => "Nothing to approve. Requests appear here as agents ask.".to_owned(),
        })],
    };
    frame.render_widget(
        Paragraph::new(detail)
            .wrap(Wrap { trim: false })
            .block(Block::default().borders(Borders::ALL).title(" Request ")),
        *middle,
    );
    let shown = usize::from(bottom.height.saturating_sub(2));
    let log: Vec<Line<'_>> = ui
        .log
        .iter()
        .skip(ui.log.len().saturating_sub(shown))
        .map(|l| Line::from(l.as_str()))
        .collect();
    frame.render_widget(
        Paragraph::new(log).block(Block::default().borders(Borders::ALL).title(" Events ")),
        *bottom,
    );
    frame.render_widget(
        Paragraph::new("o allow once · s allow for session · d deny · ↑/↓ select · q quit"),
        *help,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use toolgate_broker::proto::{Question, Withdrawal};

    fn pending(id: u64, tool: &str, what: &str) -> Pending {
        Pending {
            id,
            question: Question {
                server: Some("mail".into()),
                tool: tool.into(),
                what: what.into(),
                why: "`bob@evil.example` is not a trusted recipient".into(),
                provenance: Some(
                    "`to` = `bob@evil.example` (tainted; seen in untrusted output of `read_inbox`)"
                        .into(),
                ),
                changes: None,
            },
            session: Some("ppid-42".into()),
            proxy_pid: 4242,
            created_ms: 1_000,
            expires_ms: 121_000,
        }
    }

    fn draw(ui: &Ui) -> Terminal<TestBackend> {
        let mut terminal = Terminal::new(TestBackend::new(90, 24)).unwrap();
        terminal.draw(|f| render(ui, f, 31_000)).unwrap();
        terminal
    }

    #[test]
    fn arrivals_decisions_and_withdrawals_update_the_queue() {
        let mut ui = Ui::default();
        ui.on_broker(FromBroker::Snapshot {
            pending: vec![pending(1, "send_email", "send_email to `bob@evil.example`")],
        });
        ui.on_broker(FromBroker::Added {
            request: pending(2, "run_command", "run_command: exec `rm -rf build`"),
        });
        assert_eq!(ui.queue.len(), 2);
        assert_eq!(ui.on_key(Key::Down), Command::Nothing);
        assert_eq!(ui.on_key(Key::Down), Command::Nothing, "stays on the last");
        assert_eq!(
            ui.on_key(Key::AllowSession),
            Command::Decide(2, Choice::AllowSession)
        );
        // Decided elsewhere: it leaves the queue, the selection stays in range.
        ui.on_broker(FromBroker::Resolved {
            id: 2,
            decision: Choice::Deny,
            by: "approver pid 9".into(),
        });
        assert_eq!(ui.queue.len(), 1);
        assert_eq!(ui.selected, 0);
        assert!(
            ui.log
                .back()
                .unwrap()
                .contains("resolved: deny by approver pid 9")
        );
        ui.on_broker(FromBroker::Withdrawn {
            id: 1,
            why: Withdrawal::Cancelled,
        });
        assert!(ui.queue.is_empty());
        assert!(ui.log.back().unwrap().contains("cancelled by the client"));
        assert_eq!(ui.on_key(Key::Deny), Command::Nothing, "nothing to decide");
        assert_eq!(ui.on_key(Key::Quit), Command::Quit);
        // A duplicate arrival is not listed twice.
        ui.on_broker(FromBroker::Added {
            request: pending(3, "t", "w"),
        });
        ui.on_broker(FromBroker::Added {
            request: pending(3, "t", "w"),
        });
        assert_eq!(ui.queue.len(), 1);
        ui.on_disconnect("the broker closed the connection".into());
        assert!(ui.queue.is_empty() && ui.disconnected.is_some());
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        let mut ui = Ui::default();
        ui.on_broker(FromBroker::Added {
            request: pending(1, "evil\u{1b}[2J", "x\u{7}y"),
        });
        let lines = detail_lines(&ui.queue[0], 0);
        assert!(lines.iter().all(|(_, v)| !v.chars().any(char::is_control)));
        assert!(ui.log.iter().all(|l| !l.chars().any(char::is_control)));
    }

    #[test]
    fn keys_map() {
        assert_eq!(Key::from_char('o'), Some(Key::AllowOnce));
        assert_eq!(Key::from_char('s'), Some(Key::AllowSession));
        assert_eq!(Key::from_char('d'), Some(Key::Deny));
        assert_eq!(Key::from_char('x'), None);
    }

    #[test]
    fn frame_with_a_tainted_destination() {
        let mut ui = Ui::default();
        ui.on_broker(FromBroker::Snapshot {
            pending: vec![
                pending(1, "send_email", "send_email to `bob@evil.example`"),
                pending(2, "run_command", "run_command: exec `rm -rf build`"),
            ],
        });
        insta::assert_snapshot!("queue_two_requests", draw(&ui).backend());
        ui.on_broker(FromBroker::Withdrawn {
            id: 1,
            why: Withdrawal::Expired,
        });
        insta::assert_snapshot!("after_expiry", draw(&ui).backend());
    }

    #[test]
    fn frame_when_empty_and_when_disconnected() {
        let mut ui = Ui::default();
        ui.on_broker(FromBroker::Snapshot { pending: vec![] });
        insta::assert_snapshot!("empty", draw(&ui).backend());
        ui.on_disconnect("the broker closed the connection".into());
        insta::assert_snapshot!("disconnected", draw(&ui).backend());
    }
}
