//! `pkprof report` and `pkprof diff` on real recordings, against the workloads' own counts and the
//! kernel's figures (root and BPF needed: run with
//! `cargo test -p pkprof --test report_truth -- --include-ignored --nocapture --test-threads=1`).
//!
//! - exact counts are shown whether or not they were sampled: a function called a known number of
//!   times but too short to be sampled (`--count`), and every syscall `strace -f -c` counts on a
//!   deterministic program (`--syscalls`);
//! - `% all` of a CPU-bound process on a half-idle machine is its share of the exact CPU time, as
//!   the kernel's /proc/PID/schedstat gives it, however few samples the idle CPU took;
//! - `diff` of two runs of one program matches its rows (different PIDs), `--by process` keeps
//!   the PIDs apart.

mod common;

use std::collections::BTreeMap;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::*;

fn scratch(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-truth-{name}"))
}

/// `pkprof ARGS`, asserted to succeed; its standard output.
fn pkprof(args: &[&str]) -> String {
    let out: Output = Command::new(pkprof_bin())
        .args(args)
        .output()
        .expect("pkprof runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "pkprof {args:?} failed: {}\n{stderr}",
        out.status
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// `pkprof record -o FILE ARGS` to its end; the summary (with the command's own output before it).
fn record(file: &Path, args: &[&str]) -> String {
    let _ = std::fs::remove_file(file);
    let mut all = vec!["record", "-o", file.to_str().unwrap()];
    all.extend_from_slice(args);
    let summary = pkprof(&all);
    eprintln!("{summary}");
    summary
}

/// The flat profile's exact calls by routine name (rows with a `calls` column).
fn flat_calls(flat: &str) -> BTreeMap<String, u64> {
    flat.lines()
        .skip_while(|l| !l.trim_start().starts_with("time "))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| {
            // %time cumulative self calls self/call total/call [% non-idle] name
            let cols: Vec<&str> = l.split_whitespace().collect();
            let calls = cols.get(3)?.parse().ok()?;
            (cols.len() >= 7).then(|| (cols[cols.len() - 1].to_string(), calls))
        })
        .collect()
}

/// The number after `tag` on the command's own output line.
fn said(summary: &str, tag: &str) -> u64 {
    summary
        .lines()
        .find_map(|l| l.strip_prefix(tag))
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or_else(|| panic!("no `{tag}` line in\n{summary}"))
        .parse()
        .unwrap()
}

#[test]
#[ignore = "needs root and BPF"]
fn unsampled_counted_function_is_reported_with_its_calls() {
    let bin = build_workload("counted_calls");
    let file = scratch("counted.pkprof");
    let probe = format!("tiny_call@{}", bin.display());
    let summary = record(
        &file,
        &["--count", &probe, "--", bin.to_str().unwrap(), "1", "600"],
    );
    let calls = said(&summary, "calls ");
    assert_eq!(calls, 600, "the workload called tiny_call 600 times");
    let profile = pkprof_profile::load(&file).unwrap();
    let pid = profile.meta.targets.pids[0];
    let sampled: u64 = profile
        .samples
        .iter()
        .filter(|s| {
            profile.stacks[s.stack as usize]
                .frames
                .last()
                .is_some_and(|f| profile.frames[*f as usize].name == "tiny_call")
        })
        .map(|s| s.count)
        .sum();
    eprintln!("tiny_call: {calls} calls, {sampled} samples");
    let flat = pkprof(&["report", file.to_str().unwrap(), "--flat"]);
    let name = format!("{pid}u:tiny_call");
    assert_eq!(
        flat_calls(&flat).get(&name),
        Some(&calls),
        "{name} with {calls} calls in\n{flat}"
    );
    let graph = pkprof(&["report", file.to_str().unwrap(), "--graph"]);
    let entry = graph
        .lines()
        .find(|l| l.starts_with('[') && l.contains(&format!(" {name} [")))
        .unwrap_or_else(|| panic!("no call-graph entry for {name} in\n{graph}"));
    assert_eq!(entry.split_whitespace().nth(4), Some("600"), "{entry}");
    let html = scratch("counted.html");
    pkprof(&[
        "report",
        file.to_str().unwrap(),
        "--format",
        "html",
        "-o",
        html.to_str().unwrap(),
    ]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.lines()
            .any(|l| l.starts_with(&format!("<tr><td>{name}</td>")) && l.contains("<td>600</td>")),
        "{name} with 600 calls in the HTML page's exact counts"
    );
}

/// (calls) per syscall from `strace -f -c` on the same command.
fn strace_counts(name: &str, argv: &[&str]) -> BTreeMap<String, u64> {
    let file = scratch(&format!("{name}.strace"));
    let status = Command::new("strace")
        .args(["-f", "-c", "-U", "name,calls", "-o"])
        .arg(&file)
        .args(argv)
        .stdout(Stdio::null())
        .status()
        .expect("strace runs (scripts/setup.sh installs it)");
    assert!(status.success(), "strace {argv:?} failed");
    std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .skip(2)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let calls = f.get(1)?.parse().ok()?;
            (f[0] != "total").then(|| (format!("sys_{}", f[0]), calls))
        })
        .collect()
}

#[test]
#[ignore = "needs root and BPF"]
fn every_counted_syscall_is_reported_as_strace_counts_it() {
    let bin = build_workload("syscall_patterns");
    let dir = scratch("patterns");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let argv = [bin.to_str().unwrap(), dir.to_str().unwrap()];
    let strace = strace_counts("patterns", &argv);
    let file = scratch("patterns.pkprof");
    // The command runs for a few ms of CPU: at 999 Hz it is sampled (the report needs a sample
    // of it; at 99 Hz a busy machine often took none).
    let mut args = vec!["-F", "999", "--syscalls", "--"];
    args.extend_from_slice(&argv);
    record(&file, &args);
    let profile = pkprof_profile::load(&file).unwrap();
    // Plain names sum the command's processes (it forks a child), as strace -f does.
    let flat = pkprof(&[
        "report",
        file.to_str().unwrap(),
        "--flat",
        "--plain-names",
        "--bucket",
        "process",
    ]);
    let reported: BTreeMap<String, u64> = flat_calls(&flat)
        .into_iter()
        .filter(|(n, _)| n.starts_with("sys_"))
        .collect();
    // Every stored row of the command's processes, summed by name: all must be reported.
    let mut stored: BTreeMap<String, u64> = BTreeMap::new();
    for r in &profile.syscalls {
        let target = profile.processes.iter().any(|p| p.pid == r.pid && p.target);
        if target {
            *stored.entry(format!("sys_{}", r.name)).or_default() += r.count;
        }
    }
    let sampled = profile
        .frames
        .iter()
        .filter(|f| f.name.starts_with("sys_"))
        .count();
    eprintln!(
        "{} syscall rows stored ({} names for the command), {sampled} syscall frames sampled, {} names reported, strace {}",
        profile.syscalls.len(),
        stored.len(),
        reported.len(),
        strace.len()
    );
    assert_eq!(reported, stored, "report --flat against the stored rows");
    // Against strace -f -c, exactly: counted from the command's execve, clone counted once (in
    // the caller, not again when the child returns from it).
    assert_eq!(
        reported, strace,
        "the syscalls of strace -f -c, as many times"
    );
}

/// CPU time of `pid` so far, from the kernel's /proc/PID/schedstat (ns on CPU).
fn schedstat_ns(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).expect("schedstat");
    text.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
#[ignore = "needs root and BPF"]
fn percent_all_of_a_cpu_hog_is_its_share_of_the_exact_cpu_time() {
    // One single-threaded CPU-bound process on a machine of N CPUs; the test itself sleeps.
    let bin = build_workload("hot_split");
    let mut hog = Command::new(&bin)
        .arg("30")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = hog.id();
    std::thread::sleep(Duration::from_millis(300));
    // The hog's CPU time read from the kernel every 10 ms with the wall clock, to take its share
    // over exactly the recording's span (meta start..end), however busy the machine is.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut readings: Vec<(u64, u64)> = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                readings.push((clock_ns(libc::CLOCK_REALTIME), schedstat_ns(pid)));
                std::thread::sleep(Duration::from_millis(10));
            }
            readings
        })
    };
    let file = scratch("hog.pkprof");
    record(&file, &["-a", "--duration", "4"]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let readings = poller.join().unwrap();
    let _ = hog.kill();
    let _ = hog.wait();
    let profile = pkprof_profile::load(&file).unwrap();
    // Linear interpolation of the hog's CPU time at wall time `t`.
    let cpu_at = |t: u64| -> f64 {
        let i = readings
            .windows(2)
            .position(|w| w[0].0 <= t && t <= w[1].0)
            .unwrap_or_else(|| panic!("no schedstat reading around {t}"));
        let ((t0, c0), (t1, c1)) = (readings[i], readings[i + 1]);
        c0 as f64 + (c1 - c0) as f64 * (t - t0) as f64 / (t1 - t0).max(1) as f64
    };
    let (start, end) = (profile.meta.start_unix_ns, profile.meta.end_unix_ns);
    let cpus = f64::from(profile.meta.cpus);
    assert_eq!(profile.meta.cpus as usize, num_cpus());
    let kernel = (cpu_at(end) - cpu_at(start)) * 100.0 / ((end - start) as f64 * cpus);

    let dcpi = pkprof(&[
        "report",
        file.to_str().unwrap(),
        "--dcpi",
        "--by",
        "process",
    ]);
    let key = dcpi
        .lines()
        .skip_while(|l| !l.starts_with("by process:"))
        .find(|l| l.split_whitespace().nth(4) == Some(&pid.to_string()))
        .unwrap_or_else(|| panic!("no row for pid {pid} in\n{dcpi}"));
    let reported: f64 = key
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches('%')
        .parse()
        .unwrap();
    let samples = profile.total_samples();
    let hog_samples: u64 = profile
        .samples
        .iter()
        .filter(|s| s.pid == pid)
        .map(|s| s.count)
        .sum();
    let of_samples = hog_samples as f64 * 100.0 / samples as f64;
    eprintln!(
        "hog {pid}: kernel {kernel:.1}% of all CPU (schedstat / wall x {cpus} CPUs); report % all {reported:.1}%; share of samples {of_samples:.1}%\n{}",
        dcpi.lines().take(6).collect::<Vec<_>>().join("\n")
    );
    assert!(
        (reported - kernel).abs() < 5.0,
        "% all {reported:.1}% against the kernel's {kernel:.1}%"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn diff_of_two_runs_matches_rows_by_name() {
    let bin = build_workload("hot_split");
    let (a, b) = (scratch("run-a.pkprof"), scratch("run-b.pkprof"));
    record(&a, &["--", bin.to_str().unwrap(), "1"]);
    record(&b, &["--", bin.to_str().unwrap(), "1"]);
    let pid = |f: &Path| pkprof_profile::load(f).unwrap().meta.targets.pids[0];
    let (pa, pb) = (pid(&a), pid(&b));
    assert_ne!(pa, pb);
    let row = |text: &str, name: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.ends_with(&format!("  {name}")))
            .unwrap_or_else(|| panic!("no row {name} in\n{text}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let diff = pkprof(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    eprintln!("{diff}");
    // One row with samples on both sides: A and B samples, shares, rates; change, relative.
    for f in ["hot_seventy", "hot_thirty"] {
        let cols = row(&diff, f);
        assert_eq!(cols.len(), 11, "{f} matched in A and B: {cols:?}");
        assert_ne!(cols[9], "new", "{cols:?}");
    }
    assert!(!diff.contains(&format!("{pa}u:")) && !diff.contains(&format!("{pb}u:")));
    // --by process: the PIDs are kept, each run's rows on their own.
    let by = pkprof(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--by",
        "process",
    ]);
    let cols = row(&by, &format!("{pb}u:hot_seventy"));
    assert!(cols.contains(&"new".to_string()), "{cols:?}");
    let cols = row(&by, &format!("{pa}u:hot_seventy"));
    assert!(cols.contains(&"-100.0%".to_string()), "{cols:?}");
}
