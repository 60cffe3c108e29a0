//! Plain counter sets: what the kernel side accumulates per thread and per CPU, in nanoseconds.

use serde::Serialize;

use crate::wall::WallCounters;

/// Number of softirq vectors Linux defines (HI .. RCU).
pub const NR_SOFTIRQS: usize = 10;

/// Softirq vector names, indexed by vector number (as in `/proc/softirqs`).
pub const SOFTIRQ_NAMES: [&str; NR_SOFTIRQS] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// Attribution chains: kernel work done for a thread by someone else.
pub const NR_CHAINS: usize = 4;

/// Chain names, indexed as in `Counters::served_ns` (and as `kind` label values).
pub const CHAIN_NAMES: [&str; NR_CHAINS] = ["net", "block", "workq", "server"];

/// Time and events charged to one thread (or a sum of threads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// The thread's time in task context (its own, plus work items it ran for others).
    pub task_ns: u64,
    /// Hard-IRQ handler time that ran while the thread was current (Linux bills it to the thread).
    pub hardirq_ns: u64,
    /// Softirq time per vector that ran while the thread was current.
    pub softirq_ns: [u64; NR_SOFTIRQS],
    /// Syscall mode only: `task_ns` split into user, kernel, and not-yet-known mode.
    pub user_ns: u64,
    pub sys_ns: u64,
    pub unsplit_ns: u64,
    pub syscalls: u64,
    pub faults: u64,
    pub switches: u64,
    /// Part of `task_ns` spent running work items queued by others (kworkers).
    pub served_out_ns: u64,
    /// Work others ran for this thread, per chain (NET, BLOCK, WORKQ, SERVER), and how many items.
    pub served_ns: [u64; NR_CHAINS],
    pub served_items: [u64; NR_CHAINS],
    /// Wall time by class (docs/design.md, "Wall time").
    pub wall: WallCounters,
}

impl Counters {
    /// Everything that ran while the thread was current: what Linux's exact runtime shows for it.
    pub fn on_cpu_ns(&self) -> u64 {
        self.task_ns + self.irq_billed_ns()
    }

    /// Interrupt work (hard IRQ + softirq) that Linux billed to the thread but was not its own.
    pub fn irq_billed_ns(&self) -> u64 {
        self.hardirq_ns + self.softirq_ns.iter().sum::<u64>()
    }

    /// The thread's own time: task time less the work items it ran for others.
    pub fn own_ns(&self) -> u64 {
        self.task_ns.saturating_sub(self.served_out_ns)
    }

    /// What others ran for the thread, all chains.
    pub fn served_total_ns(&self) -> u64 {
        self.served_ns.iter().sum()
    }

    /// What the machine spent on the thread's behalf: own time plus what others ran for it.
    pub fn cost_ns(&self) -> u64 {
        self.own_ns() + self.served_total_ns()
    }

    /// Time Linux billed to the thread that served others (interrupts, foreign work items).
    pub fn billed_for_others_ns(&self) -> u64 {
        self.irq_billed_ns() + self.served_out_ns
    }

    /// Applies `f` to every pair of corresponding fields.
    fn zip_with(&self, o: &Counters, f: impl Fn(u64, u64) -> u64) -> Counters {
        let arr = |a: &[u64], b: &[u64], out: &mut [u64]| {
            for i in 0..out.len() {
                out[i] = f(a[i], b[i]);
            }
        };
        let mut r = Counters {
            task_ns: f(self.task_ns, o.task_ns),
            hardirq_ns: f(self.hardirq_ns, o.hardirq_ns),
            user_ns: f(self.user_ns, o.user_ns),
            sys_ns: f(self.sys_ns, o.sys_ns),
            unsplit_ns: f(self.unsplit_ns, o.unsplit_ns),
            syscalls: f(self.syscalls, o.syscalls),
            faults: f(self.faults, o.faults),
            switches: f(self.switches, o.switches),
            served_out_ns: f(self.served_out_ns, o.served_out_ns),
            ..Counters::default()
        };
        arr(&self.softirq_ns, &o.softirq_ns, &mut r.softirq_ns);
        arr(&self.served_ns, &o.served_ns, &mut r.served_ns);
        arr(&self.served_items, &o.served_items, &mut r.served_items);
        r
    }

    pub fn add(&mut self, o: &Counters) {
        let mut wall = self.wall;
        wall.add(&o.wall);
        *self = self.zip_with(o, |a, b| a + b);
        self.wall = wall;
    }

    /// Field-wise `self - earlier`, clamped at zero (a counter never runs backwards; a racing read
    /// can at most see a late flush once).
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            wall: self.wall.since(&earlier.wall),
            ..self.zip_with(earlier, u64::saturating_sub)
        }
    }

    /// Field-wise maximum: keeps cumulative totals monotonic across racing reads.
    pub fn max(&self, o: &Counters) -> Counters {
        Counters {
            wall: self.wall.max(&o.wall),
            ..self.zip_with(o, u64::max)
        }
    }
}

/// Exclusive time of one CPU by context since attach; the four parts add up to wall time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CpuCounters {
    pub cpu: u32,
    pub idle_ns: u64,
    pub task_ns: u64,
    pub hardirq_ns: u64,
    pub softirq_ns: [u64; NR_SOFTIRQS],
    /// Interrupt time that served no known thread (untagged, tags without owner, expired tags,
    /// owners gone): the KERNEL bucket's interrupt share.
    pub kernel_irq_ns: u64,
    /// Work-item time whose owner was gone when it was credited (KERNEL).
    pub orphan_wq_ns: u64,
    /// Socket receive time nobody read in time (already inside `kernel_irq_ns`), and how often.
    pub expired_ns: u64,
    pub expired_tags: u64,
    /// Tagged time on this CPU not yet credited to anyone (open tag, running work item).
    pub in_flight_ns: u64,
    /// Part of `task_ns` run by a thread whose switch-out the kernel never reported: charged to
    /// no thread (see `LostCounters::missed_switch`).
    pub missed_ns: u64,
    /// Own task time of user threads that had no entry in the full thread table: charged to no
    /// thread, OTHER (see `LostCounters::thread_map_full`).
    pub untracked_ns: u64,
    /// The same for kernel threads: KERNEL.
    pub untracked_kernel_ns: u64,
}

impl CpuCounters {
    pub fn softirq_total_ns(&self) -> u64 {
        self.softirq_ns.iter().sum()
    }

    pub fn total_ns(&self) -> u64 {
        self.idle_ns + self.task_ns + self.hardirq_ns + self.softirq_total_ns()
    }

    /// Field-wise maximum with an earlier read of the same CPU, for the cumulative fields
    /// (`in_flight_ns` is a level and stays as read). The kernel side moves the difference between
    /// its slice and the scheduler's between task and idle time once a slice ends, so one of them
    /// can read a little lower than before; a cumulative counter never shows that, it waits until
    /// the figure catches up.
    pub fn at_least(&self, earlier: &CpuCounters) -> CpuCounters {
        let mut softirq_ns = self.softirq_ns;
        for (s, e) in softirq_ns.iter_mut().zip(earlier.softirq_ns) {
            *s = (*s).max(e);
        }
        CpuCounters {
            cpu: self.cpu,
            idle_ns: self.idle_ns.max(earlier.idle_ns),
            task_ns: self.task_ns.max(earlier.task_ns),
            hardirq_ns: self.hardirq_ns.max(earlier.hardirq_ns),
            softirq_ns,
            kernel_irq_ns: self.kernel_irq_ns.max(earlier.kernel_irq_ns),
            orphan_wq_ns: self.orphan_wq_ns.max(earlier.orphan_wq_ns),
            expired_ns: self.expired_ns.max(earlier.expired_ns),
            expired_tags: self.expired_tags.max(earlier.expired_tags),
            in_flight_ns: self.in_flight_ns,
            missed_ns: self.missed_ns.max(earlier.missed_ns),
            untracked_ns: self.untracked_ns.max(earlier.untracked_ns),
            untracked_kernel_ns: self.untracked_kernel_ns.max(earlier.untracked_kernel_ns),
        }
    }
}

/// Events the collection could not account, summed over CPUs. Never dropped silently: every
/// interval carries them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LostCounters {
    /// A new thread did not fit in the kernel's thread table (raise `--max-threads`).
    pub thread_map_full: u64,
    /// A new (process, syscall) pair did not fit in the syscall table.
    pub syscall_map_full: u64,
    /// Interrupt nesting deeper than the per-CPU context stack.
    pub ctx_overflow: u64,
    /// An IRQ/softirq exit whose entry was not seen.
    pub unmatched_exit: u64,
    /// A context switch found interrupt contexts still open (an exit was missed).
    pub ctx_reset: u64,
    /// A socket, block request or work item did not fit in its tag table (its work went to KERNEL).
    pub tag_map_full: u64,
    /// A thread's switch-out was never reported by the kernel; its last slice is in `missed_ns`.
    pub missed_switch: u64,
    /// Times the kernel skipped one of our programs because another BPF program was running.
    pub bpf_recursion_misses: u64,
}

impl LostCounters {
    pub fn total(&self) -> u64 {
        self.thread_map_full
            + self.syscall_map_full
            + self.ctx_overflow
            + self.unmatched_exit
            + self.ctx_reset
            + self.tag_map_full
            + self.missed_switch
            + self.bpf_recursion_misses
    }

    /// (name, value) pairs in a fixed order, for renderers.
    pub fn fields(&self) -> [(&'static str, u64); 8] {
        [
            ("thread_map_full", self.thread_map_full),
            ("syscall_map_full", self.syscall_map_full),
            ("ctx_overflow", self.ctx_overflow),
            ("unmatched_exit", self.unmatched_exit),
            ("ctx_reset", self.ctx_reset),
            ("tag_map_full", self.tag_map_full),
            ("missed_switch", self.missed_switch),
            ("bpf_recursion_misses", self.bpf_recursion_misses),
        ]
    }
}
