//! The agent's own health: what `pkprof ctl status` prints and the `pkprof_agent_*` series of
//! `/metrics` (uptime, windows, samples, losses, memory, own CPU, BPF run time, store, sinks).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use pkprof_agent::{Config, MemoryWindows, Store, WindowSink};
use pkprof_profile::Profile;

use crate::self_usage::{own_cpu_ns, rss_bytes};

pub struct Health {
    started: Instant,
    cpu_at_start: u64,
    bpf_stats: bool,
    pub windows: u64,
    samples: u64,
    /// Samples dropped by the window limits, and the losses the profiles count.
    dropped: u64,
    lost: u64,
    bpf_run_ns: u64,
    bpf_runs: u64,
    /// The open window's size now (stacks, groups) and its drops.
    open: (usize, usize, u64),
    last_window_cpu_ns: u64,
    last_window_ns: u64,
    store_errors: u64,
    last_store_error: Option<String>,
    /// How long closing the last window took (symbolizing, writing).
    last_close: Duration,
    /// The symbolizer after the last trim: files held open, bytes of unwind tables; and what the
    /// trims freed so far: exited processes, files.
    pub symbolizer: SymbolizerState,
}

/// The symbolizer's size after a window's trim (docs/design.md, "The agent / Bounded memory").
#[derive(Clone, Copy, Debug, Default)]
pub struct SymbolizerState {
    pub open_files: usize,
    pub unwind_bytes: usize,
    pub processes_freed: u64,
    pub files_freed: u64,
}

impl Health {
    pub fn new(bpf_stats: bool) -> Self {
        Health {
            started: Instant::now(),
            cpu_at_start: own_cpu_ns(),
            bpf_stats,
            windows: 0,
            samples: 0,
            dropped: 0,
            lost: 0,
            bpf_run_ns: 0,
            bpf_runs: 0,
            open: (0, 0, 0),
            last_window_cpu_ns: 0,
            last_window_ns: 0,
            store_errors: 0,
            last_store_error: None,
            last_close: Duration::ZERO,
            symbolizer: SymbolizerState::default(),
        }
    }

    pub fn open_window(&mut self, stacks: usize, groups: usize, dropped: u64) {
        self.open = (stacks, groups, dropped);
    }

    pub fn closed(&mut self, p: &Profile, dropped: u64, own_cpu_ns: u64, took: Duration) {
        self.last_close = took;
        self.windows += 1;
        self.samples += p.total_samples();
        self.dropped += dropped;
        self.lost += p.meta.lost.parts().iter().map(|(_, n)| n).sum::<u64>();
        self.bpf_run_ns += p.meta.overhead.bpf_run_ns.unwrap_or(0);
        self.bpf_runs += p.meta.overhead.bpf_run_count.unwrap_or(0);
        self.last_window_cpu_ns = own_cpu_ns;
        self.last_window_ns = p.meta.end_unix_ns.saturating_sub(p.meta.start_unix_ns);
    }

    pub fn store_error(&mut self, e: String) {
        if self.last_store_error.as_ref() != Some(&e) {
            eprintln!("pkprof: {e}");
        }
        self.store_errors += 1;
        self.last_store_error = Some(e);
    }

    fn own_cpu_pct(&self) -> f64 {
        let wall = self.started.elapsed().as_nanos().max(1) as f64;
        own_cpu_ns().saturating_sub(self.cpu_at_start) as f64 * 100.0 / wall
    }

    fn bpf_pct(&self) -> f64 {
        let wall = self.started.elapsed().as_nanos().max(1) as f64;
        self.bpf_run_ns as f64 * 100.0 / wall
    }

    pub fn status_text(
        &self,
        c: &Config,
        store: &Option<Store>,
        memory: &MemoryWindows,
        sinks: &[Box<dyn WindowSink>],
        sampling: bool,
    ) -> String {
        let mut t = String::new();
        let up = self.started.elapsed().as_secs();
        let _ = writeln!(
            t,
            "uptime       {}h{:02}m{:02}s, pid {}",
            up / 3600,
            up / 60 % 60,
            up % 60,
            std::process::id()
        );
        let _ = writeln!(
            t,
            "sampling     {} at {} Hz per CPU, windows of {} s",
            if sampling {
                "on"
            } else {
                "off (accounting on)"
            },
            c.frequency_hz,
            c.window.as_secs_f64()
        );
        let _ = writeln!(
            t,
            "windows      {} closed (the last in {:.0} ms); open window: {} stacks, {} groups \
             (limits {} / {})",
            self.windows,
            self.last_close.as_secs_f64() * 1e3,
            self.open.0,
            self.open.1,
            c.limits.max_stacks,
            c.limits.max_groups
        );
        let _ = writeln!(
            t,
            "samples      {} in closed windows; dropped by limits {}; lost {}",
            self.samples,
            self.dropped + self.open.2,
            self.lost
        );
        let y = &self.symbolizer;
        let _ = writeln!(
            t,
            "memory       {} KiB resident, {} KiB heap in use; symbolizer {} files open, {} KiB \
             unwind tables; freed {} exited processes, {} files",
            rss_bytes() >> 10,
            crate::self_usage::heap_in_use_bytes() >> 10,
            y.open_files,
            y.unwind_bytes >> 10,
            y.processes_freed,
            y.files_freed
        );
        let last = if self.last_window_ns > 0 {
            format!(
                " (last window {:.3}%)",
                self.last_window_cpu_ns as f64 * 100.0 / self.last_window_ns as f64
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            t,
            "own CPU      {:.3}% of one CPU since start{last}",
            self.own_cpu_pct()
        );
        if self.bpf_stats {
            let _ = writeln!(
                t,
                "BPF          {:.3}% of one CPU in closed windows ({} runs)",
                self.bpf_pct(),
                self.bpf_runs
            );
        } else {
            let _ = writeln!(
                t,
                "BPF          run time not measured (bpf_stats = true or --bpf-stats to measure)"
            );
        }
        match store {
            Some(s) => {
                let _ = writeln!(
                    t,
                    "store        {}: {} windows, {} KiB; {} write errors{}; {} expired",
                    s.dir().display(),
                    s.entries().len(),
                    s.bytes() >> 10,
                    s.write_errors,
                    self.last_store_error
                        .as_ref()
                        .map(|e| format!(" (last: {e})"))
                        .unwrap_or_default(),
                    s.expired
                );
            }
            None => {
                let _ = writeln!(t, "store        none; {}", memory.status());
            }
        }
        if sinks.is_empty() {
            let _ = writeln!(t, "push         none");
        }
        for s in sinks {
            let _ = writeln!(t, "push         {}: {}", s.name(), s.status());
        }
        t
    }

    /// The `pkprof_agent_*` series for `/metrics`.
    pub fn metrics(
        &self,
        store: &Option<Store>,
        sinks: &[Box<dyn WindowSink>],
        sampling: bool,
    ) -> String {
        let mut t = String::new();
        let mut m = |name: &str, kind: &str, help: &str, v: String| {
            let _ = writeln!(t, "# HELP pkprof_agent_{name} {help}");
            let _ = writeln!(t, "# TYPE pkprof_agent_{name} {kind}");
            let _ = writeln!(t, "pkprof_agent_{name} {v}");
        };
        m(
            "uptime_seconds",
            "gauge",
            "Seconds since the agent started.",
            format!("{:.3}", self.started.elapsed().as_secs_f64()),
        );
        m(
            "sampling",
            "gauge",
            "1 while stack sampling is on (pkprof ctl start/stop).",
            u8::from(sampling).to_string(),
        );
        m(
            "windows_total",
            "counter",
            "Windows closed.",
            self.windows.to_string(),
        );
        m(
            "samples_total",
            "counter",
            "Samples in closed windows.",
            self.samples.to_string(),
        );
        m(
            "samples_dropped_total",
            "counter",
            "Samples not kept because a window limit was reached.",
            self.dropped.to_string(),
        );
        m(
            "lost_total",
            "counter",
            "Events and samples the profiles count as lost.",
            self.lost.to_string(),
        );
        m(
            "resident_bytes",
            "gauge",
            "The agent's resident memory.",
            rss_bytes().to_string(),
        );
        m(
            "symbolizer_open_files",
            "gauge",
            "Files the symbolizer holds open (mapped by processes alive at the last window).",
            self.symbolizer.open_files.to_string(),
        );
        m(
            "cpu_seconds_total",
            "counter",
            "The agent's own CPU time (user + system) since it started.",
            format!(
                "{:.6}",
                own_cpu_ns().saturating_sub(self.cpu_at_start) as f64 / 1e9
            ),
        );
        if self.bpf_stats {
            m(
                "bpf_run_seconds_total",
                "counter",
                "Run time of pkprof's BPF programs in closed windows.",
                format!("{:.6}", self.bpf_run_ns as f64 / 1e9),
            );
        }
        if let Some(s) = store {
            m(
                "store_bytes",
                "gauge",
                "Bytes in the local store.",
                s.bytes().to_string(),
            );
            m(
                "store_windows",
                "gauge",
                "Windows in the local store.",
                s.entries().len().to_string(),
            );
            m(
                "store_write_errors_total",
                "counter",
                "Windows that could not be written to the store.",
                s.write_errors.to_string(),
            );
        }
        for s in sinks {
            t.push_str(&s.metrics());
        }
        t
    }
}
