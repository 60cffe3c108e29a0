//! `pkprof agent` stays bounded under process churn (docs/design.md, "The agent / Bounded
//! memory"), measured with the kernel's own figures of the agent: its open descriptors
//! (`/proc/PID/fd`, asserted) and its anonymous resident memory (`RssAnon` of
//! `/proc/PID/status`: what it allocates; printed: it grows while caches fill, see below), compared with its
//! own early windows. Its file-backed resident pages (`RssFile`) are
//! printed, not bounded: they are the pages of binaries that live processes map (blazesym reads
//! them in place), shared with those processes, and move with whatever else the machine runs.
//!
//! The churn: a CPU-bound program started back to back, each time as a new binary (a copy with
//! its own build-id, so the symbolizer cannot take it for one it holds), running about 40 ms so
//! that the agent (199 Hz, 1 s windows) samples most of them. Each sampled copy is a file the
//! symbolizer opens, parses and reads unwind tables from; once its process has exited, the
//! agent must close it and drop what it read.

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{build_workload, http_get, median, pkprof_bin, status_kib, Agent};

/// `bytes` with the GNU build-id note's first four descriptor bytes set to `n`.
fn with_build_id(bytes: &[u8], n: u32) -> Vec<u8> {
    // Elf64_Nhdr: namesz 4, descsz 20 (SHA-1), type NT_GNU_BUILD_ID (3), then "GNU\0".
    let header: &[u8] = b"\x04\0\0\0\x14\0\0\0\x03\0\0\0GNU\0";
    let at = bytes
        .windows(header.len())
        .position(|w| w == header)
        .expect("the workload has a GNU build-id note")
        + header.len();
    let mut out = bytes.to_vec();
    out[at..at + 4].copy_from_slice(&n.to_le_bytes());
    out
}

/// The agent's heap in use (KiB, `ctl status`): with RssAnon, it tells a leak from memory the
/// allocator keeps (0 if the status cannot be read).
fn heap_kib(sock: &Path) -> u64 {
    let out = Command::new(pkprof_bin())
        .args(["ctl", "--socket"])
        .arg(sock)
        .arg("status")
        .output();
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    text.ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("memory"))?.to_string();
            let before = line.split(" KiB heap in use").next()?;
            before.rsplit(' ').next()?.parse().ok()
        })
        .unwrap_or(0)
}

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

#[test]
#[ignore = "needs root and BPF"]
fn agent_stays_bounded_under_process_churn() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("churn-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(tmp.join("bin")).unwrap();
    let original = std::fs::read(build_workload("hot_split")).unwrap();

    let (store, sock) = (tmp.join("store"), tmp.join("agent.sock"));
    let (store_s, sock_s) = (store.to_str().unwrap(), sock.to_str().unwrap());
    let agent = Agent::start(&[
        "--window", "1s", "-F", "199", "--listen", "", "--store", store_s, "--socket", sock_s,
    ]);
    let pid = agent.pid();
    agent.wait_started(Duration::from_secs(60));

    // The churn, until told to stop: each run a new file, deleted once the run is over.
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicU64::new(0));
    let churn = {
        let (stop, started, dir) = (stop.clone(), started.clone(), tmp.join("bin"));
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let path = dir.join(format!("spin-{n}"));
                std::fs::write(&path, with_build_id(&original, n)).unwrap();
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
                let status = Command::new(&path)
                    .arg("0.04")
                    .stdout(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success());
                std::fs::remove_file(&path).unwrap();
                started.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    // A second a sample: 6 s of warm-up, 10 early ones, ..., the last 10 of 40 s.
    let t0 = Instant::now();
    let mut samples: Vec<(usize, u64, u64, u64)> = Vec::new();
    let sock = tmp.join("agent.sock");
    while t0.elapsed() < Duration::from_secs(40) {
        std::thread::sleep(Duration::from_secs(1));
        samples.push((
            fds(pid),
            status_kib(pid, "RssAnon:"),
            status_kib(pid, "RssFile:"),
            heap_kib(&sock),
        ));
    }
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
    let started = started.load(Ordering::Relaxed);
    let status = Command::new(pkprof_bin())
        .args(["ctl", "--socket"])
        .arg(tmp.join("agent.sock"))
        .arg("status")
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout).to_string();
    eprintln!("{status}");
    let (early, late) = (&samples[6..16], &samples[samples.len() - 10..]);
    eprintln!(
        "{started} binaries run; (fds, RssAnon, RssFile, heap in use KiB) per second: {samples:?}"
    );

    // Enough distinct binaries ran that keeping them would show: each sampled one is a file.
    assert!(started >= 150, "only {started} binaries ran");
    // Descriptors: those of the exited binaries were closed; what the late windows hold beyond
    // the early ones' peak is under 5% of the binaries run (without eviction: one per binary
    // sampled, some 200 more here).
    let fd_early = early.iter().map(|s| s.0).max().unwrap();
    let fd_late = late.iter().map(|s| s.0).max().unwrap();
    assert!(
        fd_late as u64 <= fd_early as u64 + started / 20,
        "open descriptors {fd_early} -> {fd_late} over {started} binaries run"
    );
    // Anonymous memory: printed, not asserted (issue 13 stays open on it). It grows in these 40 s
    // (+2-5%), mostly not per distinct binary: churning copies of one build-id grows it 60% as
    // much, and the growth slows over minutes. A heap profile puts it in caches that fill as new
    // addresses are sampled (blazesym's lazily parsed DWARF units of long-lived files; the frame
    // caches, bounded at 2^15 addresses): docs/design.md, "The agent / Bounded memory".
    let anon: Vec<u64> = samples.iter().map(|s| s.1).collect();
    let anon_early = *anon[6..16].iter().max().unwrap();
    let anon_late = median(&anon[anon.len() - 10..]);
    eprintln!(
        "RssAnon {anon_early} KiB early (peak) -> {anon_late} KiB late (median): {:+.1}% \
         (goal <= +5%, not met yet)",
        (anon_late as f64 / anon_early as f64 - 1.0) * 100.0
    );
    let freed = status
        .lines()
        .find(|l| l.starts_with("memory"))
        .and_then(|l| l.split("freed ").nth(1))
        .expect("ctl status says what the symbolizer freed");
    let files: u64 = freed
        .split(", ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("files freed in {freed:?}"));
    assert!(files > 0, "{freed}");
    // Each binary lives about 40 ms: its samples wake the agent to capture its maps while it
    // lives (a sample of a process younger than the agent's CAPTURE_WAKE_MIN_AGE waits for a
    // later one), so nearly every sample is symbolized: those without maps, the main part of
    // "lost", stay few. (A rate cap on those wake-ups, tried instead, left a quarter of them out.)
    let counts: Vec<u64> = status
        .lines()
        .find(|l| l.starts_with("samples"))
        .expect("ctl status counts the samples")
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    let (taken, lost) = (counts[0], counts[counts.len() - 1]);
    assert!(
        taken >= 1000 && lost * 20 <= taken,
        "{lost} of {taken} samples lost (most of them without maps)"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// A port free on loopback now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The agent's `/metrics` under process churn keeps Prometheus's counter contract: no series of
/// a counter family is ever seen lower than before (what `resets()` counts). Exited processes
/// leave their series (or their share of `other`) through the frame that shows them exited, so
/// the exposition must see every frame of the accounting once: with a frame skipped, `other`
/// lost the processes that exited in it; with one seen twice, it counted them twice. Short
/// windows (1 s) put a window's read next to the loop's own reads.
#[test]
#[ignore = "needs root and BPF"]
fn agent_metrics_stay_monotonic_under_churn() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mono-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let port = free_port();
    let (store, sock, listen) = (
        tmp.join("store"),
        tmp.join("agent.sock"),
        format!("127.0.0.1:{port}"),
    );
    let (store_s, sock_s) = (store.to_str().unwrap(), sock.to_str().unwrap());
    let agent = Agent::start(&[
        "--window", "1s", "-F", "19", "--listen", &listen, "--store", store_s, "--socket", sock_s,
    ]);
    agent.wait_started(Duration::from_secs(60));

    // Short processes back to back, each its own pid: rows that exit in every frame.
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                Command::new("/bin/true").status().unwrap();
                n += 1;
            }
            n
        })
    };
    let mut last: std::collections::HashMap<String, f64> = std::collections::HashMap::new();
    let mut back = Vec::new();
    let mut over = Vec::new();
    let (mut scrapes, mut other_seen, mut missing, mut ended, mut short_seen) = (0, 0, 0, 0, 0);
    let mut prev_pids = std::collections::HashSet::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(150));
        let text = http_get(port, "/metrics");
        scrapes += 1;
        // Processes with a series of their own in the previous scrape that have none now.
        let own_pids = |t: &str| -> std::collections::HashSet<String> {
            t.lines()
                .filter(|l| {
                    l.starts_with("pkprof_cpu_seconds_total{pid=\"") && l.contains("kind=\"own\"")
                })
                .filter_map(|l| l.split('"').nth(1).map(str::to_string))
                .filter(|p| p != "other")
                .collect()
        };
        let now_pids = own_pids(&text);
        ended += prev_pids.difference(&now_pids).count();
        prev_pids = now_pids;
        // Everything the processes ran (own, pids and other) is at most the CPUs' task time of
        // the same frame: a process counted twice in `other` shows here.
        let sum = |prefix: &str, label: &str| -> f64 {
            (text.lines())
                .filter(|l| l.starts_with(prefix) && l.contains(label))
                .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
                .sum()
        };
        let own = sum("pkprof_cpu_seconds_total{", "kind=\"own\"");
        let task = sum("pkprof_cpu_mode_seconds_total{", "mode=\"task\"");
        if own > task * 1.01 + 0.01 {
            over.push(format!(
                "scrape {scrapes}: own {own:.6} s > task {task:.6} s"
            ));
        }
        // The processes born and gone between two reads: one row of their own, busy enough
        // under this churn to be exported.
        if text.contains("pid=\"short-lived\",comm=\"(short-lived)\"") {
            short_seen += 1;
        }
        if text.contains("pid=\"other\"") {
            other_seen += 1;
        } else if other_seen > 0 {
            missing += 1; // a scrape without it after the first frame
        }
        for l in text.lines() {
            let counter = l.starts_with("pkprof_cpu_seconds_total{")
                || l.starts_with("pkprof_wall_seconds_total{")
                || l.starts_with("pkprof_cpu_mode_seconds_total{");
            if !counter {
                continue;
            }
            let (k, v) = l.rsplit_once(' ').unwrap();
            let v: f64 = v.parse().unwrap();
            if let Some(&was) = last.get(k) {
                // The values are printed with nanosecond resolution.
                if v < was - 1e-9 {
                    back.push(format!("{k}: {was} -> {v}"));
                }
            }
            last.insert(k.to_string(), v);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let started = churn.join().unwrap();
    eprintln!(
        "{scrapes} scrapes ({other_seen} with other, {short_seen} with short-lived), {started} \
         processes run, {} series seen, \
         {ended} process series ended, {} went back, {} over the task time",
        last.len(),
        back.len(),
        over.len()
    );
    assert!(started >= 200, "only {started} processes ran");
    assert!(scrapes >= 60, "only {scrapes} scrapes");
    // The exposition was there, and processes left it while it was watched.
    assert!(
        other_seen >= 60 && missing == 0,
        "other in {other_seen} of {scrapes} scrapes, missing from {missing} after the first"
    );
    assert!(ended >= 10, "only {ended} process series ended");
    assert!(short_seen > 0, "no short-lived series in {scrapes} scrapes");
    assert!(over.is_empty(), "{}", over.join("\n"));
    assert!(
        back.is_empty(),
        "{} counter series went back:\n{}",
        back.len(),
        back.join("\n")
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Processes born and gone between two reads share the `(short-lived)` row (docs/design.md, "The
/// agent / Cost"), and no nanosecond of theirs is lost or counted twice: a shell starts
/// `/bin/true` 1,500 times; the kernel's rusage of the shell (its own time and its reaped
/// children's, from `wait4`) against the agent's dump of the same minutes: the shell's row, its
/// children's own rows (those a read met alive) and the `(short-lived)` row.
#[test]
#[ignore = "needs root and BPF"]
fn agent_short_lived_row_holds_the_churn() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("short-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let (store, sock) = (tmp.join("store"), tmp.join("agent.sock"));
    let (store_s, sock_s) = (store.to_str().unwrap(), sock.to_str().unwrap());
    let agent = Agent::start(&[
        "--window", "1s", "-F", "19", "--listen", "", "--store", store_s, "--socket", sock_s,
    ]);
    agent.wait_started(Duration::from_secs(60));
    let since = format!(
        "@{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    );
    let shell = Command::new("bash")
        .args(["-c", "for ((i = 0; i < 1500; i++)); do /bin/true; done"])
        .spawn()
        .expect("bash starts");
    let spid = shell.id();
    // SAFETY: rusage is plain data that wait4 fills; our own child, valid pointers.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let mut status = 0;
    let r = unsafe { libc::wait4(spid as i32, &mut status, 0, &mut ru) };
    assert_eq!(r, spid as i32, "wait4");
    std::mem::forget(shell);
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    let truth = tv(ru.ru_utime) + tv(ru.ru_stime);
    // The last children's final read (past their exit grace) and the window that holds it.
    std::thread::sleep(Duration::from_secs(3));
    let dump = tmp.join("dump.pkprof");
    let out = Command::new(pkprof_bin())
        .args([
            "ctl",
            "--socket",
            sock_s,
            "dump",
            "-o",
            dump.to_str().unwrap(),
        ])
        .args(["--since", &since])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ctl dump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = pkprof_profile::load(&dump).expect("the dump reads");
    let cpu = |q: &pkprof_profile::ProcessInfo| q.task_ns + q.hardirq_ns + q.softirq_ns;
    let of = |f: &dyn Fn(&pkprof_profile::ProcessInfo) -> bool| -> (u64, usize) {
        let rows: Vec<_> = p.processes.iter().filter(|q| f(q)).collect();
        (rows.iter().map(|q| cpu(q)).sum(), rows.len())
    };
    let (own, _) = of(&|q| q.pid == spid);
    let (children, alive_met) = of(&|q| q.ppid == spid);
    let (short, rows) = of(&|q| q.pid == pkprof_accounting::SHORT_LIVED_PID);
    let got = own + children + short;
    eprintln!(
        "rusage {truth} ns; dump: shell {own} ns, {alive_met} children with rows {children} ns, \
         (short-lived) {short} ns ({rows} row), sum {got} ns"
    );
    assert!(rows > 0, "no (short-lived) row in the dump");
    assert!(
        p.processes
            .iter()
            .filter(|q| q.pid == pkprof_accounting::SHORT_LIVED_PID)
            .all(|q| q.comm == "(short-lived)"),
        "the row's name"
    );
    // Nearly every child folds: a read meets a child alive only in its life (about a
    // millisecond); one in its exit grace is held back to the next read.
    assert!(
        short as f64 > 0.9 * truth.saturating_sub(own) as f64,
        "folded {short} ns of the children's {} ns",
        truth.saturating_sub(own)
    );
    // Nothing lost nor counted twice; the row may also hold other short processes of the machine
    // in those windows (a few ms).
    assert!(
        got as f64 >= truth as f64 * 0.98 && got as f64 <= truth as f64 * 1.02 + 20e6,
        "rows {got} ns against rusage {truth} ns"
    );
    drop(agent);
    let _ = std::fs::remove_dir_all(&tmp);
}
