//! Opens, configures, loads and attaches the accounting programs; owns them while they run.
//!
//! Dropping the `Collector` detaches everything. Programs are attached one at a time so a failure
//! names the program, and the links already made are dropped with the half-built collector: no
//! partial attach is left behind.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, OpenObject, PrintLevel};

use crate::error::CollectError;
use crate::preflight::{self, TracepointIndex};
use crate::record::{perf, uprobes, RecordConfig};
use crate::skel::types::pkprof_defaults as Defaults;
use crate::skel::{CpuAccountSkel, CpuAccountSkelBuilder};

/// Default capacity of the kernel's thread table (`--max-threads`; pkprof.h, as the BPF map).
pub const DEFAULT_MAX_THREADS: u32 = Defaults::PKPROF_DEFAULT_MAX_THREADS.0;
/// Default capacity of each chain's tag table (`--max-tags`; pkprof.h, as the BPF maps).
pub const DEFAULT_MAX_TAGS: u32 = Defaults::PKPROF_DEFAULT_MAX_TAGS.0;
/// Default wait of held receive work for its reader before it goes to KERNEL (`--tag-expire`,
/// seconds; pkprof.h, as the BPF default).
pub const DEFAULT_TAG_EXPIRE_S: f64 = Defaults::PKPROF_DEFAULT_TAG_EXPIRE_MS.0 as f64 / 1e3;
use crate::tracefs::Tracefs;

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
        }
    }
}

/// The loaded, attached accounting programs.
pub struct Collector {
    pub(crate) skel: CpuAccountSkel<'static>,
    _links: Vec<Link>,
    _stats_fd: Option<OwnedFd>,
    pub(crate) options: CollectorOptions,
    /// CLOCK_MONOTONIC right after attach: counting starts here.
    pub attach_mono_ns: u64,
    /// How tracefs was found, for the start-up message.
    pub tracefs: Tracefs,
    pub(crate) cpus: usize,
    /// Socket time expired by the user-space sweep, cumulative (ns, count).
    pub(crate) swept_expired: (u64, u64),
}

/// Programs attached by `attach_record` rather than to tracepoints, and the flush the reader runs
/// (never attached).
const RECORD_PROGS: &[&str] = &["on_sample", "on_func_entry", "flush_cpu"];

/// Attaches the sampling program to a cpu-clock event on every online CPU, and the uprobes.
fn attach_record(
    skel: &CpuAccountSkel<'static>,
    rec: &RecordConfig,
    links: &mut Vec<Link>,
) -> Result<(), CollectError> {
    for prog in skel.object().progs_mut() {
        match prog.name().to_string_lossy().as_ref() {
            "on_sample" => {
                for cpu in perf::online_cpus()? {
                    links.push(perf::attach_cpu_clock(&prog, cpu, rec.frequency_hz)?);
                }
            }
            "on_func_entry" => {
                for (i, probe) in rec.probes.iter().enumerate() {
                    links.push(uprobes::attach(&prog, i, probe)?);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The program libbpf last reported as failing to load, to name it in the error.
static LAST_FAILED_PROG: Mutex<Option<String>> = Mutex::new(None);

fn libbpf_log(level: PrintLevel, msg: String) {
    let msg = msg.trim_end();
    if let Some(rest) = msg.strip_prefix("libbpf: prog '") {
        if let (Some(end), true) = (rest.find('\''), msg.contains("failed to load")) {
            if let Ok(mut last) = LAST_FAILED_PROG.lock() {
                *last = Some(rest[..end].to_string());
            }
        }
    }
    match level {
        PrintLevel::Warn => tracing::debug!(target: "libbpf", "{msg}"),
        PrintLevel::Info => tracing::debug!(target: "libbpf", "{msg}"),
        PrintLevel::Debug => tracing::trace!(target: "libbpf", "{msg}"),
    }
}

/// Sends libbpf's messages to `tracing` (shown with -vv), never to the terminal directly, and
/// remembers which program failed to load.
pub(crate) fn route_libbpf_logs() {
    libbpf_rs::set_print(Some((PrintLevel::Debug, libbpf_log)));
}

/// A failed skeleton load as one line, naming the program libbpf reported (else `object`).
pub(crate) fn load_error(e: &libbpf_rs::Error, object: &str) -> CollectError {
    let prog = LAST_FAILED_PROG
        .lock()
        .ok()
        .and_then(|mut p| p.take())
        .unwrap_or_else(|| object.into());
    let reason = match e.kind() {
        libbpf_rs::ErrorKind::PermissionDenied => format!("the verifier rejected it ({e})"),
        _ if e.to_string().contains("Operation not permitted") => {
            format!("{e}; is the kernel locked down, or are BPF capabilities missing?")
        }
        _ => e.to_string(),
    };
    CollectError::Load { prog, reason }
}

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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

        route_libbpf_logs();
        // The skeleton borrows its object storage for as long as it lives; the collector lives
        // until the process exits, so the storage is leaked once per collector.
        let storage: &'static mut MaybeUninit<OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let load_err = |reason: String| CollectError::Load {
            prog: "cpu_account".into(),
            reason,
        };
        let mut open = CpuAccountSkelBuilder::default()
            .open(storage)
            .map_err(|e| load_err(e.to_string()))?;
        if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
            ro.split_modes = options.syscalls;
            ro.tag_expire_ns = options.tag_expire_ns;
            ro.rt_sigreturn_nr = syscalls::Sysno::rt_sigreturn.id() as u32;
            // The calls a new task returns from (see syscall_regs.bpf.h); arm64 has no fork.
            let nr = |name: &str| {
                name.parse::<syscalls::Sysno>()
                    .map_or(0xffff, |s| s.id() as u32)
            };
            ro.clone_nr = nr("clone");
            ro.clone3_nr = nr("clone3");
            ro.fork_nr = nr("fork");
            ro.vfork_nr = nr("vfork");
            ro.execve_nr = syscalls::Sysno::execve.id() as u32;
            ro.execveat_nr = syscalls::Sysno::execveat.id() as u32;
            if let Some(rec) = &options.record {
                ro.record_mode = true;
                ro.follow_children = rec.follow_children;
                ro.timer_on_stack = local_timer;
                ro.wakeup_bytes = u64::from(rec.ring_bytes / 4);
                ro.stack_bytes = rec.stack_bytes;
            }
        }
        if let Some(rec) = &options.record {
            open.maps
                .events
                .set_max_entries(rec.ring_bytes)
                .map_err(|e| load_err(e.to_string()))?;
            open.maps
                .targets
                .set_max_entries(rec.max_targets)
                .map_err(|e| load_err(e.to_string()))?;
            let cpus = libbpf_rs::num_possible_cpus().map_err(|e| load_err(e.to_string()))?;
            open.maps
                .sample_scratch
                .set_max_entries(cpus as u32)
                .map_err(|e| load_err(e.to_string()))?;
        }
        let recording = options.record.is_some();
        let counting = options
            .record
            .as_ref()
            .is_some_and(|r| !r.probes.is_empty());
        open.progs.on_sample.set_autoload(recording);
        open.progs.on_target_free.set_autoload(recording);
        open.progs.on_func_entry.set_autoload(counting);
        for map in [
            &mut open.maps.socks,
            &mut open.maps.reqs,
            &mut open.maps.works,
        ] {
            map.set_max_entries(options.max_tags)
                .map_err(|e| load_err(e.to_string()))?;
        }
        open.maps
            .threads
            .set_max_entries(options.max_threads)
            .map_err(|e| load_err(e.to_string()))?;
        open.progs.on_sys_enter.set_autoload(options.syscalls);
        open.progs.on_sys_exit.set_autoload(options.syscalls);
        open.progs.on_page_fault_user.set_autoload(faults);
        let (tcat, tev) = preflight::TCP_SENDMSG_TRACEPOINT;
        let tcp_sendmsg = index.has(tcat, tev);
        open.progs.on_tcp_sendmsg_locked.set_autoload(tcp_sendmsg);
        open.progs.on_sock_send_length.set_autoload(!tcp_sendmsg);
        open.progs.on_local_timer_entry.set_autoload(local_timer);
        open.progs.on_local_timer_exit.set_autoload(local_timer);
        let skel = open.load().map_err(|e| load_error(&e, "cpu_account"))?;

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

        let mut links = Vec::new();
        for prog in skel.object().progs_mut() {
            // Sampling and uprobe programs attach to events opened below, not to tracepoints.
            if !prog.autoload() || RECORD_PROGS.contains(&prog.name().to_string_lossy().as_ref()) {
                continue;
            }
            let name = prog.name().to_string_lossy().into_owned();
            let link = prog.attach().map_err(|e| CollectError::Attach {
                prog: name.clone(),
                reason: e.to_string(),
            })?;
            links.push(link);
        }
        if let Some(rec) = &options.record {
            attach_record(&skel, rec, &mut links)?;
        }
        let cpus = libbpf_rs::num_possible_cpus().map_err(|e| load_err(e.to_string()))?;
        // Everything is attached: counting starts now, on every CPU at once.
        let attach_mono_ns = monotonic_ns();
        let mut skel = skel;
        skel.maps
            .bss_data
            .as_deref_mut()
            .ok_or_else(|| load_err("the object has no .bss section".into()))?
            .count_from_ns = attach_mono_ns;
        Ok(Collector {
            skel,
            _links: links,
            _stats_fd: stats_fd,
            options,
            attach_mono_ns,
            tracefs,
            cpus,
            swept_expired: (0, 0),
        })
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
