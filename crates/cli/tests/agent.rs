//! `pkprof agent` end to end (docs/design.md, "The agent"), against ground truth that is not
//! pkprof's: each workload's CPU time from the kernel's own rusage (wait4), and cgroups the test
//! creates with the path shapes of Kubernetes/containerd, docker and a systemd service.
//!
//! One agent with 1 s windows: workloads in those cgroups; `ctl dump` of the windows merged has
//! each workload's exact CPU time (within 2%) and its samples (within 20% of rusage / period);
//! `report --store --by container|unit` names the containers and the unit; `ctl stop` stops
//! sampling but not the accounting; `ctl status` and `/metrics` answer; a second agent on the
//! socket and a non-root client are refused with one line; SIGTERM closes the last window and
//! removes the socket; `kill -9` leaves a store that reads and a socket the next agent replaces.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{build_workload, pkprof_bin, run_with_timeout, Agent};

const ID_K8S: &str = "4f1b9c2e8a7d6b5c4f1b9c2e8a7d6b5c4f1b9c2e8a7d6b5c4f1b9c2e8a7d6b5c";
const ID_DOCKER: &str = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d";
const POD_UID: &str = "8a3c2e1f_7b6d_4c5e_9f0a_1b2c3d4e5f60";
const HZ: u64 = 199;

fn cgroup2_root() -> PathBuf {
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    info.lines()
        .find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            post.starts_with("cgroup2 ")
                .then(|| PathBuf::from(pre.split_whitespace().nth(4).unwrap()))
        })
        .expect("a cgroup2 mount")
}

/// The test's cgroup tree, removed (leaves first) on drop.
struct Tree(Vec<PathBuf>);

impl Drop for Tree {
    fn drop(&mut self) {
        for d in self.0.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Creates `rel` (and its parents) under `base`, remembering each for removal.
fn mkcg(tree: &mut Tree, base: &Path, rel: &str) -> PathBuf {
    let mut p = base.to_path_buf();
    for part in rel.split('/') {
        p = p.join(part);
        if !p.exists() {
            std::fs::create_dir(&p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
            tree.0.push(p.clone());
        }
    }
    p
}

fn pkprof(args: &[&str]) -> Output {
    run_with_timeout(
        Command::new(pkprof_bin()).args(args),
        Duration::from_secs(60),
    )
}

fn ok(args: &[&str]) -> String {
    let o = pkprof(args);
    assert!(
        o.status.success(),
        "pkprof {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Starts `bin args` inside cgroup `cg` (moved in before exec).
fn spawn_in(bin: &Path, args: &[&str], cg: &Path) -> Child {
    let procs = cg.join("cgroup.procs");
    let mut c = Command::new(bin);
    c.args(args).stdout(Stdio::null());
    // SAFETY: the pre-exec closure only writes our PID to a file with std (open/write/close).
    unsafe {
        c.pre_exec(move || std::fs::write(&procs, std::process::id().to_string()));
    }
    c.spawn().expect("workload starts")
}

/// Waits for `child` and returns its CPU time (user + system, ns) by the kernel's rusage.
fn reap_cpu_ns(child: Child) -> u64 {
    let pid = child.id() as i32;
    // SAFETY: rusage is plain data that wait4 fills.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let mut status = 0;
    // SAFETY: wait4 on our own child, valid pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "wait4");
    std::mem::forget(child); // reaped here
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn samples_of(p: &pkprof_profile::Profile, pid: u32) -> u64 {
    p.samples
        .iter()
        .filter(|s| s.pid == pid)
        .map(|s| s.count)
        .sum()
}

/// A process's exact CPU as its rusage counts it: its own time plus the interrupt work that ran
/// on top of it (the scheduler's runtime includes that without IRQ_TIME_ACCOUNTING; own time
/// alone read 0.3-0.4% under, the timer ticks of a 1-2 s process).
fn cpu_ns_of(p: &pkprof_profile::Profile, pid: u32) -> u64 {
    p.processes
        .iter()
        .filter(|q| q.pid == pid)
        .map(|q| q.task_ns + q.hardirq_ns + q.softirq_ns)
        .sum()
}

#[test]
#[ignore = "needs root and BPF"]
fn agent_windows_store_control_and_containers() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("agent-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let store = tmp.join("store");
    let sock = tmp.join("run/agent.sock");
    let (store_s, sock_s) = (store.to_str().unwrap(), sock.to_str().unwrap());

    let root = cgroup2_root();
    let mut tree = Tree(Vec::new());
    let base = format!("pkprof-agent-test-{}", std::process::id());
    let pod = format!(
        "{base}/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD_UID}.slice"
    );
    let k8s = mkcg(
        &mut tree,
        &root,
        &format!("{pod}/cri-containerd-{ID_K8S}.scope"),
    );
    let docker = mkcg(
        &mut tree,
        &root,
        &format!("{base}/system.slice/docker-{ID_DOCKER}.scope"),
    );
    let unit = mkcg(
        &mut tree,
        &root,
        &format!("{base}/system.slice/pkprof-test.service"),
    );

    let hz = HZ.to_string();
    let agent_args = [
        "--window",
        "1s",
        "--store",
        store_s,
        "--socket",
        sock_s,
        "--listen",
        "127.0.0.1:0",
        "-F",
        &hz,
    ];
    let agent = Agent::start(&agent_args);
    let metrics_addr = agent
        .wait_started(Duration::from_secs(30))
        .expect("a metrics address");
    let start = Instant::now();
    let unix_s = || pkprof_recording::meta::unix_ns() as f64 / 1e9;
    let started_at = unix_s();

    // A second agent on the same socket: one line, refused before loading anything.
    let o = pkprof(&["agent", "--no-store", "--socket", sock_s, "--listen", ""]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("another agent is running"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // A client that is not root: refused (a copy of pkprof it can run: the build tree may sit
    // under a directory only root can enter).
    let public = std::env::temp_dir().join(format!("pkprof-agent-nobody-{}", std::process::id()));
    std::fs::copy(pkprof_bin(), &public).expect("copy pkprof");
    std::fs::set_permissions(&public, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = run_with_timeout(
        Command::new(&public)
            .args(["ctl", "--socket", sock_s, "status"])
            .uid(65534)
            .gid(65534),
        Duration::from_secs(10),
    );
    let _ = std::fs::remove_file(&public);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("only root"), "{err}");

    let bin = build_workload("hot_split");
    let w = [
        spawn_in(&bin, &["2"], &k8s),
        spawn_in(&bin, &["2"], &docker),
        spawn_in(&bin, &["2"], &unit),
    ];
    let pids: Vec<u32> = w.iter().map(Child::id).collect();
    let truth: Vec<u64> = w.into_iter().map(reap_cpu_ns).collect();

    let dump = tmp.join("dump.pkprof");
    ok(&[
        "ctl",
        "--socket",
        sock_s,
        "dump",
        "-o",
        dump.to_str().unwrap(),
        "--since",
        "5m",
    ]);
    let p = pkprof_profile::load(&dump).expect("the dump reads");
    let period_ns = 1_000_000_000 / HZ;
    // Samples the ring buffer dropped (a debug build on a busy machine) are counted: the bound
    // widens by their share, so a loss the profile states does not fail the test.
    let dropped = p.meta.lost.ring_buffer_full as f64 / p.total_samples().max(1) as f64;
    for (pid, cpu) in pids.iter().zip(&truth) {
        let exact = cpu_ns_of(&p, *pid);
        let sampled = samples_of(&p, *pid) * period_ns;
        eprintln!(
            "pid {pid}: rusage {cpu} ns, accounting {exact} ns, samples x period {sampled} ns \
             (ring drops {:.1}%)",
            dropped * 100.0
        );
        assert!(common::rel_err(exact, *cpu) < 0.005, "exact CPU of {pid}");
        assert!(
            common::rel_err(sampled, *cpu) < 0.20 + dropped,
            "samples of {pid}"
        );
    }
    // The agent samples every process's code but its own (docs/design.md, "The agent / Bounded
    // memory"): not one sample of it running (interrupt work on top of it, and kworker items
    // it queued, serve others and are sampled), while its exact CPU is accounted as any other
    // process's.
    let me = agent.pid();
    let own_samples: u64 = (p.samples.iter())
        .filter(|s| {
            use pkprof_profile::Context::{KernelTask, Syscall, User};
            s.current_pid == me && matches!(s.context, User | Syscall | KernelTask)
        })
        .map(|s| s.count)
        .sum();
    let own_cpu = cpu_ns_of(&p, me);
    eprintln!("the agent (pid {me}): {own_samples} samples, {own_cpu} ns of CPU");
    assert_eq!(own_samples, 0, "the agent sampled itself");
    assert!(own_cpu > 0, "the agent's own CPU is not in its windows");

    let by = |key: &str| {
        ok(&[
            "report", "--store", store_s, "--since", "5m", "--dcpi", "--by", key,
        ])
    };
    let containers = by("container");
    let row = |text: &str, name: &str| -> u64 {
        text.lines()
            .find(|l| l.trim_end().ends_with(name))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no row {name} in\n{text}"))
    };
    // Each container's row holds its workload's samples taken in the cgroup the test made (its id
    // is the directory's inode; a sample between fork and the move into it is in the test's own
    // cgroup), and the store's windows are the dump's.
    let in_cg = |pid: u32, dir: &Path| -> u64 {
        let id = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(dir).unwrap());
        (p.samples.iter())
            .filter(|s| s.pid == pid && s.cgroup_id == id)
            .map(|s| s.count)
            .sum()
    };
    assert!(in_cg(pids[0], &k8s) * 10 >= samples_of(&p, pids[0]) * 9);
    assert_eq!(
        row(&containers, &format!("containerd:{}", &ID_K8S[..12])),
        in_cg(pids[0], &k8s)
    );
    assert_eq!(
        row(&containers, &format!("docker:{}", &ID_DOCKER[..12])),
        in_cg(pids[1], &docker)
    );
    let units = by("unit");
    assert_eq!(row(&units, "pkprof-test.service"), in_cg(pids[2], &unit));
    let k8s_path = p
        .cgroups
        .iter()
        .find(|c| c.path.ends_with(&format!("cri-containerd-{ID_K8S}.scope")))
        .expect("the pod's cgroup path in the profile");
    let l = pkprof_profile::CgroupLabels::parse(&k8s_path.path);
    assert_eq!(
        (l.pod_uid.as_deref(), l.qos),
        (Some(POD_UID.replace('_', "-").as_str()), Some("burstable"))
    );

    // Sampling off: no samples, the exact accounting goes on.
    ok(&["ctl", "--socket", sock_s, "stop"]);
    let off_since = format!("@{}", unix_s());
    let quiet = spawn_in(&bin, &["1"], &unit);
    let qpid = quiet.id();
    let qcpu = reap_cpu_ns(quiet);
    let dump2 = tmp.join("dump2.pkprof");
    ok(&[
        "ctl",
        "--socket",
        sock_s,
        "dump",
        "-o",
        dump2.to_str().unwrap(),
        "--since",
        &off_since,
    ]);
    let p2 = pkprof_profile::load(&dump2).unwrap();
    assert_eq!(samples_of(&p2, qpid), 0, "sampled while stopped");
    let qtask = cpu_ns_of(&p2, qpid);
    eprintln!("pid {qpid} (sampling stopped): rusage {qcpu} ns, accounting {qtask} ns");
    assert!(
        common::rel_err(qtask, qcpu) < 0.005,
        "accounting while stopped: {qtask} ns in the dump ({}..{} unix ns: {:?}), rusage {qcpu} ns",
        p2.meta.start_unix_ns,
        p2.meta.end_unix_ns,
        p2.processes
            .iter()
            .filter(|q| q.pid == qpid)
            .collect::<Vec<_>>()
    );
    ok(&["ctl", "--socket", sock_s, "start"]);

    let status = ok(&["ctl", "--socket", sock_s, "status"]);
    for want in [
        "uptime",
        "sampling     on",
        "windows",
        "store        ",
        "own CPU",
        "BPF",
    ] {
        assert!(status.contains(want), "{want} in\n{status}");
    }
    let metrics = run_with_timeout(
        Command::new("curl").args(["-s", &format!("http://{metrics_addr}/metrics")]),
        Duration::from_secs(10),
    );
    let metrics = String::from_utf8_lossy(&metrics.stdout);
    assert!(metrics.contains("pkprof_agent_windows_total "), "{metrics}");
    // The accounting's series too (as `top --listen` serves them).
    assert!(
        metrics.contains("pkprof_cpu_seconds_total{pid="),
        "{metrics}"
    );

    // diff of two ranges of the store: the busy part against the rest.
    let a = format!("@{started_at}..{off_since}");
    let b = format!("{off_since}..now");
    let d = ok(&["diff", "--store", store_s, "--range", &a, "--range", &b]);
    assert!(d.contains("hot_seventy"), "{d}");

    // SIGTERM: the open window is closed, the socket removed, exit 0.
    let before = pkprof_agent::store::windows_in(&store, 0, u64::MAX)
        .unwrap()
        .len();
    agent.signal(libc::SIGTERM);
    let mut agent = agent;
    let status = agent.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!sock.exists(), "the socket outlived the agent");
    let after = pkprof_agent::store::windows_in(&store, 0, u64::MAX)
        .unwrap()
        .len();
    assert!(
        after > before,
        "SIGTERM wrote no last window ({before} -> {after})"
    );
    eprintln!("agent ran {:?}, {after} windows", start.elapsed());

    // kill -9 mid-run: the store still reads, and the next agent replaces the stale socket.
    let a2 = Agent::start(&agent_args);
    a2.wait_started(Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(2500));
    a2.signal(libc::SIGKILL);
    drop(a2);
    assert!(sock.exists(), "a killed agent cannot remove its socket");
    ok(&["report", "--store", store_s, "--since", "5m", "--flat"]);
    // The next agent, from a configuration file: SIGHUP re-reads it (a bad file keeps the
    // running configuration, said in one line).
    let conf = tmp.join("agent.toml");
    std::fs::write(&conf, "window = \"1s\"\n").unwrap();
    let conf_s = conf.to_str().unwrap();
    let a3 = Agent::start(&[
        "--config", conf_s, "--store", store_s, "--socket", sock_s, "--listen", "",
    ]);
    a3.wait_started(Duration::from_secs(30));
    ok(&["ctl", "--socket", sock_s, "flush"]);
    let hup = |a: &Agent, want: &str| {
        a.signal(libc::SIGHUP);
        let line = a
            .lines
            .recv_timeout(Duration::from_secs(10))
            .expect("an answer to SIGHUP");
        assert!(line.contains(want), "{line}");
    };
    std::fs::write(&conf, "window = \"2s\"\n").unwrap();
    hup(&a3, "configuration re-read");
    std::fs::write(&conf, "window = \"2 weeks\"\n").unwrap();
    hup(&a3, "configuration not changed: window");
    let status = ok(&["ctl", "--socket", sock_s, "status"]);
    assert!(status.contains("windows of 2 s"), "{status}");
    drop(a3);
    drop(tree);
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Bad configuration and store arguments: one line naming what is wrong, a non-zero exit, nothing
/// loaded (no root needed: each is refused before the BPF programs would load).
#[test]
fn bad_agent_and_store_arguments_are_one_line() {
    let tmp =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("agent-bad-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let bad_toml = tmp.join("bad.toml");
    std::fs::write(
        &bad_toml,
        "window = \"10s\"\n[store]\nmax_age = \"forever\"\n",
    )
    .unwrap();
    let none = tmp.join("none");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["agent", "--window", "0.1s"],
            "window: must be 0.5 s to 1 h",
        ),
        (
            vec!["agent", "--config", none.to_str().unwrap()],
            "cannot read",
        ),
        (
            vec!["agent", "--config", bad_toml.to_str().unwrap()],
            "store.max_age: \"forever\" is not a duration",
        ),
        (vec!["agent", "--listen", "0.0.0.0:9464"], "is not loopback"),
        (
            vec!["report", "--since", "1h", "x.data"],
            "give --store DIR",
        ),
        (
            vec!["report", "--store", none.to_str().unwrap(), "--since", "1h"],
            "no store at",
        ),
        (
            vec![
                "diff",
                "--store",
                tmp.to_str().unwrap(),
                "--range",
                "1h..now",
            ],
            "give --range FROM..TO twice",
        ),
        (
            vec![
                "diff",
                "--store",
                tmp.to_str().unwrap(),
                "--range",
                "1h..2h",
                "--range",
                "1h..now",
            ],
            "FROM is after TO",
        ),
        (
            vec!["ctl", "--socket", none.to_str().unwrap(), "status"],
            "no agent is listening",
        ),
    ];
    for (args, want) in cases {
        let o = pkprof(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
