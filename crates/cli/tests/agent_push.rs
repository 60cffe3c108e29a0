//! `pkprof agent --otlp` against a real OpenTelemetry Collector (root and BPF needed: run with
//! `cargo test -p pkprof --test agent_push -- --include-ignored --nocapture --test-threads=1`).
//!
//! - The agent samples the whole machine in 2 s windows while `hot_split` runs and a UDP receiver in
//!   a network namespace is fed over a veth (its NET_RX work runs in a hog's context); every closed
//!   window is pushed. What the collector's file exporter wrote (decoded with serde_json alone)
//!   holds the workload's process with its hot function, NET_RX samples in the receiver's resource
//!   labelled with it, and as many samples per process as `ctl dump` of the same windows.
//! - The collector killed mid-run: the agent's push queue stays within its bound, drops are counted
//!   in `ctl status` and `/metrics`, the agent's memory stays flat, and pushing resumes when the
//!   collector is back.

mod common;
#[path = "../../otlp/tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::push_scene::PushScene;
use common::*;
use pkprof_profile::{Bucket, Context};
use support::{Collector, Request, Val};

struct Agent {
    child: Child,
    socket: PathBuf,
}

impl Agent {
    fn start(name: &str, args: &[&str]) -> Agent {
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let socket = tmp.join(format!("agent-{name}.sock"));
        let child = Command::new(pkprof_bin())
            .args(["agent", "--no-store", "--listen", ""])
            .arg("--socket")
            .arg(&socket)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the agent starts");
        let agent = Agent { child, socket };
        wait_for(
            "the agent's control socket",
            Duration::from_secs(30),
            || agent.try_ctl(&["status"]),
        );
        agent
    }

    fn try_ctl(&self, args: &[&str]) -> Option<String> {
        let out = Command::new(pkprof_bin())
            .arg("ctl")
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn ctl(&self, args: &[&str]) -> String {
        self.try_ctl(args)
            .unwrap_or_else(|| panic!("pkprof ctl {args:?} failed"))
    }

    /// `ctl status`'s `windows N closed`.
    fn windows_closed(&self) -> u64 {
        let s = self.ctl(&["status"]);
        let line = s
            .lines()
            .find(|l| l.starts_with("windows"))
            .expect("windows line");
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// The agent's anonymous resident memory (`RssAnon`: what it allocates, the push queue
    /// among it); its total RSS also counts the file pages of the binaries it symbolizes, which
    /// swing by tens of MiB between windows.
    fn rss_kib(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let l = s.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
        l.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    fn stop(mut self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::SIGTERM,
        )
        .unwrap();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Samples per served pid (0: KERNEL and IDLE) over the requests.
fn pushed_per_pid(requests: &[Request]) -> BTreeMap<i64, i128> {
    let mut m = BTreeMap::new();
    for r in requests.iter().flat_map(|r| &r.resources) {
        if let Some(p) = r.profile("samples") {
            *m.entry(r.pid().unwrap_or(0)).or_insert(0) += p.total();
        }
    }
    m
}

#[test]
#[ignore = "needs root and BPF"]
fn agent_windows_reach_the_collector() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let collector = Collector::start(tmp, "agent");
    let scene = PushScene::start("apush", "7003", 60);
    let hot_bin = scene.hot_bin.clone();
    let (rpid, hpid, hotpid) = (scene.recv.pid(), scene.hog.pid(), scene.hot.pid());
    let agent = Agent::start(
        "push",
        &[
            "-F",
            "499",
            "--window",
            "2s",
            "--otlp",
            &collector.endpoint(),
        ],
    );
    scene.flood("3");
    // The dump closes the open window (pushed too) and merges every window kept in memory.
    let dump_file = tmp.join("agent-push-dump.pkprof");
    agent.ctl(&["dump", "-o", dump_file.to_str().unwrap()]);
    let closed = agent.windows_closed();
    let requests = collector.wait_for_requests(closed as usize, Duration::from_secs(20));
    let status = agent.ctl(&["status"]);
    eprintln!("{status}");
    agent.stop();
    scene.finish();
    let dump = pkprof_profile::load(&dump_file).expect("the dump reads back");
    assert_eq!(
        requests.len() as u64,
        closed,
        "one request per closed window"
    );
    assert!(
        (2..=6).contains(&closed),
        "{closed} windows (6 are kept in memory)"
    );

    // Per process, what was pushed is what the dump of the same windows holds.
    let mut dumped: BTreeMap<i64, i128> = BTreeMap::new();
    for g in &dump.samples {
        let pid = match g.bucket {
            Bucket::Kernel | Bucket::Idle => 0,
            _ => g.pid as i64,
        };
        *dumped.entry(pid).or_insert(0) += g.count as i128;
    }
    dumped.retain(|_, n| *n > 0);
    let pushed = pushed_per_pid(&requests);
    assert_eq!(pushed, dumped, "samples per process: pushed vs ctl dump");

    let all: Vec<&support::Resource> = requests.iter().flat_map(|r| &r.resources).collect();
    let of = |pid: u32| all.iter().filter(move |r| r.pid() == Some(pid as i64));
    // The workload's process, its binary, its hot function as leaf.
    let mut hot_samples = 0;
    for r in of(hotpid) {
        let name = r.attrs.get("process.executable.name").and_then(Val::str);
        assert_eq!(name, hot_bin.file_name().and_then(|n| n.to_str()));
        for s in &r
            .profile("samples")
            .map_or(&[][..], |p| &p.samples[..])
            .to_vec()
        {
            if s.frames
                .first()
                .is_some_and(|f| f.functions[0] == "hot_seventy")
            {
                hot_samples += s.values[0];
            }
        }
    }
    eprintln!("hot_seventy: {hot_samples} samples pushed");
    assert!(hot_samples >= 20, "{hot_samples}");
    // NET_RX samples in the receiver's resources, labelled with it, taken in others' context.
    let mut net_rx = 0;
    for r in of(rpid) {
        for s in r.profile("samples").map_or(&[][..], |p| &p.samples[..]) {
            let ctx = s.attrs.get("pkprof.context").and_then(Val::str);
            let current = s.attrs.get("pkprof.current_pid").and_then(Val::int);
            if ctx == Some("softirq:NET_RX") && current != Some(rpid as i64) {
                net_rx += s.values[0];
            }
        }
    }
    let dumped_rx: u64 = (dump.samples.iter())
        .filter(|s| s.pid == rpid && s.context == Context::SoftIrq(3) && s.current_pid != rpid)
        .map(|s| s.count)
        .sum();
    eprintln!("NET_RX for the receiver: {net_rx} pushed, {dumped_rx} dumped; hog pid {hpid}");
    assert!(net_rx >= 10, "{net_rx}");
    assert_eq!(net_rx as u64, dumped_rx);
    assert!(status.contains("0 dropped"), "{status}");
}

#[test]
#[ignore = "needs root and BPF"]
fn collector_down_mid_run() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let mut collector = Collector::start(tmp, "agent-down");
    let config = tmp.join("agent-down.toml");
    std::fs::write(
        &config,
        format!(
            "[push]\notlp_url = \"{}\"\nqueue = 2\n",
            collector.endpoint()
        ),
    )
    .unwrap();
    let agent = Agent::start(
        "down",
        &["--config", config.to_str().unwrap(), "--window", "1s"],
    );
    let t0 = Instant::now();
    // Five windows while the collector is up: the agent's own tables (symbols, processes) warm up.
    let first = collector.wait_for_requests(5, Duration::from_secs(30));
    assert!(first.len() >= 5, "{} pushed in 30 s", first.len());
    // Then eight more with the collector up: how the agent's memory moves anyway (new processes'
    // symbols, unwind tables), the baseline the outage is compared with.
    let rss_up_start = agent.rss_kib();
    let closed = agent.windows_closed();
    wait_for("8 windows closed", Duration::from_secs(30), || {
        (agent.windows_closed() >= closed + 8).then_some(())
    });
    let rss_up_end = agent.rss_kib();
    let first = collector.wait_for_requests(13, Duration::from_secs(10));
    collector.stop();
    let rss_start = agent.rss_kib();
    // Eight windows with nobody to take them: two queued, the rest dropped and counted.
    let closed_at_stop = agent.windows_closed();
    wait_for("8 windows closed", Duration::from_secs(30), || {
        (agent.windows_closed() >= closed_at_stop + 8).then_some(())
    });
    let status = agent.ctl(&["status"]);
    eprintln!("{status}");
    let push = status.lines().find(|l| l.starts_with("push")).unwrap();
    let num = |before: &str| -> u64 {
        let i = push
            .find(before)
            .unwrap_or_else(|| panic!("{before:?} in {push}"));
        push[..i]
            .split_whitespace()
            .last()
            .unwrap()
            .trim_start_matches('(')
            .parse()
            .unwrap()
    };
    let (queued, dropped) = (num(" queued"), num(" dropped"));
    assert!(queued <= 2, "{push}");
    assert!(dropped >= 5, "{push}");
    assert!(push.contains("failing"), "{push}");
    let rss_down = agent.rss_kib();
    let grew_up = rss_up_end.saturating_sub(rss_up_start);
    let grew_down = rss_down.saturating_sub(rss_start);
    eprintln!(
        "agent RSS: {rss_up_start} -> {rss_up_end} KiB over 8 windows pushed, {rss_start} -> \
         {rss_down} KiB over 8 windows with the collector down"
    );
    // The outage costs no more memory than 8 ordinary windows do, within 5% of the agent's size
    // (the queue holds two windows of some 20 KiB).
    assert!(
        grew_down <= grew_up + rss_start / 20,
        "RSS grew {grew_down} KiB with the collector down against {grew_up} KiB with it up \
         (from {rss_start} KiB)"
    );
    // Back: pushing resumes (the queued windows, then new ones).
    collector.restart();
    let sent_before = first.len();
    let mut back = Vec::new();
    wait_for("pushes after the restart", Duration::from_secs(30), || {
        back = collector.requests();
        (back.len() >= sent_before + 3).then_some(())
    });
    let status = agent.ctl(&["status"]);
    eprintln!("{status} after {:?}", t0.elapsed());
    let push = status.lines().find(|l| l.starts_with("push")).unwrap();
    assert!(!push.contains("failing"), "{push}");
    agent.stop();
}
