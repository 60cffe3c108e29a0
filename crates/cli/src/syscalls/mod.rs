//! `pkprof syscalls`: count every syscall and every transition "A immediately followed by B" per
//! thread in the kernel, then print the syscall graph, its clusters and what could replace them
//! (text, Graphviz DOT or JSON).
//!
//! `crate::launch` starts the command held before its exec, `convert` turns the kernel's counts and stacks
//! into the analysis model; the analysis and its formats live in the `pkprof-syscall-graph` crate.

mod cache;
pub mod calibrate;
mod convert;
mod sites;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use pkprof_collect::syscall_graph::{SyscallGraphOptions, SyscallTracer};
use pkprof_symbolize::{Symbolizer, SymbolizerOptions};

use crate::launch;
use crate::output_file::OutputFile;
use crate::signals;
use crate::workload::{Ended, Workload};

/// What to trace.
#[derive(Clone, Debug)]
pub enum SyscallsTarget {
    /// Run this command (and its children), stop when it exits.
    Command(Vec<String>),
    /// These processes (and children they start).
    Pids(Vec<u32>),
    /// Every process but pkprof.
    System,
}

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Dot,
    Json,
}

/// Plain options, converted from the command line in cli.rs.
#[derive(Clone, Debug)]
pub struct SyscallsOptions {
    pub target: SyscallsTarget,
    pub duration: Option<Duration>,
    pub split_args: bool,
    pub format: Format,
    pub output: Option<PathBuf>,
    pub top: usize,
    pub stack_every: u32,
    /// Bytes of user stack copied per sampled call (0: frame pointers only).
    pub stack_bytes: u32,
    pub max_transitions: u32,
    pub timed: bool,
    /// Measure the cost table instead of tracing.
    pub calibrate: Option<calibrate::Mode>,
}

/// How long the run loop waits for process events before it looks at the clock and the targets
/// (and takes the call sites waiting in the ring).
const POLL: Duration = Duration::from_millis(10);

/// The ring of process events and call-site samples: 8 MiB, as `record`'s default, holds ~500
/// samples of 16 KiB; it is emptied every `POLL` and whenever a quarter of it is waiting.
const RING_BYTES: u32 = 8 << 20;

/// Traces and reports; returns pkprof's exit status: the command's (see `workload`), 0 without one.
pub fn run(mut opts: SyscallsOptions) -> Result<i32> {
    if let Some(mode) = opts.calibrate {
        return run_calibration(mode, &opts);
    }
    signals::install();
    // Everything the user gave is checked before anything is loaded.
    let program = match &opts.target {
        SyscallsTarget::Command(argv) => Some(launch::resolve(
            argv.first().map(String::as_str).unwrap_or_default(),
        )?),
        SyscallsTarget::Pids(pids) => {
            // A thread id stands for its process: targets are processes.
            opts.target = SyscallsTarget::Pids(crate::targets::resolve_pids(pids, "tracing")?);
            None
        }
        SyscallsTarget::System => None,
    };
    let mut output = opts
        .output
        .as_deref()
        .map(|p| OutputFile::create(p, "report"))
        .transpose()?;
    let mut tracer = SyscallTracer::start(&SyscallGraphOptions {
        all: matches!(opts.target, SyscallsTarget::System),
        follow_children: true,
        split_args: opts.split_args,
        stack_every: opts.stack_every,
        stack_bytes: opts.stack_bytes,
        ring_bytes: RING_BYTES,
        max_transitions: opts.max_transitions,
        timed: opts.timed,
    })?;
    let symbolizer = Symbolizer::new(SymbolizerOptions::default());
    let mut sites = sites::Sites::new(symbolizer, opts.stack_bytes > 0);
    let started = Instant::now();
    let mut child = match (&opts.target, program) {
        (SyscallsTarget::Command(argv), Some(program)) => {
            let held = launch::fork_held(&program, argv)?;
            let pid = held.pid;
            held.wait_blocked()?;
            tracer
                .add_target(pid)
                .context("making the command a target")?;
            held.release()?;
            Some(Workload::new(pid, &argv[0]))
        }
        (SyscallsTarget::Pids(pids), _) => {
            for &pid in pids {
                tracer.add_target(pid)?;
                sites.capture(&tracer, pid);
            }
            None
        }
        _ => None,
    };

    loop {
        // Processes are captured as they appear, so that they unwind and symbolize after they
        // exit; a process that exits before its capture shows addresses only.
        for event in tracer.poll_events(POLL)? {
            sites.event(&tracer, event);
        }
        if let Some(w) = child.as_mut() {
            w.try_wait(); // reaped as soon as it ends; the traced children may go on
        }
        if signals::stop_requested() || opts.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        // Like strace -f: until every traced process (children included) has exited.
        if !matches!(opts.target, SyscallsTarget::System) && !tracer.targets_alive() {
            if child.is_none() {
                eprintln!("pkprof: every traced process has exited");
            }
            break;
        }
    }
    let elapsed = started.elapsed();
    // The call sites still in the ring, then the tables as they were when the programs stopped.
    tracer.stop();
    for event in tracer.poll_events(Duration::ZERO)? {
        sites.event(&tracer, event);
    }
    if tracer.undecodable() > 0 {
        tracing::warn!("{} undecodable ring records", tracer.undecodable());
    }
    let (table, mut symbolizer) = sites.finish();
    let raw = tracer.read(table)?;
    drop(tracer);
    // Interrupted or out of time: the command is ended as strace ends it (see `workload`).
    let ended = child.as_mut().map(Workload::stop);
    let kernel_lost = raw.lost;
    let target = match &opts.target {
        SyscallsTarget::Command(argv) => format!("command: {}", argv.join(" ")),
        SyscallsTarget::Pids(pids) => format!(
            "pid {}",
            pids.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
        SyscallsTarget::System => "system-wide".to_string(),
    };
    let profile = convert::profile(raw, &mut symbolizer, target, elapsed, opts.split_args);
    // The report shows the losses too (in the same words); stderr says them with the remedy.
    let mut parts = pkprof_syscall_graph::render::lost_parts(&profile.lost);
    if profile.lost.transitions_full > 0 {
        parts.push("raise --max-transitions".into());
    }
    if kernel_lost.sites_ring_full > 0 {
        parts.push(format!(
            "{} of the user stacks dropped for want of room in the ring (raise --stack-every or \
             lower --stack-bytes)",
            kernel_lost.sites_ring_full
        ));
    }
    if kernel_lost.events_lost > 0 {
        parts.push(format!(
            "{} new processes not announced (they may not be symbolized)",
            kernel_lost.events_lost
        ));
    }
    if !parts.is_empty() {
        eprintln!("pkprof: lost: {}", parts.join("; "));
    }
    let report = render(&profile, &opts)?;
    match output.take() {
        Some(file) => {
            file.commit(|w| Ok(w.write_all(&report)?))?;
        }
        None => {
            crate::stdout::write(&report).context("writing the report to stdout")?;
        }
    }
    if let Some(e) = ended.filter(|e| *e != Ended::Exited(0)) {
        eprintln!("pkprof: command {}", e.describe());
    }
    Ok(ended.map_or(0, Ended::exit_code))
}

/// `--calibrate`: measures, caches (an unwritable cache is one line on stderr; the table is still
/// printed) and prints the table.
fn run_calibration(mode: calibrate::Mode, opts: &SyscallsOptions) -> Result<i32> {
    let output = opts
        .output
        .as_deref()
        .map(|p| OutputFile::create(p, "calibration"))
        .transpose()?;
    eprintln!("pkprof: calibrating ({mode:?} mode); keep the machine quiet meanwhile");
    let table = calibrate::calibrate(mode, &mut |line| tracing::info!("calibrate: {line}"))?;
    let path = cache::path();
    let where_ = match cache::store(&path, &table) {
        Ok(()) => format!("Cached in {}; `pkprof syscalls` uses it.", path.display()),
        Err(e) => {
            eprintln!("pkprof: cannot cache the calibration: {e:#}");
            format!(
                "Not cached ({}): later runs will not use it; set PKPROF_CACHE_DIR to a \
                 writable directory.",
                path.display()
            )
        }
    };
    let mut out = Vec::new();
    match opts.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &table).context("encoding the table")?;
            out.push(b'\n');
        }
        _ => pkprof_syscall_graph::render::text::cost_table(&table, &where_, &mut out)
            .context("rendering the table")?,
    }
    match output {
        Some(file) => {
            file.commit(|w| Ok(w.write_all(&out)?))?;
        }
        None => {
            crate::stdout::write(&out).context("writing the table to stdout")?;
        }
    }
    Ok(0)
}

fn render(
    profile: &pkprof_syscall_graph::SyscallProfile,
    opts: &SyscallsOptions,
) -> Result<Vec<u8>> {
    use pkprof_syscall_graph::render;
    let options = pkprof_syscall_graph::Options {
        top: opts.top,
        ..Default::default()
    };
    let costs = cache::find(&calibrate::machine_key());
    let analysis = pkprof_syscall_graph::Analysis::new(profile, &options).with_costs(costs);
    let mut out = Vec::new();
    match opts.format {
        Format::Text => render::text::write(&analysis, &mut out),
        Format::Dot => render::dot::write(&analysis, &mut out),
        Format::Json => render::json::write(&analysis, &mut out),
    }
    .context("rendering the report")?;
    Ok(out)
}
