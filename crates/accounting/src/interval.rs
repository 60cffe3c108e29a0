//! An interval: what one refresh of `pkprof top` shows, independent of how it is rendered.

use serde::Serialize;

use crate::counters::{Counters, CpuCounters, LostCounters, NR_SOFTIRQS};
use crate::other_fns::OtherFn;

/// One process (or thread with per-thread rows) in an interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Row {
    pub pid: u32,
    /// Set on per-thread rows.
    pub tid: Option<u32>,
    pub ppid: u32,
    pub comm: String,
    pub cgroup_id: u64,
    /// Threads seen in this process since attach (1 on per-thread rows).
    pub threads: u32,
    /// The process (or thread) has exited; this is its last row.
    pub exited: bool,
    /// Share of one CPU over the interval, in percent (100 = one CPU busy the whole interval).
    pub cpu_pct: f64,
    /// Present only when user/sys is measured (syscall mode).
    pub user_pct: Option<f64>,
    pub sys_pct: Option<f64>,
    /// Interrupt work Linux billed to this row over the interval, percent of one CPU.
    pub irq_billed_pct: f64,
    /// Own time (task time less work items run for others), percent of one CPU.
    pub own_pct: f64,
    /// What others ran for this row: NET receive, BLOCK completion, WORKQ items.
    pub net_pct: f64,
    pub block_pct: f64,
    pub workq_pct: f64,
    /// Server work billed to this row as a server's client (the server chain).
    pub server_pct: f64,
    /// own + net + block + workq + server: what the machine spent on this row's behalf.
    pub cost_pct: f64,
    /// Time Linux billed to this row that served others (interrupts, foreign work items).
    pub billed_for_others_pct: f64,
    /// Wall-time classes over the interval (docs/design.md, "Wall time"), percent of one
    /// thread's wall time (a process's threads add up, as CPU% does): runnable but waiting for a
    /// CPU, and blocked for any reason (`delta.wall.blocked_ns` has them by reason).
    pub wait_pct: f64,
    pub blocked_pct: f64,
    /// Runqueue waits ended over the interval: median and 99th percentile (upper bounds of
    /// their histogram buckets, at most the longest), None without waits; and the longest
    /// since attach.
    pub runq_p50_ns: Option<u64>,
    pub runq_p99_ns: Option<u64>,
    pub runq_max_ns: u64,
    /// A kernel thread (its own time is KERNEL in the buckets).
    pub kthread: bool,
    /// Over the interval.
    pub delta: Counters,
    /// Cumulative since attach (exited threads included).
    pub total: Counters,
    /// Time blocked as OTHER by the kernel function it blocked in, cumulative since attach
    /// (exited threads included), the largest first; part of `total.wall`'s OTHER.
    pub other_fns: Vec<OtherFn>,
}

/// One CPU over the interval; busy + idle + irq + softirq = 100.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CpuRow {
    pub cpu: u32,
    pub busy_pct: f64,
    pub idle_pct: f64,
    pub irq_pct: f64,
    pub softirq_pct: f64,
    pub softirq_pct_by_vec: [f64; NR_SOFTIRQS],
    /// Cumulative since attach.
    pub total: CpuCounters,
}

/// Exact syscall statistics for one process and syscall (syscall mode).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SyscallRow {
    pub pid: u32,
    pub nr: u32,
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub errors: u64,
}

/// Run-time statistics of one of pkprof's BPF programs, from the kernel.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProgStat {
    pub name: String,
    /// Total run time; 0 unless BPF stats are enabled (`--bpf-stats`).
    pub run_ns: u64,
    pub run_cnt: u64,
    pub recursion_misses: u64,
}

/// pkprof's own cost so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SelfUsage {
    /// pkprof's user + system CPU over the interval, percent of one CPU.
    pub cpu_pct: f64,
    pub rss_bytes: u64,
}

/// Where every nanosecond of CPU time since attach went; the parts add up to `wall_ns`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Buckets {
    /// Sum over CPUs of the time each has been watched (wall time x CPUs).
    pub wall_ns: u64,
    pub idle_ns: u64,
    /// Cost (own + attributed) of the user processes shown (all, without a filter).
    pub processes_ns: u64,
    /// Cost of user processes outside the filter, and of threads pkprof could not follow (see
    /// `unreported_ns` and `untracked_ns`).
    pub other_ns: u64,
    /// Kernel threads' own time (with or without a thread entry), interrupt work with no
    /// beneficiary, expired and orphaned tags.
    pub kernel_ns: u64,
    /// Tagged work not yet credited: receive time waiting for the socket's reader, open tags.
    pub in_flight_ns: u64,
    /// Part of `other_ns`: task time run around switches the kernel never reported (seen for
    /// threads outside pkprof's PID namespace; see `lost.missed_switch`) and not found since at
    /// the thread's next reported switch-out: the CPUs' `missed_ns` less their `recovered_ns`.
    pub unreported_ns: u64,
    /// Part of `other_ns`: own time of user threads that found the thread table full (see
    /// `lost.thread_map_full`; raise `--max-threads`).
    pub untracked_ns: u64,
}

/// The tag life cycle's losses to KERNEL, cumulative since attach.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TagStats {
    /// Socket receive time nobody read within the expiry time, and how many times.
    pub expired_ns: u64,
    pub expired: u64,
    /// Tags that did not fit in their tables (see `lost.tag_map_full`).
    pub map_full: u64,
}

/// Everything one refresh shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Interval {
    pub unix_s: f64,
    pub interval_s: f64,
    pub per_thread: bool,
    /// Whether USER%/SYS% are measured; when false they are absent, not guessed.
    pub split_modes: bool,
    pub cpus: Vec<CpuRow>,
    /// Sorted by `cpu_pct`, highest first.
    pub rows: Vec<Row>,
    pub syscalls: Vec<SyscallRow>,
    /// Cumulative lost-event counters since attach.
    pub lost: LostCounters,
    pub buckets: Buckets,
    pub tags: TagStats,
    pub progs: Vec<ProgStat>,
    pub self_usage: SelfUsage,
}
