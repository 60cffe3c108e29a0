//! The per-row wall-time breakdown (`pkprof top --batch --wall`; docs/design.md, "Wall time"):
//! for each process (or thread with -H), over the interval, the share of one thread's wall time
//! spent running, waiting for a CPU and blocked by reason, and its runqueue waits' p50, p99 and
//! longest. The classes of a single thread add up to 100% of the time it was followed.

use std::fmt::Write;

use pkprof_accounting::{Interval, Row, BLOCK_REASONS};

use crate::text::title_line;

/// Column titles after the PID/TID column.
pub const WALL_COLUMNS: [&str; 14] = [
    "COMMAND", "RUN%", "WAIT%", "IO%", "NET%", "IPC%", "LOCK%", "SLEEP%", "POLL%", "OTHER%", "P50",
    "P99", "MAX", "WALL",
];

/// Renders a frame as the wall-time breakdown; `max_rows` bounds the rows (None: all).
pub fn render(frame: &Interval, max_rows: Option<usize>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", title_line(frame));
    let _ = writeln!(
        s,
        "wall time by class over the interval, % of one thread; runqueue waits ended: p50, p99 \
         (bucket bounds), longest since start"
    );
    let id = if frame.per_thread { "TID" } else { "PID" };
    let _ = write!(s, "{id:>8} {:<16}", WALL_COLUMNS[0]);
    for name in &WALL_COLUMNS[1..] {
        let _ = write!(s, " {name:>7}");
    }
    s.push('\n');
    for r in frame.rows.iter().take(max_rows.unwrap_or(usize::MAX)) {
        let cells = row_cells(r, frame.interval_s);
        let _ = write!(s, "{:>8} {:<16}", cells[0], cells[1]);
        for cell in &cells[2..] {
            let _ = write!(s, " {cell:>7}");
        }
        let _ = writeln!(s, "{}", if r.exited { " (exited)" } else { "" });
    }
    s
}

/// A row's cells: id, COMMAND, then one per entry of `WALL_COLUMNS` after it.
pub fn row_cells(r: &Row, interval_s: f64) -> [String; 15] {
    let w = &r.delta.wall;
    let pct = |ns: u64| format!("{:.1}", ns as f64 * 100.0 / (interval_s * 1e9).max(1.0));
    let dur = |ns: Option<u64>| ns.map_or_else(|| "-".to_string(), duration);
    let b = |reason: &str| {
        let i = BLOCK_REASONS.iter().position(|n| *n == reason).unwrap_or(0);
        pct(w.blocked_ns[i])
    };
    [
        r.tid.unwrap_or(r.pid).to_string(),
        r.comm.clone(),
        pct(w.running_ns),
        pct(w.runq_ns),
        b("io"),
        b("net"),
        b("ipc"),
        b("lock"),
        b("sleep"),
        b("poll"),
        b("other"),
        dur(r.runq_p50_ns),
        dur(r.runq_p99_ns),
        dur((r.runq_max_ns > 0).then_some(r.runq_max_ns)),
        pct(w.wall_ns),
    ]
}

/// A short duration: `850ns`, `12us`, `3.4ms`, `1.20s`.
fn duration(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns}ns"),
        1_000..1_000_000 => format!("{}us", ns / 1_000),
        1_000_000..1_000_000_000 => format!("{:.1}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pkprof_accounting::{Counters, WallCounters};

    #[test]
    fn a_threads_classes_are_shares_of_the_interval_and_waits_are_durations() {
        let mut wall = WallCounters {
            wall_ns: 1_000_000_000,
            running_ns: 250_000_000,
            runq_ns: 50_000_000,
            ..Default::default()
        };
        wall.blocked_ns[3] = 600_000_000; // lock
        wall.blocked_ns[4] = 100_000_000; // sleep
        let r = Row {
            pid: 7,
            tid: Some(8),
            comm: "w".into(),
            delta: Counters {
                wall,
                ..Default::default()
            },
            runq_p50_ns: Some(24_576),
            runq_p99_ns: Some(3_145_728),
            runq_max_ns: 1_500_000_000,
            ..Default::default()
        };
        let c = row_cells(&r, 1.0);
        assert_eq!(
            c,
            [
                "8", "w", "25.0", "5.0", "0.0", "0.0", "0.0", "60.0", "10.0", "0.0", "0.0", "24us",
                "3.1ms", "1.50s", "100.0"
            ]
            .map(String::from)
        );
        let without = Row {
            runq_p50_ns: None,
            runq_max_ns: 0,
            ..r
        };
        let c = row_cells(&without, 1.0);
        assert_eq!((c[11].as_str(), c[13].as_str()), ("-", "-"));
    }
}
