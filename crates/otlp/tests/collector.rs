//! The pusher against a real OpenTelemetry Collector on loopback (no root needed; the collector is
//! the one `scripts/setup.sh` builds): what the collector's file exporter wrote is decoded with
//! serde_json alone and compared with the pkprof profiles that were pushed, sample group by
//! sample group; and a collector killed mid-run: the caller never waits, the queue stays within
//! its bounds, every window is sent, queued or counted as dropped, and pushing resumes when the
//! collector is back.

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use pkprof_otlp::{PushConfig, Pusher};
use pkprof_profile::{synthetic, Bucket, FrameKind, Profile};
use support::{Collector, Request, Val};

fn tmp() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// What identifies a sample group once pushed: served pid (0: KERNEL / IDLE), leaf-first
/// function names, and the labels (bucket, context, thread id, current pid).
type Key = (i64, Vec<String>, String, String, i64, i64);

/// OTLP's `int64` of a count (pushed values saturate).
fn sat(v: u64) -> i128 {
    v.min(i64::MAX as u64) as i128
}

fn expected(p: &Profile) -> HashMap<Key, i128> {
    let mut m = HashMap::new();
    for g in p.samples.iter().filter(|g| g.count > 0) {
        let pid = match g.bucket {
            Bucket::Kernel | Bucket::Idle => 0,
            _ => g.pid as i64,
        };
        let mut names: Vec<String> = p.stack_frames(g.stack).map(|f| f.name.clone()).collect();
        names.reverse();
        let bucket = format!("{:?}", g.bucket).to_lowercase();
        let context = match g.context {
            pkprof_profile::Context::SoftIrq(3) => "softirq:NET_RX".to_string(),
            c => format!("{c:?}"),
        };
        let key = (
            pid,
            names,
            bucket,
            context,
            g.tid as i64,
            g.current_pid as i64,
        );
        *m.entry(key).or_insert(0) += sat(g.count);
    }
    m
}

fn pushed(r: &Request) -> HashMap<Key, i128> {
    let mut m = HashMap::new();
    for res in &r.resources {
        let Some(prof) = res.profile("samples") else {
            continue;
        };
        for s in &prof.samples {
            let names = s.frames.iter().flat_map(|f| f.functions.clone()).collect();
            let get_str = |k: &str| s.attrs.get(k).and_then(Val::str).unwrap_or("").to_owned();
            let get_int = |k: &str| s.attrs.get(k).and_then(Val::int).unwrap_or(0);
            let context = get_str("pkprof.context");
            // Only NET_RX keeps its report name in `expected`; the others compare by variant.
            let context = match context.as_str() {
                "softirq:NET_RX" => context,
                "user" => "User".into(),
                "syscall" => "Syscall".into(),
                "kernel-task" => "KernelTask".into(),
                "kworker" => "Kworker".into(),
                "hardirq" => "HardIrq".into(),
                "idle" => "Idle".into(),
                other => match other.strip_prefix("softirq:") {
                    Some(name) => {
                        const NAMES: [&str; 10] = [
                            "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET",
                            "SCHED", "HRTIMER", "RCU",
                        ];
                        let v = NAMES.iter().position(|n| *n == name).map_or_else(
                            || name.trim_start_matches("vec").parse::<u8>().unwrap(),
                            |v| v as u8,
                        );
                        format!("SoftIrq({v})")
                    }
                    None => panic!("unknown context {other}"),
                },
            };
            let key = (
                res.pid().unwrap_or(0),
                names,
                get_str("pkprof.bucket"),
                context,
                get_int("thread.id"),
                get_int("pkprof.current_pid"),
            );
            assert_eq!(s.values.len(), 1);
            *m.entry(key).or_insert(0) += s.values[0] as i128;
        }
    }
    m
}

fn push_one(c: &Collector, p: &Profile) -> Request {
    let pusher = Pusher::start(PushConfig::new(&c.endpoint())).unwrap();
    // A cgroup's container labels and the machine's own labels, on the resources.
    let cgroup = p.samples.iter().map(|g| g.cgroup_id).find(|id| *id != 0);
    let mut opts = pkprof_otlp::ConvertOptions {
        resource_labels: vec![("deployment.environment.name".into(), "test".into())],
        ..Default::default()
    };
    if let Some(id) = cgroup {
        opts.cgroups.insert(
            id,
            pkprof_otlp::CgroupLabels {
                path: "/system.slice/docker-0123.scope".into(),
                container_id: Some("0123".into()),
                container_runtime: Some("docker".into()),
                systemd_unit: Some("docker-0123.scope".into()),
                ..Default::default()
            },
        );
    }
    pusher.push_with(p, &opts);
    let stats = pusher.shutdown(Duration::from_secs(20));
    assert_eq!(
        (stats.sent, stats.dropped, stats.failures),
        (1, 0, 0),
        "{stats:?}"
    );
    let mut r = c.wait_for_requests(1, Duration::from_secs(10));
    assert_eq!(r.len(), 1, "the collector wrote one request");
    r.remove(0)
}

/// Everything of the profile the collector should have kept, checked field by field.
fn check(p: &Profile, r: &Request) {
    assert_eq!(pushed(r), expected(p), "sample groups differ");
    let total: i128 = r
        .resources
        .iter()
        .filter_map(|res| res.profile("samples"))
        .map(|p| p.total())
        .sum();
    assert_eq!(total, p.samples.iter().map(|g| sat(g.count)).sum::<i128>());
    let mut in_container = 0;
    for res in &r.resources {
        assert_eq!(res.scope, "pkprof");
        let env = res.attrs.get("deployment.environment.name");
        assert_eq!(env.and_then(Val::str), Some("test"));
        // The resource of a process whose first sample with a cgroup is in the labelled one.
        let first_cgroup = res.pid().and_then(|pid| {
            (p.samples.iter())
                .filter(|g| g.count > 0 && g.pid as i64 == pid)
                .filter(|g| !matches!(g.bucket, Bucket::Kernel | Bucket::Idle))
                .map(|g| g.cgroup_id)
                .find(|id| *id != 0)
        });
        let labelled = p.samples.iter().map(|g| g.cgroup_id).find(|id| *id != 0);
        if first_cgroup.is_some() && first_cgroup == labelled {
            let id = res.attrs.get("container.id").and_then(Val::str);
            assert_eq!(id, Some("0123"));
            assert_eq!(
                res.attrs.get("container.runtime.name").and_then(Val::str),
                Some("docker")
            );
            in_container += 1;
        } else {
            assert!(!res.attrs.contains_key("container.id"));
        }
        assert_eq!(
            res.attrs.get("host.name").and_then(Val::str),
            Some(p.meta.hostname.as_str())
        );
        if let Some(s) = res.profile("samples") {
            assert_eq!(s.sample_type, ("samples".into(), "count".into()));
            assert_eq!(s.period_type, ("cpu".into(), "nanoseconds".into()));
            assert_eq!(s.period as u64, p.meta.period_ns);
            assert_eq!(s.time_unix_nano, p.meta.start_unix_ns);
        }
        let Some(pid) = res.pid() else { continue };
        let info = p.processes.iter().find(|i| i.pid as i64 == pid);
        // The exact CPU time: own time (maybe by mode) and served time, as the accounting had it.
        match (info, res.profile("cpu")) {
            (Some(info), Some(cpu)) => {
                assert_eq!(cpu.sample_type, ("cpu".into(), "nanoseconds".into()));
                let want = info.task_ns as i128 + info.served_ns as i128;
                if want < i64::MAX as i128 {
                    assert_eq!(cpu.total(), want);
                } else {
                    assert!(cpu.total() >= i64::MAX as i128);
                }
                assert!(cpu.samples.iter().all(|s| s.frames.is_empty()));
                if info.exe.starts_with('/') {
                    assert_eq!(
                        res.attrs.get("process.executable.path").and_then(Val::str),
                        Some(info.exe.as_str())
                    );
                    assert_eq!(
                        res.attrs.get("process.executable.name").and_then(Val::str),
                        info.exe.rsplit('/').next()
                    );
                }
            }
            (Some(info), None) => assert_eq!(info.task_ns + info.served_ns, 0),
            (None, cpu) => assert!(cpu.is_none()),
        }
    }
    assert!(in_container > 0);
    // Every frame's kind and build-id, by (module, name).
    let mut kinds: HashMap<(&str, &str), (&str, &str)> = HashMap::new();
    for f in &p.frames {
        let kind = match f.kind {
            FrameKind::User => "native",
            FrameKind::Kernel => "kernel",
            FrameKind::Syscall => "syscall",
            FrameKind::Truncated => "abort-marker",
            FrameKind::Python => "cpython",
        };
        kinds.insert(
            (f.module.as_str(), f.name.as_str()),
            (kind, f.build_id.as_str()),
        );
    }
    let mut frames = 0;
    for s in r
        .resources
        .iter()
        .flat_map(|r| &r.profiles)
        .flat_map(|p| &p.samples)
    {
        for f in &s.frames {
            // The location's kind is its outermost function's (the one others were inlined into).
            let outer = f.functions.last().unwrap();
            let (kind, build_id) = kinds[&(f.mapping_file.as_str(), outer.as_str())];
            assert_eq!(
                f.attrs.get("profile.frame.type").and_then(Val::str),
                Some(kind)
            );
            let got = f.mapping_attrs.get("process.executable.build_id.gnu");
            assert_eq!(got.and_then(Val::str).unwrap_or(""), build_id);
            frames += 1;
        }
    }
    assert!(frames > 0);
}

#[test]
fn every_sample_group_reaches_the_collector() {
    let c = Collector::start(tmp(), "groups");
    // Every variant (contexts, buckets, inlined frames, truncated stacks, build-ids, unicode)...
    let rich = synthetic::rich();
    check(&rich, &push_one(&c, &rich));
    let inlined = rich.frames.iter().filter(|f| f.inlined).count();
    assert!(inlined > 0, "rich() has inlined frames");
    // ... and volume: 5,000 sample groups over 800 stacks.
    let c = Collector::start(tmp(), "volume");
    let big = synthetic::synthetic(5_000, 800, 400, 7);
    check(&big, &push_one(&c, &big));
}

/// A window of the stream: a small synthetic profile whose start time names it.
fn window(i: u64) -> Profile {
    let mut p = synthetic::synthetic(300, 60, 80, i);
    p.meta.start_unix_ns = 1_000_000_000 * (1_000 + i);
    p.meta.end_unix_ns = p.meta.start_unix_ns + 10_000_000_000;
    p
}

fn window_of(r: &Request) -> u64 {
    let t = r
        .resources
        .iter()
        .flat_map(|r| &r.profiles)
        .map(|p| p.time_unix_nano)
        .next()
        .expect("a profile");
    t / 1_000_000_000 - 1_000
}

#[test]
fn collector_down_mid_run_drops_counted_and_push_resumes() {
    let mut c = Collector::start(tmp(), "down");
    let cap = 4;
    let mut config = PushConfig::new(&c.endpoint());
    config.queue_windows = cap;
    config.timeout = Duration::from_secs(2);
    config.backoff_min = Duration::from_millis(50);
    config.backoff_max = Duration::from_millis(400);
    let pusher = Pusher::start(config.clone()).unwrap();
    let mut slowest = Duration::ZERO;
    let mut push = |i: u64| {
        let w = window(i);
        let t = Instant::now();
        pusher.push(&w);
        slowest = slowest.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(40));
    };
    // Up: five windows go through.
    for i in 0..5 {
        push(i);
    }
    assert!(pusher.flush(Duration::from_secs(10)));
    assert_eq!(c.wait_for_requests(5, Duration::from_secs(10)).len(), 5);
    // Down: twenty more; the queue holds the newest `cap`, the rest are counted as dropped.
    c.stop();
    for i in 5..25 {
        push(i);
    }
    let s = pusher.stats();
    eprintln!("while down: {s:?}");
    assert_eq!(s.windows, 25);
    assert!(s.queued <= cap as u64, "{s:?}");
    assert!(s.queued_bytes <= config.queue_bytes as u64);
    assert_eq!(s.sent + s.dropped + s.queued, s.windows, "{s:?}");
    assert!(s.dropped >= 20 - cap as u64 - 1, "{s:?}");
    assert!(s.dropped_samples >= s.dropped * 300, "{s:?}");
    assert!(s.failures >= 1 && s.consecutive_failures >= 1, "{s:?}");
    assert!(s.last_error.is_some());
    let metrics = s.prometheus();
    assert!(metrics.contains(&format!(
        "\npkprof_agent_push_dropped_total {}\n",
        s.dropped
    )));
    assert!(s.status_line().contains("failing"), "{}", s.status_line());
    // Up again: what was queued arrives, and new windows too.
    c.restart();
    push(25);
    assert!(
        pusher.flush(Duration::from_secs(20)),
        "{:?}",
        pusher.stats()
    );
    let s = pusher.stats();
    eprintln!("after restart: {s:?}, slowest push {slowest:?}");
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(s.sent + s.dropped, 26, "{s:?}");
    let got: Vec<u64> = c
        .wait_for_requests(s.sent as usize, Duration::from_secs(10))
        .iter()
        .map(window_of)
        .collect();
    // The first five, then the newest windows of the outage (oldest dropped first), then 25.
    let mut want: Vec<u64> = (0..5).collect();
    want.extend(26 - (s.sent - 5)..26);
    assert_eq!(got, want);
    // The caller never waited on the network (encoding a window takes a few ms).
    assert!(
        slowest < Duration::from_millis(500),
        "a push took {slowest:?}"
    );
}

/// A server that answers each request with the next of `answers` (status, body), then closes.
fn fake_collector(answers: Vec<(u16, &'static [u8])>) -> (String, std::thread::JoinHandle<usize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let t = std::thread::spawn(move || {
        let mut served = 0;
        for (status, body) in answers {
            let (mut s, _) = listener.accept().unwrap();
            // Read the request: headers, then Content-Length bytes of body.
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let body_len = loop {
                let n = s.read(&mut chunk).unwrap();
                assert!(n > 0, "request cut short");
                buf.extend_from_slice(&chunk[..n]);
                if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                    assert!(head.contains("content-encoding: gzip"), "{head}");
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map(|v| v.trim().parse().unwrap())
                        .expect("content-length");
                    break end + 4 + len;
                }
            };
            while buf.len() < body_len {
                let n = s.read(&mut chunk).unwrap();
                buf.extend_from_slice(&chunk[..n]);
            }
            let head = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            s.write_all(head.as_bytes()).unwrap();
            s.write_all(body).unwrap();
            served += 1;
        }
        served
    });
    (url, t)
}

#[test]
fn collector_answering_5xx_garbage_or_4xx() {
    // 503: retried; 200 with a body that is no protobuf: sent (nothing said rejected); 400: the
    // collector will never take it: dropped, counted as rejected, not retried.
    let (url, server) = fake_collector(vec![
        (503, b"busy"),
        (200, b"\xff\xff\xff garbage"),
        (400, b"bad request"),
    ]);
    let mut config = PushConfig::new(&url);
    config.backoff_min = Duration::from_millis(20);
    let pusher = Pusher::start(config).unwrap();
    pusher.push(&window(1));
    assert!(pusher.flush(Duration::from_secs(10)));
    pusher.push(&window(2));
    assert!(pusher.flush(Duration::from_secs(10)));
    let s = pusher.shutdown(Duration::from_secs(1));
    assert_eq!(server.join().unwrap(), 3);
    eprintln!("{s:?}\n{}", s.status_line());
    assert_eq!(
        (s.windows, s.sent, s.failures, s.rejected, s.dropped),
        (2, 1, 1, 1, 0)
    );
    assert!(s
        .last_error
        .as_deref()
        .unwrap()
        .contains("HTTP 400 bad request"));
    let metrics = s.prometheus();
    assert!(
        metrics.contains("\npkprof_agent_push_rejected_total 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("\npkprof_agent_push_failures_total 1\n"),
        "{metrics}"
    );
}

#[test]
fn queue_bytes_bound_memory_while_nobody_answers() {
    let size = pkprof_otlp::encode(&window(0), &Default::default()).len();
    let mut config = PushConfig::new(&format!("http://127.0.0.1:{}", support::free_port()));
    config.queue_windows = 100;
    config.queue_bytes = size * 5 / 2;
    config.backoff_min = Duration::from_millis(20);
    let pusher = Pusher::start(config.clone()).unwrap();
    for i in 0..30 {
        pusher.push(&window(i));
        let s = pusher.stats();
        // The queue's bytes, plus the one window the sender holds while it tries.
        assert!(
            s.queued_bytes as usize <= config.queue_bytes + 2 * size,
            "{s:?}"
        );
    }
    // A window larger than the whole queue is dropped at once.
    pusher.push(&synthetic::synthetic(20_000, 2_000, 1_000, 3));
    let s = pusher.shutdown(Duration::ZERO);
    eprintln!("{s:?}");
    assert_eq!((s.windows, s.sent, s.queued), (31, 0, 0));
    assert_eq!(s.dropped, 31);
    assert!(s.failures >= 1);
}
