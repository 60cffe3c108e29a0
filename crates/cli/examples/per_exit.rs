//! What one exited process costs the agent's accounting pipeline (docs/design.md, "The agent /
//! Cost"), without root: a fake kernel hands over made-up reads of a busy machine (90 threads
//! that persist, and EXITS new single-thread processes a read that appear once alive and once
//! exited, or only exited with `--exited-only`), and each read goes through what `pkprof agent`
//! drives: `Session::step`'s read (`Accountant::update`, the session's process table), the
//! `/metrics` exposition's `observe` of the frame, and every tenth read the window's close as far
//! as the accounting goes (`Session::take_window`, `Deltas::processes`, the window's table). Not
//! included: the kernel's read itself (the collector's map walk) and the window's symbolizing.
//!
//! Prints the thread CPU time (stable on a busy machine, where wall time is not) per exited
//! process and per read: median and minimum of REPS runs of READS reads.
//!
//! Usage: cargo run --release -p pkprof --example per_exit -- [EXITS] [--exited-only]

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use pkprof_accounting::{
    Counters, CpuCounters, OtherFnSample, RunqHist, Snapshot, ThreadSample, WallCounters,
};
use pkprof_agent::Deltas;
use pkprof_attribution::TargetSet;
use pkprof_live::prometheus::Exposition;
use pkprof_recording::{KernelSource, ProcessMaps, RingRecord, Session, UnwoundStack, UserRegs};

const READS: u64 = 60;
const REPS: usize = 9;
/// The agent's defaults: 10 s windows, /metrics top 20, limits.max_processes 10,000.
const WINDOW_READS: u64 = 10;
const METRICS_TOP: usize = 20;
const MAX_PROCESSES: usize = 10_000;

/// Hands over the prepared reads one by one; the ring stays empty.
struct Feed(VecDeque<Snapshot>);

impl KernelSource for Feed {
    type Error = Infallible;
    fn attach_mono_ns(&self) -> u64 {
        0
    }
    fn now_ns(&self) -> u64 {
        0
    }
    fn max_threads(&self) -> u32 {
        u32::MAX
    }
    fn open_ring(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
    fn poll(&mut self, _: Duration, _: &mut Vec<RingRecord>) -> Result<(), Infallible> {
        Ok(())
    }
    fn drain(&mut self, _: &mut Vec<RingRecord>) -> Result<(), Infallible> {
        Ok(())
    }
    fn close_ring(&mut self) {}
    fn snapshot(&mut self) -> Result<Snapshot, Infallible> {
        Ok(self.0.pop_front().expect("a read prepared"))
    }
    fn untracked_target_ns(&mut self) -> Result<u64, Infallible> {
        Ok(0)
    }
    fn targets(&mut self) -> Vec<u32> {
        Vec::new()
    }
    fn mark_captured(&mut self, _: u32) -> Result<(), Infallible> {
        Ok(())
    }
}

/// No process is sampled; a live process's executable is known (the agent reads /proc then).
struct Exes;

impl ProcessMaps for Exes {
    type Error = String;
    fn capture_process(&mut self, _: u32) -> Result<(), String> {
        Ok(())
    }
    fn ensure_mapped(&mut self, _: u32, _: u64) {}
    fn ensure_code_mapped(&mut self, _: u32, _: u64) {}
    fn unwind(&mut self, _: u32, _: UserRegs, _: &[u8], _: bool, _: &[u64]) -> UnwoundStack {
        UnwoundStack {
            frames: Vec::new(),
            end: None,
            unmapped: None,
        }
    }
    fn exe(&mut self, _: u32, live: bool) -> Option<String> {
        live.then(|| "/usr/bin/true".to_string())
    }
}

/// Counters of a thread that ran `ns` (a few runqueue waits, some blocked time).
fn counters(ns: u64) -> Counters {
    let mut hist = RunqHist::default();
    hist.0[RunqHist::bucket(3_000)] = 2;
    hist.0[RunqHist::bucket(40_000)] = 1;
    Counters {
        task_ns: ns,
        hardirq_ns: ns / 100,
        softirq_ns: [0, ns / 200, 0, ns / 300, 0, 0, 0, 0, 0, ns / 400],
        syscalls: ns / 1000,
        faults: ns / 5000,
        switches: 3 + ns / 100_000,
        wall: WallCounters {
            wall_ns: ns * 2,
            running_ns: ns,
            runq_ns: ns / 4,
            blocked_ns: [0, 0, ns / 4, 0, ns / 4, 0, ns / 4],
            blocks: [0, 0, 1, 0, 1, 0, 1],
            preemptions: 1,
            runq_waits: 3,
            runq_hist: hist,
            runq_max_ns: 40_000,
            ..WallCounters::default()
        },
        ..Counters::default()
    }
}

fn thread(tid: u32, pid: u32, comm: &str, ns: u64, kthread: bool, exited: bool) -> ThreadSample {
    ThreadSample {
        tid,
        pid,
        ppid: if kthread { 2 } else { 1 },
        cgroup_id: 7,
        comm: comm.to_string(),
        counters: counters(ns),
        kthread,
        exited,
        target: false,
    }
}

/// Read `k` (1-based): the 90 threads that persist (40 kernel threads, 10 single-thread
/// processes, 2 processes of 20 threads: one of them the CPU-bound loop), the processes born at
/// read `k` alive (unless `exited_only`) and those born at `k - 1` exited, one in four with an
/// OTHER kernel function.
fn read(k: u64, exits: u32, exited_only: bool) -> Snapshot {
    let mut threads = Vec::new();
    for i in 0..40 {
        threads.push(thread(2 + i, 2 + i, "kworker/0:1", k * 10_000, true, false));
    }
    for i in 0..10 {
        threads.push(thread(100 + i, 100 + i, "sshd", k * 50_000, false, false));
    }
    for (pid, comm, ns) in [(200, "loop", 900_000_000), (300, "java", 2_000_000)] {
        for t in 0..20 {
            threads.push(thread(pid + t, pid, comm, k * ns / 20, false, false));
        }
    }
    let born = |k: u64, i: u32| 1000 + (k as u32) * exits + i;
    let mut other_fns = Vec::new();
    if k > 1 {
        for i in 0..exits {
            let pid = born(k - 1, i);
            threads.push(thread(pid, pid, "true", 400_000, false, true));
            if i % 4 == 0 {
                other_fns.push(OtherFnSample {
                    tid: pid,
                    pid,
                    addr: 0xffff_ffff_8100_0000 + u64::from(i % 16),
                    ns: 20_000,
                    count: 1,
                });
            }
        }
    }
    if !exited_only {
        for i in 0..exits {
            let pid = born(k, i);
            threads.push(thread(pid, pid, "true", 100_000, false, false));
        }
    }
    Snapshot {
        mono_ns: k * 1_000_000_000,
        unix_s: 1.7e9 + k as f64,
        threads,
        cpus: (0..2)
            .map(|cpu| CpuCounters {
                cpu,
                idle_ns: k * 100_000_000,
                task_ns: k * 900_000_000,
                ..CpuCounters::default()
            })
            .collect(),
        other_fns,
        ..Snapshot::default()
    }
}

/// This thread's CPU time (ns).
fn cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One run of READS reads as the agent drives them; its CPU time (ns).
fn run(exits: u32, exited_only: bool) -> u64 {
    let mut feed = Feed((1..=READS).map(|k| read(k, exits, exited_only)).collect());
    let mut maps = Exes;
    let start = cpu_ns();
    let mut session = Session::new(
        &mut feed,
        &mut maps,
        TargetSet::System,
        &[],
        Duration::from_secs(1),
        false,
    )
    .with_read_every(Duration::ZERO);
    session.start().expect("ring");
    let mut exposition = Exposition::new(METRICS_TOP);
    let mut deltas = Deltas::default();
    let none: HashSet<u32> = HashSet::new();
    for k in 1..=READS {
        if k % WINDOW_READS == 0 {
            // Windows::close: the window's processes from the totals since attach.
            let mut recorded = session.take_window().expect("read");
            let totals = std::mem::take(&mut recorded.processes);
            let wp = deltas.processes(&totals, &|pid| none.contains(&pid), MAX_PROCESSES);
            recorded.processes = wp.processes.into_iter().map(|p| (p.pid, p)).collect();
            std::hint::black_box(&recorded.processes);
        } else {
            session.step().expect("read");
        }
        assert_eq!(session.frames_read(), k, "one read a step");
        // publish_new: every frame observed once.
        let frame = session.last_frame_shared().expect("a frame");
        exposition.observe(Arc::clone(frame));
    }
    drop(session);
    cpu_ns() - start
}

fn main() {
    let mut exits = 3000;
    let mut exited_only = false;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--exited-only" => exited_only = true,
            n => match n.parse() {
                Ok(e) if e > 0 => exits = e,
                _ => {
                    eprintln!("per_exit: EXITS must be a number of processes a read, at least 1");
                    std::process::exit(2);
                }
            },
        }
    }
    let mut runs: Vec<u64> = (0..REPS).map(|_| run(exits, exited_only)).collect();
    runs.sort_unstable();
    let exited = (READS - 1) * u64::from(exits);
    let per = |ns: u64| (ns as f64 / exited as f64, ns as f64 / READS as f64 / 1e6);
    let (med_exit, med_read) = per(runs[REPS / 2]);
    let (min_exit, min_read) = per(runs[0]);
    println!(
        "{exits} exits a read{}, {READS} reads, {REPS} runs: {med_exit:.0} ns per exited \
         process ({med_read:.2} ms CPU per read), median; min {min_exit:.0} ns ({min_read:.2} ms)",
        if exited_only {
            " (exited only)"
        } else {
            " (alive, then exited)"
        }
    );
}
