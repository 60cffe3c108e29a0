//! Prometheus text exposition (format 0.0.4) of the latest frame, with bounded cardinality.
//!
//! Written by hand rather than through a metrics registry crate: the series are a fresh, bounded
//! snapshot each scrape (top N processes by cumulative CPU, plus one `pid="other"` row), which a
//! registry of long-lived metric handles does not model; the format itself is a few lines.
//! Counters: a process's series carries its cumulative totals; when it drops out of the top N or
//! exits, its total moves into `other`.

use std::fmt::Write;

use pkprof_accounting::{Counters, Frame, Row, SOFTIRQ_NAMES};

pub struct Exposition {
    top_n: usize,
    /// Totals of processes that have exited: they stay in `other` for good.
    exited: Counters,
    text: String,
}

impl Exposition {
    pub fn new(top_n: usize) -> Self {
        Exposition {
            top_n,
            exited: Counters::default(),
            text: String::from("# no frame yet\n"),
        }
    }

    /// The exposition of the last frame given to `update`.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn update(&mut self, frame: &Frame) {
        let mut rows: Vec<&Row> = frame.rows.iter().collect();
        rows.sort_by(|a, b| {
            b.total
                .on_cpu_ns()
                .cmp(&a.total.on_cpu_ns())
                .then(a.pid.cmp(&b.pid))
        });
        let cut = rows.len().min(self.top_n);
        let mut other = self.exited;
        for r in &rows[cut..] {
            other.add(&r.total);
        }
        let mut s = String::with_capacity(8192);
        let split = frame.split_modes;
        let _ = writeln!(s, "# HELP pkprof_cpu_seconds_total CPU time while the process was current, by kind: its own time (task, or user/sys/unsplit with --syscalls) and interrupt work Linux billed to it (hardirq, softirq).");
        let _ = writeln!(s, "# TYPE pkprof_cpu_seconds_total counter");
        let id = |r: &Row| r.tid.unwrap_or(r.pid).to_string();
        for r in &rows[..cut] {
            write_kinds(&mut s, &id(r), &r.comm, &r.total, split);
        }
        write_kinds(&mut s, "other", "other", &other, split);

        let _ = writeln!(s, "# HELP pkprof_cpu_mode_seconds_total Exclusive time of each CPU by context; the modes add up to wall time.");
        let _ = writeln!(s, "# TYPE pkprof_cpu_mode_seconds_total counter");
        for c in &frame.cpus {
            let t = &c.total;
            for (mode, ns) in [
                ("idle", t.idle_ns),
                ("task", t.task_ns),
                ("hardirq", t.hardirq_ns),
                ("softirq", t.softirq_total_ns()),
            ] {
                let _ = writeln!(
                    s,
                    "pkprof_cpu_mode_seconds_total{{cpu=\"{}\",mode=\"{mode}\"}} {}",
                    c.cpu,
                    secs(ns)
                );
            }
        }
        let _ = writeln!(
            s,
            "# HELP pkprof_softirq_seconds_total Softirq time of each CPU by vector."
        );
        let _ = writeln!(s, "# TYPE pkprof_softirq_seconds_total counter");
        for c in &frame.cpus {
            for (v, ns) in c.total.softirq_ns.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "pkprof_softirq_seconds_total{{cpu=\"{}\",vec=\"{}\"}} {}",
                    c.cpu,
                    SOFTIRQ_NAMES[v],
                    secs(*ns)
                );
            }
        }
        let _ = writeln!(
            s,
            "# HELP pkprof_lost_events_total Events pkprof could not account, by reason."
        );
        let _ = writeln!(s, "# TYPE pkprof_lost_events_total counter");
        for (reason, v) in frame.lost.fields() {
            let _ = writeln!(s, "pkprof_lost_events_total{{reason=\"{reason}\"}} {v}");
        }
        let _ = writeln!(s, "# HELP pkprof_bpf_prog_run_seconds_total Run time of pkprof's BPF programs (0 without --bpf-stats).");
        let _ = writeln!(s, "# TYPE pkprof_bpf_prog_run_seconds_total counter");
        for p in &frame.progs {
            let _ = writeln!(
                s,
                "pkprof_bpf_prog_run_seconds_total{{prog=\"{}\"}} {}",
                escape(&p.name),
                secs(p.run_ns)
            );
        }
        let _ = writeln!(s, "# HELP pkprof_self_cpu_percent pkprof's own CPU over the last interval, percent of one CPU.");
        let _ = writeln!(s, "# TYPE pkprof_self_cpu_percent gauge");
        let _ = writeln!(s, "pkprof_self_cpu_percent {}", frame.self_usage.cpu_pct);
        let _ = writeln!(s, "# HELP pkprof_self_rss_bytes pkprof's resident memory.");
        let _ = writeln!(s, "# TYPE pkprof_self_rss_bytes gauge");
        let _ = writeln!(s, "pkprof_self_rss_bytes {}", frame.self_usage.rss_bytes);
        self.text = s;

        for r in frame.rows.iter().filter(|r| r.exited) {
            self.exited.add(&r.total);
        }
    }
}

fn write_kinds(s: &mut String, pid: &str, comm: &str, c: &Counters, split: bool) {
    let comm = escape(comm);
    let mut kind = |k: &str, ns: u64| {
        let _ = writeln!(
            s,
            "pkprof_cpu_seconds_total{{pid=\"{pid}\",comm=\"{comm}\",kind=\"{k}\"}} {}",
            secs(ns)
        );
    };
    if split {
        kind("user", c.user_ns);
        kind("sys", c.sys_ns);
        kind("unsplit", c.unsplit_ns);
    } else {
        kind("task", c.task_ns);
    }
    kind("hardirq", c.hardirq_ns);
    kind("softirq", c.softirq_ns.iter().sum());
}

fn secs(ns: u64) -> String {
    format!("{:.9}", ns as f64 / 1e9)
}

/// Label value escaping of the text format: backslash, double quote, newline.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
