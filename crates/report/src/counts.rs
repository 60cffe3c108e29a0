//! The profile's exact counts (`record --syscalls`, `record --count`) as the routines reports name
//! them: each syscall row is the syscall-boundary frame `sys_NAME` and each counted function a
//! user frame of its process, in the bucket of that process (PROCESS for a target, else OTHER).
//!
//! Reports show every one of them, sampled or not, as gprof shows a routine with calls and no
//! time: joining counts only to sampled frames left out every function too short to be sampled.

use std::collections::HashMap;

use pkprof_profile::{Bucket, Frame, FrameKind, Profile};

/// One exact count.
#[derive(Clone, Debug, PartialEq)]
pub struct Counted<'a> {
    pub pid: u32,
    /// The process's command name, when the profile lists the process.
    pub comm: &'a str,
    pub bucket: Bucket,
    /// `sys_read` (kind `Syscall`) or the function (kind `User`).
    pub frame: Frame,
    pub calls: u64,
    /// Syscalls only: calls that failed, and time from entry to exit.
    pub errors: Option<u64>,
    pub time_ns: Option<u64>,
}

/// Every syscall row, then every counted function, in the profile's order.
pub fn counted(p: &Profile) -> Vec<Counted<'_>> {
    let procs: HashMap<u32, (&str, bool)> = p
        .processes
        .iter()
        .map(|i| (i.pid, (i.comm.as_str(), i.target)))
        .collect();
    let of = |pid: u32| {
        let (comm, target) = procs.get(&pid).copied().unwrap_or(("", true));
        let bucket = if target {
            Bucket::Process
        } else {
            Bucket::Other
        };
        (comm, bucket)
    };
    let frame = |kind, name: String, module: &str| Frame {
        kind,
        name,
        module: module.into(),
        symbolized: true,
        ..Frame::default()
    };
    let mut out = Vec::with_capacity(p.syscalls.len() + p.func_counts.len());
    for s in &p.syscalls {
        let (comm, bucket) = of(s.pid);
        out.push(Counted {
            pid: s.pid,
            comm,
            bucket,
            frame: frame(FrameKind::Syscall, format!("sys_{}", s.name), "[syscall]"),
            calls: s.count,
            errors: Some(s.errors),
            time_ns: Some(s.total_ns),
        });
    }
    for f in &p.func_counts {
        let (comm, bucket) = of(f.pid);
        out.push(Counted {
            pid: f.pid,
            comm,
            bucket,
            frame: frame(FrameKind::User, f.function.clone(), &f.binary),
            calls: f.count,
            errors: None,
            time_ns: None,
        });
    }
    out
}
