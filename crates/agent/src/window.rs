//! Windows: what the agent hands on when one closes ([`WindowSink`]: the local store, the memory
//! ring for `ctl dump` without a store, a fleet pusher), and the per-window exact figures made from
//! the accounting's totals since attach ([`Deltas`]).

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use pkprof_profile::{CpuTime, Lost, ProcessInfo, Profile};

/// Where closed windows go. `window` is called on the agent's thread as each window closes: it
/// must not block (a pusher queues and returns; what does not fit is dropped and counted).
pub trait WindowSink: Send {
    /// A short name for `ctl status` (`store`, `otlp`).
    fn name(&self) -> &str;
    /// A closed window: an ordinary profile covering `meta.start_unix_ns..meta.end_unix_ns`.
    fn window(&mut self, p: &Profile);
    /// One line of state for `ctl status` (queue, drops, last error); empty when nothing to say.
    fn status(&self) -> String {
        String::new()
    }
    /// Prometheus lines of the sink's own health (`pkprof_agent_*`), for `/metrics`.
    fn metrics(&self) -> String {
        String::new()
    }
}

/// The last closed windows in memory (for `ctl dump` when there is no store), bounded by count.
pub struct MemoryWindows {
    max: usize,
    windows: VecDeque<Arc<Profile>>,
}

impl MemoryWindows {
    pub fn new(max: usize) -> Self {
        MemoryWindows {
            max,
            windows: VecDeque::new(),
        }
    }

    /// The windows that overlap `[since_ns, until_ns]`, oldest first.
    pub fn range(&self, since_ns: u64, until_ns: u64) -> Vec<Arc<Profile>> {
        self.windows
            .iter()
            .filter(|p| p.meta.end_unix_ns >= since_ns && p.meta.start_unix_ns <= until_ns)
            .cloned()
            .collect()
    }

    pub fn clear(&mut self) {
        self.windows.clear();
    }
}

impl WindowSink for MemoryWindows {
    fn name(&self) -> &str {
        "memory"
    }

    fn window(&mut self, p: &Profile) {
        if self.max == 0 {
            return;
        }
        while self.windows.len() >= self.max {
            self.windows.pop_front();
        }
        self.windows.push_back(Arc::new(p.clone()));
    }

    fn status(&self) -> String {
        format!("{} of {} windows in memory", self.windows.len(), self.max)
    }
}

/// Turns the accounting's totals since attach into each window's own figures.
#[derive(Default)]
pub struct Deltas {
    /// Each live process's totals at the end of the last window.
    processes: HashMap<u32, ProcessInfo>,
    cpu_time: CpuTime,
    lost: Lost,
}

/// What `now`'s window figures are taken from: its totals at the end of the last window, when
/// they are the same process's.
fn same_process<'a>(now: &ProcessInfo, before: Option<&'a ProcessInfo>) -> Option<&'a ProcessInfo> {
    // Not the command: it changes at exec. A PID reused after its process exited starts fresh
    // (exited processes are forgotten); a total lower than before is another process too.
    before.filter(|b| b.task_ns <= now.task_ns)
}

/// The window's own and served CPU of `now`, given its totals at the last window's end (`same`,
/// from `same_process`), without a copy.
fn window_cpu_ns(now: &ProcessInfo, same: Option<&ProcessInfo>) -> (u64, u64) {
    match same {
        Some(b) => (
            now.task_ns - b.task_ns,
            now.served_ns.saturating_sub(b.served_ns),
        ),
        None => (now.task_ns, now.served_ns),
    }
}

/// `now`'s figures for the window, given its totals at the last window's end (`same`).
fn sub_process(now: &ProcessInfo, same: Option<&ProcessInfo>) -> ProcessInfo {
    let (task_ns, served_ns) = window_cpu_ns(now, same);
    let Some(b) = same else {
        return now.clone();
    };
    ProcessInfo {
        task_ns,
        user_ns: now.user_ns.saturating_sub(b.user_ns),
        sys_ns: now.sys_ns.saturating_sub(b.sys_ns),
        hardirq_ns: now.hardirq_ns.saturating_sub(b.hardirq_ns),
        softirq_ns: now.softirq_ns.saturating_sub(b.softirq_ns),
        served_ns,
        ..now.clone()
    }
}

fn sub_cpu(a: &CpuTime, b: &CpuTime) -> CpuTime {
    CpuTime {
        total_ns: a.total_ns.saturating_sub(b.total_ns),
        idle_ns: a.idle_ns.saturating_sub(b.idle_ns),
        processes_ns: a.processes_ns.saturating_sub(b.processes_ns),
        other_ns: a.other_ns.saturating_sub(b.other_ns),
        kernel_ns: a.kernel_ns.saturating_sub(b.kernel_ns),
        untracked_ns: a.untracked_ns.saturating_sub(b.untracked_ns),
    }
}

/// The kernel's own loss counts are totals since attach; the recording loop's are per window
/// already (they are passed through).
fn sub_kernel_lost(a: &Lost, b: &Lost) -> Lost {
    Lost {
        ring_buffer_full: a.ring_buffer_full.saturating_sub(b.ring_buffer_full),
        bpf_missed_events: a.bpf_missed_events.saturating_sub(b.bpf_missed_events),
        thread_table_full: a.thread_table_full.saturating_sub(b.thread_table_full),
        target_table_full: a.target_table_full.saturating_sub(b.target_table_full),
        ..a.clone()
    }
}

/// A window's processes, and how many were left out by the limit.
pub struct WindowProcesses {
    pub processes: Vec<ProcessInfo>,
    pub left_out: usize,
}

impl Deltas {
    /// This window's share of each process's totals. Processes with no CPU in the window and not
    /// in `sampled` are left out; at most `max` are kept (the busiest), the others counted.
    /// Exited processes are forgotten after this window.
    pub fn processes(
        &mut self,
        totals: &BTreeMap<u32, ProcessInfo>,
        sampled: &dyn Fn(u32) -> bool,
        max: usize,
    ) -> WindowProcesses {
        // Those left out are not copied (under a fork loop most exited idle, and most of the
        // rest do not fit): the window's CPU of each first, then the copies of those kept.
        let mut kept: Vec<(Reverse<u64>, u32, &ProcessInfo, Option<&ProcessInfo>)> = (totals
            .values())
        .filter_map(|p| {
            let same = same_process(p, self.processes.get(&p.pid));
            let (task, served) = window_cpu_ns(p, same);
            let busy = Reverse(task.saturating_add(served));
            (task + served > 0 || sampled(p.pid)).then_some((busy, p.pid, p, same))
        })
        .collect();
        let left_out = kept.len().saturating_sub(max);
        if left_out > 0 {
            // The busiest `max`, the lower PID first among equals (as a stable sort by CPU of
            // the table, in PID order, kept them), then in PID order again.
            kept.select_nth_unstable_by_key(max, |k| (k.0, k.1));
            kept.truncate(max);
            kept.sort_unstable_by_key(|k| k.1);
        }
        let out: Vec<ProcessInfo> = (kept.into_iter())
            .map(|(_, _, p, same)| sub_process(p, same))
            .collect();
        self.processes = totals
            .values()
            .filter(|p| !p.exited)
            .map(|p| (p.pid, p.clone()))
            .collect();
        WindowProcesses {
            processes: out,
            left_out,
        }
    }

    /// This window's exact CPU time by bucket, from the totals since attach.
    pub fn cpu_time(&mut self, total: &CpuTime) -> CpuTime {
        let d = sub_cpu(total, &self.cpu_time);
        self.cpu_time = total.clone();
        d
    }

    /// This window's losses: the kernel's counts from their totals, the loop's as they are.
    pub fn lost(&mut self, total: &Lost) -> Lost {
        let d = sub_kernel_lost(total, &self.lost);
        self.lost = total.clone();
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: u32, comm: &str, task_ns: u64, exited: bool) -> ProcessInfo {
        ProcessInfo {
            pid,
            comm: comm.into(),
            task_ns,
            user_ns: task_ns / 2,
            exited,
            ..ProcessInfo::default()
        }
    }

    #[test]
    fn windows_get_their_own_share() {
        let mut d = Deltas::default();
        let none = |_| false;
        let mut t = BTreeMap::new();
        t.insert(1, proc(1, "a", 100, false));
        t.insert(2, proc(2, "b", 50, false));
        let w = d.processes(&t, &none, 10);
        assert_eq!(
            w.processes.iter().map(|p| p.task_ns).collect::<Vec<_>>(),
            [100, 50]
        );
        t.insert(1, proc(1, "a", 130, false));
        t.insert(2, proc(2, "b", 50, true)); // idle, exited
        t.insert(3, proc(3, "c", 7, false));
        let w = d.processes(&t, &none, 10);
        let got: Vec<(u32, u64)> = w.processes.iter().map(|p| (p.pid, p.task_ns)).collect();
        assert_eq!(got, [(1, 30), (3, 7)]);
        // An exec changes the command, not the process: still a difference.
        t.insert(1, proc(1, "a-exec", 150, false));
        t.remove(&2);
        t.remove(&3);
        let w = d.processes(&t, &none, 10);
        let got: Vec<(u32, u64)> = w.processes.iter().map(|p| (p.pid, p.task_ns)).collect();
        assert_eq!(got, [(1, 20)]);
        // PID 2 was forgotten at its exit: reused, it starts from its own total; a total lower
        // than before is another process too.
        t.insert(1, proc(1, "a2", 20, false));
        t.insert(2, proc(2, "b2", 9, false));
        let w = d.processes(&t, &|pid| pid == 9, 1);
        let got: Vec<(u32, u64)> = w.processes.iter().map(|p| (p.pid, p.task_ns)).collect();
        assert_eq!((got, w.left_out), (vec![(1, 20)], 1));
        let c = |total_ns, idle_ns| CpuTime {
            total_ns,
            idle_ns,
            ..CpuTime::default()
        };
        assert_eq!(d.cpu_time(&c(100, 40)), c(100, 40));
        assert_eq!(d.cpu_time(&c(250, 90)), c(150, 50));
        let l = |ring_buffer_full, held_expired| Lost {
            ring_buffer_full,
            held_expired,
            ..Lost::default()
        };
        assert_eq!(d.lost(&l(5, 1)), l(5, 1));
        assert_eq!(d.lost(&l(7, 3)), l(2, 3));
    }

    #[test]
    fn memory_windows_are_bounded() {
        let mut m = MemoryWindows::new(2);
        for i in 0..5u64 {
            let mut p = Profile::default();
            p.meta.start_unix_ns = i * 10;
            p.meta.end_unix_ns = i * 10 + 10;
            m.window(&p);
        }
        let starts: Vec<u64> = m
            .range(0, u64::MAX)
            .iter()
            .map(|p| p.meta.start_unix_ns)
            .collect();
        assert_eq!(starts, [30, 40]);
        assert_eq!(m.range(45, 100).len(), 1);
    }
}
