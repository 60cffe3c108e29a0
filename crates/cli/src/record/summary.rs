//! The end-of-run summary on the terminal: where the time went (exact buckets and sample buckets),
//! the top entries by self samples with their PIDu:/PIDk: names, losses, and pkprof's own cost.

use std::collections::HashMap;
use std::fmt::Write as _;

use pkprof_profile::{Bucket, Profile};
use pkprof_report::format::percent as pct;
use pkprof_report::header::user_stacks_text;
use pkprof_report::names::{frame_label, NameStyle};

/// Renders the summary of `p` written to `path` (`bytes` long).
pub fn render(p: &Profile, path: &str, bytes: u64, rows: usize, stop: &str) -> String {
    let m = &p.meta;
    let total = p.total_samples();
    let secs = m.end_unix_ns.saturating_sub(m.start_unix_ns) as f64 / 1e9;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "pkprof record: {total} samples in {secs:.1} s at {} Hz on {} CPUs ({stop}); wrote {path} ({:.1} KiB)",
        m.frequency_hz,
        m.cpus,
        bytes as f64 / 1024.0
    );
    let t = &m.cpu_time;
    let busy = t.total_ns.saturating_sub(t.idle_ns);
    let _ = writeln!(
        out,
        "exact CPU: processes {:.1}%  other {:.1}%  kernel {:.1}%  idle {:.1}% of all; processes {:.1}% of non-idle",
        pct(t.processes_ns, t.total_ns),
        pct(t.other_ns, t.total_ns),
        pct(t.kernel_ns, t.total_ns),
        pct(t.idle_ns, t.total_ns),
        pct(t.processes_ns, busy)
    );
    if t.untracked_ns > 0 {
        let _ = writeln!(
            out,
            "untracked: {:.1}% of all ran in threads the full thread table could not hold (in other, or processes for a target's; raise --max-threads)",
            pct(t.untracked_ns, t.total_ns)
        );
    }
    let mut by_bucket: HashMap<Bucket, u64> = HashMap::new();
    for s in &p.samples {
        *by_bucket.entry(s.bucket).or_default() += s.count;
    }
    let b = |k| by_bucket.get(&k).copied().unwrap_or(0);
    let _ = writeln!(
        out,
        "samples:   processes {}  other {}  kernel {}  idle {}",
        b(Bucket::Process),
        b(Bucket::Other),
        b(Bucket::Kernel),
        b(Bucket::Idle)
    );
    let l = &m.lost;
    let hint = |n: u64, option: &str| {
        if n > 0 {
            format!(" (raise {option})")
        } else {
            String::new()
        }
    };
    let _ = writeln!(
        out,
        "lost:      ring buffer full {}; unreadable stacks {} kernel / {} user; held samples expired {}; without maps {}; missed BPF events {}; thread table full {}{}; target table full {}{}",
        l.ring_buffer_full,
        l.kernel_stack_errors,
        l.user_stack_errors,
        l.held_expired,
        l.maps_missing,
        l.bpf_missed_events,
        l.thread_table_full,
        hint(l.thread_table_full, "--max-threads"),
        l.target_table_full,
        hint(l.target_table_full, "--max-targets"),
    );
    if let Some(o) = &p.off_cpu {
        let samples: u64 = o.groups.iter().map(|g| g.count).sum();
        let ns: u64 = o.groups.iter().map(|g| g.weight_ns).sum();
        let c = &o.counts;
        let _ = writeln!(
            out,
            "off-cpu:   {samples} samples for {:.3} s blocked, of {} blocks ({} chosen at a {} µs period, doubled {} times at {}/s per CPU); lost: ring buffer full {}, not followed {}; without user stack: exited {}, no rseq {}; wake chains cut at {} {}; task works {:.3} ms",
            ns as f64 / 1e9,
            c.blocks,
            c.chosen,
            o.period_ns / 1000,
            c.period_raised,
            o.max_rate,
            c.ring_full,
            c.no_storage,
            c.exited_pending,
            c.no_rseq,
            o.wake_chain,
            c.chain_truncated,
            c.task_work_ns as f64 / 1e6,
        );
        // Taken at rseq's return to user mode, a thread without an rseq area (Go, static musl,
        // glibc before 2.35) has no user stack: say so when that is a good part of them.
        if c.chosen > 0 && c.no_rseq * 10 >= c.chosen {
            let _ = writeln!(
                out,
                "warning:   {} of {} chosen off-CPU blocks have no user stack: their threads registered no rseq area (Go, static musl, glibc < 2.35), and this kernel takes off-CPU user stacks at rseq's return to user mode; --off-cpu-user-stacks sys-exit takes them for every thread, at a higher cost (docs/design.md, \"Off-CPU samples\")",
                c.no_rseq, c.chosen
            );
        }
    }
    // The same line as every report's header (pkprof_report::header).
    if let Some(u) = user_stacks_text(&m.user_stacks) {
        let _ = writeln!(out, "{u}");
    }
    let o = &m.overhead;
    let bpf = match (o.bpf_run_ns, o.bpf_run_count) {
        (Some(ns), Some(runs)) => format!("{:.2}% ({runs} runs)", pct(ns, (secs * 1e9) as u64)),
        // The kernel did not time them (no CAP_SYS_ADMIN, or --no-bpf-stats): 0 would read as free.
        _ => "not measured".to_string(),
    };
    let _ = writeln!(
        out,
        "overhead:  pkprof {:.2}% of one CPU, its BPF programs {bpf}; symbolization {:.2} s",
        pct(o.pkprof_cpu_ns, (secs * 1e9) as u64),
        o.symbolize_ns as f64 / 1e9
    );
    for w in &m.warnings {
        let _ = writeln!(out, "warning:   {w}");
    }

    // Self samples by leaf frame label.
    let mut self_counts: HashMap<String, u64> = HashMap::new();
    for s in &p.samples {
        let label = match p.stacks[s.stack as usize].frames.last() {
            Some(f) => frame_label(s.pid, s.bucket, &p.frames[*f as usize], NameStyle::Labelled),
            None if s.bucket == Bucket::Idle => "IDLE".to_string(),
            None => format!("{}: [no stack]", s.pid),
        };
        *self_counts.entry(label).or_default() += s.count;
    }
    let mut top: Vec<_> = self_counts.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let _ = writeln!(
        out,
        "\n  self%   samples  name (top {rows} by self samples)"
    );
    for (name, n) in top.into_iter().take(rows) {
        let _ = writeln!(out, "{:6.1}%  {:8}  {name}", pct(n, total), n);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pkprof_profile::Truncation;

    #[test]
    fn user_stack_line_follows_the_losses() {
        let mut p = Profile::default();
        p.meta.user_stacks.add(None, 9_812);
        p.meta.user_stacks.add(Some(Truncation::NoUnwindInfo), 70);
        p.meta.user_stacks.add(Some(Truncation::StackWindow), 120);
        let text = render(&p, "x.pkprof", 0, 5, "command exited");
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("user stacks:"))
            .expect(&text);
        assert_eq!(
            lines[at],
            "user stacks: 9,812 complete (98.1%), truncated 190: 120 stack window, 70 no unwind info"
        );
        assert!(lines[at - 1].starts_with("lost:"), "{text}");
        // A profile that counted no user stack (nothing to say) has no such line.
        let text = render(&Profile::default(), "x.pkprof", 0, 5, "command exited");
        assert!(!text.contains("user stacks:"), "{text}");
    }
}
