//! The server chain against the workload's own request counts (root and BPF needed):
//! `cargo test -p pkprof --test server_billing -- --include-ignored --nocapture --test-threads=1`
//!
//! `ipc_server` (tests/workloads/ipc_server.c) runs a server and two clients, A and B, that send it
//! requests at about 3:1 over unix sockets, pipes or loopback TCP; each request costs the server
//! the same fixed spin, and the server counts the requests it served per client. So the truth is:
//! the server's CPU splits between A and B as their request counts do (within 5%), nearly all of
//! it (>= 90%) is billed to one of them, every request read is one item on its client, and nothing
//! flows back (the clients' own time is not billed to the server).

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use serde_json::Value;

const SEC: Duration = Duration::from_secs(1);
/// The served slot of the server chain (`CHAIN_NAMES`: net, block, workq, server).
const SERVER: usize = 3;

fn task_ns(row: &Value) -> u64 {
    row["total"]["task_ns"].as_u64().unwrap()
}

/// Runs `ipc_server KIND MODE 2` under `pkprof top` and checks the bill against its counts.
fn check(kind: &str, mode: &str) {
    let bin = build_workload("ipc_server");
    let mut w = Proc::spawn(cmd(&bin, &[kind, mode, "2", "1000", "3700"]));
    let ids: Vec<u32> = w
        .expect("ready", 20 * SEC)
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let (srv, a, b) = (ids[0], ids[1], ids[2]);
    let pids = format!("{srv},{a},{b}");
    // The setup (forks, connections) is over before pkprof attaches, and the server then waits
    // for "go": its time since attach is the run's (an idle process has no row in a frame).
    let (mut top, first) = Top::start_with_first_frame(&["-d", "0.5", "--server", "-p", &pids]);
    let srv_base = row_of(&first, srv).map_or(0, task_ns);

    w.send_line("go");
    w.expect("start", 10 * SEC);
    let end = w.expect("end", 60 * SEC);
    let (na, nb): (u64, u64) = (end[0].parse().unwrap(), end[1].parse().unwrap());
    // The server thread's own CPU clock per client, request read to reply written: what each
    // client's requests really cost it (a request that finds the server idle costs more than one
    // that queued behind another, so the counts alone are not the cost).
    let (cpu_a, cpu_b): (u64, u64) = (end[2].parse().unwrap(), end[3].parse().unwrap());
    w.wait(10 * SEC);
    let (_, last): (Value, HashMap<u64, Value>) = frames_until(&mut top, 20 * SEC, |f| {
        row_of(f, srv).is_none_or(|r| r["exited"] == true)
    });
    top.stop();

    let row = |pid: u32| {
        last.get(&(pid as u64))
            .unwrap_or_else(|| panic!("no row for pid {pid}"))
    };
    let server_ns = task_ns(row(srv)) - srv_base;
    let billed_a = total(row(a), "served_ns", SERVER);
    let billed_b = total(row(b), "served_ns", SERVER);
    let items_a = total(row(a), "served_items", SERVER);
    let items_b = total(row(b), "served_items", SERVER);
    let back = total(row(srv), "served_ns", SERVER);
    let billed = billed_a + billed_b;
    let ratio = billed_a as f64 / billed_b as f64;
    let counts = na as f64 / nb as f64;
    let truth = cpu_a as f64 / cpu_b as f64;
    eprintln!(
        "{kind} {mode}: served A {na} B {nb} ({counts:.3}), server CPU clock A {:.1} ms B {:.1} ms \
         (truth {truth:.3}); billed A {:.1} ms B {:.1} ms \
         (ratio {ratio:.3}, error {:+.2}%), {:.1}% of the server's {:.1} ms; items A {items_a} \
         B {items_b}; billed back to the server {:.3} ms",
        cpu_a as f64 / 1e6,
        cpu_b as f64 / 1e6,
        billed_a as f64 / 1e6,
        billed_b as f64 / 1e6,
        (ratio / truth - 1.0) * 100.0,
        billed as f64 * 100.0 / server_ns as f64,
        server_ns as f64 / 1e6,
        back as f64 / 1e6,
    );
    assert!(na > 100 && nb > 30, "too few requests to judge: {na} {nb}");
    assert!(
        (ratio / truth - 1.0).abs() <= 0.05,
        "billed A:B {ratio:.3} against the server's CPU clock {truth:.3} (requests {counts:.3})"
    );
    assert!(
        billed as f64 >= 0.9 * server_ns as f64,
        "billed {billed} ns of the server's {server_ns}"
    );
    assert!(
        billed <= server_ns,
        "billed {billed} ns, more than the server ran ({server_ns})"
    );
    // One item per request read: the server's own count. A read whose mark is missed is rare
    // (seen: one in about a thousand, cause not found yet): 0.5%, at least one.
    for (items, n) in [(items_a, na), (items_b, nb)] {
        assert!(
            items.abs_diff(n) <= (n / 200).max(1),
            "{items} items against {n} requests served"
        );
    }
    // The clients read the server's replies, but a reply written for a client is that client's:
    // nothing of the clients' time is billed to the server (only the start gate's byte).
    assert!(
        (back as f64) < 0.01 * server_ns as f64,
        "{back} ns billed back to the server"
    );
}

#[test]
#[ignore = "needs root and BPF"]
fn unix_socket_server_is_billed_by_request_counts() {
    check("unix", "single");
}

#[test]
#[ignore = "needs root and BPF"]
fn pipe_server_is_billed_by_request_counts() {
    check("pipe", "single");
}

#[test]
#[ignore = "needs root and BPF"]
fn loopback_tcp_server_is_billed_by_request_counts() {
    check("tcp", "single");
}

#[test]
#[ignore = "needs root and BPF"]
fn pool_of_two_workers_is_billed_by_request_counts() {
    check("unix", "pool");
}

/// Client B exits halfway: what the server did for it stays with it (its last row's totals).
#[test]
#[ignore = "needs root and BPF"]
fn client_exiting_midway_keeps_its_share() {
    check("pipe", "exit");
}

/// Samples per served pid whose stack has a frame named `func`.
fn samples_in(p: &pkprof_profile::Profile, func: &str) -> HashMap<u32, u64> {
    let mut by_pid = HashMap::new();
    for s in &p.samples {
        if p.stack_frames(s.stack).any(|f| f.name == func) {
            *by_pid.entry(s.pid).or_default() += s.count;
        }
    }
    by_pid
}

/// `record --by client`: the server's samples (its request loop, `worker`) carry the client it
/// was serving, in the proportion of the requests it served each (within sampling noise).
#[test]
#[ignore = "needs root and BPF"]
fn record_by_client_labels_the_servers_samples_with_its_clients() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let bin = build_workload("ipc_server");
    let mut w = Proc::spawn(cmd(&bin, &["unix", "single", "3", "1000", "3700"]));
    let ids: Vec<u32> = w
        .expect("ready", 20 * SEC)
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let (srv, a, b) = (ids[0], ids[1], ids[2]);
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("server_by_client.pkprof");
    let _ = std::fs::remove_file(&out);
    let pids = format!("{srv},{a},{b}");
    let mut rec = Command::new(pkprof_bin())
        .args(["record", "--by", "client", "-F", "999", "--duration", "5"])
        .args(["-p", &pids, "-o"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pkprof starts");
    let mut err = BufReader::new(rec.stderr.take().unwrap()).lines();
    loop {
        let line = err.next().expect("pkprof record starts sampling").unwrap();
        if line.contains("recording at") {
            break;
        }
        eprintln!("pkprof: {line}");
    }
    w.send_line("go");
    let end = w.expect("end", 60 * SEC);
    let (na, nb): (u64, u64) = (end[0].parse().unwrap(), end[1].parse().unwrap());
    // The server thread's own CPU clock per client, request read to reply written: what each
    // client's requests really cost it (a request that finds the server idle costs more than one
    // that queued behind another, so the counts alone are not the cost).
    let (cpu_a, cpu_b): (u64, u64) = (end[2].parse().unwrap(), end[3].parse().unwrap());
    w.wait(10 * SEC);
    assert!(rec.wait().expect("pkprof exits").success());
    let p = pkprof_profile::load(&out).expect("the profile reads back");
    let by = samples_in(&p, "worker");
    let (sa, sb, ss) = (
        by.get(&a).copied().unwrap_or(0),
        by.get(&b).copied().unwrap_or(0),
        by.get(&srv).copied().unwrap_or(0),
    );
    // A's share of the labelled samples against its share of the server's CPU clock: a binomial
    // draw of sa + sb samples, so within three standard deviations (and 3% for what the clock
    // misses: the poll and read before each request).
    let n = (sa + sb) as f64;
    let share = sa as f64 / n;
    let truth = cpu_a as f64 / (cpu_a + cpu_b) as f64;
    let sigma = (truth * (1.0 - truth) / n).sqrt();
    eprintln!(
        "record --by client: served A {na} B {nb}, server CPU clock A's share {truth:.3}; `worker` samples \
         labelled A {sa} B {sb} (A's share {share:.3}, sigma {sigma:.3}), server {ss}"
    );
    assert!(sa + sb >= 100, "too few samples to judge: {by:?}");
    assert!(
        (share - truth).abs() <= 3.0 * sigma + 0.03,
        "A's share of the samples {share:.3} against its share of the server's CPU clock {truth:.3}"
    );
    // Only the time between a wakeup and the read of the request stays the server's own.
    assert!(
        ss * 10 < sa + sb,
        "{ss} of the server's request-loop samples kept its own label"
    );
}

/// `record --by client -- CMD`: pkprof starts CMD through a gate pipe (the child reads pkprof's
/// byte, then execs), and the exec ends that mark: CMD's samples are its own, not pkprof's. The
/// truth is the kernel's: the command is the only process that runs `hot_seventy`, so every such
/// sample on its CPU serves it.
#[test]
#[ignore = "needs root and BPF"]
fn record_by_client_bills_a_started_command_to_itself() {
    let bin = build_workload("hot_split");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("server_by_client_cmd.pkprof");
    let _ = std::fs::remove_file(&out);
    let o = run_with_timeout(
        std::process::Command::new(pkprof_bin())
            .args(["record", "--by", "client", "-F", "499", "-o"])
            .arg(&out)
            .arg("--")
            .arg(&bin)
            .arg("1"),
        60 * SEC,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p = pkprof_profile::load(&out).expect("the profile reads back");
    let (mut own, mut other) = (0u64, 0u64);
    for s in &p.samples {
        if p.stack_frames(s.stack).any(|f| f.name == "hot_seventy") {
            if s.pid == s.current_pid {
                own += s.count;
            } else {
                other += s.count;
            }
        }
    }
    eprintln!("hot_seventy samples: the command's own {own}, billed to another process {other}");
    assert!(own >= 100, "too few samples to judge: {own} + {other}");
    assert!(
        other * 100 <= own,
        "{other} of the command's samples were billed to another process (own {own})"
    );
}
