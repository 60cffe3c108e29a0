//! The plain-text frame, laid out like `top -b`: a per-CPU header, then one row per process.

use std::fmt::Write;

use pkprof_accounting::{CpuRow, Interval, Row, SOFTIRQ_NAMES};

/// Renders a frame; `max_rows` bounds the process rows (None: all).
pub fn render(frame: &Interval, max_rows: Option<usize>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", title_line(frame));
    for c in &frame.cpus {
        let _ = writeln!(s, "{}", cpu_line(c));
    }
    if let Some(line) = lost_line(frame) {
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(s, "{}", self_line(frame));
    if let Some(line) = syscall_summary(frame, 6) {
        let _ = writeln!(s, "{line}");
    }
    s.push('\n');
    let id = if frame.per_thread { "TID" } else { "PID" };
    let _ = writeln!(s, "{}", buckets_line(frame));
    let _ = write!(s, "{id:>8} {:<16}", COLUMNS[0]);
    for (i, name) in COLUMNS[1..].iter().enumerate() {
        let _ = write!(s, " {name:>w$}", w = column_width(i + 1));
    }
    s.push('\n');
    for r in frame.rows.iter().take(max_rows.unwrap_or(usize::MAX)) {
        let cells = row_cells(r);
        let _ = write!(s, "{:>8} {:<16}", cells[0], cells[1]);
        for (i, cell) in cells[2..].iter().enumerate() {
            let _ = write!(s, " {cell:>w$}", w = column_width(i + 1));
        }
        let _ = writeln!(s, "{}", if r.exited { " (exited)" } else { "" });
    }
    s
}

/// Where all CPU time since attach went, in percent of wall time x CPUs.
pub fn buckets_line(frame: &Interval) -> String {
    let b = &frame.buckets;
    let p = |ns: u64| ns as f64 * 100.0 / b.wall_ns.max(1) as f64;
    let mut line = format!(
        "since start: processes {:.1}%, other {:.1}%, KERNEL {:.1}%, idle {:.1}%, in flight {:.2}%",
        p(b.processes_ns),
        p(b.other_ns),
        p(b.kernel_ns),
        p(b.idle_ns),
        p(b.in_flight_ns)
    );
    if b.unreported_ns > 0 {
        line.push_str(&format!(
            " (other: {:.2}% after unreported switches)",
            p(b.unreported_ns)
        ));
    }
    if b.untracked_ns > 0 {
        line.push_str(&format!(
            " (other: {:.2}% of threads the full thread table could not hold)",
            p(b.untracked_ns)
        ));
    }
    if frame.tags.expired > 0 {
        line.push_str(&format!(
            "; {} expired tags ({:.3} s to KERNEL)",
            frame.tags.expired,
            frame.tags.expired_ns as f64 / 1e9
        ));
    }
    line
}

/// Width of `COLUMNS[i]` in the text frame: 6, or its title's if longer; COST TIME+ 11.
fn column_width(i: usize) -> usize {
    if COLUMNS[i] == "COST TIME+" {
        11
    } else {
        COLUMNS[i].len().max(6)
    }
}

/// Column titles after the PID/TID column, shared by the text frame and the TUI. WAIT% and
/// BLOCKED% are wall-time classes (docs/design.md, "Wall time"): runnable waiting for a CPU, and
/// blocked, percent of the interval.
pub const COLUMNS: [&str; 14] = [
    "COMMAND",
    "CPU%",
    "USER%",
    "SYS%",
    "OWN%",
    "+NET%",
    "+BLK%",
    "+WQ%",
    "+SRV%",
    "=COST%",
    "BILLED",
    "COST TIME+",
    "WAIT%",
    "BLOCKED%",
];

/// A row's cells: id, then one per entry of `COLUMNS`. USER%/SYS% read `-` when not measured.
pub fn row_cells(r: &Row) -> [String; 15] {
    let pct = |p: f64| format!("{p:.1}");
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), pct);
    [
        r.tid.unwrap_or(r.pid).to_string(),
        r.comm.clone(),
        pct(r.cpu_pct),
        opt(r.user_pct),
        opt(r.sys_pct),
        pct(r.own_pct),
        pct(r.net_pct),
        pct(r.block_pct),
        pct(r.workq_pct),
        pct(r.server_pct),
        pct(r.cost_pct),
        pct(r.billed_for_others_pct),
        format_time(r.total.cost_ns() as f64 / 1e9),
        pct(r.wait_pct),
        pct(r.blocked_pct),
    ]
}

/// `MM:SS.hh`, as top's TIME+.
fn format_time(secs: f64) -> String {
    let m = (secs / 60.0).floor();
    format!("{}:{:05.2}", m as u64, secs - m * 60.0)
}

/// The most frequent syscalls of the shown processes (syscall mode), cumulative exact counts:
/// `syscalls: 4321 read (pid 77), ...`. None without syscall data.
pub fn syscall_summary(frame: &Interval, n: usize) -> Option<String> {
    if frame.syscalls.is_empty() {
        return None;
    }
    let parts: Vec<String> = frame
        .syscalls
        .iter()
        .take(n)
        .map(|c| format!("{} {} (pid {})", c.count, c.name, c.pid))
        .collect();
    Some(format!("syscalls since start: {}", parts.join(", ")))
}

/// `pkprof top - 1.0s interval, exact accounting ...`
pub fn title_line(frame: &Interval) -> String {
    format!(
        "pkprof top - {:.1}s interval, exact accounting{}",
        frame.interval_s,
        if frame.split_modes {
            ", user/sys measured"
        } else {
            " (user/sys split not measured: use --syscalls)"
        }
    )
}

/// One CPU: busy / idle / irq / softirq shares, and the softirq vectors of at least 0.05%.
pub fn cpu_line(c: &CpuRow) -> String {
    let mut line = format!(
        "%Cpu{:<3}: {:5.1} busy, {:5.1} idle, {:5.1} irq, {:5.1} softirq",
        c.cpu, c.busy_pct, c.idle_pct, c.irq_pct, c.softirq_pct
    );
    let mut vecs: Vec<(usize, f64)> = c
        .softirq_pct_by_vec
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, p)| *p >= 0.05)
        .collect();
    vecs.sort_by(|a, b| b.1.total_cmp(&a.1));
    if !vecs.is_empty() {
        let parts: Vec<String> = vecs
            .iter()
            .map(|(v, p)| format!("{} {:.1}", SOFTIRQ_NAMES[*v], p))
            .collect();
        let _ = write!(line, " ({})", parts.join(", "));
    }
    line
}

/// `LOST events: name=count ...`, or None when nothing was lost.
pub fn lost_line(frame: &Interval) -> Option<String> {
    (frame.lost.total() > 0).then(|| {
        let parts: Vec<String> = frame
            .lost
            .fields()
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("LOST events: {}", parts.join(" "))
    })
}

/// pkprof's own CPU and memory.
pub fn self_line(frame: &Interval) -> String {
    format!(
        "pkprof itself: {:.1}% CPU, {} MiB RSS",
        frame.self_usage.cpu_pct,
        frame.self_usage.rss_bytes / (1024 * 1024)
    )
}
