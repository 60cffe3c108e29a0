//! Drawing the interactive view: the header lines, the process table laid out to the terminal's
//! width, the bottom line (state and keys, or the prompt being typed) and the help screen.
//!
//! Layout: numeric columns have a fixed width that holds their name and a sort arrow, and are never
//! cut; COMMAND takes what is left, up to a 15-character comm plus " (exited)". When the terminal
//! is too narrow for every column, the least important ones are left out (PID, COMMAND and the
//! sort column always stay), as htop does rather than squeezing every header.

use pkprof_accounting::Interval;
use ratatui::layout::{Alignment, Constraint, Layout, Position, Rect};
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::{Line, Text};
use ratatui::widgets::{Block, Cell, Clear, Paragraph, Row, Table, TableState};

use super::state::{ViewState, BLOCKED, COMMAND, COST, CPU, ID, TIME, WAIT};

const ID_WIDTH: u16 = 8;
const COMMAND_MIN: u16 = 10;
/// A comm is at most 15 characters (TASK_COMM_LEN - 1); " (exited)" follows it on a last row.
const COMMAND_CAP: u16 = 24;
/// Numeric columns in the order they are kept as the terminal narrows: the headline figures,
/// cumulative time, then the parts of the cost, then what is only shown with --syscalls.
const PRIORITY: [usize; 13] = [CPU, COST, TIME, WAIT, BLOCKED, 5, 6, 7, 8, 9, 11, 3, 4];

fn name(col: usize, per_thread: bool) -> &'static str {
    match col {
        ID if per_thread => "TID",
        ID => "PID",
        c => pkprof_live::text::COLUMNS[c - 1],
    }
}

/// A numeric column: its name and a sort arrow, and at least 6 ("100.0" and a space).
fn fixed_width(col: usize) -> u16 {
    match col {
        ID => ID_WIDTH,
        c => (name(c, false).chars().count() as u16 + 1).max(6),
    }
}

/// The columns shown in `width` cells (each with its width), in table order. Columns are
/// separated by one space.
pub fn columns(width: u16, sort: usize) -> Vec<(usize, u16)> {
    let mut chosen = vec![ID, COMMAND];
    let mut used = ID_WIDTH + 1 + COMMAND_MIN;
    let order = std::iter::once(sort).chain(PRIORITY);
    for c in order {
        if chosen.contains(&c) {
            continue;
        }
        let w = fixed_width(c);
        if used + 1 + w <= width {
            chosen.push(c);
            used += 1 + w;
        }
    }
    chosen.sort_unstable();
    let command = (COMMAND_MIN + width.saturating_sub(used)).min(COMMAND_CAP);
    chosen
        .into_iter()
        .map(|c| {
            (
                c,
                if c == COMMAND {
                    command
                } else {
                    fixed_width(c)
                },
            )
        })
        .collect()
}

pub fn view(
    f: &mut ratatui::Frame,
    frame: Option<&Interval>,
    state: &ViewState,
    table: &mut TableState,
) {
    let [main, bottom] =
        Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(f.area());
    match frame {
        None => f.render_widget(
            Paragraph::new("pkprof top: attached, first frame after one interval..."),
            main,
        ),
        Some(frame) => {
            let header = header_lines(frame);
            let [top, table_area] =
                Layout::vertical([Constraint::Length(header.len() as u16), Constraint::Min(3)])
                    .areas(main);
            f.render_widget(Paragraph::new(header), top);
            match state.breakdown {
                Some(pid) => f.render_widget(super::breakdown::table(frame, pid), table_area),
                None => f.render_stateful_widget(
                    process_table(frame, state, table_area.width),
                    table_area,
                    table,
                ),
            }
        }
    }
    bottom_line(f, bottom, frame, state);
    if state.help {
        help(f, main);
    }
}

fn header_lines(frame: &Interval) -> Vec<Line<'static>> {
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

fn process_table(frame: &Interval, state: &ViewState, width: u16) -> Table<'static> {
    // Inside the border.
    let cols = columns(width.saturating_sub(2), state.sort);
    let arrow = if state.largest_first() { '▼' } else { '▲' };
    let header = Row::new(cols.iter().map(|&(c, _)| {
        let n = name(c, frame.per_thread);
        match (c == state.sort, c == COMMAND) {
            (true, true) => Cell::from(format!("{n}{arrow}")),
            (false, true) => Cell::from(n),
            (true, false) => {
                Cell::from(Line::from(format!("{arrow}{n}")).alignment(Alignment::Right))
            }
            (false, false) => Cell::from(Line::from(n).alignment(Alignment::Right)),
        }
    }))
    .style(Style::new().add_modifier(Modifier::REVERSED));
    let rows = state.rows(frame).into_iter().map(|r| {
        let mut cells = pkprof_live::text::row_cells(r);
        if r.exited {
            cells[COMMAND].push_str(" (exited)");
        }
        let row = Row::new(cols.iter().map(|&(c, _)| {
            let text = std::mem::take(&mut cells[c]);
            if c == COMMAND {
                Cell::from(text)
            } else {
                Cell::from(Text::from(text).alignment(Alignment::Right))
            }
        }));
        if r.exited {
            row.style(Style::new().add_modifier(Modifier::DIM))
        } else {
            row
        }
    });
    let widths: Vec<Constraint> = cols.iter().map(|&(_, w)| Constraint::Length(w)).collect();
    let what = if frame.per_thread {
        "threads"
    } else {
        "processes"
    };
    Table::new(rows, widths)
        .header(header)
        .block(Block::bordered().title(format!(
            " {what} by {} {arrow} ",
            name(state.sort, frame.per_thread)
        )))
        .row_highlight_style(Style::new().add_modifier(Modifier::BOLD))
}

/// The prompt being typed, or the view's state (paused, filters, a message) and the main keys.
fn bottom_line(f: &mut ratatui::Frame, area: Rect, frame: Option<&Interval>, state: &ViewState) {
    if let Some(p) = &state.prompt {
        let text = format!("{}{}", p.kind.label(), p.text);
        let end = text.chars().count() as u16;
        f.render_widget(Paragraph::new(Line::from(text).bold()), area);
        f.set_cursor_position(Position::new(
            area.x + end.min(area.width.saturating_sub(1)),
            area.y,
        ));
        return;
    }
    let mut parts: Vec<String> = Vec::new();
    if state.paused {
        parts.push("PAUSED (space resumes)".into());
    }
    if let Some((text, _)) = &state.name {
        parts.push(format!("names ~ {text}"));
    }
    if let Some(pid) = state.pid {
        let id = if frame.is_some_and(|f| f.per_thread) {
            "PID/TID"
        } else {
            "PID"
        };
        parts.push(format!("{id} {pid}"));
    }
    if let Some(m) = &state.message {
        parts.push(m.clone());
    }
    if state.breakdown.is_some() {
        parts.push("b Esc back  q quit  space pause  h help".into());
    } else {
        parts.push(
            "h help  q quit  < > sort  / name  p PID  space pause  H threads  b threads' time"
                .into(),
        );
    }
    f.render_widget(
        Paragraph::new(Line::from(format!(" {} ", parts.join(" | "))).reversed()),
        area,
    );
}

const HELP: &str = "\
\x20<  >        sort by the column left / right of the current one
 P C T N     sort by CPU%, =COST%, COST TIME+, PID (pressed again: reversed)
 R           reverse the sort
 /  o        show only commands matching a regex (case-insensitive; not a regex: the text);
             Enter applies, Esc cancels, an empty line shows all
 p           show only one PID (a PID or TID with per-thread rows)
 =           clear the name and PID filters
 space       pause the display (counting goes on) / resume with the newest figures
 H           one row per thread / per process (from the next refresh)
 b  Enter    the selected process's threads, where their wall time went (b, Esc: back)
 ↑ ↓ j k     move in the table (PgUp PgDn Home End too)
 h  ?        this help
 Ctrl-Z      suspend to the shell (fg resumes)
 q  Ctrl-C   quit

 The header arrow marks the sort column: ▼ largest first, ▲ smallest first.";

fn help(f: &mut ratatui::Frame, area: Rect) {
    let height = (HELP.lines().count() as u16 + 2).min(area.height);
    let width =
        (HELP.lines().map(|l| l.chars().count()).max().unwrap_or(0) as u16 + 2).min(area.width);
    let rect = Rect::new(
        area.x + (area.width - width) / 2,
        area.y + (area.height - height) / 2,
        width,
        height,
    );
    f.render_widget(Clear, rect);
    f.render_widget(
        Paragraph::new(HELP).block(Block::bordered().title(" pkprof top keys (any key closes) ")),
        rect,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(cols: &[(usize, u16)]) -> u16 {
        cols.iter().map(|(_, w)| w).sum::<u16>() + cols.len() as u16 - 1
    }

    #[test]
    fn every_column_at_full_width_command_capped() {
        // 158 cells held the 12 columns before +SRV% (6), WAIT% (6) and BLOCKED% (9) came, each
        // after a space.
        let cols = columns(158 + 7 + 17, COST);
        assert_eq!(cols.len(), 15);
        assert_eq!(cols.iter().find(|c| c.0 == COMMAND).unwrap().1, COMMAND_CAP);
        assert!(total(&cols) <= 158 + 7 + 17);
    }

    #[test]
    fn narrow_terminals_drop_the_least_important_columns() {
        for width in [40u16, 60, 78, 100, 120] {
            let cols = columns(width, TIME);
            assert!(total(&cols) <= width, "{width}: {cols:?}");
            let have = |c| cols.iter().any(|x| x.0 == c);
            assert!(have(ID) && have(COMMAND) && have(TIME), "{width}: {cols:?}");
            for (c, w) in &cols {
                if *c != COMMAND {
                    assert!(*w as usize > name(*c, false).chars().count(), "{c} not cut");
                }
            }
        }
        // 80 columns (78 inside the border): the headline columns stay.
        let cols = columns(78, COST);
        for c in [CPU, COST, TIME] {
            assert!(cols.iter().any(|x| x.0 == c), "{cols:?}");
        }
    }
}
