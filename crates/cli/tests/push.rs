//! `pkprof push` of a real recording to a real OpenTelemetry Collector (root and BPF needed for
//! the recording: run with `cargo test -p pkprof --test push -- --include-ignored --nocapture
//! --test-threads=1`; the collector is the one `scripts/setup.sh` builds).
//!
//! One recording of three workloads: `hot_split` (its hot function `hot_seventy`), a UDP receiver
//! in a network namespace fed by a sender over a veth (its NET_RX softirq work runs in other
//! tasks' context and is labelled with the receiver), and a hog on the CPU where the receive work
//! runs. What the collector's file exporter wrote is decoded with serde_json alone and checked
//! against the workloads' own PIDs and binary, and against the recorded profile's counts.

mod common;
#[path = "../../otlp/tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::push_scene::PushScene;
use common::*;
use pkprof_profile::{Context, Profile};
use support::{Collector, Resource, Val};

/// `pkprof record ARGS` to FILE; `started` runs once sampling runs.
fn record(file: &Path, args: &[&str], started: impl FnOnce()) -> Profile {
    let _ = std::fs::remove_file(file);
    let mut child = Command::new(pkprof_bin())
        .arg("record")
        .arg("-o")
        .arg(file)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pkprof starts");
    let rx = echo_stderr(&mut child, "pkprof: ");
    wait_for_line(
        &rx,
        "recording at",
        "pkprof record starts sampling within 30 s",
        Duration::from_secs(30),
    );
    started();
    assert!(child.wait().unwrap().success(), "pkprof record failed");
    pkprof_profile::load(file).expect("the profile reads back")
}

fn resource(resources: &[Resource], pid: u32) -> &Resource {
    (resources.iter().find(|r| r.pid() == Some(pid as i64)))
        .unwrap_or_else(|| panic!("no resource with process.pid {pid}"))
}

fn samples_total(r: &Resource, pred: impl Fn(&support::Sample) -> bool) -> i128 {
    let Some(p) = r.profile("samples") else {
        return 0;
    };
    (p.samples.iter().filter(|s| pred(s)))
        .map(|s| s.values[0] as i128)
        .sum()
}

#[test]
#[ignore = "needs root and BPF"]
fn recorded_workloads_arrive_at_the_collector() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let collector = Collector::start(tmp, "push");
    // The hot process runs past the recording (killed at the end): the record start-up takes a
    // few seconds.
    let scene = PushScene::start("push", "7002", 30);
    let hot_bin = scene.hot_bin.clone();
    let (rpid, hpid, hotpid) = (scene.recv.pid(), scene.hog.pid(), scene.hot.pid());
    let pids = format!("{rpid},{hpid},{hotpid}");
    let file = tmp.join("push.pkprof");
    let p = record(
        &file,
        &["-F", "999", "-p", &pids, "--duration", "3"],
        || scene.flood("2"),
    );
    scene.finish();

    let out = Command::new(pkprof_bin())
        .args(["push", "--otlp", &collector.endpoint()])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success());
    assert!(stdout.starts_with("pushed 1 profile(s)"), "{stdout}");
    let requests = collector.wait_for_requests(1, Duration::from_secs(10));
    assert_eq!(requests.len(), 1);
    let res = &requests[0].resources;

    // The workload's process, named after its binary, with its hot function as leaf.
    let r = resource(res, hotpid);
    let exe = hot_bin.to_str().unwrap();
    assert_eq!(
        r.attrs.get("process.executable.path").and_then(Val::str),
        Some(exe)
    );
    assert_eq!(
        r.attrs.get("process.executable.name").and_then(Val::str),
        hot_bin.file_name().and_then(|n| n.to_str())
    );
    let leaf_is = |s: &support::Sample, name: &str| {
        s.frames
            .first()
            .is_some_and(|f| f.functions.first().is_some_and(|n| n == name))
    };
    let hot_pushed = samples_total(r, |s| leaf_is(s, "hot_seventy"));
    let hot_recorded: u64 = (p.samples.iter().filter(|s| s.pid == hotpid))
        .filter(|s| {
            p.stack_frames(s.stack)
                .last()
                .is_some_and(|f| f.name == "hot_seventy")
        })
        .map(|s| s.count)
        .sum();
    eprintln!("hot_seventy: {hot_pushed} samples pushed, {hot_recorded} recorded");
    // 3 s at 999 Hz, 70% of a CPU-bound process: about two thousand (a few hundred on a busy machine).
    assert!(hot_pushed >= 50, "{hot_pushed}");
    assert_eq!(hot_pushed, hot_recorded as i128);
    let hot_frame = r
        .profile("samples")
        .unwrap()
        .samples
        .iter()
        .find(|s| leaf_is(s, "hot_seventy"));
    let f = &hot_frame.unwrap().frames[0];
    assert_eq!(
        f.attrs.get("profile.frame.type").and_then(Val::str),
        Some("native")
    );
    assert_eq!(f.mapping_file, exe);
    let build_id = f.mapping_attrs.get("process.executable.build_id.gnu");
    assert!(
        build_id.and_then(Val::str).is_some_and(|b| b.len() >= 16),
        "{f:?}"
    );

    // NET_RX samples in the receiver's resource, labelled with the receiver as served process
    // while another task was current.
    let r = resource(res, rpid);
    let net_rx = |s: &support::Sample| {
        s.attrs.get("pkprof.context").and_then(Val::str) == Some("softirq:NET_RX")
    };
    let rx_pushed = samples_total(r, net_rx);
    let rx_elsewhere = samples_total(r, |s| {
        net_rx(s)
            && s.attrs.get("pkprof.served_pid").and_then(Val::int) == Some(rpid as i64)
            && s.attrs.get("pkprof.current_pid").and_then(Val::int) != Some(rpid as i64)
            && s.frames
                .iter()
                .all(|f| f.attrs.get("profile.frame.type").and_then(Val::str) == Some("kernel"))
    });
    let rx_recorded: u64 = (p.samples.iter())
        .filter(|s| s.pid == rpid && s.context == Context::SoftIrq(3))
        .map(|s| s.count)
        .sum();
    eprintln!(
        "NET_RX: {rx_pushed} pushed ({rx_elsewhere} in others' context), {rx_recorded} recorded"
    );
    assert!(rx_elsewhere >= 20, "{rx_elsewhere}");
    assert_eq!(rx_pushed, rx_recorded as i128);
    let hog = resource(res, hpid);
    assert!(samples_total(hog, net_rx) * 20 <= rx_pushed);

    // Every process: its samples and its exact CPU time, as recorded.
    for info in p.processes.iter().filter(|i| i.pid != 0) {
        let recorded: u64 = (p.samples.iter())
            .filter(|s| {
                s.pid == info.pid
                    && !matches!(
                        s.bucket,
                        pkprof_profile::Bucket::Kernel | pkprof_profile::Bucket::Idle
                    )
            })
            .map(|s| s.count)
            .sum();
        let Some(r) = res.iter().find(|r| r.pid() == Some(info.pid as i64)) else {
            assert_eq!(recorded + info.task_ns + info.served_ns, 0, "{info:?}");
            continue;
        };
        assert_eq!(samples_total(r, |_| true), recorded as i128, "{info:?}");
        let cpu = r.profile("cpu").map_or(0, |c| c.total());
        assert_eq!(cpu, (info.task_ns + info.served_ns) as i128, "{info:?}");
    }
    let total: i128 = res.iter().map(|r| samples_total(r, |_| true)).sum();
    assert_eq!(total, p.total_samples() as i128);
}

#[test]
fn push_to_nobody_fails_with_one_line() {
    // A port nobody listens on: retried until --timeout, then one line and exit 1.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let file = tmp.join("push-nobody.pkprof");
    pkprof_profile::save(&pkprof_profile::synthetic::rich(), &file).unwrap();
    let url = format!("http://127.0.0.1:{}", support::free_port());
    let out = Command::new(pkprof_bin())
        .args(["push", "--otlp", &url, "--timeout", "1"])
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("pushed 0 of 1 profiles") && err.contains("refused"),
        "{err}"
    );
    // Bad input: not a URL, not a profile.
    for (args, want) in [
        (vec!["--otlp", "ftp://x"], "not an http:// URL"),
        (vec!["--otlp", &url, "--timeout", "0"], "--timeout"),
    ] {
        let out = Command::new(pkprof_bin())
            .arg("push")
            .args(&args)
            .arg(&file)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.lines().count() == 1 && err.contains(want), "{err}");
    }
    let out = Command::new(pkprof_bin())
        .args(["push", "--otlp", &url])
        .arg(tmp.join("no-such.pkprof"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("cannot read"),
        "{err}"
    );
}

#[test]
fn pushed_window_carries_its_cgroups_container_labels() {
    // A stored window as the agent writes it: samples with cgroup ids and the cgroup table with
    // their paths (docker scopes, ids the test chose). `pkprof push` of the file labels each
    // process's resource with the container id written in its cgroup's path.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let mut p = pkprof_profile::synthetic::synthetic(400, 20, 6, 7);
    let mut ids: Vec<u64> = p.samples.iter().map(|g| g.cgroup_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert!(ids.len() >= 2 && !ids.contains(&0), "{ids:?}");
    let container = |id: u64| format!("{:064x}", id * 0x9e37_79b9);
    p.cgroups = ids
        .iter()
        .map(|&id| pkprof_profile::CgroupInfo {
            id,
            path: format!("/system.slice/docker-{}.scope", container(id)),
        })
        .collect();
    let file = tmp.join("push-cgroups.pkprof");
    pkprof_profile::save(&p, &file).unwrap();
    let collector = Collector::start(tmp, "push-cgroups");
    let out = Command::new(pkprof_bin())
        .args(["push", "--otlp", &collector.endpoint()])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = collector.wait_for_requests(1, Duration::from_secs(10));
    let mut labelled = 0;
    for res in requests.iter().flat_map(|r| &r.resources) {
        let Some(pid) = res.pid() else { continue };
        let id = (p.samples.iter())
            .find(|g| i64::from(g.pid) == pid)
            .map(|g| g.cgroup_id)
            .unwrap();
        let got = res.attrs.get("container.id").and_then(Val::str);
        assert_eq!(got, Some(container(id).as_str()), "pid {pid}");
        assert_eq!(
            res.attrs.get("container.runtime.name").and_then(Val::str),
            Some("docker")
        );
        labelled += 1;
    }
    assert!(labelled >= 2, "{labelled} resources with a pid");
}
