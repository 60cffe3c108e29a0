//! How `top`, `record` and `syscalls` take what the user names: numeric options out of range are
//! refused by the argument parser (one line, exit 2, before anything is loaded); a `--cgroup` path
//! resolves the same way everywhere (relative to the cgroup2 mount) and a directory that is not
//! cgroup v2 is refused; a thread id given to `-p` selects its process, with a note on stderr.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::*;

/// Runs pkprof to the end (the timeout only guards against a hang: on a loaded machine, loading
/// and symbolizing a short recording can take minutes).
fn pkprof(args: &[&str]) -> Output {
    run_with_timeout(
        Command::new(pkprof_bin()).args(args),
        Duration::from_secs(600),
    )
}

/// A refusal: non-zero exit (`code` when given), exactly one line on stderr holding every
/// fragment of `must_name`, nothing on stdout, no panic.
fn refused(args: &[&str], code: Option<i32>, must_name: &[&str]) -> String {
    let out = pkprof(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let what = format!("pkprof {args:?}: {} stderr {err:?}", out.status);
    assert!(!out.status.success(), "must fail: {what}");
    if let Some(c) = code {
        assert_eq!(out.status.code(), Some(c), "{what}");
    }
    assert!(out.stdout.is_empty(), "nothing on stdout: {what}");
    assert_eq!(err.lines().count(), 1, "one line: {what}");
    assert!(
        err.starts_with("pkprof: ") && !err.contains("panicked"),
        "{what}"
    );
    for m in must_name {
        assert!(err.contains(m), "names {m:?}: {what}");
    }
    err
}

/// Every numeric option whose 0 (or a huge value) makes no sense is a usage error: exit 2, the
/// option named, before any BPF program is loaded (the kernel used to be the one refusing, with
/// "the kernel refused to load BPF program: Invalid argument").
#[test]
fn numeric_options_out_of_range_are_usage_errors() {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("range.pkprof");
    let out_s = out.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["record", "-a", "--max-threads", "0"], "--max-threads"),
        (&["record", "-a", "--max-tags", "0"], "--max-tags"),
        (
            &["record", "-a", "--max-threads", "4000000000"],
            "--max-threads",
        ),
        (&["record", "-a", "--max-tags", "99999999999"], "--max-tags"),
        (&["record", "-a", "-F", "0"], "--freq"),
        (&["record", "-a", "--ring-mib", "0"], "--ring-mib"),
        (&["record", "-a", "--tag-expire", "0"], "--tag-expire"),
        (&["record", "-a", "--summary-rows", "0"], "--summary-rows"),
        (&["record", "-a", "--duration", "0"], "--duration"),
        (&["top", "--batch", "--max-threads", "0"], "--max-threads"),
        (&["top", "--batch", "--max-tags", "0"], "--max-tags"),
        (&["top", "--batch", "-d", "0"], "--delay"),
        (&["top", "--batch", "-n", "0"], "--iterations"),
        (&["top", "--batch", "--tag-expire", "0"], "--tag-expire"),
        (&["top", "--batch", "--metrics-top", "0"], "--metrics-top"),
        (&["syscalls", "-a", "--top", "0"], "--top"),
        (
            &["syscalls", "-a", "--max-transitions", "0"],
            "--max-transitions",
        ),
        (&["syscalls", "-a", "--duration", "0"], "--duration"),
    ];
    for (args, option) in cases {
        let mut args = args.to_vec();
        if args[0] == "record" {
            args.extend(["-o", out_s]);
        }
        let line = refused(&args, Some(2), &[option]);
        assert!(!line.contains("BPF"), "refused before loading: {line}");
    }
    assert!(!out.exists(), "a refused record wrote a profile");
}

/// Mount points of `fstype` (cgroup2, cgroup) from /proc/self/mountinfo.
fn mounts_of(fstype: &str) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    info.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            (post.split_whitespace().next() == Some(fstype))
                .then(|| PathBuf::from(pre.split_whitespace().nth(4).unwrap()))
        })
        .collect()
}

/// A directory that is no cgroup v2 directory (a plain one, or a cgroup v1 hierarchy where the
/// machine has one, as on a hybrid layout) is refused by top, record and syscalls' neighbours
/// with one line, instead of being accepted and then matching everything or nothing.
#[test]
fn a_directory_that_is_not_cgroup_v2_is_refused() {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("v1.pkprof");
    let out_s = out.to_str().unwrap();
    let tmp = std::env::temp_dir();
    let mut dirs = vec![tmp.to_str().unwrap().to_string()];
    // A cgroup v1 hierarchy, if this machine has one (hybrid or legacy layout).
    dirs.extend(mounts_of("cgroup").iter().map(|m| m.display().to_string()));
    eprintln!("not cgroup v2: {dirs:?}");
    for d in &dirs {
        refused(
            &["top", "--batch", "-n", "1", "--cgroup", d],
            None,
            &[d, "not a cgroup v2 directory"],
        );
        refused(
            &["record", "--cgroup", d, "--duration", "1", "-o", out_s],
            None,
            &[d, "not a cgroup v2 directory"],
        );
    }
    assert!(!out.exists(), "a refused record wrote a profile");
}

/// A cgroup v2 directory, removed (after its processes are gone) on drop.
struct Cgroup(PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// `--cgroup NAME` relative to the cgroup2 mount selects the same cgroup in `top` and `record`,
/// wherever the mount is (on a hybrid layout it is /sys/fs/cgroup/unified; `top` used to look
/// under /sys/fs/cgroup and refuse).
#[test]
#[ignore = "needs root and BPF"]
fn a_relative_cgroup_path_is_the_same_in_top_and_record() {
    let root = mounts_of("cgroup2")
        .into_iter()
        .next()
        .expect("a cgroup2 mount");
    let name = format!("pkprof-targets-{}", std::process::id());
    let cg = Cgroup(root.join(&name));
    std::fs::create_dir(&cg.0).expect("create a cgroup v2 directory");
    let bin = build_workload("hot_split");
    let mut inside = Proc::spawn(cmd(&bin, &["4"]));
    std::fs::write(cg.0.join("cgroup.procs"), inside.pid().to_string()).expect("move into it");
    let mut outside = Proc::spawn(cmd(&bin, &["4"]));

    let mut top = Top::start(&["-d", "0.25", "--cgroup", &name]);
    let f = top.wait_for(Duration::from_secs(10), |f| {
        row_of(f, inside.pid()).is_some_and(|r| on_cpu_ns(r) > 0)
    });
    assert!(
        row_of(&f, outside.pid()).is_none(),
        "top --cgroup {name} shows a process outside it"
    );
    top.stop();

    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("relative-cgroup.pkprof");
    let run = pkprof(&[
        "record",
        "--cgroup",
        &name,
        "-F",
        "499",
        "--duration",
        "1",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "record --cgroup {name}: {run:?}");
    let p = pkprof_profile::load(&out).expect("the profile reads back");
    let _ = std::fs::remove_file(&out);
    let samples = |pid: u32, bucket: pkprof_profile::Bucket| -> u64 {
        (p.samples.iter())
            .filter(|s| s.pid == pid && s.bucket == bucket)
            .map(|s| s.count)
            .sum()
    };
    let (i, o) = (inside.pid(), outside.pid());
    eprintln!(
        "inside {} samples, outside {} as process",
        samples(i, pkprof_profile::Bucket::Process),
        samples(o, pkprof_profile::Bucket::Process)
    );
    assert!(samples(i, pkprof_profile::Bucket::Process) > 50);
    assert_eq!(samples(o, pkprof_profile::Bucket::Process), 0);
    inside.expect("calls", Duration::from_secs(10));
    outside.expect("calls", Duration::from_secs(10));
    inside.wait(Duration::from_secs(5));
    outside.wait(Duration::from_secs(5));
}

/// A running multi-threaded workload (thread_duty: two threads busy 90% of each 50 ms for up to
/// 120 s, killed when dropped) and the id of one of its threads that is not the main thread.
fn threaded_workload() -> (Proc, u32) {
    let mut w = Proc::spawn(cmd(
        &build_workload("thread_duty"),
        &["120", "50", "0.9", "0.9"],
    ));
    w.send_line("go");
    let pid = w.pid();
    let tid = wait_tid(pid);
    (w, tid)
}

fn wait_tid(pid: u32) -> u32 {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let tid = std::fs::read_dir(format!("/proc/{pid}/task"))
            .expect("the workload runs")
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|&t| t != pid);
        if let Some(t) = tid {
            return t;
        }
        assert!(std::time::Instant::now() < deadline, "no thread started");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `record -p TID` records the thread's process and says so once on stderr (it used to record
/// nothing without a word).
#[test]
#[ignore = "needs root and BPF"]
fn record_with_a_thread_id_records_its_process() {
    let (_w, tid) = threaded_workload();
    let pid = _w.pid();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tid.pkprof");
    let run = pkprof(&[
        "record",
        "-p",
        &tid.to_string(),
        "-F",
        "499",
        "--duration",
        "1",
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{run:?}");
    let note = format!("pkprof: {tid} is a thread of process {pid}; recording the process");
    assert_eq!(
        err.lines().filter(|l| *l == note).count(),
        1,
        "the note once: {err}"
    );
    let p = pkprof_profile::load(&out).expect("the profile reads back");
    let _ = std::fs::remove_file(&out);
    assert_eq!(p.meta.targets.pids, vec![pid]);
    let ours: u64 = (p.samples.iter())
        .filter(|s| s.pid == pid && s.bucket == pkprof_profile::Bucket::Process)
        .map(|s| s.count)
        .sum();
    let threads: std::collections::HashSet<u32> = (p.samples.iter())
        .filter(|s| s.pid == pid && s.bucket == pkprof_profile::Bucket::Process)
        .map(|s| s.tid)
        .collect();
    eprintln!("{ours} samples of process {pid}, threads {threads:?}");
    // Two threads busy 90% at 499 Hz for 1 s: about 900 samples; any real share will do.
    assert!(ours > 200, "{ours} samples of the process");
    assert!(
        threads.len() >= 2,
        "every thread of the process: {threads:?}"
    );
}

/// `top -p TID` shows the thread's process row (it showed an empty table); with -H the id selects
/// that thread's row, as documented.
#[test]
#[ignore = "needs root and BPF"]
fn top_with_a_thread_id_shows_its_process() {
    let (w, tid) = threaded_workload();
    let pid = w.pid();
    let run = pkprof(&[
        "top",
        "--batch",
        "-n",
        "2",
        "-d",
        "0.5",
        "-p",
        &tid.to_string(),
    ]);
    let out = String::from_utf8_lossy(&run.stdout);
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{run:?}");
    assert_eq!(
        err.lines()
            .filter(|l| l.contains(&format!("{tid} is a thread of process {pid}")))
            .count(),
        1,
        "{err}"
    );
    // The last frame's table has the process row (PID first on its line).
    let last = out.rsplit("\n\n").find(|f| !f.trim().is_empty()).unwrap();
    let row = last
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&pid.to_string()));
    assert!(row.is_some_and(|r| r.contains("workload-thread")), "{out}");

    let mut top = Top::start(&["-H", "-d", "0.25", "-p", &tid.to_string()]);
    let f = top.wait_for(Duration::from_secs(10), |f| row_of(f, tid).is_some());
    assert_eq!(rows(&f).len(), 1, "only that thread: {f}");
    top.stop();
}
