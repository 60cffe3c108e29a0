//! `record --off-cpu` against BCC's `offcputime` (libbpf-tools, Debian `libbpf-tools`; root and
//! BPF needed): `cargo test -p pkprof --test offcpu -- --include-ignored --nocapture`
//!
//! Both tools watch the same run of tests/workloads/offcpu_mix.c (three threads blocking in
//! nanosleep, a pipe read and a futex, from four distinct user functions), attached before its
//! start gate; the blocked time each reports per stack (the user function a stack blocked from)
//! must agree within 5%. The wake chain (the pipe reader woken by the writer, which a timer woke)
//! is checked against what the workload does. The rate cap on off-CPU samples is checked against
//! a workload's own clock around its many short blocks (tests/workloads/offcpu_short.c).

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;

const OFFCPUTIME: &str = "/usr/sbin/offcputime";
/// The workload's blocking functions (noinline, one blocking call each).
const FUNCS: [&str; 4] = ["nap", "pace", "wait_pipe", "wait_cond"];

/// The blocking function a stack's frames (any order) name, if exactly one.
fn class<'a>(frames: impl Iterator<Item = &'a str>) -> Option<&'static str> {
    let mut found = None;
    for f in frames {
        let name = f.trim();
        let name = name.split(['+', ' ']).next().unwrap_or(name);
        if let Some(c) = FUNCS.iter().find(|c| **c == name) {
            if found.is_some_and(|x| x != *c) {
                return None;
            }
            found = Some(*c);
        }
    }
    found
}

/// offcputime's default output: one stack per paragraph (kernel frames, a `- COMM (TID)` line),
/// its total in µs on the last line. It names no user frames here, so a stack's blocking
/// function comes from its kernel frames and its thread's part in the workload (the threads are
/// told apart by what they block in): the reader blocks in a pipe read, the writer (not the main
/// thread, `pid`, which joins) on a futex and in a sleep, the sleeper in sleeps only.
fn parse_offcputime(text: &str, pid: u32) -> BTreeMap<&'static str, u64> {
    #[derive(Clone, Copy, PartialEq)]
    enum K {
        Sleep,
        Pipe,
        Futex,
    }
    let mut by_tid: Vec<(u32, K, u64)> = Vec::new();
    for para in text.split("\n\n") {
        let lines: Vec<&str> = para.lines().filter(|l| !l.trim().is_empty()).collect();
        let Some((last, frames)) = lines.split_last() else {
            continue;
        };
        let Ok(us) = last.trim().parse::<u64>() else {
            continue;
        };
        let has = |f: &str| frames.iter().any(|l| l.trim() == f);
        let kind = if has("do_nanosleep") {
            K::Sleep
        } else if has("anon_pipe_read") || has("pipe_read") {
            K::Pipe
        } else if has("futex_wait") {
            K::Futex
        } else {
            continue;
        };
        let tid = frames
            .last()
            .and_then(|l| l.trim_end().strip_suffix(')'))
            .and_then(|l| l.rsplit_once('('))
            .and_then(|(_, t)| t.parse::<u32>().ok());
        if let Some(tid) = tid {
            by_tid.push((tid, kind, us));
        }
    }
    let tids_with = |k: K| -> Vec<u32> {
        let mut t: Vec<u32> = by_tid
            .iter()
            .filter(|(tid, kind, _)| *kind == k && *tid != pid)
            .map(|(tid, ..)| *tid)
            .collect();
        t.dedup();
        t
    };
    let writers = tids_with(K::Futex);
    let readers = tids_with(K::Pipe);
    let mut out = BTreeMap::new();
    for (tid, kind, us) in by_tid {
        let class = match kind {
            _ if tid == pid => continue,
            K::Pipe if readers.contains(&tid) => "wait_pipe",
            K::Futex if writers.contains(&tid) => "wait_cond",
            K::Sleep if writers.contains(&tid) => "pace",
            K::Sleep => "nap",
            _ => continue,
        };
        *out.entry(class).or_default() += us;
    }
    out
}

/// `report --kind off --format folded`: `FRAME;FRAME;... MICROSECONDS`, the blocked stack up to
/// `[blocked: REASON]`, then the waker's.
fn parse_folded(text: &str) -> (BTreeMap<&'static str, u64>, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut lines = Vec::new();
    for line in text.lines() {
        let Some((stack, us)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(us) = us.parse::<u64>() else { continue };
        let blocked = stack.split("[blocked:").next().unwrap_or(stack);
        let frames = blocked
            .split(';')
            .map(|f| f.rsplit(':').next().unwrap_or(f));
        if let Some(c) = class(frames) {
            *out.entry(c).or_default() += us;
            lines.push(line.to_string());
        }
    }
    (out, lines)
}

#[test]
#[ignore = "needs root and BPF"]
fn blocked_time_per_stack_agrees_with_offcputime() {
    assert!(
        std::path::Path::new(OFFCPUTIME).exists(),
        "{OFFCPUTIME} missing: run scripts/setup.sh (Debian libbpf-tools)"
    );
    let bin = build_workload("offcpu_mix");
    let mut w = Proc::spawn(cmd(&bin, &["25"]));
    w.expect("ready", Duration::from_secs(5));
    let pid = w.pid().to_string();
    let profile = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("offcpu_mix.pkprof");

    // offcputime prints its map when its duration ends or at SIGINT.
    let bcc = Command::new(OFFCPUTIME)
        .args(["-p", &pid, "30"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start offcputime");
    let bcc_pid = bcc.id() as i32;
    let (bcc_tx, bcc_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = bcc_tx.send(bcc.wait_with_output());
    });
    let mut rec = Command::new(pkprof_bin())
        .args(["record", "--off-cpu", "-p", &pid, "-o"])
        .arg(&profile)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pkprof record");
    let lines = echo_stderr(&mut rec, "record: ");
    wait_for_line(
        &lines,
        "recording at",
        "pkprof record attached",
        Duration::from_secs(30),
    );
    // offcputime loads in well under a second; it was started first.
    std::thread::sleep(Duration::from_secs(1));
    w.send_line("go");
    w.expect("done", Duration::from_secs(20));
    w.wait(Duration::from_secs(5));
    let status = rec.wait().expect("pkprof record exits with its target");
    assert!(status.success(), "pkprof record: {status}");
    // SAFETY: kill(2) on our child, unreaped (its waiter has not returned).
    unsafe { libc::kill(bcc_pid, libc::SIGINT) };
    let bcc = bcc_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("offcputime ends at SIGINT")
        .expect("offcputime output");
    let bcc_text = String::from_utf8_lossy(&bcc.stdout);
    std::fs::write(
        profile.with_extension("offcputime.txt"),
        bcc_text.as_bytes(),
    )
    .ok();
    let theirs = parse_offcputime(&bcc_text, w.pid());

    let (ours, lines) = parse_folded(&off_folded(&profile));
    eprintln!("offcputime (µs): {theirs:?}");
    eprintln!("pkprof     (µs): {ours:?}");
    for c in FUNCS {
        let (a, b) = (
            ours.get(c).copied().unwrap_or(0),
            theirs.get(c).copied().unwrap_or(0),
        );
        assert!(
            b > 100_000,
            "offcputime saw {b} µs blocked in {c}:\n{bcc_text}"
        );
        let err = rel_err(a, b);
        eprintln!(
            "{c}: pkprof {a} µs, offcputime {b} µs, {:+.2}%",
            err * 100.0
        );
        assert!(err.abs() <= 0.05, "{c}: pkprof {a} µs vs offcputime {b} µs");
    }

    // The pipe reader was woken by the writer (its comm is the process's), which a timer woke
    // from pace(): every wait_pipe stack names the writer as its waker, after it had been
    // blocked on a sleep.
    let pipe: Vec<&String> = lines.iter().filter(|l| l.contains("wait_pipe")).collect();
    assert!(!pipe.is_empty());
    for l in &pipe {
        assert!(
            l.contains("[--]") && l.contains("[woken by: workload-offcpu"),
            "{l}"
        );
        assert!(
            l.contains("itself blocked") && l.contains("on sleep"),
            "{l}"
        );
        assert!(
            l.contains("anon_pipe_write") || l.contains("pipe_write"),
            "{l}"
        );
    }
}

/// One `record --off-cpu --off-cpu-period 0` of offcpu_mix (ROUNDS rounds), with `env` on the
/// workload and `rec_env` on pkprof: (its start-up line, its summary, `report --kind off` folded).
fn record_offcpu_mix(
    name: &str,
    rounds: &str,
    env: &[(&str, &str)],
    rec_env: &[(&str, &str)],
    rec_args: &[&str],
) -> OffCpuRun {
    let bin = build_workload("offcpu_mix");
    let mut c = cmd(&bin, &[rounds]);
    c.envs(env.iter().copied());
    let mut w = Proc::spawn(c);
    let ready = w.expect("ready", Duration::from_secs(5));
    let rseq = ready.first().is_some_and(|n| n != "0");
    let pid = w.pid().to_string();
    let profile = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.pkprof"));
    let mut rec = Command::new(pkprof_bin())
        .args([
            "record",
            "--off-cpu",
            "--off-cpu-period",
            "0",
            "-p",
            &pid,
            "-o",
        ])
        .arg(&profile)
        .args(rec_args)
        .envs(rec_env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pkprof record");
    let lines = echo_stderr(&mut rec, "record: ");
    let start = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("pkprof record attached");
        if line.contains("recording at") {
            break line;
        }
    };
    w.send_line("go");
    w.expect("done", Duration::from_secs(30));
    w.wait(Duration::from_secs(5));
    let out = rec
        .wait_with_output()
        .expect("pkprof record exits with its target");
    assert!(out.status.success(), "pkprof record: {}", out.status);
    let summary = String::from_utf8_lossy(&out.stdout).into_owned();
    (start, summary, off_folded(&profile), rseq)
}

/// `record_offcpu_mix`'s start-up line, summary, folded off-CPU stacks, and whether the
/// workload's threads registered an rseq area.
type OffCpuRun = (String, String, String, bool);

/// The off-CPU samples of `profile` as folded stacks (`report --kind off --format folded`).
fn off_folded(profile: &std::path::Path) -> String {
    let folded = run_with_timeout(
        Command::new(pkprof_bin())
            .args(["report", "--kind", "off", "--format", "folded"])
            .arg(profile),
        Duration::from_secs(60),
    );
    assert!(folded.status.success(), "report: {folded:?}");
    String::from_utf8_lossy(&folded.stdout).into_owned()
}

/// Each way the kernel side can take a blocked thread's user stack as its call returns
/// (record/offcpu.bpf.h, enum pkprof_offcpu_ustack) finds the user function every block came
/// from: the way this kernel offers (a task work, else rseq's return to user mode), and the
/// `sys_exit` program (with `rseq:rseq_update` hidden, as on a kernel without it). Where the way
/// is rseq's, threads without an rseq area (glibc's `glibc.pthread.rseq=0`) run no rseq_update:
/// their samples are counted (`no rseq`), keep their kernel stacks and their time, and carry no
/// user stack rather than a wrong one.
#[test]
#[ignore = "needs root and BPF"]
fn user_stacks_taken_each_way() {
    let no_rseq = |summary: &str| {
        let line = summary
            .lines()
            .find(|l| l.starts_with("off-cpu:"))
            .unwrap_or_else(|| panic!("no off-cpu line in the summary:\n{summary}"));
        number_after(line, "no rseq ").unwrap_or_else(|| panic!("no `no rseq` count: {line}"))
    };
    let funcs_found = |folded: &str| {
        let (per_func, _) = parse_folded(folded);
        FUNCS
            .iter()
            .filter(|f| per_func.get(**f).is_some_and(|us| *us > 0))
            .count()
    };
    let hidden = [("PKPROF_TEST_HIDE_TRACEPOINTS", "rseq:rseq_update")];
    let (start, summary, folded, _) = record_offcpu_mix("offcpu_sys_exit", "15", &[], &hidden, &[]);
    assert_eq!(funcs_found(&folded), FUNCS.len(), "{start}\n{folded}");
    assert_eq!(no_rseq(&summary), 0.0, "{summary}");

    let (native, summary, folded, rseq) = record_offcpu_mix("offcpu_native", "15", &[], &[], &[]);
    eprintln!("{native}");
    if !native.contains("in a task work") {
        assert!(start.contains("at syscall exit"), "{start}");
    }
    if native.contains("at rseq's return") && !rseq {
        // This kernel takes user stacks at rseq's return, and the workload's threads have no
        // rseq area (glibc < 2.35, musl, a tunable, or another library registered first).
        eprintln!("no rseq area registered here: the rseq way cannot be tested");
        return;
    }
    assert_eq!(funcs_found(&folded), FUNCS.len(), "{native}\n{folded}");
    assert_eq!(no_rseq(&summary), 0.0, "{summary}");

    if !native.contains("at rseq's return") {
        eprintln!(
            "user stacks are not taken at rseq's return here: no thread without rseq to test"
        );
        return;
    }
    let off = [("GLIBC_TUNABLES", "glibc.pthread.rseq=0")];
    let (start, summary, folded, rseq) = record_offcpu_mix("offcpu_no_rseq", "15", &off, &[], &[]);
    assert!(
        !rseq,
        "glibc.pthread.rseq=0 leaves the threads without an rseq area"
    );
    assert!(start.contains("at rseq's return"), "{start}");
    assert!(no_rseq(&summary) > 0.0, "{summary}");
    assert!(
        summary.contains("registered no rseq area"),
        "the summary warns of the missing user stacks:\n{summary}"
    );
    assert_eq!(
        funcs_found(&folded),
        0,
        "a user stack without rseq:\n{folded}"
    );
    let sleeps_us: u64 = folded
        .lines()
        .filter(|l| l.contains("do_nanosleep") || l.contains("hrtimer_nanosleep"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    // 15 rounds: the sleeper's 30 naps of 20 ms, the writer's 15 paces of 30 ms.
    assert!(
        sleeps_us >= 600_000,
        "the kernel stacks of the sleeps are kept: {sleeps_us} µs\n{folded}"
    );

    // The user's remedy for such threads: the syscall exit way, asked for by name.
    let sys_exit = ["--off-cpu-user-stacks", "sys-exit"];
    let (start, summary, folded, _) =
        record_offcpu_mix("offcpu_no_rseq_sys_exit", "15", &off, &[], &sys_exit);
    assert!(start.contains("at syscall exit"), "{start}");
    assert_eq!(no_rseq(&summary), 0.0, "{summary}");
    assert_eq!(funcs_found(&folded), FUNCS.len(), "{start}\n{folded}");
}

/// A way to take user stacks that the kernel lacks, asked for by name, is refused at start with
/// one line that names it (here rseq's, with its tracepoint hidden), never silently replaced.
#[test]
#[ignore = "needs root and BPF"]
fn a_user_stack_way_the_kernel_lacks_is_one_line() {
    let out = run_with_timeout(
        Command::new(pkprof_bin())
            .args([
                "record",
                "-a",
                "--off-cpu",
                "--off-cpu-user-stacks",
                "rseq",
                "--duration",
                "1",
                "-o",
            ])
            .arg(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("offcpu_no_way.pkprof"))
            .env("PKPROF_TEST_HIDE_TRACEPOINTS", "rseq:rseq_update"),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("cannot be taken at rseq's return to user mode"),
        "{err}"
    );
}

/// The number after `label` in `text` (`label` ends where the number starts).
fn number_after(text: &str, label: &str) -> Option<f64> {
    let rest = &text[text.find(label)? + label.len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The rate cap (`--off-cpu-max-rate`, default 200 samples a second per CPU) doubles a CPU's
/// sampling period when it chooses more; a block taken then weighs by the period it was taken at.
/// tests/workloads/offcpu_short.c: 8 threads in 0.5 ms sleeps for 5 s, about 60,000 blocks, of
/// which the default 10 ms period alone would choose about 1,300 a second, above the cap on a
/// machine of up to 3 CPUs. Truth: the workload's own clock around each sleep. The cap must
/// engage (the period doubled), keep the rate near it (at most twice the cap), and leave the
/// blocked time in short_nap() unbiased: within four standard errors of the estimate, each
/// sample standing for about one period (a Poisson count times the period: relative error
/// 1/sqrt(samples)), and that bound no wider than 15%.
#[test]
#[ignore = "needs root and BPF"]
fn rate_cap_keeps_blocked_time_unbiased() {
    const SECS: f64 = 5.0;
    let bin = build_workload("offcpu_short");
    let mut w = Proc::spawn(cmd(&bin, &["8", "5000"]));
    w.expect("ready", Duration::from_secs(5));
    let pid = w.pid().to_string();
    let profile = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("offcpu_short.pkprof");
    let mut rec = Command::new(pkprof_bin())
        .args(["record", "--off-cpu", "-p", &pid, "-o"])
        .arg(&profile)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pkprof record");
    let lines = echo_stderr(&mut rec, "record: ");
    wait_for_line(
        &lines,
        "recording at",
        "pkprof record attached",
        Duration::from_secs(30),
    );
    w.send_line("go");
    let truth_us: u64 = w.expect("blocked_us", Duration::from_secs(30))[0]
        .parse()
        .expect("blocked_us N");
    w.expect("done", Duration::from_secs(5));
    w.wait(Duration::from_secs(5));
    let out = rec
        .wait_with_output()
        .expect("pkprof record exits with its target");
    assert!(out.status.success(), "pkprof record: {}", out.status);
    let summary = String::from_utf8_lossy(&out.stdout);
    let line = summary
        .lines()
        .find(|l| l.starts_with("off-cpu:"))
        .unwrap_or_else(|| panic!("no off-cpu line in the summary:\n{summary}"));
    eprintln!("{line}");
    let samples = number_after(line, "off-cpu:   ").expect("samples") as u64;
    let doubled = number_after(line, "doubled ").expect("doublings") as u64;
    let cap = number_after(line, "times at ").expect("the cap");
    assert_eq!(
        cap,
        f64::from(pkprof_collect::record::DEFAULT_OFFCPU_MAX_RATE)
    );
    assert!(doubled > 0, "the cap never engaged: {line}");
    let most = 2.0 * cap * num_cpus() as f64 * SECS;
    assert!(
        (samples as f64) <= most,
        "{samples} samples in {SECS} s, above twice the cap ({most}): {line}"
    );

    let folded = run_with_timeout(
        Command::new(pkprof_bin())
            .args(["report", "--kind", "off", "--format", "folded"])
            .arg(&profile),
        Duration::from_secs(60),
    );
    assert!(folded.status.success(), "report: {folded:?}");
    let ours_us: u64 = String::from_utf8_lossy(&folded.stdout)
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(stack, _)| {
            let blocked = stack.split("[blocked:").next().unwrap_or(stack);
            blocked.split(';').any(|f| f.ends_with("short_nap"))
        })
        .filter_map(|(_, us)| us.parse::<u64>().ok())
        .sum();
    let bound = 4.0 / (samples as f64).sqrt();
    let err = rel_err(ours_us, truth_us);
    eprintln!(
        "short_nap: pkprof {ours_us} µs, the workload {truth_us} µs, {:+.2}% (bound {:.1}%, {samples} samples)",
        (ours_us as f64 / truth_us as f64 - 1.0) * 100.0,
        bound * 100.0
    );
    assert!(
        bound <= 0.15,
        "too few samples ({samples}) to test the weights"
    );
    assert!(
        err.abs() <= bound,
        "short_nap: pkprof {ours_us} µs vs the workload's {truth_us} µs"
    );
}
