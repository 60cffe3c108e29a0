//! pkprof record's collection: cpu-clock sampling on every CPU, uprobes for exact call counts,
//! the target set, and the ring buffer of samples and links (decoded in `ring`).

pub(crate) mod perf;
mod ring;
pub(crate) mod uprobes;

/// Where a process's CPython is and how to walk it (pkprof.h's `pkprof_py_proc`).
pub use crate::skel::types::pkprof_py_proc as PyProc;
pub use ring::{EventRing, RecordEvent};

use std::path::PathBuf;

use libbpf_rs::{MapCore, MapFlags};

use crate::error::CollectError;
use crate::loader::Collector;
use crate::map_walk;
use crate::skel::types::{
    pkprof_defaults as Defaults, pkprof_func_key, pkprof_offcpu_defaults as OffDefaults,
    pkprof_offcpu_stats, pkprof_stack_bytes as StackBytes, pkprof_syscall_key, pkprof_syscall_stat,
};

/// Default capacity of the kernel's target set (`record --max-targets`; pkprof.h): target
/// processes alive at the same time (they leave it when they are reaped).
pub const DEFAULT_MAX_TARGETS: u32 = Defaults::PKPROF_DEFAULT_MAX_TARGETS.0;

/// Default bytes of user stack copied per sample (`record --stack-bytes`), and the most that can
/// be asked for (pkprof.h).
pub const DEFAULT_STACK_BYTES: u32 = StackBytes::PKPROF_DEFAULT_STACK_BYTES.0;
pub const MAX_STACK_BYTES: u32 = StackBytes::PKPROF_MAX_STACK_BYTES.0;

/// What `record` adds to the accounting programs.
#[derive(Clone, Debug)]
pub struct RecordConfig {
    /// Samples per second on each CPU.
    pub frequency_hz: u64,
    /// Ring buffer size in bytes (a power of two, multiple of the page size).
    pub ring_bytes: u32,
    /// Children of a target become targets when they fork (record -- CMD).
    pub follow_children: bool,
    /// Capacity of the kernel's target set; a child beyond it is counted in
    /// `RecordLost::targets` and its own children are not followed.
    pub max_targets: u32,
    /// User functions to count exactly (uprobes).
    pub probes: Vec<FuncProbe>,
    /// Bytes of user stack copied per sample for unwinding (a multiple of 8, at most
    /// [`MAX_STACK_BYTES`]; 0: frame pointers only).
    pub stack_bytes: u32,
    /// A user thread serving a client (the server chain's mark) is labelled with the client.
    pub by_client: bool,
    /// The sampler skips this process's own threads (the agent: docs/design.md, "The agent /
    /// Bounded memory"); its exact CPU is accounted as any other process's. Only in the initial
    /// pid namespace, where its pid is the kernel's tgid (`preflight::own_kernel_tgid`).
    pub skip_own_process: bool,
    /// `--off-cpu`: off-CPU samples with their wakers (docs/design.md, "Off-CPU samples").
    pub off_cpu: Option<OffCpuConfig>,
    /// A sample of a process whose maps are not captured yet wakes the reader only once the
    /// process has lived this long (record/links.bpf.h, `capture_wakeup`); 0: at once.
    pub capture_wake_min_age_ns: u64,
}

/// `record --off-cpu`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffCpuConfig {
    /// Off time sampled: a block of d ns is taken with probability min(1, d / period) and weighs
    /// max(d, period); 0: every block.
    pub period_ns: u64,
    /// Wake-chain entries kept (1..=[`MAX_WAKE_CHAIN`]).
    pub wake_chain: u32,
    /// Every process's blocks (record -a), not only the targets'.
    pub all: bool,
    /// Chosen samples a second per CPU: a CPU that chooses more doubles its period (each sample
    /// weighs by the period it was chosen at), halving it back when quieter; 0: never.
    pub max_rate: u32,
    /// Where a chosen block's user stack is taken.
    pub user_stacks: OffCpuUserStacks,
}

/// Where `record --off-cpu` takes a chosen block's user stack: in the blocked thread's own
/// context as its call returns, by one of the ways of record/offcpu.bpf.h (enum
/// pkprof_offcpu_ustack), each with its price (docs/design.md, "Off-CPU samples").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OffCpuUserStacks {
    /// The best way this kernel offers and loads: a task work, else rseq's return to user
    /// mode, else every syscall exit.
    #[default]
    Auto,
    /// A task work queued for the chosen thread alone (Linux >= 6.18, where the kernel lets a
    /// tracepoint program queue one).
    TaskWork,
    /// rseq's return to user mode: cheap, but threads without an rseq area (Go, static musl,
    /// glibc < 2.35) get no user stack.
    Rseq,
    /// A program at every syscall exit of the machine: every thread, at the highest cost.
    SysExit,
}

/// Default off-CPU sampling period and wake-chain depth, and the deepest chain (pkprof.h).
pub const DEFAULT_OFFCPU_PERIOD_US: u32 = OffDefaults::PKPROF_DEFAULT_OFFCPU_PERIOD_US.0;
pub const DEFAULT_WAKE_CHAIN: u32 = OffDefaults::PKPROF_DEFAULT_WAKE_CHAIN.0;
pub const DEFAULT_OFFCPU_MAX_RATE: u32 = OffDefaults::PKPROF_DEFAULT_OFFCPU_MAX_RATE.0;
pub const MAX_WAKE_CHAIN: u32 = OffDefaults::PKPROF_MAX_WAKE_CHAIN.0;

/// Bytes of one sample record before its user stack bytes (`struct pkprof_sample`).
pub const SAMPLE_RECORD_BYTES: usize = std::mem::size_of::<crate::skel::types::pkprof_sample>();

/// The off-CPU side's counts, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffCpuCounts {
    /// Blocking switch-outs of sampled threads, those chosen, and those written to the ring.
    pub blocks: u64,
    pub chosen: u64,
    pub emitted: u64,
    /// Chosen samples lost on a full ring buffer.
    pub ring_full: u64,
    /// Blocks not followed: no task storage could be had.
    pub no_storage: u64,
    /// Samples written without a user stack: their thread exited before its call returned.
    pub exited_pending: u64,
    /// Wake chains cut at the depth limit.
    pub chain_truncated: u64,
    /// Doublings of a CPU's sampling period at the rate cap (`OffCpuConfig::max_rate`).
    pub period_raised: u64,
    /// Run time of the task works that took user stacks (BPF stats do not count them).
    pub task_work_ns: u64,
    /// Samples written without a user stack: taken at rseq's return to user mode, and their
    /// thread has no rseq area.
    pub no_rseq: u64,
}

/// `--count FUNC@BINARY`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncProbe {
    pub function: String,
    pub binary: PathBuf,
}

/// What record's kernel side could not deliver or follow: samples and links dropped on a full
/// ring buffer, children that did not fit in the target set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordLost {
    pub samples: u64,
    pub links: u64,
    pub targets: u64,
}

/// One probe's exact count in one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncCountRead {
    pub pid: u32,
    pub probe: usize,
    pub count: u64,
}

/// The bytes of a record of pkprof.h, as a map update takes them.
fn plain_bytes<T: plain::Plain>(v: &T) -> &[u8] {
    // SAFETY: T is a pkprof.h record (Plain: plain old data without padding requirements).
    unsafe { plain::as_bytes(v) }
}

fn read_err(map: &'static str) -> impl Fn(libbpf_rs::Error) -> CollectError {
    CollectError::reading(map)
}

impl Collector {
    /// Makes `pid` a target (its samples are labelled as profiled; with follow_children its
    /// future children too).
    pub fn add_target(&self, pid: u32) -> Result<(), CollectError> {
        self.skel
            .maps
            .targets
            .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(read_err("targets"))
    }

    /// Takes `pid` out of the target set (its children already followed stay in).
    pub fn remove_target(&self, pid: u32) -> Result<(), CollectError> {
        self.skel
            .maps
            .targets
            .delete(&pid.to_ne_bytes())
            .map_err(read_err("targets"))
    }

    /// `record -- CMD`: the command's syscalls count from its execve, as `strace -f -c` counts
    /// them. `pid` is held before its execve, blocked in a call: what was counted of it so far
    /// (the fork's epilogue, its signal reset) is forgotten, and nothing it does is counted until
    /// its execve returns (`exec_gates` in cpu_account.bpf.c).
    pub fn count_syscalls_from_exec(&mut self, pid: u32) -> Result<(), CollectError> {
        self.skel
            .maps
            .exec_gates
            .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(read_err("exec_gates"))?;
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            // The command is held before its execve: no exit of it can race this store.
            bss.exec_gates_open += 1;
        }
        map_walk::sweep(
            &self.skel.maps.syscalls,
            "syscalls",
            |k: &pkprof_syscall_key, _: &pkprof_syscall_stat| k.pid != pid,
        )
    }

    /// Tells the sampler that `pid`'s maps are captured: its samples need not wake the reader.
    pub fn mark_captured(&self, pid: u32) -> Result<(), CollectError> {
        self.skel
            .maps
            .captured
            .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(read_err("captured"))
    }

    /// Tells the sampler that `pid` runs CPython laid out as `p` (docs/design.md, "Python
    /// frames"): its samples carry the interpreter's frames from now on.
    pub fn set_python(&self, pid: u32, p: &PyProc) -> Result<(), CollectError> {
        self.skel
            .maps
            .py_procs
            .update(&pid.to_ne_bytes(), plain_bytes(p), MapFlags::ANY)
            .map_err(read_err("py_procs"))
    }

    /// Forgets `pid`'s CPython layout (it exited; its PID may come back as another process).
    pub fn forget_python(&self, pid: u32) -> Result<(), CollectError> {
        match self.skel.maps.py_procs.delete(&pid.to_ne_bytes()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(read_err("py_procs")(e)),
        }
    }

    /// Processes in the kernel's target set now.
    pub fn targets(&self) -> Vec<u32> {
        self.skel
            .maps
            .targets
            .keys()
            .filter_map(|k| {
                k.get(..4)
                    .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            })
            .collect()
    }

    /// Record's losses so far, summed over CPUs.
    pub fn record_lost(&self) -> Result<RecordLost, CollectError> {
        let mut lost = RecordLost::default();
        for c in self.read_cpus()? {
            lost.samples += c.lost.sample_ring_full;
            lost.links += c.lost.link_ring_full;
            lost.targets += c.lost.target_map_full;
        }
        Ok(lost)
    }

    /// Own time of target threads that found the thread table full (part of the untracked time
    /// in `CpuCounters::untracked_ns`), summed over CPUs.
    pub fn untracked_target_ns(&self) -> Result<u64, CollectError> {
        Ok(self
            .read_cpus()?
            .iter()
            .map(|c| c.untracked_target_ns)
            .sum())
    }

    /// The off-CPU side's counts so far (`record --off-cpu`; zeros without it).
    pub fn offcpu_counts(&self) -> Result<OffCpuCounts, CollectError> {
        let key = 0u32.to_ne_bytes();
        let per_cpu = self
            .skel
            .maps
            .offcpu_stats
            .lookup_percpu(&key, MapFlags::ANY)
            .map_err(read_err("offcpu_stats"))?
            .unwrap_or_default();
        let mut n = OffCpuCounts::default();
        for bytes in per_cpu {
            let Ok(s) = plain::from_bytes::<pkprof_offcpu_stats>(&bytes) else {
                continue;
            };
            n.blocks += s.blocks;
            n.chosen += s.chosen;
            n.emitted += s.emitted;
            n.ring_full += s.ring_full;
            n.no_storage += s.no_storage;
            n.exited_pending += s.exited_pending;
            n.chain_truncated += s.chain_truncated;
            n.period_raised += s.period_raised;
            n.task_work_ns += s.task_work_ns;
            n.no_rseq += s.no_rseq;
        }
        Ok(n)
    }

    /// Exact call counts of the `--count` probes so far.
    pub fn func_counts(&self) -> Result<Vec<FuncCountRead>, CollectError> {
        Ok(map_walk::decoded::<_, pkprof_func_key, u64>(
            &self.skel.maps.func_counts,
            "func_counts",
        )?
        .into_iter()
        .map(|(key, count)| FuncCountRead {
            pid: key.pid,
            probe: key.probe as usize,
            count,
        })
        .collect())
    }
}
