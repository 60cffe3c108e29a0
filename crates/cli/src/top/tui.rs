//! The interactive view of `pkprof top` (ratatui). Frames arrive from the sampling thread; this
//! thread only draws and reads keys. The terminal is restored by a guard's `Drop` and, on a panic,
//! by ratatui's panic hook.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use pkprof_accounting::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table, TableState};
use ratatui::DefaultTerminal;

use super::TopOptions;
use crate::signals;

/// Restores the terminal when dropped, whatever way the view ends.
struct TerminalGuard(DefaultTerminal);

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

pub fn run(opts: &TopOptions, frames: &Receiver<Arc<Frame>>) -> Result<()> {
    // Installs a panic hook that restores the terminal before the panic message is printed.
    let mut term = TerminalGuard(ratatui::try_init().context("setting up the terminal")?);
    let mut view = View {
        frame: None,
        table: TableState::default(),
        shown: 0,
    };
    // Redraw only when something changed: a new frame, a key, a resize.
    let mut dirty = true;
    loop {
        match frames.recv_timeout(Duration::from_millis(50)) {
            Ok(f) => {
                view.frame = Some(f);
                view.shown += 1;
                dirty = true;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        }
        if dirty {
            term.0.draw(|f| view.draw(f)).context("drawing")?;
            dirty = false;
        }
        if opts.iterations.is_some_and(|n| view.shown >= n) || signals::stop_requested() {
            return Ok(());
        }
        while event::poll(Duration::ZERO).context("reading the keyboard")? {
            let ev = event::read().context("reading the keyboard")?;
            dirty = true;
            if let Event::Key(k) = ev {
                if k.kind != KeyEventKind::Press {
                    continue;
                }
                match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        return Ok(())
                    }
                    KeyCode::Down | KeyCode::Char('j') => view.table.select_next(),
                    KeyCode::Up | KeyCode::Char('k') => view.table.select_previous(),
                    KeyCode::Home => view.table.select_first(),
                    _ => {}
                }
            }
        }
    }
}

struct View {
    frame: Option<Arc<Frame>>,
    table: TableState,
    shown: u64,
}

impl View {
    fn draw(&mut self, f: &mut ratatui::Frame) {
        let Some(frame) = self.frame.clone() else {
            f.render_widget(
                Paragraph::new("pkprof top: attached, first frame after one interval..."),
                f.area(),
            );
            return;
        };
        let header = header_lines(&frame);
        let [top, table_area, help] = Layout::vertical([
            Constraint::Length(header.len() as u16),
            Constraint::Min(3),
            Constraint::Length(1),
        ])
        .areas(f.area());
        f.render_widget(Paragraph::new(header), top);
        f.render_stateful_widget(process_table(&frame), table_area, &mut self.table);
        f.render_widget(
            Paragraph::new(Line::from(" q quit   ↑/↓ scroll ").reversed()),
            help,
        );
    }
}

fn header_lines(frame: &Frame) -> Vec<Line<'static>> {
    use pkprof_live::text;
    let mut lines = vec![Line::from(text::title_line(frame)).bold()];
    lines.extend(frame.cpus.iter().map(|c| Line::from(text::cpu_line(c))));
    lines.push(match text::lost_line(frame) {
        Some(line) => Line::from(line).red().bold(),
        None => Line::from("lost events: none"),
    });
    lines.push(Line::from(text::self_line(frame)));
    lines.push(Line::from(text::buckets_line(frame)));
    if let Some(line) = text::syscall_summary(frame, 6) {
        lines.push(Line::from(line));
    }
    lines
}

fn process_table(frame: &Frame) -> Table<'static> {
    use pkprof_live::text;
    let id = if frame.per_thread { "TID" } else { "PID" };
    let header = Row::new(std::iter::once(id).chain(text::COLUMNS))
        .style(Style::new().add_modifier(Modifier::REVERSED));
    let rows = frame.rows.iter().map(|r| {
        let mut cells = text::row_cells(r);
        if r.exited {
            cells[1].push_str(" (exited)");
            Row::new(cells).style(Style::new().add_modifier(Modifier::DIM))
        } else {
            Row::new(cells)
        }
    });
    let mut widths = vec![Constraint::Length(8), Constraint::Min(16)];
    widths.extend([Constraint::Length(6); 9]);
    widths.push(Constraint::Length(10));
    Table::new(rows, widths)
        .header(header)
        .block(Block::bordered().title(" processes by what they cost the machine "))
        .row_highlight_style(Style::new().add_modifier(Modifier::BOLD))
}
