//! Checks made before anything is loaded: privileges, kernel BTF, and every tracepoint we attach to.
//! Each failure is a `CollectError` whose message names the cause and the fix.

use std::fs;
use std::path::Path;

use crate::error::CollectError;
use crate::tracefs::{self, Tracefs};

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Tracepoints of the accounting core, as (category, event).
pub const CORE_TRACEPOINTS: &[(&str, &str)] = &[
    ("sched", "sched_switch"),
    ("sched", "sched_process_fork"),
    ("sched", "sched_process_exec"),
    ("sched", "sched_process_exit"),
    ("task", "task_rename"),
    ("cgroup", "cgroup_attach_task"),
    ("irq", "irq_handler_entry"),
    ("irq", "irq_handler_exit"),
    ("irq", "softirq_entry"),
    ("irq", "softirq_exit"),
];

/// Tracepoints of syscall mode (`--syscalls`).
pub const SYSCALL_TRACEPOINTS: &[(&str, &str)] =
    &[("raw_syscalls", "sys_enter"), ("raw_syscalls", "sys_exit")];

/// Optional tracepoints: used when present, their absence only disables a counter.
pub const FAULT_TRACEPOINT: (&str, &str) = ("exceptions", "page_fault_user");

/// Optional (x86): the local APIC timer interrupt, which does not pass through irq_handler_entry.
pub const LOCAL_TIMER_TRACEPOINTS: &[(&str, &str)] = &[
    ("irq_vectors", "local_timer_entry"),
    ("irq_vectors", "local_timer_exit"),
];

/// Effective capabilities of this process, from /proc/self/status.
fn effective_caps() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// Root, or CAP_BPF + CAP_PERFMON (CAP_SYS_ADMIN covers both on older kernels).
pub fn check_privileges() -> Result<(), CollectError> {
    let caps = effective_caps();
    let has = |c: u32| caps & (1u64 << c) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        Ok(())
    } else {
        Err(CollectError::NotPrivileged)
    }
}

pub fn check_kernel_btf() -> Result<(), CollectError> {
    if Path::new("/sys/kernel/btf/vmlinux").exists() {
        Ok(())
    } else {
        Err(CollectError::NoKernelBtf)
    }
}

/// Test-only: tracepoints ("category:event", comma-separated) the preflight treats as missing,
/// to run pkprof as on a kernel without them (crates/cli/tests/chain_off.rs). Not for users.
pub(crate) const HIDE_TRACEPOINTS_ENV: &str = "PKPROF_TEST_HIDE_TRACEPOINTS";

/// Test-only: "PID:EVERY" has the switch program ignore one in every EVERY switches to or from
/// a thread of process PID, as the kernel sometimes leaves a switch unreported
/// (crates/cli/tests/accuracy.rs, docs/design.md "Lost switches"). Not for users.
const HIDE_SWITCHES_ENV: &str = "PKPROF_TEST_HIDE_SWITCHES";

/// The process and the one-in-how-many of `HIDE_SWITCHES_ENV`, when set and well formed.
pub(crate) fn hidden_switches() -> Option<(u32, u32)> {
    let v = std::env::var(HIDE_SWITCHES_ENV).ok()?;
    let (pid, every) = v.split_once(':')?;
    Some((pid.parse().ok()?, every.parse::<u32>().ok()?.max(1)))
}

/// How tracepoints are looked up: through tracefs's event list, or through the kernel's BTF
/// (a `btf_trace_<event>` typedef exists for every tracepoint) when tracefs cannot be mounted.
enum Source {
    Tracefs(std::path::PathBuf),
    Btf(String),
}

/// Which tracepoints this kernel has.
pub struct TracepointIndex {
    source: Source,
    /// "category:event" of the tracepoints treated as missing (`HIDE_TRACEPOINTS_ENV`).
    hidden: Vec<String>,
}

impl TracepointIndex {
    /// Mounts tracefs when needed; falls back to BTF when mounting is impossible.
    pub fn open() -> (Self, Tracefs) {
        let t = tracefs::ensure_mounted();
        let source = match t.path() {
            Some(p) => Source::Tracefs(p.join("events")),
            None => Source::Btf(vmlinux_btf_names()),
        };
        let hidden = std::env::var(HIDE_TRACEPOINTS_ENV)
            .map(|v| hidden_list(&v))
            .unwrap_or_default();
        (TracepointIndex { source, hidden }, t)
    }

    /// An index over a tracefs `events` directory (a fake one, in tests).
    #[cfg(test)]
    pub(crate) fn of_events_dir(events: std::path::PathBuf) -> Self {
        TracepointIndex {
            source: Source::Tracefs(events),
            hidden: Vec::new(),
        }
    }

    pub fn has(&self, category: &str, event: &str) -> bool {
        if self
            .hidden
            .iter()
            .any(|h| h.split_once(':') == Some((category, event)))
        {
            return false;
        }
        match &self.source {
            Source::Tracefs(events) => events.join(category).join(event).is_dir(),
            Source::Btf(names) => names.contains(&format!("\0btf_trace_{event}\0")),
        }
    }

    fn location(&self) -> String {
        match &self.source {
            Source::Tracefs(p) => p.display().to_string(),
            Source::Btf(_) => "/sys/kernel/btf/vmlinux".to_string(),
        }
    }

    /// Fails on the first missing tracepoint of `list`.
    pub fn require(&self, list: &[(&str, &str)]) -> Result<(), CollectError> {
        for (cat, ev) in list {
            if !self.has(cat, ev) {
                return Err(CollectError::MissingTracepoint(
                    format!("{cat}:{ev}"),
                    self.location(),
                ));
            }
        }
        Ok(())
    }
}

/// The entries of a comma-separated "category:event" list.
fn hidden_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| s.contains(':'))
        .map(String::from)
        .collect()
}

/// The initial pid namespace's inode number (include/linux/proc_ns.h, `PROC_PID_INIT_INO`).
const PROC_PID_INIT_INO: u64 = 0xEFFF_FFFC;

/// This process's pid as the kernel's `task->tgid` holds it, or `None` when it runs in a pid
/// namespace of its own (a container without the host's pids), where `std::process::id()` is
/// that namespace's number and may be another process's tgid.
pub fn own_kernel_tgid() -> Option<u32> {
    let ns = fs::read_link("/proc/self/ns/pid").ok()?;
    (ns.to_str()? == format!("pid:[{PROC_PID_INIT_INO}]")).then(std::process::id)
}

/// Whether the kernel's BTF names `name` (a kfunc the BPF programs may call, such as
/// `bpf_task_work_schedule_resume_impl`, Linux >= 6.18).
pub fn kernel_has_name(name: &str) -> bool {
    vmlinux_btf_names().contains(&format!("\0{name}\0"))
}

/// Whether the kernel's `task_struct` has `rseq` as a pointer (CONFIG_RSEQ): what
/// record/offcpu.bpf.h reads to know that a thread's returns to user mode run `rseq_update`.
pub fn kernel_task_rseq_is_pointer() -> bool {
    use libbpf_rs::btf::{types::Struct, Btf, BtfKind, BtfType};
    let Ok(btf) = Btf::from_vmlinux() else {
        return false;
    };
    let Some(task) = btf.type_by_name::<Struct>("task_struct") else {
        return false;
    };
    let pointer = task
        .iter()
        .filter(|m| m.name.is_some_and(|n| n == "rseq"))
        .filter_map(|m| btf.type_by_id::<BtfType>(m.ty))
        .any(|t| t.skip_mods_and_typedefs().kind() == BtfKind::Ptr);
    pointer
}

/// The string section of the kernel's BTF, NUL-separated and NUL-framed, for name look-ups.
/// (A plain scan suffices here: we only ask whether a name exists.)
fn vmlinux_btf_names() -> String {
    let raw = fs::read("/sys/kernel/btf/vmlinux").unwrap_or_default();
    let mut s = String::from("\0");
    s.push_str(&String::from_utf8_lossy(&raw));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tracepoint_is_named() {
        let dir = std::env::temp_dir().join(format!("pkprof-tp-{}", std::process::id()));
        fs::create_dir_all(dir.join("sched/sched_switch")).unwrap();
        let mut idx = TracepointIndex {
            source: Source::Tracefs(dir.clone()),
            hidden: Vec::new(),
        };
        assert!(idx.require(&[("sched", "sched_switch")]).is_ok());
        let err = idx
            .require(&[("sched", "sched_switch"), ("irq", "softirq_entry")])
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("irq:softirq_entry"), "{msg}");
        assert!(!msg.contains('\n'));
        idx.hidden = hidden_list("x, sched:sched_switch ,");
        assert!(
            !idx.has("sched", "sched_switch"),
            "a hidden tracepoint is missing"
        );
        fs::remove_dir_all(dir).unwrap();
    }
}
