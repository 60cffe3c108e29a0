//! One read of the kernel side's state, in plain Rust types (filled in by `pkprof-collect`).

use crate::counters::{Counters, CpuCounters, LostCounters};
use crate::interval::ProgStat;
use crate::other_fns::OtherFnSample;

/// The PID (and TID) of the one row that counts short-lived processes together, when the reader
/// folds them (pkprof-collect's `CollectorOptions::fold_short_lived_ns`, docs/design.md "The agent /
/// Cost"): above any PID Linux gives (at most 2^22).
pub const SHORT_LIVED_PID: u32 = u32::MAX;

/// One thread's cumulative counters since attach, including the slice still running at read time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadSample {
    pub tid: u32,
    pub pid: u32,
    pub ppid: u32,
    pub cgroup_id: u64,
    pub comm: String,
    pub counters: Counters,
    /// A kernel thread: its own time belongs to the KERNEL bucket.
    pub kthread: bool,
    /// The thread has exited: this is its final read, it will not appear again.
    pub exited: bool,
    /// record: the thread was forked into a target process (its process is a target).
    pub target: bool,
}

/// Exact syscall count and time of one process for one syscall (syscall mode).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SyscallCount {
    pub pid: u32,
    pub nr: u32,
    /// Name for this architecture, or `syscall_NR` when unknown.
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub errors: u64,
}

/// Everything read from the kernel at one instant.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// CLOCK_MONOTONIC of the read, the clock BPF's `bpf_ktime_get_ns` uses.
    pub mono_ns: u64,
    /// Wall-clock time of the read, seconds since the Unix epoch.
    pub unix_s: f64,
    pub threads: Vec<ThreadSample>,
    pub cpus: Vec<CpuCounters>,
    pub lost: LostCounters,
    /// Whether user/sys time is measured (syscall tracepoints attached).
    pub split_modes: bool,
    pub syscalls: Vec<SyscallCount>,
    pub progs: Vec<ProgStat>,
    /// Receive time held on sockets, waiting for their reader (not yet in any bucket).
    pub sockets_pending_ns: u64,
    /// Held socket time that user space expired (socket idle past the expiry), cumulative.
    pub swept_expired_ns: u64,
    pub swept_expired_tags: u64,
    /// OTHER blocked time by (thread, kernel return address) since attach (their own table,
    /// docs/design.md "Wall time"); the entries of threads read `exited` are not read again.
    pub other_fns: Vec<OtherFnSample>,
    /// Thread entries this read did not show (pkprof-collect's short-lived fold): exited ones
    /// whose entries it deleted (counted in the `SHORT_LIVED_PID` row), and ones it held back to
    /// a later read. The thread table's use is `threads` plus these.
    pub unshown: Unshown,
}

/// See [`Snapshot::unshown`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unshown {
    pub folded: usize,
    pub held: usize,
}
