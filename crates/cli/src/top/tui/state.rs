//! What the interactive view shows and how keys change it: the sort column and direction, the
//! name and PID filters typed in a prompt line, pause, help. Pure state, no terminal: the keys
//! map to the same actions as in procps top where top has one (`<` `>` `R` `P` `T` `N`, `H`,
//! `h`/`?`, space, `=`), `/` as in less and htop.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use pkprof_accounting::{Interval, Row};
use regex::{Regex, RegexBuilder};

/// Cells of a table row, as `pkprof_live::text::row_cells` gives them: the id, COMMAND, then the
/// numeric columns. Indexes below are into these.
pub const ID: usize = 0;
pub const COMMAND: usize = 1;
pub const CPU: usize = 2;
pub const COST: usize = 10;
pub const TIME: usize = 12;
pub const WAIT: usize = 13;
pub const BLOCKED: usize = 14;
pub const NCOLS: usize = 15;

/// What the event loop must do after a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    None,
    Quit,
    /// Ctrl-Z: give the terminal back and stop, as a shell job.
    Suspend,
    /// `H`: per-thread rows on or off (the sampler switches from its next frame).
    TogglePerThread,
    /// Space again: show the newest frame.
    Resume,
    /// `b` or Enter: the per-thread breakdown of the selected row's process (the event loop
    /// knows the selection); `b` or Esc in it: back (`ViewState::breakdown` is then None).
    Breakdown,
    LeaveBreakdown,
    Scroll(Scroll),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scroll {
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
}

/// A line being typed at the bottom of the screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    pub kind: PromptKind,
    pub text: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptKind {
    Name,
    Pid,
}

impl PromptKind {
    pub fn label(self) -> &'static str {
        match self {
            PromptKind::Name => "show names matching (regex or text, empty: all): ",
            PromptKind::Pid => "show PID (empty: all): ",
        }
    }
}

pub struct ViewState {
    /// Sorted by this cell; numbers largest first and names A to Z unless `reverse`.
    pub sort: usize,
    pub reverse: bool,
    pub name: Option<(String, Regex)>,
    pub pid: Option<u32>,
    pub paused: bool,
    pub help: bool,
    pub prompt: Option<Prompt>,
    /// Said once in the bottom line, until the next key.
    pub message: Option<String>,
    /// The process whose threads the breakdown view shows, while it is open.
    pub breakdown: Option<u32>,
}

impl Default for ViewState {
    fn default() -> Self {
        ViewState {
            sort: COST,
            reverse: false,
            name: None,
            pid: None,
            paused: false,
            help: false,
            prompt: None,
            message: None,
            breakdown: None,
        }
    }
}

impl ViewState {
    pub fn handle_key(&mut self, k: KeyEvent) -> Action {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        match k.code {
            KeyCode::Char('c') if ctrl => return Action::Quit,
            KeyCode::Char('z') if ctrl => return Action::Suspend,
            _ => {}
        }
        self.message = None;
        if self.prompt.is_some() {
            self.prompt_key(k);
            return Action::None;
        }
        if self.help {
            // Any key closes the help, as in top.
            self.help = false;
            return Action::None;
        }
        if self.breakdown.is_some() {
            match k.code {
                KeyCode::Char('b') | KeyCode::Esc => {
                    self.breakdown = None;
                    return Action::LeaveBreakdown;
                }
                KeyCode::Char('q') => return Action::Quit,
                KeyCode::Char(' ') => {
                    self.paused = !self.paused;
                    if !self.paused {
                        return Action::Resume;
                    }
                }
                KeyCode::Char('h') | KeyCode::Char('?') => self.help = true,
                _ => {}
            }
            return Action::None;
        }
        match k.code {
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Char('b') | KeyCode::Enter => return Action::Breakdown,
            KeyCode::Char('<') => self.sort = (self.sort + NCOLS - 1) % NCOLS,
            KeyCode::Char('>') => self.sort = (self.sort + 1) % NCOLS,
            KeyCode::Char('R') => self.reverse = !self.reverse,
            KeyCode::Char('P') => self.sort_by(CPU),
            KeyCode::Char('C') => self.sort_by(COST),
            KeyCode::Char('T') => self.sort_by(TIME),
            KeyCode::Char('N') => self.sort_by(ID),
            KeyCode::Char('/') | KeyCode::Char('o') => self.open(PromptKind::Name),
            KeyCode::Char('p') => self.open(PromptKind::Pid),
            KeyCode::Char('=') => {
                self.name = None;
                self.pid = None;
                self.message = Some("filters cleared".into());
            }
            KeyCode::Char(' ') => {
                self.paused = !self.paused;
                if !self.paused {
                    return Action::Resume;
                }
            }
            KeyCode::Char('H') => return Action::TogglePerThread,
            KeyCode::Char('h') | KeyCode::Char('?') => self.help = true,
            KeyCode::Down | KeyCode::Char('j') => return Action::Scroll(Scroll::Down),
            KeyCode::Up | KeyCode::Char('k') => return Action::Scroll(Scroll::Up),
            KeyCode::PageDown => return Action::Scroll(Scroll::PageDown),
            KeyCode::PageUp => return Action::Scroll(Scroll::PageUp),
            KeyCode::Home => return Action::Scroll(Scroll::Top),
            KeyCode::End => return Action::Scroll(Scroll::Bottom),
            _ => {}
        }
        Action::None
    }

    /// A column key: sort by it, or, pressed again, reverse (as top's `P` `T` `N` do).
    fn sort_by(&mut self, col: usize) {
        if self.sort == col {
            self.reverse = !self.reverse;
        } else {
            self.sort = col;
            self.reverse = false;
        }
    }

    fn open(&mut self, kind: PromptKind) {
        let text = match kind {
            PromptKind::Name => self.name.as_ref().map(|(t, _)| t.clone()),
            PromptKind::Pid => self.pid.map(|p| p.to_string()),
        };
        self.prompt = Some(Prompt {
            kind,
            text: text.unwrap_or_default(),
        });
    }

    fn prompt_key(&mut self, k: KeyEvent) {
        let Some(prompt) = self.prompt.as_mut() else {
            return;
        };
        match k.code {
            KeyCode::Esc => self.prompt = None,
            KeyCode::Backspace => {
                prompt.text.pop();
            }
            KeyCode::Char('u') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                prompt.text.clear()
            }
            KeyCode::Char(c) => prompt.text.push(c),
            KeyCode::Enter => {
                if let Some(Prompt { kind, text }) = self.prompt.take() {
                    match kind {
                        PromptKind::Name => self.set_name(text.trim()),
                        PromptKind::Pid => self.set_pid(text.trim()),
                    }
                }
            }
            _ => {}
        }
    }

    /// A regular expression, case-insensitive; text that is not one is matched as written.
    fn set_name(&mut self, text: &str) {
        if text.is_empty() {
            self.name = None;
            return;
        }
        let build = |pattern: &str| {
            RegexBuilder::new(pattern)
                .case_insensitive(true)
                .size_limit(1 << 20)
                .build()
        };
        let re = match build(text) {
            Ok(re) => re,
            Err(_) => {
                self.message = Some(format!("{text:?} is not a regex: matching it as text"));
                match build(&regex::escape(text)) {
                    Ok(re) => re,
                    Err(e) => {
                        self.message = Some(format!("cannot match {text:?}: {e}"));
                        return;
                    }
                }
            }
        };
        self.name = Some((text.to_string(), re));
    }

    fn set_pid(&mut self, text: &str) {
        if text.is_empty() {
            self.pid = None;
            return;
        }
        match text.parse::<u32>() {
            Ok(p) => self.pid = Some(p),
            Err(_) => self.message = Some(format!("{text:?} is not a PID")),
        }
    }

    /// The rows shown: filtered by name and PID (a thread row matches its TID or its PID), sorted
    /// by the sort column; ties keep the frame's order (cost, then CPU, then cumulative cost).
    pub fn rows<'a>(&self, frame: &'a Interval) -> Vec<&'a Row> {
        let mut rows: Vec<&Row> = frame
            .rows
            .iter()
            .filter(|r| self.pid.is_none_or(|p| r.pid == p || r.tid == Some(p)))
            .filter(|r| (self.name.as_ref()).is_none_or(|(_, re)| re.is_match(&r.comm)))
            .collect();
        let col = self.sort;
        rows.sort_by(|a, b| {
            let o = match col {
                ID => a
                    .tid
                    .unwrap_or(a.pid)
                    .cmp(&b.tid.unwrap_or(b.pid))
                    .reverse(),
                COMMAND => a.comm.cmp(&b.comm),
                _ => number(b, col).total_cmp(&number(a, col)),
            };
            if self.reverse {
                o.reverse()
            } else {
                o
            }
        });
        rows
    }

    /// Whether the sort puts the largest value first (for the header's arrow).
    pub fn largest_first(&self) -> bool {
        (self.sort != COMMAND) != self.reverse
    }
}

/// The value a numeric column shows (a column not measured, USER%/SYS% without --syscalls, sorts
/// below every measured value).
fn number(r: &Row, col: usize) -> f64 {
    match col {
        2 => r.cpu_pct,
        3 => r.user_pct.unwrap_or(-1.0),
        4 => r.sys_pct.unwrap_or(-1.0),
        5 => r.own_pct,
        6 => r.net_pct,
        7 => r.block_pct,
        8 => r.workq_pct,
        9 => r.server_pct,
        10 => r.cost_pct,
        11 => r.billed_for_others_pct,
        WAIT => r.wait_pct,
        BLOCKED => r.blocked_pct,
        _ => r.total.cost_ns() as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    fn code(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    fn frame() -> Interval {
        let row = |pid: u32, comm: &str, cpu: f64, cost: f64| Row {
            pid,
            comm: comm.into(),
            cpu_pct: cpu,
            cost_pct: cost,
            ..Row::default()
        };
        Interval {
            rows: vec![
                row(30, "nginx", 10.0, 50.0),
                row(10, "bash", 40.0, 40.0),
                row(20, "Nginx-worker", 20.0, 30.0),
            ],
            ..Interval::default()
        }
    }

    fn pids(s: &ViewState, f: &Interval) -> Vec<u32> {
        s.rows(f).iter().map(|r| r.pid).collect()
    }

    fn type_line(s: &mut ViewState, text: &str) {
        for c in text.chars() {
            s.handle_key(key(c));
        }
        s.handle_key(code(KeyCode::Enter));
    }

    #[test]
    fn sorting_keys() {
        let (mut s, f) = (ViewState::default(), frame());
        assert_eq!(pids(&s, &f), [30, 10, 20], "=COST% first");
        s.handle_key(key('P'));
        assert_eq!(pids(&s, &f), [10, 20, 30]);
        s.handle_key(key('P'));
        assert_eq!(pids(&s, &f), [30, 20, 10], "pressed again: reversed");
        s.handle_key(key('N'));
        assert_eq!(pids(&s, &f), [30, 20, 10]);
        s.handle_key(key('R'));
        assert_eq!(pids(&s, &f), [10, 20, 30]);
        s.handle_key(key('R'));
        s.handle_key(key('>'));
        assert_eq!(s.sort, COMMAND);
        assert_eq!(pids(&s, &f), [20, 10, 30], "byte order: N < b < n");
        s.handle_key(key('<'));
        s.handle_key(key('<'));
        assert_eq!(s.sort, BLOCKED, "wraps around to the last column");
    }

    #[test]
    fn name_and_pid_filters() {
        let (mut s, f) = (ViewState::default(), frame());
        s.handle_key(key('/'));
        type_line(&mut s, "^nginx");
        assert_eq!(pids(&s, &f), [30, 20], "case-insensitive regex");
        s.handle_key(key('/'));
        s.handle_key(code(KeyCode::Backspace));
        for c in "xyz".chars() {
            s.handle_key(key(c));
        }
        s.handle_key(code(KeyCode::Esc));
        assert_eq!(pids(&s, &f), [30, 20], "Esc keeps the filter it had");
        s.handle_key(key('/'));
        for _ in 0..6 {
            s.handle_key(code(KeyCode::Backspace));
        }
        type_line(&mut s, "x(");
        assert!(s.message.is_some() && pids(&s, &f).is_empty(), "as text");
        s.handle_key(key('='));
        s.handle_key(key('p'));
        type_line(&mut s, "10");
        assert_eq!(pids(&s, &f), [10]);
        s.handle_key(key('p'));
        type_line(&mut s, "ten");
        assert_eq!(s.pid, Some(10), "a bad PID changes nothing");
        assert!(s.message.as_deref().unwrap().contains("not a PID"));
        s.handle_key(key('p'));
        s.handle_key(code(KeyCode::Backspace));
        s.handle_key(code(KeyCode::Backspace));
        s.handle_key(code(KeyCode::Enter));
        assert_eq!(pids(&s, &f).len(), 3, "empty: all");
    }

    #[test]
    fn pause_help_and_quit() {
        let mut s = ViewState::default();
        assert_eq!(s.handle_key(key(' ')), Action::None);
        assert!(s.paused);
        assert_eq!(s.handle_key(key(' ')), Action::Resume);
        assert_eq!(s.handle_key(key('H')), Action::TogglePerThread);
        s.handle_key(key('?'));
        assert!(s.help);
        assert_eq!(
            s.handle_key(key('q')),
            Action::None,
            "a key closes the help"
        );
        assert!(!s.help);
        s.handle_key(key('/'));
        assert_eq!(
            s.handle_key(key('q')),
            Action::None,
            "q is typed in a prompt"
        );
        assert_eq!(
            s.handle_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Action::Quit
        );
        assert_eq!(
            s.handle_key(KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL)),
            Action::Suspend
        );
    }
}
