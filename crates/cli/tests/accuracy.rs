//! Accuracy against the kernel's own exact figures (root and BPF needed):
//! `cargo test -p pkprof --test accuracy -- --include-ignored --nocapture --test-threads=1`
//!
//! Each test drives a small C workload (tests/workloads/), watches it with `pkprof top --json`, and
//! compares pkprof's totals with a ground truth the kernel measured independently:
//! CLOCK_PROCESS_CPUTIME_ID / CLOCK_THREAD_CPUTIME_ID / getrusage(RUSAGE_CHILDREN) (all read the
//! scheduler's sum_exec_runtime, which on this kernel, without IRQ_TIME_ACCOUNTING, includes the
//! interrupt work that ran on top of the task: the same quantity as pkprof's on-CPU), or softirq
//! tracepoints recorded by `perf`. Every figure compared is printed (run with --nocapture).

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;

const SEC: Duration = Duration::from_secs(1);

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// CPU `cpu`'s busy time by tick sampling, from /proc/stat (user+nice+system+irq+softirq), in ns.
fn proc_stat_busy_ns(cpu: u32) -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").expect("read /proc/stat");
    let line = stat
        .lines()
        .find(|l| l.starts_with(&format!("cpu{cpu} ")))
        .expect("cpu line in /proc/stat");
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    // Fields in USER_HZ (100/s): user nice system idle iowait irq softirq ...
    (f[0] + f[1] + f[2] + f[5] + f[6]) * 10_000_000
}

/// Time the host took the vCPUs away (steal, all CPUs), from /proc/stat, in ns. The kernel leaves
/// it out of a task's runtime (CONFIG_PARAVIRT_TIME_ACCOUNTING: the rq clock skips it), pkprof's
/// clock between two switches does not: a slice the host cut short reads longer in pkprof by the
/// steal inside it. The ticks' 10 ms grain makes this an estimate.
fn steal_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").expect("read /proc/stat");
    let line = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .expect("cpu line in /proc/stat");
    // Fields: user nice system idle iowait irq softirq steal ...
    let steal: u64 = line
        .split_whitespace()
        .nth(8)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    steal * 10_000_000
}

/// CPU `cpu`'s exact busy time (task + hard IRQ + softirq) in a pkprof frame, in ns.
fn pkprof_cpu_busy_ns(frame: &Value, cpu: u64) -> u64 {
    let c = frame["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cpu"] == cpu)
        .expect("cpu in frame");
    let t = &c["total"];
    u64_of(t, "task_ns")
        + u64_of(t, "hardirq_ns")
        + t["softirq_ns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .sum::<u64>()
}

fn is_exited(row: &Value) -> bool {
    row["exited"] == true
}

/// Runs `tick_dodge`, busy 2 ms of every 4 ms on CPU 1 and always asleep when the 250 Hz tick
/// fires: tick sampling sees almost nothing, exact accounting must see all of it.
#[test]
#[ignore = "needs root and BPF"]
fn tick_aliasing() {
    let bin = build_workload("tick_dodge");
    // Without the tick's phase the workload would not dodge the tick and this test would test
    // nothing. The phase is the kernel's: its timer interrupts on the workload's CPU
    // (irq_vectors:local_timer_entry, on the CLOCK_MONOTONIC the workload keeps time by) while
    // the workload spins its 400 ms calibration there. The workload's own guess from the gaps in
    // its loop is printed beside it: on this VM the host takes the vCPU away in bursts that no
    // guest event shows (some 1,000 extra gaps a second, for minutes at a time), and that guess
    // then finds no phase it can trust.
    let trace = Trace::start("tick", &[("irq_vectors/local_timer_entry", "")]);
    let mut w = Proc::spawn(cmd(&bin, &["1", "10"]));
    let ready = w.expect("ready", 10 * SEC);
    let events = trace.stop_and_read();
    drop(trace);
    let ticks: Vec<u64> = (events.iter())
        .filter(|e| e.cpu == 1 && e.name == "local_timer_entry")
        .map(|e| e.ts)
        .collect();
    const TICK_NS: u64 = 4_000_000;
    const BINS: u64 = 40;
    let mut bins = [0u32; BINS as usize];
    for t in &ticks {
        bins[(t % TICK_NS * BINS / TICK_NS) as usize] += 1;
    }
    // The busiest 100 us bin and its neighbours (a phase at a bin edge splits its ticks).
    let best = (0..BINS as usize).max_by_key(|&i| bins[i]).unwrap();
    let near = |d: usize| bins[(best + d) % BINS as usize];
    let found = near(BINS as usize - 1) + near(0) + near(1);
    let in_band: Vec<u64> = (ticks.iter())
        .map(|t| t % TICK_NS)
        .filter(|p| {
            (p * BINS / TICK_NS).abs_diff(best as u64) <= 1
                || (p * BINS / TICK_NS).abs_diff(best as u64) == BINS - 1
        })
        .collect();
    // The mean phase of those ticks (unwrapped around the band's centre).
    let centre = best as u64 * TICK_NS / BINS + TICK_NS / BINS / 2;
    let offset: i64 = (in_band.iter())
        .map(|&p| {
            (p as i64 - centre as i64 + TICK_NS as i64 * 3 / 2) % TICK_NS as i64
                - TICK_NS as i64 / 2
        })
        .sum::<i64>()
        / in_band.len().max(1) as i64;
    let phase = (centre as i64 + offset).rem_euclid(TICK_NS as i64) as u64;
    eprintln!(
        "tick phase from the kernel: {found} of {} timer interrupts on CPU 1 within 150 us of \
         {:.1} us (mod 4 ms); the workload's own guess: {} of {} loop gaps at {:.1} us",
        ticks.len(),
        phase as f64 / 1e3,
        ready[0],
        ready[3],
        ready[2].parse::<f64>().unwrap() / 1e3
    );
    assert!(
        ticks.len() >= 50 && found as usize * 10 >= ticks.len() * 9,
        "the kernel's timer interrupts on CPU 1 show no steady 250 Hz phase ({found} of {} near \
         the busiest): cannot dodge the tick",
        ticks.len()
    );
    let pid = w.pid();
    let mut top = Top::start(&["-d", "0.5", "-p", &pid.to_string()]);
    let before = top.next_frame(5 * SEC).expect("a frame before the gate");
    let ticks_before = proc_stat_busy_ns(1);
    w.send_line(&format!("go {phase}"));
    let gate = w.expect("gate", 5 * SEC);
    let end = w.expect("end", 30 * SEC);
    let (gate_cpu, gate_csw): (u64, u64) = (gate[0].parse().unwrap(), gate[2].parse().unwrap());
    let (end_cpu, windows, end_csw): (u64, u64, u64) = (
        end[0].parse().unwrap(),
        end[1].parse().unwrap(),
        end[3].parse().unwrap(),
    );
    w.wait(10 * SEC);
    let last = top.wait_for(10 * SEC, |f| row_of(f, pid).is_some_and(is_exited));
    let ticks_after = proc_stat_busy_ns(1);
    let exact = end_cpu - gate_cpu;
    let row = row_of(&last, pid).unwrap();
    let pk = on_cpu_ns(row);

    let cpu1_exact = pkprof_cpu_busy_ns(&last, 1) - pkprof_cpu_busy_ns(&before, 1);
    let cpu1_ticks = ticks_after - ticks_before;
    eprintln!(
        "tick_aliasing: {windows} busy windows; workload CPU (CLOCK_PROCESS_CPUTIME_ID) {:.3} ms, \
         pkprof {:.3} ms, error {:.3}%",
        ms(exact),
        ms(pk),
        rel_err(pk, exact) * 100.0
    );
    // Diagnostics. Each window starts with a timer wakeup: the kernel charges a woken task from
    // the rq clock stamp of its wakeup (wakeup_preempt -> rq_clock_skip_update), pkprof from its
    // sched_switch. A context switch pkprof missed loses a whole slice (compare the counts; pkprof
    // also counts the few switches after the workload's last reading).
    eprintln!(
        "tick_aliasing: kernel - pkprof = {:.3} ms, {:.1} us per busy window; context switches: \
         kernel {} (gate to end), pkprof {}; pkprof lost counters {}",
        (exact as f64 - pk as f64) / 1e6,
        (exact as f64 - pk as f64) / 1e3 / windows.max(1) as f64,
        end_csw - gate_csw,
        row["total"]["switches"],
        last["lost"]
    );
    eprintln!(
        "tick_aliasing: CPU 1 busy over the run (all tasks): tick-sampled /proc/stat {:.0} ms vs \
         exact (pkprof) {:.0} ms: tick sampling off by {:+.1}%",
        ms(cpu1_ticks),
        ms(cpu1_exact),
        (cpu1_ticks as f64 - cpu1_exact as f64) * 100.0 / cpu1_exact as f64
    );
    assert!(
        exact > 2_000_000_000,
        "the workload ran too little ({:.0} ms) to judge",
        ms(exact)
    );
    assert!(
        rel_err(pk, exact) <= 0.005,
        "pkprof {:.3} ms vs CLOCK_PROCESS_CPUTIME_ID {:.3} ms: off by more than 0.5%",
        ms(pk),
        ms(exact)
    );
}

/// Three threads busy 20%, 50% and 80% of every 10 ms: each thread's pkprof on-CPU (-H) must match
/// its own CLOCK_THREAD_CPUTIME_ID.
#[test]
#[ignore = "needs root and BPF"]
fn thread_busy_fractions() {
    let bin = build_workload("thread_duty");
    let w = Proc::spawn(cmd(&bin, &["4", "10", "0.2", "0.5", "0.8"])); // 4 s, 10 ms periods
    let pid = w.pid().to_string();
    let top = Top::start(&["-d", "0.5", "-H", "-p", &pid]);
    let (fin, _) = threads_match_their_clocks("thread_busy_fractions", top, vec![(w, 3)]);
    eprintln!(
        "thread_busy_fractions: pkprof lost counters {}",
        fin["lost"]
    );
}

/// The kernel sometimes leaves a switch unreported (docs/design.md, "lost switches"; on these VMs
/// the switch-outs of some threads outside our PID namespace). Here one in every three switches to
/// or from a thread of one workload is ignored (PKPROF_TEST_HIDE_SWITCHES): first while a second
/// workload shares its CPU (short slices, the register holding the other's threads), then alone
/// on it with 20 ms slices (the register holding the idle task). Every thread must still match its
/// own CLOCK_THREAD_CPUTIME_ID: what a thread ran unseen is billed to it at its next reported
/// switch-out; no thread is billed another's stretch, or idle time.
#[test]
#[ignore = "needs root and BPF"]
fn unreported_switches_bill_no_one_else() {
    // 3 s, 2 ms periods: many short slices; beside it, two threads of 10 ms periods.
    hidden_switches_case(
        "shared CPU",
        &["3", "2", "0.3"],
        Some(&["3", "10", "0.2", "0.4"]),
    );
    // 3 s, 40 ms periods half busy: slices longer than the 10 ms a slice may differ from ours.
    hidden_switches_case("alone", &["3", "40", "0.5"], None);
}

/// One case of `unreported_switches_bill_no_one_else`: `hidden` (thread_duty arguments, one busy
/// fraction) has one in three of its switches ignored, `other` (if any) runs beside it, both on
/// CPU 0.
fn hidden_switches_case(case: &str, hidden: &[&str], other: Option<&[&str]>) {
    let test = format!("unreported_switches_bill_no_one_else ({case})");
    let bin = build_workload("thread_duty");
    let on_cpu0 = |args: &[&str]| {
        let mut c = Command::new("taskset");
        c.args(["-c", "0"]).arg(&bin).args(args);
        Proc::spawn(c)
    };
    let frac = format!("{:.2}", hidden[2].parse::<f64>().unwrap());
    let mut workloads = vec![(on_cpu0(hidden), 1)];
    if let Some(args) = other {
        workloads.push((on_cpu0(args), args.len() - 2));
    }
    let pids: Vec<String> = workloads.iter().map(|(w, _)| w.pid().to_string()).collect();
    let (top, _, _stderr) = Top::start_with_env(
        &["-d", "0.5", "-H", "-p", &pids.join(",")],
        &[("PKPROF_TEST_HIDE_SWITCHES", &format!("{}:3", pids[0]))],
    );
    let (fin, truth) = threads_match_their_clocks(&test, top, workloads);
    let lost = &fin["lost"];
    let sum = |field: &str| -> u64 {
        let cpus = fin["cpus"].as_array().expect("cpus in the frame");
        cpus.iter().map(|c| u64_of(&c["total"], field)).sum()
    };
    let (missed, recovered) = (sum("missed_ns"), sum("recovered_ns"));
    eprintln!(
        "{test}: pkprof lost counters {lost}; missed {:.1} ms, recovered {:.1} ms",
        ms(missed),
        ms(recovered)
    );
    // The hidden thread's own switches alone make a third of its count unreported; the VM's
    // own lost switches are tens a second.
    let hidden_csw = (truth.values())
        .find(|(f, _, _)| *f == frac)
        .map(|t| t.2)
        .expect("the hidden workload's thread");
    assert!(
        lost["missed_switch"].as_u64().unwrap_or(0) >= hidden_csw / 6,
        "{test}: the switches were not hidden ({hidden_csw} switches of the hidden thread): {lost}"
    );
    // What was recovered had been missed first: no stretch billed twice.
    assert!(
        recovered > 0 && recovered <= missed,
        "{test}: recovered {recovered} ns against missed {missed} ns"
    );
}

/// tid -> (busy fraction, CLOCK_THREAD_CPUTIME_ID, context switches), as the thread printed them.
type ThreadTruth = HashMap<u64, (String, u64, u64)>;

/// Starts `thread_duty` workloads (each with its number of threads; each waits for a line on
/// stdin) and checks every thread's final pkprof on-CPU (`top -H`) against its own
/// CLOCK_THREAD_CPUTIME_ID: within 0.5%, and longer by at most the host's steal. Returns the last
/// frame and what the threads printed.
fn threads_match_their_clocks(
    test: &str,
    mut top: Top,
    workloads: Vec<(Proc, usize)>,
) -> (Value, ThreadTruth) {
    let steal_before = steal_ns();
    let mut workloads = workloads;
    for (w, _) in &mut workloads {
        w.send_line("go");
    }
    let mut truth = ThreadTruth::new();
    for (w, threads) in &mut workloads {
        for _ in 0..*threads {
            let t = w.expect("thread", 20 * SEC);
            let (cpu, csw) = (t[2].parse().unwrap(), t[3].parse().unwrap());
            truth.insert(t[0].parse().unwrap(), (t[1].clone(), cpu, csw));
        }
    }
    let pids: Vec<u32> = workloads.iter().map(|(w, _)| w.pid()).collect();
    for (w, _) in &mut workloads {
        w.wait(10 * SEC);
    }
    let steal = steal_ns() - steal_before;
    // Each thread's last row (the one marked exited) holds its final totals.
    let mut last: HashMap<u64, Value> = HashMap::new();
    let fin = top.wait_for(10 * SEC, |f| {
        for r in rows(f) {
            last.insert(r["tid"].as_u64().expect("-H rows have a tid"), r.clone());
        }
        pids.iter()
            .all(|&pid| row_of(f, pid).is_some_and(is_exited))
    });
    eprintln!("{test}: steal on all CPUs over the run {:.0} ms", ms(steal));
    // Print every thread before asserting on any.
    let mut results = Vec::new();
    for (tid, (frac, exact, csw)) in &truth {
        let row = last
            .get(tid)
            .unwrap_or_else(|| panic!("no row for thread {tid}"));
        assert!(is_exited(row), "thread {tid}'s exited row was never shown");
        let pk = on_cpu_ns(row);
        eprintln!(
            "{test}: tid {tid} (busy {frac}): CLOCK_THREAD_CPUTIME_ID {:.3} ms, pkprof {:.3} ms, \
             error {:.3}%; context switches: kernel {csw}, pkprof {}",
            ms(*exact),
            ms(pk),
            rel_err(pk, *exact) * 100.0,
            row["total"]["switches"]
        );
        results.push((*tid, *exact, pk));
    }
    for (tid, exact, pk) in results {
        assert!(
            exact > 200_000_000,
            "thread {tid} ran too little ({:.0} ms)",
            ms(exact)
        );
        // 0.5%, and pkprof may read longer by at most the host's steal (see `steal_ns`).
        let (lo, hi) = (exact as f64 * 0.995, exact as f64 * 1.005 + steal as f64);
        assert!(
            (lo..=hi).contains(&(pk as f64)),
            "thread {tid}: pkprof {:.3} ms vs CLOCK_THREAD_CPUTIME_ID {:.3} ms: off by more than \
             0.5% (+{:.0} ms of steal)",
            ms(pk),
            ms(exact),
            ms(steal)
        );
    }
    (fin, truth)
}

/// 1,000 children of ~1.5 ms each: the sum of their final pkprof totals must match what the
/// parent's getrusage(RUSAGE_CHILDREN) says they used.
#[test]
#[ignore = "needs root and BPF"]
fn short_lived_processes() {
    const N: usize = 1000;
    let bin = build_workload("fork_children");
    let mut w = Proc::spawn(cmd(&bin, &[&N.to_string(), "1500"]));
    let parent = w.pid() as u64;
    // The binary is workload-fork_children: its comm (15 chars) is "workload-fork_c".
    let mut top = Top::start(&["-d", "0.5", "--comm", "^workload-fork"]);
    let steal_before = steal_ns();
    w.send_line("go");
    let out = w.expect("children", 60 * SEC);
    let steal = steal_ns() - steal_before;
    let (reaped, rusage_ns): (usize, u64) = (out[0].parse().unwrap(), out[1].parse().unwrap());
    w.wait(10 * SEC);
    assert_eq!(reaped, N, "the parent reaped every child");

    // Latest row of every child, keyed by pid: a child shows in several frames with a growing
    // cumulative total, so keep only its last (exited) row and count it once.
    let mut children: HashMap<u64, Value> = HashMap::new();
    let fin = top.wait_for(20 * SEC, |f| {
        for r in rows(f)
            .iter()
            .filter(|r| r["ppid"] == parent && r["pid"] != parent)
        {
            children.insert(r["pid"].as_u64().unwrap(), r.clone());
        }
        // Children exit before their parent, so their exited rows come no later than its own.
        row_of(f, parent as u32).is_some_and(is_exited)
    });
    let not_exited = children.values().filter(|r| !is_exited(r)).count();
    eprintln!(
        "short_lived_processes: pkprof lost counters {}",
        fin["lost"]
    );
    let pk: u64 = children.values().map(on_cpu_ns).sum();
    eprintln!(
        "short_lived_processes: {} children seen ({not_exited} without an exited row); \
         getrusage(RUSAGE_CHILDREN) {:.3} ms, pkprof sum {:.3} ms, error {:.3}%; steal on all \
         CPUs over the run {:.0} ms",
        children.len(),
        ms(rusage_ns),
        ms(pk),
        rel_err(pk, rusage_ns) * 100.0,
        ms(steal)
    );
    assert_eq!(children.len(), N, "pkprof showed every child");
    assert_eq!(not_exited, 0, "every child's final (exited) row was shown");
    // 1%: measured 0.1-0.4% (pkprof above). Per child, the kernel and pkprof place the few us
    // around its first wakeup (after fork) and its last switch differently; 1,000 x a few us of ~1.6 s.
    // pkprof may also read longer by at most the host's steal (see `steal_ns`).
    let (lo, hi) = (
        rusage_ns as f64 * 0.99,
        rusage_ns as f64 * 1.01 + steal as f64,
    );
    assert!(
        (lo..=hi).contains(&(pk as f64)),
        "children: pkprof {:.3} ms vs getrusage {:.3} ms: off by more than 1% (+{:.0} ms of steal)",
        ms(pk),
        ms(rusage_ns),
        ms(steal)
    );
}

/// Restores lo's RPS mask on drop (also when the test panics).
struct RpsGuard {
    path: &'static str,
    old: String,
}

impl RpsGuard {
    fn set(mask: &str) -> RpsGuard {
        let path = "/sys/class/net/lo/queues/rx-0/rps_cpus";
        let old = std::fs::read_to_string(path).expect("read lo rps_cpus");
        std::fs::write(path, mask).expect("write lo rps_cpus");
        RpsGuard {
            path,
            old: old.trim().to_owned(),
        }
    }
}

impl Drop for RpsGuard {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(self.path, &self.old) {
            eprintln!("could not restore {} to {}: {e}", self.path, self.old);
        }
    }
}

/// perf needs tracefs for tracepoint events.
fn ensure_tracefs() {
    if Path::new("/sys/kernel/tracing/events").exists() {
        return;
    }
    let ok = Command::new("mount")
        .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok && Path::new("/sys/kernel/tracing/events").exists(),
        "mounting tracefs"
    );
}

/// From `perf script` of irq:softirq_entry/exit on one CPU: the NET_RX (vec 3) softirq time that
/// ran while `tid` was the current task, and the number of such softirqs.
fn perf_net_rx_ns(data: &Path, tid: u64) -> (u64, u64) {
    let out = Command::new("perf")
        .args(["script", "--ns", "-F", "tid,time,event,trace", "-i"])
        .arg(data)
        .stderr(Stdio::null())
        .output()
        .expect("perf script runs");
    assert!(out.status.success(), "perf script failed");
    let (mut total, mut count, mut open): (u64, u64, Option<(i64, u64)>) = (0, 0, None);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // "  17796  1040.588902215: irq:softirq_entry: vec=3 [action=NET_RX]"
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() < 4 || w[3] != "vec=3" {
            continue;
        }
        let cur: i64 = w[0].parse().unwrap(); // -1 when perf could not tell
        let (s, ns) = w[1].trim_end_matches(':').split_once('.').unwrap();
        let t = s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap();
        match w[2] {
            "irq:softirq_entry:" => open = Some((cur, t)),
            "irq:softirq_exit:" => {
                if let Some((who, start)) = open.take() {
                    if who == tid as i64 {
                        total += t - start;
                        count += 1;
                    }
                }
            }
            _ => {}
        }
    }
    (total, count)
}

/// Events perf could not record (LOST / LOST_SAMPLES records), from `perf report --stats`.
fn perf_lost(data: &Path) -> u64 {
    let out = Command::new("perf")
        .args(["report", "--stats", "-i"])
        .arg(data)
        .stderr(Stdio::null())
        .output()
        .expect("perf report runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with("LOST"))
        .filter_map(|l| {
            l.split(':')
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// NET_RX work of a UDP flood steered (RPS) onto CPU 1, where a CPU hog runs: the softirq time
/// pkprof bills to the hog must match perf's record of the NET_RX softirqs that ran on top of it.
#[test]
#[ignore = "needs root and BPF"]
fn irq_billed_matches_netrx_softirq() {
    ensure_tracefs();
    let hog = build_workload("irq_hog");
    let flood_bin = build_workload("udp_flood");
    let data = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("accuracy-softirq.perf.data");
    let _rps = RpsGuard::set("2"); // lo's receive processing on CPU 1

    // Sender and receiver on CPU 0, ~20k 64-byte datagrams/s in bursts of 8: enough NET_RX work on
    // CPU 1 to bill the hog well over 50 ms, little enough for perf to keep every event.
    let mut flood = Proc::spawn(cmd(&flood_bin, &["0", "20000", "8"]));
    flood.expect("flood", 10 * SEC);
    // The hog's comm is "workload-irq_ho"; rows are matched by pid, the comm only trims frames.
    let mut top = Top::start(&["-d", "0.5", "--comm", "^workload-irq"]);
    // perf enables its events before it lets the hog exec and stops after the hog exits, so the
    // hog's whole life lies inside the recording.
    let mut perf_cmd = Command::new("perf");
    perf_cmd
        .args([
            "record",
            "-q",
            "-C",
            "1",
            "-e",
            "irq:softirq_entry",
            "-e",
            "irq:softirq_exit",
        ])
        .args(["-k", "CLOCK_MONOTONIC", "-m", "2048", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&hog)
        .args(["1", "5"]);
    let mut perf = Proc::spawn(perf_cmd);
    let hog_pid: u64 = perf.expect("hog", 20 * SEC)[0].parse().unwrap();
    perf.wait(30 * SEC);
    flood.close_stdin();
    let sent = flood.expect("sent", 10 * SEC);
    flood.wait(5 * SEC);
    let last = top.wait_for(10 * SEC, |f| {
        row_of(f, hog_pid as u32).is_some_and(is_exited)
    });
    drop(_rps);

    let row = row_of(&last, hog_pid as u32).unwrap();
    let t = &row["total"];
    let pk_net_rx = t["softirq_ns"][3].as_u64().unwrap();
    let pk_irq_billed = u64_of(t, "hardirq_ns")
        + t["softirq_ns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .sum::<u64>();
    let lost = perf_lost(&data);
    let (perf_ns, perf_count) = perf_net_rx_ns(&data, hog_pid);
    eprintln!(
        "irq_billed: flood sent {} received {}; hog {hog_pid} on-CPU {:.1} ms, irq billed {:.3} ms",
        sent[0],
        sent[2],
        ms(on_cpu_ns(row)),
        ms(pk_irq_billed)
    );
    eprintln!(
        "irq_billed: NET_RX on the hog: perf {:.3} ms in {perf_count} softirqs ({lost} events lost), \
         pkprof {:.3} ms, error {:.2}% ({:+.3} us per softirq); pkprof lost counters {}",
        ms(perf_ns),
        ms(pk_net_rx),
        rel_err(pk_net_rx, perf_ns) * 100.0,
        (pk_net_rx as f64 - perf_ns as f64) / 1e3 / perf_count.max(1) as f64,
        last["lost"]
    );
    assert_eq!(lost, 0, "perf lost events: its figure is incomplete");
    assert!(
        pk_irq_billed > 50_000_000,
        "the hog was billed only {:.3} ms of interrupt work",
        ms(pk_irq_billed)
    );
    assert!(
        perf_ns > 50_000_000,
        "perf saw only {:.3} ms of NET_RX on the hog",
        ms(perf_ns)
    );
    assert!(
        rel_err(pk_net_rx, perf_ns) <= 0.05,
        "NET_RX billed to the hog: pkprof {:.3} ms vs perf {:.3} ms: off by more than 5%",
        ms(pk_net_rx),
        ms(perf_ns)
    );
}
