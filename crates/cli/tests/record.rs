//! `pkprof record` against real workloads (root and BPF needed: run with
//! `cargo test -p pkprof --test record -- --include-ignored --nocapture --test-threads=1`).
//!
//! Each test records a C workload built with frame pointers, reads the profile file back with
//! pkprof-profile, and checks what the kernel really did: the split of CPU between two functions
//! of known work, kernel frames joined under the user call site at the syscall boundary, NET_RX
//! softirq samples labelled with the socket's reader rather than with the process they
//! interrupted, exact call and syscall counts, and symbolization of processes that exited or whose
//! binary was deleted.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::netns::Link;
use common::*;
use pkprof_profile::{Bucket, Context, FrameKind, Profile, Truncation};

/// A running `pkprof record`; `start` returns once sampling runs.
struct Recording {
    child: Child,
    output: PathBuf,
    stderr: mpsc::Receiver<String>,
}

impl Recording {
    fn start(name: &str, args: &[&str]) -> Recording {
        let output = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.pkprof"));
        let _ = std::fs::remove_file(&output);
        let mut child = Command::new(pkprof_bin())
            .arg("record")
            .arg("-o")
            .arg(&output)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("pkprof starts");
        let rx = echo_stderr(&mut child, "pkprof: ");
        let rec = Recording {
            child,
            output,
            stderr: rx,
        };
        wait_for_line(
            &rec.stderr,
            "recording at",
            "pkprof record starts sampling within 30 s",
            Duration::from_secs(30),
        );
        rec
    }

    /// Waits for the end of the recording; returns the summary and the profile.
    fn finish(mut self) -> (String, Profile) {
        let mut stdout = String::new();
        use std::io::Read;
        self.child
            .stdout
            .take()
            .expect("piped stdout")
            .read_to_string(&mut stdout)
            .expect("summary");
        let status = self.child.wait().expect("pkprof exits");
        assert!(status.success(), "pkprof record failed: {status}");
        eprintln!("{stdout}");
        let profile = pkprof_profile::load(&self.output).expect("the profile reads back");
        (stdout, profile)
    }
}

/// Runs `pkprof record ARGS` to the end.
fn record(name: &str, args: &[&str]) -> (String, Profile) {
    Recording::start(name, args).finish()
}

/// Samples of `pid` (served) whose leaf frame is named `func`.
fn self_samples(p: &Profile, pid: u32, func: &str) -> u64 {
    p.samples
        .iter()
        .filter(|s| s.pid == pid)
        .filter(|s| {
            let frames = &p.stacks[s.stack as usize].frames;
            frames
                .last()
                .is_some_and(|f| p.frames[*f as usize].name == func)
        })
        .map(|s| s.count)
        .sum()
}

fn frame_names(p: &Profile, stack: u32) -> Vec<(FrameKind, &str)> {
    p.stack_frames(stack)
        .map(|f| (f.kind, f.name.as_str()))
        .collect()
}

#[test]
#[ignore = "needs root and BPF"]
fn hot_functions_split_seventy_thirty() {
    let bin = build_workload("hot_split");
    let bin_s = bin.to_str().unwrap();
    let (summary, p) = record("hot", &["-F", "999", "--", bin_s, "4"]);
    let pid = p.meta.targets.pids[0];
    let seventy = self_samples(&p, pid, "hot_seventy");
    let thirty = self_samples(&p, pid, "hot_thirty");
    let share = seventy as f64 * 100.0 / (seventy + thirty).max(1) as f64;
    eprintln!(
        "hot_seventy {seventy}, hot_thirty {thirty}: {share:.1}% / {:.1}%",
        100.0 - share
    );
    // 4 s at 999 Hz: up to ~4,000 samples of the workload (fewer on a busy machine); with 500 the
    // standard error of the share is ~2 points. The expected split is 70/30 by construction.
    assert!(
        seventy + thirty > 500,
        "too few samples: {seventy} + {thirty}"
    );
    assert!(
        (65.0..=75.0).contains(&share),
        "hot_seventy's share {share:.1}% is not 70 +- 5"
    );
    // Labelled with the process, named PIDu: in the summary, from the workload binary.
    assert!(
        summary.contains(&format!("{pid}u:hot_seventy")),
        "{summary}"
    );
    let hot = p.frames.iter().find(|f| f.name == "hot_seventy").unwrap();
    assert_eq!(hot.kind, FrameKind::User);
    assert!(
        hot.symbolized && hot.module.ends_with("workload-hot_split"),
        "{hot:?}"
    );
    // Samples agree with the exact accounting of the same run: samples x period ~ CPU time.
    let proc_info = p
        .processes
        .iter()
        .find(|x| x.pid == pid)
        .expect("process row");
    let sampled_ns: u64 = (p.samples.iter().filter(|s| s.pid == pid))
        .map(|s| s.count * p.meta.period_ns)
        .sum();
    let exact_ns = proc_info.task_ns;
    eprintln!("sampled {sampled_ns} ns vs exact {exact_ns} ns");
    assert!(
        proc_info.target && exact_ns > 1_000_000_000,
        "{proc_info:?}"
    );
    assert!(
        rel_err(sampled_ns, exact_ns).abs() < 0.1,
        "sampled {sampled_ns} vs exact {exact_ns}"
    );
    assert_eq!(p.meta.frequency_hz, 999);
    assert!(p.meta.overhead.bpf_run_count.is_some_and(|n| n > 0) && p.meta.cpu_time.total_ns > 0);
}

#[test]
#[ignore = "needs root and BPF"]
fn kernel_frames_join_the_user_call_site() {
    let bin = build_workload("zero_reader");
    let bin_s = bin.to_str().unwrap();
    let (_, p) = record("zero", &["-F", "999", "--syscalls", "--", bin_s, "3"]);
    let pid = p.meta.targets.pids[0];
    let (mut joined, mut total) = (0, 0);
    for s in p.samples.iter().filter(|s| s.pid == pid) {
        total += s.count;
        let names = frame_names(&p, s.stack);
        // root first: ... read_zeros (user) ... sys_readv (boundary) kernel frames ... *zero*
        let user = names
            .iter()
            .position(|(k, n)| *k == FrameKind::User && *n == "read_zeros");
        let sys = names
            .iter()
            .position(|(k, n)| *k == FrameKind::Syscall && *n == "sys_readv");
        if let (Some(u), Some(b)) = (user, sys) {
            let kernel_below = names[b + 1..].iter().all(|(k, _)| *k == FrameKind::Kernel);
            let zero_work = names[b + 1..].iter().any(|(_, n)| n.contains("zero"));
            if u < b && kernel_below && zero_work && b + 1 < names.len() {
                assert_eq!(s.context, Context::Syscall);
                assert_eq!(s.bucket, Bucket::Process);
                joined += s.count;
            }
        }
    }
    eprintln!("{joined} of {total} samples of pid {pid} run read_zeros -> sys_readv -> kernel");
    // The workload spends nearly all its time copying zeros in the kernel.
    assert!(total > 1_000, "too few samples: {total}");
    assert!(joined * 100 > total * 80, "only {joined} of {total} joined");
    // Exact syscall counts ride along: readv as often as the workload says it called it.
    let readv = p
        .syscalls
        .iter()
        .find(|s| s.pid == pid && s.name == "readv")
        .expect("readv counted");
    assert!(readv.total_ns > 0);
    assert!(p
        .processes
        .iter()
        .any(|x| x.pid == pid && x.sys_ns > x.user_ns));
}

#[test]
#[ignore = "needs root and BPF"]
fn exact_counts_of_calls_and_syscalls() {
    let (hot, zero) = (build_workload("hot_split"), build_workload("zero_reader"));
    // uprobe counts against what the workload counted itself.
    let probe = format!("hot_thirty@{}", hot.display());
    let out = Recording::start(
        "count",
        &["--count", &probe, "--", hot.to_str().unwrap(), "1"],
    );
    let (summary, p) = out.finish();
    let pid = p.meta.targets.pids[0];
    let counted = p
        .func_counts
        .iter()
        .find(|c| c.pid == pid && c.function == "hot_thirty")
        .expect("hot_thirty counted")
        .count;
    // The command's stdout is pkprof's: its own count comes before the summary.
    let said: u64 = summary
        .lines()
        .find_map(|l| l.strip_prefix("calls "))
        .and_then(|v| v.split_whitespace().next())
        .expect("the workload's calls line")
        .parse()
        .unwrap();
    assert_eq!(counted, said, "uprobe count vs the workload's own count");

    let (summary, p) = record("sys", &["--syscalls", "--", zero.to_str().unwrap(), "1"]);
    let pid = p.meta.targets.pids[0];
    let reads: u64 = summary
        .lines()
        .find_map(|l| l.strip_prefix("reads "))
        .and_then(|v| v.split_whitespace().next())
        .expect("the workload's reads line")
        .parse()
        .unwrap();
    let readv = p
        .syscalls
        .iter()
        .find(|s| s.pid == pid && s.name == "readv")
        .expect("readv counted");
    assert_eq!(readv.count, reads, "exact syscall count");
}

#[test]
#[ignore = "needs root and BPF"]
fn net_rx_softirq_samples_belong_to_the_receiver() {
    let (send_bin, recv_bin, hog_bin) = (
        build_workload("net_send"),
        build_workload("net_recv"),
        build_workload("net_hog"),
    );
    let link = Link::new("rec", false);
    let wait = Duration::from_secs(20);
    // The hog spins on CPU 1, where RPS steers the receive work; the receiver sleeps on CPU 0.
    let mut hog = Proc::spawn(cmd(&hog_bin, &["1"]));
    hog.expect("hog", wait);
    let mut recv = Proc::spawn(cmd(
        &recv_bin,
        &[&link.rx.0, "udp", link.rx_addr, "7001", "0"],
    ));
    recv.expect("ready", wait);
    let (rpid, hpid) = (recv.pid(), hog.pid());
    let pids = format!("{rpid},{hpid}");
    let rec = Recording::start("net", &["-F", "999", "-p", &pids, "--duration", "4"]);
    let args = [
        &link.tx.0[..],
        "udp",
        link.rx_addr,
        "7001:1",
        "0",
        "2.5",
        "64",
        "0",
    ];
    let mut sender = Proc::spawn(cmd(&send_bin, &args));
    sender.expect("sent", wait);
    sender.wait(wait);
    let (_, p) = rec.finish();
    recv.close_stdin();
    recv.expect("received", wait);
    hog.close_stdin();
    hog.expect("spun", wait);

    let net_rx = |pid: u32| -> u64 {
        p.samples
            .iter()
            .filter(|s| s.pid == pid && s.context == Context::SoftIrq(3))
            .map(|s| s.count)
            .sum()
    };
    let (to_receiver, to_hog) = (net_rx(rpid), net_rx(hpid));
    // The softirq path is there, labelled PIDk: for the receiver, and its user stack is not the hog's.
    // The path is net_rx_action, or pkprof's own softirq entry/exit programs around it
    // (handle_softirqs -> bpf_trace_run1 -> bpf_prog_..._on_softirq_entry): about a tenth of the
    // samples on this VM, named since pkprof names its own programs.
    let with_net_frames: u64 = p
        .samples
        .iter()
        .filter(|s| s.pid == rpid && s.context == Context::SoftIrq(3))
        .filter(|s| {
            let names = frame_names(&p, s.stack);
            names.iter().all(|(k, _)| *k == FrameKind::Kernel)
                && names
                    .iter()
                    .any(|(_, n)| n.contains("net_rx_action") || n.starts_with("bpf_trace_run"))
        })
        .map(|s| s.count)
        .sum();
    let hog_current: u64 = p
        .samples
        .iter()
        .filter(|s| s.pid == rpid && s.context == Context::SoftIrq(3) && s.current_pid == hpid)
        .map(|s| s.count)
        .sum();
    eprintln!(
        "NET_RX samples: receiver {to_receiver} ({with_net_frames} with net_rx_action or pkprof's softirq programs, \
         {hog_current} taken while the hog was current), hog {to_hog}"
    );
    assert!(
        to_receiver >= 100,
        "too few NET_RX samples for the receiver: {to_receiver}"
    );
    assert!(
        to_hog * 50 <= to_receiver,
        "the hog got {to_hog} NET_RX samples"
    );
    assert!(with_net_frames * 10 >= to_receiver * 9);
    // The receive work ran in other tasks' context (the hog, ksoftirqd), not in the receiver's.
    let elsewhere: u64 = (p.samples.iter())
        .filter(|s| s.pid == rpid && s.context == Context::SoftIrq(3) && s.current_pid != rpid)
        .map(|s| s.count)
        .sum();
    assert!(
        elsewhere * 2 >= to_receiver,
        "{elsewhere} of {to_receiver} ran elsewhere"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn exited_process_and_deleted_binary_are_still_symbolized() {
    let bin = build_workload("hot_split");
    // A copy of the binary, deleted while its process runs.
    let copy = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hot_split-to-delete");
    std::fs::copy(&bin, &copy).expect("copy the workload");
    let rec = Recording::start("exited", &["-a", "-F", "499", "--duration", "3"]);
    let mut short = Proc::spawn(cmd(&bin, &["1"]));
    let mut deleted = Proc::spawn(cmd(&copy, &["1.5"]));
    std::thread::sleep(Duration::from_millis(300));
    std::fs::remove_file(&copy).expect("delete the running binary");
    short.expect("calls", Duration::from_secs(10));
    deleted.expect("calls", Duration::from_secs(10));
    short.wait(Duration::from_secs(5));
    deleted.wait(Duration::from_secs(5));
    let (_, p) = rec.finish();
    for (who, pid) in [("exited", short.pid()), ("deleted binary", deleted.pid())] {
        let n = self_samples(&p, pid, "hot_seventy");
        eprintln!("{who}: {n} samples in hot_seventy");
        assert!(
            n > 50,
            "{who} process {pid}: hot_seventy not symbolized ({n} samples)"
        );
        let info = p
            .processes
            .iter()
            .find(|x| x.pid == pid)
            .expect("process row");
        assert!(info.exited, "{info:?}");
    }
    assert_eq!(p.meta.targets.kind, pkprof_profile::TargetKind::System);
}

#[test]
#[ignore = "needs root and BPF"]
fn bad_targets_fail_with_one_line() {
    let bin = build_workload("hot_split");
    let out_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bad.pkprof");
    let _ = std::fs::remove_file(&out_path);
    let out_s = out_path.to_str().unwrap();
    let run = |args: &[&str]| {
        let out = run_with_timeout(
            Command::new(pkprof_bin()).arg("record").args(args),
            Duration::from_secs(30),
        );
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{args:?} succeeded");
        assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
        err
    };
    let err = run(&["-o", out_s, "-p", "4000000", "--duration", "1"]);
    assert!(err.contains("no process with PID 4000000"), "{err}");
    let missing_func = format!("no_such_function@{}", bin.display());
    let err = run(&[
        "-o",
        out_s,
        "--count",
        &missing_func,
        "-a",
        "--duration",
        "1",
    ]);
    assert!(err.contains("no_such_function"), "{err}");
    let err = run(&[
        "-o",
        out_s,
        "--count",
        "f@/nonexistent/binary",
        "-a",
        "--duration",
        "1",
    ]);
    assert!(err.contains("/nonexistent/binary"), "{err}");
    let err = run(&[
        "-o",
        out_s,
        "--cgroup",
        "/sys/fs/cgroup/no-such-group",
        "--duration",
        "1",
    ]);
    assert!(err.contains("no cgroup"), "{err}");
    let err = run(&["-o", "/nonexistent-dir/x.pkprof", "-a", "--duration", "1"]);
    assert!(err.contains("cannot write the profile"), "{err}");
    assert!(!out_path.exists(), "a failed run left a profile behind");
}

/// The cgroup2 mount point, from /proc/self/mountinfo.
fn cgroup2_mount() -> PathBuf {
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    info.lines()
        .find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            post.starts_with("cgroup2 ")
                .then(|| PathBuf::from(pre.split_whitespace().nth(4).unwrap()))
        })
        .expect("a cgroup2 mount")
}

#[test]
#[ignore = "needs root and BPF"]
fn cgroup_target_labels_members_and_others() {
    let bin = build_workload("hot_split");
    let dir = cgroup2_mount().join(format!("pkprof-test-{}", std::process::id()));
    let _ = std::fs::remove_dir(&dir);
    std::fs::create_dir(&dir).expect("create a cgroup");
    let mut inside = Proc::spawn(cmd(&bin, &["2.5"]));
    std::fs::write(dir.join("cgroup.procs"), inside.pid().to_string()).expect("move into it");
    let mut outside = Proc::spawn(cmd(&bin, &["2.5"]));
    let dir_s = dir.to_str().unwrap().to_string();
    let (_, p) = record(
        "cgroup",
        &["--cgroup", &dir_s, "-F", "499", "--duration", "1.5"],
    );
    inside.expect("calls", Duration::from_secs(10));
    outside.expect("calls", Duration::from_secs(10));
    inside.wait(Duration::from_secs(5));
    outside.wait(Duration::from_secs(5));
    let _ = std::fs::remove_dir(&dir);
    let count = |pid: u32, bucket: Bucket| -> u64 {
        (p.samples.iter())
            .filter(|s| s.pid == pid && s.bucket == bucket)
            .map(|s| s.count)
            .sum()
    };
    let (i, o) = (inside.pid(), outside.pid());
    eprintln!(
        "inside: {} process / {} other; outside: {} process / {} other",
        count(i, Bucket::Process),
        count(i, Bucket::Other),
        count(o, Bucket::Process),
        count(o, Bucket::Other)
    );
    assert!(count(i, Bucket::Process) > 100 && count(i, Bucket::Other) == 0);
    assert!(count(o, Bucket::Other) > 100 && count(o, Bucket::Process) == 0);
    assert_eq!(p.meta.targets.kind, pkprof_profile::TargetKind::Cgroup);
}

#[test]
#[ignore = "needs root and BPF"]
fn ctrl_c_stops_and_keeps_the_profile() {
    let rec = Recording::start("sigint", &["-a", "-F", "499"]);
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(rec.child.id() as i32, libc::SIGINT) };
    let (summary, p) = rec.finish();
    assert!(summary.contains("(interrupted)"), "{summary}");
    assert!(p.total_samples() > 0 && p.meta.end_unix_ns > p.meta.start_unix_ns);
}

#[test]
#[ignore = "needs root and BPF"]
fn full_disk_fails_with_one_line_and_leaves_no_file() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tiny-fs");
    std::fs::create_dir_all(&dir).unwrap();
    let dir_s = dir.to_str().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8k", "tmpfs", dir_s])
        .status()
        .expect("mount runs");
    assert!(mounted.success(), "mounting a tiny tmpfs");
    // Fill it up.
    let fill = dir.join("fill");
    let mut f = std::fs::File::create(&fill).expect("create the filler");
    while std::io::Write::write_all(&mut f, &[0u8; 1024]).is_ok() {}
    drop(f);
    let out_file = dir.join("x.pkprof");
    let out = run_with_timeout(
        Command::new(pkprof_bin())
            .args(["record", "-a", "-F", "999", "--duration", "1", "-o"])
            .arg(&out_file),
        Duration::from_secs(60),
    );
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| *p != fill)
        .collect();
    let _ = Command::new("umount").arg(dir_s).status();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("{err}");
    assert!(!out.status.success());
    let last = err.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.contains("cannot write the profile") && last.contains("No space left"),
        "{err}"
    );
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
}

#[test]
#[ignore = "needs root and BPF"]
fn lines_option_adds_source_positions() {
    let bin = build_workload("hot_split");
    let (_, p) = record(
        "lines",
        &["--lines", "-F", "999", "--", bin.to_str().unwrap(), "1"],
    );
    // hot_seventy's loop is in hot_split.c; DWARF gives its file and line.
    let hot: Vec<_> = (p.frames.iter())
        .filter(|f| f.name == "hot_seventy")
        .collect();
    assert!(!hot.is_empty(), "hot_seventy was sampled");
    assert!(
        hot.iter().all(|f| f
            .file
            .as_deref()
            .is_some_and(|x| x.ends_with("hot_split.c"))
            && f.line.is_some_and(|l| l > 0)),
        "{hot:?}"
    );
}

/// `/proc/kallsyms` now: (start address, name) of every BPF program, sorted, with the address of
/// the next symbol (any kind) as its end (kallsyms has no sizes).
fn bpf_prog_ranges() -> Vec<(u64, u64, String)> {
    let text = std::fs::read_to_string("/proc/kallsyms").expect("read /proc/kallsyms");
    let mut syms: Vec<(u64, String)> = text
        .lines()
        .filter_map(|l| {
            let mut it = l.split_ascii_whitespace();
            let addr = u64::from_str_radix(it.next()?, 16).ok()?;
            let name = it.nth(1)?;
            (addr != 0).then(|| (addr, name.to_string()))
        })
        .collect();
    syms.sort();
    syms.windows(2)
        .filter(|w| w[0].1.starts_with("bpf_prog_") && w[1].0 > w[0].0)
        .map(|w| (w[0].0, w[1].0, w[0].1.clone()))
        .collect()
}

#[test]
#[ignore = "needs root and BPF"]
fn own_bpf_programs_are_named_from_kallsyms() {
    // A context-switch-heavy load runs pkprof's own programs (sched_switch, syscalls) all the
    // time; at 4,999 Hz some samples land in them. They are unloaded when the recording ends, so
    // their names must be taken while they are loaded: kallsyms is read here mid-recording as the
    // ground truth.
    let bin = build_workload("pipe_pingpong");
    let rec = Recording::start(
        "bpfprog",
        &["-a", "-F", "4999", "--duration", "4", "--syscalls"],
    );
    let mut load = Command::new(&bin)
        .arg("5")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let progs = bpf_prog_ranges();
    let (_, p) = rec.finish();
    let _ = load.wait();
    let (mut named, mut unnamed) = (0, Vec::new());
    for s in &p.samples {
        for f in p
            .stack_frames(s.stack)
            .filter(|f| f.kind == FrameKind::Kernel)
        {
            let i = progs.partition_point(|r| r.0 <= f.offset);
            let Some((_, end, name)) = i.checked_sub(1).map(|i| &progs[i]) else {
                continue;
            };
            if f.offset >= *end {
                continue;
            }
            if f.name == *name {
                named += s.count;
            } else {
                unnamed.push(format!("{} (kallsyms: {name})", f.name));
            }
        }
    }
    eprintln!("{named} samples in BPF programs named; misnamed: {unnamed:?}");
    assert!(
        unnamed.is_empty(),
        "frames in BPF programs misnamed: {unnamed:?}"
    );
    assert!(named > 0, "no sample landed in a BPF program");
}

#[test]
#[ignore = "needs root and BPF"]
fn bpf_cost_without_cap_sys_admin_is_not_measured() {
    // With CAP_BPF + CAP_PERFMON only (what the README's setcap grants), the kernel refuses
    // BPF_ENABLE_STATS and leaves run time and count at 0: that must read "not measured", not
    // "0.00% (0 runs)". The kernel's own switch decides the truth: stats on for every program
    // (sysctl) are measured after all.
    let stats_on = std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
        .is_ok_and(|s| s.trim() == "1");
    let bin = build_workload("hot_split");
    let output = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capped.pkprof");
    let out = Command::new("setpriv")
        .args(["--inh-caps=-all", "--bounding-set=-all,+bpf,+perfmon", "--"])
        .arg(pkprof_bin())
        .args(["record", "-o"])
        .arg(&output)
        .arg("--")
        .arg(&bin)
        .arg("0.5")
        .output()
        .expect("setpriv (util-linux) runs");
    let summary = String::from_utf8_lossy(&out.stdout);
    eprintln!("{summary}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success());
    let p = pkprof_profile::load(&output).expect("the profile reads back");
    let line = summary
        .lines()
        .find(|l| l.starts_with("overhead:"))
        .expect("overhead line");
    if stats_on {
        assert!(
            p.meta.overhead.bpf_run_count.is_some_and(|n| n > 0),
            "{line}"
        );
    } else {
        assert!(line.contains("its BPF programs not measured"), "{line}");
        assert_eq!(p.meta.overhead.bpf_run_ns, None);
        assert_eq!(p.meta.overhead.bpf_run_count, None);
    }
}

#[test]
#[ignore = "needs root and BPF"]
fn wild_frame_pointer_walks_stop_and_are_marked_truncated() {
    // Three threads spin while rbp holds ASCII data, a frame pointing to itself, or a frame whose
    // return address is ASCII data; the main thread spins with sound frame pointers (see the
    // workload's comment). The kernel's walk (bpf_get_stack, and perf -g) gives `fake_caller`
    // 126 times in a row and `[unknown]+0xd4b4f2030303132` roots there. With frame pointers only
    // (`--stack-bytes 0`) pkprof's walk stops there and marks the stack.
    let bin = build_workload_with("wild_frames", &["-fomit-frame-pointer"]);
    let bin_s = bin.to_str().unwrap();
    let (_, p) = record(
        "wild",
        &["-F", "999", "--stack-bytes", "0", "--", bin_s, "2"],
    );
    let pid = p.meta.targets.pids[0];
    let mut seen: std::collections::HashMap<&str, u64> = Default::default();
    // Broken walks: (marked truncated, all) samples.
    let mut broken: std::collections::HashMap<&str, (u64, u64)> = Default::default();
    for s in p.samples.iter().filter(|s| s.pid == pid) {
        let frames = &p.stacks[s.stack as usize].frames;
        let names = frame_names(&p, s.stack);
        let Some(spin) = [
            "spin_ascii_rbp",
            "spin_self_frame",
            "spin_ascii_ret",
            "normal_spin",
        ]
        .into_iter()
        .find(|f| names.iter().any(|(_, n)| n == f)) else {
            continue;
        };
        *seen.entry(spin).or_default() += s.count;
        assert!(
            !names.iter().any(|(_, n)| n.starts_with("[unknown]")),
            "a frame outside every mapping: {names:?}"
        );
        assert!(
            frames.windows(2).all(|w| w[0] != w[1]),
            "a frame repeated in a row (no recursion here): {names:?}"
        );
        let marked = names.first().is_some_and(|(k, n)| {
            *k == FrameKind::Truncated && *n == Truncation::BadFrame.frame_name()
        });
        match spin {
            // A sample in the few instructions around the asm loop (the loop test, push, pop)
            // sees the caller's own rbp, not the broken frame: the walk there may end unmarked.
            // The loop itself holds all but a sliver of the time.
            "spin_self_frame" | "spin_ascii_ret" => {
                let (m, all) = broken.entry(spin).or_default();
                *all += s.count;
                if marked {
                    *m += s.count;
                }
            }
            "normal_spin" => assert!(
                !marked && names.iter().any(|(_, n)| *n == "normal_outer"),
                "a sound walk cut or marked: {names:?}"
            ),
            _ => {}
        }
    }
    eprintln!("samples by function: {seen:?}");
    for (f, n) in &seen {
        assert!(*n > 20, "too few samples in {f}: {seen:?}");
    }
    assert_eq!(seen.len(), 4, "{seen:?}");
    for (f, (marked, all)) in &broken {
        assert!(
            marked * 20 >= all * 19,
            "broken walks in {f} not marked truncated: {} of {all}",
            all - marked
        );
    }
    // The report shows the mark as the root frame.
    let out = Command::new(pkprof_bin())
        .args(["report", "--graph", "--plain-names"])
        .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("wild.pkprof"))
        .output()
        .expect("pkprof report runs");
    let graph = String::from_utf8_lossy(&out.stdout);
    assert!(graph.contains("[truncated: bad frame]"), "{graph}");
}

#[test]
#[ignore = "needs root and BPF"]
fn wild_frame_pointers_do_not_matter_to_unwinding() {
    // The same threads as above, unwound from the binary's unwind tables (the default): rbp is
    // just a register there, so nothing of the fake frames may show. The spinning asm pushes rbp
    // without telling the unwind tables, so inside it the tables themselves are off by one slot:
    // such a stack must then be marked truncated, never shown cut short as if whole. The thread
    // with sound code is whole, from its entry.
    let bin = build_workload_with("wild_frames", &["-fomit-frame-pointer"]);
    let bin_s = bin.to_str().unwrap();
    let (_, p) = record("wild-unwound", &["-F", "999", "--", bin_s, "2"]);
    let pid = p.meta.targets.pids[0];
    let mut seen: std::collections::HashMap<&str, (u64, u64)> = Default::default();
    for s in p.samples.iter().filter(|s| s.pid == pid) {
        let names = frame_names(&p, s.stack);
        let Some(spin) = [
            "spin_ascii_rbp",
            "spin_self_frame",
            "spin_ascii_ret",
            "normal_spin",
        ]
        .into_iter()
        .find(|f| names.last().is_some_and(|(_, n)| n == f)) else {
            continue;
        };
        assert!(
            !names
                .iter()
                .any(|(_, n)| n.starts_with("[unknown]") || *n == "fake_caller"),
            "a fake frame shown: {names:?}"
        );
        let user: Vec<&str> = names
            .iter()
            .filter(|(k, _)| *k == FrameKind::User)
            .map(|(_, n)| *n)
            .collect();
        let whole = names[0].0 == FrameKind::User
            && user
                .first()
                .is_some_and(|n| *n == "clone3" || *n == "__clone3")
            && user.contains(&"start_thread");
        let marked = names[0].0 == FrameKind::Truncated;
        assert!(whole || marked, "cut short but not marked: {names:?}");
        let (w, all) = seen.entry(spin).or_default();
        *all += s.count;
        if whole {
            *w += s.count;
        }
    }
    eprintln!("(whole, all) by function: {seen:?}");
    assert_eq!(seen.len(), 4, "{seen:?}");
    for (f, (_, all)) in &seen {
        assert!(*all > 20, "too few samples in {f}: {seen:?}");
    }
    let (whole, all) = seen["normal_spin"];
    assert!(
        whole * 20 >= all * 19,
        "normal_spin: {whole} of {all} whole"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn stripped_library_routines_are_named_by_exported_symbols() {
    // Debian's liblzma is stripped: only its exported .dynsym symbols are left, so xz's hot code
    // (the match finder, the encoder) is covered by no symbol. Each such address used to be a
    // routine of its own (`liblzma.so.5.4.1+0x15bc9`, `+0x1692b`, ...).
    let xz = Path::new("/usr/bin/xz");
    assert!(
        xz.exists(),
        "xz is missing: run scripts/setup.sh (xz-utils)"
    );
    let input = Path::new(env!("CARGO_TARGET_TMPDIR")).join("xz-input.txt");
    // 3 MB of text that compresses poorly enough to keep xz -9 busy for a few seconds.
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let text: String = (0..3_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (b'a' + (x % 26) as u8) as char
        })
        .collect();
    std::fs::write(&input, text).unwrap();
    let script = format!("xz -9 -T1 -c {} > /dev/null", input.display());
    let (_, p) = record("xz", &["-F", "999", "--", "sh", "-c", &script]);
    let lzma: Vec<&str> = p
        .frames
        .iter()
        .filter(|f| f.module.contains("liblzma"))
        .map(|f| f.name.as_str())
        .collect();
    eprintln!(
        "{} liblzma frames, e.g. {:?}",
        lzma.len(),
        &lzma[..lzma.len().min(5)]
    );
    assert!(!lzma.is_empty(), "no sample in liblzma");
    assert!(
        lzma.iter().all(|n| !n.contains("+0x")),
        "liblzma addresses named one by one: {lzma:?}"
    );
    let out = Command::new(pkprof_bin())
        .args(["report", "--flat", "--plain-names"])
        .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("xz.pkprof"))
        .output()
        .expect("pkprof report runs");
    let flat = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = flat.lines().filter(|l| l.contains("liblzma")).collect();
    eprintln!("{}", rows[..rows.len().min(8)].join("\n"));
    assert!(
        rows.iter()
            .any(|l| l.contains("liblzma.so") && l.contains("!<after lzma_")),
        "{flat}"
    );
    assert!(!rows.iter().any(|l| l.contains("+0x")), "{flat}");
}
