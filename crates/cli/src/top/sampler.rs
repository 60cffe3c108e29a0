//! The sampling thread: owns the loaded BPF programs, reads them every refresh, turns the reads into
//! frames and hands each frame to the display and to every server.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use pkprof_accounting::{Accountant, Filter, Interval};
use pkprof_collect::{CollectError, Collector, Tracefs};

use super::TopOptions;
use crate::self_usage::SelfMeter;
use crate::signals;

/// Anything that wants every frame (HTTP server, UDP sender).
pub type Sink = Box<dyn FnMut(&Arc<Interval>) + Send>;

/// Starts the sampler; returns once the BPF programs are attached (or failed to be). Rows are per
/// thread while `per_thread` is set (the interactive view switches it with `H`).
pub fn spawn(
    opts: &TopOptions,
    per_thread: Arc<AtomicBool>,
    filter: Filter,
    frames: Sender<Arc<Interval>>,
    mut sinks: Vec<Sink>,
) -> Result<JoinHandle<Result<()>>> {
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), CollectError>>();
    let opts = opts.clone();
    let handle =
        thread::Builder::new()
            .name("pkprof-sampler".into())
            .spawn(move || -> Result<()> {
                let mut collector = match Collector::start(opts.collector()) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return Ok(());
                    }
                };
                match &collector.tracefs {
                    Tracefs::Mounted(p) => eprintln!("pkprof: mounted tracefs at {}", p.display()),
                    Tracefs::Unavailable(why) => eprintln!(
                        "pkprof: tracefs unavailable ({why}); checked tracepoints through BTF"
                    ),
                    Tracefs::Found(_) => {}
                }
                for off in collector.chains_off() {
                    eprintln!("pkprof: {off}");
                }
                if opts.bpf_stats && !collector.bpf_stats_enabled() {
                    eprintln!(
                        "pkprof: the kernel does not time BPF programs without CAP_SYS_ADMIN: \
                         pkprof's BPF run time is not measured (reads 0)"
                    );
                }
                let _ = ready_tx.send(Ok(()));
                let mut accountant =
                    Accountant::new(opts.per_thread, filter, collector.attach_mono_ns);
                let mut meter = SelfMeter::new(collector.attach_mono_ns);
                let mut namer = super::other_fns::Namer::new();
                let start = Instant::now();
                let mut n: u32 = 0;
                loop {
                    n += 1;
                    let deadline = start + opts.delay * n;
                    while Instant::now() < deadline {
                        if signals::stop_requested() {
                            return Ok(());
                        }
                        thread::sleep((deadline - Instant::now()).min(Duration::from_millis(50)));
                    }
                    accountant.set_per_thread(per_thread.load(Ordering::Relaxed));
                    let snap = collector.snapshot()?;
                    let mut frame = accountant.update(&snap, meter.sample(snap.mono_ns));
                    namer.name(&mut frame);
                    let frame = Arc::new(frame);
                    for sink in sinks.iter_mut() {
                        sink(&frame);
                    }
                    let targets_gone = targets_gone(&opts.pids, &frame);
                    if frames.send(frame).is_err() {
                        return Ok(()); // the display has finished
                    }
                    if targets_gone {
                        eprintln!("pkprof: every watched process has exited");
                        return Ok(());
                    }
                }
            })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(e.into())
        }
        Err(_) => Err(anyhow!("the sampling thread stopped during start-up")),
    }
}

/// With -p, true once every watched PID is gone and its last (exited) row has been shown.
fn targets_gone(pids: &[u32], frame: &Interval) -> bool {
    !pids.is_empty()
        && pids.iter().all(|pid| {
            !Path::new(&format!("/proc/{pid}")).exists()
                && !frame
                    .rows
                    .iter()
                    .any(|r| (r.pid == *pid || r.tid == Some(*pid)) && !r.exited)
        })
}
