//! The agent's soak, short (issue 13: the hour's soak is `bench/agent-soak.sh 3600`, its figures
//! in the README): `pkprof agent` with its defaults (19 Hz, 10 s windows, a store) for five
//! minutes under process, thread and socket churn, the bench's: a loop starting `/bin/true`
//! back to back, 20 threads started every half second, and short loopback TCP connections. Its
//! resident memory by the kernel (`VmRSS` and `RssAnon` of /proc/PID/status, every 5 s after a
//! minute of churn) must stay flat: the median of the last quarter at most 10% above the first
//! quarter's (docs/design.md, "The agent / Bounded memory"). A shrinking agent passes: the goal
//! is a ceiling, not a floor. `PKPROF_SOAK_SECS` sets the length.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{cmd, median, status_kib, Agent, Proc};

/// Seconds of churn before the first sample.
const WARM_SECS: u64 = 60;

/// The churn, as `bench/agent-soak.sh` runs it: a shell loop of `/bin/true`, and a python3
/// starting 20 threads every half second and making 20 loopback TCP connections. In processes of
/// their own: the agent would otherwise sample this test binary, whose debug information it
/// reads in place (its pages would count in the agent's RSS as more of them are read). Killed
/// and reaped on drop, a failing assertion included.
fn churn() -> Vec<Proc> {
    vec![
        Proc::spawn(cmd(
            Path::new("bash"),
            &["-c", "while :; do /bin/true; done"],
        )),
        Proc::spawn(cmd(Path::new("python3"), &["-c", CHURN_PY])),
    ]
}

const CHURN_PY: &str = include_str!("../../../bench/agent-soak-churn.py");

#[test]
#[ignore = "needs root and BPF"]
fn agent_memory_stays_flat_under_churn() {
    let secs: u64 = std::env::var("PKPROF_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("soak-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let (store, sock) = (tmp.join("store"), tmp.join("agent.sock"));
    let agent = Agent::start(&[
        "--listen",
        "",
        "--store",
        store.to_str().unwrap(),
        "--socket",
        sock.to_str().unwrap(),
    ]);
    agent.wait_started(Duration::from_secs(60));
    let pid = agent.pid();
    let load = churn();
    // Past start-up, the first windows' closes (the kernel's symbols read once) and the first
    // filling of the caches: the symbolizer meets the churn's code (bash's, python's: their
    // symbols and DWARF parsed lazily, the file pages it reads in place counted in VmRSS) as
    // samples land on it.
    std::thread::sleep(Duration::from_secs(WARM_SECS));
    let (mut rss, mut anon) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    while rss.is_empty() || t0.elapsed() < Duration::from_secs(secs) {
        rss.push(status_kib(pid, "VmRSS:"));
        anon.push(status_kib(pid, "RssAnon:"));
        std::thread::sleep(Duration::from_secs(5));
    }
    drop(load);
    let windows = std::fs::read_dir(&store)
        .map(|d| d.filter(|e| e.is_ok()).count())
        .unwrap_or(0);
    let q = (rss.len() / 4).max(1);
    let growth = |v: &[u64]| {
        let (first, last) = (median(&v[..q]), median(&v[v.len() - q..]));
        (first, last, (last as f64 - first as f64) / first as f64)
    };
    let (rf, rl, rg) = growth(&rss);
    let (af, al, ag) = growth(&anon);
    eprintln!(
        "soak {secs} s, {} samples, {windows} store entries: VmRSS {rf} -> {rl} KiB ({:+.1}%, \
         peak {}), RssAnon {af} -> {al} KiB ({:+.1}%, peak {}), first to last quarter",
        rss.len(),
        rg * 100.0,
        rss.iter().max().unwrap(),
        ag * 100.0,
        anon.iter().max().unwrap()
    );
    let mib = |v: &[u64]| {
        v.iter()
            .map(|k| format!("{:.1}", *k as f64 / 1024.0))
            .collect::<Vec<_>>()
            .join(" ")
    };
    eprintln!("VmRSS MiB every 5 s: {}", mib(&rss));
    eprintln!("RssAnon MiB every 5 s: {}", mib(&anon));
    assert!(windows > 0, "no window stored");
    assert!(rg <= 0.10, "VmRSS grew {:+.1}%", rg * 100.0);
    assert!(ag <= 0.10, "RssAnon grew {:+.1}%", ag * 100.0);
    drop(agent);
    let _ = std::fs::remove_dir_all(&tmp);
}
