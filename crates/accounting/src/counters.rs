//! Plain counter sets: what the kernel side accumulates per thread and per CPU, in nanoseconds.

use serde::Serialize;

/// Number of softirq vectors Linux defines (HI .. RCU).
pub const NR_SOFTIRQS: usize = 10;

/// Softirq vector names, indexed by vector number (as in `/proc/softirqs`).
pub const SOFTIRQ_NAMES: [&str; NR_SOFTIRQS] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// Time and events charged to one thread (or a sum of threads) while it was the CPU's current task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// The thread's own time in task context.
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

    pub fn add(&mut self, o: &Counters) {
        self.task_ns += o.task_ns;
        self.hardirq_ns += o.hardirq_ns;
        for (a, b) in self.softirq_ns.iter_mut().zip(o.softirq_ns) {
            *a += b;
        }
        self.user_ns += o.user_ns;
        self.sys_ns += o.sys_ns;
        self.unsplit_ns += o.unsplit_ns;
        self.syscalls += o.syscalls;
        self.faults += o.faults;
        self.switches += o.switches;
    }

    /// Field-wise `self - earlier`, clamped at zero (a counter never runs backwards; a racing read
    /// can at most see a late flush once).
    pub fn since(&self, earlier: &Counters) -> Counters {
        let mut d = Counters {
            task_ns: self.task_ns.saturating_sub(earlier.task_ns),
            hardirq_ns: self.hardirq_ns.saturating_sub(earlier.hardirq_ns),
            softirq_ns: [0; NR_SOFTIRQS],
            user_ns: self.user_ns.saturating_sub(earlier.user_ns),
            sys_ns: self.sys_ns.saturating_sub(earlier.sys_ns),
            unsplit_ns: self.unsplit_ns.saturating_sub(earlier.unsplit_ns),
            syscalls: self.syscalls.saturating_sub(earlier.syscalls),
            faults: self.faults.saturating_sub(earlier.faults),
            switches: self.switches.saturating_sub(earlier.switches),
        };
        for (i, v) in d.softirq_ns.iter_mut().enumerate() {
            *v = self.softirq_ns[i].saturating_sub(earlier.softirq_ns[i]);
        }
        d
    }

    /// Field-wise maximum: keeps cumulative totals monotonic across racing reads.
    pub fn max(&self, o: &Counters) -> Counters {
        let mut m = *self;
        m.task_ns = m.task_ns.max(o.task_ns);
        m.hardirq_ns = m.hardirq_ns.max(o.hardirq_ns);
        for (a, b) in m.softirq_ns.iter_mut().zip(o.softirq_ns) {
            *a = (*a).max(b);
        }
        m.user_ns = m.user_ns.max(o.user_ns);
        m.sys_ns = m.sys_ns.max(o.sys_ns);
        m.unsplit_ns = m.unsplit_ns.max(o.unsplit_ns);
        m.syscalls = m.syscalls.max(o.syscalls);
        m.faults = m.faults.max(o.faults);
        m.switches = m.switches.max(o.switches);
        m
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
    /// Part of `task_ns` run by a thread whose switch-out the kernel never reported: charged to
    /// no thread (see `LostCounters::missed_switch`).
    pub missed_ns: u64,
}

impl CpuCounters {
    pub fn softirq_total_ns(&self) -> u64 {
        self.softirq_ns.iter().sum()
    }

    pub fn total_ns(&self) -> u64 {
        self.idle_ns + self.task_ns + self.hardirq_ns + self.softirq_total_ns()
    }
}

/// Events the collection could not account, summed over CPUs. Never dropped silently: every frame
/// carries them.
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
            + self.missed_switch
            + self.bpf_recursion_misses
    }

    /// (name, value) pairs in a fixed order, for renderers.
    pub fn fields(&self) -> [(&'static str, u64); 7] {
        [
            ("thread_map_full", self.thread_map_full),
            ("syscall_map_full", self.syscall_map_full),
            ("ctx_overflow", self.ctx_overflow),
            ("unmatched_exit", self.unmatched_exit),
            ("ctx_reset", self.ctx_reset),
            ("missed_switch", self.missed_switch),
            ("bpf_recursion_misses", self.bpf_recursion_misses),
        ]
    }
}
