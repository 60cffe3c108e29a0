//! `pkprof syscalls`: count every syscall and every transition "A immediately followed by B" per
//! thread in the kernel, then print the syscall graph, its clusters and what could replace them
//! (text, Graphviz DOT or JSON).
//!
//! `launch` starts a command held before its exec, `convert` turns the kernel's counts and stacks
//! into the analysis model; the analysis and its formats live in the `pkprof-syscall-graph` crate.

mod convert;
mod launch;

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use pkprof_collect::syscall_graph::{SyscallGraphOptions, SyscallTracer};
use pkprof_symbolize::{Symbolizer, SymbolizerOptions};

use crate::signals;

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
    pub max_transitions: u32,
    pub timed: bool,
}

/// How often the run loop looks at the command, the PIDs, the clock and new processes.
const POLL: Duration = Duration::from_millis(10);
/// How often new processes get their mappings captured for symbolization: a process that lives
/// shorter than this may have its call sites unsymbolized (raw addresses).
const CAPTURE_EVERY: Duration = Duration::from_millis(10);

pub fn run(opts: SyscallsOptions) -> Result<()> {
    signals::install();
    let command = match &opts.target {
        SyscallsTarget::Command(argv) => {
            // A missing command is reported before anything is loaded.
            launch::resolve(argv.first().map(String::as_str).unwrap_or_default())?;
            Some(argv.clone())
        }
        SyscallsTarget::Pids(pids) => {
            for pid in pids {
                anyhow::ensure!(
                    std::path::Path::new(&format!("/proc/{pid}")).exists(),
                    "no process with PID {pid}"
                );
            }
            None
        }
        SyscallsTarget::System => None,
    };
    let mut tracer = SyscallTracer::start(&SyscallGraphOptions {
        all: matches!(opts.target, SyscallsTarget::System),
        follow_children: true,
        split_args: opts.split_args,
        stack_every: opts.stack_every,
        max_transitions: opts.max_transitions,
        timed: opts.timed,
    })?;
    let mut symbolizer = Symbolizer::new(SymbolizerOptions { lines: false });
    let started = Instant::now();
    let child = match (&command, &opts.target) {
        (Some(argv), _) => {
            let held = launch::fork_held(argv)?;
            let pid = held.pid;
            held.wait_blocked()?;
            tracer
                .add_target(pid)
                .context("making the command a target")?;
            held.release()?;
            Some(pid)
        }
        (None, SyscallsTarget::Pids(pids)) => {
            for &pid in pids {
                tracer.add_target(pid)?;
                let _ = symbolizer.capture_process(pid);
            }
            None
        }
        _ => None,
    };

    let mut last_capture = Instant::now();
    let mut exit_status = None;
    loop {
        std::thread::sleep(POLL);
        if last_capture.elapsed() >= CAPTURE_EVERY {
            for pid in tracer.traced_pids() {
                // A process that exited before its capture symbolizes as module+offset.
                let _ = symbolizer.capture_process(pid);
            }
            last_capture = Instant::now();
        }
        if signals::stop_requested() {
            break;
        }
        if opts.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        if let Some(pid) = child {
            if let Some(status) = launch::try_wait(pid) {
                exit_status = Some(status);
                break;
            }
        }
        if let SyscallsTarget::Pids(pids) = &opts.target {
            if pids
                .iter()
                .all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
            {
                eprintln!("pkprof: every traced process has exited");
                break;
            }
        }
    }
    let elapsed = started.elapsed();
    let raw = tracer.read()?;
    drop(tracer);
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
    let lost = &profile.lost;
    let mut parts = Vec::new();
    if lost.transitions_full > 0 {
        parts.push(format!(
            "{} calls not counted (the transition table is full: raise --max-transitions)",
            lost.transitions_full
        ));
    }
    if lost.sites_full > 0 {
        parts.push(format!(
            "{} call-site samples (the site table is full)",
            lost.sites_full
        ));
    }
    if lost.stacks_failed > 0 {
        parts.push(format!(
            "{} user stacks that could not be read",
            lost.stacks_failed
        ));
    }
    if kernel_lost.threads_full > 0 {
        parts.push(format!(
            "{} calls of threads whose state could not be allocated",
            kernel_lost.threads_full
        ));
    }
    if kernel_lost.targets_full > 0 {
        parts.push(format!(
            "{} child processes not followed (the target table is full)",
            kernel_lost.targets_full
        ));
    }
    if !parts.is_empty() {
        eprintln!("pkprof: lost: {}", parts.join("; "));
    }
    let report = render(&profile, &opts)?;
    match &opts.output {
        Some(path) => write_atomically(path, &report)
            .with_context(|| format!("writing {}", path.display()))?,
        None => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (| head) is not an error worth a message.
            let _ = out.write_all(&report).and_then(|_| out.flush());
        }
    }
    if let Some(status) = exit_status {
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) != 0 {
            eprintln!(
                "pkprof: the command exited with status {}",
                libc::WEXITSTATUS(status)
            );
        } else if libc::WIFSIGNALED(status) {
            eprintln!(
                "pkprof: the command was killed by signal {}",
                libc::WTERMSIG(status)
            );
        }
    }
    Ok(())
}

fn render(profile: &pkprof_syscall_graph::Profile, opts: &SyscallsOptions) -> Result<Vec<u8>> {
    use pkprof_syscall_graph::render;
    let options = pkprof_syscall_graph::Options {
        top: opts.top,
        ..Default::default()
    };
    let analysis = pkprof_syscall_graph::Analysis::new(profile, &options);
    let mut out = Vec::new();
    match opts.format {
        Format::Text => render::text::write(&analysis, &mut out),
        Format::Dot => render::dot::write(&analysis, &mut out),
        Format::Json => render::json::write(&analysis, &mut out),
    }
    .context("rendering the report")?;
    Ok(out)
}

/// Writes to a temporary name beside `path`, then renames: a full disk leaves no half file.
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("pkprof-tmp");
    let result = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = result.and_then(|_| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}
