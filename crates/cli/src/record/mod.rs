//! `pkprof record`: samples user and kernel stacks on every CPU, labels each sample with the process
//! it served, and writes a self-contained profile.
//!
//! Order of a run: check the targets, load and attach the BPF programs, start the command (a
//! target from its fork on, its syscalls counted from its execve), record, detach, describe the
//! recording, symbolize and assemble the profile (the pipeline is `pkprof_recording`, wired here
//! to the real kernel side and symbolizer in `sources`), write it atomically, print the summary
//! (`summary`).

mod costs;
mod options;
mod sources;
mod stop;
mod summary;
mod target;

use std::time::Instant;

use anyhow::{Context, Result};
use pkprof_attribution::targets::CgroupTree;
use pkprof_attribution::TargetSet;
use pkprof_collect::{Collector, CollectorOptions, RecordConfig};
use pkprof_profile::{FuncCount, OffCpu, OffCpuCounts, TargetKind, Targets};
use pkprof_recording::meta::{self, KernelLost};
use pkprof_recording::{Extras, Session, StopReason};
use pkprof_symbolize::{Symbolizer, SymbolizerOptions};

pub use options::{
    parse_probe, ring_bytes, RecordOptions, Target, DEFAULT_FREQUENCY_HZ, DEFAULT_OUTPUT,
};
pub(crate) use sources::{Kernel, Symbolizing};
use stop::StopWhen;

use crate::launch;
use crate::output_file::OutputFile;
pub use target::find_program;

use crate::self_usage::own_cpu_ns;
use crate::signals;
use crate::targets;
use crate::workload::{Ended, Workload};

/// Records; returns pkprof's exit status: the command's (see `workload`), 0 without one.
pub fn run(mut opts: RecordOptions) -> Result<i32> {
    // Check everything the user gave before loading anything.
    let target_set = match &opts.target {
        Target::Pids(pids) => {
            opts.target = Target::Pids(targets::resolve_pids(pids, "recording")?);
            TargetSet::Kernel
        }
        Target::Cgroup(path) => {
            let dir = targets::resolve_cgroup(path)?;
            opts.target = Target::Cgroup(dir.clone());
            TargetSet::Cgroup(
                CgroupTree::new(&dir)
                    .with_context(|| format!("reading cgroup {}", dir.display()))?,
            )
        }
        Target::Command(_) => TargetSet::Kernel,
        Target::System => TargetSet::System,
    };
    let program = match &opts.target {
        Target::Command(argv) => Some(launch::resolve(
            argv.first().map(String::as_str).unwrap_or_default(),
        )?),
        _ => None,
    };
    for p in &mut opts.probes {
        p.binary = target::resolve_binary(&p.binary)?;
    }
    let output = opts.output.clone();
    let out_file = OutputFile::create(&output, "profile")?;

    let collector_opts = CollectorOptions {
        syscalls: opts.syscalls,
        max_threads: opts.max_threads,
        bpf_stats: opts.bpf_stats,
        max_tags: opts.max_tags,
        tag_expire_ns: opts.tag_expire.as_nanos() as u64,
        record: Some(RecordConfig {
            frequency_hz: opts.frequency_hz,
            ring_bytes: options::ring_bytes(
                opts.ring_mib,
                opts.frequency_hz,
                // Every online CPU is sampled, whatever pkprof's own affinity.
                // SAFETY: sysconf reads a system constant.
                unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u64,
                opts.stack_bytes,
            )
            // Off-CPU samples come at up to (threads blocked) / period a second, each with its
            // stack bytes: room for them unless the size was given.
            .max(if opts.off_cpu.is_some() && opts.ring_mib.is_none() {
                OFF_CPU_RING_BYTES
            } else {
                0
            }),
            follow_children: matches!(opts.target, Target::Command(_)),
            max_targets: opts.max_targets,
            probes: opts.probes.clone(),
            stack_bytes: opts.stack_bytes,
            by_client: opts.by_client,
            skip_own_process: false,
            off_cpu: opts.off_cpu.clone(),
            // A recording wants every short-lived process's maps: each sample of a new one
            // wakes it.
            capture_wake_min_age_ns: 0,
        }),
        // The server chain (its marks label the samples) runs only for `--by client`.
        opt_in_chains: if opts.by_client {
            vec!["server"]
        } else {
            Vec::new()
        },
        ..CollectorOptions::default()
    };
    let mut collector = Collector::start(collector_opts)?;
    for off in collector.chains_off() {
        eprintln!("pkprof: {off}");
    }
    signals::install();
    let start_unix = meta::unix_ns();
    let cpu_before = own_cpu_ns();
    let mut child = match (&opts.target, &program) {
        (Target::Command(argv), Some(program)) => {
            // The command is sampled from its fork: pkprof is a target for that one moment. Its
            // syscalls count from its execve, as strace -f -c counts them (see `launch`).
            let me = std::process::id();
            collector.add_target(me)?;
            let held = launch::fork_held(program, argv);
            collector.remove_target(me)?;
            let held = held?;
            held.wait_blocked()?;
            collector
                .count_syscalls_from_exec(held.pid)
                .context("starting the command's syscall counts at its execve")?;
            let pid = held.pid;
            held.release()?;
            Some(Workload::new(pid, &argv[0]))
        }
        _ => None,
    };
    let pids = match (&opts.target, &child) {
        (Target::Pids(p), _) => p.clone(),
        (Target::Command(_), Some(c)) => vec![c.pid()],
        _ => Vec::new(),
    };
    for pid in &pids {
        collector.add_target(*pid)?;
    }
    let mut symbolizer = Symbolizing(Symbolizer::new(SymbolizerOptions {
        lines: opts.lines,
        unwind_memory_bytes: (opts.unwind_memory_mib as usize) << 20,
    }));
    eprintln!(
        "pkprof: recording at {} Hz{}{}; Ctrl-C stops",
        opts.frequency_hz,
        opts.duration
            .map(|d| format!(" for {:.1} s", d.as_secs_f64()))
            .unwrap_or_default(),
        collector
            .offcpu_user_stacks()
            .map(|w| format!("; off-CPU user stacks {w}"))
            .unwrap_or_default()
    );
    let mut stop = StopWhen {
        deadline: opts.duration.map(|d| Instant::now() + d),
        child: child.as_mut(),
        pids: if matches!(opts.target, Target::Pids(_)) {
            pids.clone()
        } else {
            Vec::new()
        },
    };
    let recorded = Session::new(
        &mut Kernel::new(&mut collector),
        &mut symbolizer,
        target_set,
        &pids,
        opts.tag_expire,
        opts.stack_bytes > 0,
    )
    .python(opts.python, opts.lines)
    .run(|| stop.check())?;
    let end_unix = meta::unix_ns();
    let record_lost = collector.record_lost()?;
    let off_counts = match &opts.off_cpu {
        Some(_) => Some(collector.offcpu_counts()?),
        None => None,
    };
    // A failed read of the call counts must not throw the recording away: said, and left out.
    let func_reads = collector.func_counts().unwrap_or_else(|e| {
        if !opts.probes.is_empty() {
            eprintln!("pkprof: cannot read the exact call counts ({e}); the profile has none");
        }
        Vec::new()
    });
    let frame = recorded.last_frame.clone().unwrap_or_default();
    let cpu_recording = own_cpu_ns().saturating_sub(cpu_before);
    let bpf_stats = collector.bpf_stats_enabled();
    // Our programs' kallsyms names vanish with them: read the kernel's symbols before detaching.
    symbolizer.0.snapshot_kernel_symbols();
    drop(collector); // detach before symbolizing: our own work is not sampled

    // Interrupted or out of time: the command is ended as perf record ends it (see `workload`).
    let ended = child.as_mut().map(Workload::stop);
    let why = match recorded.stop {
        StopReason::Duration => "duration reached",
        StopReason::Interrupted => "interrupted",
        StopReason::TargetsGone => "every target exited",
        StopReason::CommandExited => "",
    };
    let exit_note = match ended {
        Some(e) if why.is_empty() => format!("command {}", e.describe()),
        Some(e) => format!("{why}; command {}", e.describe()),
        None => why.to_string(),
    };

    let meta = meta::build(meta::Inputs {
        pkprof_version: env!("CARGO_PKG_VERSION"),
        frequency_hz: opts.frequency_hz,
        targets: targets(&opts.target, &pids),
        start_unix_ns: start_unix,
        end_unix_ns: end_unix,
        frame: &frame,
        recorded: &recorded,
        kernel_lost: KernelLost {
            ring_buffer_full: record_lost.samples + record_lost.links,
            target_table_full: record_lost.targets,
        },
        pkprof_cpu_ns: cpu_recording,
        bpf_stats,
    });
    let func_counts = func_reads
        .into_iter()
        .filter_map(|r| {
            // Not a probe of ours: cannot happen, the cookie is its index.
            let probe = opts.probes.get(r.probe)?;
            Some(FuncCount {
                pid: r.pid,
                binary: probe.binary.display().to_string(),
                function: probe.function.clone(),
                count: r.count,
            })
        })
        .collect();
    let off_cpu = opts.off_cpu.as_ref().zip(off_counts).map(|(o, n)| OffCpu {
        period_ns: o.period_ns,
        wake_chain: o.wake_chain,
        max_rate: o.max_rate,
        counts: OffCpuCounts {
            blocks: n.blocks,
            chosen: n.chosen,
            ring_full: n.ring_full,
            no_storage: n.no_storage,
            exited_pending: n.exited_pending,
            chain_truncated: n.chain_truncated,
            period_raised: n.period_raised,
            task_work_ns: n.task_work_ns,
            no_rseq: n.no_rseq,
        },
        groups: Vec::new(),
    });
    let extras = Extras {
        func_counts,
        bpf_stats_unmeasured: opts.bpf_stats && !bpf_stats,
        off_cpu,
    };
    let profile = pkprof_recording::profile(meta, &recorded, &mut symbolizer, extras);
    let bytes = out_file.commit(|w| Ok(pkprof_profile::write_profile(&profile, w)?))?;
    let mut text = summary::render(
        &profile,
        &output.display().to_string(),
        bytes,
        opts.summary_rows,
        &exit_note,
    );
    // The sampling program's mean run time by the kernel's BPF statistics (ring output included).
    let sampler_mean_ns = frame
        .progs
        .iter()
        .find(|p| p.name == "on_sample" && p.run_cnt > 0)
        .map(|p| p.run_ns as f64 / p.run_cnt as f64);
    text.push_str(&costs::render(&recorded.costs, sampler_mean_ns));
    crate::stdout::write(text.as_bytes()).context("writing the summary")?;
    Ok(ended.map_or(0, Ended::exit_code))
}

/// The ring buffer's size with `--off-cpu` (unless `--ring-mib` is given): 64 MiB.
const OFF_CPU_RING_BYTES: u32 = 64 << 20;

/// What was profiled, as the profile describes it.
fn targets(target: &Target, pids: &[u32]) -> Targets {
    let (kind, command, cgroup) = match target {
        Target::Command(argv) => (TargetKind::Command, argv.clone(), String::new()),
        Target::Pids(_) => (TargetKind::Pids, Vec::new(), String::new()),
        Target::Cgroup(p) => (TargetKind::Cgroup, Vec::new(), p.display().to_string()),
        Target::System => (TargetKind::System, Vec::new(), String::new()),
    };
    Targets {
        kind,
        command,
        pids: pids.to_vec(),
        cgroup,
    }
}
