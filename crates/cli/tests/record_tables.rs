//! `pkprof record -- CMD` against the capacity of its kernel tables (root and BPF needed: run with
//! `cargo test -p pkprof --test record_tables -- --include-ignored --nocapture --test-threads=1`).
//!
//! The target set holds the target processes alive at once: a command that starts more children
//! over its life than the table holds must still have its last child labelled as a target. A
//! table too small for the children alive together, and a thread table too small for the threads,
//! must be counted and shown, and the time of threads without a table entry must not land in
//! KERNEL. The exact share of the targets is checked against the kernel's own figure: the shell's
//! `times` (its own and its waited-for children's user + system time, from getrusage). `pkprof top`
//! shares the accounting, and is checked for the full thread table too.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use pkprof_profile::{Bucket, Profile};
use serde_json::Value;

/// Runs `pkprof record ARGS -- sh -c SCRIPT` to the end; returns the summary and the profile.
fn record_sh(name: &str, args: &[&str], script: &str) -> (String, Profile) {
    let output = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tables-{name}.pkprof"));
    let _ = std::fs::remove_file(&output);
    let out = Command::new(pkprof_bin())
        .arg("record")
        .arg("-o")
        .arg(&output)
        .args(args)
        .args(["--", "sh", "-c", script])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("pkprof starts");
    let summary = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{summary}");
    assert!(out.status.success(), "pkprof record failed: {}", out.status);
    let profile = pkprof_profile::load(&output).expect("the profile reads back");
    (summary, profile)
}

/// A file for the shell's `times` output.
fn times_file(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tables-{name}.times"));
    let _ = std::fs::remove_file(&path);
    path
}

/// The shell's `times`: "0m1.230000s 0m0.040000s" for itself, then the same for its children;
/// returns the sum of the four in ns.
fn times_total_ns(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).expect("the script wrote its times");
    let secs: f64 = text
        .split_whitespace()
        .map(|t| {
            let (m, s) = t
                .trim_end_matches('s')
                .split_once('m')
                .unwrap_or_else(|| panic!("times field {t:?}"));
            m.parse::<f64>().unwrap() * 60.0 + s.parse::<f64>().unwrap()
        })
        .sum();
    assert_eq!(text.split_whitespace().count(), 4, "{text}");
    (secs * 1e9) as u64
}

/// Samples of processes whose command starts with `comm`, by bucket.
fn samples_of(p: &Profile, comm: &str, bucket: Bucket) -> u64 {
    (p.samples.iter())
        .filter(|s| s.comm.starts_with(comm) && s.bucket == bucket)
        .map(|s| s.count)
        .sum()
}

/// The workload binary's command name as the kernel keeps it (15 characters).
fn hog_comm(bin: &Path) -> String {
    let name = bin.file_name().unwrap().to_string_lossy();
    name.chars().take(15).collect()
}

/// The final child of a command that has started `children` short processes is still a target,
/// and nothing was lost from the target set.
fn last_child_is_a_target(name: &str, args: &[&str], children: u32) {
    let hog = build_workload("hot_split");
    let script = format!(
        "i=0; while [ $i -lt {children} ]; do /bin/true; i=$((i+1)); done; {} 1.5 >/dev/null",
        hog.display()
    );
    let (summary, p) = record_sh(name, args, &script);
    let comm = hog_comm(&hog);
    let (target, other) = (
        samples_of(&p, &comm, Bucket::Process),
        samples_of(&p, &comm, Bucket::Other),
    );
    eprintln!("{comm}: {target} samples as a target, {other} as OTHER");
    assert!(
        target >= 20 && other == 0,
        "the last child is not labelled as a target"
    );
    assert_eq!(p.meta.lost.target_table_full, 0);
    assert!(summary.contains("target table full 0"), "{summary}");
}

#[test]
#[ignore = "needs root and BPF"]
fn children_beyond_a_small_target_table_are_followed() {
    last_child_is_a_target("small", &["--max-targets", "64"], 200);
}

#[test]
#[ignore = "needs root and BPF"]
fn children_beyond_the_default_target_table_are_followed() {
    let default = pkprof_collect::record::DEFAULT_MAX_TARGETS;
    last_child_is_a_target("default", &[], default + 108);
}

#[test]
#[ignore = "needs root and BPF"]
fn a_full_target_table_is_counted_and_shown() {
    // The shell and its 8 children are alive together; 4 fit.
    let (max, children) = (4u64, 8u64);
    let list: Vec<String> = (1..=children).map(|i| i.to_string()).collect();
    let script = format!("for i in {}; do sleep 2 & done; wait", list.join(" "));
    let (summary, p) = record_sh(
        "full-targets",
        &["--max-targets", &max.to_string()],
        &script,
    );
    let lost = p.meta.lost.target_table_full;
    // At least the children beyond the table; one more if pkprof, a target for the moment it
    // starts the command, still held a slot when the shell forked.
    assert!(
        (children + 1 - max..=children).contains(&lost),
        "target_table_full {lost}"
    );
    assert!(
        summary.contains(&format!("target table full {lost} (raise --max-targets)")),
        "{summary}"
    );
}

/// The targets' exact share is the kernel's own figure for them, within 5%.
fn assert_processes_match(p: &Profile, truth_ns: u64) {
    let got = p.meta.cpu_time.processes_ns;
    eprintln!(
        "processes {:.3} s, kernel {:.3} s, untracked {:.3} s; getrusage {:.3} s",
        got as f64 / 1e9,
        p.meta.cpu_time.kernel_ns as f64 / 1e9,
        p.meta.cpu_time.untracked_ns as f64 / 1e9,
        truth_ns as f64 / 1e9
    );
    let diff = got.abs_diff(truth_ns) as f64;
    assert!(
        diff <= 0.05 * truth_ns as f64,
        "processes {got} ns vs the kernel's {truth_ns} ns"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn time_of_threads_beyond_a_full_thread_table_is_not_kernel() {
    let hog = build_workload("hot_split");
    let times = times_file("full-threads");
    let script = format!(
        "for i in 1 2 3 4 5 6 7 8; do {} 1.5 >/dev/null & done; wait; times > {}",
        hog.display(),
        times.display()
    );
    let (summary, p) = record_sh("full-threads", &["--max-threads", "2"], &script);
    let truth = times_total_ns(&times);
    assert!(p.meta.lost.thread_table_full > 0);
    assert!(
        summary.contains(&format!(
            "thread table full {} (raise --max-threads)",
            p.meta.lost.thread_table_full
        )),
        "{summary}"
    );
    assert!(p.meta.cpu_time.untracked_ns > 0 && summary.contains("untracked:"));
    // Their time is the targets' (the kernel side knew them as targets), not KERNEL's.
    assert_processes_match(&p, truth);
    assert!(p.meta.cpu_time.kernel_ns < truth / 2, "{summary}");
}

#[test]
#[ignore = "needs root and BPF"]
fn many_short_processes_keep_the_exact_share() {
    let hog = build_workload("hot_split");
    let times = times_file("short");
    let script = format!(
        "i=0; while [ $i -lt 6000 ]; do /bin/true; i=$((i+1)); done; {} 1 >/dev/null; times > {}",
        hog.display(),
        times.display()
    );
    let (_, p) = record_sh("short", &["--max-threads", "1024"], &script);
    assert_processes_match(&p, times_total_ns(&times));
}

/// User + system time of the reaped children of this test process (getrusage), in ns.
fn children_cpu_ns() -> u64 {
    // SAFETY: rusage is plain data that getrusage fills.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid, writable rusage.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) }, 0);
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    ns(u.ru_utime) + ns(u.ru_stime)
}

/// `pkprof top` shares the accounting: with a thread table of 2, a hog's time is untracked OTHER,
/// not KERNEL, and the buckets still add up to wall time. The view shows only the test process, so
/// the hog is OTHER whether it ran without an entry or got one freed by a reaped thread (both
/// happen: the table is reaped every refresh).
#[test]
#[ignore = "needs root and BPF"]
fn top_puts_time_beyond_a_full_thread_table_in_other() {
    let hog = build_workload("hot_split");
    let me = std::process::id().to_string();
    let mut top = Top::start(&["--max-threads", "2", "-d", "0.5", "-p", &me]);
    let before = top.next_frame(Duration::from_secs(5)).expect("a frame");
    let cpu_before = children_cpu_ns();
    let mut p = Proc::spawn(cmd(&hog, &["1.5"]));
    p.expect("calls", Duration::from_secs(20));
    p.wait(Duration::from_secs(5));
    let hog_ns = children_cpu_ns() - cpu_before;
    // Frames queue up in the pipe while the hog runs: read on to one made after the hog ended,
    // then one more (the hog's last slice is in it at the latest).
    let ended = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let mut after = top.next_frame(Duration::from_secs(5)).expect("a frame");
    while after["unix_s"].as_f64().unwrap() < ended {
        after = top.next_frame(Duration::from_secs(5)).expect("a frame");
    }
    let after = top.next_frame(Duration::from_secs(5)).expect("a frame");
    top.stop();
    let b = |f: &Value, k: &str| u64_of(&f["buckets"], k);
    let d = |k: &str| b(&after, k) - b(&before, k);
    eprintln!(
        "hog {:.3} s; since the first frame: untracked {:.3} s, other {:.3} s, kernel {:.3} s; lost {}",
        hog_ns as f64 / 1e9,
        d("untracked_ns") as f64 / 1e9,
        d("other_ns") as f64 / 1e9,
        d("kernel_ns") as f64 / 1e9,
        after["lost"]
    );
    assert!(u64_of(&after["lost"], "thread_map_full") > 0);
    assert!(d("untracked_ns") > 0);
    assert!(d("other_ns") as f64 >= 0.95 * hog_ns as f64);
    assert!(d("kernel_ns") < hog_ns / 2);
    let parts: u64 = [
        "idle_ns",
        "processes_ns",
        "other_ns",
        "kernel_ns",
        "in_flight_ns",
    ]
    .iter()
    .map(|k| b(&after, k))
    .sum();
    assert!(
        rel_err(parts, b(&after, "wall_ns")) < 0.001,
        "{}",
        after["buckets"]
    );
}
