//! The per-thread breakdown view of `pkprof top` (`b` or Enter on a row; docs/design.md, "Wall
//! time"): one process's threads, each with its wall-time classes over the interval, as percent
//! of the interval: running (and, by the core's clock, its user, kernel and billed interrupt
//! parts), waiting for a CPU (with the runqueue waits' p50, p99 and longest), blocked by reason,
//! the work others did for it (+NET +BLK +WQ +SRV), and where in the kernel its OTHER time went
//! since start. RUN% + WAIT% + the blocked columns add up to WALL%, the share of the interval the
//! thread was followed (100 for a thread alive throughout).

use pkprof_accounting::{Interval, Row};
use ratatui::layout::{Alignment, Constraint};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Text};
use ratatui::widgets::{Block, Cell, Row as TableRow, Table};

/// Column titles; `OTHER IN` (last) takes the width left.
pub const COLUMNS: [&str; 23] = [
    "TID",
    "COMMAND",
    "RUN%",
    "USER%",
    "SYS%",
    "IRQ%",
    "WAIT%",
    "P50",
    "P99",
    "MAX",
    "IO%",
    "NET%",
    "IPC%",
    "LOCK%",
    "SLEEP%",
    "POLL%",
    "OTHER%",
    "WALL%",
    "+NET%",
    "+BLK%",
    "+WQ%",
    "+SRV%",
    "OTHER IN (since start)",
];

const WIDTHS: [u16; 22] = [
    7, 15, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
];

/// A thread row's cells, one per entry of `COLUMNS`.
pub fn cells(r: &Row, interval_s: f64) -> Vec<String> {
    let pct = |p: f64| format!("{p:.1}");
    let opt = |p: Option<f64>| p.map_or_else(|| "-".to_string(), pct);
    let w = pkprof_live::wall_text::row_cells(r, interval_s);
    // wall_text: id, COMMAND, RUN WAIT IO NET IPC LOCK SLEEP POLL OTHER P50 P99 MAX WALL.
    let other_in = (r.other_fns.iter().take(3))
        .map(|f| format!("{} {}", f.function, short(f.ns)))
        .collect::<Vec<_>>()
        .join(", ");
    vec![
        w[0].clone(),
        w[1].clone(),
        w[2].clone(),
        opt(r.user_pct),
        opt(r.sys_pct),
        pct(r.irq_billed_pct),
        w[3].clone(),
        w[11].clone(),
        w[12].clone(),
        w[13].clone(),
        w[4].clone(),
        w[5].clone(),
        w[6].clone(),
        w[7].clone(),
        w[8].clone(),
        w[9].clone(),
        w[10].clone(),
        w[14].clone(),
        pct(r.net_pct),
        pct(r.block_pct),
        pct(r.workq_pct),
        pct(r.server_pct),
        other_in,
    ]
}

/// `609ms`, `1.2s`, `850us`.
fn short(ns: u64) -> String {
    match ns {
        0..1_000_000 => format!("{}us", ns / 1_000),
        1_000_000..10_000_000_000 => format!("{}ms", ns / 1_000_000),
        _ => format!("{:.0}s", ns as f64 / 1e9),
    }
}

/// The threads of `pid` in `frame` (per-thread rows), busiest first as the frame has them.
pub fn threads(frame: &Interval, pid: u32) -> Vec<&Row> {
    (frame.rows.iter())
        .filter(|r| r.pid == pid && r.tid.is_some())
        .collect()
}

/// The breakdown table of process `pid` (its threads, once the frame has per-thread rows).
pub fn table(frame: &Interval, pid: u32) -> Table<'static> {
    let header = TableRow::new(COLUMNS.iter().enumerate().map(|(i, n)| {
        if i == 1 || i == COLUMNS.len() - 1 {
            Cell::from(*n)
        } else {
            Cell::from(Line::from(*n).alignment(Alignment::Right))
        }
    }))
    .style(Style::new().add_modifier(Modifier::REVERSED));
    let rows = threads(frame, pid);
    let comm = (rows.iter().find(|r| r.tid == Some(pid)))
        .map_or(String::new(), |r| format!(" ({})", r.comm));
    let title = if frame.per_thread {
        format!(
            " threads of PID {pid}{comm}, % of the interval: RUN + WAIT + IO..OTHER = WALL; \
             b or Esc: back "
        )
    } else {
        format!(" threads of PID {pid}: from the next refresh; b or Esc: back ")
    };
    let body = rows.into_iter().map(|r| {
        let c = cells(r, frame.interval_s);
        let last = c.len() - 1;
        let row = TableRow::new(c.into_iter().enumerate().map(move |(i, t)| {
            if i == 1 || i == last {
                Cell::from(t)
            } else {
                Cell::from(Text::from(t).alignment(Alignment::Right))
            }
        }));
        if r.exited {
            row.style(Style::new().add_modifier(Modifier::DIM))
        } else {
            row
        }
    });
    let mut widths: Vec<Constraint> = WIDTHS.iter().map(|w| Constraint::Length(*w)).collect();
    widths.push(Constraint::Min(10));
    Table::new(body, widths)
        .header(header)
        .block(Block::bordered().title(title))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pkprof_accounting::{Counters, OtherFn, WallCounters};

    #[test]
    fn a_threads_cells_add_up_to_its_wall_share() {
        let mut wall = WallCounters {
            wall_ns: 500_000_000,
            running_ns: 100_000_000,
            runq_ns: 50_000_000,
            ..Default::default()
        };
        wall.blocked_ns[6] = 350_000_000; // other
        let r = Row {
            pid: 7,
            tid: Some(8),
            comm: "w".into(),
            irq_billed_pct: 0.5,
            server_pct: 2.0,
            delta: Counters {
                wall,
                ..Default::default()
            },
            other_fns: vec![OtherFn {
                function: "do_wait".into(),
                ns: 609_700_000,
                count: 3,
                ..Default::default()
            }],
            ..Default::default()
        };
        let c = cells(&r, 1.0);
        assert_eq!(c.len(), COLUMNS.len());
        let at = |name: &str| c[COLUMNS.iter().position(|n| *n == name).unwrap()].clone();
        assert_eq!(
            (at("RUN%"), at("WAIT%"), at("OTHER%"), at("WALL%")),
            ("10.0".into(), "5.0".into(), "35.0".into(), "50.0".into())
        );
        assert_eq!(
            (at("USER%"), at("IRQ%"), at("+SRV%")),
            ("-".into(), "0.5".into(), "2.0".into())
        );
        assert_eq!(at("OTHER IN (since start)"), "do_wait 609ms");
    }
}
