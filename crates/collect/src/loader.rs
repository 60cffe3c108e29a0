//! Opens, configures, loads and attaches the accounting programs; owns them while they run.
//!
//! Dropping the `Collector` detaches everything. Programs are attached one at a time so a failure
//! names the program, and the links already made are dropped with the half-built collector: no
//! partial attach is left behind.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use libbpf_rs::skel::Skel;
use libbpf_rs::Link;

use crate::chains::{self, Chain, ChainOff};
use crate::clock::monotonic_ns;
use crate::error::CollectError;
use crate::preflight::{self, TracepointIndex};
use crate::record::{perf, uprobes, OffCpuUserStacks, RecordConfig};
use crate::skel::types::{
    pkprof_defaults as Defaults, pkprof_offcpu_ustack as OffCpuUstack, pkprof_syscall_nr,
};

/// A syscall number no call has (pkprof.h: a call this architecture lacks).
const NO_SYSCALL: u32 = pkprof_syscall_nr::PKPROF_NO_SYSCALL.0;
use crate::short_lived::ShortLived;
use crate::skel::{CpuAccountSkel, CpuAccountSkelBuilder};
use crate::skeleton::{self, AttachPlan};
use crate::tracefs::Tracefs;

/// Default capacity of the kernel's thread table (`--max-threads`; pkprof.h, as the BPF map).
pub const DEFAULT_MAX_THREADS: u32 = Defaults::PKPROF_DEFAULT_MAX_THREADS.0;
/// Default capacity of each chain's tag table (`--max-tags`; pkprof.h, as the BPF maps).
pub const DEFAULT_MAX_TAGS: u32 = Defaults::PKPROF_DEFAULT_MAX_TAGS.0;
/// Default wait of held receive work for its reader before it goes to KERNEL (`--tag-expire`,
/// seconds; pkprof.h, as the BPF default).
pub const DEFAULT_TAG_EXPIRE_S: f64 = Defaults::PKPROF_DEFAULT_TAG_EXPIRE_MS.0 as f64 / 1e3;

/// What to collect. Plain data: the CLI converts its arguments into this.
#[derive(Clone, Debug)]
pub struct CollectorOptions {
    /// Attach the syscall tracepoints: exact user/sys split and per-syscall counts.
    pub syscalls: bool,
    /// Capacity of the kernel's thread table.
    pub max_threads: u32,
    /// Ask the kernel to measure our programs' run time (costs two clock reads per event).
    pub bpf_stats: bool,
    /// Capacity of each tag table (sockets, block requests, work items).
    pub max_tags: u32,
    /// Receive time held on a socket that nobody reads for this long goes to KERNEL.
    pub tag_expire_ns: u64,
    /// pkprof record: stack sampling, the target set and uprobes.
    pub record: Option<RecordConfig>,
    /// Opt-in chains to run ("server"): each costs on every syscall of the machine.
    pub opt_in_chains: Vec<&'static str>,
    /// Walks of the thread table a read may take to find one without a context switch during
    /// it (else a slice flushed into an entry already read shows at the next read). `top`
    /// shows each interval: 3; the agent, whose windows are differences of totals, takes 1
    /// (nothing is lost, a slice may move to the next read) rather than three walks a read on
    /// a busy machine.
    pub read_tries: u32,
    /// A process born and gone between two reads that cost less than this is counted in one
    /// row with the others, `pkprof_accounting::SHORT_LIVED_PID` (short_lived.rs); 0: every
    /// process has its own row. The agent's; `top` and `record` show each process.
    pub fold_short_lived_ns: u64,
}

impl Default for CollectorOptions {
    fn default() -> Self {
        CollectorOptions {
            syscalls: false,
            max_threads: DEFAULT_MAX_THREADS,
            bpf_stats: false,
            max_tags: DEFAULT_MAX_TAGS,
            tag_expire_ns: u64::from(Defaults::PKPROF_DEFAULT_TAG_EXPIRE_MS.0) * 1_000_000,
            record: None,
            opt_in_chains: Vec::new(),
            read_tries: 3,
            fold_short_lived_ns: 0,
        }
    }
}

/// The loaded, attached accounting programs.
pub struct Collector {
    pub(crate) skel: CpuAccountSkel<'static>,
    _links: Vec<Link>,
    /// The sampling events' descriptors (owned by their links in `_links`).
    sampling_fds: Vec<std::os::fd::RawFd>,
    _stats_fd: Option<OwnedFd>,
    pub(crate) options: CollectorOptions,
    /// CLOCK_MONOTONIC right after attach: counting starts here.
    pub attach_mono_ns: u64,
    /// How tracefs was found, for the start-up message.
    pub tracefs: Tracefs,
    pub(crate) cpus: usize,
    /// Socket time expired by the user-space sweep, cumulative (ns, count).
    pub(crate) swept_expired: (u64, u64),
    /// Thread entries the last walk of the thread table read: the next read's capacity, so
    /// that its large samples are not moved as the list grows.
    pub(crate) threads_read: usize,
    /// A failed kernel flush of a CPU was reported (reader.rs: once).
    pub(crate) flush_warned: bool,
    /// The chains running, and those a missing tracepoint turned off.
    pub(crate) chains: Vec<&'static Chain>,
    chains_off: Vec<ChainOff>,
    /// record --off-cpu: how a chosen block's user stack is taken (None without --off-cpu).
    offcpu_ustack: Option<OffCpuUstack>,
    /// Short-lived processes folded into one row (CollectorOptions::fold_short_lived_ns).
    pub(crate) short_lived: ShortLived,
}

/// Attaches the sampling program to a cpu-clock event on every online CPU, and the uprobes.
fn attach_record(
    skel: &CpuAccountSkel<'static>,
    rec: &RecordConfig,
    links: &mut Vec<Link>,
    sampling_fds: &mut Vec<std::os::fd::RawFd>,
) -> Result<(), CollectError> {
    for cpu in perf::online_cpus()? {
        let (link, fd) = perf::attach_cpu_clock(&skel.progs.on_sample, cpu, rec.frequency_hz)?;
        links.push(link);
        sampling_fds.push(fd);
    }
    for (i, probe) in rec.probes.iter().enumerate() {
        links.push(uprobes::attach(&skel.progs.on_func_entry, i, probe)?);
    }
    Ok(())
}

/// The programs attached to tracepoints: the core's, then each running chain's; the sampling and
/// uprobe programs attach to events opened by `attach_record`.
fn attach_plan<'a>(skel: &'a CpuAccountSkel<'static>, chains: &[&Chain]) -> AttachPlan<'a> {
    let p = &skel.progs;
    let mut list = vec![
        &p.on_sched_switch,
        &p.on_irq_entry,
        &p.on_irq_exit,
        &p.on_local_timer_entry,
        &p.on_local_timer_exit,
        &p.on_softirq_entry,
        &p.on_softirq_exit,
        &p.on_process_fork,
        &p.on_process_exec,
        &p.on_task_rename,
        &p.on_cgroup_attach_task,
        &p.on_process_exit,
        &p.on_sys_enter,
        &p.on_sys_exit,
        &p.on_page_fault_user,
        &p.on_target_free,
        &p.on_offcpu_waking,
        &p.on_offcpu_sys_exit,
        &p.on_offcpu_rseq_update,
        &p.on_offcpu_exit,
    ];
    for chain in chains {
        list.extend((chain.programs)(p));
    }
    AttachPlan {
        tracepoints: list,
        // flush_cpu is never attached: the reader runs it on each CPU (reader.rs).
        elsewhere: vec![&p.on_sample, &p.on_func_entry, &p.flush_cpu],
    }
}

impl Collector {
    /// Checks, loads and attaches. Every failure is a one-line `CollectError`.
    pub fn start(options: CollectorOptions) -> Result<Collector, CollectError> {
        preflight::check_privileges()?;
        preflight::check_kernel_btf()?;
        let (index, tracefs) = TracepointIndex::open();
        index.require(preflight::CORE_TRACEPOINTS)?;
        if options.syscalls {
            index.require(preflight::SYSCALL_TRACEPOINTS)?;
        }
        let (fcat, fev) = preflight::FAULT_TRACEPOINT;
        let faults = options.syscalls && index.has(fcat, fev);
        let local_timer = preflight::LOCAL_TIMER_TRACEPOINTS
            .iter()
            .all(|(c, e)| index.has(c, e));

        let (chains, chains_off) = chains::plan(&index, &options.opt_in_chains);

        let stats_fd = if options.bpf_stats {
            // SAFETY: plain syscall wrapper; returns a new fd or a negative error.
            let fd = unsafe {
                libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME)
            };
            // SAFETY: fd is a fresh descriptor we own when non-negative.
            (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
        } else {
            None
        };
        let cpus = skeleton::possible_cpus("cpu_account")?;
        // record --off-cpu takes a chosen sample's user stack as its call returns: in a task work
        // queued for its thread (Linux >= 6.18), else at rseq's return to user mode, else in a
        // program on every syscall exit (record/offcpu.bpf.h); or only the way the user named.
        let off_cpu_config = options.record.as_ref().and_then(|r| r.off_cpu.as_ref());
        let off_cpu = off_cpu_config.is_some();
        let named_way = off_cpu_config.is_some_and(|o| o.user_stacks != OffCpuUserStacks::Auto);
        let ways = off_cpu_ways(
            off_cpu_config.map_or(OffCpuUserStacks::Auto, |o| o.user_stacks),
            off_cpu && preflight::kernel_has_name("bpf_task_work_schedule_resume_impl"),
            off_cpu && index.has("rseq", "rseq_update") && preflight::kernel_task_rseq_is_pointer(),
        )?;
        let configure = |open: &mut crate::skel::OpenCpuAccountSkel<'static>,
                         ustack: OffCpuUstack| {
            if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
                ro.split_modes = options.syscalls;
                ro.tag_expire_ns = options.tag_expire_ns;
                ro.rt_sigreturn_nr = syscalls::Sysno::rt_sigreturn.id() as u32;
                // The calls a new task returns from (see syscall_regs.bpf.h); arm64 has no fork.
                let nr = |name: &str| {
                    name.parse::<syscalls::Sysno>()
                        .map_or(NO_SYSCALL, |s| s.id() as u32)
                };
                ro.clone_nr = nr("clone");
                ro.clone3_nr = nr("clone3");
                ro.fork_nr = nr("fork");
                ro.vfork_nr = nr("vfork");
                ro.execve_nr = syscalls::Sysno::execve.id() as u32;
                ro.execveat_nr = syscalls::Sysno::execveat.id() as u32;
                if let Some((pid, every)) = preflight::hidden_switches() {
                    ro.test_hide_pid = pid;
                    ro.test_hide_every = every;
                }
                if let Some(rec) = &options.record {
                    ro.record_mode = true;
                    ro.follow_children = rec.follow_children;
                    ro.timer_on_stack = local_timer;
                    ro.wakeup_bytes = u64::from(rec.ring_bytes / 4);
                    ro.capture_wake_min_age_ns = rec.capture_wake_min_age_ns;
                    ro.stack_bytes = rec.stack_bytes;
                    ro.label_by_client = rec.by_client;
                    if rec.skip_own_process {
                        // None skipped in a pid namespace of its own: its pid is not the tgid.
                        ro.skip_tgid = preflight::own_kernel_tgid().unwrap_or(0);
                    }
                    if let Some(off) = &rec.off_cpu {
                        ro.off_cpu = true;
                        ro.off_cpu_all = off.all;
                        ro.off_cpu_period_ns = off.period_ns;
                        ro.wake_chain_depth = off.wake_chain;
                        ro.offcpu_ustack = ustack;
                        ro.off_cpu_max_rate = off.max_rate;
                    }
                }
            }
            if let Some(rec) = &options.record {
                open.maps.events.set_max_entries(rec.ring_bytes)?;
                open.maps.targets.set_max_entries(rec.max_targets)?;
                open.maps.sample_scratch.set_max_entries(cpus as u32)?;
                // Two slots per CPU: cpu-clock samples and off-CPU samples (python.bpf.h).
                open.maps.py_scratch.set_max_entries(2 * cpus as u32)?;
                if rec.off_cpu.is_some() {
                    open.maps.offcpu_scratch.set_max_entries(cpus as u32)?;
                    open.maps
                        .offcpu_works
                        .set_max_entries(options.max_threads)?;
                }
            }
            let recording = options.record.is_some();
            let counting = options
                .record
                .as_ref()
                .is_some_and(|r| !r.probes.is_empty());
            let progs = &mut open.progs;
            progs.on_sample.set_autoload(recording);
            progs.on_target_free.set_autoload(recording);
            progs.on_func_entry.set_autoload(counting);
            progs.on_offcpu_waking.set_autoload(off_cpu);
            progs
                .on_offcpu_sys_exit
                .set_autoload(off_cpu && ustack == OffCpuUstack::PKPROF_OFFCPU_USTACK_SYS_EXIT);
            progs
                .on_offcpu_rseq_update
                .set_autoload(off_cpu && ustack == OffCpuUstack::PKPROF_OFFCPU_USTACK_RSEQ);
            progs.on_offcpu_exit.set_autoload(off_cpu);
            open.maps.threads.set_max_entries(options.max_threads)?;
            progs.on_sys_enter.set_autoload(options.syscalls);
            progs.on_sys_exit.set_autoload(options.syscalls);
            progs.on_page_fault_user.set_autoload(faults);
            progs.on_local_timer_entry.set_autoload(local_timer);
            progs.on_local_timer_exit.set_autoload(local_timer);
            for chain in chains::CHAINS {
                let setup = chains::Setup {
                    on: chains.iter().any(|c| c.name == chain.name),
                    index: &index,
                    max_tags: options.max_tags,
                };
                (chain.configure)(open, &setup)?;
            }
            Ok(())
        };
        let start = |ustack: OffCpuUstack| {
            skeleton::start(
                "cpu_account",
                CpuAccountSkelBuilder::default(),
                |open| configure(open, ustack),
                |_| Ok(()),
                |skel| attach_plan(skel, &chains),
            )
        };
        // A kernel may have the task-work kfunc and still refuse it from a tracepoint program
        // (6.18.44-fc-v1252: "sleepable callback in a program that is not sleepable"), or refuse
        // another way's program: each way whose own program is refused gives its place to the
        // next.
        let mut ways = ways.into_iter().peekable();
        let (mut skel, mut links, used) = loop {
            let way = ways
                .next()
                .expect("at least one way: the last is tried, not skipped");
            match start(way) {
                // The way's own program refused: the next way, if there is one; else a named
                // way says so, with the refusal as the cause. Any other refusal is the error.
                Err(e) if off_cpu && refused_program(&e) == Some(ustack_program(way)) => {
                    if let Some(next) = ways.peek() {
                        tracing::info!(
                            "off-CPU user stacks {}: {e}; taking them {} instead",
                            ustack_words(way),
                            ustack_words(*next)
                        );
                        continue;
                    }
                    if !named_way {
                        return Err(e);
                    }
                    return Err(CollectError::OffCpuUserStacks {
                        way: ustack_words(way),
                        why: "its program was refused",
                        source: Some(Box::new(e)),
                    });
                }
                started => {
                    let (skel, links) = started?;
                    break (skel, links, way);
                }
            }
        };
        let mut sampling_fds = Vec::new();
        if let Some(rec) = &options.record {
            attach_record(&skel, rec, &mut links, &mut sampling_fds)?;
        }
        // Everything is attached: counting starts now, on every CPU at once.
        let attach_mono_ns = monotonic_ns();
        skel.maps
            .bss_data
            .as_deref_mut()
            .ok_or_else(|| CollectError::read("bss", "the object has no .bss section"))?
            .count_from_ns = attach_mono_ns;
        let short_lived = ShortLived::new(options.fold_short_lived_ns);
        Ok(Collector {
            skel,
            _links: links,
            sampling_fds,
            _stats_fd: stats_fd,
            options,
            attach_mono_ns,
            tracefs,
            cpus,
            swept_expired: (0, 0),
            threads_read: 0,
            flush_warned: false,
            chains,
            chains_off,
            offcpu_ustack: off_cpu.then_some(used),
            short_lived,
        })
    }

    /// Stops or restarts stack sampling on every CPU (the agent's `ctl stop` / `ctl start`); the
    /// exact accounting is not affected.
    pub fn set_sampling(&self, on: bool) -> Result<(), CollectError> {
        for fd in &self.sampling_fds {
            perf::set_enabled(*fd, on)?;
        }
        Ok(())
    }

    /// record --off-cpu: where a chosen block's user stack is taken, in words (None without it).
    pub fn offcpu_user_stacks(&self) -> Option<&'static str> {
        self.offcpu_ustack.map(ustack_words)
    }

    /// The chains a missing tracepoint turned off at start (each says what goes unattributed).
    pub fn chains_off(&self) -> &[ChainOff] {
        &self.chains_off
    }

    /// Capacity of the kernel's thread table.
    pub fn max_threads(&self) -> u32 {
        self.options.max_threads
    }

    /// Whether the kernel times our programs (run time and run count in `bpf_prog_info`): with
    /// the BPF_ENABLE_STATS descriptor taken at start (needs CAP_SYS_ADMIN), or when stats are on
    /// for every program (`sysctl kernel.bpf_stats_enabled=1`). Without either, both stay 0,
    /// which means "not measured", not "free".
    pub fn bpf_stats_enabled(&self) -> bool {
        self._stats_fd.is_some()
            || std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
                .is_ok_and(|s| s.trim() == "1")
    }

    /// File descriptors and names of the loaded programs, for run-time statistics.
    pub(crate) fn prog_fds(&self) -> Vec<(String, i32)> {
        self.skel
            .object()
            .progs()
            .filter(|p| p.autoload())
            .map(|p| {
                (
                    p.name().to_string_lossy().into_owned(),
                    p.as_fd().as_raw_fd(),
                )
            })
            .collect()
    }
}

/// The ways to take off-CPU user stacks to try, in order, for the user's choice and what this
/// kernel has (the task-work kfunc, rseq's tracepoint with a pointer `task_struct.rseq`): `Auto`
/// tries each it has, best first, then the syscall exit, which always works; a named way is
/// the only one tried, and one the kernel lacks is an error that says so.
fn off_cpu_ways(
    choice: OffCpuUserStacks,
    task_work: bool,
    rseq: bool,
) -> Result<Vec<OffCpuUstack>, CollectError> {
    let lacks = |way, why| CollectError::OffCpuUserStacks {
        way,
        why,
        source: None,
    };
    Ok(match choice {
        OffCpuUserStacks::Auto => {
            let mut ways = Vec::new();
            if task_work {
                ways.push(OffCpuUstack::PKPROF_OFFCPU_USTACK_TASK_WORK);
            }
            if rseq {
                ways.push(OffCpuUstack::PKPROF_OFFCPU_USTACK_RSEQ);
            }
            ways.push(OffCpuUstack::PKPROF_OFFCPU_USTACK_SYS_EXIT);
            ways
        }
        OffCpuUserStacks::TaskWork if !task_work => Err(lacks(
            ustack_words(OffCpuUstack::PKPROF_OFFCPU_USTACK_TASK_WORK),
            "no bpf_task_work_schedule_resume (Linux >= 6.18)",
        ))?,
        OffCpuUserStacks::TaskWork => vec![OffCpuUstack::PKPROF_OFFCPU_USTACK_TASK_WORK],
        OffCpuUserStacks::Rseq if !rseq => Err(lacks(
            ustack_words(OffCpuUstack::PKPROF_OFFCPU_USTACK_RSEQ),
            "no rseq:rseq_update tracepoint, or a task_struct.rseq of another shape",
        ))?,
        OffCpuUserStacks::Rseq => vec![OffCpuUstack::PKPROF_OFFCPU_USTACK_RSEQ],
        OffCpuUserStacks::SysExit => vec![OffCpuUstack::PKPROF_OFFCPU_USTACK_SYS_EXIT],
    })
}

/// The program whose load or attach a way stands or falls by: the task work is queued from
/// the switch program, the other ways have their own.
fn ustack_program(u: OffCpuUstack) -> &'static str {
    match u {
        OffCpuUstack::PKPROF_OFFCPU_USTACK_TASK_WORK => "on_sched_switch",
        OffCpuUstack::PKPROF_OFFCPU_USTACK_RSEQ => "on_offcpu_rseq_update",
        _ => "on_offcpu_sys_exit",
    }
}

/// The program a load or attach error is about.
fn refused_program(e: &CollectError) -> Option<&str> {
    match e {
        CollectError::Load { prog, .. } | CollectError::Attach { prog, .. } => Some(prog),
        _ => None,
    }
}

/// Where a chosen off-CPU block's user stack is taken, in words.
fn ustack_words(u: OffCpuUstack) -> &'static str {
    match u {
        OffCpuUstack::PKPROF_OFFCPU_USTACK_TASK_WORK => "in a task work",
        OffCpuUstack::PKPROF_OFFCPU_USTACK_RSEQ => "at rseq's return to user mode",
        _ => "at syscall exit",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names the named-way error matches refusals by are the programs' own.
    #[test]
    fn each_way_names_a_program_of_the_object() {
        let offcpu = include_str!("bpf/record/offcpu.bpf.h");
        let core = include_str!("bpf/cpu_account.bpf.c");
        for way in [
            OffCpuUstack::PKPROF_OFFCPU_USTACK_TASK_WORK,
            OffCpuUstack::PKPROF_OFFCPU_USTACK_RSEQ,
            OffCpuUstack::PKPROF_OFFCPU_USTACK_SYS_EXIT,
        ] {
            let decl = format!("BPF_PROG({},", ustack_program(way));
            assert!(
                offcpu.contains(&decl) || core.contains(&decl),
                "{decl} is in no program source"
            );
        }
    }

    #[test]
    fn off_cpu_ways_follow_the_choice_and_what_the_kernel_has() {
        use OffCpuUserStacks::*;
        const TW: OffCpuUstack = OffCpuUstack::PKPROF_OFFCPU_USTACK_TASK_WORK;
        const RSEQ: OffCpuUstack = OffCpuUstack::PKPROF_OFFCPU_USTACK_RSEQ;
        const EXIT: OffCpuUstack = OffCpuUstack::PKPROF_OFFCPU_USTACK_SYS_EXIT;
        // (choice, task work there, rseq there) -> the ways tried, None: refused.
        let cases: [(OffCpuUserStacks, bool, bool, Option<Vec<OffCpuUstack>>); 9] = [
            (Auto, true, true, Some(vec![TW, RSEQ, EXIT])),
            (Auto, false, true, Some(vec![RSEQ, EXIT])),
            (Auto, false, false, Some(vec![EXIT])),
            (TaskWork, true, false, Some(vec![TW])),
            (TaskWork, false, true, None),
            (Rseq, true, true, Some(vec![RSEQ])),
            (Rseq, true, false, None),
            (SysExit, false, false, Some(vec![EXIT])),
            (SysExit, true, true, Some(vec![EXIT])),
        ];
        for (choice, tw, rseq, want) in cases {
            let got = off_cpu_ways(choice, tw, rseq);
            match want {
                Some(ways) => assert_eq!(got.ok(), Some(ways), "{choice:?} {tw} {rseq}"),
                None => assert!(
                    matches!(got, Err(CollectError::OffCpuUserStacks { .. })),
                    "{choice:?} {tw} {rseq}"
                ),
            }
        }
    }
}
