//! The profile's self-description: host and kernel, times, rate, targets, losses, pkprof's own
//! cost, and the exact CPU time by bucket, from what the recording gathered.

use std::time::{SystemTime, UNIX_EPOCH};

use pkprof_accounting::Interval;
use pkprof_profile::{CpuTime, Lost, Meta, Overhead, Targets};

use crate::session::Recorded;

/// Wall-clock time, ns since the Unix epoch.
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Kernel release and host name (empty when uname fails).
pub fn uname() -> (String, String) {
    // SAFETY: utsname is plain data that uname fills.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return (String::new(), String::new());
    }
    let s = |f: &[libc::c_char]| {
        // SAFETY: uname NUL-terminates its fields.
        unsafe { std::ffi::CStr::from_ptr(f.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    (s(&u.release), s(&u.nodename))
}

/// What record's kernel side could not deliver or follow, read at the end of the recording.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelLost {
    /// Samples and links dropped on a full ring buffer.
    pub ring_buffer_full: u64,
    /// Children that did not fit in the kernel's target set.
    pub target_table_full: u64,
}

/// What the description is made from.
pub struct Inputs<'a> {
    /// The version of pkprof that recorded.
    pub pkprof_version: &'a str,
    /// Samples per second on each CPU.
    pub frequency_hz: u64,
    /// What was profiled.
    pub targets: Targets,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// The accounting's last frame (cumulative since attach).
    pub frame: &'a Interval,
    pub recorded: &'a Recorded,
    pub kernel_lost: KernelLost,
    /// pkprof's own CPU time while recording.
    pub pkprof_cpu_ns: u64,
    /// The kernel timed our BPF programs (else their run time and count are not measured).
    pub bpf_stats: bool,
}

/// The profile's metadata; symbolization time and warnings are filled in later.
pub fn build(i: Inputs<'_>) -> Meta {
    let (kernel, hostname) = uname();
    let progs = &i.frame.progs;
    let rec = i.recorded;
    Meta {
        pkprof_version: i.pkprof_version.to_string(),
        kernel,
        hostname,
        cpus: i.frame.cpus.len() as u32,
        start_unix_ns: i.start_unix_ns,
        end_unix_ns: i.end_unix_ns,
        frequency_hz: i.frequency_hz,
        period_ns: 1_000_000_000 / i.frequency_hz.max(1),
        targets: i.targets,
        lost: Lost {
            ring_buffer_full: i.kernel_lost.ring_buffer_full,
            kernel_stack_errors: rec.kstack_errors,
            user_stack_errors: rec.ustack_errors,
            held_expired: rec.held_expired,
            maps_missing: rec.maps_missing,
            bpf_missed_events: progs.iter().map(|p| p.recursion_misses).sum(),
            thread_table_full: i.frame.lost.thread_map_full,
            target_table_full: i.kernel_lost.target_table_full,
        },
        overhead: Overhead {
            pkprof_cpu_ns: i.pkprof_cpu_ns,
            symbolize_ns: 0,
            bpf_run_ns: i.bpf_stats.then(|| progs.iter().map(|p| p.run_ns).sum()),
            bpf_run_count: i.bpf_stats.then(|| progs.iter().map(|p| p.run_cnt).sum()),
        },
        cpu_time: cpu_time(i.frame, rec),
        warnings: Vec::new(),
        user_stacks: Default::default(),
    }
}

/// Exact CPU time by bucket: the accounting's buckets, with the user processes' share split
/// between the targets and the others. Time of threads that found the thread table full is in no
/// process: OTHER, but the part the kernel side knew to be a target's goes to the targets.
pub fn cpu_time(frame: &Interval, rec: &Recorded) -> CpuTime {
    let targets_ns: u64 = (rec.processes.values())
        .filter(|p| p.target)
        .map(|p| p.task_ns + p.served_ns)
        .sum::<u64>()
        + rec.untracked_target_ns.min(frame.buckets.untracked_ns);
    let b = &frame.buckets;
    let user_total = b.processes_ns + b.other_ns;
    let processes_ns = targets_ns.min(user_total);
    let other_ns = user_total - processes_ns;
    CpuTime {
        total_ns: b.wall_ns,
        idle_ns: b.idle_ns,
        processes_ns,
        other_ns,
        kernel_ns: b
            .wall_ns
            .saturating_sub(b.idle_ns + processes_ns + other_ns),
        untracked_ns: b.untracked_ns,
    }
}
